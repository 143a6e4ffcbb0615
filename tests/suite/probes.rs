//! Holes found by probing the registry from outside, each closed, in-process
//! on both backends (embedded, and DynamoDB + S3 on the emulators): archives
//! served as downloads that no browser sniffs into a script; text others
//! read that carries no control or invisible characters; bounds on publishes
//! in progress and on a token's namespaces; signing keys that can never sign
//! refused at registration. Every refusal is a 4xx of one exact status with
//! a short `{"errors": [...]}` body.

use bytes::Bytes;
use http::{Method, StatusCode};
use tfreg_model::token::Scope;
use tfreg_testkit::{TestRegistry, TestResponse, TestSigner, module_archive};

use crate::access::send;
use crate::backend_contract::{contract, publish_module};

const NS: &str = "acme";

/// Publish provider `acme/null` `version` (linux_amd64), signed.
async fn publish_provider(r: &TestRegistry, token: &str, version: &str) -> TestResponse {
    let signer = TestSigner::rsa();
    let files = tfreg_testkit::provider_release("null", version, &["linux_amd64"], &signer);
    r.publish(
        &crate::publish_attacks::provider(&format!("{NS}/null"), version),
        token,
        &files,
        tfreg_testkit::provider_request(&signer),
    )
    .await
}

// ---------------------------------------------------------------------------
// Archives are downloads, never pages or scripts
// ---------------------------------------------------------------------------

/// The headers every answer to an archive URL carries.
fn assert_download_headers(resp: &TestResponse, name: &str, context: &str) {
    assert_eq!(
        resp.headers
            .get("x-content-type-options")
            .map(|v| v.to_str().unwrap()),
        Some("nosniff"),
        "{context}"
    );
    assert_eq!(
        resp.headers
            .get("content-disposition")
            .map(|v| v.to_str().unwrap()),
        Some(format!("attachment; filename=\"{name}\"").as_str()),
        "{context}"
    );
}

/// A publisher's zip that is also valid JavaScript would run under the UI's
/// `script-src 'self'` if the registry served it as something a browser
/// sniffs. Every archive, SHA256SUMS and signature answer (HEAD, GET, and
/// in AWS the redirect and the presigned URL S3 answers) is an attachment,
/// with `nosniff` wherever the registry answers itself.
async fn blob_answers_are_attachments_never_sniffed(r: TestRegistry) {
    let token = r.token(Scope::Publish, None).await;
    publish_provider(&r, &token, "1.0.0")
        .await
        .expect(StatusCode::CREATED, "provider");
    let archive = module_archive(&[("main.tf", "# m\n")]);
    publish_module(&r, &token, &format!("{NS}/m/aws"), "1.0.0", &archive)
        .await
        .expect(StatusCode::CREATED, "module");
    let download = r
        .get(&format!(
            "/v1/providers/{NS}/null/1.0.0/download/linux/amd64"
        ))
        .await
        .json();
    let module = r
        .get(&format!("/v1/modules/{NS}/m/aws/1.0.0/download"))
        .await;
    let urls = [
        download["download_url"].as_str().unwrap().to_string(),
        download["shasums_url"].as_str().unwrap().to_string(),
        download["shasums_signature_url"]
            .as_str()
            .unwrap()
            .to_string(),
        module.headers["x-terraform-get"]
            .to_str()
            .unwrap()
            .to_string(),
    ];
    for url in urls {
        let name = url
            .split('?')
            .next()
            .unwrap()
            .rsplit('/')
            .next()
            .unwrap()
            .to_string();
        let context = format!("{}: {name}", r.name);
        let head = r.send_url(Method::HEAD, &url, &[], Bytes::new()).await;
        head.expect(StatusCode::OK, &context);
        assert_download_headers(&head, &name, &format!("{context}: HEAD"));
        let get = r.send_url(Method::GET, &url, &[], Bytes::new()).await;
        assert_download_headers(&get, &name, &format!("{context}: GET"));
        if r.name == "embedded" {
            get.expect(StatusCode::OK, &context);
            continue;
        }
        // S3: the presigned URL asks S3 to answer as an attachment too (S3
        // cannot add nosniff; the URL is another origin than the UI's).
        get.expect(StatusCode::TEMPORARY_REDIRECT, &context);
        let location = get.headers["location"].to_str().unwrap().to_string();
        assert!(
            location.contains("response-content-disposition=attachment"),
            "{context}: {location}"
        );
        let s3 = r.download(&url).await;
        s3.expect(StatusCode::OK, &context);
        assert_eq!(
            s3.headers
                .get("content-disposition")
                .map(|v| v.to_str().unwrap()),
            Some(format!("attachment; filename=\"{name}\"").as_str()),
            "{context}: S3's answer"
        );
    }
}

// ---------------------------------------------------------------------------
// Bounds: a token's namespaces
// ---------------------------------------------------------------------------

/// A token may list 100 namespaces, not 10,000 (its record is read on
/// every request it makes).
async fn a_token_covers_at_most_100_namespaces(r: TestRegistry) {
    let admin = r.token(Scope::Admin, None).await;
    let names = |n: usize| -> Vec<String> { (0..n).map(|i| format!("ns{i:03}")).collect() };
    let resp = send(
        &r,
        Method::POST,
        "/v1/admin/tokens",
        &admin,
        serde_json::json!({ "name": "wide", "scopes": ["read"], "namespaces": names(101) }),
    )
    .await;
    resp.expect(
        StatusCode::BAD_REQUEST,
        &format!("{}: 101 namespaces", r.name),
    );
    assert!(resp.error().contains("100 namespaces"), "{}", resp.error());
    let resp = send(
        &r,
        Method::POST,
        "/v1/admin/tokens",
        &admin,
        serde_json::json!({ "name": "wide", "scopes": ["read"], "namespaces": names(100) }),
    )
    .await;
    resp.expect(StatusCode::CREATED, &format!("{}: 100 namespaces", r.name));
}

// ---------------------------------------------------------------------------
// Text others read: no control or invisible characters
// ---------------------------------------------------------------------------

/// A gpg-made key of shared/verify/tests/fixtures/signing.
fn fixture_key(name: &str) -> String {
    let path = format!(
        "{}/shared/verify/tests/fixtures/signing/{name}.pub.asc",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// A newline, an ESC (terminal escape sequences), a bidi override and a
/// zero-width space: each would reach whoever reads the text (Terraform
/// prints deprecation messages on every `init`; lists and the audit show
/// token names).
const UNPRINTABLE: [(&str, &str, &str); 4] = [
    ("newline", "use 2.0.0\nall is well", "U+000A"),
    ("ESC", "use \u{1b}[2J\u{1b}[31m2.0.0", "U+001B"),
    ("bidi override", "use \u{202e}0.0.2", "U+202E"),
    ("zero-width space", "use\u{200b}2.0.0", "U+200B"),
];

/// Deprecate and yank messages, token names and signing keys' armor
/// headers holding any of [`UNPRINTABLE`] are refused with 400, and
/// nothing changes.
async fn unprintable_text_is_refused(r: TestRegistry) {
    let admin = r.token(Scope::Admin, None).await;
    publish_provider(&r, &admin, "1.0.0")
        .await
        .expect(StatusCode::CREATED, "publish");
    let release = format!("/v1/admin/providers/{NS}/null/1.0.0");
    for (what, text, code) in UNPRINTABLE {
        for action in ["deprecate", "yank"] {
            let resp = send(
                &r,
                Method::POST,
                &format!("{release}/{action}"),
                &admin,
                serde_json::json!({ "message": text }),
            )
            .await;
            resp.expect(
                StatusCode::BAD_REQUEST,
                &format!("{}: {action} {what}", r.name),
            );
            assert!(resp.error().contains(code), "{}", resp.error());
        }
        let resp = send(
            &r,
            Method::POST,
            "/v1/admin/tokens",
            &admin,
            serde_json::json!({ "name": text, "scopes": ["read"] }),
        )
        .await;
        resp.expect(
            StatusCode::BAD_REQUEST,
            &format!("{}: token {what}", r.name),
        );
        assert!(resp.error().contains(code), "{}", resp.error());
        // A signing key's armor header (served to Terraform as it is).
        let begin = "-----BEGIN PGP PUBLIC KEY BLOCK-----";
        let armor = fixture_key("rsa").replacen(begin, &format!("{begin}\nComment: {text}"), 1);
        let resp = send(
            &r,
            Method::POST,
            &format!("/v1/admin/keys/{NS}"),
            &admin,
            serde_json::json!({ "keys": [armor] }),
        )
        .await;
        resp.expect(StatusCode::BAD_REQUEST, &format!("{}: key {what}", r.name));
        // (A newline ends the header line: what follows is not armor.)
        let needle = if what == "newline" { "armor" } else { code };
        assert!(resp.error().contains(needle), "{}", resp.error());
    }
    // Nothing changed: listed, no warning, no new token.
    let versions = r.get(&format!("/v1/providers/{NS}/null/versions")).await;
    versions.expect(StatusCode::OK, "versions");
    assert_eq!(versions.json()["versions"].as_array().unwrap().len(), 1);
    assert!(
        versions.json()["warnings"]
            .as_array()
            .is_none_or(|w| w.is_empty()),
        "{}",
        versions.text()
    );
    let tokens = send(
        &r,
        Method::GET,
        "/v1/admin/tokens",
        &admin,
        serde_json::Value::Null,
    )
    .await;
    assert_eq!(tokens.json()["tokens"].as_array().unwrap().len(), 1);
    let keys = send(
        &r,
        Method::GET,
        &format!("/v1/admin/keys/{NS}"),
        &admin,
        serde_json::Value::Null,
    )
    .await;
    assert_eq!(keys.json()["keys"], serde_json::json!([]));
}

/// A refusal's message may quote what the client sent (a JSON body's
/// unknown scope, as serde names it): the audit trail keeps the message, and
/// `tfreg audit` prints it, so the audit keeps it with every control or
/// invisible character escaped.
async fn audit_details_carry_no_control_characters(r: TestRegistry) {
    let admin = r.token(Scope::Admin, None).await;
    for (what, text, _) in UNPRINTABLE {
        let resp = send(
            &r,
            Method::POST,
            "/v1/admin/tokens",
            &admin,
            serde_json::json!({ "name": "ok", "scopes": [text] }),
        )
        .await;
        resp.expect(
            StatusCode::BAD_REQUEST,
            &format!("{}: scope {what}", r.name),
        );
    }
    let audit = send(
        &r,
        Method::GET,
        "/v1/admin/audit",
        &admin,
        serde_json::Value::Null,
    )
    .await;
    audit.expect(StatusCode::OK, "audit");
    let events = audit.json()["events"].as_array().unwrap().clone();
    let refused: Vec<&serde_json::Value> = events
        .iter()
        .filter(|e| e["action"] == "token.create" && e["outcome"] == "refused")
        .collect();
    assert_eq!(refused.len(), UNPRINTABLE.len(), "{events:#?}");
    for e in refused {
        let detail = e["detail"].as_str().unwrap();
        assert!(
            !detail.chars().any(tfreg_model::text::unprintable),
            "{}: an unprintable character in the audit: {detail:?}",
            r.name
        );
        assert!(detail.contains("unknown variant"), "{detail}");
    }
}

// ---------------------------------------------------------------------------
// Signing keys that cannot sign
// ---------------------------------------------------------------------------

/// A revoked or expired key is refused (400, saying so) and nothing is
/// added; a key Terraform ≤ 1.5 cannot read is added with a warning.
async fn keys_that_cannot_sign_are_refused_and_modern_keys_warned(r: TestRegistry) {
    let admin = r.token(Scope::Admin, None).await;
    let path = format!("/v1/admin/keys/{NS}");
    let add = |keys: Vec<String>| {
        let (r, admin, path) = (&r, &admin, &path);
        async move {
            send(
                r,
                Method::POST,
                path,
                admin,
                serde_json::json!({ "keys": keys }),
            )
            .await
        }
    };
    for (name, needle) in [("revoked", "revoked"), ("expired", "expired")] {
        let resp = add(vec![fixture_key(name)]).await;
        resp.expect(StatusCode::BAD_REQUEST, &format!("{}: {name}", r.name));
        assert!(resp.error().contains(needle), "{}", resp.error());
        // With a good key in the same request: still none added.
        let resp = add(vec![fixture_key("rsa"), fixture_key(name)]).await;
        resp.expect(
            StatusCode::BAD_REQUEST,
            &format!("{}: rsa + {name}", r.name),
        );
        assert!(resp.error().contains("key 2 of 2"), "{}", resp.error());
    }
    let listed = send(&r, Method::GET, &path, &admin, serde_json::Value::Null).await;
    assert_eq!(
        listed.json()["keys"],
        serde_json::json!([]),
        "nothing added"
    );

    let resp = add(vec![fixture_key("rsa")]).await;
    resp.expect(StatusCode::CREATED, "rsa");
    assert!(
        resp.json()["warnings"]
            .as_array()
            .is_none_or(|w| w.is_empty()),
        "{}",
        resp.text()
    );
    let resp = add(vec![fixture_key("ed25519")]).await;
    resp.expect(StatusCode::CREATED, "ed25519");
    let warnings = resp.json()["warnings"].clone();
    let warnings = warnings.as_array().expect("a warnings list");
    assert_eq!(warnings.len(), 1, "{}", resp.text());
    let warning = warnings[0].as_str().unwrap();
    assert!(
        warning.contains("Terraform 1.5") && warning.contains("EdDSA"),
        "{warning}"
    );
    assert_eq!(resp.json()["keys"].as_array().unwrap().len(), 2);
}

// ---------------------------------------------------------------------------
// Bounds: publishes in progress
// ---------------------------------------------------------------------------

/// begin for module `acme/<name>/aws` `version`.
async fn begin(r: &TestRegistry, token: &str, name: &str, version: &str) -> TestResponse {
    let archive = module_archive(&[("main.tf", &format!("# {name} {version}\n"))]);
    let request = tfreg_model::protocol::PublishRequest {
        files: vec![tfreg_testkit::decl("m.tar.gz", &archive)],
        ..Default::default()
    };
    r.publish_step(
        &crate::backend_contract::module(&format!("{NS}/{name}/aws"), version),
        tfreg_model::router::PublishStep::Begin,
        token,
        &request,
    )
    .await
}

/// A 429 with a `Retry-After` of at most `max` seconds and a message naming `needle`.
fn assert_too_many(resp: &TestResponse, needle: &str, max: u64, context: &str) {
    resp.expect(StatusCode::TOO_MANY_REQUESTS, context);
    let retry: u64 = resp.headers["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=max).contains(&retry), "{context}: Retry-After {retry}");
    let msg = resp.error();
    assert!(msg.contains(needle) && msg.len() < 300, "{context}: {msg}");
}

fn a_day_later() -> u64 {
    tfreg_http::registry::unix_now() + 86_400
}

/// `begin` alone ran at 913/s per token, each a stored record. Open
/// publishes are bounded: 20 per token, 100 per namespace, answered 429
/// with `Retry-After` (when the oldest of them expires); a completed
/// publish frees its place at once, an expired one counts no more.
async fn open_publishes_are_bounded_per_token_and_namespace(r: TestRegistry) {
    let ttl = r.registry.config.url_ttl_secs + 3600;
    let first = r.token(Scope::Publish, Some(NS)).await;
    for i in 0..20 {
        begin(&r, &first, "m0", &format!("1.0.{i}"))
            .await
            .expect(StatusCode::OK, &format!("{}: begin {i}", r.name));
    }
    let resp = begin(&r, &first, "m0", "1.0.20").await;
    assert_too_many(
        &resp,
        "20 publishes in progress",
        ttl + 1,
        &format!("{}: token", r.name),
    );
    // Another token of the namespace still begins.
    let other = r.token(Scope::Publish, Some(NS)).await;
    begin(&r, &other, "m1", "1.0.0")
        .await
        .expect(StatusCode::OK, "another token");
    // A completed publish frees its place at once.
    let done = r.token(Scope::Publish, Some(NS)).await;
    for i in 0..21 {
        let archive = module_archive(&[("main.tf", &format!("# {i}\n"))]);
        publish_module(
            &r,
            &done,
            &format!("{NS}/done/aws"),
            &format!("2.0.{i}"),
            &archive,
        )
        .await
        .expect(
            StatusCode::CREATED,
            &format!("{}: completed publish {i}", r.name),
        );
    }
    // The namespace: 20 + 1 open so far; 79 more fill it.
    let mut open = 21;
    for t in 0..4 {
        let filler = r.token(Scope::Publish, Some(NS)).await;
        for i in 0..20 {
            if open == 100 {
                break;
            }
            begin(&r, &filler, &format!("n{t}"), &format!("1.0.{i}"))
                .await
                .expect(StatusCode::OK, &format!("{}: fill {open}", r.name));
            open += 1;
        }
    }
    assert_eq!(open, 100);
    let fresh = r.token(Scope::Publish, None).await;
    let resp = begin(&r, &fresh, "m2", "1.0.0").await;
    assert_too_many(
        &resp,
        "100 publishes in progress",
        ttl + 1,
        &format!("{}: namespace", r.name),
    );
    // Other namespaces are not affected.
    let other = r
        .publish_step(
            &crate::backend_contract::module("other/m/aws", "1.0.0"),
            tfreg_model::router::PublishStep::Begin,
            &fresh,
            &tfreg_model::protocol::PublishRequest {
                files: vec![tfreg_testkit::decl("m.tar.gz", b"x")],
                ..Default::default()
            },
        )
        .await;
    other.expect(StatusCode::OK, "another namespace");
    // Once they have expired, they count no more.
    assert!(ttl < 86_400);
    let later = r.reconfigure(|reg: tfreg_http::Registry| reg.with_clock(a_day_later));
    begin(&later, &first, "m0", "1.0.20")
        .await
        .expect(StatusCode::OK, "after the open publishes expired");
}

contract!(
    blob_answers_are_attachments_never_sniffed,
    a_token_covers_at_most_100_namespaces,
    unprintable_text_is_refused,
    audit_details_carry_no_control_characters,
    keys_that_cannot_sign_are_refused_and_modern_keys_warned,
    open_publishes_are_bounded_per_token_and_namespace,
);
