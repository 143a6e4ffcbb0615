//! The lambda_http runtime around the pipeline. Each event's request goes
//! to [`App::handle`]; its answer goes back to API Gateway as the pipeline
//! built it, as text or (base64) binary by lambda_http's own rule for
//! which bodies are text: [`is_text`].
//!
//! Not through lambda_http's conversion of an `http::Response`: for a text
//! type it parses the media type and transcodes from its charset with
//! encoding_rs, whose tables for every legacy encoding (about 160 KB of
//! each binary) the registry never needs: every text it writes is UTF-8.
//! A body declared as text that is not UTF-8 is sent as binary, byte for
//! byte, where lambda_http would have replaced what it could not decode.

use std::convert::Infallible;
use std::sync::Arc;

use lambda_http::http::header::{CONTENT_ENCODING, CONTENT_TYPE};
use lambda_http::http::{HeaderMap, StatusCode};
use lambda_http::{Body, IntoResponse, Request, Response, service_fn};
use tfreg_http::App;
use tfreg_http::app::REQUEST_ID_HEADER;
use tfreg_http::body::error_response;

/// Serve invocations with `app` until the runtime stops.
pub(crate) async fn run(app: App) -> Result<(), lambda_http::Error> {
    run_counting(app, None).await
}

/// [`run`], telling `counting` when each answer is ready (download counts
/// are written then: after the response, by the extension).
pub(crate) async fn run_counting(
    app: App,
    counting: Option<crate::usage::Counting>,
) -> Result<(), lambda_http::Error> {
    let app = Arc::new(app);
    let counting = counting.map(Arc::new);
    lambda_http::run(service_fn(move |request: Request| {
        let app = app.clone();
        let counting = counting.clone();
        async move {
            let answer = answer(&app, request).await;
            if let Some(counting) = &counting {
                counting.done().await;
            }
            Ok::<_, Infallible>(Answer(answer))
        }
    }))
    .await
}

/// A response whose body is already what API Gateway is sent.
struct Answer(Response<Body>);

impl IntoResponse for Answer {
    fn into_response(
        self,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Response<Body>> + Send>> {
        Box::pin(std::future::ready(self.0))
    }
}

async fn answer(app: &App, request: Request) -> Response<Body> {
    use lambda_http::RequestExt;
    // The invocation's id, for the request's metric line (crate::emf).
    let id = request
        .lambda_context_ref()
        .map(|c| c.request_id.clone())
        .unwrap_or_default();
    let handled = app.handle(request.map(axum::body::Body::new));
    finish(crate::emf::LAMBDA_REQUEST_ID.scope(id, handled).await).await
}

/// The pipeline's response as API Gateway is sent it.
pub(crate) async fn finish(response: axum::response::Response) -> Response<Body> {
    let id = response.headers().get(REQUEST_ID_HEADER).cloned();
    match to_lambda(response).await {
        Ok(response) => response,
        // The pipeline's bodies are in memory: one that fails to read is
        // our bug, answered as the pipeline answers any.
        Err(e) => {
            tracing::error!(error = %e, "the response body could not be read");
            let id = id.as_ref().and_then(|v| v.to_str().ok()).unwrap_or("-");
            let error = tfreg_http::Error::internal(format!("reading a response body: {e}"));
            to_lambda(error_response(&error, id))
                .await
                .unwrap_or_else(|_| {
                    let mut response = Response::new(Body::Empty);
                    *response.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
                    response
                })
        }
    }
}

/// The pipeline's response, its body read, as API Gateway is sent it.
async fn to_lambda(response: axum::response::Response) -> Result<Response<Body>, axum::Error> {
    let (parts, body) = response.into_parts();
    let bytes = axum::body::to_bytes(body, usize::MAX).await?;
    let body = lambda_body(&parts.headers, bytes.to_vec());
    Ok(Response::from_parts(parts, body))
}

/// lambda_http's (1.x, `response.rs`) media types sent as text.
const TEXT_PREFIXES: [&str; 5] = [
    "text",
    "application/json",
    "application/javascript",
    "application/xml",
    "application/yaml",
];
const TEXT_SUFFIXES: [&str; 3] = ["+xml", "+yaml", "+json"];
/// lambda_http's header asking for a body to be sent as text.
const TEXT_HEADER: &str = "x-lambda-http-content-encoding";

/// Whether lambda_http sends a body with these headers as text: none with
/// a `Content-Encoding`; all without a `Content-Type`; else by media type,
/// or when asked with `x-lambda-http-content-encoding: text`.
pub(crate) fn is_text(headers: &HeaderMap) -> bool {
    if headers.contains_key(CONTENT_ENCODING) {
        return false;
    }
    let Some(value) = headers.get(CONTENT_TYPE) else {
        return true;
    };
    let content_type = value.to_str().unwrap_or_default();
    let media_type = content_type.trim().split(';').next().unwrap_or_default();
    TEXT_PREFIXES.iter().any(|p| content_type.starts_with(p))
        || TEXT_SUFFIXES.iter().any(|s| media_type.ends_with(s))
        || headers.get(TEXT_HEADER).is_some_and(|v| v == "text")
}

/// The body API Gateway is sent: text when [`is_text`] and UTF-8, else binary.
pub(crate) fn lambda_body(headers: &HeaderMap, bytes: Vec<u8>) -> Body {
    if !is_text(headers) {
        return Body::Binary(bytes);
    }
    match String::from_utf8(bytes) {
        Ok(text) => Body::Text(text),
        Err(e) => Body::Binary(e.into_bytes()),
    }
}

#[cfg(test)]
mod tests;
