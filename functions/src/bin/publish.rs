//! Lambda function `publish`: POST /v1/publish/...: begin (presigned PUT URLs) and complete (verify, then publish).

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    tfreg::aws::lambda::run(tfreg::router::Endpoint::Publish).await
}
