//! The binary every function of template.yaml runs: `TFREG_ENDPOINT` names the
//! endpoint it serves. One binary for all ten functions means `sam build`
//! compiles and links once (SAM shares a build between functions with the same
//! code and build metadata) instead of once per function.

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    tfreg::aws::lambda::run_configured().await
}
