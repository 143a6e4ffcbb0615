//! The web UI's single sign-on in headless Chromium: `tfreg serve
//! --private` brokering to the real OpenID Provider
//! (`tests/oidc/provider.mjs`). A person follows a link to a private page,
//! chooses "Sign in with single sign-on", signs in at the provider's own
//! form, and lands on that page signed in; the session's token is listed
//! and revocable (revoking it ends the session); a person whose groups map
//! to nothing is refused with a page that says so; the audit trail names
//! the sign-in.

use std::time::{Duration, Instant};

use tfreg_model::sso::GroupMapping;
use tfreg_model::token::Scope;
use tfreg_store::catalog::sso;
use tfreg_store::sqlite::SqliteStore;

use crate::login::{runtime, start};
use crate::support::browser::Browser;
use crate::support::command::ok;
use crate::support::dist::write_tree;
use crate::support::server::Server;
use crate::support::tools::tfreg_bin;

/// Wait (15 s at most) until the browser is at `path`.
pub(crate) fn wait_for_path(b: &Browser, path: &str) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while b.path() != path {
        assert!(
            Instant::now() < deadline,
            "the browser is at {:?}, not {path:?}: {}",
            b.path(),
            b.js("return document.body ? document.body.innerText : ''")
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// At the provider's login form (another origin): sign in as `user`.
pub(crate) fn at_the_provider(b: &Browser, user: &str) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while b.js("return document.querySelector('input[name=login]') !== null") != true {
        assert!(Instant::now() < deadline, "no login form at the provider");
        std::thread::sleep(Duration::from_millis(100));
    }
    b.type_into("input[name=login]", user);
    b.type_into("input[name=password]", "x");
    b.click("button[type=submit]");
}

/// `user` signs in with single sign-on from `page` (whose namespace their
/// groups do not read): back at `page` within `limit`, signed in as `user`,
/// shown a refusal.
pub(crate) fn signed_in_but_refused(
    b: &Browser,
    server: &Server,
    page: &str,
    user: &str,
    limit: Duration,
) {
    b.goto(&server.url(page));
    b.click("#sso");
    at_the_provider(b, user);
    let deadline = Instant::now() + limit;
    while !b.path().starts_with(page) {
        assert!(Instant::now() < deadline, "{user} is at {}", b.path());
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(b.text("#signed-in-as").contains(user));
    assert!(
        !b.text("#error-heading").is_empty(),
        "{user} reads nothing of {page}"
    );
}

#[test]
fn a_person_signs_in_to_the_ui_with_single_sign_on_in_chromium() {
    let tmp = tempfile::tempdir().unwrap();
    let (_op, server) = start(tmp.path());
    let data = tmp.path().join("data");
    let src = tmp.path().join("module");
    write_tree(&src, &[("main.tf", "output \"x\" { value = 1 }\n")]);
    let publisher = server.token("publish", Some("acme"));
    ok(
        server.publish_module(&publisher, &src, "acme/net/aws", "1.0.0"),
        "publish",
    );
    // `other` (bob's only group) reads another namespace only.
    let store = SqliteStore::open(&data.join("registry.db")).unwrap();
    let mapping = GroupMapping::new("other", Scope::Read, &["elsewhere"]).unwrap();
    runtime()
        .block_on(sso::put_mapping(&store, &mapping))
        .unwrap();

    let b = Browser::open(&server, 1280, 900, "light");
    let page = "/ui/modules/acme/net/aws";
    b.goto(&server.url(page));
    assert!(b.path().starts_with("/ui/sign-in?next="), "{}", b.path());
    // The provider named by its issuer's host (no --oidc-display-name).
    assert_eq!(b.text("#sso").trim(), "Sign in with 127.0.0.1");
    b.click("#sso");
    at_the_provider(&b, "alice");
    // Back through the callback and its same-site page: the page asked for,
    // signed in (the session cookie went with that second navigation).
    wait_for_path(&b, page);
    assert!(
        b.text("main").contains("acme/net/aws"),
        "{}",
        b.text("main")
    );
    let who = b.text("#signed-in-as");
    assert!(who.contains("alice"), "signed in as alice: {who}");

    // The session's token is alice's, listed; revoking it ends the session.
    let list = std::process::Command::new(tfreg_bin())
        .args(["token", "list", "--data-dir"])
        .arg(&data)
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&list.stdout).to_string();
    let line = listed
        .lines()
        .find(|l| l.contains("alice"))
        .unwrap_or_else(|| panic!("no token of alice in:\n{listed}"));
    let id = line.split_whitespace().next().unwrap();
    ok(
        std::process::Command::new(tfreg_bin())
            .args(["token", "revoke", id, "--data-dir"])
            .arg(&data)
            .output()
            .unwrap(),
        "revoke",
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        b.goto(&server.url(page));
        if b.path().starts_with("/ui/sign-in") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the session outlived its revoked token"
        );
        std::thread::sleep(Duration::from_millis(500));
    }

    // bob's groups give nothing on acme: signed in, but refused the page;
    // and the audit trail has alice's sign-in.
    signed_in_but_refused(
        &Browser::open(&server, 1280, 900, "light"),
        &server,
        page,
        "bob",
        Duration::from_secs(15),
    );
    let audit = std::process::Command::new(tfreg_bin())
        .args(["audit", "--data-dir"])
        .arg(&data)
        .output()
        .unwrap();
    let audit = String::from_utf8_lossy(&audit.stdout).to_string();
    assert!(
        audit
            .lines()
            .any(|l| l.contains("token.login") && l.contains("alice")),
        "{audit}"
    );
}
