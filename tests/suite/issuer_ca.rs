//! Found by a new user (issue 35): `tfreg serve` had no way to trust a
//! private CA for its identity provider or a CI issuer but SSL_CERT_FILE,
//! and without it start-up failed with "error sending request for url (…)"
//! and no cause. Now the failure names its cause and a hint, and
//! `--issuer-ca-cert` trusts the CA. The real OpenID Provider over HTTPS
//! with a certificate of a CA of the test's own, and the real `tfreg serve`.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::ci_exchange::{Issuer, github_claims};
use crate::support::server::{Server, free_port};
use crate::support::tools::tfreg_bin;

/// `tfreg serve` with `args` until it exits (at most 30 s): its status and stderr.
fn serve_until_exit(args: &[&str]) -> (Option<i32>, String) {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("serve.log");
    let mut child = Command::new(tfreg_bin())
        .arg("serve")
        .arg("--data-dir")
        .arg(tmp.path().join("data"))
        .args(["--listen", &format!("127.0.0.1:{}", free_port())])
        .args(args)
        .env_remove("SSL_CERT_FILE")
        .env_remove("SSL_CERT_DIR")
        .env_remove("TFREG_ISSUER_CA_CERT")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            panic!(
                "tfreg serve did not stop: {}",
                std::fs::read_to_string(&log).unwrap()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    (status.code(), std::fs::read_to_string(&log).unwrap())
}

#[test]
fn an_identity_provider_of_a_private_ca_is_trusted_with_issuer_ca_cert() {
    let tmp = tempfile::tempdir().unwrap();
    let issuer = Issuer::start(tmp.path());
    let secret = tmp.path().join("secret");
    std::fs::write(&secret, "s3cret\n").unwrap();
    let secret = secret.to_str().unwrap();
    let op = issuer.op.issuer.clone();
    let signin = [
        "--oidc-issuer",
        op.as_str(),
        "--oidc-client-id",
        "tfreg",
        "--oidc-client-secret-file",
        secret,
    ];
    // Without the CA: start-up fails with the cause and a hint.
    let (code, stderr) = serve_until_exit(&signin);
    assert_eq!(code, Some(1), "{stderr}");
    let url = format!("{op}/.well-known/openid-configuration");
    let host = "127.0.0.1";
    let expected = format!(
        "error: --oidc-issuer {op}: the identity provider: discovery {url}: error sending request for url ({url})\n  caused by: client error (Connect)\n  caused by: invalid peer certificate: UnknownIssuer\nhint: tfreg serve does not trust the certificate of {host}. If a private CA signed it, pass --issuer-ca-cert FILE (that CA's certificate, PEM; SSL_CERT_FILE works too).\n"
    );
    assert!(stderr.ends_with(&expected), "{stderr}");
    // A file that holds no certificate is named by its flag.
    let not_pem = tmp.path().join("not.pem");
    std::fs::write(&not_pem, "hello\n").unwrap();
    let mut args = signin.to_vec();
    args.extend(["--issuer-ca-cert", not_pem.to_str().unwrap()]);
    let (code, stderr) = serve_until_exit(&args);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "error: --issuer-ca-cert {} holds no PEM certificate\n",
            not_pem.display()
        )),
        "{stderr}"
    );
    // With it: served, and terraform login is offered.
    let ca = issuer.ca.to_str().unwrap().to_string();
    let mut args = signin.to_vec();
    args.extend(["--issuer-ca-cert", ca.as_str()]);
    let server = Server::start(&tmp.path().join("data"), &args);
    let discovery: serde_json::Value = server.get("/.well-known/terraform.json").json().unwrap();
    assert!(discovery.get("login.v1").is_some(), "{discovery}");
}

#[test]
fn a_ci_issuer_of_a_private_ca_is_trusted_with_issuer_ca_cert() {
    let tmp = tempfile::tempdir().unwrap();
    let issuer = Issuer::start(tmp.path());
    let op = issuer.op.issuer.clone();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let exchange = |server: &Server| {
        let aud = server.url("");
        let jwt = rt.block_on(issuer.sign(json!({"claims": github_claims(&aud, json!({}))})));
        let resp = server
            .http
            .post(server.url("/v1/auth/exchange"))
            .json(&json!({"token": jwt, "namespaces": ["acme"]}))
            .send()
            .unwrap();
        (resp.status().as_u16(), resp.text().unwrap())
    };
    // Without the CA: 502, and the log has the cause.
    let server = Server::start(&tmp.path().join("without"), &["--ci-issuer", &op]);
    let (status, body) = exchange(&server);
    assert_eq!(status, 502, "{body}");
    let log = server.server_log();
    assert!(
        log.contains(&format!(
            "the identity provider: discovery {op}/.well-known/openid-configuration: error sending request for url ({op}/.well-known/openid-configuration): client error (Connect): invalid peer certificate: UnknownIssuer"
        )),
        "{log}"
    );
    drop(server);
    // With it: the token verifies; no trust policy gives it acme (403).
    let ca = issuer.ca.to_str().unwrap().to_string();
    let server = Server::start(
        &tmp.path().join("with"),
        &["--ci-issuer", &op, "--issuer-ca-cert", &ca],
    );
    let (status, body) = exchange(&server);
    assert_eq!(status, 403, "{body}");
}
