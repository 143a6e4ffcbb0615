//! Errors become HTTP here and only here: a refusal or failure from any
//! layer inside ([`Failed`]) is written as a UI error page on a UI path
//! (where this process serves the UI), a plain-text page for a sign-in's
//! browser steps, else `{"errors": [...]}`; every UI path's answer gets the
//! UI's security headers, error pages included.

use std::sync::Arc;

use http::{HeaderMap, Method, Uri};
use tfreg_model::router::is_ui_path;
use tfreg_model::token::Principal;

use super::Shared;
use super::facts::{Failed, RequestId, Routed};
use super::layer::{Inner, Job, Next};
use crate::body::{Request, Response, error_response, error_text};
use crate::groups::{Call, Pages};
use crate::session::Session;

/// What a UI error page is written for: the request, as it was asked.
struct Asked {
    method: Method,
    uri: Uri,
    headers: HeaderMap,
}

/// Writes failures as HTTP.
#[derive(Clone)]
pub(super) struct Errors(pub(super) Arc<Shared>);

impl Job for Errors {
    async fn run<S: Inner>(self, req: Request, next: Next<S>) -> Response {
        let shared = self.0;
        let request_id = RequestId::of(req.extensions());
        // A UI path's answers are pages, where this process serves the UI (kept:
        // the page is written for the request, which the layers inside take).
        let pages = shared
            .served
            .ui
            .as_ref()
            .filter(|_| is_ui_path(req.uri().path()));
        let asked = pages.map(|_| Asked {
            method: req.method().clone(),
            uri: req.uri().clone(),
            headers: req.headers().clone(),
        });
        let mut resp = next.run(req).await;
        if let Some(Failed(error)) = resp.extensions().get::<Failed>().cloned() {
            let mut page = match (pages, &asked) {
                (Some(ui), Some(asked)) => {
                    error_page(&shared, ui.as_ref(), &error, request_id, asked, &resp)
                }
                _ if resp
                    .extensions()
                    .get::<Routed>()
                    .is_some_and(|r| r.in_browser) =>
                {
                    error_text(&error, &request_id.to_string())
                }
                _ => error_response(&error, &request_id.to_string()),
            };
            // What the layers inside learned stays with the answer, for those outside.
            let facts = std::mem::take(resp.extensions_mut());
            page.extensions_mut().extend(facts);
            resp = page;
        }
        if let Some(ui) = pages {
            ui.secure(resp.headers_mut());
        }
        resp
    }
}

/// The UI's page for `error`, for whoever the authorisation found (anonymous
/// if it did not run), with the session it came with.
fn error_page(
    shared: &Shared,
    ui: &dyn Pages,
    error: &crate::Error,
    request_id: RequestId,
    asked: &Asked,
    failed: &Response,
) -> Response {
    let facts = failed.extensions();
    let call = Call {
        method: &asked.method,
        query: asked.uri.query(),
        headers: &asked.headers,
        principal: facts.get::<Principal>().unwrap_or(&Principal::Anonymous),
        session: facts.get::<Session>(),
    };
    ui.error_page(
        &shared.registry,
        error,
        &request_id.to_string(),
        &call,
        asked.uri.path(),
    )
}
