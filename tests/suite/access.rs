//! Access control, in-process, on both backends (embedded SQLite + a
//! directory, and DynamoDB + S3 on the emulators), and the matrix again
//! against the Lambda functions over HTTPS: the matrix of every
//! endpoint × every kind of credential against rules written once here; the
//! bounds on revocation and expiry; what authorisation costs in item-store
//! requests (measured with a counting store); last use; the audit trail;
//! release lifecycle (deprecate, yank, delete); namespace signing keys.
//!
//! Figures are printed as `FIGURE ...` lines.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Method, StatusCode};
use serde_json::{Value, json};
use tfreg_http::auth::TokenCache;
use tfreg_http::registry::{Registry, unix_now};
use tfreg_model::hashing::sha256_hex;
use tfreg_model::router::PublishTarget;
use tfreg_model::token::{NewToken, Scope};
use tfreg_testkit::counting::{CountingStore, Counts};
use tfreg_testkit::{
    HOST, TestRegistry, TestResponse, TestSigner, module_archive, provider_release,
    provider_request,
};

use crate::backend_contract::contract;

#[path = "access_probes.rs"]
mod probes;
use probes::Fixtures;

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

/// The namespace the fixtures are published in, and another one.
const A: &str = "alpha";
const B: &str = "beta";

fn target(s: &str) -> PublishTarget {
    PublishTarget::try_from(s.to_string()).unwrap()
}

/// The same stores with `anonymous_reads` as given and a token cache of
/// `ttl` (the cache is built at `Registry::new`, so it is replaced here).
pub(crate) fn view(r: &TestRegistry, anonymous_reads: bool, ttl: Duration) -> TestRegistry {
    r.reconfigure(|mut reg: Registry| {
        reg.config.anonymous_reads = anonymous_reads;
        reg.config.token_cache_secs = ttl.as_secs();
        reg.tokens = Arc::new(TokenCache::new(ttl));
        reg
    })
}

/// A private registry (no anonymous reads) that trusts no token without
/// looking it up (cache 0).
fn private(r: &TestRegistry) -> TestRegistry {
    view(r, false, Duration::ZERO)
}

/// A token's public id.
pub(crate) fn id_of(token: &str) -> String {
    sha256_hex(token.as_bytes())[..12].to_string()
}

/// A named token.
async fn named(r: &TestRegistry, name: &str, scope: Scope, ns: Option<&str>) -> String {
    r.token_with(NewToken {
        name: name.into(),
        scopes: vec![scope],
        namespaces: ns.map(str::to_string).into_iter().collect(),
        grants: vec![],
        expires_at: None,
        fill: false,
    })
    .await
}

/// A JSON request with a bearer token.
pub(crate) async fn send(
    r: &TestRegistry,
    method: Method,
    path: &str,
    token: &str,
    body: Value,
) -> TestResponse {
    let body = if body.is_null() {
        Bytes::new()
    } else {
        Bytes::from(body.to_string())
    };
    r.request(method, path, Some(token), &[], body).await
}

/// Publish provider `ns/null` `version` (linux_amd64) signed by `signer`.
pub(crate) async fn publish_provider(
    r: &TestRegistry,
    token: &str,
    ns: &str,
    version: &str,
    signer: &TestSigner,
) -> TestResponse {
    let files = provider_release("null", version, &["linux_amd64"], signer);
    r.publish(
        &target(&format!("providers/{ns}/null/{version}")),
        token,
        &files,
        provider_request(signer),
    )
    .await
}

/// Publish module `ns/m/aws` `version`.
pub(crate) async fn publish_module(
    r: &TestRegistry,
    token: &str,
    ns: &str,
    version: &str,
) -> TestResponse {
    let archive = module_archive(&[("main.tf", &format!("# {version}\n"))]);
    r.publish(
        &target(&format!("modules/{ns}/m/aws/{version}")),
        token,
        &[("m.tar.gz".to_string(), archive)],
        Default::default(),
    )
    .await
}

/// Versions listed by a provider versions response.
pub(crate) fn provider_versions(resp: &TestResponse) -> Vec<String> {
    resp.json()["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["version"].as_str().unwrap().to_string())
        .collect()
}

/// Versions listed by a mirror index.
pub(crate) fn mirror_versions(resp: &TestResponse) -> Vec<String> {
    resp.json()["versions"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect()
}

/// Every key under `archives/`.
async fn archives(r: &TestRegistry) -> BTreeSet<String> {
    r.registry
        .blobs
        .list("archives/")
        .await
        .unwrap()
        .iter()
        .map(|k| k.to_string())
        .collect()
}

/// Counts of requests made by `f` through `counting`.
async fn counted<F: std::future::Future<Output = TestResponse>>(
    counting: &CountingStore,
    expect: StatusCode,
    f: F,
) -> Counts {
    let before = counting.counts();
    let resp = f.await;
    assert_eq!(resp.status, expect, "{}", resp.text());
    counting.counts() - before
}

// ---------------------------------------------------------------------------
// The matrix: rules written once, every endpoint × every credential.
// ---------------------------------------------------------------------------

/// What a route needs, as the rules below judge it.
#[derive(Debug, Clone, Copy)]
enum Need {
    /// Discovery, archives behind signed URLs.
    Nothing,
    /// `scope` covering namespace `Some(ns)`, or the whole registry (`None`).
    Token(Scope, Option<&'static str>),
}

/// A credential a request may carry.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Cred {
    None,
    Basic,
    BearerEmpty,
    Unknown,
    Expired,
    Revoked,
    /// A valid token with `scope`, limited to namespace `Some(ns)` or not.
    Valid(Scope, Option<&'static str>),
}

const CREDS: [Cred; 11] = [
    Cred::None,
    Cred::Basic,
    Cred::BearerEmpty,
    Cred::Unknown,
    Cred::Expired,
    Cred::Revoked,
    Cred::Valid(Scope::Read, None),
    Cred::Valid(Scope::Read, Some(B)),
    Cred::Valid(Scope::Publish, Some(B)),
    Cred::Valid(Scope::Publish, None),
    Cred::Valid(Scope::Admin, None),
];

impl Cred {
    fn label(self) -> String {
        match self {
            Cred::None => "none".into(),
            Cred::Basic => "basic".into(),
            Cred::BearerEmpty => "bearer-".into(),
            Cred::Unknown => "unknown".into(),
            Cred::Expired => "expired".into(),
            Cred::Revoked => "revoked".into(),
            Cred::Valid(scope, None) => scope.to_string(),
            Cred::Valid(scope, Some(ns)) => format!("{scope}@{ns}"),
        }
    }
}

/// The verdict the rules give.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    /// The handler ran and succeeded: 2xx, or 3xx where the endpoint
    /// answers with a redirect (an archive's signed URL, a page's). Every
    /// probe is made over real data, so a 400 or 404 is never "allowed".
    Allowed,
    Unauthorized,
    Forbidden,
}

/// The rules: discovery and archives need nothing; a missing, malformed,
/// unknown, expired or revoked token is 401 wherever a token is looked at
/// (reads with anonymous reads on still check a presented token); reads need
/// any scope covering the namespace (or none at all with anonymous reads);
/// publish needs publish or admin covering it; admin needs admin; the whole
/// registry (another host's mirror, tokens, audit) only a token without a
/// namespace limit covers.
fn rule(need: Need, cred: Cred, anonymous_reads: bool) -> Verdict {
    let Need::Token(scope, realm) = need else {
        return Verdict::Allowed;
    };
    let anonymous_read = scope == Scope::Read && anonymous_reads;
    match cred {
        Cred::None if anonymous_read => Verdict::Allowed,
        Cred::None
        | Cred::Basic
        | Cred::BearerEmpty
        | Cred::Unknown
        | Cred::Expired
        | Cred::Revoked => Verdict::Unauthorized,
        Cred::Valid(..) if anonymous_read => Verdict::Allowed,
        Cred::Valid(has, limit) => {
            let covers = match (limit, realm) {
                (None, _) => true,
                (Some(l), Some(ns)) => l == ns,
                (Some(_), None) => false,
            };
            if has >= scope && covers {
                Verdict::Allowed
            } else {
                Verdict::Forbidden
            }
        }
    }
}

/// Publish the matrix's fixtures (provider and module 1.0.0 in A, and what
/// [`probes::setup`] makes) with an admin token; the path of a signed
/// archive URL from a download.
async fn matrix_fixtures(r: &TestRegistry, own_host: &str, sign_in: bool) -> Fixtures {
    let admin = r.token(Scope::Admin, None).await;
    let signer = TestSigner::rsa();
    publish_provider(r, &admin, A, "1.0.0", &signer)
        .await
        .expect(StatusCode::CREATED, "publish provider");
    publish_module(r, &admin, A, "1.0.0")
        .await
        .expect(StatusCode::CREATED, "publish module");
    let download = r
        .get_with(
            &format!("/v1/providers/{A}/null/1.0.0/download/linux/amd64"),
            &admin,
        )
        .await;
    download.expect(StatusCode::OK, "download");
    let url = download.json()["download_url"]
        .as_str()
        .unwrap()
        .to_string();
    let layer = format!("sha256:{}", download.json()["shasum"].as_str().unwrap());
    let fx = Fixtures {
        admin,
        signer,
        layer,
        blob: url
            .strip_prefix(tfreg_testkit::PUBLIC_URL)
            .expect("an archive URL of the registry")
            .to_string(),
        own_host: own_host.replace(':', "%3A"),
        sign_in: if sign_in {
            Some(probes::SignIn::start().await)
        } else {
            None
        },
    };
    probes::setup(r, &fx).await;
    fx
}

/// Make the token `cred` stands for (none for the header-only ones).
async fn make_credential(r: &TestRegistry, cred: Cred) -> Option<String> {
    let items = r.registry.items.as_ref();
    let operator = tfreg_model::token::Principal::Operator.actor();
    match cred {
        Cred::None | Cred::Basic | Cred::BearerEmpty => None,
        Cred::Unknown => Some("tfreg_thisTokenWasNeverIssuedByThisRegistry000".into()),
        Cred::Expired => {
            // Made "at" unix time 1, expiring at 2: long expired now.
            let new = NewToken {
                name: "expired".into(),
                scopes: vec![Scope::Admin],
                namespaces: vec![],
                grants: vec![],
                expires_at: Some(2),
                fill: false,
            };
            Some(
                tfreg_store::catalog::tokens::create(items, new, 1, &operator)
                    .await
                    .unwrap()
                    .0,
            )
        }
        Cred::Revoked => {
            let admin = r.token(Scope::Admin, None).await;
            let revoked = named(r, "revoked", Scope::Admin, None).await;
            send(
                r,
                Method::DELETE,
                &format!("/v1/admin/tokens/{}", id_of(&revoked)),
                &admin,
                Value::Null,
            )
            .await
            .expect(StatusCode::OK, "revoke");
            Some(revoked)
        }
        Cred::Valid(scope, ns) => Some(r.token(scope, ns).await),
    }
}

/// Where the matrix's requests go: the registry in-process, or a server over
/// HTTPS (the Lambda functions) whose stores `r` shares.
enum Via<'a> {
    InProcess,
    Https(&'a crate::support::Server),
}

/// One request of the matrix: status, headers, body (in-process through
/// every group and sign-in, as `tfreg serve` with an identity provider).
async fn matrix_request(
    r: &TestRegistry,
    fx: &Fixtures,
    via: &Via<'_>,
    method: Method,
    path: &str,
    headers: &[(String, String)],
    body: Bytes,
) -> TestResponse {
    match via {
        Via::InProcess => {
            let app = match &fx.sign_in {
                Some(sign_in) => sign_in.app(r),
                None => r.app(),
            };
            probes::app_request(&app, method, path, headers, body).await
        }
        Via::Https(server) => {
            let (http, url) = (server.http.clone(), server.url(path));
            let headers = headers.to_vec();
            tokio::task::spawn_blocking(move || {
                let method = reqwest::Method::from_bytes(method.as_str().as_bytes()).unwrap();
                let mut req = http.request(method, url).body(body.to_vec());
                for (k, v) in &headers {
                    req = req.header(k, v);
                }
                if !body.is_empty() && !headers.iter().any(|(k, _)| k == "content-type") {
                    req = req.header("content-type", "application/json");
                }
                let resp = req.send().unwrap();
                let status = StatusCode::from_u16(resp.status().as_u16()).unwrap();
                let mut headers = http::HeaderMap::new();
                for (k, v) in resp.headers() {
                    if let (Ok(k), Ok(v)) = (
                        http::HeaderName::from_bytes(k.as_str().as_bytes()),
                        http::HeaderValue::from_bytes(v.as_bytes()),
                    ) {
                        headers.insert(k, v);
                    }
                }
                TestResponse {
                    status,
                    headers,
                    body: resp.bytes().unwrap(),
                }
            })
            .await
            .unwrap()
        }
    }
}

/// Run the matrix on `r` with anonymous reads as given; print the table.
async fn matrix(r: TestRegistry, anonymous_reads: bool) {
    matrix_via(r, anonymous_reads, Via::InProcess, HOST).await
}

/// [`matrix`], with requests sent `via` a registry at `own_host`.
async fn matrix_via(r: TestRegistry, anonymous_reads: bool, via: Via<'_>, own_host: &str) {
    let fx = matrix_fixtures(&r, own_host, matches!(via, Via::InProcess)).await;
    let r = view(&r, anonymous_reads, Duration::ZERO);
    let mut tokens = Vec::new();
    for cred in CREDS {
        tokens.push((cred, make_credential(&r, cred).await));
    }
    let mode = if anonymous_reads {
        "anonymous reads"
    } else {
        "private"
    };
    eprintln!(
        "FIGURE access matrix {} ({mode}): {:<28} {}",
        r.name,
        "endpoint",
        CREDS
            .iter()
            .map(|c| format!("{:>13}", c.label()))
            .collect::<String>()
    );
    let mut failures = Vec::new();
    for ep in probes::probes(&fx, fx.sign_in.is_some()) {
        let mut row = String::new();
        for (cred, token) in &tokens {
            let header = match cred {
                Cred::Basic => Some("Basic x".to_string()),
                Cred::BearerEmpty => Some("Bearer".to_string()),
                _ if ep.basic => token.as_ref().map(|t| {
                    use base64::Engine as _;
                    let pair = format!("tfreg:{t}");
                    format!(
                        "Basic {}",
                        base64::engine::general_purpose::STANDARD.encode(pair)
                    )
                }),
                _ => token.as_ref().map(|t| format!("Bearer {t}")),
            };
            let probes::Req {
                path,
                body,
                headers,
            } = ep.request(&r, &fx).await;
            let bare = path.split('?').next().unwrap_or_default();
            let routed = tfreg_model::router::route(&ep.method, bare).map(|r| r.kind());
            assert_eq!(routed, Ok(ep.kind), "{}: {} {path}", ep.name, ep.method);
            let mut headers = headers;
            headers.extend(header.map(|h| ("authorization".to_string(), h)));
            let resp =
                matrix_request(&r, &fx, &via, ep.method.clone(), &path, &headers, body).await;
            let status = resp.status.as_u16();
            // The token endpoint is where a credential is presented: it
            // gives no bearer for none (a public registry's pulls need none).
            let want = if ep.basic && *cred == Cred::None {
                Verdict::Unauthorized
            } else {
                rule(ep.need, *cred, anonymous_reads)
            };
            let page = tfreg_model::router::is_ui_path(&path);
            // A web UI page refuses a GET without a valid credential by
            // sending the browser to sign in: its 401.
            let to_sign_in = status == 303
                && page
                && resp.headers["location"]
                    .to_str()
                    .unwrap_or_default()
                    .starts_with("/ui/sign-in?next=");
            let got = match status {
                _ if to_sign_in => Verdict::Unauthorized,
                401 => Verdict::Unauthorized,
                403 => Verdict::Forbidden,
                200..=399 => Verdict::Allowed,
                _ => {
                    failures.push(format!(
                        "{} / {}: unexpected {status}: {}",
                        ep.name,
                        cred.label(),
                        resp.text()
                    ));
                    Verdict::Allowed
                }
            };
            let mark = if got == want { " " } else { "!" };
            row.push_str(&format!("{:>12}{mark}", status));
            if got != want {
                failures.push(format!(
                    "{} / {}: expected {want:?}, got {status}: {}",
                    ep.name,
                    cred.label(),
                    resp.text()
                ));
            }
            if status >= 400 && page {
                // A page's error is an HTML page that names its status.
                let html = resp.text();
                let html_type = resp
                    .headers
                    .get("content-type")
                    .is_some_and(|v| v.as_bytes().starts_with(b"text/html"));
                if !html_type || !html.contains(&format!("HTTP {status}")) {
                    failures.push(format!(
                        "{} / {}: {status} not an error page: {html}",
                        ep.name,
                        cred.label()
                    ));
                }
            } else if status >= 400 {
                let body = resp.json();
                let errors = body["errors"].as_array();
                if errors.is_none_or(|e| e.is_empty()) {
                    failures.push(format!(
                        "{} / {}: {status} without an errors array: {body}",
                        ep.name,
                        cred.label()
                    ));
                }
            }
            let challenge = resp.headers.get("www-authenticate");
            // The OCI view's 401s name where a bearer is had (its token
            // endpoint, which asks for Basic credentials itself).
            let oci = path.starts_with("/v2/");
            let challenged = |v: &http::HeaderValue| {
                let v = v.to_str().unwrap_or_default();
                match () {
                    _ if ep.basic => v == "Basic realm=\"tfreg\"",
                    _ if oci => {
                        v.starts_with("Bearer realm=\"https://")
                            && v.contains("/v2/token\",service=\"")
                    }
                    _ => v == "Bearer",
                }
            };
            match status {
                401 if !challenge.is_some_and(challenged) => failures.push(format!(
                    "{} / {}: 401 without its WWW-Authenticate: {challenge:?}",
                    ep.name,
                    cred.label()
                )),
                s if s != 401 && challenge.is_some() => failures.push(format!(
                    "{} / {}: {s} with WWW-Authenticate",
                    ep.name,
                    cred.label()
                )),
                _ => {}
            }
        }
        eprintln!(
            "FIGURE access matrix {} ({mode}): {:<28} {row}",
            r.name, ep.name
        );
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Every kind of route (derived from the router's enums) is probed by the
/// matrix (sign-in's where it runs with an identity provider: in-process).
#[test]
fn every_kind_of_route_is_in_the_matrix() {
    use tfreg_model::router::RouteKind;
    let fx = Fixtures {
        admin: String::new(),
        signer: TestSigner::rsa(),
        blob: "/v1/blobs/archives/ab/x.zip".into(),
        layer: format!("sha256:{}", "a".repeat(64)),
        own_host: HOST.replace(':', "%3A"),
        sign_in: None,
    };
    let probed: BTreeSet<RouteKind> = probes::probes(&fx, true).iter().map(|p| p.kind).collect();
    let missing: Vec<String> = RouteKind::all()
        .into_iter()
        .filter(|k| !probed.contains(k))
        .map(RouteKind::name)
        .collect();
    assert!(
        missing.is_empty(),
        "kinds the matrix does not probe: {missing:?}"
    );
}

/// Private registry (no anonymous reads, token cache 0): every endpoint ×
/// every credential answers as the rules say; every 4xx has an errors body,
/// every 401 (and only 401) says `WWW-Authenticate: Bearer`.
async fn matrix_private(r: TestRegistry) {
    matrix(r, false).await
}

/// Anonymous reads on: no token reads (200/404), a bad token on a read is
/// still 401, writes and admin are unchanged.
async fn matrix_anonymous_reads(r: TestRegistry) {
    matrix(r, true).await
}

// ---------------------------------------------------------------------------
// Namespaces, revocation, expiry
// ---------------------------------------------------------------------------

/// A read token limited to A reads everything of A (versions, download,
/// mirror) and nothing of B (403), though B is published too.
#[tokio::test]
async fn namespace_limited_read_token() {
    let base = TestRegistry::embedded().await;
    let admin = base.token(Scope::Admin, None).await;
    for ns in [A, B] {
        publish_provider(&base, &admin, ns, "1.0.0", &TestSigner::rsa())
            .await
            .expect(StatusCode::CREATED, ns);
        publish_module(&base, &admin, ns, "1.0.0")
            .await
            .expect(StatusCode::CREATED, ns);
    }
    let r = private(&base);
    let reader = r.token(Scope::Read, Some(A)).await;
    for (ns, want) in [(A, StatusCode::OK), (B, StatusCode::FORBIDDEN)] {
        for path in [
            format!("/v1/providers/{ns}/null/versions"),
            format!("/v1/providers/{ns}/null/1.0.0/download/linux/amd64"),
            format!("/v1/mirror/{HOST}/{ns}/null/index.json"),
            format!("/v1/mirror/{HOST}/{ns}/null/1.0.0.json"),
            format!("/v1/modules/{ns}/m/aws/versions"),
        ] {
            let resp = r.get_with(&path, &reader).await;
            assert_eq!(resp.status, want, "{path}: {}", resp.text());
        }
        let want = if ns == A {
            StatusCode::NO_CONTENT
        } else {
            StatusCode::FORBIDDEN
        };
        let path = format!("/v1/modules/{ns}/m/aws/1.0.0/download");
        assert_eq!(r.get_with(&path, &reader).await.status, want, "{path}");
    }
    let resp = r
        .get_with(&format!("/v1/providers/{B}/null/versions"), &reader)
        .await;
    assert!(resp.error().contains("does not cover namespace beta"));
}

/// A token of two grants (made through the admin API): reads every
/// namespace, publishes to `alpha` only, is no admin; the listing shows its
/// grants. Both backends.
async fn a_token_of_two_grants_reads_everywhere_and_publishes_to_one(base: TestRegistry) {
    let admin = base.token(Scope::Admin, None).await;
    publish_module(&base, &admin, B, "1.0.0")
        .await
        .expect(StatusCode::CREATED, "beta's module");
    let r = private(&base);
    let grants = json!([
        {"scope": "read", "namespaces": ["*"]},
        {"scope": "publish", "namespaces": [A]},
    ]);
    let created = send(
        &r,
        Method::POST,
        "/v1/admin/tokens",
        &admin,
        json!({"name": "alice", "grants": grants}),
    )
    .await;
    created.expect(StatusCode::CREATED, "a token of two grants");
    let token = created.json()["token"].as_str().unwrap().to_string();
    // Reads another namespace.
    r.get_with(&format!("/v1/modules/{B}/m/aws/versions"), &token)
        .await
        .expect(StatusCode::OK, "reads beta");
    let path = format!("/v1/modules/{B}/m/aws/1.0.0/download");
    assert_eq!(
        r.get_with(&path, &token).await.status,
        StatusCode::NO_CONTENT
    );
    // Publishes to alpha only.
    publish_module(&r, &token, A, "1.0.0")
        .await
        .expect(StatusCode::CREATED, "publishes to alpha");
    let elsewhere = publish_module(&r, &token, B, "2.0.0").await;
    assert_eq!(
        elsewhere.status,
        StatusCode::FORBIDDEN,
        "{}",
        elsewhere.text()
    );
    assert!(
        elsewhere
            .error()
            .contains("does not cover namespace beta for publish"),
        "{}",
        elsewhere.error()
    );
    assert!(elsewhere.error().contains("read:*, publish:alpha"));
    // Not an admin, anywhere.
    for (method, path) in [
        (Method::GET, "/v1/admin/tokens".to_string()),
        (
            Method::POST,
            format!("/v1/admin/modules/{A}/m/aws/1.0.0/yank"),
        ),
    ] {
        let resp = send(&r, method, &path, &token, json!({})).await;
        assert_eq!(
            resp.status,
            StatusCode::FORBIDDEN,
            "{path}: {}",
            resp.text()
        );
    }
    // Listed with its grants (and no first-form scopes: it has two).
    let listed = listed_token(&r, &admin, "alice").await;
    assert_eq!(listed["grants"], grants, "{listed}");
    assert!(listed.get("scopes").is_none(), "{listed}");
    // Both ways at once is refused, as is a grant without namespaces.
    for body in [
        json!({"name": "x", "scopes": ["read"], "grants": grants}),
        json!({"name": "x", "grants": [{"scope": "read"}]}),
        json!({"name": "x", "grants": []}),
    ] {
        let resp = send(&r, Method::POST, "/v1/admin/tokens", &admin, body.clone()).await;
        assert_eq!(
            resp.status,
            StatusCode::BAD_REQUEST,
            "{body}: {}",
            resp.text()
        );
    }
}

/// A token stored before grants existed (`scopes` and `namespaces`, no
/// `grants`: the JSON the registry wrote then, put in the store as is) works
/// exactly as it did, and is listed with its one grant. Both backends.
async fn a_token_stored_before_grants_works_unchanged(base: TestRegistry) {
    let admin = base.token(Scope::Admin, None).await;
    let r = private(&base);
    let token = "tfreg_aTokenMadeBeforeGrantsExisted0000000000000";
    let hash = sha256_hex(token.as_bytes());
    let old = json!({
        "id": &hash[..12], "name": "old-ci", "scopes": ["publish"],
        "namespaces": [A], "created_at": 1700000000, "created_by": "operator"
    });
    r.registry
        .items
        .put(
            tfreg_store::Item::new("TOKENS", hash.clone(), old.to_string().into_bytes()),
            tfreg_store::Condition::IfAbsent,
        )
        .await
        .unwrap();
    publish_module(&r, token, A, "1.0.0")
        .await
        .expect(StatusCode::CREATED, "publishes to alpha as before");
    r.get_with(&format!("/v1/modules/{A}/m/aws/versions"), token)
        .await
        .expect(StatusCode::OK, "reads alpha");
    for resp in [
        publish_module(&r, token, B, "1.0.0").await,
        r.get_with(&format!("/v1/modules/{B}/m/aws/versions"), token)
            .await,
        send(&r, Method::GET, "/v1/admin/tokens", token, Value::Null).await,
    ] {
        assert_eq!(resp.status, StatusCode::FORBIDDEN, "{}", resp.text());
    }
    let listed = listed_token(&r, &admin, "old-ci").await;
    assert_eq!(
        listed["grants"],
        json!([{"scope": "publish", "namespaces": [A]}]),
        "{listed}"
    );
    assert_eq!(
        listed["scopes"],
        json!(["publish"]),
        "still the first form too"
    );
    assert_eq!(listed["namespaces"], json!([A]));
}

/// Revocation: immediate in the process that revokes (even with its 10 s
/// cache warm); in another process (a second `Registry` on the same stores,
/// cache 2 s) a revoked token keeps working at most the cache's ttl.
#[tokio::test]
async fn revocation_is_immediate_here_and_bounded_elsewhere() {
    let base = TestRegistry::embedded().await;
    let here = view(&base, false, Duration::from_secs(10));
    let path = format!("/v1/modules/{A}/m/aws/versions");
    let admin = here.token(Scope::Admin, None).await;
    let revoke = |token: String| {
        let here = &here;
        let admin = &admin;
        async move {
            send(
                here,
                Method::DELETE,
                &format!("/v1/admin/tokens/{}", id_of(&token)),
                admin,
                Value::Null,
            )
            .await
            .expect(StatusCode::OK, "revoke");
        }
    };
    // Same process: cached, revoked, refused at once.
    let token = here.token(Scope::Read, None).await;
    assert_eq!(
        here.get_with(&path, &token).await.status,
        StatusCode::NOT_FOUND
    );
    revoke(token.clone()).await;
    let resp = here.get_with(&path, &token).await;
    assert_eq!(resp.status, StatusCode::UNAUTHORIZED, "{}", resp.text());

    // Another process's view: its own cache of 2 s.
    let ttl = Duration::from_secs(2);
    let elsewhere = view(&base, false, ttl);
    let token = here.token(Scope::Read, None).await;
    assert_eq!(
        elsewhere.get_with(&path, &token).await.status,
        StatusCode::NOT_FOUND,
        "cached there"
    );
    revoke(token.clone()).await;
    let revoked_at = Instant::now();
    assert_eq!(
        elsewhere.get_with(&path, &token).await.status,
        StatusCode::NOT_FOUND,
        "still trusted there right after revocation (cached)"
    );
    let stopped = loop {
        let status = elsewhere.get_with(&path, &token).await.status;
        if status == StatusCode::UNAUTHORIZED {
            break revoked_at.elapsed();
        }
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert!(
            revoked_at.elapsed() < ttl + Duration::from_secs(1),
            "a revoked token still works after {:?} (cache ttl {ttl:?})",
            revoked_at.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    eprintln!(
        "FIGURE revocation: immediate in the revoking process; elsewhere stopped after {:.2} s (cache ttl {} s)",
        stopped.as_secs_f64(),
        ttl.as_secs()
    );
    assert!(stopped <= ttl + Duration::from_secs(1));
}

/// The clock of [`expiry_is_exact`].
static EXPIRY_NOW: AtomicU64 = AtomicU64::new(0);

fn expiry_clock() -> u64 {
    EXPIRY_NOW.load(Ordering::SeqCst)
}

/// A token expiring at T works at T-1 and is refused (401) at T, cached or
/// not.
#[tokio::test]
async fn expiry_is_exact() {
    let base = TestRegistry::embedded().await;
    let t = unix_now() + 1000;
    EXPIRY_NOW.store(t - 10, Ordering::SeqCst);
    let r = view(&base, false, Duration::from_secs(60))
        .reconfigure(|reg: Registry| reg.with_clock(expiry_clock));
    let token = r
        .token_with(NewToken {
            name: "short".into(),
            scopes: vec![Scope::Read],
            namespaces: vec![],
            grants: vec![],
            expires_at: Some(t),
            fill: false,
        })
        .await;
    let path = format!("/v1/modules/{A}/m/aws/versions");
    EXPIRY_NOW.store(t - 1, Ordering::SeqCst);
    assert_eq!(
        r.get_with(&path, &token).await.status,
        StatusCode::NOT_FOUND
    );
    EXPIRY_NOW.store(t, Ordering::SeqCst);
    let resp = r.get_with(&path, &token).await;
    assert_eq!(resp.status, StatusCode::UNAUTHORIZED, "{}", resp.text());
    assert!(resp.error().contains("expired"), "{}", resp.error());
    assert_eq!(resp.headers["www-authenticate"], "Bearer");
}

/// Sign in to the web UI with `token`: the session's `cookie` header value.
async fn ui_sign_in(r: &TestRegistry, token: &str) -> String {
    let headers = [("content-type", "application/x-www-form-urlencoded")];
    let body = format!("token={token}").into_bytes();
    let resp = r
        .request(Method::POST, "/ui/sign-in", None, &headers, body)
        .await;
    assert_eq!(resp.status, StatusCode::SEE_OTHER, "{}", resp.text());
    let set = resp.headers[http::header::SET_COOKIE].to_str().unwrap();
    set.split(';').next().unwrap().to_string()
}

async fn ui_home(r: &TestRegistry, cookie: &str) -> TestResponse {
    r.request(
        Method::GET,
        "/ui/home",
        None,
        &[("cookie", cookie)],
        Bytes::new(),
    )
    .await
}

/// A web UI session signed out of is refused from then on, by every process
/// (another Lambda instance, with its own token cache, included): its cookie
/// replayed is sent to sign in; other sessions of the token go on. The
/// ended session is one item of `SIGNEDOUT`, kept until the cookie expires.
async fn a_signed_out_session_is_refused_everywhere(r: TestRegistry) {
    let one = private(&r);
    let other = view(&r, true, Duration::from_secs(300));
    let reader = named(&one, "browser", Scope::Read, None).await;
    let first = ui_sign_in(&one, &reader).await;
    let second = ui_sign_in(&one, &reader).await;
    for (r, c) in [(&one, &first), (&other, &first), (&other, &second)] {
        ui_home(r, c).await.expect(StatusCode::OK, "signed in");
    }
    let before = tfreg_store::query_all(
        one.registry.items.as_ref(),
        tfreg_store::catalog::schema::SIGNED_OUT_PK,
        "",
    )
    .await
    .unwrap();
    assert!(before.is_empty());
    let out = one
        .request(
            Method::POST,
            "/ui/sign-out",
            None,
            &[("cookie", &first)],
            Bytes::new(),
        )
        .await;
    assert_eq!(out.status, StatusCode::SEE_OTHER, "{}", out.text());
    for r in [&one, &other] {
        let replayed = ui_home(r, &first).await;
        assert_eq!(
            replayed.status,
            StatusCode::SEE_OTHER,
            "{}",
            replayed.text()
        );
        let to = replayed.headers[http::header::LOCATION].to_str().unwrap();
        assert!(to.starts_with("/ui/sign-in?next="), "{to}");
    }
    ui_home(&other, &second)
        .await
        .expect(StatusCode::OK, "the token's other session goes on");
    let third = ui_sign_in(&one, &reader).await;
    ui_home(&other, &third)
        .await
        .expect(StatusCode::OK, "a session opened after the sign-out");
    let ended = tfreg_store::query_all(
        one.registry.items.as_ref(),
        tfreg_store::catalog::schema::SIGNED_OUT_PK,
        "",
    )
    .await
    .unwrap();
    assert_eq!(ended.len(), 1, "one item per ended session");
    let expires = ended[0].expires_at.expect("kept until the cookie expires");
    let now = one.registry.now();
    let session = tfreg_http::session::SESSION_SECS;
    assert!(expires > now && expires <= now + session, "{expires}");
    assert!(!first.contains(&ended[0].sk), "the id is kept hashed");
}

// ---------------------------------------------------------------------------
// Cost, last use
// ---------------------------------------------------------------------------

/// Two hours from now: a token touched now is due for another touch then.
fn two_hours_later() -> u64 {
    unix_now() + 7200
}

/// What authorisation costs in item-store requests, counted: a token read
/// is one GetItem when cold, none when warm; last use is written at most
/// once per hour per token; anonymous reads cost no token request. The
/// versions list itself is one GetItem (its versions index).
async fn authorisation_cost(r: TestRegistry) {
    let admin = r.token(Scope::Admin, None).await;
    publish_provider(&r, &admin, A, "1.0.0", &TestSigner::rsa())
        .await
        .expect(StatusCode::CREATED, "publish");
    publish_module(&r, &admin, A, "1.0.0")
        .await
        .expect(StatusCode::CREATED, "publish");
    let versions = format!("/v1/providers/{A}/null/versions");
    let module = format!("/v1/modules/{A}/m/aws/1.0.0/download");
    let token = r.token(Scope::Read, None).await;
    // First use elsewhere: the token's last use is now recent.
    r.get_with(&versions, &token)
        .await
        .expect(StatusCode::OK, "first use");

    let counting = CountingStore::new(r.registry.items.clone());
    let counted_view = |clock: Option<fn() -> u64>, anonymous: bool| {
        let counting = counting.clone();
        r.reconfigure(move |mut reg: Registry| {
            reg.items = Arc::new(counting);
            reg.config.anonymous_reads = anonymous;
            reg.tokens = Arc::new(TokenCache::new(Duration::from_secs(60)));
            match clock {
                Some(c) => reg.with_clock(c),
                None => reg,
            }
        })
    };
    let v = counted_view(None, false);
    let cold = counted(&counting, StatusCode::OK, v.get_with(&versions, &token)).await;
    let warm = counted(&counting, StatusCode::OK, v.get_with(&versions, &token)).await;
    let module_warm = counted(
        &counting,
        StatusCode::NO_CONTENT,
        v.get_with(&module, &token),
    )
    .await;
    // Two hours on: the first use touches, the next does not.
    let later = counted_view(Some(two_hours_later), false);
    let due = counted(&counting, StatusCode::OK, later.get_with(&versions, &token)).await;
    let again = counted(&counting, StatusCode::OK, later.get_with(&versions, &token)).await;
    // Another process two hours on, cache cold: the touch is already done.
    let other = counted_view(Some(two_hours_later), false);
    let other_cold = counted(&counting, StatusCode::OK, other.get_with(&versions, &token)).await;
    let anonymous = counted_view(None, true);
    let anon = counted(&counting, StatusCode::OK, anonymous.get(&versions)).await;

    let show = |c: Counts| {
        format!(
            "{} requests ({} GetItem + {} Query + {} touch)",
            c.total(),
            c.gets,
            c.queries,
            c.touches
        )
    };
    eprintln!(
        "FIGURE auth cost {}: versions cold = {}, warm = {}; module download warm = {}; \
         last use older than 1 h: first request = {}, next = {}, other process cold = {}; \
         anonymous versions = {}",
        r.name,
        show(cold),
        show(warm),
        show(module_warm),
        show(due),
        show(again),
        show(other_cold),
        show(anon)
    );
    let c = |gets, queries, touches| Counts {
        gets,
        queries,
        touches,
        ..Counts::default()
    };
    // A versions list is one GetItem, of the versions index.
    assert_eq!(cold, c(2, 0, 0), "cold: 1 token GetItem + 1 index GetItem");
    assert_eq!(warm, c(1, 0, 0), "warm: the index GetItem only");
    assert_eq!(module_warm, c(1, 0, 0), "module download: its GetItem only");
    assert_eq!(due, c(2, 0, 1), "due: one touch");
    assert_eq!(again, c(1, 0, 0), "no second touch");
    assert_eq!(
        other_cold,
        c(2, 0, 0),
        "touched once per hour, not per process"
    );
    assert_eq!(anon, c(1, 0, 0), "anonymous: no token request");
}

/// The listed record of the token named `name`.
async fn listed_token(r: &TestRegistry, admin: &str, name: &str) -> Value {
    let resp = send(r, Method::GET, "/v1/admin/tokens", admin, Value::Null).await;
    resp.expect(StatusCode::OK, "list tokens");
    resp.json()["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == name)
        .cloned()
        .unwrap_or_else(|| panic!("{name} is listed: {}", resp.text()))
}

/// `GET /v1/admin/tokens` shows a token's `last_used_at` once it is used.
async fn last_use_is_listed(r: TestRegistry) {
    let r = private(&r);
    let admin = r.token(Scope::Admin, None).await;
    let reader = named(&r, "reader", Scope::Read, None).await;
    let before = listed_token(&r, &admin, "reader").await;
    assert_eq!(before["id"], id_of(&reader));
    assert!(before.get("last_used_at").is_none(), "{before}");
    let used_at = r.registry.now();
    r.get_with(&format!("/v1/modules/{A}/m/aws/versions"), &reader)
        .await
        .expect(StatusCode::NOT_FOUND, "a use");
    let after = listed_token(&r, &admin, "reader").await;
    let last = after["last_used_at"].as_u64().expect("last_used_at");
    assert!(last >= used_at && last <= r.registry.now(), "{after}");
    assert!(!after.to_string().contains(&reader), "never the secret");
}

// ---------------------------------------------------------------------------
// Audit
// ---------------------------------------------------------------------------

/// Every change leaves an event naming the actor's token (name and id, never
/// the secret), the action, the target and the outcome; a change refused
/// (403) to a known token is recorded as refused.
async fn audit_trail(r: TestRegistry) {
    let r = private(&r);
    let admin = named(&r, "release-admin", Scope::Admin, None).await;
    let admin_id = id_of(&admin);
    let outsider = named(&r, "outsider", Scope::Publish, Some(B)).await;
    let signer = TestSigner::rsa();
    publish_provider(&r, &admin, A, "1.0.0", &signer)
        .await
        .expect(StatusCode::CREATED, "publish");
    let release = format!("/v1/admin/providers/{A}/null/1.0.0");
    for (action, body) in [
        ("deprecate", json!({"message": "use 2.x"})),
        ("yank", json!({})),
    ] {
        send(
            &r,
            Method::POST,
            &format!("{release}/{action}"),
            &admin,
            body,
        )
        .await
        .expect(StatusCode::OK, action);
    }
    let created = send(
        &r,
        Method::POST,
        "/v1/admin/tokens",
        &admin,
        json!({"name": "ci", "scopes": ["publish"], "namespaces": [A]}),
    )
    .await;
    created.expect(StatusCode::CREATED, "create token");
    let created_token = created.json()["token"].as_str().unwrap().to_string();
    let created_id = created.json()["id"].as_str().unwrap().to_string();
    send(
        &r,
        Method::DELETE,
        &format!("/v1/admin/tokens/{created_id}"),
        &admin,
        Value::Null,
    )
    .await
    .expect(StatusCode::OK, "revoke");
    let keys = send(
        &r,
        Method::POST,
        &format!("/v1/admin/keys/{A}"),
        &admin,
        json!({"keys": [signer.public_armor]}),
    )
    .await;
    keys.expect(StatusCode::CREATED, "add key");
    let key_id = keys.json()["keys"][0]["key_id"]
        .as_str()
        .unwrap()
        .to_string();
    send(
        &r,
        Method::DELETE,
        &format!("/v1/admin/keys/{A}/{key_id}"),
        &admin,
        Value::Null,
    )
    .await
    .expect(StatusCode::OK, "remove key");
    // Refused: a publish token of B tries to deprecate in A.
    send(
        &r,
        Method::POST,
        &format!("{release}/deprecate"),
        &outsider,
        json!({"message": "mine now"}),
    )
    .await
    .expect(StatusCode::FORBIDDEN, "refused");

    let listed = send(&r, Method::GET, "/v1/admin/audit", &admin, Value::Null).await;
    listed.expect(StatusCode::OK, "audit");
    let text = listed.text();
    for secret in [&admin, &outsider, &created_token] {
        assert!(
            !text.contains(secret.as_str()),
            "a token secret in the audit list"
        );
    }
    let events = listed.json()["events"].as_array().unwrap().clone();
    let find = |action: &str, outcome: &str| {
        events
            .iter()
            .find(|e| e["action"] == action && e["outcome"] == outcome)
            .unwrap_or_else(|| panic!("no {outcome} {action} event in {events:#?}"))
            .clone()
    };
    let provider = format!("providers/{A}/null/1.0.0");
    let expected = [
        ("publish", provider.clone()),
        ("release.deprecate", provider.clone()),
        ("release.yank", provider.clone()),
        ("token.create", "tokens".to_string()),
        ("token.revoke", format!("token {created_id}")),
        ("key.add", format!("keys of {A}")),
        ("key.remove", format!("key {key_id} of {A}")),
    ];
    for (action, target) in &expected {
        let e = find(action, "ok");
        assert_eq!(e["actor"]["kind"], "token", "{e}");
        assert_eq!(e["actor"]["token_name"], "release-admin", "{e}");
        assert_eq!(e["actor"]["token_id"], admin_id.as_str(), "{e}");
        assert_eq!(e["target"], target.as_str(), "{e}");
    }
    let refused = find("release.deprecate", "refused");
    assert_eq!(refused["actor"]["token_name"], "outsider", "{refused}");
    assert_eq!(refused["actor"]["token_id"], id_of(&outsider), "{refused}");
    assert_eq!(refused["status"], 403, "{refused}");
    assert_eq!(refused["target"], provider.as_str(), "{refused}");
    eprintln!(
        "FIGURE audit {}: {} events listed, {} actions checked (+1 refused)",
        r.name,
        events.len(),
        expected.len()
    );
}

// ---------------------------------------------------------------------------
// Lifecycle
// ---------------------------------------------------------------------------

/// Deprecate warns and keeps listing; yank unlists but exact downloads
/// answer; unyank and undeprecate restore; a module's deprecation shows its
/// reason; delete removes the version from every response and its archives
/// from the blob store, and the other version still downloads.
async fn release_lifecycle(r: TestRegistry) {
    let admin = r.token(Scope::Admin, None).await;
    let signer = TestSigner::rsa();
    for version in ["1.0.0", "2.0.0"] {
        publish_provider(&r, &admin, A, version, &signer)
            .await
            .expect(StatusCode::CREATED, version);
    }
    publish_module(&r, &admin, A, "1.0.0")
        .await
        .expect(StatusCode::CREATED, "module");
    let versions = format!("/v1/providers/{A}/null/versions");
    let download = |v: &str| format!("/v1/providers/{A}/null/{v}/download/linux/amd64");
    let mirror_index = format!("/v1/mirror/{HOST}/{A}/null/index.json");
    let mirror_version = |v: &str| format!("/v1/mirror/{HOST}/{A}/null/{v}.json");
    let admin_path = |v: &str, action: &str| format!("/v1/admin/providers/{A}/null/{v}/{action}");
    let change = |v: &'static str, action: &'static str, body: Value| {
        let r = &r;
        let admin = &admin;
        let path = admin_path(v, action);
        async move {
            send(r, Method::POST, &path, admin, body)
                .await
                .expect(StatusCode::OK, action)
                .json()
        }
    };
    let get = |path: String| {
        let r = &r;
        let admin = &admin;
        async move { r.get_with(&path, admin).await }
    };

    // Deprecate: listed, with a warning naming it.
    change("1.0.0", "deprecate", json!({"message": "use 2.0.0"})).await;
    let resp = get(versions.clone()).await;
    assert_eq!(provider_versions(&resp), ["1.0.0", "2.0.0"], "{}", r.name);
    let warnings = resp.json()["warnings"].clone();
    assert!(
        warnings
            .as_array()
            .is_some_and(|w| w.len() == 1 && w[0].as_str().unwrap().contains("1.0.0")),
        "{}: {warnings}",
        r.name
    );
    // Yank: unlisted; exact downloads still answer.
    change("1.0.0", "yank", json!({"message": "broken"})).await;
    assert_eq!(provider_versions(&get(versions.clone()).await), ["2.0.0"]);
    get(download("1.0.0"))
        .await
        .expect(StatusCode::OK, "yanked download");
    assert_eq!(mirror_versions(&get(mirror_index.clone()).await), ["2.0.0"]);
    get(mirror_version("1.0.0"))
        .await
        .expect(StatusCode::OK, "yanked mirror version");
    // Restore.
    let unyanked = change("1.0.0", "unyank", json!({})).await;
    assert_eq!(unyanked["changed"], true);
    let undeprecated = change("1.0.0", "undeprecate", json!({})).await;
    assert_eq!(undeprecated["changed"], true);
    let resp = get(versions.clone()).await;
    assert_eq!(provider_versions(&resp), ["1.0.0", "2.0.0"]);
    assert!(
        resp.json()["warnings"]
            .as_array()
            .is_none_or(|w| w.is_empty()),
        "{}",
        resp.text()
    );
    assert_eq!(
        mirror_versions(&get(mirror_index.clone()).await),
        ["1.0.0", "2.0.0"]
    );
    // A module's deprecation carries its reason.
    send(
        &r,
        Method::POST,
        &format!("/v1/admin/modules/{A}/m/aws/1.0.0/deprecate"),
        &admin,
        json!({"message": "moved to alpha/m2/aws"}),
    )
    .await
    .expect(StatusCode::OK, "module deprecate");
    let modules = get(format!("/v1/modules/{A}/m/aws/versions")).await.json();
    assert_eq!(
        modules["modules"][0]["versions"][0]["deprecation"]["reason"],
        "moved to alpha/m2/aws"
    );

    // Delete 1.0.0: gone everywhere, its archives too.
    let before = archives(&r).await;
    let deleted = send(
        &r,
        Method::DELETE,
        &format!("/v1/admin/providers/{A}/null/1.0.0"),
        &admin,
        Value::Null,
    )
    .await;
    deleted.expect(StatusCode::OK, "delete");
    let after = archives(&r).await;
    let removed: Vec<&String> = before.difference(&after).collect();
    assert!(!removed.is_empty(), "{}: archives removed", r.name);
    assert!(removed.iter().all(|k| k.contains("_1.0.0")), "{removed:?}");
    assert!(!after.iter().any(|k| k.contains("null_1.0.0")), "{after:?}");
    assert_eq!(
        deleted.json()["archives_removed"].as_u64(),
        Some(removed.len() as u64)
    );
    assert_eq!(provider_versions(&get(versions.clone()).await), ["2.0.0"]);
    get(download("1.0.0"))
        .await
        .expect(StatusCode::NOT_FOUND, "deleted download");
    get(mirror_version("1.0.0"))
        .await
        .expect(StatusCode::NOT_FOUND, "deleted mirror version");
    assert_eq!(mirror_versions(&get(mirror_index.clone()).await), ["2.0.0"]);
    let resp = get(download("2.0.0")).await;
    resp.expect(StatusCode::OK, "the other version");
    let url = resp.json()["download_url"].as_str().unwrap().to_string();
    r.download(&url)
        .await
        .expect(StatusCode::OK, "the other version's archive");
    send(
        &r,
        Method::DELETE,
        &format!("/v1/admin/providers/{A}/null/1.0.0"),
        &admin,
        Value::Null,
    )
    .await
    .expect(StatusCode::NOT_FOUND, "delete again");
    eprintln!(
        "FIGURE lifecycle {}: delete removed {} archive files, {} left",
        r.name,
        removed.len(),
        after.len()
    );
}

// ---------------------------------------------------------------------------
// Namespace signing keys
// ---------------------------------------------------------------------------

/// 2020-01-01T12:00:00Z: the expired test key is valid then (the other one
/// is not made yet: it signs at the real time).
fn new_year_2020() -> u64 {
    1_577_880_000
}

/// The key id a provider download names.
async fn download_key_id(r: &TestRegistry, token: &str, version: &str) -> String {
    let resp = r
        .get_with(
            &format!("/v1/providers/{A}/null/{version}/download/linux/amd64"),
            token,
        )
        .await;
    resp.expect(StatusCode::OK, "download");
    resp.json()["signing_keys"]["gpg_public_keys"][0]["key_id"]
        .as_str()
        .unwrap()
        .to_string()
}

/// Registered keys decide who may sign a namespace's releases: another key
/// is refused naming the registered ones, a registered key passes and is
/// the one downloads name; rotation (remove one, add another) moves that
/// right. With `require_namespace_keys`, a namespace without keys is refused
/// at begin (403), before any upload.
#[tokio::test]
async fn namespace_keys_decide_and_rotate() {
    let r = TestRegistry::embedded().await;
    // The second key signs in 2020 (it expired the next day).
    let then = r.reconfigure(|reg: Registry| reg.with_clock(new_year_2020));
    let admin = r.token(Scope::Admin, None).await;
    let (first, second) = (TestSigner::rsa(), TestSigner::expired());
    // A key is registered while it can sign: the second one in 2020 (an
    // expired key is refused).
    let add = |signer: &TestSigner, in_2020: bool| {
        let armor = signer.public_armor;
        let r = if in_2020 { &then } else { &r };
        let admin = &admin;
        async move {
            let resp = send(
                r,
                Method::POST,
                &format!("/v1/admin/keys/{A}"),
                admin,
                json!({ "keys": [armor] }),
            )
            .await;
            resp.expect(StatusCode::CREATED, "add key");
            resp.json()["keys"][0]["key_id"]
                .as_str()
                .unwrap()
                .to_string()
        }
    };
    let first_id = add(&first, false).await;
    let resp = publish_provider(&then, &admin, A, "1.0.0", &second).await;
    resp.expect(StatusCode::BAD_REQUEST, "signed by an unregistered key");
    assert!(resp.error().contains(&first_id), "{}", resp.error());
    publish_provider(&r, &admin, A, "1.0.1", &first)
        .await
        .expect(StatusCode::CREATED, "signed by the registered key");
    assert_eq!(download_key_id(&r, &admin, "1.0.1").await, first_id);

    // Rotation: remove the first key, add the second.
    send(
        &r,
        Method::DELETE,
        &format!("/v1/admin/keys/{A}/{first_id}"),
        &admin,
        Value::Null,
    )
    .await
    .expect(StatusCode::OK, "remove key");
    let second_id = add(&second, true).await;
    assert_ne!(first_id, second_id);
    let resp = publish_provider(&r, &admin, A, "1.0.2", &first).await;
    resp.expect(StatusCode::BAD_REQUEST, "the old key after rotation");
    assert!(resp.error().contains(&second_id), "{}", resp.error());
    publish_provider(&then, &admin, A, "1.0.3", &second)
        .await
        .expect(StatusCode::CREATED, "the new key");
    assert_eq!(download_key_id(&r, &admin, "1.0.3").await, second_id);
    assert_eq!(
        download_key_id(&r, &admin, "1.0.1").await,
        first_id,
        "a release keeps the key it was verified with"
    );

    // Keys required: a namespace without keys is refused at begin.
    let strict = r.reconfigure(|mut reg: Registry| {
        reg.config.require_namespace_keys = true;
        reg
    });
    let before = strict.registry.blobs.list("").await.unwrap();
    let files = provider_release("null", "1.0.0", &["linux_amd64"], &first);
    let resp = strict
        .publish(
            &target(&format!("providers/{B}/null/1.0.0")),
            &admin,
            &files,
            provider_request(&first),
        )
        .await;
    resp.expect(StatusCode::FORBIDDEN, "no keys in beta");
    assert!(resp.error().contains("no registered signing keys"));
    assert!(resp.headers.get("www-authenticate").is_none());
    assert_eq!(strict.registry.blobs.list("").await.unwrap(), before);
    // A namespace with keys still publishes.
    let strict_then = then.reconfigure(|mut reg: Registry| {
        reg.config.require_namespace_keys = true;
        reg
    });
    publish_provider(&strict_then, &admin, A, "1.0.4", &second)
        .await
        .expect(StatusCode::CREATED, "keys in alpha");
}

/// The matrix against the Lambda functions (every function its own process
/// under `cargo lambda watch`, over HTTPS, on the DynamoDB and S3 emulators),
/// private as deployed, their token cache off: the same rules, the same
/// answers as in-process. Fixtures and tokens are made in-process on the
/// functions' own table and bucket.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn matrix_on_the_lambda_functions() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("lambda");
    let server = tokio::task::spawn_blocking(move || {
        crate::support::Server::start_lambda_with(&dir, &[("TFREG_TOKEN_CACHE_SECS", "0")])
    })
    .await
    .unwrap();
    let mut stores =
        TestRegistry::aws_existing(server.table().expect("a Lambda server's table")).await;
    stores.name = "lambda";
    let host = server.host.clone();
    matrix_via(stores, false, Via::Https(&server), &host).await;
    let requests = crate::support::log::requests(&server.server_log());
    let admin = requests.iter().filter(|r| r.endpoint == "admin").count();
    assert!(admin > 0, "the admin function answered: {requests:#?}");
    eprintln!(
        "FIGURE access matrix lambda: {} requests through the functions, {admin} to admin",
        requests.len()
    );
    drop(server);
}

/// Who may use the CI token exchange (`POST /v1/auth/exchange`, public):
/// whoever holds a CI job's OIDC token that a trust policy matches. The
/// bearer token sent along, whatever it is (none, malformed, unknown,
/// expired, revoked, valid of any scope), is never looked at: a trusted CI
/// token is 200 with each, an untrusted one 403 with each (an admin token
/// does not make it pass), no CI token 400 with each; never a 401 for the
/// bearer token. On both backends (the used `jti` is a conditional put).
async fn ci_exchange_is_for_whoever_holds_a_trusted_ci_token(r: TestRegistry) {
    use crate::ci_exchange::{Issuer, exchange_app, github_claims, github_policy, post, trust};
    let tmp = tempfile::tempdir().unwrap();
    let issuer = Issuer::start(tmp.path());
    let r = private(&r);
    trust(&r.registry, A, github_policy(&issuer.op.issuer)).await;
    let settings = tfreg_auth::CiSettings::new(&[&issuer.op.issuer]).unwrap();
    let app = exchange_app(&r, &issuer, settings);
    let mut row = String::new();
    for cred in CREDS {
        let token = make_credential(&r, cred).await;
        let header = match cred {
            Cred::Basic => Some("Basic x".to_string()),
            Cred::BearerEmpty => Some("Bearer".to_string()),
            _ => token.as_ref().map(|t| format!("Bearer {t}")),
        };
        let claims = github_claims(tfreg_testkit::PUBLIC_URL, json!({}));
        let trusted = issuer.sign(json!({"claims": claims})).await;
        let resp = post(
            &app,
            header.as_deref(),
            &json!({"token": trusted}).to_string(),
        )
        .await;
        assert_eq!(
            resp.status,
            StatusCode::OK,
            "{}: {}",
            cred.label(),
            resp.text()
        );
        assert_eq!(resp.json()["namespaces"], json!([A]), "{}", cred.label());
        let claims = github_claims(
            tfreg_testkit::PUBLIC_URL,
            json!({"repository_owner_id": "666"}),
        );
        let untrusted = issuer.sign(json!({"claims": claims})).await;
        let refused = post(
            &app,
            header.as_deref(),
            &json!({"token": untrusted}).to_string(),
        )
        .await;
        assert_eq!(
            refused.status,
            StatusCode::FORBIDDEN,
            "{}: {}",
            cred.label(),
            refused.text()
        );
        let none = post(&app, header.as_deref(), "{}").await;
        assert_eq!(
            none.status,
            StatusCode::BAD_REQUEST,
            "{}: {}",
            cred.label(),
            none.text()
        );
        row.push_str(&format!(
            " {}:{}/{}/{}",
            cred.label(),
            resp.status.as_u16(),
            refused.status.as_u16(),
            none.status.as_u16()
        ));
    }
    eprintln!(
        "FIGURE access matrix {}: ci token exchange (trusted/untrusted/none):{row}",
        r.name
    );
}

contract!(
    matrix_private,
    a_signed_out_session_is_refused_everywhere,
    a_token_of_two_grants_reads_everywhere_and_publishes_to_one,
    a_token_stored_before_grants_works_unchanged,
    matrix_anonymous_reads,
    authorisation_cost,
    last_use_is_listed,
    audit_trail,
    release_lifecycle,
    ci_exchange_is_for_whoever_holds_a_trusted_ci_token,
);
