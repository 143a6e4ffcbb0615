//! The registry as one service, shared by every entry point: `tfreg serve`
//! hands its router to hyper, each Lambda function calls [`App::handle`]
//! under `lambda_http::run` (tfreg-lambda's `response`), tests call it
//! in-process. A request goes through the [`crate::pipeline`], one tower
//! layer per job: its id, metrics, its log line, HEAD bodies, the audit
//! record, errors to HTTP (here and only here), header limits, routing, the
//! UI session, authorisation, the panic guard, and the handler group that
//! serves it (the groups this process was given: [`Served`]).

use std::sync::Arc;

use tower::ServiceExt as _;

use crate::body::{Request, Response};
use crate::groups::Served;
use crate::pipeline;
use crate::registry::Registry;

pub use crate::pipeline::discovery_of;
pub use crate::pipeline::facts::Caller;
pub use crate::pipeline::limits::{MAX_HEADER_BYTES, MAX_HEADERS};
pub use crate::pipeline::request_id::REQUEST_ID_HEADER;

/// A registry and the groups it serves: one process's whole answer.
#[derive(Clone)]
pub struct App {
    pub registry: Arc<Registry>,
    pub served: Served,
}

impl App {
    pub fn new(registry: Arc<Registry>, served: Served) -> Self {
        Self { registry, served }
    }

    /// The service for hyper, `lambda_http` and in-process tests.
    pub fn router(self) -> axum::Router {
        let app = Arc::new(self);
        axum::Router::new().fallback(move |req: Request| {
            let app = app.clone();
            async move { app.handle(req).await }
        })
    }

    /// Route and answer one request from the network, logging one line with
    /// route, status and latency (and an audit line for a change of state).
    pub async fn handle(&self, req: Request) -> Response {
        self.handle_as(req, Caller::Network).await
    }

    /// [`App::handle`], for `caller`: the same routing, handlers, errors and
    /// audit for the CLI's local commands as for HTTP requests.
    pub async fn handle_as(&self, mut req: Request, caller: Caller) -> Response {
        req.extensions_mut().insert(caller);
        let service = pipeline::service(self.registry.clone(), self.served.clone());
        match service.oneshot(req).await {
            Ok(resp) => resp,
            Err(never) => match never {},
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use async_trait::async_trait;
    use http::StatusCode;
    use tfreg_model::address::Hostname;
    use tfreg_model::router::ReadRoute;
    use tfreg_store::NoBlobs;
    use tfreg_store::sqlite::SqliteStore;

    use super::*;
    use crate::body::Body;
    use crate::error::Error;
    use crate::groups::{Call, Handler};

    /// A read group that panics on one provider and answers the others.
    struct PanicsOn(&'static str);

    #[async_trait]
    impl Handler<ReadRoute> for PanicsOn {
        async fn handle(
            &self,
            _: &Registry,
            route: ReadRoute,
            _: Call<'_>,
            _: Body,
        ) -> Result<Response, Error> {
            if let ReadRoute::ProviderVersions { provider } = &route
                && provider.r#type == self.0
            {
                panic!("on purpose: {}", provider);
            }
            Ok(crate::body::empty(StatusCode::NO_CONTENT))
        }
    }

    async fn app() -> App {
        let mut config = crate::Config::new(Hostname::parse("registry.test").unwrap());
        config.anonymous_reads = true;
        let registry = Registry::with_stored_signer(
            Arc::new(SqliteStore::in_memory().unwrap()),
            Arc::new(NoBlobs),
            config,
        );
        App::new(Arc::new(registry), Served::new().read(PanicsOn("boom")))
    }

    async fn get(app: &App, path: &str) -> (StatusCode, String) {
        let req = http::Request::get(path).body(Body::empty()).unwrap();
        let resp = app.handle(req).await;
        let status = resp.status();
        let body = axum::body::to_bytes(resp.into_body(), 4096).await.unwrap();
        (status, String::from_utf8_lossy(&body).into_owned())
    }

    #[tokio::test]
    async fn a_panicking_handler_is_a_500_and_the_next_request_is_served() {
        let app = app().await;
        let (status, body) = get(&app, "/v1/providers/acme/boom/versions").await;
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
        let body: serde_json::Value = serde_json::from_str(&body).unwrap();
        let told = body["errors"][0].as_str().unwrap();
        assert!(told.starts_with("internal error (request id "), "{told}");
        assert!(
            !told.contains("on purpose"),
            "the panic's message stays in the log: {told}"
        );
        let (status, _) = get(&app, "/v1/providers/acme/fine/versions").await;
        assert_eq!(status, StatusCode::NO_CONTENT);
    }

    #[tokio::test]
    async fn the_request_id_is_kept_out_of_http2_header_compression() {
        let app = app().await;
        let req = http::Request::get("/.well-known/terraform.json")
            .body(Body::empty())
            .unwrap();
        let resp = app.handle(req).await;
        assert!(resp.headers()[REQUEST_ID_HEADER].is_sensitive());
    }

    #[tokio::test]
    async fn a_group_this_process_was_not_given_is_a_404() {
        let app = app().await;
        let (status, body) = get(
            &app,
            "/v1/blobs/archives/0123456789abcdef0123456789abcdef/x.zip",
        )
        .await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert!(body.contains("this process does not serve blob"), "{body}");
        let (status, _) = get(&app, "/.well-known/terraform.json").await;
        assert_eq!(status, StatusCode::OK, "discovery needs no group");
    }
}
