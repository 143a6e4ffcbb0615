//! The registry as one tower service, shared by every entry point: `tfreg
//! serve` hands it to hyper, each Lambda function to `lambda_http::run`, tests
//! call it in-process. Here a request is routed, authorised and dispatched to
//! its handler; errors become HTTP here and only here; one log line per request.

use std::sync::Arc;
use std::time::Instant;

use http::{HeaderMap, HeaderValue, Method};

use crate::audit::{self, Event, Note, Outcome};
use crate::auth::{self, Principal};
use crate::error::Error;
use crate::handlers;
use crate::http_types::{Body, Request, Response, authorization, error_response};
use crate::registry::Registry;
use crate::router::{Endpoint, Route, route};

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
            Some(e) if r.endpoint() != e => Err(Error::not_found(format!(
                "no such endpoint here: this function serves {}",
                e.name()
            ))),
            _ => Ok(r),
        });
    let endpoint = routed.as_ref().ok().map(Route::endpoint);
    let audited = routed
        .as_ref()
        .ok()
        .and_then(|r| Some((r.audit_action()?, r.audit_target())));
    // Authorisation, once, for every route: the same code in every mode.
    let mut principal = None;
    let result = match routed {
        Ok(r) => {
            let (who, verdict) = match caller {
                Caller::Operator => (Principal::Operator, Ok(())),
                Caller::Network => {
                    let access = r.access(&registry.config.hostname);
                    auth::authorize(registry, authorization(&parts.headers), access).await
                }
            };
            // Who asked is kept even when refused (a valid token without
            // the right): the audit trail records the refused change.
            let result = match verdict {
                Ok(()) => dispatch(registry, r, &who, &parts, body).await,
                Err(e) => Err(e),
            };
            principal = Some(who);
            result
        }
        Err(e) => Err(e),
    };
    let (mut resp, error) = match result {
        Ok(resp) => (resp, None),
        Err(e) => (error_response(&e, &request_id), Some(e)),
    };
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
    let latency_ms = started.elapsed().as_secs_f64() * 1000.0;
    let endpoint = endpoint.map(Endpoint::name).unwrap_or("none");
    let method = &parts.method;
    match error {
        // Our fault or the store's: the detail the client did not get.
        Some(e) if status >= 500 => {
            tracing::error!(%method, path, endpoint, status, latency_ms, request_id, error = %e, "request")
        }
        _ => tracing::info!(%method, path, endpoint, status, latency_ms, request_id, "request"),
    }
    resp
}

async fn dispatch(
    registry: &Registry,
    route: Route,
    principal: &Principal,
    parts: &http::request::Parts,
    body: Body,
) -> Result<Response, Error> {
    match route {
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
