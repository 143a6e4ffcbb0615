//! The `read` Lambda function: discovery, the provider, module and mirror protocols: seven functions of the template (one per endpoint) run this binary. Reads only the table; no archives. With `TFREG_ARCHIVE_DELIVERY=cloudfront` its archive URLs are CloudFront signed URLs, the key pair's private key read once at init.

use tfreg_http::Served;

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    tfreg_lambda::run_reader(Served::new().read(tfreg_read::Read)).await
}
