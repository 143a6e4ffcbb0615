//! The `admin` Lambda function: the admin API: tokens, namespace keys, deprecate, yank, delete (with its archives), the audit trail.

use tfreg_http::Served;
use tfreg_lambda::Secret;

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    tfreg_lambda::run_with_archives(
        Served::new().admin(tfreg_admin::Admin),
        Secret::ReadWhenNeeded,
    )
    .await
}
