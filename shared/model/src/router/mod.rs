//! One router from a raw request path to a [`Route`], and back: [`Route::path`]
//! builds the path of a route, so clients (the `tfreg` CLI) never spell a path
//! themselves.
//!
//! Routes are grouped by kind — discovery, the read protocols, archives,
//! publishing — and every `match` over them is exhaustive: a new endpoint
//! without a handler, a function name or an access rule does not compile.
//! Every entry point (the local server, each Lambda function, tests) routes
//! through [`route`], so nobody relies on API Gateway path parameters.

mod admin;
mod auth;
mod endpoint;
mod kind;
mod oci;
mod publish;
mod read;
mod segments;
mod ui;

use http::Method;

pub use crate::release::LifecycleAction;
pub use admin::{AdminOp, AdminRoute};
pub use auth::{AUTHORIZE_PATH, AuthRoute, CALLBACK_PATH, EXCHANGE_PATH, SSO_PATH, TOKEN_PATH};
pub use endpoint::{Endpoint, EndpointKind};
pub use kind::RouteKind;
pub use oci::{OCI_PREFIX, OCI_TOKEN_PATH, OciRoute, repository_realm};
pub use publish::{PublishKind, PublishRoute, PublishStep, PublishTarget};
pub use read::{ReadEndpoint, ReadRoute};
pub use segments::MAX_PATH_LEN;
/// The lists of variants (`AuthRoute::VARIANTS`, `ReadEndpoint::VARIANTS`...).
pub use strum::VariantArray;
pub use ui::{UI, UiPage, UiRoute, is_ui_path, safe_next};

use crate::address::{Hostname, ModuleName, ProviderName};
use crate::blob_key::BlobKey;
use crate::error::RouteError;
use crate::protocol::{BLOBS_V1, DISCOVERY_PATH};
use crate::token::{Access, Scope};
use crate::version::Version;
use admin::admin_route;
use segments::{BLOB_METHODS, PUBLISH_METHODS, READ_METHODS, decode_segment, not_found};
use ui::ui_route;

/// A request with its parameters, already validated.
#[derive(Debug, Clone, PartialEq, Eq, strum::EnumDiscriminants)]
#[strum_discriminants(
    name(RouteClass),
    vis(pub),
    doc = "The kinds of [`Route`], one level down (every leaf: [`RouteKind`]).",
    derive(strum::VariantArray)
)]
pub enum Route {
    /// `/.well-known/terraform.json`.
    Discovery,
    /// The provider, module and mirror protocols (read-only).
    Read(ReadRoute),
    /// An archive behind a signed URL (GET/HEAD to download, PUT to upload).
    Blob(BlobKey),
    /// tfreg's publish API.
    Publish(PublishRoute),
    /// tfreg's admin API: tokens, signing keys, release lifecycle, audit.
    Admin(AdminRoute),
    /// The web UI: HTML pages, sign-in and its static assets.
    Ui(UiRoute),
    /// Sign-in through the identity provider (`terraform login`).
    Auth(AuthRoute),
}

impl Route {
    /// The endpoint (function) that serves this route.
    pub fn endpoint(&self) -> Endpoint {
        match self {
            Route::Discovery => Endpoint::Discovery,
            Route::Read(read) => Endpoint::Read(read.endpoint()),
            Route::Blob(_) => Endpoint::Blob,
            Route::Publish(_) => Endpoint::Publish,
            Route::Admin(_) => Endpoint::Admin,
            Route::Ui(UiRoute::Root) => Endpoint::Discovery,
            Route::Ui(_) => Endpoint::Ui,
            Route::Auth(_) => Endpoint::Auth,
        }
    }

    /// The methods this route answers (HEAD wherever GET, except the admin
    /// API, whose every route is one method).
    pub fn methods(&self) -> &'static [Method] {
        match self {
            Route::Discovery | Route::Read(_) => READ_METHODS,
            Route::Blob(_) => BLOB_METHODS,
            Route::Publish(_) => PUBLISH_METHODS,
            Route::Admin(admin) => admin.method(),
            Route::Ui(ui) => ui.methods(),
            Route::Auth(auth) => auth.method(),
        }
    }

    /// Who may use this route (the HTTP pipeline's `authorize` decides). Mirror
    /// reads of this registry's own providers (`own_host`) are in their
    /// namespace; of other registries' providers, registry-wide.
    pub fn access(&self, own_host: &Hostname) -> Access<'_> {
        let token = |scope, realm| Access::Token { scope, realm };
        match self {
            // A login never looks at a token: a stale one must not block it.
            Route::Discovery | Route::Blob(_) | Route::Auth(_) => Access::Public,
            // The token endpoint authorises the Basic credentials it is
            // sent itself, for the repositories it is asked for (crate
            // tfreg-read, through the same `authorize`).
            Route::Read(ReadRoute::Oci(OciRoute::Token)) => Access::Public,
            Route::Read(read) => token(Scope::Read, read.realm(own_host)),
            Route::Publish(publish) => token(Scope::Publish, publish.target.realm()),
            Route::Admin(admin) => token(Scope::Admin, admin.realm()),
            Route::Ui(UiRoute::SignOut) => Access::Session,
            Route::Ui(ui) => match ui.realm() {
                Some(realm) => token(ui.scope(), realm),
                None => Access::Public,
            },
        }
    }

    /// The audit trail's name for what this route changes (none for reads,
    /// lists and a publish's `begin`, which changes nothing visible).
    pub fn audit_action(&self) -> Option<&'static str> {
        match self {
            Route::Ui(UiRoute::SignOut) => Some("session.end"),
            Route::Discovery | Route::Read(_) | Route::Blob(_) | Route::Ui(_) => None,
            Route::Auth(AuthRoute::Token) => Some("token.login"),
            Route::Auth(AuthRoute::Exchange) => Some("token.exchange"),
            Route::Auth(_) => None,
            Route::Publish(p) => (p.step == PublishStep::Complete).then_some("publish"),
            Route::Admin(admin) => match admin {
                AdminRoute::ListTokens
                | AdminRoute::ListKeys { .. }
                | AdminRoute::Audit
                | AdminRoute::ListMappings
                | AdminRoute::ListTrust { .. }
                | AdminRoute::ListUpstreams
                | AdminRoute::ShowUpstream { .. }
                | AdminRoute::ListCached { .. }
                | AdminRoute::ProviderUsage { .. }
                | AdminRoute::ModuleUsage { .. } => None,
                AdminRoute::SetUpstream { .. } => Some("upstream.set"),
                AdminRoute::RemoveUpstream { .. } => Some("upstream.remove"),
                AdminRoute::MapGroup => Some("sso.map"),
                AdminRoute::UnmapGroup => Some("sso.unmap"),
                AdminRoute::AddTrust { .. } => Some("trust.add"),
                AdminRoute::RemoveTrust { .. } => Some("trust.remove"),
                AdminRoute::CreateToken => Some("token.create"),
                AdminRoute::RevokeToken { .. } => Some("token.revoke"),
                AdminRoute::AddKeys { .. } => Some("key.add"),
                AdminRoute::RemoveKey { .. } => Some("key.remove"),
                AdminRoute::Lifecycle { action, .. } => Some(match action {
                    LifecycleAction::Deprecate => "release.deprecate",
                    LifecycleAction::Undeprecate => "release.undeprecate",
                    LifecycleAction::Yank => "release.yank",
                    LifecycleAction::Unyank => "release.unyank",
                }),
                AdminRoute::Delete { .. } => Some("release.delete"),
            },
        }
    }

    /// What the audit trail names as the object of [`Self::audit_action`].
    pub fn audit_target(&self) -> String {
        match self {
            Route::Publish(p) => p.target.to_string(),
            Route::Admin(admin) => match admin {
                AdminRoute::RevokeToken { id } => format!("token {id}"),
                AdminRoute::AddKeys { namespace } | AdminRoute::ListKeys { namespace } => {
                    format!("keys of {namespace}")
                }
                AdminRoute::RemoveKey { namespace, key_id } => {
                    format!("key {key_id} of {namespace}")
                }
                AdminRoute::Lifecycle { release, .. } | AdminRoute::Delete { release } => {
                    release.to_string()
                }
                AdminRoute::ListTokens | AdminRoute::CreateToken => "tokens".into(),
                AdminRoute::Audit => "audit".into(),
                AdminRoute::ListMappings | AdminRoute::MapGroup | AdminRoute::UnmapGroup => {
                    "group mappings".into()
                }
                AdminRoute::ListTrust { namespace: None } => "trust policies".into(),
                AdminRoute::ListTrust {
                    namespace: Some(namespace),
                }
                | AdminRoute::AddTrust { namespace } => format!("trust policies of {namespace}"),
                AdminRoute::RemoveTrust { namespace, id } => {
                    format!("trust policy {id} of {namespace}")
                }
                AdminRoute::ListUpstreams => "upstreams".into(),
                AdminRoute::ListCached { .. } => "cache".into(),
                AdminRoute::ProviderUsage { provider } => format!("usage of {provider}"),
                AdminRoute::ModuleUsage { module } => format!("usage of {module}"),
                AdminRoute::ShowUpstream { host }
                | AdminRoute::SetUpstream { host }
                | AdminRoute::RemoveUpstream { host } => format!("upstream {host}"),
            },
            Route::Ui(UiRoute::SignOut) => "web UI session".into(),
            Route::Auth(AuthRoute::Token | AuthRoute::Callback | AuthRoute::Exchange) => {
                "tokens".into()
            }
            other => other.path(),
        }
    }

    /// The raw path of this route: `route(&m, &r.path()) == Ok(r)`.
    pub fn path(&self) -> String {
        match self {
            Route::Discovery => DISCOVERY_PATH.to_string(),
            Route::Read(read) => read.path(),
            Route::Blob(key) => format!("{BLOBS_V1}{key}"),
            Route::Publish(publish) => publish.path(),
            Route::Admin(admin) => admin.path(),
            Route::Ui(ui) => ui.path(),
            Route::Auth(auth) => auth.path().to_string(),
        }
    }
}

/// Map a request's method and raw path (no query string) to a [`Route`].
///
/// Unknown paths are 404, malformed parameters 400, a known path with the
/// wrong method 405 (listing the methods it takes). HEAD is accepted wherever GET is.
pub fn route(method: &Method, path: &str) -> Result<Route, RouteError> {
    if path.len() > MAX_PATH_LEN {
        return Err(RouteError::bad("path too long"));
    }
    let route = match_path(method, path)?;
    let allow = route.methods();
    if !allow.contains(method) {
        return Err(RouteError::MethodNotAllowed {
            method: method.clone(),
            allow,
        });
    }
    Ok(route)
}

fn match_path(method: &Method, path: &str) -> Result<Route, RouteError> {
    if path == DISCOVERY_PATH {
        return Ok(Route::Discovery);
    }
    if let Some(auth) = AuthRoute::of_path(path) {
        return Ok(Route::Auth(auth));
    }
    if is_ui_path(path) {
        return ui_route(path).map(Route::Ui);
    }
    if let Some(key) = path.strip_prefix(BLOBS_V1) {
        let key = key
            .split('/')
            .map(decode_segment)
            .collect::<Result<Vec<_>, _>>()?
            .join("/");
        let key = BlobKey::parse(&key).map_err(|e| RouteError::bad(e.to_string()))?;
        return Ok(Route::Blob(key));
    }
    if path == OCI_PREFIX || path.starts_with("/v2/") {
        return OciRoute::parse(path).map(|oci| Route::Read(ReadRoute::Oci(oci)));
    }
    let Some(rest) = path.strip_prefix("/v1/") else {
        return Err(not_found(path));
    };
    let segs: Vec<_> = rest
        .split('/')
        .map(decode_segment)
        .collect::<Result<_, _>>()?;
    let s: Vec<&str> = segs.iter().map(AsRef::as_ref).collect();
    if let Some(read) = ReadRoute::parse(&s) {
        return read.map(Route::Read);
    }
    let publish = |target: PublishTarget, st: &str| match PublishStep::parse(st) {
        Some(step) => Ok(Route::Publish(PublishRoute { target, step })),
        None => Err(not_found(path)),
    };
    match s.as_slice() {
        ["publish", "providers", ns, ty, v, st] => publish(
            PublishTarget::Provider {
                provider: ProviderName::parse(ns, ty)?,
                version: Version::parse(v)?,
            },
            st,
        ),
        ["publish", "modules", ns, name, system, v, st] => publish(
            PublishTarget::Module {
                module: ModuleName::parse(ns, name, system)?,
                version: Version::parse(v)?,
            },
            st,
        ),
        ["publish", "mirror", host, ns, ty, v, st] => publish(
            PublishTarget::Mirror {
                hostname: Hostname::parse(host)?,
                provider: ProviderName::parse(ns, ty)?,
                version: Version::parse(v)?,
            },
            st,
        ),
        ["admin", rest @ ..] => admin_route(method, rest, path).map(Route::Admin),
        _ => Err(not_found(path)),
    }
}

/// A publish target from its path form (how a publish record stores it).
impl TryFrom<String> for PublishTarget {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        let path = format!("/v1/publish/{s}/begin");
        match match_path(&Method::POST, &path) {
            Ok(Route::Publish(p)) => Ok(p.target),
            _ => Err(format!("not a publish target: {s}")),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests;
