//! Lambda function `ui`: /ui/...: the web UI's pages, sign-in and static files.

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    tfreg::aws::lambda::run(tfreg::router::Endpoint::Ui).await
}
