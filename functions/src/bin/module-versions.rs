//! Lambda function `module-versions`: GET /v1/modules/:namespace/:name/:system/versions.

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    tfreg::aws::lambda::run(tfreg::router::Endpoint::ModuleVersions).await
}
