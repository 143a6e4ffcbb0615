//! The innermost service: the route's handler group, if this process serves
//! it (a group it was not given is a 404 here); discovery and the UI's
//! root need none.

use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures_util::future::BoxFuture;
use http::StatusCode;
use tfreg_model::protocol::Discovery;
use tfreg_model::router::{Route, UiRoute};
use tfreg_model::token::Principal;

use super::Shared;
use super::facts::fail;
use crate::body::{Body, Request, Response, json, redirect};
use crate::error::Error;
use crate::groups::{Call, Served};
use crate::registry::Registry;
use crate::session::Session;

/// The handler groups as a tower service: the request's [`Route`] (taken),
/// [`Principal`] and [`Session`] from its extensions, a handler's error as
/// [`fail`] for the errors layer.
#[derive(Clone)]
pub(super) struct Dispatch(pub(super) Arc<Shared>);

impl tower::Service<Request> for Dispatch {
    type Response = Response;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Response, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request) -> Self::Future {
        let shared = self.0.clone();
        Box::pin(async move { Ok(answer(&shared, req).await) })
    }
}

async fn answer(shared: &Shared, req: Request) -> Response {
    let (mut parts, body) = req.into_parts();
    let (Some(route), Some(principal)) = (
        parts.extensions.remove::<Route>(),
        parts.extensions.get::<Principal>(),
    ) else {
        // Only an assembly without the route or authorise layer gets here.
        return fail(Error::internal("a handler called unrouted or unauthorised"));
    };
    let call = Call {
        method: &parts.method,
        query: parts.uri.query(),
        headers: &parts.headers,
        principal,
        session: parts.extensions.get::<Session>(),
    };
    match dispatch(&shared.registry, &shared.served, route, call, body).await {
        Ok(resp) => resp,
        Err(e) => fail(e),
    }
}

async fn dispatch(
    registry: &Registry,
    served: &Served,
    route: Route,
    call: Call<'_>,
    body: Body,
) -> Result<Response, Error> {
    let endpoint = route.endpoint();
    let missing = || {
        Error::not_found(format!(
            "no such endpoint here: this process does not serve {}",
            endpoint.name()
        ))
    };
    match route {
        Route::Discovery => Ok(discovery_of(&registry.config)),
        Route::Ui(UiRoute::Root) => Ok(redirect(&UiRoute::Home.path())),
        Route::Read(read) => {
            let group = served.read.as_ref().ok_or_else(missing)?;
            group.handle(registry, read, call, body).await
        }
        Route::Blob(key) => {
            let group = served.blob.as_ref().ok_or_else(missing)?;
            group.handle(registry, key, call, body).await
        }
        Route::Publish(publish) => {
            let group = served.publish.as_ref().ok_or_else(missing)?;
            group.handle(registry, publish, call, body).await
        }
        Route::Admin(admin) => {
            let group = served.admin.as_ref().ok_or_else(missing)?;
            group.handle(registry, admin, call, body).await
        }
        Route::Ui(page) => {
            let group = served.ui.as_ref().ok_or_else(missing)?;
            group.handle(registry, page, call, body).await
        }
        Route::Auth(step) => {
            let group = served.auth.as_ref().ok_or_else(missing)?;
            group.handle(registry, step, call, body).await
        }
    }
}

/// `/.well-known/terraform.json`: the services this registry offers, with
/// login.v1 where an identity provider is configured.
pub fn discovery_of(config: &crate::Config) -> Response {
    let services = Discovery {
        login_v1: config.login_v1.clone(),
        ..Discovery::default()
    };
    json(StatusCode::OK, &services)
}
