//! The pull-through cache under attack and fault (issue 22), on `tfreg
//! serve` with a real origin (a second `tfreg serve`) whose stored files
//! are tampered with on its disk: each refusal a 502 naming why, nothing
//! stored, one `cache.refused` audit event; a provider whose signing key
//! changes; mirror paths that name no configured upstream (never a fetch);
//! and 20 concurrent cold requests making one fetch of each file at the
//! origin.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;

use crate::cache_mirror::{Origin, Rig, files_named, platforms_of};
use crate::support::log;

/// The origin's stored file whose name ends with `suffix`.
fn origin_file(origin_data: &Path, suffix: &str) -> PathBuf {
    let found: Vec<PathBuf> = files_named(origin_data, |n| n.ends_with(suffix))
        .into_iter()
        .filter(|p| p.to_string_lossy().contains("/archives/"))
        .collect();
    assert_eq!(found.len(), 1, "{suffix}: {found:?}");
    found.into_iter().next().unwrap()
}

/// Change a stored file of the origin in place (its store keeps the name).
fn tamper(path: &Path, change: impl FnOnce(&mut Vec<u8>)) {
    let mut bytes = std::fs::read(path).unwrap();
    change(&mut bytes);
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn an_archive_that_is_not_its_sha256sums_line_is_refused_and_not_stored() {
    let tmp = tempfile::tempdir().unwrap();
    let origin = Origin::start(tmp.path(), "127.0.0.93", "origin-zip.example.test");
    let rig = Rig::start(tmp.path(), &origin, &[]);
    let base = format!("/v1/mirror/{}/hashicorp/null", origin.host);
    let (status, version) = rig.get(&format!("{base}/1.0.0.json"));
    assert_eq!(status, 200, "{version}");
    // The origin's zip changes after its SHA256SUMS was signed.
    tamper(
        &origin_file(&tmp.path().join("origin"), "_linux_amd64.zip"),
        |b| {
            let last = b.len() - 1;
            b[last] ^= 1;
        },
    );
    let url = version["archives"]["linux_amd64"]["url"].as_str().unwrap();
    let (status, body) = rig.download(url);
    let body: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(status, 502, "{body}");
    let reason = body["errors"][0].as_str().unwrap();
    assert!(
        reason.starts_with(
            "origin-zip.example.test: terraform-provider-null_1.0.0_linux_amd64.zip has sha256 "
        ) && reason.ends_with("as its SHA256SUMS says"),
        "{reason}"
    );
    let names: Vec<String> = rig
        .cached_objects()
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names.iter().filter(|n| n.ends_with(".zip")).count(),
        0,
        "no archive stored (the verified SHA256SUMS and its signature are): {names:?}"
    );
    let refused = rig.audit("cache.refused");
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0]["detail"], reason);
    // Not stored: the version lists no h1: and a reader has no archive.
    let (_, again) = rig.get(&format!("{base}/1.0.0.json"));
    assert_eq!(
        again["archives"]["linux_amd64"]["hashes"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

#[test]
fn sha256sums_whose_signature_fails_are_refused_and_nothing_is_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let origin = Origin::start(tmp.path(), "127.0.0.94", "origin-sums.example.test");
    let rig = Rig::start(tmp.path(), &origin, &[]);
    // One more line in SHA256SUMS after it was signed.
    tamper(
        &origin_file(&tmp.path().join("origin"), "_SHA256SUMS"),
        |b| {
            b.extend_from_slice(format!("{}  evil.zip\n", "0".repeat(64)).as_bytes());
        },
    );
    let base = format!("/v1/mirror/{}/hashicorp/null", origin.host);
    let (status, body) = rig.get(&format!("{base}/1.0.0.json"));
    assert_eq!(status, 502, "{body}");
    let reason = body["errors"][0].as_str().unwrap();
    assert!(
        reason.starts_with("origin-sums.example.test: ") && reason.contains("signature"),
        "{reason}"
    );
    assert_eq!(rig.audit("cache.refused").len(), 1);
    // The failure is answered again for a moment, without another fetch.
    let before = log::requests(&origin.server.server_log()).len();
    let (status, _) = rig.get(&format!("{base}/1.0.0.json"));
    assert_eq!(status, 502);
    assert_eq!(log::requests(&origin.server.server_log()).len(), before);
    assert!(rig.cached_objects().is_empty());
}

#[test]
fn a_signature_by_a_key_the_origin_does_not_list_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let origin = Origin::start(tmp.path(), "127.0.0.95", "origin-sig.example.test");
    let rig = Rig::start(tmp.path(), &origin, &[]);
    // SHA256SUMS re-signed by another key.
    let other = crate::support::gpg::Gpg::new("ed25519");
    let sums = origin_file(&tmp.path().join("origin"), "_SHA256SUMS");
    let sig = origin_file(&tmp.path().join("origin"), "_SHA256SUMS.sig");
    other.sign(&sums, &sig);
    let (status, body) = rig.get(&format!(
        "/v1/mirror/{}/hashicorp/null/1.0.0.json",
        origin.host
    ));
    assert_eq!(status, 502, "{body}");
    let reason = body["errors"][0].as_str().unwrap();
    assert!(reason.starts_with("origin-sig.example.test: "), "{reason}");
    assert!(reason.to_lowercase().contains("key"), "{reason}");
    assert_eq!(rig.audit("cache.refused").len(), 1);
}

/// A provider whose releases are signed by another key than before: stored
/// and audited by default; refused where the upstream says so.
#[test]
fn a_changed_signing_key_is_audited_or_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (
        crate::support::gpg::Gpg::new("rsa2048"),
        crate::support::gpg::Gpg::new("rsa3072"),
    );
    let origin = Origin::start_with(
        tmp.path(),
        "127.0.0.98",
        "origin-keys.example.test",
        &[("1.0.0", &a), ("1.1.0", &b)],
    );
    let base = format!("/v1/mirror/{}/hashicorp/null", origin.host);
    let audits = Rig::start(&tmp.path().join("audits"), &origin, &[]);
    let refuses = Rig::start(
        &tmp.path().join("refuses"),
        &origin,
        &["--on-key-change", "refuse"],
    );
    for rig in [&audits, &refuses] {
        let (status, body) = rig.get(&format!("{base}/1.0.0.json"));
        assert_eq!(status, 200, "{body}");
    }
    let (status, body) = audits.get(&format!("{base}/1.1.0.json"));
    assert_eq!(status, 200, "{body}");
    let changed = audits.audit("cache.key-changed");
    assert_eq!(changed.len(), 1, "{changed:?}");
    let detail = changed[0]["detail"].as_str().unwrap();
    assert!(
        detail.starts_with("origin-keys.example.test/hashicorp/null 1.1.0 is signed by ")
            && detail.contains(", earlier versions by "),
        "{detail}"
    );
    let (status, body) = refuses.get(&format!("{base}/1.1.0.json"));
    assert_eq!(status, 502, "{body}");
    assert!(
        body["errors"][0]
            .as_str()
            .unwrap()
            .contains("earlier versions by"),
        "{body}"
    );
    assert_eq!(refuses.audit("cache.key-changed").len(), 1);
}

/// Mirror paths naming no configured upstream are never fetched, whatever
/// they name: each is answered from this registry's own mirror (404) or
/// refused as a path (400), and the cache is never asked.
#[test]
fn mirror_paths_of_other_hosts_never_make_the_registry_fetch() {
    let tmp = tempfile::tempdir().unwrap();
    let origin = Origin::start(tmp.path(), "127.0.0.96", "origin-ssrf.example.test");
    let rig = Rig::start(tmp.path(), &origin, &[]);
    let before = log::requests(&origin.server.server_log()).len();
    for (host, status) in [
        ("169.254.169.254", 404),
        ("127.0.0.1", 404),
        ("localhost", 404),
        ("10.0.0.1", 404),
        ("[fd00:ec2::254]", 400),
        ("unlisted.example.test", 404),
        ("origin-ssrf.example.test.", 400),
        ("%2e%2e", 404),
        ("xn--rigin-ssrf-hcb.example.test", 404),
    ] {
        let (got, body) = rig.get(&format!("/v1/mirror/{host}/hashicorp/null/index.json"));
        assert_eq!(got, status, "{host}: {body}");
    }
    // No fill was ever started: no lease in the store.
    let store =
        tfreg_store::sqlite::SqliteStore::open(&rig.server_data().join("registry.db")).unwrap();
    let leases = tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(tfreg_store::query_all(
            &store,
            tfreg_store::catalog::schema::FILLING_PK,
            "",
        ));
    assert!(leases.unwrap().is_empty(), "the cache was never asked");
    assert_eq!(
        log::requests(&origin.server.server_log()).len(),
        before,
        "nothing reached the origin"
    );
}

/// 20 cold requests at once: one fetch of each file at the origin.
#[test]
fn concurrent_cold_requests_make_one_fetch_of_each_file() {
    let tmp = tempfile::tempdir().unwrap();
    let origin = Origin::start(tmp.path(), "127.0.0.97", "origin-burst.example.test");
    let rig = Arc::new(Rig::start(tmp.path(), &origin, &[]));
    one_fetch_of_each_file(&origin, rig);
}

/// 20 concurrent cold requests for `origin`'s index, version and linux
/// archive through `rig`'s mirror: each answered, the archive the
/// origin's bytes, and one request of each file at the origin.
pub(crate) fn one_fetch_of_each_file(origin: &Origin, rig: Arc<Rig>) {
    let _log = crate::cache_mirror::LogOnFailure(&rig.server);
    let base = format!("/v1/mirror/{}/hashicorp/null", origin.host);
    // What the origin saw before (the test rig's own readiness check).
    let before = log::requests(&origin.server.server_log()).len();
    let burst = |path: String| {
        let threads: Vec<_> = (0..20)
            .map(|_| {
                let (rig, path) = (rig.clone(), path.clone());
                std::thread::spawn(move || rig.get(&path))
            })
            .collect();
        threads
            .into_iter()
            .map(|t| t.join().unwrap())
            .collect::<Vec<_>>()
    };
    for (status, body) in burst(format!("{base}/index.json")) {
        assert_eq!(status, 200, "{body}");
    }
    let versions = burst(format!("{base}/1.0.0.json"));
    for (status, body) in &versions {
        assert_eq!(*status, 200, "{body}");
    }
    let url = versions[0].1["archives"]["linux_amd64"]["url"]
        .as_str()
        .unwrap()
        .to_string();
    let downloads: Vec<_> = (0..20)
        .map(|_| {
            let (rig, url) = (rig.clone(), url.clone());
            std::thread::spawn(move || rig.download(&url))
        })
        .collect();
    for d in downloads {
        let (status, bytes) = d.join().unwrap();
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&bytes));
        assert!(bytes == origin.linux_zip);
    }
    let seen = log::requests(&origin.server.server_log()).split_off(before);
    let count = |pick: &dyn Fn(&log::RequestLine) -> bool| seen.iter().filter(|r| pick(r)).count();
    assert_eq!(
        count(&|r| r.path == "/.well-known/terraform.json"),
        1,
        "{seen:#?}"
    );
    assert_eq!(count(&|r| r.path.ends_with("/versions")), 1, "{seen:#?}");
    // The version's fill asked linux_amd64's download answer; the archive's
    // fill reuses it (issue 35: it was asked again).
    assert_eq!(
        count(&|r| r.path.ends_with("/1.0.0/download/linux/amd64")),
        1,
        "{seen:#?}"
    );
    assert_eq!(count(&|r| r.path.ends_with("_SHA256SUMS")), 1, "{seen:#?}");
    assert_eq!(
        count(&|r| r.path.ends_with("_SHA256SUMS.sig")),
        1,
        "{seen:#?}"
    );
    assert_eq!(
        count(&|r| r.path.ends_with("_linux_amd64.zip")),
        1,
        "{seen:#?}"
    );
}

/// Nothing cached and the origin down: 503 with `Retry-After` naming the
/// origin, at once; an origin that accepts and never answers: 503 within
/// Terraform's 10 s request timeout (`TF_REGISTRY_CLIENT_TIMEOUT`), the
/// fill going on. (A bound on time here is the protocol's, not a speed goal.)
#[test]
fn a_failing_or_hanging_origin_is_a_503_in_time() {
    let tmp = tempfile::tempdir().unwrap();
    let origin = Origin::start(tmp.path(), "127.0.0.100", "origin-down.example.test");
    let rig = Rig::start(tmp.path(), &origin, &[]);
    drop(origin.server);
    let path = "/v1/mirror/origin-down.example.test/hashicorp/null/index.json";
    let resp = rig
        .server
        .http
        .get(rig.server.url(path))
        .bearer_auth(&rig.fill)
        .send()
        .unwrap();
    assert_eq!(resp.status(), 503);
    assert_eq!(resp.headers()["retry-after"], "2");
    let body: Value = resp.json().unwrap();
    assert!(
        body["errors"][0]
            .as_str()
            .unwrap()
            .starts_with("origin-down.example.test: "),
        "{body}"
    );

    // An origin that takes the connection and says nothing.
    let hang = std::net::TcpListener::bind("127.0.0.101:443").unwrap();
    let held = std::thread::spawn(move || {
        let kept: Vec<_> = hang.incoming().take(4).collect();
        std::thread::sleep(std::time::Duration::from_secs(30));
        drop(kept);
    });
    let ca = tmp.path().join("origin/tls/ca.pem");
    crate::support::command::ok(
        rig.server.tfreg(
            &rig.admin,
            &[
                "upstream",
                "set",
                "origin-hang.example.test",
                "--providers",
                "--connect-to",
                "origin-hang.example.test=127.0.0.101:443",
                "--ca-file",
                ca.to_str().unwrap(),
            ],
        ),
        "upstream set",
    );
    let started = std::time::Instant::now();
    let (status, body) = rig.get("/v1/mirror/origin-hang.example.test/hashicorp/null/index.json");
    let took = started.elapsed();
    assert_eq!(status, 503, "{body}");
    assert!(
        took < std::time::Duration::from_secs(10),
        "answered after {took:?}"
    );
    drop(held);
}

/// A sealed upstream answers what is cached and never fetches: a miss is
/// 404 even for a token that may fill. It is warmed first with `tfreg
/// cache warm`: one platform of a provider version, and a module.
#[test]
fn a_sealed_upstream_serves_the_cache_and_never_fetches() {
    let tmp = tempfile::tempdir().unwrap();
    let origin = Origin::start(tmp.path(), "127.0.0.102", "origin-sealed.example.test");
    let rig = Rig::start(tmp.path(), &origin, &[]);
    let base = format!("/v1/mirror/{}/hashicorp/null", origin.host);
    let module = format!("/v1/cache/{}/modules/hashicorp/greeting/null", origin.host);
    // A lock that pins no archive of the release warms nothing.
    let lock = tmp.path().join("lock.hcl");
    std::fs::write(
        &lock,
        format!(
            "provider \"{}/hashicorp/null\" {{\n  version = \"1.0.0\"\n  hashes = [\n    \"zh:{}\",\n  ]\n}}\n",
            origin.host,
            "0".repeat(64)
        ),
    )
    .unwrap();
    let refused = crate::support::command::fails(
        rig.server.tfreg(
            &rig.fill,
            &["cache", "warm", "--lock-file", lock.to_str().unwrap()],
        ),
        "tfreg cache warm with a lock pinning nothing",
    );
    assert!(refused.contains("none of its platforms"), "{refused}");
    // Warmed while online, by name: the linux archive only, and a module.
    let warmed = crate::support::command::ok(
        rig.server.tfreg(
            &rig.fill,
            &[
                "cache",
                "warm",
                "--provider",
                &format!("{}/hashicorp/null@1.0.0", origin.host),
                "--platform",
                "linux_amd64",
                "--module",
                &format!("{}/hashicorp/greeting/null@1.0.0", origin.host),
            ],
        ),
        "tfreg cache warm",
    );
    assert!(
        warmed.contains("warmed origin-sealed.example.test/hashicorp/null 1.0.0 linux_amd64"),
        "{warmed}"
    );
    assert!(!warmed.contains("darwin_arm64"), "{warmed}");
    assert!(
        warmed.contains("warmed origin-sealed.example.test/hashicorp/greeting/null 1.0.0"),
        "{warmed}"
    );
    // Sealed: only the mode given, every other setting kept (issue 35: the
    // README's example had dropped the connect settings), and said.
    let sealed = crate::support::command::ok(
        rig.server.tfreg(
            &rig.admin,
            &["upstream", "set", &origin.host, "--mode", "sealed"],
        ),
        "seal",
    );
    assert_eq!(
        sealed,
        format!(
            "upstream {} changed:\n  mode: \"online\" -> \"sealed\"\n",
            origin.host
        )
    );
    let shown = crate::support::command::ok(
        rig.server
            .tfreg(&rig.admin, &["upstream", "show", &origin.host, "--json"]),
        "show",
    );
    let shown: Value = serde_json::from_str(&shown).unwrap();
    assert_eq!(shown["settings"]["mode"], "sealed");
    assert_eq!(
        shown["settings"]["connect"]["to"][&origin.host][0],
        origin.listen.as_str()
    );
    assert!(shown["settings"]["connect"]["ca_pem"].is_string());
    assert_eq!(shown["settings"]["module_hosts"][0], origin.host.as_str());
    let before = log::requests(&origin.server.server_log()).len();
    let (status, index) = rig.get(&format!("{base}/index.json"));
    assert_eq!(status, 200, "{index}");
    assert_eq!(index, serde_json::json!({"versions": {"1.0.0": {}}}));
    let (status, version) = rig.get(&format!("{base}/1.0.0.json"));
    assert_eq!(status, 200, "{version}");
    assert_eq!(
        platforms_of(&version),
        ["linux_amd64"],
        "only what is stored"
    );
    let url = version["archives"]["linux_amd64"]["url"].as_str().unwrap();
    let (status, zip) = rig.download(url);
    assert_eq!((status, zip == origin.linux_zip), (200, true));
    let (status, list) = rig.get(&format!("{module}/versions"));
    assert_eq!(status, 200, "{list}");
    assert_eq!(list["modules"][0]["versions"][0]["version"], "1.0.0");
    let resp = rig
        .server
        .http
        .get(rig.server.url(&format!("{module}/1.0.0/download")))
        .bearer_auth(&rig.fill)
        .send()
        .unwrap();
    assert_eq!(resp.status().as_u16(), 204);
    let location = resp.headers()["x-terraform-get"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(location.contains("/v1/blobs/cache/"), "{location}");
    assert_eq!(rig.download(&location).0, 200);
    let (status, body) = rig.get(&format!("{module}/2.0.0/download"));
    assert_eq!(status, 404, "{body}");
    // Why: sealed, not "a --fill token may" (this one is such a token).
    assert_eq!(
        body["errors"][0],
        format!(
            "version 2.0.0 of {}/hashicorp/greeting/null is not cached here, and {} is sealed: the cache answers only what it holds",
            origin.host, origin.host
        )
    );
    // A platform the release does not have: said so, whatever the mode.
    let (status, body) = rig.get(&format!(
        "/v1/cache/{}/providers/hashicorp/null/1.0.0/download/windows/arm",
        origin.host
    ));
    assert_eq!(status, 404, "{body}");
    assert_eq!(
        body["errors"][0],
        format!(
            "{}/hashicorp/null 1.0.0 has no windows_arm build at the origin (it has darwin_arm64, linux_amd64)",
            origin.host
        )
    );
    let (status, body) = rig.get(&format!(
        "/v1/cache/{}/providers/hashicorp/null/1.0.0/download/darwin/arm64",
        origin.host
    ));
    assert_eq!(status, 404, "{body}");
    assert_eq!(
        body["errors"][0],
        format!(
            "1.0.0 for darwin_arm64 of {}/hashicorp/null is not cached here, and {} is sealed: the cache answers only what it holds",
            origin.host, origin.host
        )
    );
    let (status, body) =
        rig.get("/v1/mirror/origin-sealed.example.test/hashicorp/other/index.json");
    assert_eq!(status, 404, "{body}");
    assert_eq!(
        log::requests(&origin.server.server_log()).len(),
        before,
        "a sealed upstream is never asked"
    );
}

/// An origin whose API needs a token: without credentials the cache is
/// refused (502 naming the 401); with `--credentials-env` naming the
/// origin's own `TFREG_UPSTREAM_CREDENTIAL_<HOST>` variable of `tfreg serve`, it fills (the
/// token sent to the origin's API only).
#[test]
fn a_private_origin_is_reached_with_the_credentials_reference() {
    let tmp = tempfile::tempdir().unwrap();
    let origin = Origin::start_private(tmp.path(), "127.0.0.103", "origin-private.example.test");
    let origin_token = origin.server.token("read", None);
    let base = format!("/v1/mirror/{}/hashicorp/null", origin.host);
    const VARIABLE: &str = "TFREG_UPSTREAM_CREDENTIAL_ORIGIN__PRIVATE_EXAMPLE_TEST";
    let without = Rig::start(&tmp.path().join("without"), &origin, &[]);
    let (status, body) = without.get(&format!("{base}/index.json"));
    assert_eq!(status, 502, "{body}");
    let reason = body["errors"][0].as_str().unwrap();
    assert!(
        reason.starts_with("origin-private.example.test: ")
            && reason.contains("refused our credentials (401)"),
        "{reason}"
    );
    let with = Rig::start_with_env(
        &tmp.path().join("with"),
        &origin,
        &["--credentials-env", VARIABLE],
        &[(VARIABLE, Path::new(&origin_token))],
    );
    let (status, version) = with.get(&format!("{base}/1.0.0.json"));
    assert_eq!(status, 200, "{version}");
    let url = version["archives"]["linux_amd64"]["url"].as_str().unwrap();
    let (status, bytes) = with.download(url);
    assert_eq!(status, 200);
    assert!(bytes == origin.linux_zip);
    // The setting names the variable; the token is in no answer or log.
    let shown = with
        .server
        .tfreg(&with.admin, &["upstream", "show", &origin.host, "--json"]);
    let shown = String::from_utf8_lossy(&shown.stdout).into_owned();
    assert!(
        shown.contains(VARIABLE) && !shown.contains(&origin_token),
        "{shown}"
    );
    assert!(!with.server.server_log().contains(&origin_token));
}
