//! The shape of every layer: a [`Job`], what one job does to a request given
//! the rest of the pipeline ([`Next`]), made a tower [`Layer`] by [`Step`].
//! Like axum's `from_fn` (crates.io's middleware), without its extractors
//! and its boxed `Next`: one boxed future per layer and request.

use std::convert::Infallible;
use std::future::Future;
use std::task::{Context, Poll};

use futures_util::future::BoxFuture;
use tower::{Layer, Service};

use crate::body::{Request, Response};

/// A service the pipeline can run inside a layer: every layer's, the
/// handler groups', a test's stub.
pub trait Inner:
    Service<Request, Response = Response, Error = Infallible, Future: Send> + Send + 'static
{
}

impl<S> Inner for S where
    S: Service<Request, Response = Response, Error = Infallible, Future: Send> + Send + 'static
{
}

/// The rest of the pipeline, inside a layer, already ready.
pub struct Next<S>(S);

impl<S: Inner> Next<S> {
    /// The answer of the layers inside and the handler.
    pub async fn run(mut self, req: Request) -> Response {
        match self.0.call(req).await {
            Ok(resp) => resp,
            Err(never) => match never {},
        }
    }
}

/// One job of the pipeline (each in a file of its own).
pub trait Job: Clone + Send + Sync + 'static {
    fn run<S: Inner>(self, req: Request, next: Next<S>) -> impl Future<Output = Response> + Send;
}

/// A [`Job`] as a tower layer.
#[derive(Clone)]
pub struct Step<J>(pub J);

impl<J: Clone, S> Layer<S> for Step<J> {
    type Service = Stepped<J, S>;

    fn layer(&self, inner: S) -> Self::Service {
        Stepped {
            job: self.0.clone(),
            inner,
        }
    }
}

/// A [`Job`] around the rest of the pipeline.
#[derive(Clone)]
pub struct Stepped<J, S> {
    job: J,
    inner: S,
}

impl<J: Job, S: Inner + Clone> Service<Request> for Stepped<J, S> {
    type Response = Response;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Response, Infallible>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request) -> Self::Future {
        // The service made ready goes with the request; a clone stays.
        let clone = self.inner.clone();
        let ready = std::mem::replace(&mut self.inner, clone);
        let job = self.job.clone();
        Box::pin(async move { Ok(job.run(req, Next(ready)).await) })
    }
}
