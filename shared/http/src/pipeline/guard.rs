//! A handler's answer, or a 500 if it panicked: one request's bug must not
//! take down the process (`tfreg serve`) or the Lambda sandbox with the other
//! requests in flight. The release profile unwinds (`panic = "unwind"`, kept
//! by `cargo lambda build`, which would otherwise force `abort`), so the
//! panic is caught here; its message goes to the request's log line.

use std::any::Any;
use std::panic::AssertUnwindSafe;

use futures_util::FutureExt as _;

use super::facts::fail;
use super::layer::{Inner, Job, Next};
use crate::body::{Request, Response};
use crate::error::Error;

/// Catches a handler's panic.
#[derive(Clone)]
pub(super) struct Guard;

impl Job for Guard {
    async fn run<S: Inner>(self, req: Request, next: Next<S>) -> Response {
        AssertUnwindSafe(next.run(req))
            .catch_unwind()
            .await
            .unwrap_or_else(|panic| {
                fail(Error::internal(format!(
                    "the handler panicked: {}",
                    message(panic.as_ref())
                )))
            })
    }
}

/// A panic's message, if it has one.
fn message(panic: &(dyn Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into())
}
