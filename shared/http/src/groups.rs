//! What a process serves, decided where it starts: the handler groups it is
//! given. A Lambda function is built from a package that depends on its
//! group alone, and gives the pipeline only that group; `tfreg serve` and the
//! CLI give it every group. A route whose group a process was not given is
//! a 404 there, so a function answers only what it links.
//!
//! One trait per kind of route, each taking the route's own type: a new kind
//! of route is a new field here and a new arm in the pipeline's dispatch
//! (the compiler points at both); a new route of an existing kind is a new
//! arm in that group's `match`.

use std::sync::Arc;

use async_trait::async_trait;
use http::{HeaderMap, Method};
use tfreg_model::blob_key::BlobKey;
use tfreg_model::router::{AdminRoute, AuthRoute, PublishRoute, ReadRoute, UiRoute};
use tfreg_model::token::{Actor, Principal};

use crate::body::{Body, Response};
use crate::error::Error;
use crate::registry::Registry;
use crate::session::Session;

/// What a request brings to its handler besides its route and body.
pub struct Call<'a> {
    pub method: &'a Method,
    pub query: Option<&'a str>,
    pub headers: &'a HeaderMap,
    /// Who asked, already authorised for what the route needs.
    pub principal: &'a Principal,
    /// The web UI session the credential came from, if it did.
    pub session: Option<&'a Session>,
}

impl Call<'_> {
    /// The credential came from a web UI session cookie.
    pub fn signed_in(&self) -> bool {
        self.session.is_some()
    }
}

/// The handlers of one kind of route `R`.
#[async_trait]
pub trait Handler<R: Send + 'static>: Send + Sync {
    async fn handle(
        &self,
        registry: &Registry,
        route: R,
        call: Call<'_>,
        body: Body,
    ) -> Result<Response, Error>;
}

/// The web UI: its pages, and the form every answer on a UI path takes.
pub trait Pages: Handler<UiRoute> {
    /// A UI request's error as a page (a GET without a session: a redirect
    /// to the sign-in page).
    fn error_page(
        &self,
        registry: &Registry,
        err: &Error,
        request_id: &str,
        call: &Call<'_>,
        path: &str,
    ) -> Response;
    /// The security headers of every UI response, error pages included.
    fn secure(&self, headers: &mut HeaderMap);
}

/// What a handler tells the audit trail about a change it made (carried in
/// the response's extensions; the pipeline's audit layer folds it, with
/// [`AuditAs`] and [`Identified`], into its [`crate::pipeline::AuditRecord`]).
#[derive(Debug, Clone)]
pub struct Note(pub String);

/// The audit action of a change made by a route that does not always
/// change state (the sign-in callback issues a token only for the web UI):
/// carried in the response's extensions; the route's own action, if any,
/// comes first.
#[derive(Debug, Clone, Copy)]
pub struct AuditAs(pub &'static str);

/// Who a public route's handler found the caller to be (a sign-in, which
/// ends by issuing a token): carried in the response's extensions, named by
/// the audit record instead of "anonymous", and the record kept.
#[derive(Debug, Clone)]
pub struct Identified(pub Actor);

/// The groups one process serves. Discovery and the UI's root redirect need
/// no group: every process answers them.
#[derive(Clone, Default)]
pub struct Served {
    /// The provider, module and mirror protocols.
    pub read: Option<Arc<dyn Handler<ReadRoute>>>,
    /// Archives behind the registry's signed URLs.
    pub blob: Option<Arc<dyn Handler<BlobKey>>>,
    pub publish: Option<Arc<dyn Handler<PublishRoute>>>,
    pub admin: Option<Arc<dyn Handler<AdminRoute>>>,
    pub ui: Option<Arc<dyn Pages>>,
    /// Sign-in (login.v1, the identity provider's callback).
    pub auth: Option<Arc<dyn Handler<AuthRoute>>>,
}

impl Served {
    /// Nothing yet: add groups with the builders below.
    pub fn new() -> Self {
        Self::default()
    }

    pub fn read(mut self, handler: impl Handler<ReadRoute> + 'static) -> Self {
        self.read = Some(Arc::new(handler));
        self
    }

    pub fn blob(mut self, handler: impl Handler<BlobKey> + 'static) -> Self {
        self.blob = Some(Arc::new(handler));
        self
    }

    pub fn publish(mut self, handler: impl Handler<PublishRoute> + 'static) -> Self {
        self.publish = Some(Arc::new(handler));
        self
    }

    pub fn admin(mut self, handler: impl Handler<AdminRoute> + 'static) -> Self {
        self.admin = Some(Arc::new(handler));
        self
    }

    pub fn ui(mut self, pages: impl Pages + 'static) -> Self {
        self.ui = Some(Arc::new(pages));
        self
    }

    pub fn auth(mut self, handler: impl Handler<AuthRoute> + 'static) -> Self {
        self.auth = Some(Arc::new(handler));
        self
    }
}
