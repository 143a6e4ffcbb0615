//! Lambda function `discovery`: GET /.well-known/terraform.json.

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    tfreg::aws::lambda::run(tfreg::router::Endpoint::Discovery).await
}
