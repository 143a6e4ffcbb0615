//! What the layers tell each other about one request: typed values in the
//! request's extensions on the way in, in the response's on the way out (as
//! crates.io's middleware does). Each fact has one writer:
//!
//! | fact | where | written by | read by |
//! |---|---|---|---|
//! | [`RequestId`] | request | `request_id` | `errors`, `audit`, `log` |
//! | [`Caller`] | request | [`crate::App::handle_as`] | `authorize` |
//! | [`Route`] | request | `route` | `session`, `authorize`, `dispatch` (taken) |
//! | [`Session`] | both | `session` | `authorize`, `dispatch`; `errors` (a UI error page) |
//! | [`Principal`] | both | `authorize` (kept when refused) | `dispatch`; `errors`, `audit` |
//! | [`Routed`] | response | `route` | `errors`, `audit`, `log`, `metrics` |
//! | [`Failed`] | response | any layer that refuses, and `dispatch` | `errors` (renders it); `audit`, `log` |
//! | [`Note`], [`AuditAs`], [`Identified`] | response | the handlers | `audit` |
//!
//! [`Route`]: tfreg_model::router::Route
//! [`Session`]: crate::session::Session
//! [`Principal`]: tfreg_model::token::Principal
//! [`Note`]: crate::groups::Note
//! [`AuditAs`]: crate::groups::AuditAs
//! [`Identified`]: crate::groups::Identified

use std::fmt;
use std::sync::Arc;

use http::Extensions;
use tfreg_model::router::{Endpoint, Route};

use crate::body::{Body, Response};
use crate::error::Error;

/// The id of one request: in its log line, its audit event, what a 5xx
/// tells the client and the `x-request-id` header. Sixteen hex digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RequestId(pub u64);

impl RequestId {
    /// A new random id.
    pub fn new() -> Self {
        RequestId(rand::random())
    }

    /// The request's id (all zeros only for a layer run without the
    /// `request_id` layer outside it: its unit tests).
    pub fn of(extensions: &Extensions) -> Self {
        extensions.get::<RequestId>().copied().unwrap_or_default()
    }
}

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

/// Who is calling: someone over the network (authorised by their token), or
/// the operator (the `tfreg` CLI working on a local data dir or the AWS
/// stores directly, which already has every right). A request without one
/// is from the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Caller {
    Network,
    Operator,
}

/// What the route layer found, for the layers outside it (which no longer
/// hold the request, and whose route the handler has taken).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Routed {
    pub endpoint: Endpoint,
    /// A sign-in's step a browser shows: its errors are a plain page.
    pub in_browser: bool,
    /// [`Route::audit_action`].
    pub audit_action: Option<&'static str>,
    /// [`Route::audit_target`].
    pub audit_target: String,
}

impl Routed {
    pub fn of(route: &Route) -> Self {
        Routed {
            endpoint: route.endpoint(),
            in_browser: matches!(route, Route::Auth(step) if step.in_browser()),
            audit_action: route.audit_action(),
            audit_target: route.audit_target(),
        }
    }

    /// The name of the endpoint a response answered: `none` for a path no
    /// route matches (or a request refused before routing).
    pub fn endpoint_name(extensions: &Extensions) -> &'static str {
        extensions
            .get::<Routed>()
            .map_or("none", |routed| routed.endpoint.name())
    }
}

/// The error a request failed with. A layer that refuses answers
/// [`fail`]; the errors layer renders the answer and keeps this beside it
/// for the audit (its public message) and the log line (its detail).
#[derive(Debug, Clone)]
pub struct Failed(pub Arc<Error>);

/// The answer of a layer or handler that failed with `error`: its status,
/// the error carried to the errors layer, which writes the body.
pub fn fail(error: Error) -> Response {
    let mut resp = http::Response::new(Body::empty());
    *resp.status_mut() = error.status();
    resp.extensions_mut().insert(Failed(Arc::new(error)));
    resp
}
