//! Lambda function `provider-download`: GET /v1/providers/:namespace/:type/:version/download/:os/:arch.

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    tfreg::aws::lambda::run(tfreg::router::Endpoint::ProviderDownload).await
}
