//! The request's metrics record ([`crate::metrics::RequestRecord`]): its
//! endpoint, final status and latency, and whether it was this process's
//! first (a cold start), handed to the registry's recorder.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use super::Shared;
use super::facts::Routed;
use super::layer::{Inner, Job, Next};
use crate::body::{Request, Response};
use crate::metrics::RequestRecord;

/// Set once this process has answered a request: the first is a cold start.
static SERVED_ONE: AtomicBool = AtomicBool::new(false);

/// Hands the request's record to the registry's recorder.
#[derive(Clone)]
pub(super) struct Measure(pub(super) Arc<Shared>);

impl Job for Measure {
    async fn run<S: Inner>(self, req: Request, next: Next<S>) -> Response {
        let shared = self.0;
        let started = Instant::now();
        let resp = next.run(req).await;
        shared.registry.metrics.request(&RequestRecord {
            endpoint: Routed::endpoint_name(resp.extensions()),
            status: resp.status().as_u16(),
            latency: started.elapsed(),
            cold_start: !SERVED_ONE.swap(true, Ordering::Relaxed),
        });
        resp
    }
}
