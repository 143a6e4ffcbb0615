//! The CLI's trust and network errors, with real processes over real HTTPS:
//! `tfreg serve` with an operator's classic self-signed certificate (made by
//! `openssl req -x509`, which says `CA:TRUE`), `curl`, and `tfreg publish`;
//! then a refused connection and a host name that does not resolve.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::support::tools::tfreg_bin;
use crate::support::*;

/// `tfreg publish module SRC --registry REGISTRY` as acme/m/aws `version`
/// with `token`, trusting only what `trust` (environment variables) and
/// `extra` say besides the system's store.
fn publish_module(
    registry: &str,
    token: &str,
    src: &Path,
    version: &str,
    trust: &[(&str, &Path)],
    extra: &[&str],
) -> Output {
    let mut cmd = Command::new(tfreg_bin());
    cmd.args(["publish", "module"])
        .arg(src)
        .args(["--registry", registry, "--namespace", "acme", "--name", "m"])
        .args(["--system", "aws", "--version", version])
        .args(extra)
        .env("TFREG_TOKEN", token);
    for var in ["SSL_CERT_FILE", "SSL_CERT_DIR", "TFREG_CA_CERT"] {
        cmd.env_remove(var);
    }
    cmd.envs(trust.iter().copied()).output().unwrap()
}

/// A classic self-signed certificate and key for 127.0.0.1, made by openssl.
fn openssl_self_signed(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    let (cert, key) = (
        dir.join(format!("{name}.pem")),
        dir.join(format!("{name}.key")),
    );
    ok(
        Command::new("openssl")
            .args([
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
            ])
            .args([
                "-subj",
                "/CN=127.0.0.1",
                "-addext",
                "subjectAltName=IP:127.0.0.1",
            ])
            .arg("-keyout")
            .arg(&key)
            .arg("-out")
            .arg(&cert)
            .output()
            .expect("run openssl (Debian package openssl)"),
        "openssl req -x509",
    );
    (cert, key)
}

fn module_src(dir: &Path) -> PathBuf {
    let src = dir.join("module");
    write_tree(&src, &[("main.tf", "output \"x\" { value = 1 }\n")]);
    src
}

#[test]
fn an_operators_self_signed_certificate_is_trusted_as_curl_trusts_it() {
    let tmp = tempfile::tempdir().unwrap();
    let (cert, key) = openssl_self_signed(tmp.path(), "server");
    // What this test is about: the certificate is a CA's, used as the server's.
    let text = ok(
        Command::new("openssl")
            .args(["x509", "-noout", "-text", "-in"])
            .arg(&cert)
            .output()
            .unwrap(),
        "openssl x509",
    );
    assert!(text.contains("CA:TRUE"), "{text}");
    let server = Server::start_with_cert(&tmp.path().join("data"), &cert, &key);
    let token = server.token("publish", None);
    let src = module_src(tmp.path());
    let registry = server.url("");
    let publish = |version, trust: &[(&str, &Path)], extra: &[&str]| {
        publish_module(&registry, &token, &src, version, trust, extra)
    };

    // curl trusts it when told to...
    let discovery = ok(
        Command::new("curl")
            .args(["-sS", "--fail", "--cacert"])
            .arg(&cert)
            .arg(server.url("/.well-known/terraform.json"))
            .output()
            .expect("run curl"),
        "curl --cacert",
    );
    assert!(discovery.contains("modules.v1"), "{discovery}");

    // ...and so does tfreg, by SSL_CERT_FILE, --ca-cert or TFREG_CA_CERT.
    let out = ok(
        publish("1.0.0", &[("SSL_CERT_FILE", &cert)], &[]),
        "publish trusting SSL_CERT_FILE",
    );
    assert!(out.contains("published"), "{out}");
    let ca_cert = ["--ca-cert", cert.to_str().unwrap()];
    ok(publish("1.0.1", &[], &ca_cert), "publish with --ca-cert");
    ok(
        publish("1.0.2", &[("TFREG_CA_CERT", &cert)], &[]),
        "publish with TFREG_CA_CERT",
    );
    let versions: serde_json::Value = server
        .get("/v1/modules/acme/m/aws/versions")
        .json()
        .unwrap();
    let listed = versions["modules"][0]["versions"].to_string();
    for v in ["1.0.0", "1.0.1", "1.0.2"] {
        assert!(listed.contains(v), "{v} published: {versions}");
    }

    // Not told to trust it: refused, saying why and what to do.
    let out = fails(
        publish("1.1.0", &[], &[]),
        "publish trusting only the system's store",
    );
    assert!(out.contains("invalid peer certificate"), "{out}");
    assert!(
        out.contains("hint: this machine does not trust the certificate of 127.0.0.1")
            && out.contains("--ca-cert")
            && out.contains("tls/ca.pem"),
        "{out}"
    );

    // Only that exact certificate: another self-signed one for the same address is no use.
    let (other, _) = openssl_self_signed(tmp.path(), "other");
    let out = fails(
        publish("1.1.0", &[("SSL_CERT_FILE", &other)], &[]),
        "publish trusting another certificate",
    );
    assert!(out.contains("invalid peer certificate"), "{out}");

    // And only for the names it is made for.
    let by_name = registry.replace("127.0.0.1", "localhost");
    let out = fails(
        publish_module(
            &by_name,
            &token,
            &src,
            "1.1.0",
            &[("SSL_CERT_FILE", &cert)],
            &[],
        ),
        "publish to a name the certificate is not for",
    );
    assert!(
        out.contains("not valid for name \"localhost\"")
            && out.contains("hint: the certificate is not made for localhost"),
        "{out}"
    );
    assert_eq!(
        server.get("/v1/modules/acme/m/aws/1.1.0/download").status(),
        404,
        "no refused publish went through"
    );
}

#[test]
fn refused_connections_and_unknown_hosts_name_their_cause() {
    let tmp = tempfile::tempdir().unwrap();
    let src = module_src(tmp.path());
    // A port nothing listens on (bound, then freed).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = fails(
        publish_module(
            &format!("https://127.0.0.1:{port}"),
            "t",
            &src,
            "1.0.0",
            &[],
            &[],
        ),
        "publish to a closed port",
    );
    assert!(out.contains("Connection refused"), "{out}");
    assert!(
        out.contains(&format!(
            "hint: nothing accepts connections at 127.0.0.1:{port}"
        )) && out.contains("tfreg serve"),
        "{out}"
    );

    let out = fails(
        publish_module("https://no-such-host.invalid", "t", &src, "1.0.0", &[], &[]),
        "publish to a host that does not resolve",
    );
    assert!(out.contains("dns error"), "{out}");
    assert!(
        out.contains("hint: the host name no-such-host.invalid could not be resolved"),
        "{out}"
    );
}
