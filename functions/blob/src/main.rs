//! The `blob` Lambda function: archives behind the registry's signed URLs: HEAD answered from S3, GET redirected to a fresh presigned S3 URL (with `TFREG_ARCHIVE_DELIVERY=cloudfront`, to a CloudFront signed URL: then only the pull-through cache's files come here, the key pair's private key read once at init).

use tfreg_http::Served;
use tfreg_lambda::Secret;

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    tfreg_lambda::run_with_archives(Served::new().blob(tfreg_read::Blob), Secret::ReadWhenNeeded)
        .await
}
