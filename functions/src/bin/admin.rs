//! Lambda function `admin`: /v1/admin/...: tokens, namespace signing keys, deprecate, yank, delete, audit.

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    tfreg::aws::lambda::run(tfreg::router::Endpoint::Admin).await
}
