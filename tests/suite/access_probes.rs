//! The access matrix's requests: at least one for every kind of route
//! ([`RouteKind::all`], derived from the router's enums; the match below is
//! exhaustive, so a new kind does not compile without its probe and the
//! matrix fails on a kind without one), each over real data, so that where
//! the rules allow a credential the handler runs and succeeds (2xx/3xx): a
//! 400 or 404 is never "allowed". What a request changes (a token revoked,
//! a release deleted, a publish completed) is made afresh for each
//! credential it is sent with.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use http::Method;
use serde_json::{Value, json};
use tfreg_auth::{Auth, CiSettings, Exchange, LoginSettings, OidcConfig, Secret, Upstream};
use tfreg_http::registry::unix_now;
use tfreg_http::{App, Served};
use tfreg_model::cache::module::{CachedModuleRelease, ModuleOrigin};
use tfreg_model::cache::{CachedArchive, CachedRelease, OriginList, OriginVersion, StoredArchive};
use tfreg_model::login::{CLI_CLIENT_ID, pkce_challenge, random_value};
use tfreg_model::protocol::{PublishBegin, PublishRequest};
use tfreg_model::router::{
    AdminOp, AuthRoute, LifecycleAction, PublishKind, PublishStep, PublishTarget, ReadEndpoint,
    RouteKind, UiPage, VariantArray as _,
};
use tfreg_model::sso::GroupMapping;
use tfreg_model::token::Scope;
use tfreg_store::catalog::cache::CachedProvider;
use tfreg_store::catalog::cached_module::CachedModule;
use tfreg_store::catalog::sso;
use tfreg_testkit::oidc::{Browser, Provider, query_param};
use tfreg_testkit::{
    PUBLIC_URL, TestRegistry, TestResponse, TestSigner, decl, every_group, module_archive,
    provider_release,
};

use crate::ci_exchange::{Issuer, github_claims, github_policy, trust};

use super::{A, B, Need, id_of, named, send, target};

/// The upstream registry the cache's probes read (its items written here).
pub(super) const UPSTREAM: &str = "registry.example.test";
/// Another registry whose provider is imported for the mirror.
const MIRRORED: &str = "registry.terraform.io";

/// A number for each fresh thing, unique in the test binary.
static FRESH: AtomicUsize = AtomicUsize::new(0);

fn fresh() -> usize {
    FRESH.fetch_add(1, Ordering::Relaxed)
}

/// A set-up request's answer, which must be a success.
fn done(resp: TestResponse, what: &str) -> TestResponse {
    assert!(
        resp.status.is_success(),
        "{what}: {} {}",
        resp.status,
        resp.text()
    );
    resp
}

/// What the probes need: an admin token to set things up with, the signer
/// of the fixtures, a signed archive URL's path, the registry's own host.
pub(super) struct Fixtures {
    pub admin: String,
    pub signer: TestSigner,
    pub blob: String,
    /// The OCI digest of that archive (its sha256), a layer of the
    /// provider's OCI view.
    pub layer: String,
    /// The registry's hostname as a path segment (`:` escaped).
    pub own_host: String,
    /// Sign-in, where the matrix runs in-process (the Lambda functions'
    /// run has no identity provider).
    pub sign_in: Option<SignIn>,
}

/// How a probe's request is made.
pub(super) enum Make {
    /// The same request for every credential (it changes nothing, or
    /// changes it the same way each time).
    Fixed { path: String, body: Value },
    /// Revoke a token made for it.
    RevokeToken,
    /// Add a key to a namespace of its own.
    AddKey,
    /// Remove a key added for it.
    RemoveKey,
    /// Delete a module version published for it.
    DeleteRelease,
    /// Unmap a group mapped for it.
    UnmapGroup,
    /// Remove a trust policy added for it.
    RemoveTrust,
    /// Remove an upstream set for it.
    RemoveUpstream,
    /// Begin a publish of a new version.
    Begin(PublishKind),
    /// Complete a publish begun (and uploaded) for it.
    Complete(PublishKind),
    /// Come back from the identity provider, signed in there for it.
    Callback,
    /// Redeem a code issued for it.
    RedeemCode,
    /// Exchange a CI job's token minted for it.
    Exchange,
}

/// A probe's request for one credential.
pub(super) struct Req {
    pub path: String,
    pub body: Bytes,
    /// Besides the credential's `authorization`.
    pub headers: Vec<(String, String)>,
}

/// One row of the matrix.
pub(super) struct Probe {
    pub kind: RouteKind,
    pub name: String,
    pub method: Method,
    pub need: Need,
    pub make: Make,
    /// The credential goes as Basic's password (the OCI token endpoint),
    /// not as a bearer.
    pub basic: bool,
}

fn fixed(path: impl Into<String>, body: Value) -> Make {
    Make::Fixed {
        path: path.into(),
        body,
    }
}

fn get(path: impl Into<String>) -> Make {
    fixed(path, Value::Null)
}

/// Every probe: those of each kind of route, in the order of the kinds;
/// sign-in's with `sign_in` (where the matrix has an identity provider).
pub(super) fn probes(fx: &Fixtures, sign_in: bool) -> Vec<Probe> {
    RouteKind::all()
        .into_iter()
        .flat_map(|kind| of_kind(kind, fx, sign_in))
        .collect()
}

/// The probes of one kind of route.
fn of_kind(kind: RouteKind, fx: &Fixtures, sign_in: bool) -> Vec<Probe> {
    let probe = |name: &str, method: Method, need: Need, make: Make| Probe {
        kind,
        name: name.to_string(),
        method,
        need,
        make,
        basic: false,
    };
    let read_a = Need::Token(Scope::Read, Some(A));
    let registry_read = Need::Token(Scope::Read, None);
    let admin = Need::Token(Scope::Admin, None);
    let own = &fx.own_host;
    match kind {
        RouteKind::Discovery => vec![probe(
            "discovery",
            Method::GET,
            Need::Nothing,
            get("/.well-known/terraform.json"),
        )],
        RouteKind::Read(e) => vec![match e {
            ReadEndpoint::ProviderVersions => probe(
                "provider versions",
                Method::GET,
                read_a,
                get(format!("/v1/providers/{A}/null/versions")),
            ),
            ReadEndpoint::ProviderDownload => probe(
                "provider download",
                Method::GET,
                read_a,
                get(format!("/v1/providers/{A}/null/1.0.0/download/linux/amd64")),
            ),
            ReadEndpoint::ModuleVersions => probe(
                "module versions",
                Method::GET,
                read_a,
                get(format!("/v1/modules/{A}/m/aws/versions")),
            ),
            ReadEndpoint::ModuleDownload => probe(
                "module download",
                Method::GET,
                read_a,
                get(format!("/v1/modules/{A}/m/aws/1.0.0/download")),
            ),
            ReadEndpoint::MirrorIndex => probe(
                "mirror index (own host)",
                Method::GET,
                read_a,
                get(format!("/v1/mirror/{own}/{A}/null/index.json")),
            ),
            ReadEndpoint::MirrorVersion => probe(
                "mirror version (own host)",
                Method::GET,
                read_a,
                get(format!("/v1/mirror/{own}/{A}/null/1.0.0.json")),
            ),
            // The cache's protocols (issue 22): registry-wide reads, answered
            // from what the cache holds of the upstream.
            ReadEndpoint::CacheProviderVersions => probe(
                "cache provider versions",
                Method::GET,
                registry_read,
                get(format!(
                    "/v1/cache/{UPSTREAM}/providers/hashicorp/null/versions"
                )),
            ),
            ReadEndpoint::CacheProviderDownload => probe(
                "cache provider download",
                Method::GET,
                registry_read,
                get(format!(
                    "/v1/cache/{UPSTREAM}/providers/hashicorp/null/1.0.0/download/linux/amd64"
                )),
            ),
            ReadEndpoint::CacheModuleVersions => probe(
                "cache module versions",
                Method::GET,
                registry_read,
                get(format!(
                    "/v1/cache/{UPSTREAM}/modules/hashicorp/consul/aws/versions"
                )),
            ),
            ReadEndpoint::CacheModuleDownload => probe(
                "cache module download",
                Method::GET,
                registry_read,
                get(format!(
                    "/v1/cache/{UPSTREAM}/modules/hashicorp/consul/aws/1.0.0/download"
                )),
            ),
            // The OCI view (issue 40): a repository is read as the registry
            // protocol reads its package.
            ReadEndpoint::Oci => probe(
                "oci provider index",
                Method::GET,
                read_a,
                get(format!("/v2/providers/{A}/null/manifests/1.0.0")),
            ),
        }]
        .into_iter()
        .chain(match e {
            // Other registries' providers: imported ones (the mirror) and
            // an upstream's (the cache), both registry-wide.
            ReadEndpoint::MirrorIndex => vec![
                probe(
                    "mirror index (imported)",
                    Method::GET,
                    registry_read,
                    get(format!("/v1/mirror/{MIRRORED}/hashicorp/null/index.json")),
                ),
                probe(
                    "mirror index (upstream)",
                    Method::GET,
                    registry_read,
                    get(format!("/v1/mirror/{UPSTREAM}/hashicorp/null/index.json")),
                ),
            ],
            ReadEndpoint::MirrorVersion => vec![probe(
                "mirror version (upstream)",
                Method::GET,
                registry_read,
                get(format!("/v1/mirror/{UPSTREAM}/hashicorp/null/1.0.0.json")),
            )],
            ReadEndpoint::Oci => vec![
                // `oras login`'s: anyone's who may read something.
                probe(
                    "oci base",
                    Method::GET,
                    Need::Token(Scope::Read, Some(B)),
                    get("/v2/"),
                ),
                // The token endpoint takes the token as Basic's password
                // and authorises it for the scope asked for.
                Probe {
                    basic: true,
                    ..probe(
                        "oci token endpoint",
                        Method::GET,
                        read_a,
                        get(format!(
                            "/v2/token?scope=repository:providers/{A}/null:pull&service=registry"
                        )),
                    )
                },
                probe(
                    "oci provider tags",
                    Method::GET,
                    read_a,
                    get(format!("/v2/providers/{A}/null/tags/list")),
                ),
                probe(
                    "oci provider blob",
                    Method::GET,
                    read_a,
                    get(format!("/v2/providers/{A}/null/blobs/{}", fx.layer)),
                ),
                probe(
                    "oci module manifest",
                    Method::GET,
                    read_a,
                    get(format!("/v2/modules/{A}/m/aws/manifests/1.0.0")),
                ),
                probe(
                    "oci mirror tags (imported)",
                    Method::GET,
                    registry_read,
                    get(format!("/v2/mirror/{MIRRORED}/hashicorp/null/tags/list")),
                ),
                probe(
                    "oci mirror tags (upstream)",
                    Method::GET,
                    registry_read,
                    get(format!("/v2/mirror/{UPSTREAM}/hashicorp/null/tags/list")),
                ),
            ],
            _ => vec![],
        })
        .collect(),
        RouteKind::Blob => vec![probe(
            "blob (signed URL)",
            Method::GET,
            Need::Nothing,
            get(fx.blob.clone()),
        )],
        RouteKind::Publish(k, step) => {
            let need = match k {
                PublishKind::Provider | PublishKind::Module => Need::Token(Scope::Publish, Some(A)),
                PublishKind::Mirror => Need::Token(Scope::Publish, None),
            };
            let make = match step {
                PublishStep::Begin => Make::Begin(k),
                PublishStep::Complete => Make::Complete(k),
            };
            vec![probe(&kind.name(), Method::POST, need, make)]
        }
        RouteKind::Admin(op) => admin_probes(op)
            .into_iter()
            .map(|(name, method, need, make)| probe(&name, method, need, make))
            .collect(),
        RouteKind::Ui(page) => vec![match page {
            UiPage::Root => probe("ui root", Method::GET, Need::Nothing, get("/")),
            // The home page lists what the token covers: any valid read
            // token may see it (the matrix's limited tokens are all B's).
            UiPage::Home => probe(
                "ui home",
                Method::GET,
                Need::Token(Scope::Read, Some(B)),
                get("/ui/home"),
            ),
            UiPage::Search => probe(
                "ui search",
                Method::GET,
                Need::Token(Scope::Read, Some(B)),
                get("/ui/search?q=null"),
            ),
            UiPage::Namespace => probe(
                "ui namespace A",
                Method::GET,
                read_a,
                get(format!("/ui/namespaces/{A}")),
            ),
            UiPage::Module => probe(
                "ui module page in A",
                Method::GET,
                read_a,
                get(format!("/ui/modules/{A}/m/aws")),
            ),
            UiPage::Provider => probe(
                "ui provider page in A",
                Method::GET,
                read_a,
                get(format!("/ui/providers/{A}/null")),
            ),
            // What the pull-through cache holds: what `GET /v1/admin/cache`
            // lists, so what it needs (admin, registry-wide).
            UiPage::Cache => probe("ui cache page", Method::GET, admin, get("/ui/cache")),
            UiPage::SignIn => probe(
                "ui sign-in page",
                Method::GET,
                Need::Nothing,
                get("/ui/sign-in"),
            ),
            // Sign-out refuses no one: whatever the credential, the cookie
            // is cleared and the browser sent to sign in.
            UiPage::SignOut => probe(
                "ui sign-out",
                Method::POST,
                Need::Nothing,
                fixed("/ui/sign-out", Value::Null),
            ),
            UiPage::Asset => probe(
                "ui asset",
                Method::GET,
                Need::Nothing,
                get(format!(
                    "/ui/static/{}",
                    tfreg_ui::assets::Asset::Css.file_name()
                )),
            ),
        }],
        // Sign-in is public (a login must work whatever token a client
        // holds) and answered where an identity provider and CI issuers are
        // configured: in-process, where the matrix has them.
        RouteKind::Auth(_) if !sign_in => vec![],
        RouteKind::Auth(step) => {
            let name = format!("sign-in {}", <&str>::from(step));
            let (method, make) = match step {
                AuthRoute::Authorize => (Method::GET, get(SignIn::authorize().0)),
                AuthRoute::Callback => (Method::GET, Make::Callback),
                AuthRoute::Token => (Method::POST, Make::RedeemCode),
                AuthRoute::SsoStart => (Method::GET, get("/oauth/sso?next=/ui/home")),
                AuthRoute::Exchange => (Method::POST, Make::Exchange),
            };
            vec![probe(&name, method, Need::Nothing, make)]
        }
    }
}

/// The admin API's probes: every form of each operation.
fn admin_probes(op: AdminOp) -> Vec<(String, Method, Need, Make)> {
    let admin = Need::Token(Scope::Admin, None);
    // Keys, trust and releases are a namespace's: A's (or one made for the
    // request, which no limited token of the matrix covers either).
    let admin_a = Need::Token(Scope::Admin, Some(A));
    let name = |s: &str| format!("admin {s}");
    let (g, p, d) = (Method::GET, Method::POST, Method::DELETE);
    match op {
        AdminOp::ListTokens => vec![(name("list tokens"), g, admin, get("/v1/admin/tokens"))],
        AdminOp::CreateToken => vec![(
            name("create token"),
            p,
            admin,
            fixed(
                "/v1/admin/tokens",
                json!({"name": "made-by-matrix", "scopes": ["read"]}),
            ),
        )],
        AdminOp::RevokeToken => vec![(name("revoke token"), d, admin, Make::RevokeToken)],
        AdminOp::ListKeys => vec![(
            name("list keys of A"),
            g,
            admin_a,
            get(format!("/v1/admin/keys/{A}")),
        )],
        AdminOp::AddKeys => vec![(name("add keys"), p, admin_a, Make::AddKey)],
        AdminOp::RemoveKey => vec![(name("remove key"), d, admin_a, Make::RemoveKey)],
        // Idempotent: each answers 200 whether it changed anything or not
        // (on a module version no read probe lists: it stays as it was).
        AdminOp::Lifecycle => LifecycleAction::VARIANTS
            .iter()
            .map(|action| {
                (
                    name(&format!("{} in A", action.name())),
                    p.clone(),
                    admin_a,
                    fixed(
                        format!("/v1/admin/modules/{A}/m/aws/2.0.0/{}", action.name()),
                        json!({"message": "from the matrix"}),
                    ),
                )
            })
            .collect(),
        AdminOp::Delete => vec![(name("delete module in A"), d, admin_a, Make::DeleteRelease)],
        AdminOp::Audit => vec![(name("audit"), g, admin, get("/v1/admin/audit"))],
        AdminOp::ListMappings => {
            vec![(name("list group mappings"), g, admin, get("/v1/admin/sso"))]
        }
        AdminOp::MapGroup => vec![(
            name("map group"),
            p,
            admin,
            fixed(
                "/v1/admin/sso/map",
                json!({"group": "matrix-readers", "scope": "read", "namespaces": [A]}),
            ),
        )],
        AdminOp::UnmapGroup => vec![(name("unmap group"), p, admin, Make::UnmapGroup)],
        AdminOp::ListTrust => vec![
            (
                name("list every trust policy"),
                g.clone(),
                admin,
                get("/v1/admin/trust"),
            ),
            (
                name("list trust of A"),
                g,
                admin_a,
                get(format!("/v1/admin/trust/{A}")),
            ),
        ],
        AdminOp::AddTrust => vec![(
            name("add trust to A"),
            p,
            admin_a,
            fixed(format!("/v1/admin/trust/{A}"), trust_policy("release")),
        )],
        AdminOp::RemoveTrust => vec![(name("remove trust of A"), d, admin_a, Make::RemoveTrust)],
        AdminOp::ListUpstreams => {
            vec![(name("list upstreams"), g, admin, get("/v1/admin/upstreams"))]
        }
        AdminOp::ShowUpstream => vec![(
            name("show upstream"),
            g,
            admin,
            get(format!("/v1/admin/upstreams/{UPSTREAM}")),
        )],
        AdminOp::SetUpstream => vec![(
            name("set upstream"),
            Method::PUT,
            admin,
            fixed(
                format!("/v1/admin/upstreams/{UPSTREAM}"),
                upstream_settings(),
            ),
        )],
        AdminOp::RemoveUpstream => vec![(name("remove upstream"), d, admin, Make::RemoveUpstream)],
        AdminOp::ProviderUsage => vec![(
            name("usage of a provider in A"),
            g,
            admin_a,
            get(format!("/v1/admin/usage/providers/{A}/null")),
        )],
        AdminOp::ModuleUsage => vec![(
            name("usage of a module in A"),
            g,
            admin_a,
            get(format!("/v1/admin/usage/modules/{A}/m/aws")),
        )],
        AdminOp::ListCached => vec![
            (
                name("list the cache"),
                g.clone(),
                admin,
                get("/v1/admin/cache"),
            ),
            (
                name("list the cache of one upstream"),
                g,
                admin,
                get(format!("/v1/admin/cache/{UPSTREAM}")),
            ),
        ],
    }
}

/// The settings the upstream is set with: it serves both, fetching on a
/// miss (nothing here misses: the cache holds what the probes read).
fn upstream_settings() -> Value {
    json!({"serves": {"providers": true, "modules": true}})
}

/// A CI trust policy (GitHub Actions' issuer), for `environment`.
fn trust_policy(environment: &str) -> Value {
    json!({
        "issuer": "https://token.actions.githubusercontent.com",
        "claims": {
            "repository_owner_id": "1234",
            "repository": "acme/app",
            "environment": environment,
        },
    })
}

/// A publish target of `kind` at `version` (in A, or the mirrored host's).
fn publish_target(kind: PublishKind, version: &str) -> PublishTarget {
    target(&match kind {
        PublishKind::Provider => format!("providers/{A}/null/{version}"),
        PublishKind::Module => format!("modules/{A}/m/aws/{version}"),
        PublishKind::Mirror => format!("mirror/{MIRRORED}/hashicorp/null/{version}"),
    })
}

/// The files of a publish of `kind` at `version`, and its request.
fn publish_files(
    kind: PublishKind,
    version: &str,
    signer: &TestSigner,
) -> (Vec<(String, Vec<u8>)>, PublishRequest) {
    let mut request = PublishRequest::default();
    let files = match kind {
        PublishKind::Provider => {
            request.signing_key = Some(signer.public_armor.to_string());
            provider_release("null", version, &["linux_amd64"], signer)
        }
        PublishKind::Module => vec![(
            "m.tar.gz".to_string(),
            module_archive(&[("main.tf", &format!("# {version}\n"))]),
        )],
        // A mirror import carries the zips only.
        PublishKind::Mirror => provider_release("null", version, &["linux_amd64"], signer)
            .into_iter()
            .filter(|(name, _)| name.ends_with(".zip"))
            .collect(),
    };
    request.files = files.iter().map(|(n, b)| decl(n, b)).collect();
    (files, request)
}

/// Begin a publish and upload its files (with an admin token of its own: a
/// token may have only so many publishes in progress, and those begun for
/// a refused credential are never completed): the request that completes it.
async fn begun(
    r: &TestRegistry,
    fx: &Fixtures,
    kind: PublishKind,
    version: &str,
) -> PublishRequest {
    let (files, mut request) = publish_files(kind, version, &fx.signer);
    let target = publish_target(kind, version);
    let admin = r.token(Scope::Admin, None).await;
    let begin = r
        .publish_step(&target, PublishStep::Begin, &admin, &request)
        .await;
    let begin = done(begin, "begin, for a complete");
    let answer: PublishBegin = serde_json::from_slice(&begin.body).unwrap();
    for upload in &answer.uploads {
        let bytes = &files.iter().find(|(n, _)| *n == upload.name).unwrap().1;
        done(
            r.send_url(Method::PUT, &upload.url, &upload.headers, bytes.clone())
                .await,
            "upload",
        );
    }
    request.upload_id = answer.upload_id;
    request
}

impl Probe {
    /// This probe's request for one credential: path and body, with what it
    /// changes made for it (as the admin).
    pub(super) async fn request(&self, r: &TestRegistry, fx: &Fixtures) -> Req {
        let sign_in = || {
            fx.sign_in
                .as_ref()
                .expect("sign-in's probes run with sign-in")
        };
        let (path, body, headers) = match &self.make {
            Make::Callback => {
                let (path, cookie, _) = sign_in().to_callback(r).await;
                (path, Bytes::new(), vec![("cookie".to_string(), cookie)])
            }
            Make::RedeemCode => {
                let si = sign_in();
                let (path, cookie, verifier) = si.to_callback(r).await;
                let cookie = [("cookie".to_string(), cookie)];
                let back = app_request(&si.app(r), Method::GET, &path, &cookie, Bytes::new()).await;
                let location = back.headers["location"].to_str().unwrap();
                let code = query_param(location, "code").expect("a code for Terraform");
                let form: String = url::form_urlencoded::Serializer::new(String::new())
                    .append_pair("grant_type", "authorization_code")
                    .append_pair("client_id", CLI_CLIENT_ID)
                    .append_pair("code", &code)
                    .append_pair("redirect_uri", LOOPBACK)
                    .append_pair("code_verifier", &verifier)
                    .finish();
                let form_type = "application/x-www-form-urlencoded".to_string();
                (
                    tfreg_model::protocol::TOKEN_PATH.to_string(),
                    Bytes::from(form),
                    vec![("content-type".to_string(), form_type)],
                )
            }
            Make::Exchange => {
                let claims = github_claims(PUBLIC_URL, json!({}));
                let token = sign_in().ci.sign(json!({"claims": claims})).await;
                let body = Bytes::from(json!({"token": token}).to_string());
                (tfreg_model::router::EXCHANGE_PATH.to_string(), body, vec![])
            }
            _ => {
                let (path, body) = self.made(r, fx).await;
                (path, body, vec![])
            }
        };
        Req {
            path,
            body,
            headers,
        }
    }

    /// The request of a probe that needs no browser.
    async fn made(&self, r: &TestRegistry, fx: &Fixtures) -> (String, Bytes) {
        let json = |v: Value| Bytes::from(v.to_string());
        let admin = fx.admin.as_str();
        let n = fresh();
        match &self.make {
            Make::Fixed { path, body } if body.is_null() => (path.clone(), Bytes::new()),
            Make::Fixed { path, body } => (path.clone(), json(body.clone())),
            Make::RevokeToken => {
                let token = named(r, &format!("to-revoke-{n}"), Scope::Read, None).await;
                (format!("/v1/admin/tokens/{}", id_of(&token)), Bytes::new())
            }
            Make::AddKey => (
                format!("/v1/admin/keys/keys-{n}"),
                json(json!({"keys": [fx.signer.public_armor]})),
            ),
            Make::RemoveKey => {
                let ns = format!("keys-{n}");
                let added = send(
                    r,
                    Method::POST,
                    &format!("/v1/admin/keys/{ns}"),
                    admin,
                    json!({"keys": [fx.signer.public_armor]}),
                )
                .await;
                let added = done(added, "add a key to remove");
                let id = added.json()["keys"][0]["key_id"]
                    .as_str()
                    .unwrap()
                    .to_string();
                (format!("/v1/admin/keys/{ns}/{id}"), Bytes::new())
            }
            Make::DeleteRelease => {
                let version = format!("5.0.{n}");
                done(
                    super::publish_module(r, admin, A, &version).await,
                    "a module version to delete",
                );
                (
                    format!("/v1/admin/modules/{A}/m/aws/{version}"),
                    Bytes::new(),
                )
            }
            Make::UnmapGroup => {
                let group = format!("to-unmap-{n}");
                done(
                    send(
                        r,
                        Method::POST,
                        "/v1/admin/sso/map",
                        admin,
                        json!({"group": group, "scope": "read", "namespaces": [A]}),
                    )
                    .await,
                    "map a group to unmap",
                );
                ("/v1/admin/sso/unmap".into(), json(json!({"group": group})))
            }
            Make::RemoveTrust => {
                let added = send(
                    r,
                    Method::POST,
                    &format!("/v1/admin/trust/{A}"),
                    admin,
                    trust_policy(&format!("env-{n}")),
                )
                .await;
                let added = done(added, "a trust policy to remove");
                let id = added.json()["policy"]["id"].as_str().unwrap().to_string();
                (format!("/v1/admin/trust/{A}/{id}"), Bytes::new())
            }
            Make::RemoveUpstream => {
                let path = format!("/v1/admin/upstreams/u{n}.example.test");
                done(
                    send(r, Method::PUT, &path, admin, upstream_settings()).await,
                    "an upstream to remove",
                );
                (path, Bytes::new())
            }
            Make::Begin(kind) => {
                let version = format!("7.0.{n}");
                let (_, request) = publish_files(*kind, &version, &fx.signer);
                let path = tfreg_model::router::PublishRoute {
                    target: publish_target(*kind, &version),
                    step: PublishStep::Begin,
                }
                .path();
                (path, Bytes::from(serde_json::to_vec(&request).unwrap()))
            }
            Make::Complete(kind) => {
                let version = format!("8.0.{n}");
                let request = begun(r, fx, *kind, &version).await;
                let path = tfreg_model::router::PublishRoute {
                    target: publish_target(*kind, &version),
                    step: PublishStep::Complete,
                }
                .path();
                (path, Bytes::from(serde_json::to_vec(&request).unwrap()))
            }
            Make::Callback | Make::RedeemCode | Make::Exchange => {
                unreachable!("made with a browser")
            }
        }
    }
}

/// What every probe reads, besides the provider and module in A that the
/// matrix publishes first: the module version the lifecycle probes change,
/// an imported provider of another registry, and an upstream whose provider
/// and module the cache holds (list and release, the archive stored).
pub(super) async fn setup(r: &TestRegistry, fx: &Fixtures) {
    if let Some(sign_in) = &fx.sign_in {
        sign_in.setup(r).await;
    }
    let admin = fx.admin.as_str();
    done(
        super::publish_module(r, admin, A, "2.0.0").await,
        "module 2.0.0",
    );
    let (files, request) = publish_files(PublishKind::Mirror, "1.0.0", &fx.signer);
    done(
        r.publish(
            &publish_target(PublishKind::Mirror, "1.0.0"),
            admin,
            &files,
            request,
        )
        .await,
        "mirror import",
    );
    done(
        send(
            r,
            Method::PUT,
            &format!("/v1/admin/upstreams/{UPSTREAM}"),
            admin,
            upstream_settings(),
        )
        .await,
        "the upstream",
    );
    let items = r.registry.items.as_ref();
    let now = unix_now();
    let list = |platforms: Vec<String>| OriginList {
        versions: vec![OriginVersion {
            version: "1.0.0".into(),
            protocols: vec!["5.0".into()],
            platforms,
        }],
        warnings: vec![],
        fetched_at: now,
        failed_at: None,
    };
    let provider = CachedProvider::new(UPSTREAM, "hashicorp", "null");
    provider
        .put_origin_list(items, &list(vec!["linux_amd64".into()]))
        .await
        .unwrap();
    let release = CachedRelease {
        version: "1.0.0".into(),
        protocols: vec!["5.0".into()],
        shasums_sha256: "ab".repeat(32),
        signature_sha256: Some("ef".repeat(32)),
        signed_by: Some("34365D9472D7468F".into()),
        key_expired: false,
        signing_keys: r#"{"gpg_public_keys":[]}"#.into(),
        platforms: BTreeMap::from([(
            "linux_amd64".to_string(),
            CachedArchive {
                filename: "terraform-provider-null_1.0.0_linux_amd64.zip".into(),
                sha256: "cd".repeat(32),
                stored: Some(StoredArchive {
                    size: 1,
                    h1: None,
                    stored_at: now,
                }),
            },
        )]),
        verified_at: now,
    };
    provider.keep_release(items, &release).await.unwrap();
    let module = CachedModule::new(UPSTREAM, "hashicorp", "consul", "aws");
    module.put_origin_list(items, &list(vec![])).await.unwrap();
    let source = "git::https://example.test/consul.git?ref=v1.0.0";
    module
        .keep_release(
            items,
            &CachedModuleRelease {
                version: "1.0.0".into(),
                origin_source: source.into(),
                source: ModuleOrigin::PassThrough {
                    why: "the matrix's: never fetched".into(),
                },
                resolved_at: now,
                stored: None,
            },
        )
        .await
        .unwrap();
}

/// Sign-in as `tfreg serve` serves it with an identity provider and CI
/// issuers configured (both real: tests/oidc/provider.mjs), so the matrix
/// sends sign-in's routes every credential too (they are public: none is
/// looked at, each must succeed).
pub(super) struct SignIn {
    served: Served,
    ci: Issuer,
    _op: Provider,
    _dir: tempfile::TempDir,
}

/// The identity provider's user, in the group mapped to reading A.
const USER: &str = "matrix-user";
const GROUP: &str = "matrix-sign-in";
/// Where Terraform listens for the end of `terraform login`.
const LOOPBACK: &str = "http://localhost:10000/login";

impl SignIn {
    pub(super) async fn start() -> SignIn {
        let dir = tempfile::tempdir().unwrap();
        let ci = Issuer::start(dir.path());
        let op = Provider::start(json!({
            "clients": [{"client_id": "tfreg", "client_secret": "matrix-secret",
                         "redirect_uris": [format!("{PUBLIC_URL}/oauth/callback")]}],
            "users": [{"sub": USER, "email": "user@example.com", "groups": [GROUP]}],
            "skip_consent": true,
        }));
        let http = tfreg_auth::oidc::http_client(ci.tls()).unwrap();
        let config = OidcConfig::new(&op.issuer, "tfreg", Secret::new("matrix-secret"))
            .with_scopes(tfreg_auth::oidc::DEFAULT_SCOPES)
            .with_groups_claim(tfreg_auth::oidc::DEFAULT_GROUPS_CLAIM);
        let upstream = Upstream::discover(config, http.clone()).await.unwrap();
        let settings = CiSettings::new(&[&ci.op.issuer]).unwrap();
        let auth = Auth::new()
            .with_login(upstream, LoginSettings::default())
            .with_exchange(Exchange::new(settings, http));
        SignIn {
            served: every_group().auth(auth),
            ci,
            _op: op,
            _dir: dir,
        }
    }

    /// `r` served with every group and sign-in.
    pub(super) fn app(&self, r: &TestRegistry) -> App {
        App::new(r.registry.clone(), self.served.clone())
    }

    /// What sign-in's probes need: A trusts the CI issuer's jobs, the
    /// user's group reads A.
    async fn setup(&self, r: &TestRegistry) {
        trust(&r.registry, A, github_policy(&self.ci.op.issuer)).await;
        let mapping = GroupMapping::new(GROUP, Scope::Read, &[A]).unwrap();
        sso::put_mapping(r.registry.items.as_ref(), &mapping)
            .await
            .unwrap();
    }

    /// Terraform's start of a sign-in: the authorize path, its verifier.
    fn authorize() -> (String, String) {
        let verifier = random_value();
        let query: String = url::form_urlencoded::Serializer::new(String::new())
            .append_pair("response_type", "code")
            .append_pair("client_id", CLI_CLIENT_ID)
            .append_pair("redirect_uri", LOOPBACK)
            .append_pair("state", &random_value())
            .append_pair("code_challenge", &pkce_challenge(&verifier))
            .append_pair("code_challenge_method", "S256")
            .finish();
        (format!("/oauth/authorize?{query}"), verifier)
    }

    /// A sign-in up to the identity provider's way back: the callback's
    /// path and the browser's sign-in cookie, and the PKCE verifier.
    async fn to_callback(&self, r: &TestRegistry) -> (String, String, String) {
        let (path, verifier) = Self::authorize();
        let resp = app_request(&self.app(r), Method::GET, &path, &[], Bytes::new()).await;
        assert!(resp.status.is_redirection(), "authorize: {}", resp.text());
        let cookie = resp.headers["set-cookie"].to_str().unwrap();
        let cookie = cookie.split(';').next().unwrap().to_string();
        let to = resp.headers["location"].to_str().unwrap();
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap();
        let callback = format!("{PUBLIC_URL}/oauth/callback");
        let hops = Browser::new(client).sign_in(to, USER, &[&callback]).await;
        let back = hops.last().and_then(|h| h.location.clone()).unwrap();
        let back = back.strip_prefix(PUBLIC_URL).unwrap().to_string();
        (back, cookie, verifier)
    }
}

/// One request to `app` (`path` may carry a query string).
pub(super) async fn app_request(
    app: &App,
    method: Method,
    path: &str,
    headers: &[(String, String)],
    body: Bytes,
) -> TestResponse {
    let mut req = http::Request::builder().method(method).uri(path);
    for (k, v) in headers {
        req = req.header(k.as_str(), v.as_str());
    }
    let resp = app
        .handle(req.body(tfreg_http::body::Body::from(body)).unwrap())
        .await;
    let (parts, body) = resp.into_parts();
    TestResponse {
        status: parts.status,
        headers: parts.headers,
        body: axum::body::to_bytes(body, usize::MAX).await.unwrap(),
    }
}
