//! The `blob` Lambda function: archives behind the registry's signed URLs: HEAD answered from S3, GET redirected to a fresh presigned S3 URL.

use tfreg_http::Served;
use tfreg_lambda::Secret;

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    tfreg_lambda::run_with_archives(Served::new().blob(tfreg_read::Blob), Secret::ReadWhenNeeded)
        .await
}
