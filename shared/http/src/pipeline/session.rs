//! A browser's session: on a UI route asked without an `Authorization`
//! header, the session cookie, if this registry MAC'd it and it is
//! unexpired (whether it was signed out of is the authorisation's to
//! check). No signing secret yet: no session can exist.

use std::sync::Arc;

use http::HeaderMap;
use tfreg_model::router::Route;

use super::Shared;
use super::layer::{Inner, Job, Next};
use crate::body::{Request, Response, authorization};
use crate::registry::Registry;
use crate::session::{self, Session};

/// Finds a browser's session.
#[derive(Clone)]
pub(super) struct UiSession(pub(super) Arc<Shared>);

impl Job for UiSession {
    async fn run<S: Inner>(self, mut req: Request, next: Next<S>) -> Response {
        let shared = self.0;
        // Only this layer says what the session is.
        req.extensions_mut().remove::<Session>();
        let ui = matches!(req.extensions().get::<Route>(), Some(Route::Ui(_)));
        let found = if ui && authorization(req.headers()).is_none() {
            ui_session(&shared.registry, req.headers()).await
        } else {
            None
        };
        let Some(found) = found else {
            return next.run(req).await;
        };
        req.extensions_mut().insert(found.clone());
        let mut resp = next.run(req).await;
        // A UI error page says who is signed in.
        resp.extensions_mut().insert(found);
        resp
    }
}

async fn ui_session(registry: &Registry, headers: &HeaderMap) -> Option<Session> {
    session::cookie(headers, session::COOKIE)?;
    let signer = registry.signer_if_ready().await.ok()??;
    session::read(signer, headers, registry.now())
}
