//! Bounds on a request's headers, checked before anything reads them: too
//! many lines or too many bytes is a 431.

use http::HeaderMap;

use super::facts::fail;
use super::layer::{Inner, Job, Next};
use crate::body::{Request, Response};
use crate::error::Error;

/// Most header lines a request may have (real clients send about ten).
pub const MAX_HEADERS: usize = 100;
/// Largest total size of a request's header names and values. Terraform sends
/// a few hundred bytes; a bearer token is under 100.
pub const MAX_HEADER_BYTES: usize = 32 * 1024;

/// Bounds the headers.
#[derive(Clone)]
pub(super) struct Limits;

impl Job for Limits {
    async fn run<S: Inner>(self, req: Request, next: Next<S>) -> Response {
        match check_headers(req.headers()) {
            Ok(()) => next.run(req).await,
            Err(e) => fail(e),
        }
    }
}

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
