//! The `ui` Lambda function: the web UI's pages. Reads only the table.

use tfreg_http::Served;

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    tfreg_lambda::run(Served::new().ui(tfreg_ui::Ui)).await
}
