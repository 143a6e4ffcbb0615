//! Sign-in's other two ways in, through the Lambda functions on the
//! emulators (the auth function reading its client secret from SSM on
//! moto, brokering to the real OpenID Provider): the web UI's single
//! sign-on in headless Chromium, and a CI job's OIDC token exchanged for a
//! publish token (`POST /v1/auth/exchange`) that then publishes, on a
//! registry with CI issuers and no identity provider. The same
//! flows on `tfreg serve` are in `browser_sso` and `ci_exchange`.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::json;

use crate::browser_sso::{at_the_provider, signed_in_but_refused, wait_for_path};
use crate::ci_exchange::{Issuer, github_claims};
use crate::login::runtime;
use crate::login_cli::{Mode, start_with};
use crate::support::browser::Browser;
use crate::support::command::ok;
use crate::support::dist::write_tree;
use crate::support::server::Server;

#[test]
fn a_person_signs_in_to_the_ui_with_single_sign_on_on_the_lambda_functions() {
    let tmp = tempfile::tempdir().unwrap();
    let rig = start_with(tmp.path(), Mode::Lambda, &[]);
    let server = &rig.server;
    let src = tmp.path().join("module");
    write_tree(&src, &[("main.tf", "output \"x\" { value = 1 }\n")]);
    let publisher = server.token("publish", Some("acme"));
    ok(
        server.publish_module(&publisher, &src, "acme/net/aws", "1.0.0"),
        "publish",
    );

    // HTTP/1.1: see Browser::open_http1 (cargo lambda watch and cookies).
    let b = Browser::open_http1(server, 1280, 900, "light");
    let page = "/ui/modules/acme/net/aws";
    b.goto(&server.url(page));
    assert!(b.path().starts_with("/ui/sign-in?next="), "{}", b.path());
    b.click("#sso");
    at_the_provider(&b, "alice");
    wait_for_path(&b, page);
    assert!(b.text("#signed-in-as").contains("alice"));
    assert!(
        b.text("main").contains("acme/net/aws"),
        "{}",
        b.text("main")
    );

    // carol's group reads `other` only: signed in, refused this page.
    let b = Browser::open_http1(server, 1280, 900, "light");
    signed_in_but_refused(&b, server, page, "carol", Duration::from_secs(20));
}

/// CI publishing on a registry with no identity provider (the template's
/// `CiIssuers` without `OidcIssuer`): the auth function serves the exchange
/// alone; `terraform login` is off (no login.v1, its routes 404).
#[test]
fn a_ci_job_exchanges_its_token_and_publishes_through_the_lambda_functions() {
    let tmp = tempfile::tempdir().unwrap();
    // The CI issuer: the provider over HTTPS (a CA made here, which the
    // functions trust through SSL_CERT_FILE), signing GitHub-shaped tokens.
    let issuer = Issuer::start(tmp.path());
    let ca = issuer.ca.to_str().unwrap().to_string();
    use tfreg_lambda::signin as s;
    let server = &Server::start_lambda_with(
        &tmp.path().join("lambda"),
        &[
            (s::CI_ISSUERS, issuer.op.issuer.as_str()),
            (s::CI_TOKEN_TTL, "10m"),
            // The issuer runs on this machine: loopback, for the test only.
            (s::OIDC_ALLOW_LOOPBACK, "true"),
            ("SSL_CERT_FILE", ca.as_str()),
        ],
    );
    let discovery: serde_json::Value = server
        .http
        .get(server.url("/.well-known/terraform.json"))
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert!(discovery.get("login.v1").is_none(), "{discovery}");
    let authorize = server
        .http
        .get(server.url("/oauth/authorize"))
        .send()
        .unwrap();
    assert_eq!(authorize.status(), 404, "no identity provider: no login");
    server.cli_on_store(&[
        "trust",
        "add",
        "acme",
        "--issuer",
        &issuer.op.issuer,
        "--kind",
        "github",
        "--claim",
        "repository_owner_id=1234",
        "--claim",
        "repository=acme/app",
    ]);
    let audience = server.url("").trim_end_matches('/').to_string();
    let post = |jwt: &str| {
        let resp = server
            .http
            .post(server.url("/v1/auth/exchange"))
            .json(&json!({ "token": jwt }))
            .send()
            .unwrap();
        let status = resp.status().as_u16();
        (status, resp.json::<serde_json::Value>().unwrap_or_default())
    };
    let sign =
        |claims: serde_json::Value| runtime().block_on(issuer.sign(json!({ "claims": claims })));
    let jwt = sign(github_claims(&audience, json!({})));
    let (status, answer) = post(&jwt);
    assert_eq!(status, 200, "{answer}");
    let token = answer["token"].as_str().unwrap().to_string();
    assert_eq!(answer["namespaces"], json!(["acme"]), "{answer}");
    let lasts = answer["expires_at"].as_u64().unwrap() as i64 - now() as i64;
    assert!((595..=605).contains(&lasts), "CiTokenTtl 10m: {answer}");

    // The exchanged token publishes to acme, and only there.
    let src = tmp.path().join("module");
    write_tree(&src, &[("main.tf", "output \"x\" { value = 1 }\n")]);
    ok(
        server.publish_module(&token, &src, "acme/net/aws", "1.0.0"),
        "publish with the exchanged token",
    );
    let out = server.publish_module(&token, &src, "other/net/aws", "1.0.0");
    assert!(!out.status.success(), "another namespace is refused");

    // The same token again: a replay (401). Another repository: no trust (403).
    assert_eq!(post(&jwt).0, 401, "a replayed CI token");
    let other = sign(github_claims(
        &audience,
        json!({"repository": "acme/other"}),
    ));
    let (status, answer) = post(&other);
    assert_eq!(status, 403, "{answer}");
    let log = server.server_log();
    assert!(
        !log.contains(&jwt) && !log.contains(&token),
        "no token in the functions' log"
    );
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}
