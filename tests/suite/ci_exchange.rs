//! CI publishing with no stored secret (issue 21): a CI job's OIDC token
//! exchanged at `POST /v1/auth/exchange` for a short-lived publish token.
//! The issuer is the real OpenID Provider (`tests/oidc/provider.mjs`) over
//! HTTPS (a CA made here, trusted by the registry), minting GitHub- and
//! GitLab-shaped tokens with `/_test/sign`. In-process (the registry's
//! clock moved): every attack with its exact answer, and the token's
//! rights and expiry. Against the real `tfreg serve`: the exchanged token
//! publishes with the real `tfreg publish` in the trusted namespace only,
//! `tfreg publish --oidc` on GitLab's and GitHub's ways of handing a job
//! its token, and no token in any log line.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::{Method, StatusCode};
use serde_json::{Value, json};
use tfreg_auth::{Auth, CiSettings, Exchange};
use tfreg_http::auth::TokenCache;
use tfreg_http::registry::{Registry, unix_now};
use tfreg_http::{App, Served};
use tfreg_model::trust::{IssuerKind, TrustPolicy, TrustRecord};
use tfreg_store::catalog::sso;
use tfreg_testkit::oidc::Provider;
use tfreg_testkit::{PUBLIC_URL, TestRegistry, TestResponse, every_group};

use crate::support::dist::write_tree;
use crate::support::server::{Server, free_port};
use crate::support::tools::tfreg_bin;

// ---------------------------------------------------------------------------
// The issuer over HTTPS
// ---------------------------------------------------------------------------

/// A CA and a certificate for 127.0.0.1 it signed, as PEM files in `dir`:
/// (CA, certificate, key).
fn tls_files(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    crate::support::fixtures::tls_files(dir, "ci", &["127.0.0.1", "localhost"])
}

/// A CI issuer: the provider over HTTPS, and a client that trusts it.
pub(crate) struct Issuer {
    pub op: Provider,
    pub ca: PathBuf,
    http: reqwest::Client,
}

impl Issuer {
    /// The provider over HTTPS with a certificate of a CA made in `dir`
    /// (the CA is reused when `dir` has one already).
    pub fn start(dir: &Path) -> Issuer {
        let ca_path = dir.join("ci-ca.pem");
        let (ca, cert, key) = if ca_path.exists() {
            (ca_path, dir.join("ci.pem"), dir.join("ci-key.pem"))
        } else {
            tls_files(dir)
        };
        let op = Provider::start(json!({
            // The CI tokens are minted with /_test/sign; no one signs in.
            "clients": [{"client_id": "unused", "client_secret": "unused",
                         "redirect_uris": ["https://registry.test/oauth/callback"]}],
            "users": [],
            "tls": {"cert": cert, "key": key},
        }));
        assert!(op.issuer.starts_with("https://"), "{}", op.issuer);
        let http = reqwest::Client::builder()
            .add_root_certificate(
                reqwest::Certificate::from_pem(&std::fs::read(&ca).unwrap()).unwrap(),
            )
            .build()
            .unwrap();
        Issuer { op, ca, http }
    }

    /// A JWT signed as `/_test/sign` says (`claims` over iss, iat, exp, jti).
    pub async fn sign(&self, body: Value) -> String {
        self.op.sign_with(&self.http, body).await
    }

    /// New keys sign from now on (the old ones stay published).
    pub async fn rotate(&self) -> Value {
        self.op.rotate_with(&self.http, false).await
    }

    /// A rustls configuration trusting this issuer's CA (for the registry).
    pub fn tls(&self) -> rustls::ClientConfig {
        let mut roots = rustls::RootCertStore::empty();
        let pem = std::fs::read(&self.ca).unwrap();
        for cert in rustls_pemfile_certs(&pem) {
            roots.add(cert).unwrap();
        }
        rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth()
    }
}

fn rustls_pemfile_certs(pem: &[u8]) -> Vec<rustls::pki_types::CertificateDer<'static>> {
    use rustls::pki_types::pem::PemObject;
    rustls::pki_types::CertificateDer::pem_slice_iter(pem)
        .collect::<Result<_, _>>()
        .unwrap()
}

/// A GitHub Actions token's claims for a release job of acme/app (owner
/// 1234, repository 5678) on a protected tag, for audience `aud`, with `nbf`
/// backdated as GitHub does; `extra` over them.
pub(crate) fn github_claims(aud: &str, extra: Value) -> Value {
    let now = unix_now();
    let mut claims = json!({
        "sub": "repo:acme/app:environment:release",
        "aud": aud,
        "repository": "acme/app",
        "repository_id": "5678",
        "repository_owner": "acme",
        "repository_owner_id": "1234",
        "ref": "refs/tags/v1.2.0",
        "ref_type": "tag",
        "ref_protected": "true",
        "environment": "release",
        "workflow_ref": "acme/app/.github/workflows/release.yml@refs/tags/v1.2.0",
        "job_workflow_ref": "acme/app/.github/workflows/release.yml@refs/tags/v1.2.0",
        "event_name": "push",
        "runner_environment": "github-hosted",
        "iat": now,
        "nbf": now - 600,
        "exp": now + 300,
    });
    for (k, v) in extra.as_object().unwrap() {
        claims[k] = v.clone();
    }
    claims
}

/// A GitLab CI token's claims for project acme-group/app (namespace 77,
/// project 42) on protected main, for audience `aud`; `extra` over them.
pub(crate) fn gitlab_claims(aud: &str, extra: Value) -> Value {
    let now = unix_now();
    let mut claims = json!({
        "sub": "project_path:acme-group/app:ref_type:branch:ref:main",
        "aud": aud,
        "namespace_id": "77",
        "namespace_path": "acme-group",
        "project_id": "42",
        "project_path": "acme-group/app",
        "user_id": "9", "user_login": "ci-bot",
        "pipeline_id": "1001", "pipeline_source": "push", "job_id": "5005",
        "ref": "main", "ref_type": "branch", "ref_path": "refs/heads/main",
        "ref_protected": "true",
        "environment": "production", "environment_protected": "true",
        "ci_config_ref_uri": "gitlab.example.com/acme-group/app//.gitlab-ci.yml@refs/heads/main",
        "runner_environment": "self-hosted",
        "iat": now, "nbf": now - 5, "exp": now + 3600,
    });
    for (k, v) in extra.as_object().unwrap() {
        claims[k] = v.clone();
    }
    claims
}

/// The policy acme gives GitHub-shaped tokens of `issuer`: owner 1234's
/// release workflow, on a protected tag.
pub(crate) fn github_policy(issuer: &str) -> TrustPolicy {
    let claims = [
        ("repository_owner_id", "1234"),
        ("repository", "acme/app"),
        (
            "job_workflow_ref",
            "acme/app/.github/workflows/release.yml@refs/tags/v*",
        ),
        ("ref_protected", "true"),
        ("environment", "release"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    TrustPolicy::new(issuer, Some(IssuerKind::GitHub), None, &claims).unwrap()
}

pub(crate) async fn trust(r: &Registry, namespace: &str, policy: TrustPolicy) {
    let record = TrustRecord {
        id: policy.id(),
        namespace: namespace.into(),
        policy,
        added_at: 1,
        added_by: "test".into(),
    };
    sso::add_policy(r.items.as_ref(), &record).await.unwrap();
}

// ---------------------------------------------------------------------------
// In-process
// ---------------------------------------------------------------------------

/// The registry's clock of these tests: the real one plus this.
static OFFSET: AtomicU64 = AtomicU64::new(0);

fn moved_clock() -> u64 {
    unix_now() + OFFSET.load(Ordering::SeqCst)
}

/// `r` with the exchange for `issuer` (every group, as `tfreg serve`), the
/// moved clock and no token cache.
pub(crate) fn exchange_app(r: &TestRegistry, issuer: &Issuer, settings: CiSettings) -> App {
    let http = tfreg_auth::oidc::http_client(issuer.tls()).unwrap();
    let served: Served =
        every_group().auth(Auth::new().with_exchange(Exchange::new(settings, http)));
    App::new(r.registry.clone(), served)
}

/// POST the exchange `body` (with `authorization` if given).
pub(crate) async fn post(app: &App, authorization: Option<&str>, body: &str) -> TestResponse {
    let mut req = http::Request::builder()
        .method(Method::POST)
        .uri("/v1/auth/exchange")
        .header("content-type", "application/json");
    if let Some(a) = authorization {
        req = req.header("authorization", a);
    }
    let req = req
        .body(tfreg_http::body::Body::from(Bytes::from(body.to_string())))
        .unwrap();
    let resp = app.handle(req).await;
    let (parts, body) = resp.into_parts();
    TestResponse {
        status: parts.status,
        headers: parts.headers,
        body: axum::body::to_bytes(body, usize::MAX).await.unwrap(),
    }
}

async fn exchange(app: &App, jwt: &str) -> TestResponse {
    post(app, None, &json!({"token": jwt}).to_string()).await
}

/// base64url without padding (RFC 4648 5), as JWTs are written.
fn base64url(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..=chunk.len() {
            out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
        }
    }
    out
}

/// A compact JWT with `header` over the payload of `signed` and no signature.
fn unsigned(header: Value, signed: &str) -> String {
    let payload = signed.split('.').nth(1).unwrap();
    format!("{}.{payload}.", base64url(header.to_string().as_bytes()))
}

#[test]
fn base64url_is_rfc_4648_s() {
    for (plain, encoded) in [
        ("", ""),
        ("f", "Zg"),
        ("fo", "Zm8"),
        ("foo", "Zm9v"),
        ("foob", "Zm9vYg"),
        ("\u{ff}\u{fe}", "w7_Dvg"),
    ] {
        assert_eq!(base64url(plain.as_bytes()), encoded, "{plain:?}");
    }
}

/// The exchange's answers, each with its status and reason; the token's
/// rights; its expiry on the registry's clock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exchange_answers_each_attack_exactly_and_its_token_publishes_to_acme_only() {
    let tmp = tempfile::tempdir().unwrap();
    let issuer = Issuer::start(tmp.path());
    let iss = issuer.op.issuer.clone();
    let base = TestRegistry::embedded().await;
    let r = base.reconfigure(|mut reg: Registry| {
        reg.config.anonymous_reads = false;
        reg.tokens = Arc::new(TokenCache::new(std::time::Duration::ZERO));
        reg.with_clock(moved_clock)
    });
    trust(&r.registry, "acme", github_policy(&iss)).await;
    let app = exchange_app(&r, &issuer, CiSettings::new(&[&iss]).unwrap());
    let gh = |extra: Value| github_claims(PUBLIC_URL, extra);

    // A GitHub-shaped token (RS256, then ES256): a publish token for acme.
    let jwt = issuer.sign(json!({"claims": gh(json!({}))})).await;
    let resp = exchange(&app, &jwt).await;
    assert_eq!(resp.status, StatusCode::OK, "{}", resp.text());
    assert_eq!(resp.headers["cache-control"], "no-store");
    let answer = resp.json();
    let token = answer["token"].as_str().unwrap().to_string();
    assert!(token.starts_with("tfreg_"));
    assert_eq!(answer["namespaces"], json!(["acme"]));
    assert_eq!(
        answer["grants"],
        json!([{"scope": "publish", "namespaces": ["acme"]}])
    );
    let expires_at = answer["expires_at"].as_u64().unwrap();
    assert!((moved_clock() + 895..=moved_clock() + 900).contains(&expires_at));
    let es = issuer
        .sign(json!({"claims": gh(json!({})), "alg": "ES256"}))
        .await;
    assert_eq!(exchange(&app, &es).await.status, StatusCode::OK);

    // The issuer rotates its keys while the registry runs: the new kid
    // makes it fetch the keys again, and the token verifies.
    issuer.rotate().await;
    let rotated = issuer.sign(json!({"claims": gh(json!({}))})).await;
    let resp = exchange(&app, &rotated).await;
    assert_eq!(
        resp.status,
        StatusCode::OK,
        "after a rotation: {}",
        resp.text()
    );

    // Every refusal, with its status and what it says.
    let now = unix_now();
    let kid = issuer.op.ready["signing_kid"].as_str().unwrap().to_string();
    let mut cases: Vec<(&str, String, u16, &str)> = vec![
        ("replayed jti", jwt.clone(), 401, "already exchanged"),
        (
            "wrong audience",
            issuer
                .sign(json!({"claims": github_claims("https://other.example.com", json!({}))}))
                .await,
            401,
            "another audience",
        ),
        (
            "our audience and another",
            issuer
                .sign(json!({"claims": gh(json!({"aud": [PUBLIC_URL, "sts.amazonaws.com"]}))}))
                .await,
            401,
            "another audience",
        ),
        (
            "unknown issuer",
            issuer
                .sign(json!({"claims": gh(json!({"iss": "https://token.actions.githubusercontent.com"}))}))
                .await,
            401,
            "issuer is not one this registry accepts",
        ),
        (
            "a claim that does not match",
            issuer
                .sign(json!({"claims": gh(json!({"repository_owner_id": "9999"}))}))
                .await,
            403,
            "no trust policy matches",
        ),
        (
            "a branch, not a tag",
            issuer
                .sign(json!({"claims": gh(json!({
                    "job_workflow_ref": "acme/app/.github/workflows/release.yml@refs/heads/main"}))}))
                .await,
            403,
            "no trust policy matches",
        ),
        (
            "a future iat",
            issuer
                .sign(json!({"claims": gh(json!({"iat": now + 600, "exp": now + 900}))}))
                .await,
            401,
            "issued in the future",
        ),
        (
            "exp - iat over the cap",
            issuer
                .sign(json!({"claims": gh(json!({"iat": now - 10, "exp": now + 3600}))}))
                .await,
            401,
            "more than the 3600 s accepted",
        ),
        (
            "expired",
            issuer
                .sign(json!({"claims": gh(json!({"iat": now - 900, "exp": now - 120}))}))
                .await,
            401,
            "expired",
        ),
        (
            "no jti",
            issuer
                .sign(json!({"claims": gh(json!({"jti": null}))}))
                .await,
            401,
            "no jti",
        ),
        (
            "signed by a key not in the JWKS",
            issuer
                .sign(json!({"claims": gh(json!({})), "key": "unpublished"}))
                .await,
            401,
            "unknown key",
        ),
        (
            "signed by another key, naming a published kid",
            issuer
                .sign(json!({"claims": gh(json!({})), "key": "unpublished",
                             "header": {"kid": kid}}))
                .await,
            401,
            "signature does not verify",
        ),
        ("not a JWT", "not-a-jwt".into(), 401, "malformed"),
    ];
    let fresh = issuer.sign(json!({"claims": gh(json!({}))})).await;
    cases.push((
        "alg none",
        unsigned(json!({"alg": "none", "kid": kid}), &fresh),
        401,
        "algorithm none",
    ));
    cases.push((
        "HS256 keyed with anything",
        unsigned(json!({"alg": "HS256", "kid": kid}), &fresh),
        401,
        "algorithm HS256",
    ));
    let mut failures = Vec::new();
    for (what, jwt, status, says) in cases {
        let resp = exchange(&app, &jwt).await;
        let error = if resp.status.is_success() {
            resp.text()
        } else {
            resp.error()
        };
        if resp.status.as_u16() != status || !error.contains(says) || error.contains(&jwt) {
            failures.push(format!(
                "{what}: expected {status} saying {says:?}, got {}: {error}",
                resp.status
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // The refused tokens were not used up: a valid one still exchanges.
    assert_eq!(exchange(&app, &fresh).await.status, StatusCode::OK);

    // Malformed requests: 400, the token never quoted.
    for body in [
        "{}".to_string(),
        "not json".into(),
        json!({"token": ""}).to_string(),
        json!({"token": jwt, "scope": "admin"}).to_string(),
        json!({"token": 5}).to_string(),
    ] {
        let resp = post(&app, None, &body).await;
        assert_eq!(
            resp.status,
            StatusCode::BAD_REQUEST,
            "{body}: {}",
            resp.text()
        );
        assert!(!resp.text().contains(&jwt[..40]), "{}", resp.text());
    }
    // Narrowed to a namespace that does not trust the job: 403.
    let narrowed = issuer.sign(json!({"claims": gh(json!({}))})).await;
    let resp = post(
        &app,
        None,
        &json!({"token": narrowed, "namespaces": ["acme", "tools"]}).to_string(),
    )
    .await;
    assert_eq!(resp.status, StatusCode::FORBIDDEN, "{}", resp.text());
    assert!(resp.error().contains("namespace tools"), "{}", resp.error());

    // The token publishes to acme, and nowhere else; never admin.
    let ok = crate::access::publish_module(&r, &token, "acme", "1.0.0").await;
    assert!(ok.status.is_success(), "{}", ok.text());
    let other = crate::access::publish_module(&r, &token, "other", "1.0.0").await;
    assert_eq!(other.status, StatusCode::FORBIDDEN, "{}", other.text());
    let admin = r
        .request(
            Method::GET,
            "/v1/admin/tokens",
            Some(&token),
            &[],
            Bytes::new(),
        )
        .await;
    assert_eq!(admin.status, StatusCode::FORBIDDEN, "{}", admin.text());
    // It is an ordinary token: listed with whom it was issued to.
    let tokens = tfreg_store::catalog::tokens::list(r.registry.items.as_ref())
        .await
        .unwrap();
    let issued: Vec<_> = tokens
        .iter()
        .filter_map(|t| t.record.issued_to.as_ref())
        .collect();
    assert!(
        issued
            .iter()
            .all(|s| s.iss == iss && s.sub == "repo:acme/app:environment:release"),
        "{issued:?}"
    );
    assert_eq!(issued.len(), 4);

    // Fifteen minutes on, it is expired.
    OFFSET.store(expires_at - unix_now(), Ordering::SeqCst);
    let late = crate::access::publish_module(&r, &token, "acme", "1.0.1").await;
    assert_eq!(late.status, StatusCode::UNAUTHORIZED, "{}", late.text());
    assert!(late.error().contains("expired"), "{}", late.error());
    // And on the registry's clock a fresh CI token is expired too.
    OFFSET.store(3600, Ordering::SeqCst);
    let stale = issuer.sign(json!({"claims": gh(json!({}))})).await;
    let resp = exchange(&app, &stale).await;
    assert_eq!(resp.status, StatusCode::UNAUTHORIZED, "{}", resp.text());
    assert!(resp.error().contains("expired"), "{}", resp.error());
    OFFSET.store(0, Ordering::SeqCst);
}

/// Without CI issuers the route answers 404; with a CI issuer and no
/// identity provider, login.v1 is off (404) and the exchange works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_exchange_works_without_an_identity_provider_and_is_off_without_issuers() {
    let tmp = tempfile::tempdir().unwrap();
    let issuer = Issuer::start(tmp.path());
    let r = TestRegistry::embedded().await;
    let off = App::new(r.registry.clone(), every_group());
    let jwt = issuer
        .sign(json!({"claims": github_claims(PUBLIC_URL, json!({}))}))
        .await;
    assert_eq!(exchange(&off, &jwt).await.status, StatusCode::NOT_FOUND);
    trust(&r.registry, "acme", github_policy(&issuer.op.issuer)).await;
    let settings = CiSettings::new(&[&issuer.op.issuer])
        .unwrap()
        .with_audience("tfreg-ci")
        .unwrap();
    let app = exchange_app(&r, &issuer, settings);
    let req = http::Request::get("/oauth/authorize")
        .body(tfreg_http::body::Body::empty())
        .unwrap();
    assert_eq!(app.handle(req).await.status(), StatusCode::NOT_FOUND);
    // The configured audience, not the registry's URL.
    assert_eq!(exchange(&app, &jwt).await.status, StatusCode::UNAUTHORIZED);
    let ours = issuer
        .sign(json!({"claims": github_claims("tfreg-ci", json!({}))}))
        .await;
    let resp = exchange(&app, &ours).await;
    assert_eq!(resp.status, StatusCode::OK, "{}", resp.text());

    // An allow-listed issuer that cannot be reached: 502 (not the job's
    // fault, nothing of the detail told), and again at once without a fetch.
    let down = format!("https://127.0.0.1:{}", free_port());
    let app = exchange_app(&r, &issuer, CiSettings::new(&[&down]).unwrap());
    let claims = github_claims(PUBLIC_URL, json!({"iss": down}));
    for _ in 0..2 {
        let jwt = issuer.sign(json!({"claims": claims})).await;
        let resp = exchange(&app, &jwt).await;
        assert_eq!(resp.status, StatusCode::BAD_GATEWAY, "{}", resp.text());
        assert!(resp.error().contains("try again later"), "{}", resp.error());
    }
}

// ---------------------------------------------------------------------------
// The real server and CLI
// ---------------------------------------------------------------------------

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// A stand-in for GitHub's ID token request URL: as GitHub documents it,
/// `GET $ACTIONS_ID_TOKEN_REQUEST_URL&audience=AUD` with `Authorization:
/// Bearer $ACTIONS_ID_TOKEN_REQUEST_TOKEN` answers `{"value": "<JWT>"}`
/// (and 401 to a wrong bearer). Here the JWT is minted beforehand by the
/// issuer for the audience the test expects; the requests seen are kept.
pub(crate) struct GitHubStandIn {
    pub url: String,
    pub seen: Arc<Mutex<Vec<String>>>,
}

impl GitHubStandIn {
    pub fn start(bearer: &'static str, jwt: String) -> GitHubStandIn {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let kept = seen.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                let mut authorized = false;
                loop {
                    let mut header = String::new();
                    if reader.read_line(&mut header).unwrap() == 0 || header.trim().is_empty() {
                        break;
                    }
                    let lower = header.to_ascii_lowercase();
                    if lower.starts_with("authorization:")
                        && header.trim_end().ends_with(&format!("Bearer {bearer}"))
                    {
                        authorized = true;
                    }
                }
                kept.lock().unwrap().push(line.trim().to_string());
                let (status, body) = if authorized {
                    ("200 OK", json!({"count": 1, "value": jwt}).to_string())
                } else {
                    ("401 Unauthorized", r#"{"message":"bad token"}"#.to_string())
                };
                let _ = write!(
                    stream,
                    "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.flush();
                let _ = reader.read(&mut [0u8; 1]);
            }
        });
        GitHubStandIn {
            url: format!("http://127.0.0.1:{port}/_apis/idtoken?api-version=2.0"),
            seen,
        }
    }
}

/// `tfreg serve --private` in `dir` exchanging the tokens of two CI
/// issuers over HTTPS: GitHub-shaped and GitLab-shaped (their CA trusted).
pub(crate) fn serve_with_ci_issuers(dir: &Path) -> (Issuer, Issuer, Server) {
    let github = Issuer::start(dir);
    let gitlab = Issuer::start(dir);
    let server = Server::start_with_env(
        &dir.join("data"),
        &format!("127.0.0.1:{}", free_port()),
        &[
            "--private",
            "--ci-issuer",
            &github.op.issuer,
            "--ci-issuer",
            &gitlab.op.issuer,
        ],
        &[("SSL_CERT_FILE", &github.ca)],
    );
    (github, gitlab, server)
}

/// `tfreg publish module --oidc` of `src` as `module` `version`, with `env`
/// and no TFREG_TOKEN.
fn publish_oidc(
    server: &Server,
    src: &Path,
    module: &str,
    version: &str,
    env: &[(&str, &str)],
) -> Output {
    let [ns, name, system] = module.split('/').collect::<Vec<_>>()[..] else {
        panic!("{module}")
    };
    Command::new(tfreg_bin())
        .args(["publish", "module"])
        .arg(src)
        .args(["--namespace", ns, "--name", name, "--system", system])
        .args([
            "--version",
            version,
            "--registry",
            &server.url(""),
            "--oidc",
        ])
        .env_remove("TFREG_TOKEN")
        .env_remove("ACTIONS_ID_TOKEN_REQUEST_URL")
        .env_remove("ACTIONS_ID_TOKEN_REQUEST_TOKEN")
        .env_remove("TFREG_ID_TOKEN")
        .env("SSL_CERT_FILE", &server.ca)
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `tfreg serve --ci-issuer` twice (a GitHub-like and a GitLab-like issuer,
/// no identity provider): exchanged tokens publish with the real `tfreg
/// publish` to the trusted namespace and are refused (403) in another;
/// `tfreg publish --oidc` with GitLab's variable and with GitHub's request
/// URL; no JWT or issued token in any line of the server's log.
#[test]
fn tfreg_serve_exchanges_ci_tokens_and_tfreg_publish_oidc_uses_them() {
    let tmp = tempfile::tempdir().unwrap();
    let (github, gitlab, server) = serve_with_ci_issuers(tmp.path());
    let registry_url = server.url("");
    let admin = server.token("admin", None);
    // The policies, as the README says to add them.
    let add = |args: &[&str]| {
        let out = server.tfreg(&admin, args);
        assert!(out.status.success(), "{}", stderr(&out));
    };
    add(&[
        "trust",
        "add",
        "acme",
        "--issuer",
        &github.op.issuer,
        "--kind",
        "github",
        "--claim",
        "repository_owner_id=1234",
        "--claim",
        "job_workflow_ref=acme/app/.github/workflows/release.yml@refs/tags/v*",
        "--claim",
        "ref_protected=true",
    ]);
    add(&[
        "trust",
        "add",
        "glteam",
        "--issuer",
        &gitlab.op.issuer,
        "--kind",
        "gitlab",
        "--claim",
        "namespace_id=77",
        "--claim",
        "project_path=acme-group/app",
        "--claim",
        "ci_config_ref_uri=gitlab.example.com/acme-group/app//.gitlab-ci.yml@refs/heads/main",
        "--claim",
        "ref_protected=true",
        "--claim",
        "environment=production",
    ]);
    let src = tmp.path().join("module");
    write_tree(&src, &[("main.tf", "output \"x\" { value = 1 }\n")]);
    let rt = runtime();
    let mut secrets = Vec::new();

    // GitHub-shaped: exchanged over HTTPS, then a real publish.
    let jwt = rt.block_on(github.sign(json!({"claims": github_claims(&registry_url, json!({}))})));
    secrets.push(jwt.clone());
    let resp = server
        .http
        .post(server.url("/v1/auth/exchange"))
        .bearer_auth("tfreg_stale-or-revoked")
        .json(&json!({"token": jwt}))
        .send()
        .unwrap();
    assert_eq!(resp.status(), 200);
    let answer: Value = resp.json().unwrap();
    let token = answer["token"].as_str().unwrap().to_string();
    secrets.push(token.clone());
    assert_eq!(answer["namespaces"], json!(["acme"]));
    let out = server.publish_module(&token, &src, "acme/net/aws", "1.0.0");
    assert!(out.status.success(), "{}", stderr(&out));
    let out = server.publish_module(&token, &src, "glteam/net/aws", "1.0.0");
    assert!(!out.status.success());
    assert!(stderr(&out).contains("403"), "{}", stderr(&out));
    // Replayed: 401.
    let again = server
        .http
        .post(server.url("/v1/auth/exchange"))
        .json(&json!({"token": jwt}))
        .send()
        .unwrap();
    assert_eq!(again.status(), 401);

    // GitLab-shaped, as `id_tokens:` hands it over: TFREG_ID_TOKEN.
    let gl_jwt =
        rt.block_on(gitlab.sign(json!({"claims": gitlab_claims(&registry_url, json!({}))})));
    secrets.push(gl_jwt.clone());
    let out = publish_oidc(
        &server,
        &src,
        "glteam/net/aws",
        "1.0.0",
        &[("TFREG_ID_TOKEN", &gl_jwt)],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("publish on glteam"),
        "{}",
        stderr(&out)
    );
    assert!(!stderr(&out).contains("tfreg_"), "{}", stderr(&out));
    // A job in another environment: no policy matches, 403.
    let gl_other =
        rt.block_on(gitlab.sign(
            json!({"claims": gitlab_claims(&registry_url, json!({"environment": "staging"}))}),
        ));
    secrets.push(gl_other.clone());
    let out = publish_oidc(
        &server,
        &src,
        "acme/net/aws",
        "1.0.1",
        &[("MY_TOKEN", &gl_other)],
    );
    assert!(!out.status.success(), "the default variable is unset");
    assert!(stderr(&out).contains("id-token: write"), "{}", stderr(&out));
    let out = Command::new(tfreg_bin())
        .args(["publish", "module"])
        .arg(&src)
        .args(["--namespace", "acme", "--name", "net", "--system", "aws"])
        .args(["--version", "1.0.1", "--registry", &registry_url, "--oidc"])
        .args(["--oidc-token-env", "MY_TOKEN"])
        .env_remove("TFREG_TOKEN")
        .env_remove("ACTIONS_ID_TOKEN_REQUEST_URL")
        .env("SSL_CERT_FILE", &server.ca)
        .env("MY_TOKEN", &gl_other)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("403") && stderr(&out).contains("no trust policy matches"),
        "{}",
        stderr(&out)
    );

    // GitHub's way: the request URL and its bearer, the audience added.
    let gh_jwt =
        rt.block_on(github.sign(json!({"claims": github_claims(&registry_url, json!({}))})));
    secrets.push(gh_jwt.clone());
    let stand_in = GitHubStandIn::start("req-secret", gh_jwt);
    let out = publish_oidc(
        &server,
        &src,
        "acme/net/aws",
        "1.1.0",
        &[
            ("ACTIONS_ID_TOKEN_REQUEST_URL", &stand_in.url),
            ("ACTIONS_ID_TOKEN_REQUEST_TOKEN", "req-secret"),
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let seen = stand_in.seen.lock().unwrap().clone();
    let audience: String = url::form_urlencoded::byte_serialize(registry_url.as_bytes()).collect();
    assert_eq!(
        seen,
        [format!(
            "GET /_apis/idtoken?api-version=2.0&audience={audience} HTTP/1.1"
        )]
    );
    // A wrong request token: GitHub's 401, said.
    let out = publish_oidc(
        &server,
        &src,
        "acme/net/aws",
        "1.2.0",
        &[
            ("ACTIONS_ID_TOKEN_REQUEST_URL", &stand_in.url),
            ("ACTIONS_ID_TOKEN_REQUEST_TOKEN", "wrong"),
        ],
    );
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("GitHub's ID token request answered 401"),
        "{}",
        stderr(&out)
    );

    // The versions are there; the audit names the exchanges.
    let versions = server
        .http
        .get(server.url("/v1/modules/acme/net/aws/versions"))
        .bearer_auth(&admin)
        .send()
        .unwrap();
    assert_eq!(versions.status(), 200);
    let log = server.server_log();
    // One audit line per exchange, naming the job (iss and sub), never the token.
    let audits: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("token.exchange") && l.contains("status=200"))
        .collect();
    assert_eq!(audits.len(), 3, "{log}");
    assert!(
        audits
            .iter()
            .any(|l| l.contains("project_path:acme-group/app") && l.contains(&gitlab.op.issuer)),
        "{audits:#?}"
    );
    assert!(
        audits
            .iter()
            .any(|l| l.contains("repo:acme/app:environment:release")
                && l.contains(&github.op.issuer)),
        "{audits:#?}"
    );
    for secret in &secrets {
        assert!(!log.contains(secret.as_str()), "a token in the log:\n{log}");
        // Not even its signature or payload.
        for part in secret.split('.').filter(|p| p.len() > 20) {
            assert!(!log.contains(part), "part of a token in the log:\n{log}");
        }
    }
}
