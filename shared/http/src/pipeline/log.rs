//! The request's one log line (`request`): method, path, endpoint, final
//! status, latency and request id; for a 5xx, the error's detail the
//! client was not told.

use std::time::Instant;

use super::facts::{Failed, RequestId, Routed};
use super::layer::{Inner, Job, Next};
use crate::body::{Request, Response};

/// Writes the request line.
#[derive(Clone)]
pub(super) struct LogLine;

impl Job for LogLine {
    async fn run<S: Inner>(self, req: Request, next: Next<S>) -> Response {
        let started = Instant::now();
        let method = req.method().clone();
        let uri = req.uri().clone();
        let request_id = RequestId::of(req.extensions());
        let resp = next.run(req).await;
        // To the microsecond: full precision would print 16 digits on every line.
        let latency_ms = (started.elapsed().as_secs_f64() * 1e6).round() / 1000.0;
        let path = uri.path();
        let endpoint = Routed::endpoint_name(resp.extensions());
        let status = resp.status().as_u16();
        match resp.extensions().get::<Failed>() {
            // Our fault or the store's: the detail the client did not get.
            Some(Failed(e)) if status >= 500 => {
                tracing::error!(%method, path, %endpoint, status, latency_ms, %request_id, error = %e, "request")
            }
            _ => {
                tracing::info!(%method, path, %endpoint, status, latency_ms, %request_id, "request")
            }
        }
        resp
    }
}
