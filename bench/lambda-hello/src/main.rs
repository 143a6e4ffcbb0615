//! The baseline of `tfreg-bench lambda`: the smallest `lambda_http` function
//! (one fixed JSON answer), built with the same release profile as tfreg's
//! functions, so sizes and cold starts are compared against what the Lambda
//! runtime itself costs.

use lambda_http::{Body, Error, Request, Response, service_fn};

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_http::run(service_fn(|_request: Request| async {
        let response = Response::builder()
            .status(200)
            .header("content-type", "application/json")
            .body(Body::from("{\"hello\":\"world\"}"))?;
        Ok::<_, Error>(response)
    }))
    .await
}
