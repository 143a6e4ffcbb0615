//! For one proof only, never deployed: a Lambda function built from the real
//! pipeline and runtime (`tfreg_lambda::run_reader`, as the read functions) whose read group panics on
//! the provider `probe/panic` and answers every other read with a 404.
//! `infra/check-cargo-lambda` builds it with `cargo lambda build --release`,
//! exactly as the functions are built (the release profile's panic
//! strategy, and what cargo lambda would force), and `tfreg-bench lambda
//! --check` invokes it twice in one sandbox: the panicking request is a 500,
//! and the same process then answers the next request.

use async_trait::async_trait;
use http::StatusCode;
use tfreg_http::body::{Body, Response, empty};
use tfreg_http::{Call, Error, Handler, Registry, Served};
use tfreg_model::router::ReadRoute;

struct PanicsOnProbe;

#[async_trait]
impl Handler<ReadRoute> for PanicsOnProbe {
    async fn handle(
        &self,
        _: &Registry,
        route: ReadRoute,
        _: Call<'_>,
        _: Body,
    ) -> Result<Response, Error> {
        if let ReadRoute::ProviderVersions { provider } = &route
            && provider.to_string() == "probe/panic"
        {
            panic!("a request that panics on purpose");
        }
        Ok(empty(StatusCode::NOT_FOUND))
    }
}

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    tfreg_lambda::run_reader(Served::new().read(PanicsOnProbe)).await
}
