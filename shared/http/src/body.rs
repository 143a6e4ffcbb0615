//! The HTTP types every handler and entry point shares: one body type (axum's,
//! which both hyper and `lambda_http` speak), JSON and error responses, and
//! reading a body within a limit: for the pipeline ([`crate::app`]) and
//! every handler group.

use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, StatusCode, header};

use crate::error::{Error, RETRY_AFTER_SECS};
use tfreg_model::protocol::ErrorBody;
use tfreg_store::ByteStream;

/// A request or response body.
pub type Body = axum::body::Body;
/// A request as every entry point hands it over.
pub type Request = http::Request<Body>;
/// A response.
pub type Response = http::Response<Body>;

/// Build a JSON response.
pub fn json<T: serde::Serialize>(status: StatusCode, value: &T) -> Response {
    // Serialising our own wire types cannot fail (no maps with non-string keys).
    let body = serde_json::to_vec(value).unwrap_or_else(|_| b"{}".to_vec());
    let mut resp = http::Response::new(Body::from(body));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

/// An empty response with a status.
pub fn empty(status: StatusCode) -> Response {
    let mut resp = http::Response::new(Body::empty());
    *resp.status_mut() = status;
    resp
}

/// A header value built from text we made (a URL): failing is our bug.
pub fn header_value(text: &str) -> Result<HeaderValue, Error> {
    HeaderValue::from_str(text).map_err(|e| Error::internal(format!("header value {text:?}: {e}")))
}

/// The one mapping from [`Error`] to an HTTP response: `{"errors": ["..."]}`,
/// plus `WWW-Authenticate` on 401, `Allow` on 405 and `Retry-After` on 429 and 503.
/// `request_id` names the request's log line in what a 5xx tells the client.
pub fn error_response(err: &Error, request_id: &str) -> Response {
    let errors = vec![err.public_message(request_id)];
    let mut resp = match err {
        // OAuth clients (Terraform's) read RFC 6749's fields; ours are kept.
        Error::OAuth(oauth) => json(
            err.status(),
            &serde_json::json!({
                "errors": errors,
                "error": oauth.code,
                "error_description": oauth.description,
            }),
        ),
        _ => json(err.status(), &ErrorBody { errors }),
    };
    error_headers(err, resp.headers_mut());
    resp
}

/// An error as a short plain-text page, for the steps of a sign-in a
/// browser shows (never HTML: nothing in it can run).
pub fn error_text(err: &Error, request_id: &str) -> Response {
    let text = format!(
        "Sign-in failed: {}\n\nRequest id {request_id}.\n",
        err.public_message(request_id)
    );
    let mut resp = http::Response::new(Body::from(text));
    *resp.status_mut() = err.status();
    let headers = resp.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    error_headers(err, headers);
    resp
}

/// The headers an error's response carries whatever its body:
/// `WWW-Authenticate` on 401, `Allow` on 405, `Retry-After` on 429 and 503.
pub fn error_headers(err: &Error, headers: &mut HeaderMap) {
    match err {
        Error::Unauthorized(_) => {
            headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        Error::Challenged { challenge, .. } => {
            if let Ok(value) = HeaderValue::from_str(challenge) {
                headers.insert(header::WWW_AUTHENTICATE, value);
            }
        }
        Error::MethodNotAllowed { allow, .. } => {
            let allow: Vec<&str> = allow.iter().map(|m| m.as_str()).collect();
            if let Ok(value) = HeaderValue::from_str(&allow.join(", ")) {
                headers.insert(header::ALLOW, value);
            }
        }
        Error::Unavailable(_) => {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECS));
        }
        Error::TooMany {
            retry_after_secs, ..
        }
        | Error::OriginUnavailable {
            retry_after_secs, ..
        } => {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(*retry_after_secs));
        }
        _ => {}
    }
}

/// The `Authorization` header of a request, if it is valid text.
pub fn authorization(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
}

/// The declared `Content-Length`, if any and well-formed.
pub fn content_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .parse()
        .ok()
}

/// Why a request body stopped: the client sent nothing for too long (408), or
/// the body broke off (400).
fn body_error(e: axum::Error) -> Error {
    if timed_out(&e) {
        Error::Timeout(e.to_string())
    } else {
        Error::bad(format!("reading the request body: {e}"))
    }
}

/// Whether a body error is (or wraps) [`BodyTimedOut`].
fn timed_out(e: &axum::Error) -> bool {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(c) = cause {
        if c.is::<BodyTimedOut>() {
            return true;
        }
        cause = c.source();
    }
    false
}

/// The error of a request body that sent nothing for too long.
#[derive(Debug, thiserror::Error)]
#[error("the request body sent no data for {0:?}")]
pub struct BodyTimedOut(pub Duration);

/// `body`, failing with [`BodyTimedOut`] when no data arrives for `idle` (a
/// slow or stalled client must not hold a request, and its memory, forever).
pub fn with_idle_timeout(body: Body, idle: Duration) -> Body {
    use futures_util::StreamExt;
    let chunks = body.into_data_stream();
    let timed = futures_util::stream::unfold(Some(chunks), move |chunks| async move {
        let mut chunks = chunks?;
        match tokio::time::timeout(idle, chunks.next()).await {
            Ok(Some(Ok(chunk))) => Some((Ok(chunk), Some(chunks))),
            Ok(Some(Err(e))) => Some((Err(e.into_inner()), None)),
            Ok(None) => None,
            Err(_) => Some((Err(BodyTimedOut(idle).into()), None)),
        }
    });
    Body::from_stream(timed)
}

/// The whole body, up to `max` bytes: a declared or actual length above it is a 413.
pub async fn read_body(headers: &HeaderMap, body: Body, max: usize) -> Result<Bytes, Error> {
    use futures_util::StreamExt;
    let too_large = || Error::PayloadTooLarge(format!("request body larger than {max} bytes"));
    if content_length(headers).is_some_and(|n| n > max as u64) {
        return Err(too_large());
    }
    let mut stream = body.into_data_stream();
    let mut buf = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(body_error)?;
        if buf.len() + chunk.len() > max {
            return Err(too_large());
        }
        buf.extend_from_slice(&chunk);
    }
    Ok(buf.into())
}

/// The body as a stream of byte chunks (uploads).
pub fn into_stream(body: Body) -> ByteStream {
    use futures_util::TryStreamExt;
    Box::pin(body.into_data_stream().map_err(|e| {
        let kind = if timed_out(&e) {
            std::io::ErrorKind::TimedOut
        } else {
            std::io::ErrorKind::Other
        };
        std::io::Error::new(kind, e)
    }))
}

/// A `303 See Other` to `to` (not cached).
pub fn redirect(to: &str) -> Response {
    let mut resp = http::Response::new(Body::empty());
    *resp.status_mut() = StatusCode::SEE_OTHER;
    if let Ok(v) = HeaderValue::from_str(to) {
        resp.headers_mut().insert(header::LOCATION, v);
    }
    resp.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}
