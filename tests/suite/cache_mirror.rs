//! The pull-through cache through the network mirror, on `tfreg serve`
//! (issue 22, plan step 1): the origin is a second `tfreg serve` with its
//! own data directory and CA, publishing a real gpg-signed release, known
//! as `registry.example.test:PORT` (no DNS answers that name: the upstream's
//! admin-only `connect.to` and CA reach it). What a token made with
//! `--fill` asks is fetched, verified and stored byte for byte; a token
//! without it gets only what is cached; once the origin is gone, what is
//! cached still installs.

use std::path::Path;

use serde_json::Value;

use crate::support::command::ok;
use crate::support::dist::provider_dist;
use crate::support::gpg::Gpg;
use crate::support::server::{Server, free_port};

/// An origin registry publishing hashicorp/null 1.0.0 for two platforms,
/// reachable as `registry.example.test:PORT` at 127.0.0.78:PORT; the
/// bytes of its linux_amd64 zip.
pub(crate) struct Origin {
    pub server: Server,
    pub host: String,
    pub listen: String,
    pub linux_zip: Vec<u8>,
}

impl Origin {
    pub fn start(dir: &Path) -> Origin {
        let port = free_port();
        let listen = format!("127.0.0.78:{port}");
        let host = format!("registry.example.test:{port}");
        let data = dir.join("origin");
        let gpg = Gpg::new("rsa2048");
        let dist = dir.join("origin-dist");
        let zips = provider_dist(
            &dist,
            "null",
            "1.0.0",
            &["linux_amd64", "darwin_arm64"],
            &gpg,
        );
        // Published while it answers to its address (the CLI resolves no
        // test name), then served under the foreign name: URLs are made
        // per request from the hostname, the data does not change.
        {
            let first = Server::start_at(&data, &listen, &[]);
            let token = first.token("publish", None);
            ok(
                first.publish_provider(&token, &dist, "hashicorp", &[]),
                "publish at the origin",
            );
        }
        let server = Server::start_named(&data, &listen, &host, &[]);
        Origin {
            server,
            host,
            listen,
            linux_zip: std::fs::read(&zips[0]).unwrap(),
        }
    }

    /// `tfreg upstream set` arguments reaching it.
    pub fn upstream_args(&self) -> Vec<String> {
        vec![
            "upstream".into(),
            "set".into(),
            self.host.clone(),
            "--providers".into(),
            "--connect-to".into(),
            format!("registry.example.test={}", self.listen),
            "--ca-file".into(),
            self.server.ca.display().to_string(),
        ]
    }
}

fn get(server: &Server, path: &str, token: &str) -> (u16, Value) {
    let resp = server
        .http
        .get(server.url(path))
        .bearer_auth(token)
        .send()
        .unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().unwrap_or(Value::Null))
}

/// GET an archive URL the way Terraform does: no token, redirects followed.
fn download(server: &Server, url: &str) -> (u16, Vec<u8>) {
    let mut url = url.to_string();
    for _ in 0..10 {
        let resp = server.http.get(&url).send().unwrap();
        if resp.status().is_redirection() {
            url = resp.headers()["location"].to_str().unwrap().to_string();
            continue;
        }
        return (resp.status().as_u16(), resp.bytes().unwrap().to_vec());
    }
    panic!("more than 10 redirects")
}

#[test]
fn the_mirror_fills_from_the_origin_verified_and_serves_when_it_is_gone() {
    let tmp = tempfile::tempdir().unwrap();
    let origin = Origin::start(tmp.path());
    let server = Server::start(&tmp.path().join("data"), &["--private"]);
    let admin = server.token("admin", None);
    let args = origin.upstream_args();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    ok(server.tfreg(&admin, &args), "upstream set");
    let fill = {
        let out = server.tfreg(
            &admin,
            &[
                "token", "create", "--name", "ci", "--scope", "read", "--fill",
            ],
        );
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    };
    let reader = server.token("read", None);
    let base = format!("/v1/mirror/{}/hashicorp/null", origin.host);

    // Nothing cached: a reader may not make the registry fetch.
    let (status, body) = get(&server, &format!("{base}/index.json"), &reader);
    assert_eq!(status, 404, "{body}");
    assert!(
        body["errors"][0].as_str().unwrap().contains("--fill"),
        "{body}"
    );

    // A fill token: fetched from the origin, verified.
    let (status, index) = get(&server, &format!("{base}/index.json"), &fill);
    assert_eq!(status, 200, "{index}");
    assert_eq!(index, serde_json::json!({"versions": {"1.0.0": {}}}));
    let (status, version) = get(&server, &format!("{base}/1.0.0.json"), &fill);
    assert_eq!(status, 200, "{version}");
    let archives = version["archives"].as_object().unwrap();
    assert_eq!(
        archives.keys().collect::<Vec<_>>(),
        ["darwin_arm64", "linux_amd64"]
    );
    let sha = tfreg_model::hashing::sha256_hex(&origin.linux_zip);
    assert_eq!(
        archives["linux_amd64"]["hashes"],
        serde_json::json!([format!("zh:{sha}")]),
        "the zh: hash from the origin's signed SHA256SUMS"
    );
    // The archive: fetched on first download, the origin's bytes exactly.
    let url = archives["linux_amd64"]["url"].as_str().unwrap();
    assert!(
        url.contains("/v1/blobs/cache/registry.example.test_"),
        "{url}"
    );
    let (status, bytes) = download(&server, url);
    assert_eq!(status, 200);
    assert!(bytes == origin.linux_zip, "byte for byte");
    let (_, version) = get(&server, &format!("{base}/1.0.0.json"), &fill);
    let hashes = version["archives"]["linux_amd64"]["hashes"]
        .as_array()
        .unwrap();
    assert_eq!(hashes.len(), 2, "h1: once stored: {version}");
    assert!(hashes[0].as_str().unwrap().starts_with("h1:"), "{version}");

    // Cached now: the reader gets what is there, only the stored archive.
    let (status, _) = get(&server, &format!("{base}/index.json"), &reader);
    assert_eq!(status, 200);
    let (status, version) = get(&server, &format!("{base}/1.0.0.json"), &reader);
    assert_eq!(status, 200, "{version}");
    assert_eq!(
        version["archives"]
            .as_object()
            .unwrap()
            .keys()
            .collect::<Vec<_>>(),
        ["linux_amd64"]
    );

    // The origin gone: the cached archive still downloads.
    drop(origin.server);
    let (status, version) = get(&server, &format!("{base}/1.0.0.json"), &fill);
    assert_eq!(status, 200, "{version}");
    let url = version["archives"]["linux_amd64"]["url"].as_str().unwrap();
    let (status, bytes) = download(&server, url);
    assert_eq!(status, 200);
    assert!(bytes == origin.linux_zip);
    // Not cached and the origin down: said, not a hang.
    let (status, body) = get(
        &server,
        "/v1/mirror/registry.example.test:1/hashicorp/null/index.json",
        &fill,
    );
    assert_eq!(status, 404, "an unconfigured host: {body}");
}
