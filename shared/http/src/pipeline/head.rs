//! A HEAD request's answer: the GET's headers (Content-Length included),
//! no body.

use http::Method;

use super::layer::{Inner, Job, Next};
use crate::body::{Body, Request, Response};

/// Drops a HEAD answer's body.
#[derive(Clone)]
pub(super) struct HeadBody;

impl Job for HeadBody {
    async fn run<S: Inner>(self, req: Request, next: Next<S>) -> Response {
        let head = req.method() == Method::HEAD;
        let mut resp = next.run(req).await;
        if head {
            *resp.body_mut() = Body::empty();
        }
        resp
    }
}
