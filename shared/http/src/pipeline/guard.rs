//! A handler's answer, or a 500 if it panicked: one request's bug must not
//! take down the process (`tfreg serve`) or the Lambda sandbox with the other
//! requests in flight. The release profile unwinds (`panic = "unwind"`, kept
//! by `cargo lambda build`, which would otherwise force `abort`), so the
//! panic is caught here; its message goes to the request's log line.

use std::any::Any;
use std::panic::AssertUnwindSafe;

use axum::extract::Request;
use axum::middleware::Next;
use futures_util::FutureExt as _;

use super::facts::fail;
use crate::body::Response;
use crate::error::Error;

pub(super) async fn layer(req: Request, next: Next) -> Response {
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

/// A panic's message, if it has one.
fn message(panic: &(dyn Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into())
}
