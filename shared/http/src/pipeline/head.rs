//! A HEAD request's answer: the GET's headers (Content-Length included),
//! no body.

use axum::extract::Request;
use axum::middleware::Next;
use http::Method;

use crate::body::{Body, Response};

pub(super) async fn layer(req: Request, next: Next) -> Response {
    let head = req.method() == Method::HEAD;
    let mut resp = next.run(req).await;
    if head {
        *resp.body_mut() = Body::empty();
    }
    resp
}
