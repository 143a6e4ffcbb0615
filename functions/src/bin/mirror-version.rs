//! Lambda function `mirror-version`: GET /v1/mirror/:hostname/:namespace/:type/:version.json.

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    tfreg::aws::lambda::run(tfreg::router::Endpoint::MirrorVersion).await
}
