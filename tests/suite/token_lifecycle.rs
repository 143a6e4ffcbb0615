//! Issue 35's holes around issued tokens, each closed, with its exact
//! answer: exchanged (and signed-in) tokens are items that expire (the store
//! deletes them a day after: DynamoDB's TTL attribute, the embedded sweep)
//! and lists hide them from their expiry on (`?all=true`, `tfreg token list
//! --all`); a CI identity holds at most 32 live exchanged tokens (429 with
//! `Retry-After`, the OIDC token not used up); a JWT whose header has `crit`
//! is refused; a trust policy for an issuer the registry does not allow-list
//! is refused at write; token names that draw nothing or spoof are refused.
//! The issuer is the real OpenID Provider over HTTPS (`ci_exchange`'s
//! harness); the store-backed ones run on both backends.

use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use http::{Method, StatusCode};
use serde_json::{Value, json};
use tfreg_auth::CiSettings;
use tfreg_http::App;
use tfreg_http::auth::TokenCache;
use tfreg_http::registry::{Registry, unix_now};
use tfreg_model::exchange::MAX_LIVE_EXCHANGED;
use tfreg_model::token::{EXPIRED_TOKEN_KEPT_SECS, Scope, TOKENS_PK, hash_of};
use tfreg_testkit::{PUBLIC_URL, TestRegistry, TestResponse};

use crate::ci_exchange::{Issuer, exchange_app, github_claims, github_policy, post, trust};
use crate::support::server::Server;
use crate::support::tools::tfreg_bin;

/// Each backend's registry clock: the real one plus its offset.
static EMBEDDED_OFFSET: AtomicU64 = AtomicU64::new(0);
static AWS_OFFSET: AtomicU64 = AtomicU64::new(0);

fn embedded_clock() -> u64 {
    unix_now() + EMBEDDED_OFFSET.load(Ordering::SeqCst)
}

fn aws_clock() -> u64 {
    unix_now() + AWS_OFFSET.load(Ordering::SeqCst)
}

/// A registry's moved clock.
struct Clock {
    now: fn() -> u64,
    offset: &'static AtomicU64,
}

impl Clock {
    fn advance(&self, secs: u64) {
        self.offset.fetch_add(secs, Ordering::SeqCst);
    }
}

/// A fresh GitHub-shaped CI token, timed on the registry's clock, with
/// `extra` claims over the defaults.
async fn ci_token(issuer: &Issuer, clock: &Clock, extra: Value) -> String {
    let now = (clock.now)();
    let mut claims = json!({"iat": now, "nbf": now - 600, "exp": now + 300});
    for (k, v) in extra.as_object().unwrap() {
        claims[k] = v.clone();
    }
    issuer
        .sign(json!({"claims": github_claims(PUBLIC_URL, claims)}))
        .await
}

async fn exchange(app: &App, jwt: &str) -> TestResponse {
    post(app, None, &json!({"token": jwt}).to_string()).await
}

/// `GET /v1/admin/tokens` with `query`, as `admin`.
async fn token_list(r: &TestRegistry, admin: &str, query: &str) -> TestResponse {
    r.request(
        Method::GET,
        &format!("/v1/admin/tokens{query}"),
        Some(admin),
        &[],
        Bytes::new(),
    )
    .await
}

/// `POST path` with JSON `body`, as `admin`.
async fn post_json(r: &TestRegistry, path: &str, admin: &str, body: &Value) -> TestResponse {
    r.request(
        Method::POST,
        path,
        Some(admin),
        &[("content-type", "application/json")],
        Bytes::from(body.to_string()),
    )
    .await
}

fn ids(list: &Value) -> Vec<String> {
    list["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap().to_string())
        .collect()
}

/// 32 exchanges of one CI identity: each token an item expiring a day after
/// it; the 33rd answered 429 with `Retry-After` and its OIDC token kept
/// usable; another identity unaffected; once the first tokens expired their
/// places are free, they leave the list (`?all=true` shows them) and are
/// refused as expired.
async fn exchanged_tokens_expire_leave_the_list_and_are_bounded(r: TestRegistry, clock: Clock) {
    let tmp = tempfile::tempdir().unwrap();
    let issuer = Issuer::start(tmp.path());
    let iss = issuer.op.issuer.clone();
    let r = r.reconfigure(|mut reg: Registry| {
        reg.tokens = Arc::new(TokenCache::new(std::time::Duration::ZERO));
        reg.with_clock(clock.now)
    });
    trust(&r.registry, "acme", github_policy(&iss)).await;
    let mut settings = CiSettings::new(&[&iss]).unwrap();
    settings.token_ttl_secs = 60;
    let app = exchange_app(&r, &issuer, settings);
    let admin = r.token(Scope::Admin, None).await;

    let mut issued = Vec::new();
    for i in 0..MAX_LIVE_EXCHANGED {
        let resp = exchange(&app, &ci_token(&issuer, &clock, json!({})).await).await;
        assert_eq!(
            resp.status,
            StatusCode::OK,
            "{} #{i}: {}",
            r.name,
            resp.text()
        );
        let answer = resp.json();
        issued.push((
            answer["token"].as_str().unwrap().to_string(),
            answer["token_id"].as_str().unwrap().to_string(),
            answer["expires_at"].as_u64().unwrap(),
        ));
    }
    // Each token's item expires a day after the token (DynamoDB's TTL
    // attribute `expires_at`; the embedded store's sweep column).
    let (token, _, expires_at) = &issued[0];
    let item = r
        .registry
        .items
        .get(TOKENS_PK, &hash_of(token))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        item.expires_at,
        Some(expires_at + EXPIRED_TOKEN_KEPT_SECS),
        "{}",
        r.name
    );

    // One more of the same identity: 429, how long to wait, the JWT kept.
    let one_more = ci_token(&issuer, &clock, json!({})).await;
    let resp = exchange(&app, &one_more).await;
    assert_eq!(
        resp.status,
        StatusCode::TOO_MANY_REQUESTS,
        "{}: {}",
        r.name,
        resp.text()
    );
    assert_eq!(
        resp.json(),
        json!({"errors": [format!(
            "the CI identity repo:acme/app:environment:release of {iss} already holds 32 live tokens from the exchange, the most it may: retry once the first expires (Retry-After)"
        )]}),
        "{}",
        r.name
    );
    let retry: u64 = resp.headers["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    let first_free = issued.iter().map(|t| t.2).min().unwrap();
    assert!(
        (first_free - (clock.now)()..=first_free - (clock.now)() + 2).contains(&retry),
        "{}: Retry-After {retry}",
        r.name
    );
    // Another identity of the same repository is not held back.
    let other = ci_token(
        &issuer,
        &clock,
        json!({"sub": "repo:acme/app:ref:refs/tags/v1.2.0"}),
    )
    .await;
    assert_eq!(
        exchange(&app, &other).await.status,
        StatusCode::OK,
        "{}",
        r.name
    );

    // All live: listed (with the admin's and the other identity's).
    let listed = token_list(&r, &admin, "").await;
    assert_eq!(listed.status, StatusCode::OK, "{}", listed.text());
    assert_eq!(
        ids(&listed.json()).len(),
        MAX_LIVE_EXCHANGED + 2,
        "{}",
        r.name
    );
    assert!(listed.json().get("expired_hidden").is_none());

    // A minute on, they expired: the refused JWT now exchanges (its jti
    // was not used up), the list hides them, ?all=true shows them, and a
    // use is refused as expired (the item is kept a day for that).
    clock.advance(61);
    let resp = exchange(&app, &one_more).await;
    assert_eq!(resp.status, StatusCode::OK, "{}: {}", r.name, resp.text());
    let retried = resp.json()["token_id"].as_str().unwrap().to_string();
    let listed = token_list(&r, &admin, "").await.json();
    assert_eq!(
        ids(&listed),
        [ids(&listed)[0].clone(), retried],
        "{}",
        r.name
    );
    assert_eq!(
        listed["expired_hidden"],
        json!(MAX_LIVE_EXCHANGED + 1),
        "{}",
        r.name
    );
    let all = token_list(&r, &admin, "?all=true").await.json();
    assert_eq!(ids(&all).len(), MAX_LIVE_EXCHANGED + 3, "{}", r.name);
    assert!(ids(&all).contains(&issued[0].1));
    let bad = token_list(&r, &admin, "?all=yes").await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    assert_eq!(bad.json(), json!({"errors": ["all must be true or false"]}));
    let late = crate::access::publish_module(&r, &issued[0].0, "acme", "1.0.0").await;
    assert_eq!(late.status, StatusCode::UNAUTHORIZED, "{}", late.text());
    assert!(late.error().contains("expired at"), "{}", late.error());
}

async fn exchanged_tokens_expire_leave_the_list_and_are_bounded_on(r: TestRegistry) {
    let clock = match r.name {
        "aws" => Clock {
            now: aws_clock,
            offset: &AWS_OFFSET,
        },
        _ => Clock {
            now: embedded_clock,
            offset: &EMBEDDED_OFFSET,
        },
    };
    exchanged_tokens_expire_leave_the_list_and_are_bounded(r, clock).await
}

/// RFC 7515 4.1.11: a correctly signed token whose header marks an
/// extension critical is refused (401), naming it; nothing fetched or used.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ci_token_whose_header_has_crit_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let issuer = Issuer::start(tmp.path());
    let r = TestRegistry::embedded().await;
    trust(&r.registry, "acme", github_policy(&issuer.op.issuer)).await;
    let app = exchange_app(&r, &issuer, CiSettings::new(&[&issuer.op.issuer]).unwrap());
    let jti = format!("crit-{}", unix_now());
    let claims = github_claims(PUBLIC_URL, json!({"jti": jti}));
    let crit = issuer
        .sign(json!({"claims": claims, "header": {"crit": ["exp-unknown"], "exp-unknown": true}}))
        .await;
    let resp = exchange(&app, &crit).await;
    assert_eq!(resp.status, StatusCode::UNAUTHORIZED, "{}", resp.text());
    assert_eq!(
        resp.json(),
        json!({"errors": ["the CI job's OIDC token is refused: the ID token's header marks exp-unknown critical (crit): an extension this registry does not implement, so the token is refused (RFC 7515 4.1.11)"]})
    );
    // The same claims (its jti too) without crit: exchanged, as nothing was used up.
    let same_jti = issuer
        .sign(json!({"claims": github_claims(PUBLIC_URL, json!({"jti": jti}))}))
        .await;
    let resp = exchange(&app, &same_jti).await;
    assert_eq!(resp.status, StatusCode::OK, "{}", resp.text());
}

/// `POST /v1/admin/trust/acme` for an issuer the registry does not accept
/// CI tokens from: 400 naming the ones it does (or that it has none);
/// an allow-listed one is added; a registry that does not know its issuers
/// (the CLI on the stores) does not check.
async fn a_trust_policy_for_an_issuer_not_allow_listed_is_refused(r: TestRegistry) {
    let policy = json!({"issuer": "https://gitlab.com", "claims": {"project_id": "42"}});
    let add = |r: &TestRegistry, admin: String, body: Value| {
        let r = r.reconfigure(|reg| reg);
        async move { post_json(&r, "/v1/admin/trust/acme", &admin, &body).await }
    };
    let listed = r.reconfigure(|mut reg: Registry| {
        reg.config.ci_issuers = Some(vec![
            "https://token.actions.githubusercontent.com".into(),
            "https://gitlab.example.com".into(),
        ]);
        reg
    });
    let admin = listed.token(Scope::Admin, None).await;
    let resp = add(&listed, admin.clone(), policy.clone()).await;
    assert_eq!(
        resp.status,
        StatusCode::BAD_REQUEST,
        "{}: {}",
        r.name,
        resp.text()
    );
    assert_eq!(
        resp.json(),
        json!({"errors": ["https://gitlab.com is not among the CI issuers this registry accepts tokens from (https://token.actions.githubusercontent.com, https://gitlab.example.com), so a policy for it could never match: allow-list it first (tfreg serve --ci-issuer, or the stack's CiIssuers)"]})
    );
    let ok = json!({"issuer": "https://gitlab.example.com", "kind": "gitlab", "claims": {"project_id": "42"}});
    let resp = add(&listed, admin.clone(), ok).await;
    assert_eq!(
        resp.status,
        StatusCode::CREATED,
        "{}: {}",
        r.name,
        resp.text()
    );
    let none = r.reconfigure(|mut reg: Registry| {
        reg.config.ci_issuers = Some(vec![]);
        reg
    });
    let resp = add(&none, admin.clone(), policy.clone()).await;
    assert_eq!(
        resp.status,
        StatusCode::BAD_REQUEST,
        "{}: {}",
        r.name,
        resp.text()
    );
    assert_eq!(
        resp.json(),
        json!({"errors": ["https://gitlab.com is not among the CI issuers this registry accepts tokens from (none: the CI exchange is off), so a policy for it could never match: allow-list it first (tfreg serve --ci-issuer, or the stack's CiIssuers)"]})
    );
    // Not known here: not checked.
    let resp = add(&r, admin, policy).await;
    assert_eq!(
        resp.status,
        StatusCode::CREATED,
        "{}: {}",
        r.name,
        resp.text()
    );
}

/// Token names that draw nothing, carry a lone or stacked mark, or a space
/// other than U+0020: 400 with why, through the admin API. Namespace names
/// are ASCII: a filler in one is refused as any non-ASCII character is.
async fn token_and_namespace_names_that_draw_nothing_are_refused(r: TestRegistry) {
    let admin = r.token(Scope::Admin, None).await;
    let create = |name: &str| {
        let body = json!({"name": name, "scopes": ["read"]});
        let r = r.reconfigure(|reg| reg);
        let admin = admin.clone();
        async move { post_json(&r, "/v1/admin/tokens", &admin, &body).await }
    };
    for (name, says) in [
        (
            "\u{3164}",
            "a token's name holds the invisible or control character U+3164: write plain text",
        ),
        (
            "ci\u{3164}",
            "a token's name holds the invisible or control character U+3164: write plain text",
        ),
        (
            "\u{115F}\u{1160}",
            "a token's name holds the invisible or control character U+115F: write plain text",
        ),
        (
            "ci\u{FFA0}",
            "a token's name holds the invisible or control character U+FFA0: write plain text",
        ),
        (
            "ci\u{2800}",
            "a token's name holds the invisible or control character U+2800: write plain text",
        ),
        (
            "ci\u{034F}",
            "a token's name holds the invisible or control character U+034F: write plain text",
        ),
        (
            "ci\u{2061}",
            "a token's name holds the invisible or control character U+2061: write plain text",
        ),
        (
            "\u{0301}ci",
            "a token's name holds the combining mark U+0301 with no letter before it to combine with: write plain text",
        ),
        (
            "ci \u{0336}",
            "a token's name holds the combining mark U+0336 with no letter before it to combine with: write plain text",
        ),
        (
            "ci\u{0300}\u{0301}\u{0302}\u{0303}\u{0304}",
            "a token's name stacks more than 4 combining marks on one character: write plain text",
        ),
        (
            "ci\u{3000}prod",
            "a token's name holds the space character U+3000: use a plain space",
        ),
        (
            "ci\u{00A0}prod",
            "a token's name holds the space character U+00A0: use a plain space",
        ),
    ] {
        let resp = create(name).await;
        assert_eq!(
            resp.status,
            StatusCode::BAD_REQUEST,
            "{name:?}: {}",
            resp.text()
        );
        assert_eq!(
            resp.json(),
            json!({"errors": [says]}),
            "{}: {name:?}",
            r.name
        );
    }
    // Marks on letters are text: an NFD "café", Hindi, an emoji with its selector.
    for name in ["cafe\u{0301}", "हिन्दी टोकन", "\u{2764}\u{FE0F} ci"] {
        let resp = create(name).await;
        assert_eq!(
            resp.status,
            StatusCode::CREATED,
            "{name:?}: {}",
            resp.text()
        );
        assert_eq!(resp.json()["name"], json!(name));
    }
    // Namespaces: a grant, a publish path and a trust policy's namespace.
    let grant = json!({"name": "g", "grants": [{"scope": "read", "namespaces": ["acme\u{3164}"]}]});
    let resp = post_json(&r, "/v1/admin/tokens", &admin, &grant).await;
    assert_eq!(resp.status, StatusCode::BAD_REQUEST, "{}", resp.text());
    assert!(
        resp.error()
            .contains("only letters, digits, underscores and dashes are allowed"),
        "{}",
        resp.error()
    );
    let resp = r
        .request(
            Method::GET,
            "/v1/admin/trust/acme%E3%85%A4",
            Some(&admin),
            &[],
            Bytes::new(),
        )
        .await;
    assert_eq!(resp.status, StatusCode::BAD_REQUEST, "{}", resp.text());
}

crate::backend_contract::contract!(
    exchanged_tokens_expire_leave_the_list_and_are_bounded_on,
    a_trust_policy_for_an_issuer_not_allow_listed_is_refused,
    token_and_namespace_names_that_draw_nothing_are_refused,
);

/// The real CLI: `tfreg token list` leaves out an expired token and says
/// so, `--all` lists it; `tfreg trust add` on a `tfreg serve --ci-issuer`
/// refuses another issuer with why; a Hangul filler name is refused.
#[test]
fn tfreg_token_list_hides_expired_tokens_and_trust_add_checks_the_issuer() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let server = Server::start(
        &data,
        &[
            "--private",
            "--ci-issuer",
            "https://token.actions.githubusercontent.com",
        ],
    );
    let admin = server.token("admin", None);
    let out = server.tfreg(
        &admin,
        &[
            "token",
            "create",
            "--name",
            "short",
            "--scope",
            "read",
            "--expires-in",
            "1s",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let short = String::from_utf8_lossy(&out.stderr).into_owned();
    let id = short
        .split("(id ")
        .nth(1)
        .and_then(|rest| rest.split(')').next())
        .unwrap()
        .to_string();
    std::thread::sleep(std::time::Duration::from_millis(2100));
    let out = server.tfreg(&admin, &["token", "list"]);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(out.status.success(), "{stderr}");
    assert!(!stdout.contains(&id), "{stdout}");
    assert_eq!(
        stderr.trim(),
        "(1 expired token not shown: --all lists them)"
    );
    let out = server.tfreg(&admin, &["token", "list", "--all"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains(&id));
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // On the data directory (the operator) the same.
    let local = Command::new(tfreg_bin())
        .args(["token", "list", "--json", "--data-dir"])
        .arg(&data)
        .output()
        .unwrap();
    let listed: Value = serde_json::from_slice(&local.stdout).unwrap();
    assert_eq!(listed["expired_hidden"], json!(1), "{listed}");

    let out = server.tfreg(
        &admin,
        &[
            "trust",
            "add",
            "acme",
            "--issuer",
            "https://gitlab.com",
            "--claim",
            "project_id=42",
        ],
    );
    assert!(!out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim(),
        "error: the registry answered 400 Bad Request: https://gitlab.com is not among the CI issuers this registry accepts tokens from (https://token.actions.githubusercontent.com), so a policy for it could never match: allow-list it first (tfreg serve --ci-issuer, or the stack's CiIssuers)"
    );
    let out = server.tfreg(
        &admin,
        &["token", "create", "--name", "ci\u{3164}", "--scope", "read"],
    );
    assert!(!out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim(),
        "error: the registry answered 400 Bad Request: a token's name holds the invisible or control character U+3164: write plain text"
    );
}
