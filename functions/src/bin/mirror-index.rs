//! Lambda function `mirror-index`: GET /v1/mirror/:hostname/:namespace/:type/index.json.

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    tfreg::aws::lambda::run(tfreg::router::Endpoint::MirrorIndex).await
}
