//! Lambda function `blob`: GET|HEAD /v1/blobs/*key: answers HEAD itself, redirects GET to a fresh presigned S3 URL.

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    tfreg::aws::lambda::run(tfreg::router::Endpoint::Blob).await
}
