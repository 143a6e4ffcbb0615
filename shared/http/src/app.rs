//! The registry as one service, shared by every entry point: `tfreg serve`
//! hands its router to hyper, each Lambda function calls [`App::handle`]
//! under `lambda_http::run` (tfreg-lambda's `response`), tests call it
//! in-process. Here a request is routed, authorised and dispatched to
//! the handler group that serves it (the groups this process was given:
//! [`Served`]); errors become HTTP here and only here; one log line per
//! request, and one audit record per change of state.

use std::sync::Arc;
use std::time::Instant;

use http::{HeaderMap, HeaderValue, Method, StatusCode};
use tfreg_model::audit::{Event, Outcome};
use tfreg_model::protocol::Discovery;
use tfreg_model::router::{Endpoint, Route, UiRoute, is_ui_path, route};
use tfreg_model::token::Principal;
use tfreg_store::catalog::audit;

use crate::auth::{self, Credential};
use crate::body::{
    Body, Request, Response, authorization, error_response, error_text, json, redirect,
};
use crate::error::Error;
use crate::groups::{AuditAs, Call, Identified, Note, Served};
use crate::registry::Registry;
use crate::session;

/// Most header lines a request may have (real clients send about ten).
pub const MAX_HEADERS: usize = 100;
/// Largest total size of a request's header names and values. Terraform sends
/// a few hundred bytes; a bearer token is under 100.
pub const MAX_HEADER_BYTES: usize = 32 * 1024;

/// Set once this process has answered a request: the first is a cold start.
static SERVED_ONE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The response header that names a request's log line.
pub const REQUEST_ID_HEADER: &str = "x-request-id";

/// Refuse a request with too many or too large headers (431).
fn check_headers(headers: &HeaderMap) -> Result<(), Error> {
    if headers.len() > MAX_HEADERS {
        return Err(Error::HeadersTooLarge(format!(
            "{} header lines; at most {MAX_HEADERS} are accepted",
            headers.len()
        )));
    }
    let bytes: usize = headers
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len())
        .sum();
    if bytes > MAX_HEADER_BYTES {
        return Err(Error::HeadersTooLarge(format!(
            "{bytes} bytes of headers; at most {MAX_HEADER_BYTES} are accepted"
        )));
    }
    Ok(())
}

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
    pub async fn handle_as(&self, req: Request, caller: Caller) -> Response {
        handle(&self.registry, &self.served, req, caller).await
    }
}

/// Who is calling: someone over the network (authorised by their token), or
/// the operator (the `tfreg` CLI working on a local data dir or the AWS
/// stores directly, which already has every right).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Caller {
    Network,
    Operator,
}

async fn handle(registry: &Registry, served: &Served, req: Request, caller: Caller) -> Response {
    let started = Instant::now();
    let request_id = format!("{:016x}", rand::random::<u64>());
    let (parts, body) = req.into_parts();
    let path = parts.uri.path();
    let routed = check_headers(&parts.headers)
        .and_then(|()| route(&parts.method, path).map_err(Error::from));
    let endpoint = routed.as_ref().ok().map(Route::endpoint);
    // A sign-in's browser steps answer errors as a plain page.
    let plain = matches!(&routed, Ok(Route::Auth(a)) if a.in_browser());
    let audited = routed
        .as_ref()
        .ok()
        .map(|r| (r.audit_action(), r.audit_target()));
    // Authorisation, once, for every route: the same code in every mode.
    let mut principal = None;
    // A UI path's answers are pages, where this process serves the UI.
    let pages = served.ui.as_ref().filter(|_| is_ui_path(path));
    // A browser's session (the UI's pages), else the Authorization header.
    let session = match (&routed, authorization(&parts.headers)) {
        (Ok(Route::Ui(_)), None) => ui_session(registry, &parts.headers).await,
        _ => None,
    };
    let result = match routed {
        Ok(r) => {
            let (who, verdict) = match caller {
                Caller::Operator => (Principal::Operator, Ok(())),
                Caller::Network => {
                    let access = r.access(&registry.config.hostname);
                    let credential = match &session {
                        Some(session) => Credential::Session(Some(session)),
                        None => Credential::Authorization(authorization(&parts.headers)),
                    };
                    auth::authorize(registry, credential, access).await
                }
            };
            // Who asked is kept even when refused (a valid token without
            // the right): the audit trail records the refused change.
            let call = Call {
                method: &parts.method,
                query: parts.uri.query(),
                headers: &parts.headers,
                principal: &who,
                session: session.as_ref(),
            };
            let result = match verdict {
                Ok(()) => guarded(dispatch(registry, served, r, call, body)).await,
                Err(e) => Err(e),
            };
            principal = Some(who);
            result
        }
        Err(e) => Err(e),
    };
    let (mut resp, error) = match (result, pages) {
        (Ok(resp), _) => (resp, None),
        (Err(e), Some(ui)) => {
            let who = principal.clone().unwrap_or(Principal::Anonymous);
            let call = Call {
                method: &parts.method,
                query: parts.uri.query(),
                headers: &parts.headers,
                principal: &who,
                session: session.as_ref(),
            };
            (
                ui.error_page(registry, &e, &request_id, &call, path),
                Some(e),
            )
        }
        (Err(e), None) if plain => (error_text(&e, &request_id), Some(e)),
        (Err(e), None) => (error_response(&e, &request_id), Some(e)),
    };
    if let Some(ui) = pages {
        ui.secure(resp.headers_mut());
    }
    if let Ok(mut id) = HeaderValue::from_str(&request_id) {
        // Never indexed by HTTP/2's header compression: a value unique to
        // each response would only fill the connection's table, evicting what
        // repeats, and lengthen the search every later response makes in it.
        id.set_sensitive(true);
        resp.headers_mut().insert(REQUEST_ID_HEADER, id);
    }
    if parts.method == Method::HEAD {
        // Keep the headers (Content-Length included), drop the body.
        *resp.body_mut() = Body::empty();
    }
    let status = resp.status().as_u16();
    let audited = audited.and_then(|(action, target)| {
        Some((
            action.or(resp.extensions().get::<AuditAs>().map(|a| a.0))?,
            target,
        ))
    });
    if let Some((action, target)) = audited {
        // A refusal may quote the request (serde names an unknown value as
        // sent): the audit, which others read, keeps it escaped.
        let detail = match &error {
            Some(e) => Some(e.public_message(&request_id)),
            None => resp.extensions().get::<Note>().map(|n| n.0.clone()),
        }
        .map(|d| tfreg_model::text::escaped(&d).into_owned());
        let principal = principal.unwrap_or(Principal::Anonymous);
        let identified = resp.extensions().get::<Identified>().map(|i| i.0.clone());
        let keep = principal.identified() || identified.is_some();
        let event = Event {
            at: registry.now(),
            actor: identified.unwrap_or_else(|| principal.actor()),
            action: action.to_string(),
            target,
            outcome: Outcome::of_status(status),
            status,
            detail,
            request_id: request_id.clone(),
        };
        audit::record(registry.items.as_ref(), &event, keep).await;
    }
    // To the microsecond: full precision would print 16 digits on every line.
    let latency_ms = (started.elapsed().as_secs_f64() * 1e6).round() / 1000.0;
    let endpoint = endpoint.map(Endpoint::name).unwrap_or("none");
    registry.metrics.request(&crate::metrics::RequestRecord {
        endpoint,
        status,
        latency: started.elapsed(),
        cold_start: !SERVED_ONE.swap(true, std::sync::atomic::Ordering::Relaxed),
    });
    let method = &parts.method;
    match error {
        // Our fault or the store's: the detail the client did not get.
        Some(e) if status >= 500 => {
            tracing::error!(%method, path, %endpoint, status, latency_ms, %request_id, error = %e, "request")
        }
        _ => tracing::info!(%method, path, %endpoint, status, latency_ms, %request_id, "request"),
    }
    resp
}

/// The request's UI session, if its cookie is MAC'd by this registry and
/// unexpired (no signing secret yet: no session can exist). Whether it was
/// signed out of is `auth`'s to check.
async fn ui_session(registry: &Registry, headers: &HeaderMap) -> Option<session::Session> {
    session::cookie(headers, session::COOKIE)?;
    let signer = registry.signer_if_ready().await.ok()??;
    session::read(signer, headers, registry.now())
}

/// The route's group, if this process serves it; discovery and the UI's
/// root need none.
async fn dispatch(
    registry: &Registry,
    served: &Served,
    route: Route,
    call: Call<'_>,
    body: Body,
) -> Result<Response, Error> {
    let endpoint = route.endpoint();
    let missing = || {
        Error::not_found(format!(
            "no such endpoint here: this process does not serve {}",
            endpoint.name()
        ))
    };
    match route {
        Route::Discovery => Ok(discovery_of(&registry.config)),
        Route::Ui(UiRoute::Root) => Ok(redirect(&UiRoute::Home.path())),
        Route::Read(read) => {
            let group = served.read.as_ref().ok_or_else(missing)?;
            group.handle(registry, read, call, body).await
        }
        Route::Blob(key) => {
            let group = served.blob.as_ref().ok_or_else(missing)?;
            group.handle(registry, key, call, body).await
        }
        Route::Publish(publish) => {
            let group = served.publish.as_ref().ok_or_else(missing)?;
            group.handle(registry, publish, call, body).await
        }
        Route::Admin(admin) => {
            let group = served.admin.as_ref().ok_or_else(missing)?;
            group.handle(registry, admin, call, body).await
        }
        Route::Ui(page) => {
            let group = served.ui.as_ref().ok_or_else(missing)?;
            group.handle(registry, page, call, body).await
        }
        Route::Auth(step) => {
            let group = served.auth.as_ref().ok_or_else(missing)?;
            group.handle(registry, step, call, body).await
        }
    }
}

/// A handler's answer, or a 500 if it panicked: one request's bug must not
/// take down the process (`tfreg serve`) or the Lambda sandbox with the other
/// requests in flight. The release profile unwinds (`panic = "unwind"`, kept
/// by `cargo lambda build`, which would otherwise force `abort`), so the
/// panic is caught here; its message goes to the request's log line.
async fn guarded(
    handler: impl std::future::Future<Output = Result<Response, Error>>,
) -> Result<Response, Error> {
    use futures_util::FutureExt as _;
    std::panic::AssertUnwindSafe(handler)
        .catch_unwind()
        .await
        .unwrap_or_else(|panic| {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic without a message".into());
            Err(Error::internal(format!("the handler panicked: {what}")))
        })
}

/// `/.well-known/terraform.json`: the services this registry offers, with
/// login.v1 where an identity provider is configured.
pub fn discovery_of(config: &crate::Config) -> Response {
    let services = Discovery {
        login_v1: config.login_v1.clone(),
        ..Discovery::default()
    };
    json(StatusCode::OK, &services)
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
    use crate::groups::Handler;

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
