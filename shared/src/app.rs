//! The registry as one tower service, shared by every entry point: `tfreg
//! serve` hands it to hyper, each Lambda function to `lambda_http::run`, tests
//! call it in-process. Here a request is routed, authorised and dispatched to
//! its handler; errors become HTTP here and only here; one log line per request.

use std::sync::Arc;
use std::time::Instant;

use http::{HeaderMap, HeaderValue, Method};

use crate::audit::{self, Event, Note, Outcome};
use crate::auth::{self, Credential, Principal};
use crate::error::Error;
use crate::handlers;
use crate::http_types::{Body, Request, Response, authorization, error_response};
use crate::registry::Registry;
use crate::router::{Endpoint, Route, UiRoute, route};
use crate::ui::{self, session};

/// Most header lines a request may have (real clients send about ten).
pub const MAX_HEADERS: usize = 100;
/// Largest total size of a request's header names and values. Terraform sends
/// a few hundred bytes; a bearer token is under 100.
pub const MAX_HEADER_BYTES: usize = 32 * 1024;

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

/// The registry's service: every route, or only `only`'s (one Lambda function
/// serves one endpoint; other paths get a JSON 404).
pub fn app(registry: Arc<Registry>, only: Option<Endpoint>) -> axum::Router {
    axum::Router::new().fallback(move |req: Request| {
        let registry = registry.clone();
        async move { handle(&registry, only, req).await }
    })
}

/// Who is calling: someone over the network (authorised by their token), or
/// the operator (the `tfreg` CLI working on a local data dir or the AWS
/// stores directly, which already has every right).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Caller {
    Network,
    Operator,
}

/// Route and answer one request from the network, logging one line with
/// route, status and latency (and an audit line for a change of state).
pub async fn handle(registry: &Registry, only: Option<Endpoint>, req: Request) -> Response {
    handle_as(registry, only, req, Caller::Network).await
}

/// [`handle`], for `caller`: the same routing, handlers, errors and audit
/// for the CLI's local commands as for HTTP requests.
pub async fn handle_as(
    registry: &Registry,
    only: Option<Endpoint>,
    req: Request,
    caller: Caller,
) -> Response {
    let started = Instant::now();
    let request_id = format!("{:016x}", rand::random::<u64>());
    let (parts, body) = req.into_parts();
    let path = parts.uri.path();
    let routed = check_headers(&parts.headers)
        .and_then(|()| route(&parts.method, path))
        .and_then(|r| match only {
            // The redirect to the UI's home page needs nothing: any function
            // whose route a path like `/ui/` reaches may answer it.
            Some(e) if r.endpoint() != e && r != Route::Ui(UiRoute::Root) => Err(Error::not_found(
                format!("no such endpoint here: this function serves {}", e.name()),
            )),
            _ => Ok(r),
        });
    let endpoint = routed.as_ref().ok().map(Route::endpoint);
    let audited = routed
        .as_ref()
        .ok()
        .and_then(|r| Some((r.audit_action()?, r.audit_target())));
    // Authorisation, once, for every route: the same code in every mode.
    let mut principal = None;
    let pages = ui::wants_pages(path);
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
                        Some(hash) => Credential::Session(Some(hash)),
                        None => Credential::Authorization(authorization(&parts.headers)),
                    };
                    auth::authorize(registry, credential, access).await
                }
            };
            // Who asked is kept even when refused (a valid token without
            // the right): the audit trail records the refused change.
            let result = match verdict {
                Ok(()) => dispatch(registry, r, &who, &parts, body, session.is_some()).await,
                Err(e) => Err(e),
            };
            principal = Some(who);
            result
        }
        Err(e) => Err(e),
    };
    let (mut resp, error) = match result {
        Ok(resp) => (resp, None),
        Err(e) if pages => {
            let page = ui::error_page(
                &e,
                &request_id,
                &parts.method,
                path,
                parts.uri.query(),
                registry.config.hostname.as_str(),
                session.is_some(),
            );
            (page, Some(e))
        }
        Err(e) => (error_response(&e, &request_id), Some(e)),
    };
    if pages {
        ui::secure(resp.headers_mut());
    }
    if let Ok(id) = HeaderValue::from_str(&request_id) {
        resp.headers_mut().insert(REQUEST_ID_HEADER, id);
    }
    if parts.method == Method::HEAD {
        // Keep the headers (Content-Length included), drop the body.
        *resp.body_mut() = Body::empty();
    }
    let status = resp.status().as_u16();
    if let Some((action, target)) = audited {
        let detail = match &error {
            Some(e) => Some(e.public_message(&request_id)),
            None => resp.extensions().get::<Note>().map(|n| n.0.clone()),
        };
        let principal = principal.unwrap_or(Principal::Anonymous);
        let event = Event {
            at: registry.now(),
            actor: principal.actor(),
            action: action.to_string(),
            target,
            outcome: Outcome::of_status(status),
            status,
            detail,
            request_id: request_id.clone(),
        };
        audit::record(registry.items.as_ref(), &event, principal.identified()).await;
    }
    // To the microsecond: full precision would print 16 digits on every line.
    let latency_ms = (started.elapsed().as_secs_f64() * 1e6).round() / 1000.0;
    let endpoint = endpoint.map(Endpoint::name).unwrap_or("none");
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

/// The token hash of the request's UI session cookie, if it is valid (no
/// signing secret yet: no session can exist).
async fn ui_session(registry: &Registry, headers: &HeaderMap) -> Option<String> {
    session::cookie(headers, session::COOKIE)?;
    let signer = registry.signer_if_ready().await.ok()??;
    session::token_hash(signer, headers, registry.now())
}

async fn dispatch(
    registry: &Registry,
    route: Route,
    principal: &Principal,
    parts: &http::request::Parts,
    body: Body,
    signed_in: bool,
) -> Result<Response, Error> {
    match route {
        Route::Ui(page) => {
            let req = ui::Request {
                method: &parts.method,
                query: parts.uri.query(),
                headers: &parts.headers,
                principal,
                signed_in,
            };
            ui::handle(registry, page, req, body).await
        }
        Route::Discovery => Ok(handlers::read::discovery()),
        Route::Read(read) => handlers::read::handle(registry, read).await,
        Route::Blob(key) => {
            handlers::blob::handle(
                registry,
                &parts.method,
                &key,
                parts.uri.query(),
                &parts.headers,
                body,
            )
            .await
        }
        Route::Publish(publish) => {
            handlers::publish::handle(registry, publish, &parts.headers, body).await
        }
        Route::Admin(admin) => {
            handlers::admin::handle(
                registry,
                principal,
                admin,
                parts.uri.query(),
                &parts.headers,
                body,
            )
            .await
        }
    }
}

#[cfg(all(test, feature = "aws"))]
mod log_tests {
    use std::sync::{Arc, Mutex};

    use crate::testing::TestRegistry;

    /// The Lambda functions' log format before it was made lean (the event
    /// under `fields`, every span of the invocation repeated on each line):
    /// the baseline of the figure the test prints.
    fn before<W>(writer: W) -> impl tracing::Subscriber + Send + Sync + 'static
    where
        W: for<'w> tracing_subscriber::fmt::MakeWriter<'w> + Send + Sync + 'static,
    {
        tracing_subscriber::fmt()
            .json()
            .with_current_span(false)
            .with_target(false)
            .without_time()
            .with_writer(writer)
            .finish()
    }

    /// The log a request to `path` writes through the subscriber `make`
    /// builds on a writer, inside a span like the Lambda runtime's for each
    /// invocation.
    fn log_of<S, F>(path: &'static str, make: F) -> (u16, String)
    where
        S: tracing::Subscriber + Send + Sync + 'static,
        F: FnOnce(SinkWriter) -> S,
    {
        let buf = Arc::new(Mutex::new(Vec::new()));
        let writer: SinkWriter = {
            let buf = buf.clone();
            Box::new(move || Sink(buf.clone()))
        };
        let subscriber = make(writer);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let registry = runtime.block_on(TestRegistry::embedded());
        let status = tracing::subscriber::with_default(subscriber, || {
            let span = tracing::info_span!(
                "Lambda runtime invoke",
                requestId = "8476a536-e9f4-11e8-9739-2dfe598c3fcd",
                xrayTraceId =
                    "Root=1-5bef4de7-ad49b0e87f6ef6c87fc2e700;Parent=9a9197af755a6419;Sampled=1"
            );
            let _entered = span.enter();
            runtime.block_on(registry.get(path)).status.as_u16()
        });
        (
            status,
            String::from_utf8(buf.lock().unwrap().clone()).unwrap(),
        )
    }

    /// The functions' log as they write it.
    fn lambda_log_of(path: &'static str) -> (u16, String) {
        log_of(path, |w| {
            crate::aws::lambda::log_subscriber(tracing_subscriber::EnvFilter::new("info"), w)
        })
    }

    type SinkWriter = Box<dyn Fn() -> Sink + Send + Sync>;

    struct Sink(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Sink {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_lambda_request_line_is_one_lean_json_object() {
        let path = "/v1/providers/hashicorp/null/versions";
        let (status, log) = lambda_log_of(path);
        let lines: Vec<&str> = log.lines().collect();
        assert_eq!(lines.len(), 1, "one line per request:\n{log}");
        eprintln!(
            "FIGURE lambda request line: {} bytes: {}",
            lines[0].len() + 1,
            lines[0]
        );
        let line: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
        let fields = line.as_object().unwrap();
        let mut keys: Vec<&str> = fields.keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            [
                "endpoint",
                "latency_ms",
                "level",
                "message",
                "method",
                "path",
                "request_id",
                "status"
            ],
            "the request's fields, each once, at the top level; no spans: {log}"
        );
        assert_eq!(line["message"], "request");
        assert_eq!(line["path"], path);
        assert_eq!(line["endpoint"], "provider-versions");
        assert_eq!(line["status"], status);
        assert_eq!(line["request_id"].as_str().map(str::len), Some(16));
        let (_, old) = log_of(path, before);
        eprintln!(
            "FIGURE lambda request line: {} bytes before, {} after",
            old.len(),
            log.len()
        );
        assert!(
            log.len() * 2 < old.len(),
            "the lean line is well under half the old one: {} vs {}",
            log.len(),
            old.len()
        );
    }
}
