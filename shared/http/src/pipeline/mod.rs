//! The pipeline: one request's path through the registry, each job a tower
//! layer of its own (a [`layer::Job`], written as crates.io's middleware
//! is, an async fn of the request and the rest), in this order from the
//! outside in:
//!
//! 1. [`request_id`]: the request's id, and its `x-request-id` header.
//! 2. [`log`]: the one `request` log line.
//! 3. [`metrics`]: the request's record for the registry's recorder
//!    (endpoint, final status, latency, cold start).
//! 4. [`head`]: a HEAD's answer without its body.
//! 5. [`audit`]: one [`AuditRecord`] per change of state.
//! 6. [`errors`]: every failure inside written as HTTP (JSON, a UI page,
//!    plain text), and the UI's security headers.
//! 7. [`limits`]: bounds on headers (431).
//! 8. [`route`]: the raw path to a route (404, 405).
//! 9. [`session`]: a browser's UI session.
//! 10. [`authorize`]: the route's access, once, for every route.
//! 11. [`guard`]: a handler's panic is that request's 500.
//! 12. [`dispatch`]: the handler group this process was given.
//!
//! A layer learns what it needs from the layers outside it through the
//! request's extensions, and tells those outside through the response's:
//! [`facts`] lists every fact, its writer and its readers. So the outside
//! layers see the final answer: the log line and the metrics its status,
//! the audit the error's public message and the page's status.

mod audit;
mod authorize;
mod dispatch;
mod errors;
pub mod facts;
mod guard;
mod head;
mod layer;
pub mod limits;
mod log;
mod metrics;
pub mod request_id;
mod route;
mod session;

use std::convert::Infallible;
use std::sync::Arc;

use tower::{Service, ServiceBuilder};

pub use audit::AuditRecord;
pub use dispatch::discovery_of;
use layer::Step;

use crate::body::{Request, Response};
use crate::groups::Served;
use crate::registry::Registry;

/// What the layers read besides the request: the registry and the groups
/// this process serves.
pub struct Shared {
    pub registry: Arc<Registry>,
    pub served: Served,
}

/// The whole pipeline for `registry` serving `served`, as one tower service.
pub fn service(
    registry: Arc<Registry>,
    served: Served,
) -> impl Service<Request, Response = Response, Error = Infallible, Future: Send>
+ Clone
+ Send
+ Sync
+ 'static {
    let shared = Arc::new(Shared { registry, served });
    ServiceBuilder::new()
        .layer(Step(request_id::MakeRequestId))
        .layer(Step(log::LogLine))
        .layer(Step(metrics::Measure(shared.clone())))
        .layer(Step(head::HeadBody))
        .layer(Step(audit::Audit(shared.clone())))
        .layer(Step(errors::Errors(shared.clone())))
        .layer(Step(limits::Limits))
        .layer(Step(route::Router))
        .layer(Step(session::UiSession(shared.clone())))
        .layer(Step(authorize::Authorize(shared.clone())))
        .layer(Step(guard::Guard))
        .service(dispatch::Dispatch(shared))
}

#[cfg(test)]
mod tests;
