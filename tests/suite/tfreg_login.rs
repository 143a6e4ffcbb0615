//! `tfreg login HOST` through the real identity provider, and `tfreg
//! publish` finding the token where Terraform keeps it: the credentials
//! file `tfreg login` (or `terraform login`) wrote, a `TF_TOKEN_<host>`
//! variable, or a `credentials` block of the CLI configuration file.
//! The browser is `BROWSER`, as OpenTofu honours it.

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use tfreg_model::sso::GroupMapping;
use tfreg_model::token::Scope;
use tfreg_store::catalog::sso;
use tfreg_store::sqlite::SqliteStore;

use crate::login::{runtime, start};
use crate::login_cli::STANDIN_BROWSER;
use crate::support::command::said;
use crate::support::dist::write_tree;
use crate::support::server::Server;
use crate::support::tools::tfreg_bin;

/// `tfreg` with nothing of the caller's environment but `PATH`, `HOME` and `env`.
fn tfreg(home: &Path, args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut cmd = Command::new(tfreg_bin());
    cmd.args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap())
        .env("HOME", home)
        .envs(env.iter().copied());
    cmd
}

/// `tfreg login` with the stand-in browser as `BROWSER`; its output once it
/// ends (at most 60 s).
pub(crate) fn tfreg_login(server: &Server, home: &Path, user: &str) -> Output {
    let browser = home.join("browser");
    std::fs::write(&browser, STANDIN_BROWSER).unwrap();
    std::fs::set_permissions(&browser, std::fs::Permissions::from_mode(0o755)).unwrap();
    let ca = server.ca.to_str().unwrap();
    let mut child = tfreg(
        home,
        &["login", &server.host, "--ca-cert", ca],
        &[
            ("BROWSER", browser.to_str().unwrap()),
            ("STANDIN_DIR", home.to_str().unwrap()),
            ("STANDIN_CA", ca),
            ("STANDIN_USER", user),
        ],
    )
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(60) {
            child.kill().unwrap();
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    child.wait_with_output().unwrap()
}

/// `tfreg publish module SRC` as `acme/net/aws` `version` with no `--token`.
fn publish(
    server: &Server,
    home: &Path,
    src: &Path,
    version: &str,
    env: &[(&str, &str)],
) -> Output {
    let registry = server.url("");
    let mut env = env.to_vec();
    env.push(("SSL_CERT_FILE", server.ca.to_str().unwrap()));
    tfreg(
        home,
        &[
            "publish",
            "module",
            src.to_str().unwrap(),
            "--registry",
            &registry,
            "--namespace",
            "acme",
            "--name",
            "net",
            "--system",
            "aws",
            "--version",
            version,
        ],
        &env,
    )
    .output()
    .unwrap()
}

#[test]
fn tfreg_login_stores_the_token_where_terraform_reads_it_and_publish_finds_it() {
    let tmp = tempfile::tempdir().unwrap();
    let (_op, server) = start(tmp.path());
    // alice's second group may publish to acme here.
    let store = SqliteStore::open(&tmp.path().join("data/registry.db")).unwrap();
    let mapping = GroupMapping::new("unmapped", Scope::Publish, &["acme"]).unwrap();
    runtime()
        .block_on(sso::put_mapping(&store, &mapping))
        .unwrap();
    let src = tmp.path().join("module");
    write_tree(&src, &[("main.tf", "output \"x\" { value = 1 }\n")]);

    // No token anywhere: publish says where one comes from.
    let nobody = tmp.path().join("nobody");
    std::fs::create_dir_all(&nobody).unwrap();
    let out = publish(&server, &nobody, &src, "0.1.0", &[]);
    assert!(!out.status.success());
    assert!(said(&out).contains("tfreg login"), "{}", said(&out));

    let home = tmp.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    // Another host's token is kept when ours is added.
    std::fs::create_dir_all(home.join(".terraform.d")).unwrap();
    std::fs::write(
        home.join(".terraform.d/credentials.tfrc.json"),
        r#"{"credentials": {"app.terraform.io": {"token": "kept"}}}"#,
    )
    .unwrap();
    let out = tfreg_login(&server, &home, "alice");
    let browser_log = std::fs::read_to_string(home.join("log")).unwrap_or_default();
    assert!(
        out.status.success(),
        "tfreg login: {}\nbrowser: {browser_log}",
        said(&out)
    );
    let file = home.join(".terraform.d/credentials.tfrc.json");
    let creds: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let token = creds["credentials"][&server.host]["token"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(token.starts_with("tfreg_"), "{creds}");
    assert_eq!(creds["credentials"]["app.terraform.io"]["token"], "kept");
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the credentials file is its owner's only");
    assert!(!said(&out).contains(&token), "the token is not printed");

    // publish finds it in the credentials file: the token is alice's grant.
    let out = publish(&server, &home, &src, "1.0.0", &[]);
    assert!(
        out.status.success(),
        "publish with the stored token: {}",
        said(&out)
    );
    let out = Command::new(tfreg_bin())
        .args(["token", "list", "--data-dir"])
        .arg(tmp.path().join("data"))
        .output()
        .unwrap();
    assert!(
        said(&out).contains("alice"),
        "issued to alice: {}",
        said(&out)
    );

    // TF_TOKEN_<host> (dots as underscores) wins over the file.
    let env_name = format!("TF_TOKEN_{}", server.host.replace('.', "_"));
    let out = publish(&server, &home, &src, "1.0.1", &[(&env_name, "tfreg_wrong")]);
    assert!(!out.status.success(), "a wrong TF_TOKEN_ is used first");
    assert!(said(&out).contains("401"), "{}", said(&out));
    let out = publish(&server, &nobody, &src, "1.0.1", &[(&env_name, &token)]);
    assert!(out.status.success(), "TF_TOKEN_: {}", said(&out));

    // A credentials block in TF_CLI_CONFIG_FILE.
    let rc = tmp.path().join("tfrc");
    std::fs::write(
        &rc,
        format!(
            "credentials \"{}\" {{\n  token = \"{token}\"\n}}\n",
            server.host
        ),
    )
    .unwrap();
    let out = publish(
        &server,
        &nobody,
        &src,
        "1.0.2",
        &[("TF_CLI_CONFIG_FILE", rc.to_str().unwrap())],
    );
    assert!(out.status.success(), "credentials block: {}", said(&out));
}

#[test]
fn tfreg_login_explains_a_registry_without_sign_in() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("data"), &[]);
    let out = tfreg(
        tmp.path(),
        &[
            "login",
            &server.host,
            "--ca-cert",
            server.ca.to_str().unwrap(),
            "--no-browser",
        ],
        &[],
    )
    .output()
    .unwrap();
    assert!(!out.status.success());
    assert!(said(&out).contains("no login.v1"), "{}", said(&out));
}
