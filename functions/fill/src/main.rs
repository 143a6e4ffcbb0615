//! The `fill` Lambda function: the pull-through cache's one way out. Read
//! and blob invoke it asynchronously with one fill (a version list, a
//! version's signed checksums, an archive, a module version); it fetches
//! from the upstream through the SSRF-safe origin client, verifies, stores
//! create-only, and records the outcome where the waiting request looks.

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    tfreg_lambda::fill::run_fill().await
}
