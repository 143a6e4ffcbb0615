//! Bad input over the real HTTPS server and the real `tfreg` CLI: every refusal
//! is a 4xx with a short `{"errors": [...]}` body, and nothing half-published
//! ever becomes visible. (Malformed paths and bodies are checked in-process in
//! `handlers`.)

use std::path::Path;
use std::time::{Duration, Instant};

use crate::support::log;
use crate::support::*;

const NS: &str = "acme";

fn assert_error(resp: reqwest::blocking::Response, status: u16, needle: &str) {
    let got = resp.status().as_u16();
    let ct = resp
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_string());
    let body: serde_json::Value = resp.json().expect("error body is JSON");
    assert_eq!(got, status, "{body}");
    assert_eq!(ct.as_deref(), Some("application/json"));
    let errors = body["errors"].as_array().expect("errors array");
    assert_eq!(errors.len(), 1, "{body}");
    let msg = errors[0].as_str().unwrap();
    assert!(msg.contains(needle), "{msg:?} should mention {needle:?}");
    assert!(msg.len() < 300, "error messages stay short: {msg}");
}

fn not_visible(server: &Server, version: &str) {
    let resp = server.get(&format!(
        "/v1/providers/{NS}/null/{version}/download/linux/amd64"
    ));
    assert_eq!(resp.status(), 404, "version {version} must not be visible");
}

fn publish(
    server: &Server,
    token: &str,
    dist: &Path,
    key: &Path,
    extra: &[&str],
) -> std::process::Output {
    server.publish_provider_with_key(token, dist, key, NS, extra)
}

#[test]
fn refused_publishes_leave_nothing_visible() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("data"), &[]);
    let token = server.token("publish", None);
    let gpg = Gpg::new("rsa2048");
    let other = Gpg::new("rsa2048");

    // Tampered signature.
    let dist = tmp.path().join("tampered-sig");
    provider_dist(&dist, "null", "1.0.0", &["linux_amd64"], &gpg);
    let sig = dist.join("terraform-provider-null_1.0.0_SHA256SUMS.sig");
    let mut bytes = std::fs::read(&sig).unwrap();
    let last = bytes.len() - 3;
    bytes[last] ^= 0x55;
    std::fs::write(&sig, bytes).unwrap();
    let out = fails(
        publish(&server, &token, &dist, &dist.join("key.asc"), &[]),
        "tampered signature",
    );
    assert!(out.contains("signature"), "{out}");
    not_visible(&server, "1.0.0");

    // Wrong shasum: a zip changed after SHA256SUMS was signed.
    let dist = tmp.path().join("wrong-sum");
    let zips = provider_dist(&dist, "null", "1.0.1", &["linux_amd64"], &gpg);
    provider_zip(
        &zips[0],
        &Tools::get().path("TFREG_NULL_PROVIDER"),
        "terraform-provider-null_v1.0.1_x4_changed",
    );
    let out = fails(
        publish(&server, &token, &dist, &dist.join("key.asc"), &[]),
        "wrong shasum",
    );
    assert!(out.contains("SHA256SUMS says"), "{out}");
    not_visible(&server, "1.0.1");

    // Unknown key: signed by one key, another key given.
    let dist = tmp.path().join("unknown-key");
    provider_dist(&dist, "null", "1.0.2", &["linux_amd64"], &gpg);
    other.export(&tmp.path().join("other.asc"));
    let out = fails(
        publish(&server, &token, &dist, &tmp.path().join("other.asc"), &[]),
        "unknown key",
    );
    assert!(out.contains("not the given key"), "{out}");
    not_visible(&server, "1.0.2");

    // EdDSA keys: Terraform <= 1.5 cannot verify them, refused unless asked for.
    let ed = Gpg::new("ed25519");
    let dist = tmp.path().join("ed25519");
    provider_dist(&dist, "null", "1.0.3", &["linux_amd64"], &ed);
    let out = fails(
        publish(&server, &token, &dist, &dist.join("key.asc"), &[]),
        "ed25519 key",
    );
    assert!(out.contains("Terraform 1.5"), "{out}");
    not_visible(&server, "1.0.3");
    let out = ok(
        publish(
            &server,
            &token,
            &dist,
            &dist.join("key.asc"),
            &["--allow-modern-keys"],
        ),
        "ed25519 allowed",
    );
    assert!(
        out.contains("warning") && out.contains("Terraform 1.5"),
        "a loud warning: {out}"
    );
    assert_eq!(
        server
            .get(&format!(
                "/v1/providers/{NS}/null/1.0.3/download/linux/amd64"
            ))
            .status(),
        200
    );

    // Duplicate version: identical content is a no-op, different content is 409.
    let dist = tmp.path().join("dup");
    provider_dist(&dist, "null", "2.0.0", &["linux_amd64"], &gpg);
    ok(
        publish(
            &server,
            &token,
            &dist,
            &dist.join("key.asc"),
            &["--protocols", "6.0,5.0"],
        ),
        "first publish",
    );
    let before = server
        .get(&format!(
            "/v1/providers/{NS}/null/2.0.0/download/linux/amd64"
        ))
        .json::<serde_json::Value>()
        .unwrap();
    assert_eq!(
        before["protocols"],
        serde_json::json!(["6.0", "5.0"]),
        "--protocols overrides the manifest"
    );
    let out = ok(
        publish(&server, &token, &dist, &dist.join("key.asc"), &[]),
        "identical re-publish",
    );
    assert!(out.contains("nothing to do"), "{out}");
    let dist2 = tmp.path().join("dup2");
    provider_dist(
        &dist2,
        "null",
        "2.0.0",
        &["linux_amd64", "darwin_arm64"],
        &gpg,
    );
    let out = fails(
        publish(&server, &token, &dist2, &dist2.join("key.asc"), &[]),
        "different re-publish",
    );
    assert!(out.contains("409") && out.contains("immutable"), "{out}");
    let after = server
        .get(&format!(
            "/v1/providers/{NS}/null/2.0.0/download/linux/amd64"
        ))
        .json::<serde_json::Value>()
        .unwrap();
    assert_eq!(before["shasum"], after["shasum"]);
    assert_eq!(
        after["packages"].as_object().unwrap().len(),
        1,
        "still the first content"
    );

    // Versions list holds exactly the two that were accepted.
    let versions: serde_json::Value = server
        .get(&format!("/v1/providers/{NS}/null/versions"))
        .json()
        .unwrap();
    let listed: Vec<&str> = versions["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["version"].as_str().unwrap())
        .collect();
    assert_eq!(listed, ["1.0.3", "2.0.0"]);

    // Malformed version on the command line.
    let out = fails(
        publish(
            &server,
            &token,
            &dist,
            &dist.join("key.asc"),
            &["--version", "v2.0.0"],
        ),
        "v-prefixed version",
    );
    assert!(out.contains("v2.0.0"), "{out}");
    let out = fails(
        server.publish_module(&token, &dist, &format!("{NS}/m/aws"), "v1.0.0"),
        "module v-version",
    );
    assert!(out.contains("without the leading \"v\""), "{out}");
    log::assert_no_server_errors(&server.server_log(), 20);
}

#[test]
fn tokens_are_checked() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("data"), &["--private"]);
    let gpg = Gpg::new("rsa2048");
    let dist = tmp.path().join("dist");
    provider_dist(&dist, "null", "1.0.0", &["linux_amd64"], &gpg);
    let key = dist.join("key.asc");

    let out = fails(publish(&server, "", &dist, &key, &[]), "no token");
    assert!(out.contains("no token"), "{out}");
    let out = fails(
        publish(&server, "tfreg_forged", &dist, &key, &[]),
        "forged token",
    );
    assert!(out.contains("401"), "{out}");
    let out = fails(
        publish(&server, &server.token("read", None), &dist, &key, &[]),
        "read token",
    );
    assert!(out.contains("403"), "{out}");
    let out = fails(
        publish(
            &server,
            &server.token("publish", Some("elsewhere")),
            &dist,
            &key,
            &[],
        ),
        "other namespace",
    );
    assert!(out.contains("403") && out.contains("namespace"), "{out}");
    ok(
        publish(
            &server,
            &server.token("publish", Some(NS)),
            &dist,
            &key,
            &[],
        ),
        "namespace token",
    );

    // Reads need a token in this mode; discovery stays open.
    assert_eq!(server.get("/.well-known/terraform.json").status(), 200);
    assert_error(
        server.get(&format!("/v1/providers/{NS}/null/versions")),
        401,
        "requires a token",
    );
    let read = server.token("read", None);
    let resp = server
        .http
        .get(server.url(&format!("/v1/providers/{NS}/null/versions")))
        .bearer_auth(&read)
        .send()
        .unwrap();
    assert_eq!(resp.status(), 200);
    let resp = server
        .http
        .get(server.url(&format!("/v1/providers/{NS}/null/versions")))
        .bearer_auth("tfreg_nope")
        .send()
        .unwrap();
    assert_error(resp, 401, "not valid");
}

#[test]
fn interrupted_publish_leaves_no_trace() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("data"), &[]);
    let token = server.token("publish", None);
    let gpg = Gpg::new("rsa2048");
    let dist = tmp.path().join("dist");
    let zips = provider_dist(&dist, "null", "1.0.0", &["linux_amd64"], &gpg);
    let decl = |p: &Path| {
        let bytes = std::fs::read(p).unwrap();
        serde_json::json!({"name": p.file_name().unwrap().to_str().unwrap(), "size": bytes.len(), "sha256": tfreg_model::hashing::sha256_hex(&bytes)})
    };
    let sums = dist.join("terraform-provider-null_1.0.0_SHA256SUMS");
    let sig = dist.join("terraform-provider-null_1.0.0_SHA256SUMS.sig");
    let body = serde_json::json!({
        "files": [decl(&zips[0]), decl(&sums), decl(&sig)],
        "signing_key": std::fs::read_to_string(dist.join("key.asc")).unwrap(),
    });
    let begin: serde_json::Value = server
        .http
        .post(server.url("/v1/publish/providers/acme/null/1.0.0/begin"))
        .bearer_auth(&token)
        .json(&body)
        .send()
        .unwrap()
        .json()
        .unwrap();
    // Upload only the zip, then "crash": the version is not visible.
    let zip_url = begin["uploads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["name"].as_str().unwrap().ends_with(".zip"))
        .unwrap()["url"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        server
            .http
            .put(&zip_url)
            .body(std::fs::read(&zips[0]).unwrap())
            .send()
            .unwrap()
            .status(),
        200
    );
    // An upload URL cannot be used to write elsewhere, nor read.
    let tampered = zip_url.replace("linux_amd64.zip", "linux_arm64.zip");
    assert_eq!(
        server
            .http
            .put(&tampered)
            .body("x")
            .send()
            .unwrap()
            .status(),
        403
    );
    assert_eq!(server.http.get(&zip_url).send().unwrap().status(), 403);
    not_visible(&server, "1.0.0");
    // Completing with files missing is refused, and still nothing is visible.
    let mut complete = body.clone();
    complete["upload_id"] = begin["upload_id"].clone();
    let resp = server
        .http
        .post(server.url("/v1/publish/providers/acme/null/1.0.0/complete"))
        .bearer_auth(&token)
        .json(&complete)
        .send()
        .unwrap();
    assert_error(resp, 400, "was not uploaded");
    not_visible(&server, "1.0.0");
    assert_eq!(server.get("/v1/providers/acme/null/versions").status(), 404);
    // The whole publish still works afterwards.
    ok(
        publish(&server, &token, &dist, &dist.join("key.asc"), &[]),
        "publish after interruption",
    );
    assert_eq!(
        server
            .get("/v1/providers/acme/null/1.0.0/download/linux/amd64")
            .status(),
        200
    );
}

#[test]
fn archive_urls_answer_head_and_get_and_expire() {
    let tmp = tempfile::tempdir().unwrap();
    // Long enough for the checks below on a loaded 2-core CI machine; the test
    // waits until the last URL's lifetime has passed, not a fixed time.
    const TTL: Duration = Duration::from_secs(6);
    let server = Server::start(
        &tmp.path().join("data"),
        &["--url-ttl", &TTL.as_secs().to_string()],
    );
    let token = server.token("publish", None);
    let gpg = Gpg::new("rsa2048");
    let dist = tmp.path().join("dist");
    let zips = provider_dist(&dist, "null", "1.0.0", &["linux_amd64"], &gpg);
    ok(
        publish(&server, &token, &dist, &dist.join("key.asc"), &[]),
        "publish",
    );
    let src = tmp.path().join("module");
    write_tree(&src, &[("main.tf", "output \"x\" { value = 1 }\n")]);
    ok(
        server.publish_module(&token, &src, &format!("{NS}/m/aws"), "1.0.0"),
        "publish module",
    );

    let first_issued = Instant::now();
    let download: serde_json::Value = server
        .get("/v1/providers/acme/null/1.0.0/download/linux/amd64")
        .json()
        .unwrap();
    let module = server.get("/v1/modules/acme/m/aws/1.0.0/download");
    assert_eq!(module.status(), 204);
    let module_url = module.headers()["x-terraform-get"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(
        module_url.split('?').next().unwrap().ends_with(".tar.gz"),
        "{module_url}"
    );
    let mirror: serde_json::Value = server
        .get(&format!("/v1/mirror/{}/acme/null/1.0.0.json", server.host))
        .json()
        .unwrap();
    let urls = [
        download["download_url"].as_str().unwrap().to_string(),
        download["shasums_url"].as_str().unwrap().to_string(),
        download["shasums_signature_url"]
            .as_str()
            .unwrap()
            .to_string(),
        module_url,
        mirror["archives"]["linux_amd64"]["url"]
            .as_str()
            .unwrap()
            .to_string(),
    ];
    let last_issued = Instant::now();
    let zip_bytes = std::fs::read(&zips[0]).unwrap();
    for url in &urls {
        let head = server.http.head(url).send().unwrap();
        assert_eq!(head.status(), 200, "HEAD {url}");
        let len: usize = head.headers()["content-length"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        let get = server.http.get(url).send().unwrap();
        assert_eq!(get.status(), 200, "GET {url}");
        let body = get.bytes().unwrap();
        assert_eq!(body.len(), len);
        if url.contains("linux_amd64.zip") {
            assert_eq!(body.as_ref(), zip_bytes.as_slice());
        }
        // Tampered: another key, a later expiry, or a forged signature.
        let tampered = url.replace("expires=", "expires=9");
        assert_error(
            server.http.get(&tampered).send().unwrap(),
            403,
            "does not match",
        );
        let forged = format!("{}A", url);
        assert_error(
            server.http.get(&forged).send().unwrap(),
            403,
            "archive URL refused",
        );
    }
    // SHA256SUMS and its signature are served exactly as published.
    assert_eq!(
        server
            .http
            .get(&urls[1])
            .send()
            .unwrap()
            .bytes()
            .unwrap()
            .as_ref(),
        std::fs::read(dist.join("terraform-provider-null_1.0.0_SHA256SUMS"))
            .unwrap()
            .as_slice()
    );
    assert_eq!(
        server
            .http
            .get(&urls[2])
            .send()
            .unwrap()
            .bytes()
            .unwrap()
            .as_ref(),
        std::fs::read(dist.join("terraform-provider-null_1.0.0_SHA256SUMS.sig"))
            .unwrap()
            .as_slice()
    );
    assert!(
        first_issued.elapsed() < TTL,
        "the checks of valid URLs took {:?}, longer than the URL lifetime: raise TTL",
        first_issued.elapsed()
    );
    // Once the lifetime of the last-issued URL has passed (expiry has whole
    // seconds), every URL is refused.
    std::thread::sleep((last_issued + TTL + Duration::from_millis(1100)) - Instant::now());
    for url in &urls {
        assert_error(server.http.get(url).send().unwrap(), 403, "expired");
        assert_eq!(server.http.head(url).send().unwrap().status(), 403);
    }
}
