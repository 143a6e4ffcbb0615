//! `terraform login`'s protocol (login.v1) end to end: the real `tfreg
//! serve` over HTTPS brokering to the real OpenID Provider
//! (`tests/oidc/provider.mjs`), driven over HTTP as Terraform drives it
//! (PKCE S256, a random state, `http://localhost:PORT/login`) with a cookie
//! jar standing in for the browser at the provider's forms.

use std::path::Path;

use serde_json::{Value, json};
use tfreg_model::login::{pkce_challenge, random_value};
use tfreg_model::sso::GroupMapping;
use tfreg_model::token::Scope;
use tfreg_store::catalog::sso;
use tfreg_store::sqlite::SqliteStore;
use tfreg_testkit::oidc::{Browser, Hop, Provider, query_param};

use crate::support::dist::write_tree;
use crate::support::server::{Server, free_port};

const CLIENT: &str = "tfreg";
const SECRET: &str = "s3cret-of-the-registry";
const REDIRECT: &str = "http://localhost:10000/login";

/// The provider and `tfreg serve --private` signing in with it; alice is
/// in `acme-readers` (read on `acme`), bob only in `other` (mapped to nothing).
pub(crate) fn start(tmp: &Path) -> (Provider, Server) {
    let port = free_port();
    let registry = format!("https://127.0.0.1:{port}");
    let op = Provider::start(json!({
        "clients": [{"client_id": CLIENT, "client_secret": SECRET,
                     "redirect_uris": [format!("{registry}/oauth/callback")]}],
        "users": [
            {"sub": "alice", "email": "alice@example.com", "name": "Alice",
             "groups": ["acme-readers", "unmapped"]},
            {"sub": "bob", "email": "bob@example.com", "groups": ["other"]}
        ],
        "skip_consent": true,
    }));
    let secret_file = tmp.join("client-secret");
    std::fs::write(&secret_file, format!("{SECRET}\n")).unwrap();
    let data = tmp.join("data");
    let server = Server::start_at(
        &data,
        &format!("127.0.0.1:{port}"),
        &[
            "--private",
            "--oidc-issuer",
            &op.issuer,
            "--oidc-client-id",
            CLIENT,
            "--oidc-client-secret-file",
            secret_file.to_str().unwrap(),
        ],
    );
    let store = SqliteStore::open(&data.join("registry.db")).unwrap();
    let mapping = GroupMapping::new("acme-readers", Scope::Read, &["acme"]).unwrap();
    runtime()
        .block_on(sso::put_mapping(&store, &mapping))
        .unwrap();
    (op, server)
}

pub(crate) fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// An async client trusting the registry's CA, following no redirects.
fn client(server: &Server) -> reqwest::Client {
    let ca = reqwest::Certificate::from_pem(&std::fs::read(&server.ca).unwrap()).unwrap();
    reqwest::Client::builder()
        .add_root_certificate(ca)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// What Terraform sends the browser to, and keeps.
struct Attempt {
    url: String,
    state: String,
    verifier: String,
}

fn attempt(server: &Server) -> Attempt {
    let state = random_value();
    let verifier = random_value();
    let query: String = url::form_urlencoded::Serializer::new(String::new())
        .append_pair("response_type", "code")
        .append_pair("client_id", "terraform-cli")
        .append_pair("redirect_uri", REDIRECT)
        .append_pair("state", &state)
        .append_pair("code_challenge", &pkce_challenge(&verifier))
        .append_pair("code_challenge_method", "S256")
        .finish();
    Attempt {
        url: server.url(&format!("/oauth/authorize?{query}")),
        state,
        verifier,
    }
}

/// Terraform's token request.
async fn exchange(
    http: &reqwest::Client,
    server: &Server,
    code: &str,
    verifier: &str,
) -> (u16, Value) {
    let resp = http
        .post(server.url("/oauth/token"))
        .form(&[
            ("grant_type", "authorization_code"),
            ("code", code),
            ("redirect_uri", REDIRECT),
            ("code_verifier", verifier),
            ("client_id", "terraform-cli"),
        ])
        .send()
        .await
        .unwrap();
    (resp.status().as_u16(), resp.json().await.unwrap())
}

/// The code in the last redirect of a sign-in, which must go back to Terraform.
fn code_of(hops: &[Hop], a: &Attempt) -> String {
    let back = hops.last().unwrap().location.clone().unwrap_or_default();
    assert!(back.starts_with(REDIRECT), "{hops:#?}");
    assert_eq!(
        query_param(&back, "state").as_deref(),
        Some(a.state.as_str())
    );
    query_param(&back, "code").unwrap()
}

/// The last hop sends Terraform's browser back to its listener refused
/// with `reason`: `error=access_denied`, the reason and its state, and a
/// code the token endpoint answers 400 `access_denied` with the reason.
async fn refused_back(
    http: &reqwest::Client,
    server: &Server,
    hops: &[Hop],
    a: &Attempt,
    reason: &str,
) {
    let last = hops.last().unwrap();
    assert_eq!(last.status, 303, "{hops:#?}");
    let back = url::Url::parse(last.location.as_deref().unwrap()).unwrap();
    assert_eq!(back.as_str().split('?').next(), Some(REDIRECT), "{back}");
    let q: std::collections::HashMap<_, _> = back.query_pairs().into_owned().collect();
    assert_eq!(q["error"], "access_denied", "{back}");
    assert_eq!(q["error_description"], reason, "{back}");
    assert_eq!(q["state"], a.state, "{back}");
    let (status, body) = exchange(http, server, &q["code"], &a.verifier).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"], "access_denied", "{body}");
    assert_eq!(body["error_description"], reason, "{body}");
    assert_eq!(
        body["errors"],
        json!([format!("access_denied: {reason}")]),
        "{body}"
    );
}

async fn status_with(http: &reqwest::Client, server: &Server, path: &str, token: &str) -> u16 {
    http.get(server.url(path))
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

#[test]
fn terraform_login_s_protocol_through_the_identity_provider() {
    let tmp = tempfile::tempdir().unwrap();
    let (op, server) = start(tmp.path());
    let publisher = server.token("publish", Some("acme"));
    let admin = server.token("admin", None);
    for ns in ["acme", "other"] {
        let src = tmp.path().join(format!("module-{ns}"));
        write_tree(&src, &[("main.tf", "output \"x\" { value = 1 }\n")]);
        let token = if ns == "acme" {
            publisher.clone()
        } else {
            admin.clone()
        };
        let out = server.publish_module(&token, &src, &format!("{ns}/net/aws"), "1.0.0");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let http = client(&server);
    let rt = runtime();
    let (token, login_code) = rt.block_on(async {
        // Discovery advertises login.v1, and a stale token blocks nothing.
        let disco: Value = http
            .get(server.url("/.well-known/terraform.json"))
            .bearer_auth("tfreg_stale-or-revoked")
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(
            disco["login.v1"],
            json!({"client": "terraform-cli", "grant_types": ["authz_code"],
                   "authz": "/oauth/authorize", "token": "/oauth/token",
                   "ports": [10000, 10010]})
        );

        let a = attempt(&server);
        let mut browser = Browser::new(http.clone());
        let hops = browser.sign_in(&a.url, "alice", &[REDIRECT]).await;
        assert_eq!(hops[0].status, 303, "authorize: {:?}", hops[0]);
        assert!(
            hops[0].location.as_deref().unwrap().starts_with(&op.issuer),
            "to the provider: {:?}",
            hops[0]
        );
        let code = code_of(&hops, &a);
        let (status, body) = exchange(&http, &server, &code, &a.verifier).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["token_type"], "bearer");
        let token = body["access_token"].as_str().unwrap().to_string();
        // Once only.
        let (status, body) = exchange(&http, &server, &code, &a.verifier).await;
        assert_eq!(status, 400, "{body}");
        assert_eq!(body["error"], "invalid_grant", "{body}");
        assert!(
            body["errors"][0]
                .as_str()
                .unwrap()
                .contains("invalid_grant"),
            "{body}"
        );

        // The token reads what the mapping grants, and nothing else.
        let acme = "/v1/modules/acme/net/aws/versions";
        let other = "/v1/modules/other/net/aws/versions";
        assert_eq!(status_with(&http, &server, acme, &token).await, 200);
        assert_eq!(status_with(&http, &server, other, &token).await, 403);
        let publish = http
            .post(server.url("/v1/publish/modules/acme/net/aws/2.0.0/begin"))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap();
        assert_eq!(publish.status().as_u16(), 403, "read only");
        (token, code)
    });

    // Listed, with whom it was issued to and its expiry; audited; revocable.
    let listed: Value = server
        .http
        .get(server.url("/v1/admin/tokens"))
        .bearer_auth(&admin)
        .send()
        .unwrap()
        .json()
        .unwrap();
    let mine = listed
        .as_array()
        .or_else(|| listed["tokens"].as_array())
        .unwrap()
        .iter()
        .find(|t| t["issued_to"]["sub"] == "alice")
        .unwrap_or_else(|| panic!("no token issued to alice: {listed}"))
        .clone();
    assert_eq!(mine["issued_to"]["iss"], op.issuer.as_str());
    assert_eq!(mine["issued_to"]["email"], "alice@example.com");
    assert_eq!(mine["scopes"], json!(["read"]));
    assert_eq!(mine["namespaces"], json!(["acme"]));
    let lifetime = mine["expires_at"].as_u64().unwrap() - mine["created_at"].as_u64().unwrap();
    assert_eq!(lifetime, 12 * 3600);
    let audit = server
        .http
        .get(server.url("/v1/admin/audit"))
        .bearer_auth(&admin)
        .send()
        .unwrap()
        .text()
        .unwrap();
    let audit: Value = serde_json::from_str(&audit).unwrap();
    let events = audit
        .as_array()
        .or_else(|| audit["events"].as_array())
        .unwrap();
    let login = events
        .iter()
        .find(|e| e["action"] == "token.login")
        .unwrap_or_else(|| panic!("no token.login in {audit}"));
    assert_eq!(login["actor"]["token_id"], mine["id"]);
    let detail = login["detail"].as_str().unwrap();
    assert!(
        detail.contains("\"alice\"") && detail.contains(&op.issuer),
        "{detail}"
    );
    let id = mine["id"].as_str().unwrap();
    let revoked = server
        .http
        .delete(server.url(&format!("/v1/admin/tokens/{id}")))
        .bearer_auth(&admin)
        .send()
        .unwrap();
    assert!(revoked.status().is_success());
    let after = server
        .http
        .get(server.url("/v1/modules/acme/net/aws/versions"))
        .bearer_auth(&token)
        .send()
        .unwrap();
    assert_eq!(after.status().as_u16(), 401);

    // Neither the token, the code nor the client secret is in the log.
    let log = server.server_log();
    for secret in [token.as_str(), login_code.as_str(), SECRET] {
        assert!(!log.contains(secret), "a secret in the log");
    }
    assert!(log.contains("token.login"), "the audit line");
}

#[test]
fn no_mapped_group_no_token_and_tampering_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let (_op, server) = start(tmp.path());
    let http = client(&server);
    let callback = server.url("/oauth/callback");
    runtime().block_on(async {
        // bob's groups map to nothing: Terraform's listener hears why
        // (RFC 6749 4.1.2.1, with its state), and the code it gets with it
        // (Terraform reads only `code`) is answered with the same reason.
        let a = attempt(&server);
        let mut browser = Browser::new(http.clone());
        let hops = browser.sign_in(&a.url, "bob", &[REDIRECT]).await;
        let reason = "none of your groups is given access to this registry: ask its admins";
        refused_back(&http, &server, &hops, &a, reason).await;

        // The provider says no (the person cancelled at its page): the
        // same, with what it said.
        let a = attempt(&server);
        let mut browser = Browser::new(http.clone());
        let hops = browser.sign_in(&a.url, "alice", &[&callback]).await;
        let to_callback = hops.last().unwrap().location.clone().unwrap();
        let state = query_param(&to_callback, "state").unwrap();
        let said_no = format!(
            "{callback}?error=access_denied&state={}",
            url::form_urlencoded::byte_serialize(state.as_bytes()).collect::<String>()
        );
        let hop = browser.hop(&said_no, None).await;
        refused_back(
            &http,
            &server,
            &[hop],
            &a,
            "the identity provider did not sign you in: access_denied",
        )
        .await;

        // A state the registry never sealed, or one changed: a page (its
        // redirect URI cannot be trusted), nothing redirected.
        let a = attempt(&server);
        let mut browser = Browser::new(http.clone());
        let hops = browser.sign_in(&a.url, "alice", &[&callback]).await;
        let to_callback = hops.last().unwrap().location.clone().unwrap();
        let state = query_param(&to_callback, "state").unwrap();
        let (body, mac) = state.split_once('.').unwrap();
        for forged in [random_value(), format!("{body}x.{mac}"), format!("{body}.{}", random_value())] {
            let forged = to_callback.replace(
                &url::form_urlencoded::byte_serialize(state.as_bytes()).collect::<String>(),
                &forged,
            );
            assert_ne!(forged, to_callback);
            let hop = browser.hop(&forged, None).await;
            assert_eq!(hop.status, 400, "{hop:?}");
            assert!(hop.location.is_none(), "{hop:?}");
            assert!(
                hop.body
                    .contains("this sign-in is unknown, already finished or expired: start it again"),
                "{}",
                hop.body
            );
        }
        // The right state from another browser (no sign-in cookie): refused,
        // and its CLI hears it.
        let mut stranger = Browser::new(http.clone());
        let hop = stranger.hop(&to_callback, None).await;
        refused_back(
            &http,
            &server,
            &[hop],
            &a,
            "this sign-in was started in another browser (or its cookie is missing): start it again",
        )
        .await;
        // The stranger spoilt nothing: the right browser finishes it, once
        // (the same callback again, its cookie and all, gets no code: the
        // provider's code is spent).
        let cookie = browser.cookie(&to_callback, "__Host-tfreg_login").unwrap();
        let hop = browser.hop(&to_callback, None).await;
        assert_eq!(hop.status, 303, "{hop:?}");
        let code = code_of(&[hop], &a);
        let (status, body) = exchange(&http, &server, &code, &a.verifier).await;
        assert_eq!(status, 200, "{body}");
        let again = http
            .get(&to_callback)
            .header("cookie", format!("__Host-tfreg_login={cookie}"))
            .send()
            .await
            .unwrap();
        let hop = Hop {
            status: again.status().as_u16(),
            location: again
                .headers()
                .get("location")
                .map(|l| l.to_str().unwrap().to_string()),
            body: String::new(),
        };
        refused_back(
            &http,
            &server,
            &[hop],
            &a,
            "the identity provider refused the sign-in (invalid_grant): start it again",
        )
        .await;

        // A wrong PKCE verifier: invalid_grant, and the code is spent.
        let a = attempt(&server);
        let mut browser = Browser::new(http.clone());
        let code = code_of(&browser.sign_in(&a.url, "alice", &[REDIRECT]).await, &a);
        let (status, body) = exchange(&http, &server, &code, &random_value()).await;
        assert_eq!(
            (status, &body["error"]),
            (400, &json!("invalid_grant")),
            "{body}"
        );
        let (status, body) = exchange(&http, &server, &code, &a.verifier).await;
        assert_eq!(
            (status, &body["error"]),
            (400, &json!("invalid_grant")),
            "{body}"
        );

        // A redirect URI outside the advertised ports: a page, no redirect.
        let bad = a.url.replace("10000", "9999");
        let hop = Browser::new(http.clone()).hop(&bad, None).await;
        assert_eq!(hop.status, 400, "{hop:?}");
        assert!(hop.location.is_none());
        assert!(hop.body.contains("redirect_uri"), "{}", hop.body);

        // PKCE `plain` from a good client: the error goes back to its
        // listener with its state (RFC 6749 4.1.2.1), and nothing is kept.
        let plain = a
            .url
            .replace("code_challenge_method=S256", "code_challenge_method=plain");
        let hop = Browser::new(http.clone()).hop(&plain, None).await;
        assert_eq!(hop.status, 303, "{hop:?}");
        let back = url::Url::parse(hop.location.as_deref().unwrap()).unwrap();
        assert_eq!(back.as_str().split('?').next(), Some(REDIRECT));
        let q: std::collections::HashMap<_, _> = back.query_pairs().into_owned().collect();
        assert_eq!(q["error"], "invalid_request", "{back}");
        assert_eq!(q["state"], a.state, "{back}");
        assert!(q["error_description"].contains("S256"), "{back}");
    });
}

/// OpenTofu's `tofu login` cannot be run here (no package ships it), so its
/// listener is reproduced from its source (opentofu/opentofu
/// internal/command/login.go, `interactiveGetTokenByCode`): the callback's
/// form must carry the exact `state` (else 400, and tofu keeps waiting) and
/// a non-empty `code` (else 400, and tofu keeps waiting: the hang of issue
/// 35); `error` is never read. With both, tofu exchanges the code (golang
/// oauth2, as Terraform does) and prints the token endpoint's error.
fn tofu_callback(location: &str, req_state: &str) -> Result<String, u16> {
    let url = url::Url::parse(location).map_err(|_| 400u16)?;
    let form: std::collections::HashMap<_, _> = url.query_pairs().into_owned().collect();
    if form.get("state").map(String::as_str).unwrap_or_default() != req_state {
        return Err(400);
    }
    match form.get("code").map(String::as_str).unwrap_or_default() {
        "" => Err(400),
        code => Ok(code.to_string()),
    }
}

/// A person the registry refuses (bob: no mapped group), and one the
/// provider refuses: OpenTofu's listener takes the refusal (it carries the
/// state and a code), and the exchange that follows ends with the reason,
/// which tofu prints as "The remote server did not assign an auth token:
/// oauth2: \"access_denied\" \"<reason>\"".
#[test]
fn opentofu_login_refused_ends_saying_why() {
    let tmp = tempfile::tempdir().unwrap();
    let (_op, server) = start(tmp.path());
    let http = client(&server);
    let callback = server.url("/oauth/callback");
    runtime().block_on(async {
        let no_group = "none of your groups is given access to this registry: ask its admins";
        let a = attempt(&server);
        let mut browser = Browser::new(http.clone());
        let hops = browser.sign_in(&a.url, "bob", &[REDIRECT]).await;
        let said_no = "the identity provider did not sign you in: access_denied";
        let b = attempt(&server);
        let mut other = Browser::new(http.clone());
        let to_callback = other.sign_in(&b.url, "alice", &[&callback]).await;
        let to_callback = to_callback.last().unwrap().location.clone().unwrap();
        let state = query_param(&to_callback, "state").unwrap();
        let refused = format!(
            "{callback}?error=access_denied&state={}",
            url::form_urlencoded::byte_serialize(state.as_bytes()).collect::<String>()
        );
        let hop = other.hop(&refused, None).await;
        for (last, at, reason) in [
            (hops.last().unwrap().clone(), &a, no_group),
            (hop, &b, said_no),
        ] {
            assert_eq!(last.status, 303, "{last:?}");
            let back = last.location.unwrap();
            let code = tofu_callback(&back, &at.state)
                .unwrap_or_else(|s| panic!("tofu's listener answers {s} and waits: {back}"));
            let (status, body) = exchange(&http, &server, &code, &at.verifier).await;
            assert_eq!(status, 400, "{body}");
            let printed = format!(
                "The remote server did not assign an auth token: oauth2: {:?} {:?}.",
                body["error"].as_str().unwrap(),
                body["error_description"].as_str().unwrap()
            );
            assert_eq!(
                printed,
                format!(
                    "The remote server did not assign an auth token: oauth2: \"access_denied\" {reason:?}."
                )
            );
            // A redirect without the state or the code would have left
            // tofu waiting: the listener refuses both.
            assert_eq!(tofu_callback(&back.replace("state=", "x="), &at.state), Err(400));
            assert_eq!(tofu_callback(&back.replace("code=", "x="), &at.state), Err(400));
        }
    });
}
