//! Routing: the method and raw path to a [`Route`] (the model's router; a
//! path no route matches is a 404, a method it does not take a 405), for
//! the layers inside; what it is ([`Routed`]) for those outside.

use tfreg_model::router::{Route, route};

use super::facts::{Routed, fail};
use super::layer::{Inner, Job, Next};
use crate::body::{Request, Response};

/// Routes the request.
#[derive(Clone)]
pub(super) struct Router;

impl Job for Router {
    async fn run<S: Inner>(self, mut req: Request, next: Next<S>) -> Response {
        let found: Route = match route(req.method(), req.uri().path()) {
            Ok(found) => found,
            Err(e) => return fail(e.into()),
        };
        let routed = Routed::of(&found);
        req.extensions_mut().insert(found);
        let mut resp = next.run(req).await;
        resp.extensions_mut().insert(routed);
        resp
    }
}
