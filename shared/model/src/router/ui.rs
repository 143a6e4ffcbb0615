//! The web UI's routes, and how a `/ui/...` path maps to one.

use http::Method;

use crate::address::{ModuleName, ProviderName};
use crate::error::RouteError;
use crate::router::segments::{GET_HEAD_POST, POST, READ_METHODS, decode_segment, not_found};
use crate::token::{Realm, Scope};
use crate::version::Version;

/// The web UI's pages, each a GET (sign-in also a POST, sign-out only one).
#[derive(Debug, Clone, PartialEq, Eq, strum::EnumDiscriminants)]
#[strum_discriminants(
    name(UiPage),
    vis(pub),
    doc = "The web UI's pages: one per [`UiRoute`] variant, named in kebab case.",
    derive(Hash, PartialOrd, Ord, strum::VariantArray, strum::IntoStaticStr),
    strum(serialize_all = "kebab-case")
)]
pub enum UiRoute {
    /// `/`, `/ui` and `/ui/`: a redirect to the home page, which needs no
    /// store, so the discovery function (API Gateway's catch-all) answers it.
    Root,
    /// `/ui/home`: search and the latest changes.
    Home,
    /// `/ui/search?q=...`.
    Search,
    /// `/ui/namespaces/{namespace}`.
    Namespace { namespace: String },
    /// `/ui/modules/{ns}/{name}/{system}[/{version}]` (no version: the latest).
    Module {
        module: ModuleName,
        version: Option<Version>,
    },
    /// `/ui/providers/{ns}/{type}[/{version}]`.
    Provider {
        provider: ProviderName,
        version: Option<Version>,
    },
    /// `/ui/cache`: what the pull-through cache holds, by upstream (issue
    /// 22): what `GET /v1/admin/cache` answers, so it needs what that needs.
    Cache,
    /// `/ui/sign-in`: the form (GET) and a token given to it (POST).
    SignIn,
    /// `/ui/sign-out` (POST).
    SignOut,
    /// `/ui/static/{name}`: the stylesheet and script, their names carrying
    /// a hash of their content (cached for a year).
    Asset(String),
}

impl UiRoute {
    /// Every page but sign-in, sign-out and the assets needs a token (or
    /// anonymous reads, for a page that needs only [`Scope::Read`]) covering
    /// what it shows: its [`UiRoute::scope`] over this realm.
    pub fn realm(&self) -> Option<Realm<'_>> {
        match self {
            UiRoute::Root | UiRoute::SignIn | UiRoute::SignOut | UiRoute::Asset(_) => None,
            UiRoute::Home | UiRoute::Search => Some(Realm::AnyNamespace),
            // Registry-wide, as the admin API's listing of the cache
            // (`AdminRoute::ListCached`).
            UiRoute::Cache => Some(Realm::Registry),
            UiRoute::Namespace { namespace } => Some(Realm::Namespace(namespace)),
            UiRoute::Module { module, .. } => Some(Realm::Namespace(&module.namespace)),
            UiRoute::Provider { provider, .. } => Some(Realm::Namespace(&provider.namespace)),
        }
    }

    /// The scope a page needs over its [`UiRoute::realm`]: reading, but for
    /// the cache's page, which shows what only an admin may list through the
    /// API (`GET /v1/admin/cache`, `GET /v1/admin/upstreams`): the same rule,
    /// so the page shows nobody more than the API would.
    pub fn scope(&self) -> Scope {
        match self {
            UiRoute::Cache => Scope::Admin,
            UiRoute::Root
            | UiRoute::Home
            | UiRoute::Search
            | UiRoute::Namespace { .. }
            | UiRoute::Module { .. }
            | UiRoute::Provider { .. }
            | UiRoute::SignIn
            | UiRoute::SignOut
            | UiRoute::Asset(_) => Scope::Read,
        }
    }

    pub fn methods(&self) -> &'static [Method] {
        match self {
            UiRoute::SignIn => GET_HEAD_POST,
            UiRoute::SignOut => POST,
            _ => READ_METHODS,
        }
    }

    pub fn path(&self) -> String {
        let version = |v: &Option<Version>| v.as_ref().map(|v| format!("/{v}")).unwrap_or_default();
        match self {
            UiRoute::Root => "/".into(),
            UiRoute::Home => format!("{UI}/home"),
            UiRoute::Search => format!("{UI}/search"),
            UiRoute::Namespace { namespace } => format!("{UI}/namespaces/{namespace}"),
            UiRoute::Module { module, version: v } => {
                format!("{UI}/modules/{module}{}", version(v))
            }
            UiRoute::Provider {
                provider,
                version: v,
            } => {
                format!("{UI}/providers/{provider}{}", version(v))
            }
            UiRoute::Cache => format!("{UI}/cache"),
            UiRoute::SignIn => format!("{UI}/sign-in"),
            UiRoute::SignOut => format!("{UI}/sign-out"),
            UiRoute::Asset(name) => format!("{UI}/static/{name}"),
        }
    }
}

/// Where the web UI's paths start.
pub const UI: &str = "/ui";

/// Is `path` one of the web UI's (answered with HTML pages, errors included)?
pub fn is_ui_path(path: &str) -> bool {
    path == "/" || path == UI || path.starts_with("/ui/")
}

/// The web UI's page at `path` (one of [`is_ui_path`]).
pub(crate) fn ui_route(path: &str) -> Result<UiRoute, RouteError> {
    if path == "/" {
        return Ok(UiRoute::Root);
    }
    let rest = path.strip_prefix(UI).unwrap_or(path);
    let segs: Vec<_> = rest
        .split('/')
        .skip(1)
        .map(decode_segment)
        .collect::<Result<_, _>>()?;
    let s: Vec<&str> = segs.iter().map(AsRef::as_ref).collect();
    let version = |v: Option<&&str>| v.map(|v| Version::parse(v)).transpose();
    Ok(match s.as_slice() {
        [] | [""] => UiRoute::Root,
        ["home"] => UiRoute::Home,
        ["search"] => UiRoute::Search,
        ["cache"] => UiRoute::Cache,
        ["sign-in"] => UiRoute::SignIn,
        ["sign-out"] => UiRoute::SignOut,
        ["namespaces", ns] => UiRoute::Namespace {
            namespace: crate::address::namespace(ns)?,
        },
        ["modules", ns, name, system, v @ ..] if v.len() <= 1 => UiRoute::Module {
            module: ModuleName::parse(ns, name, system)?,
            version: version(v.first())?,
        },
        ["providers", ns, ty, v @ ..] if v.len() <= 1 => UiRoute::Provider {
            provider: ProviderName::parse(ns, ty)?,
            version: version(v.first())?,
        },
        // Which assets exist is the UI's to say (an old name is its 404).
        ["static", name]
            if (1..=64).contains(&name.len())
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b)) =>
        {
            UiRoute::Asset(name.to_string())
        }
        _ => return Err(not_found(path)),
    })
}

/// Where a sign-in may send the browser afterwards: a UI path of this
/// registry only (never another site, nor `//host`), else the home page.
pub fn safe_next(next: Option<&str>) -> String {
    match next {
        Some(n)
            if n.starts_with("/ui/") && !n.starts_with("//") && !n.contains(['\\', '\r', '\n']) =>
        {
            n.to_string()
        }
        _ => UiRoute::Home.path(),
    }
}
