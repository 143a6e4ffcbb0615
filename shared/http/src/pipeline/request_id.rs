//! The request id: made first, so that every layer inside names the same
//! one (the errors a client is told, the audit event, the log line), and
//! sent back in the `x-request-id` header of every answer.

use http::HeaderValue;

use super::facts::RequestId;
use super::layer::{Inner, Job, Next};
use crate::body::{Request, Response};

/// The response header that names a request's log line.
pub const REQUEST_ID_HEADER: &str = "x-request-id";

/// Gives the request its id.
#[derive(Clone)]
pub(super) struct MakeRequestId;

impl Job for MakeRequestId {
    async fn run<S: Inner>(self, mut req: Request, next: Next<S>) -> Response {
        let id = RequestId::new();
        req.extensions_mut().insert(id);
        let mut resp = next.run(req).await;
        if let Ok(mut value) = HeaderValue::from_str(&id.to_string()) {
            // Never indexed by HTTP/2's header compression: a value unique to
            // each response would only fill the connection's table, evicting what
            // repeats, and lengthen the search every later response makes in it.
            value.set_sensitive(true);
            resp.headers_mut().insert(REQUEST_ID_HEADER, value);
        }
        resp
    }
}
