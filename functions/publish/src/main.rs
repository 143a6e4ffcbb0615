//! The `publish` Lambda function: publishing: begin, then complete, verified before anything is visible. Makes the URL signing secret at its first cold start.

use tfreg_http::Served;
use tfreg_lambda::Secret;

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    tfreg_lambda::run_with_archives(
        Served::new().publish(tfreg_publish::Publish),
        Secret::CreateAtInit,
    )
    .await
}
