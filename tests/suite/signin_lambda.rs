//! Sign-in's other two ways in, through the Lambda functions on the
//! emulators (the auth function reading its client secret from SSM on
//! moto, brokering to the real OpenID Provider): the web UI's single
//! sign-on in headless Chromium, and a CI job's OIDC token exchanged for a
//! publish token (`POST /v1/auth/exchange`) that then publishes. The same
//! flows on `tfreg serve` are in `browser_sso` and `ci_exchange`.

use std::time::Duration;

use serde_json::json;

use crate::browser_sso::{at_the_provider, signed_in_but_refused, wait_for_path};
use crate::ci_exchange::{Issuer, github_claims};
use crate::login::runtime;
use crate::login_cli::{Mode, start_with};
use crate::support::browser::Browser;
use crate::support::command::ok;
use crate::support::dist::write_tree;

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

#[test]
fn a_ci_job_exchanges_its_token_and_publishes_through_the_lambda_functions() {
    let tmp = tempfile::tempdir().unwrap();
    // The CI issuer: the provider over HTTPS (a CA made here, which the
    // functions trust through SSL_CERT_FILE), signing GitHub-shaped tokens.
    let issuer = Issuer::start(tmp.path());
    let ca = issuer.ca.to_str().unwrap().to_string();
    let rig = start_with(
        tmp.path(),
        Mode::Lambda,
        &[
            (tfreg_lambda::signin::CI_ISSUERS, issuer.op.issuer.as_str()),
            ("SSL_CERT_FILE", ca.as_str()),
        ],
    );
    let server = &rig.server;
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
