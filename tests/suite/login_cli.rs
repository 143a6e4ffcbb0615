//! The real `terraform login` (login.v1) then `terraform init` of a private
//! module with the token it stored, for each Terraform the suite has
//! (1.0.3, 1.11.4, 1.12.2), against `tfreg serve` and against the Lambda
//! functions on the DynamoDB and S3 emulators (the auth function reading
//! its client secret at init from SSM Parameter Store on moto's server),
//! both brokering to the real OpenID Provider (`tests/oidc/provider.mjs`).
//! A stand-in `xdg-open` first on `PATH` plays the browser. A person whose
//! groups map only to another namespace signs in but is refused the module.
//!
//! Each test gets its own registry, provider and login port (Terraform
//! listens on `min` of a two-port range), so they run side by side.

use std::path::Path;
use std::time::Instant;

use serde_json::{Value, json};
use tfreg_testkit::oidc::Provider;

use crate::support::dist::write_tree;
use crate::support::moto::Moto;
use crate::support::server::{Server, free_port_pair};
use crate::support::tools::Tools;

const CLIENT: &str = "tfreg";
const SECRET: &str = "s3cret-of-the-registry-in-ssm";
const SECRET_PARAMETER: &str = "/tfreg/oidc-client-secret";

#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Mode {
    Serve,
    Lambda,
}

/// A registry signing in with the provider: alice is in `acme-readers`
/// (read on `acme`), carol in `other-readers` (read on `other` only).
pub(crate) struct Rig {
    pub(crate) server: Server,
    /// The two-port range Terraform may listen on (it takes the first).
    pub(crate) login_ports: [u16; 2],
    _op: Provider,
    _moto: Option<Moto>,
}

/// [`Provider::start`], given at most a minute: once, under load with the
/// six tests side by side, a provider never printed its ready line and the
/// test waited ten minutes. A stuck start now fails the test at once
/// (the provider exits when this process ends: its stdin closes).
fn provider(config: Value) -> Provider {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(Provider::start(config));
    });
    rx.recv_timeout(std::time::Duration::from_secs(60))
        .expect("the OpenID Provider printed its ready line within 60 s")
}

pub(crate) fn start(tmp: &Path, mode: Mode) -> Rig {
    start_with(tmp, mode, &[])
}

/// [`start`], the Lambda functions also given `extra` settings (`{issuer}`
/// in a value stands for the provider's issuer URL, known once it runs).
pub(crate) fn start_with(tmp: &Path, mode: Mode, extra: &[(&str, &str)]) -> Rig {
    let port = free_port_pair();
    let login_port = free_port_pair();
    let ports = format!("{login_port}-{}", login_port + 1);
    let op = provider(json!({
        "clients": [{"client_id": CLIENT, "client_secret": SECRET,
                     "redirect_uris": [format!("https://127.0.0.1:{port}/oauth/callback")]}],
        "users": [
            {"sub": "alice", "email": "alice@example.com", "groups": ["acme-readers"]},
            {"sub": "carol", "email": "carol@example.com", "groups": ["other-readers"]}
        ],
        "skip_consent": true,
    }));
    let extra_settings: Vec<(&str, String)> = extra
        .iter()
        .map(|(k, v)| (*k, v.replace("{issuer}", &op.issuer)))
        .collect();
    let (server, moto) = match mode {
        Mode::Serve => {
            let secret_file = tmp.join("client-secret");
            std::fs::write(&secret_file, format!("{SECRET}\n")).unwrap();
            let server = Server::start_at(
                &tmp.join("data"),
                &format!("127.0.0.1:{port}"),
                &[
                    "--private",
                    "--oidc-issuer",
                    &op.issuer,
                    "--oidc-client-id",
                    CLIENT,
                    "--oidc-client-secret-file",
                    secret_file.to_str().unwrap(),
                    "--login-ports",
                    &ports,
                ],
            );
            (server, None)
        }
        Mode::Lambda => {
            let moto = Moto::start(&tmp.join("moto.log"));
            moto.put_parameter(SECRET_PARAMETER, SECRET);
            use tfreg_lambda::config as c;
            let server = Server::start_lambda_on(
                &tmp.join("lambda"),
                port,
                &[
                    (c::OIDC_ISSUER, op.issuer.as_str()),
                    (c::OIDC_CLIENT_ID, CLIENT),
                    (c::OIDC_CLIENT_SECRET, SECRET_PARAMETER),
                    (c::LOGIN_PORTS, &ports),
                    // The provider runs on this machine: loopback, for the test only.
                    (c::OIDC_ALLOW_LOOPBACK, "true"),
                    ("AWS_ENDPOINT_URL_SSM", moto.url.as_str()),
                ]
                .into_iter()
                .chain(extra_settings.iter().map(|(k, v)| (*k, v.as_str())))
                .collect::<Vec<_>>(),
            );
            (server, Some(moto))
        }
    };
    for (group, ns) in [("acme-readers", "acme"), ("other-readers", "other")] {
        server.cli_on_store(&["sso", "map", group, "--scope", "read", "--namespace", ns]);
    }
    Rig {
        server,
        login_ports: [login_port, login_port + 1],
        _op: op,
        _moto: moto,
    }
}

/// The stand-in browser: Terraform opens the first `xdg-open` on `PATH`
/// with the authorize URL; this one follows it with curl and a cookie jar
/// (in the background, as a browser would), fills in the provider's forms
/// as `$STANDIN_USER`, and ends at Terraform's own `http://localhost:PORT/login`.
pub(crate) const STANDIN_BROWSER: &str = r#"#!/usr/bin/env bash
url="$1"
(
  jar="$STANDIN_DIR/jar"
  hop() { curl -sS --max-time 10 --cacert "$STANDIN_CA" -b "$jar" -c "$jar" -o "$STANDIN_DIR/body" -w '%{http_code} %{redirect_url}' "$@"; }
  next="$url"
  form=()
  for _ in $(seq 20); do
    out="$(hop "${form[@]}" "$next")"
    form=()
    echo "$out" >> "$STANDIN_DIR/log"
    loc="${out#* }"
    [ -n "$loc" ] || break
    case "$loc" in
      http://localhost:*/login\?*)
        curl -sS --max-time 10 -o "$STANDIN_DIR/done" "$loc" >> "$STANDIN_DIR/log" 2>&1
        break ;;
      */interaction/*)
        if curl -sS --max-time 10 -b "$jar" -c "$jar" "$loc" | grep -q 'name="prompt" value="login"'; then
          form=(--data-urlencode prompt=login --data-urlencode "login=$STANDIN_USER" --data-urlencode password=x)
        else
          form=(--data-urlencode prompt=consent)
        fi ;;
    esac
    next="$loc"
  done
) >/dev/null 2>&1 &
exit 0
"#;

/// Run `terraform login HOST` with `yes` on stdin and the stand-in browser
/// first on `PATH`, in `home`; its output once it ends (at most 60 s).
pub(crate) fn terraform_login(
    tf: &Path,
    server: &Server,
    home: &Path,
    user: &str,
) -> std::process::Output {
    // Terraform writes its credentials file there, but does not make the directory.
    std::fs::create_dir_all(home.join(".terraform.d")).unwrap();
    use std::io::Write as _;
    use std::os::unix::fs::PermissionsExt as _;
    let bin = home.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let opener = bin.join("xdg-open");
    std::fs::write(&opener, STANDIN_BROWSER).unwrap();
    std::fs::set_permissions(&opener, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let mut child = std::process::Command::new(tf)
        .args(["login", &server.host])
        .env_clear()
        .env("PATH", path)
        .env("HOME", home)
        .env("SSL_CERT_FILE", &server.ca)
        .env("CHECKPOINT_DISABLE", "1")
        .env("STANDIN_DIR", home)
        .env("STANDIN_CA", &server.ca)
        .env("STANDIN_USER", user)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"yes\n").unwrap();
    let started = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > std::time::Duration::from_secs(60) {
            child.kill().unwrap();
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    child.wait_with_output().unwrap()
}

/// `terraform init` of `NS/net/aws` from this registry, with what `home` holds.
fn terraform_init(
    tf: &Path,
    server: &Server,
    home: &Path,
    work: &Path,
    ns: &str,
) -> std::process::Output {
    let main = format!(
        "module \"net\" {{\n  source  = \"{}/{ns}/net/aws\"\n  version = \"1.0.0\"\n}}\noutput \"x\" {{ value = module.net.x }}\n",
        server.host
    );
    write_tree(work, &[("main.tf", &main)]);
    std::process::Command::new(tf)
        .args(["init", "-input=false"])
        .current_dir(work)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap())
        .env("HOME", home)
        .env("SSL_CERT_FILE", &server.ca)
        .env("CHECKPOINT_DISABLE", "1")
        .output()
        .unwrap()
}

pub(crate) fn said(out: &std::process::Output, home: &Path) -> String {
    format!(
        "{}\n{}\nbrowser: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        std::fs::read_to_string(home.join("log")).unwrap_or_default()
    )
}

/// The token `terraform login` stored for the registry in `home`.
fn stored_token(server: &Server, home: &Path) -> String {
    let creds: Value = serde_json::from_str(
        &std::fs::read_to_string(home.join(".terraform.d/credentials.tfrc.json")).unwrap(),
    )
    .unwrap();
    let token = creds["credentials"][&server.host]["token"]
        .as_str()
        .unwrap_or_else(|| panic!("no token for {}: {creds}", server.host))
        .to_string();
    assert!(token.starts_with("tfreg_"), "{creds}");
    token
}

/// alice signs in with `terraform login` (version `tf_var`) and installs the
/// private module with the stored token alone; with `other_namespace`,
/// carol (mapped to `other` only) signs in too and is refused `acme`'s
/// module. Prints the test's seconds.
fn login_then_init(mode: Mode, tf_var: &str, other_namespace: bool) {
    let started = Instant::now();
    let tf = Tools::get().path(tf_var);
    let tmp = tempfile::tempdir().unwrap();
    let rig = start(tmp.path(), mode);
    let server = &rig.server;
    let publisher = server.token("admin", None);
    for ns in ["acme", "other"] {
        let src = tmp.path().join(format!("module-{ns}"));
        write_tree(
            &src,
            &[(
                "main.tf",
                &format!("output \"x\" {{ value = \"from {ns}\" }}\n"),
            )],
        );
        let out = server.publish_module(&publisher, &src, &format!("{ns}/net/aws"), "1.0.0");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    // Discovery (the read function in AWS) advertises login.v1 over the range.
    let disco: Value = server.get("/.well-known/terraform.json").json().unwrap();
    assert_eq!(
        disco["login.v1"],
        json!({"client": "terraform-cli", "grant_types": ["authz_code"],
               "authz": "/oauth/authorize", "token": "/oauth/token",
               "ports": rig.login_ports}),
        "{disco}"
    );

    let home = tmp.path().join("alice");
    let out = terraform_login(&tf, server, &home, "alice");
    assert!(
        out.status.success(),
        "terraform login: {}",
        said(&out, &home)
    );
    stored_token(server, &home);
    let init = terraform_init(&tf, server, &home, &tmp.path().join("work-alice"), "acme");
    assert!(
        init.status.success(),
        "terraform init: {}",
        said(&init, &home)
    );

    if other_namespace {
        let home = tmp.path().join("carol");
        let out = terraform_login(&tf, server, &home, "carol");
        assert!(
            out.status.success(),
            "terraform login: {}",
            said(&out, &home)
        );
        let token = stored_token(server, &home);
        let init = terraform_init(&tf, server, &home, &tmp.path().join("work-carol"), "acme");
        assert!(
            !init.status.success(),
            "carol's groups give acme nothing: {}",
            said(&init, &home)
        );
        let status = |path: &str| {
            server
                .http
                .get(server.url(path))
                .bearer_auth(&token)
                .send()
                .unwrap()
                .status()
                .as_u16()
        };
        assert_eq!(status("/v1/modules/acme/net/aws/versions"), 403);
        assert_eq!(status("/v1/modules/other/net/aws/versions"), 200);
        let init = terraform_init(
            &tf,
            server,
            &home,
            &tmp.path().join("work-carol-other"),
            "other",
        );
        assert!(
            init.status.success(),
            "terraform init: {}",
            said(&init, &home)
        );
    }
    // Neither the client secret nor a token in the registry's log.
    let log = server.server_log();
    assert!(!log.contains(SECRET), "the client secret in the log");
    assert!(
        !log.contains(&stored_token(server, &home)),
        "a token in the log"
    );
    println!(
        "terraform login + init ({mode:?}, {tf_var}): {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

#[test]
fn serve_terraform_1_12_login_then_init_and_another_namespace_refused() {
    login_then_init(Mode::Serve, "TFREG_TERRAFORM_NEW", true);
}

#[test]
fn serve_terraform_1_11_login_then_init() {
    login_then_init(Mode::Serve, "TFREG_TERRAFORM_1_11", false);
}

#[test]
fn serve_terraform_1_0_login_then_init() {
    login_then_init(Mode::Serve, "TFREG_TERRAFORM_1_0", false);
}

#[test]
fn lambda_terraform_1_12_login_then_init_and_another_namespace_refused() {
    login_then_init(Mode::Lambda, "TFREG_TERRAFORM_NEW", true);
}

#[test]
fn lambda_terraform_1_11_login_then_init() {
    login_then_init(Mode::Lambda, "TFREG_TERRAFORM_1_11", false);
}

#[test]
fn lambda_terraform_1_0_login_then_init() {
    login_then_init(Mode::Lambda, "TFREG_TERRAFORM_1_0", false);
}
