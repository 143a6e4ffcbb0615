//! The registry as one function from request to response, shared by the local
//! server, the Lambda functions and the tests. Errors become HTTP here and only here.

use std::time::Instant;

use bytes::Bytes;
use http::{HeaderValue, Method, StatusCode, header};

use crate::error::Error;
use crate::handlers;
use crate::protocol::ErrorBody;
use crate::registry::Registry;
use crate::router::{Endpoint, Route, route};
use crate::storage::ByteStream;

/// A request or response body.
pub enum Body {
    Empty,
    Bytes(Bytes),
    /// Streamed bytes (archive uploads and downloads in local mode).
    Stream(ByteStream),
}

impl Body {
    /// The whole body, up to `max` bytes (streams are collected).
    pub async fn collect(self, max: usize) -> Result<Bytes, Error> {
        use futures_util::StreamExt;
        let too_large = || Error::PayloadTooLarge(format!("request body larger than {max} bytes"));
        match self {
            Body::Empty => Ok(Bytes::new()),
            Body::Bytes(b) if b.len() > max => Err(too_large()),
            Body::Bytes(b) => Ok(b),
            Body::Stream(mut s) => {
                let mut buf = Vec::new();
                while let Some(chunk) = s.next().await {
                    let chunk =
                        chunk.map_err(|e| Error::bad(format!("reading request body: {e}")))?;
                    if buf.len() + chunk.len() > max {
                        return Err(too_large());
                    }
                    buf.extend_from_slice(&chunk);
                }
                Ok(buf.into())
            }
        }
    }

    /// The body as a stream.
    pub fn into_stream(self) -> ByteStream {
        match self {
            Body::Empty => Box::pin(futures_util::stream::empty()),
            Body::Bytes(b) => Box::pin(futures_util::stream::once(async move { Ok(b) })),
            Body::Stream(s) => s,
        }
    }
}

/// The `Authorization` header of a request, if it is valid text.
pub fn authorization(headers: &http::HeaderMap) -> Option<String> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

/// What the registry needs to know of a request.
pub struct Request {
    pub method: Method,
    /// Raw path, no query string.
    pub path: String,
    pub query: Option<String>,
    /// The `Authorization` header, if any.
    pub authorization: Option<String>,
    pub body: Body,
}

/// A response.
pub type Response = http::Response<Body>;

/// Build a JSON response.
pub fn json<T: serde::Serialize>(status: StatusCode, value: &T) -> Response {
    let body = serde_json::to_vec(value).unwrap_or_else(|_| b"{}".to_vec());
    let mut resp = http::Response::new(Body::Bytes(body.into()));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

/// The one mapping from [`Error`] to an HTTP response.
pub fn error_response(err: &Error) -> Response {
    let mut resp = json(
        err.status(),
        &ErrorBody {
            errors: vec![err.to_string()],
        },
    );
    if matches!(err, Error::Unauthorized(_)) {
        resp.headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    }
    resp
}

/// Route and answer one request, logging one line with route, status and latency.
pub async fn handle(registry: &Registry, req: Request) -> Response {
    handle_endpoint(registry, req, None).await
}

/// Like [`handle`], but answer 404 for any endpoint other than `only` (one
/// Lambda function serves one endpoint).
pub async fn handle_endpoint(
    registry: &Registry,
    req: Request,
    only: Option<Endpoint>,
) -> Response {
    let started = Instant::now();
    let method = req.method.clone();
    let path = req.path.clone();
    let routed = route(&req.method, &req.path).and_then(|r| match only {
        Some(e) if r.endpoint() != e => Err(Error::not_found(format!(
            "no such endpoint here: this function serves {}",
            e.name()
        ))),
        _ => Ok(r),
    });
    let endpoint = routed.as_ref().ok().map(Route::endpoint);
    let result = match routed {
        Ok(r) => dispatch(registry, r, req).await,
        Err(e) => Err(e),
    };
    let mut resp = result.unwrap_or_else(|e| error_response(&e));
    if method == Method::HEAD {
        // Keep the headers (Content-Length included), drop the body.
        *resp.body_mut() = Body::Empty;
    }
    let status = resp.status().as_u16();
    let latency_ms = started.elapsed().as_secs_f64() * 1000.0;
    let endpoint = endpoint.map(Endpoint::name).unwrap_or("none");
    if status >= 500 {
        tracing::error!(%method, path, endpoint, status, latency_ms, "request");
    } else {
        tracing::info!(%method, path, endpoint, status, latency_ms, "request");
    }
    resp
}

async fn dispatch(registry: &Registry, route: Route, req: Request) -> Result<Response, Error> {
    let auth = req.authorization.as_deref();
    match route {
        Route::Discovery => Ok(handlers::read::discovery()),
        Route::Blob { key } => {
            handlers::blob::handle(registry, &req.method, &key, req.query.as_deref(), req.body)
                .await
        }
        Route::PublishProvider {
            provider,
            version,
            step,
        } => {
            let body = req.body.collect(handlers::publish::MAX_BODY).await?;
            handlers::publish::provider(registry, auth, &provider, &version, step, &body).await
        }
        Route::PublishModule {
            module,
            version,
            step,
        } => {
            let body = req.body.collect(handlers::publish::MAX_BODY).await?;
            handlers::publish::module(registry, auth, &module, &version, step, &body).await
        }
        Route::PublishMirror {
            hostname,
            provider,
            version,
            step,
        } => {
            let body = req.body.collect(handlers::publish::MAX_BODY).await?;
            handlers::publish::mirror(registry, auth, &hostname, &provider, &version, step, &body)
                .await
        }
        read => {
            handlers::read::require_reader(registry, auth).await?;
            handlers::read::handle(registry, read).await
        }
    }
}
