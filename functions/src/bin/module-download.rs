//! Lambda function `module-download`: GET /v1/modules/:namespace/:name/:system/:version/download.

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    tfreg::aws::lambda::run(tfreg::router::Endpoint::ModuleDownload).await
}
