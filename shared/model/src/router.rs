//! One router from a raw request path to a [`Route`], and back: [`Route::path`]
//! builds the path of a route, so clients (the `tfreg` CLI) never spell a path
//! themselves.
//!
//! Routes are grouped by kind — discovery, the read protocols, archives,
//! publishing — and every `match` over them is exhaustive: a new endpoint
//! without a handler, a function name or an access rule does not compile.
//! Every entry point (the local server, each Lambda function, tests) routes
//! through [`route`], so nobody relies on API Gateway path parameters.

use http::Method;

use crate::address::{Hostname, ModuleName, Platform, ProviderName};
use crate::blob_key::BlobKey;
use crate::error::RouteError;
use crate::protocol::{ADMIN_V1, BLOBS_V1, DISCOVERY_PATH};
pub use crate::release::LifecycleAction;
use crate::token::{Access, Realm, Scope};
use crate::version::Version;

/// The two calls of every publish: announce the files, then finish after uploading them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PublishStep {
    Begin,
    Complete,
}

impl PublishStep {
    fn segment(self) -> &'static str {
        match self {
            PublishStep::Begin => "begin",
            PublishStep::Complete => "complete",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        match s {
            "begin" => Some(PublishStep::Begin),
            "complete" => Some(PublishStep::Complete),
            _ => None,
        }
    }
}

/// A request with its parameters, already validated.
#[derive(Debug, Clone, PartialEq, Eq)]
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
}

/// The web UI's pages, each a GET (sign-in also a POST, sign-out only one).
#[derive(Debug, Clone, PartialEq, Eq)]
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
    /// `/ui/sign-in`: the form (GET) and a token given to it (POST).
    SignIn,
    /// `/ui/sign-out` (POST).
    SignOut,
    /// `/ui/static/{name}`: the stylesheet and script, their names carrying
    /// a hash of their content (cached for a year).
    Asset(String),
}

impl UiRoute {
    /// Every page but sign-in, sign-out and the assets needs a read token
    /// (or anonymous reads) for what it shows.
    pub fn realm(&self) -> Option<Realm<'_>> {
        match self {
            UiRoute::Root | UiRoute::SignIn | UiRoute::SignOut | UiRoute::Asset(_) => None,
            UiRoute::Home | UiRoute::Search => Some(Realm::AnyNamespace),
            UiRoute::Namespace { namespace } => Some(Realm::Namespace(namespace)),
            UiRoute::Module { module, .. } => Some(Realm::Namespace(&module.namespace)),
            UiRoute::Provider { provider, .. } => Some(Realm::Namespace(&provider.namespace)),
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

/// What the admin API does: one variant per operation (the method is part
/// of it: `GET /v1/admin/tokens` lists, `POST` creates).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AdminRoute {
    /// `GET /v1/admin/tokens`.
    ListTokens,
    /// `POST /v1/admin/tokens` with a [`crate::token::NewToken`].
    CreateToken,
    /// `DELETE /v1/admin/tokens/{id}`.
    RevokeToken { id: String },
    /// `GET /v1/admin/keys/{namespace}`.
    ListKeys { namespace: String },
    /// `POST /v1/admin/keys/{namespace}` with ASCII-armored public keys.
    AddKeys { namespace: String },
    /// `DELETE /v1/admin/keys/{namespace}/{key_id}`.
    RemoveKey { namespace: String, key_id: String },
    /// `POST /v1/admin/{release}/{deprecate|undeprecate|yank|unyank}`.
    Lifecycle {
        release: PublishTarget,
        action: LifecycleAction,
    },
    /// `DELETE /v1/admin/{release}`.
    Delete { release: PublishTarget },
    /// `GET /v1/admin/audit[?limit=N]`.
    Audit,
}

/// The read endpoints of the provider, module and network mirror protocols.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadRoute {
    ProviderVersions {
        provider: ProviderName,
    },
    ProviderDownload {
        provider: ProviderName,
        version: Version,
        platform: Platform,
    },
    ModuleVersions {
        module: ModuleName,
    },
    ModuleDownload {
        module: ModuleName,
        version: Version,
    },
    MirrorIndex {
        hostname: Hostname,
        provider: ProviderName,
    },
    MirrorVersion {
        hostname: Hostname,
        provider: ProviderName,
        version: Version,
    },
}

/// What a publish is for.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum PublishTarget {
    /// A signed provider release of this registry.
    Provider {
        provider: ProviderName,
        version: Version,
    },
    /// A module version.
    Module {
        module: ModuleName,
        version: Version,
    },
    /// Provider packages of another registry, for the network mirror.
    Mirror {
        hostname: Hostname,
        provider: ProviderName,
        version: Version,
    },
}

/// One call of a publish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublishRoute {
    pub target: PublishTarget,
    pub step: PublishStep,
}

/// Which function serves a route: names the Lambda function, its log lines
/// and its template entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Endpoint {
    Discovery,
    ProviderVersions,
    ProviderDownload,
    ModuleVersions,
    ModuleDownload,
    MirrorIndex,
    MirrorVersion,
    Blob,
    Publish,
    Admin,
    Ui,
}

impl Endpoint {
    /// Every endpoint, for drift checks between the router, functions and template.
    pub const ALL: [Endpoint; 11] = [
        Endpoint::Discovery,
        Endpoint::ProviderVersions,
        Endpoint::ProviderDownload,
        Endpoint::ModuleVersions,
        Endpoint::ModuleDownload,
        Endpoint::MirrorIndex,
        Endpoint::MirrorVersion,
        Endpoint::Blob,
        Endpoint::Publish,
        Endpoint::Admin,
        Endpoint::Ui,
    ];

    /// The endpoint of a [`name`](Self::name), exactly as spelled there.
    pub fn from_name(name: &str) -> Option<Endpoint> {
        Self::ALL.into_iter().find(|e| e.name() == name)
    }

    /// A short stable name, used in logs and as the function name.
    pub fn name(self) -> &'static str {
        match self {
            Endpoint::Discovery => "discovery",
            Endpoint::ProviderVersions => "provider-versions",
            Endpoint::ProviderDownload => "provider-download",
            Endpoint::ModuleVersions => "module-versions",
            Endpoint::ModuleDownload => "module-download",
            Endpoint::MirrorIndex => "mirror-index",
            Endpoint::MirrorVersion => "mirror-version",
            Endpoint::Blob => "blob",
            Endpoint::Publish => "publish",
            Endpoint::Admin => "admin",
            Endpoint::Ui => "ui",
        }
    }
}

const READ_METHODS: &[Method] = &[Method::GET, Method::HEAD];
const BLOB_METHODS: &[Method] = &[Method::GET, Method::HEAD, Method::PUT];
const PUBLISH_METHODS: &[Method] = &[Method::POST];
const GET: &[Method] = &[Method::GET];
const GET_POST: &[Method] = &[Method::GET, Method::POST];
const DELETE: &[Method] = &[Method::DELETE];
const POST: &[Method] = &[Method::POST];
const GET_HEAD_POST: &[Method] = &[Method::GET, Method::HEAD, Method::POST];

impl Route {
    /// The endpoint (function) that serves this route.
    pub fn endpoint(&self) -> Endpoint {
        match self {
            Route::Discovery => Endpoint::Discovery,
            Route::Read(read) => read.endpoint(),
            Route::Blob(_) => Endpoint::Blob,
            Route::Publish(_) => Endpoint::Publish,
            Route::Admin(_) => Endpoint::Admin,
            Route::Ui(UiRoute::Root) => Endpoint::Discovery,
            Route::Ui(_) => Endpoint::Ui,
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
        }
    }

    /// Who may use this route (the HTTP pipeline's `authorize` decides). Mirror
    /// reads of this registry's own providers (`own_host`) are in their
    /// namespace; of other registries' providers, registry-wide.
    pub fn access(&self, own_host: &Hostname) -> Access<'_> {
        let token = |scope, realm| Access::Token { scope, realm };
        match self {
            Route::Discovery | Route::Blob(_) => Access::Public,
            Route::Read(read) => token(Scope::Read, read.realm(own_host)),
            Route::Publish(publish) => token(Scope::Publish, publish.target.realm()),
            Route::Admin(admin) => token(Scope::Admin, admin.realm()),
            Route::Ui(ui) => match ui.realm() {
                Some(realm) => token(Scope::Read, realm),
                None => Access::Public,
            },
        }
    }

    /// The audit trail's name for what this route changes (none for reads,
    /// lists and a publish's `begin`, which changes nothing visible).
    pub fn audit_action(&self) -> Option<&'static str> {
        match self {
            Route::Discovery | Route::Read(_) | Route::Blob(_) | Route::Ui(_) => None,
            Route::Publish(p) => (p.step == PublishStep::Complete).then_some("publish"),
            Route::Admin(admin) => match admin {
                AdminRoute::ListTokens | AdminRoute::ListKeys { .. } | AdminRoute::Audit => None,
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
            },
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
        }
    }
}

impl AdminRoute {
    /// One of every admin operation, on these releases (for tests of the
    /// routes and of who may use them).
    pub fn examples(targets: &[PublishTarget]) -> Vec<AdminRoute> {
        let mut all = vec![
            AdminRoute::ListTokens,
            AdminRoute::CreateToken,
            AdminRoute::RevokeToken {
                id: "0123456789ab".into(),
            },
            AdminRoute::ListKeys {
                namespace: "team".into(),
            },
            AdminRoute::AddKeys {
                namespace: "team".into(),
            },
            AdminRoute::RemoveKey {
                namespace: "team".into(),
                key_id: "0123456789ABCDEF".into(),
            },
            AdminRoute::Audit,
        ];
        for release in targets {
            all.push(AdminRoute::Delete {
                release: release.clone(),
            });
            for action in LifecycleAction::ALL {
                all.push(AdminRoute::Lifecycle {
                    release: release.clone(),
                    action,
                });
            }
        }
        all
    }

    /// The one method of this operation.
    pub fn method(&self) -> &'static [Method] {
        match self {
            AdminRoute::ListTokens | AdminRoute::ListKeys { .. } | AdminRoute::Audit => GET,
            AdminRoute::CreateToken | AdminRoute::AddKeys { .. } | AdminRoute::Lifecycle { .. } => {
                POST
            }
            AdminRoute::RevokeToken { .. }
            | AdminRoute::RemoveKey { .. }
            | AdminRoute::Delete { .. } => DELETE,
        }
    }

    /// Token management and the audit trail are registry-wide; keys and
    /// releases are in their namespace.
    pub fn realm(&self) -> Realm<'_> {
        match self {
            AdminRoute::ListTokens
            | AdminRoute::CreateToken
            | AdminRoute::RevokeToken { .. }
            | AdminRoute::Audit => Realm::Registry,
            AdminRoute::ListKeys { namespace }
            | AdminRoute::AddKeys { namespace }
            | AdminRoute::RemoveKey { namespace, .. } => Realm::Namespace(namespace),
            AdminRoute::Lifecycle { release, .. } | AdminRoute::Delete { release } => {
                release.realm()
            }
        }
    }

    pub fn path(&self) -> String {
        match self {
            AdminRoute::ListTokens | AdminRoute::CreateToken => format!("{ADMIN_V1}tokens"),
            AdminRoute::RevokeToken { id } => format!("{ADMIN_V1}tokens/{id}"),
            AdminRoute::ListKeys { namespace } | AdminRoute::AddKeys { namespace } => {
                format!("{ADMIN_V1}keys/{namespace}")
            }
            AdminRoute::RemoveKey { namespace, key_id } => {
                format!("{ADMIN_V1}keys/{namespace}/{key_id}")
            }
            AdminRoute::Lifecycle { release, action } => {
                format!("{ADMIN_V1}{}/{}", release.segments(), action.name())
            }
            AdminRoute::Delete { release } => format!("{ADMIN_V1}{}", release.segments()),
            AdminRoute::Audit => format!("{ADMIN_V1}audit"),
        }
    }
}

impl ReadRoute {
    /// Reads are in their provider's or module's namespace, except mirror
    /// reads of other registries' providers.
    pub fn realm(&self, own_host: &Hostname) -> Realm<'_> {
        match self {
            ReadRoute::ProviderVersions { provider }
            | ReadRoute::ProviderDownload { provider, .. } => Realm::Namespace(&provider.namespace),
            ReadRoute::ModuleVersions { module } | ReadRoute::ModuleDownload { module, .. } => {
                Realm::Namespace(&module.namespace)
            }
            ReadRoute::MirrorIndex { hostname, provider }
            | ReadRoute::MirrorVersion {
                hostname, provider, ..
            } => {
                if hostname == own_host {
                    Realm::Namespace(&provider.namespace)
                } else {
                    Realm::Registry
                }
            }
        }
    }

    pub fn endpoint(&self) -> Endpoint {
        match self {
            ReadRoute::ProviderVersions { .. } => Endpoint::ProviderVersions,
            ReadRoute::ProviderDownload { .. } => Endpoint::ProviderDownload,
            ReadRoute::ModuleVersions { .. } => Endpoint::ModuleVersions,
            ReadRoute::ModuleDownload { .. } => Endpoint::ModuleDownload,
            ReadRoute::MirrorIndex { .. } => Endpoint::MirrorIndex,
            ReadRoute::MirrorVersion { .. } => Endpoint::MirrorVersion,
        }
    }

    pub fn path(&self) -> String {
        match self {
            ReadRoute::ProviderVersions { provider } => {
                format!("/v1/providers/{provider}/versions")
            }
            ReadRoute::ProviderDownload {
                provider,
                version,
                platform,
            } => format!(
                "/v1/providers/{provider}/{version}/download/{}/{}",
                platform.os, platform.arch
            ),
            ReadRoute::ModuleVersions { module } => format!("/v1/modules/{module}/versions"),
            ReadRoute::ModuleDownload { module, version } => {
                format!("/v1/modules/{module}/{version}/download")
            }
            ReadRoute::MirrorIndex { hostname, provider } => {
                format!(
                    "/v1/mirror/{}/{provider}/index.json",
                    host_segment(hostname)
                )
            }
            ReadRoute::MirrorVersion {
                hostname,
                provider,
                version,
            } => format!(
                "/v1/mirror/{}/{provider}/{version}.json",
                host_segment(hostname)
            ),
        }
    }
}

impl PublishTarget {
    /// `providers/ns/type/1.0.0`, `modules/ns/name/system/1.0.0` or `mirror/host/ns/type/1.0.0`.
    fn segments(&self) -> String {
        match self {
            PublishTarget::Provider { provider, version } => {
                format!("providers/{provider}/{version}")
            }
            PublishTarget::Module { module, version } => format!("modules/{module}/{version}"),
            PublishTarget::Mirror {
                hostname,
                provider,
                version,
            } => format!("mirror/{}/{provider}/{version}", host_segment(hostname)),
        }
    }

    /// What a token must cover to publish or manage this: its namespace;
    /// mirror imports (other registries' providers) are registry-wide.
    pub fn realm(&self) -> Realm<'_> {
        match self {
            PublishTarget::Provider { provider, .. } => Realm::Namespace(&provider.namespace),
            PublishTarget::Module { module, .. } => Realm::Namespace(&module.namespace),
            PublishTarget::Mirror { .. } => Realm::Registry,
        }
    }

    /// The version being published.
    pub fn version(&self) -> &Version {
        match self {
            PublishTarget::Provider { version, .. }
            | PublishTarget::Module { version, .. }
            | PublishTarget::Mirror { version, .. } => version,
        }
    }
}

impl std::fmt::Display for PublishTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.segments())
    }
}

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

impl From<PublishTarget> for String {
    fn from(t: PublishTarget) -> String {
        t.segments()
    }
}

impl PublishRoute {
    pub fn path(&self) -> String {
        format!(
            "/v1/publish/{}/{}",
            self.target.segments(),
            self.step.segment()
        )
    }
}

/// A hostname as one path segment: `:` (before a port) is escaped.
fn host_segment(host: &Hostname) -> String {
    host.as_str().replace(':', "%3A")
}

/// Decode one `%XX`-escaped path segment; refuse escapes that would change the
/// path's structure (`/`, `\`, NUL) or invalid UTF-8.
fn decode_segment(seg: &str) -> Result<String, RouteError> {
    let bad = || RouteError::bad(format!("malformed path segment {seg:?}"));
    if !seg.contains('%') {
        return Ok(seg.to_string());
    }
    let bytes = seg.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = seg
                .get(i + 1..i + 3)
                .filter(|h| h.bytes().all(|c| c.is_ascii_hexdigit()))
                .ok_or_else(bad)?;
            let b = u8::from_str_radix(hex, 16).map_err(|_| bad())?;
            if matches!(b, b'/' | b'\\' | 0) {
                return Err(bad());
            }
            out.push(b);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| bad())
}

fn not_found(path: &str) -> RouteError {
    // Bounded: the path may be 2 KB of junk.
    let shown: String = path.chars().take(120).collect();
    RouteError::not_found(format!("no such endpoint: {shown}"))
}

/// Longest path the router looks at.
pub const MAX_PATH_LEN: usize = 2048;

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
    let Some(rest) = path.strip_prefix("/v1/") else {
        return Err(not_found(path));
    };
    let segs: Vec<String> = rest
        .split('/')
        .map(decode_segment)
        .collect::<Result<_, _>>()?;
    let s: Vec<&str> = segs.iter().map(String::as_str).collect();
    let read = |r: ReadRoute| Ok(Route::Read(r));
    let publish = |target: PublishTarget, st: &str| match PublishStep::parse(st) {
        Some(step) => Ok(Route::Publish(PublishRoute { target, step })),
        None => Err(not_found(path)),
    };
    match s.as_slice() {
        ["providers", ns, ty, "versions"] => read(ReadRoute::ProviderVersions {
            provider: ProviderName::parse(ns, ty)?,
        }),
        ["providers", ns, ty, v, "download", os, arch] => read(ReadRoute::ProviderDownload {
            provider: ProviderName::parse(ns, ty)?,
            version: Version::parse(v)?,
            platform: Platform::parse(os, arch)?,
        }),
        ["modules", ns, name, system, "versions"] => read(ReadRoute::ModuleVersions {
            module: ModuleName::parse(ns, name, system)?,
        }),
        ["modules", ns, name, system, v, "download"] => read(ReadRoute::ModuleDownload {
            module: ModuleName::parse(ns, name, system)?,
            version: Version::parse(v)?,
        }),
        ["mirror", host, ns, ty, "index.json"] => read(ReadRoute::MirrorIndex {
            hostname: Hostname::parse(host)?,
            provider: ProviderName::parse(ns, ty)?,
        }),
        ["mirror", host, ns, ty, file] if file.ends_with(".json") => {
            read(ReadRoute::MirrorVersion {
                hostname: Hostname::parse(host)?,
                provider: ProviderName::parse(ns, ty)?,
                version: Version::parse(&file[..file.len() - ".json".len()])?,
            })
        }
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
        ["admin", rest @ ..] => admin_route(method, rest, path),
        _ => Err(not_found(path)),
    }
}

/// The admin operation of `method` on `/v1/admin/<rest>`: 405 listing the
/// path's methods when it has no such operation.
fn admin_route(method: &Method, rest: &[&str], path: &str) -> Result<Route, RouteError> {
    use AdminRoute as A;
    let pick = |choices: &[(Method, AdminRoute)], allow: &'static [Method]| {
        choices
            .iter()
            .find(|(m, _)| m == method)
            .map(|(_, r)| Route::Admin(r.clone()))
            .ok_or_else(|| RouteError::MethodNotAllowed {
                method: method.clone(),
                allow,
            })
    };
    let release = |release: PublishTarget, action: Option<&str>| match action {
        None => pick(&[(Method::DELETE, A::Delete { release })], DELETE),
        Some(a) => match LifecycleAction::parse(a) {
            Some(action) => pick(&[(Method::POST, A::Lifecycle { release, action })], POST),
            None => Err(not_found(path)),
        },
    };
    match rest {
        ["tokens"] => pick(
            &[(Method::GET, A::ListTokens), (Method::POST, A::CreateToken)],
            GET_POST,
        ),
        ["tokens", id] => {
            let id = token_id(id)?;
            pick(&[(Method::DELETE, A::RevokeToken { id })], DELETE)
        }
        ["keys", ns] => {
            let namespace = crate::address::namespace(ns)?;
            pick(
                &[
                    (
                        Method::GET,
                        A::ListKeys {
                            namespace: namespace.clone(),
                        },
                    ),
                    (Method::POST, A::AddKeys { namespace }),
                ],
                GET_POST,
            )
        }
        ["keys", ns, key_id] => {
            let namespace = crate::address::namespace(ns)?;
            let key_id = key_id_segment(key_id)?;
            pick(
                &[(Method::DELETE, A::RemoveKey { namespace, key_id })],
                DELETE,
            )
        }
        ["providers", ns, ty, v, action @ ..] if action.len() <= 1 => release(
            PublishTarget::Provider {
                provider: ProviderName::parse(ns, ty)?,
                version: Version::parse(v)?,
            },
            action.first().copied(),
        ),
        ["modules", ns, name, system, v, action @ ..] if action.len() <= 1 => release(
            PublishTarget::Module {
                module: ModuleName::parse(ns, name, system)?,
                version: Version::parse(v)?,
            },
            action.first().copied(),
        ),
        ["mirror", host, ns, ty, v, action @ ..] if action.len() <= 1 => release(
            PublishTarget::Mirror {
                hostname: Hostname::parse(host)?,
                provider: ProviderName::parse(ns, ty)?,
                version: Version::parse(v)?,
            },
            action.first().copied(),
        ),
        ["audit"] => pick(&[(Method::GET, A::Audit)], GET),
        _ => Err(not_found(path)),
    }
}

/// The web UI's page at `path` (one of [`is_ui_path`]).
fn ui_route(path: &str) -> Result<UiRoute, RouteError> {
    if path == "/" {
        return Ok(UiRoute::Root);
    }
    let rest = path.strip_prefix(UI).unwrap_or(path);
    let segs: Vec<String> = rest
        .split('/')
        .skip(1)
        .map(decode_segment)
        .collect::<Result<_, _>>()?;
    let s: Vec<&str> = segs.iter().map(String::as_str).collect();
    let version = |v: Option<&&str>| v.map(|v| Version::parse(v)).transpose();
    Ok(match s.as_slice() {
        [] | [""] => UiRoute::Root,
        ["home"] => UiRoute::Home,
        ["search"] => UiRoute::Search,
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

/// A token's public id: [`crate::token::TOKEN_ID_LEN`] hex digits, lowercase.
fn token_id(s: &str) -> Result<String, RouteError> {
    if s.len() == crate::token::TOKEN_ID_LEN && s.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(s.to_ascii_lowercase())
    } else {
        Err(RouteError::bad(format!(
            "invalid token id {:?}: {} hex digits, as `tfreg token list` shows",
            s.chars().take(40).collect::<String>(),
            crate::token::TOKEN_ID_LEN
        )))
    }
}

/// An OpenPGP key id: 16 hex digits, uppercase.
fn key_id_segment(s: &str) -> Result<String, RouteError> {
    if s.len() == 16 && s.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(s.to_ascii_uppercase())
    } else {
        Err(RouteError::bad(format!(
            "invalid key id {:?}: 16 hex digits, as `tfreg key list` shows",
            s.chars().take(40).collect::<String>()
        )))
    }
}

#[cfg(test)]
pub(crate) mod tests;
