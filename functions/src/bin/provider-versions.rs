//! Lambda function `provider-versions`: GET /v1/providers/:namespace/:type/versions.

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    tfreg::aws::lambda::run(tfreg::router::Endpoint::ProviderVersions).await
}
