//! Sign-in as it was found from outside (issue 35), against the real
//! OpenID Provider (`tests/oidc/provider.mjs`), on `tfreg serve` (SQLite)
//! and on the Lambda functions (the DynamoDB emulator):
//!
//! - unauthenticated sign-in starts (`/oauth/sso`, `/oauth/authorize`)
//!   store nothing: a sign-in in progress travels as its MAC'd state; a
//!   `next` over 512 bytes is refused with its reason;
//! - the real `terraform login` (1.0.3, 1.11.4, 1.12.2) and `tfreg login`
//!   of a person whose groups map to nothing end at once, saying why,
//!   instead of waiting for ever;
//! - the sign-in page's link names the provider.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::json;
use tfreg_model::login::{pkce_challenge, random_value};
use tfreg_testkit::oidc::Provider;

use crate::login_cli::{Mode, Rig, said, start, terraform_login};
use crate::support::server::{Server, free_port};
use crate::support::tools::Tools;

/// How many items the registry's store holds: the SQLite file's rows under
/// `data`, or the DynamoDB table's (a Scan, counted).
fn item_count(server: &Server, data: &Path) -> u64 {
    // moto's virtualenv has boto3; Python's own sqlite3 reads the file.
    let python = Path::new(&Tools::get().path("TFREG_MOTO_SERVER")).with_file_name("python3");
    let script = match server.table() {
        Some(table) => format!(
            r#"
import os, boto3
c = boto3.client("dynamodb", endpoint_url=os.environ["AWS_ENDPOINT_URL_DYNAMODB"],
                 region_name=os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1")
n, k = 0, None
while True:
    a = {{"TableName": "{table}", "Select": "COUNT", "ConsistentRead": True}}
    if k:
        a["ExclusiveStartKey"] = k
    r = c.scan(**a)
    n += r["Count"]
    k = r.get("LastEvaluatedKey")
    if not k:
        break
print(n)
"#
        ),
        None => format!(
            "import sqlite3\nprint(sqlite3.connect({:?}).execute('select count(*) from items').fetchone()[0])\n",
            data.join("registry.db").display().to_string()
        ),
    };
    let out = Command::new(&python)
        .arg("-c")
        .arg(&script)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

/// A client of the registry that follows no redirects.
fn client(server: &Server) -> reqwest::blocking::Client {
    let ca = reqwest::Certificate::from_pem(&std::fs::read(&server.ca).unwrap()).unwrap();
    reqwest::blocking::Client::builder()
        .add_root_certificate(ca)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// The attack of issue 35: many sign-in starts with a 30 KB `next` grew the
/// store by 33 MB in 40 s. Now each is refused with its reason, and starts
/// that are let through (a good `next`, Terraform's authorize with a
/// 256-character state) go to the provider and store nothing.
fn unauthenticated_starts_store_nothing(mode: Mode) {
    const STARTS: usize = 40;
    let tmp = tempfile::tempdir().unwrap();
    let rig: Rig = start(tmp.path(), mode);
    let server = &rig.server;
    let data = tmp.path().join("data");
    let http = client(server);
    let before = item_count(server, &data);

    // The attack's 30 KB on `tfreg serve`; in front of the Lambda functions
    // a URL that long is refused (431) before the auth function sees it,
    // as API Gateway limits a request line too, so 4 KB there.
    let huge_len = match mode {
        Mode::Serve => 30 * 1024,
        Mode::Lambda => 4 * 1024,
    };
    let huge = format!("/ui/{}", "x".repeat(huge_len));
    let long_by_one = format!("/ui/{}", "x".repeat(509));
    for next in [huge.as_str(), long_by_one.as_str()] {
        let url = format!(
            "{}?next={}",
            server.url("/oauth/sso"),
            url::form_urlencoded::byte_serialize(next.as_bytes()).collect::<String>()
        );
        for _ in 0..STARTS {
            let resp = http.get(&url).send().unwrap();
            assert_eq!(resp.status().as_u16(), 400, "{mode:?}");
            assert!(resp.headers().get("set-cookie").is_none());
            let body = resp.text().unwrap();
            assert!(
                body.starts_with(
                    "Sign-in failed: next must be a path of the web UI of at most 512 bytes\n"
                ),
                "{mode:?}: {body}"
            );
        }
    }
    // 512 bytes exactly is a UI sign-in like any other.
    let longest = format!("/ui/{}", "x".repeat(508));
    let redirect = format!("http://localhost:{}/login", rig.login_ports[0]);
    for i in 0..STARTS {
        let url = if i % 2 == 0 {
            format!(
                "{}?next={}",
                server.url("/oauth/sso"),
                url::form_urlencoded::byte_serialize(longest.as_bytes()).collect::<String>()
            )
        } else {
            let query: String = url::form_urlencoded::Serializer::new(String::new())
                .append_pair("response_type", "code")
                .append_pair("client_id", "terraform-cli")
                .append_pair("redirect_uri", &redirect)
                .append_pair("state", &"s".repeat(256))
                .append_pair("code_challenge", &pkce_challenge(&random_value()))
                .append_pair("code_challenge_method", "S256")
                .finish();
            server.url(&format!("/oauth/authorize?{query}"))
        };
        let resp = http.get(&url).send().unwrap();
        assert_eq!(resp.status().as_u16(), 303, "{mode:?}: {url}");
        let to = resp.headers()["location"].to_str().unwrap().to_string();
        assert!(to.contains("/auth?"), "to the provider: {to}");
        let cookie = resp.headers()["set-cookie"].to_str().unwrap();
        assert!(cookie.starts_with("__Host-tfreg_login="), "{cookie}");
    }
    assert_eq!(
        item_count(server, &data),
        before,
        "{mode:?}: an unauthenticated start stored something"
    );
}

#[test]
fn serve_unauthenticated_sign_in_starts_store_nothing_and_a_long_next_is_refused() {
    unauthenticated_starts_store_nothing(Mode::Serve);
}

#[test]
fn lambda_unauthenticated_sign_in_starts_store_nothing_and_a_long_next_is_refused() {
    unauthenticated_starts_store_nothing(Mode::Lambda);
}

/// What a refused sign-in ends with, at the CLI.
const NO_GROUP: &str = "none of your groups is given access to this registry: ask its admins";

/// carol signs in at the provider, but her only group's mapping is gone:
/// `terraform login` (version `tf_var`) ends at once, non-zero, saying why,
/// and stores no token.
fn terraform_login_refused(mode: Mode, tf_var: &str) {
    let tf = Tools::get().path(tf_var);
    let tmp = tempfile::tempdir().unwrap();
    let rig = start(tmp.path(), mode);
    let server = &rig.server;
    server.cli_on_store(&["sso", "unmap", "other-readers"]);
    let home = tmp.path().join("carol");
    let started = Instant::now();
    let out = terraform_login(&tf, server, &home, "carol");
    let took = started.elapsed();
    let said = said(&out, &home);
    assert!(
        took < Duration::from_secs(50),
        "{mode:?} {tf_var}: terraform login waited {took:?}: {said}"
    );
    assert!(!out.status.success(), "{mode:?} {tf_var}: {said}");
    assert_eq!(out.status.code(), Some(1), "{mode:?} {tf_var}: {said}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("Failed to obtain auth token") && stderr.contains("access_denied"),
        "{mode:?} {tf_var}: {said}"
    );
    // Terraform prints the token endpoint's answer (wrapped at its width).
    let flat = stderr.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(flat.contains(NO_GROUP), "{mode:?} {tf_var}: {said}");
    let creds = home.join(".terraform.d/credentials.tfrc.json");
    let kept = std::fs::read_to_string(&creds).unwrap_or_default();
    assert!(!kept.contains(&server.host), "no token stored: {kept}");
}

#[test]
fn serve_terraform_1_12_login_refused_ends_saying_why() {
    terraform_login_refused(Mode::Serve, "TFREG_TERRAFORM_NEW");
}

#[test]
fn serve_terraform_1_11_login_refused_ends_saying_why() {
    terraform_login_refused(Mode::Serve, "TFREG_TERRAFORM_1_11");
}

#[test]
fn serve_terraform_1_0_login_refused_ends_saying_why() {
    terraform_login_refused(Mode::Serve, "TFREG_TERRAFORM_1_0");
}

#[test]
fn lambda_terraform_1_12_login_refused_ends_saying_why() {
    terraform_login_refused(Mode::Lambda, "TFREG_TERRAFORM_NEW");
}

#[test]
fn lambda_terraform_1_0_login_refused_ends_saying_why() {
    terraform_login_refused(Mode::Lambda, "TFREG_TERRAFORM_1_0");
}

/// `tfreg login` of bob (no mapped group) ends at once with the reason.
#[test]
fn tfreg_login_refused_ends_saying_why() {
    let tmp = tempfile::tempdir().unwrap();
    let (_op, server) = crate::login::start(tmp.path());
    let home = tmp.path().join("bob");
    std::fs::create_dir_all(&home).unwrap();
    let started = Instant::now();
    let out = crate::tfreg_login::tfreg_login(&server, &home, "bob");
    let said = crate::support::command::said(&out);
    assert!(started.elapsed() < Duration::from_secs(50), "{said}");
    assert!(!out.status.success(), "{said}");
    assert!(
        said.contains(&format!(
            "the registry refused the sign-in (access_denied): {NO_GROUP}"
        )),
        "{said}"
    );
    assert!(!home.join(".terraform.d/credentials.tfrc.json").exists());
}

/// The sign-in page's link: "Sign in with" the display name given, else
/// the issuer's host; on `tfreg serve` and on the Lambda functions' UI.
#[test]
fn the_sign_in_page_names_the_identity_provider() {
    let tmp = tempfile::tempdir().unwrap();
    let link = |server: &Server| {
        let page = server.get("/ui/sign-in").text().unwrap();
        let at = page.find("id=\"sso\"").unwrap_or_else(|| panic!("{page}"));
        let text = &page[at..];
        let text = &text[text.find('>').unwrap() + 1..text.find("</a>").unwrap()];
        text.to_string()
    };
    // The issuer's host by default (the provider runs on 127.0.0.1).
    std::fs::create_dir_all(tmp.path().join("default")).unwrap();
    let rig = start(&tmp.path().join("default"), Mode::Serve);
    assert_eq!(link(&rig.server), "Sign in with 127.0.0.1");
    drop(rig);

    // A name given to `tfreg serve`, escaped in the page.
    // oidc-provider needs a client to start; this registry never signs in.
    let op = Provider::start(json!({
        "clients": [{"client_id": "c", "client_secret": "s",
                     "redirect_uris": ["https://127.0.0.1:1/oauth/callback"]}],
        "users": [],
    }));
    let secret = tmp.path().join("secret");
    std::fs::write(&secret, "s").unwrap();
    let named = |name: &str| {
        Command::new(crate::support::tools::tfreg_bin())
            .args([
                "serve",
                "--oidc-issuer",
                &op.issuer,
                "--oidc-client-id",
                "c",
            ])
            .arg("--oidc-client-secret-file")
            .arg(&secret)
            .args(["--oidc-display-name", name, "--listen", "127.0.0.1:1"])
            .arg("--data-dir")
            .arg(tmp.path().join("refused"))
            .output()
            .unwrap()
    };
    let out = named(" Okta");
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(
            "--oidc-display-name: invalid identity provider display name \" Okta\": 1 to 64 printable characters"
        ),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let port = free_port();
    let server = Server::start_at(
        &tmp.path().join("named"),
        &format!("127.0.0.1:{port}"),
        &[
            "--oidc-issuer",
            &op.issuer,
            "--oidc-client-id",
            "c",
            "--oidc-client-secret-file",
            secret.to_str().unwrap(),
            "--oidc-display-name",
            "Acme <SSO>",
        ],
    );
    assert_eq!(link(&server), "Sign in with Acme &#60;SSO&#62;");
    drop(server);

    // The Lambda functions' UI, from the template's setting.
    std::fs::create_dir_all(tmp.path().join("lambda")).unwrap();
    let rig = crate::login_cli::start_with(
        &tmp.path().join("lambda"),
        Mode::Lambda,
        &[(tfreg_lambda::signin::OIDC_DISPLAY_NAME, "Acme Okta")],
    );
    assert_eq!(link(&rig.server), "Sign in with Acme Okta");
}
