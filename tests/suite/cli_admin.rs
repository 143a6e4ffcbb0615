//! The admin commands of the real `tfreg` CLI (`token`, `key`, `deprecate`,
//! `yank`, `delete`, `audit`), against a running `tfreg serve`, both ways:
//! in-process on its data directory (the operator) and through its admin API
//! with an admin token. Both leave the same state and the same audit trail.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::fixtures::NS;
use crate::support::tools::tfreg_bin;
use crate::support::*;

/// `tfreg ARGS --data-dir DIR`.
fn local(data: &Path, args: &[&str]) -> Output {
    Command::new(tfreg_bin())
        .args(args)
        .arg("--data-dir")
        .arg(data)
        .output()
        .unwrap()
}

/// `GET /v1/providers/{address}/versions` with `token`.
fn versions(server: &Server, address: &str, token: &str) -> reqwest::blocking::Response {
    server
        .http
        .get(server.url(&format!("/v1/providers/{address}/versions")))
        .bearer_auth(token)
        .send()
        .unwrap()
}

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

#[test]
fn admin_commands_work_on_the_data_dir_and_through_the_api() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let server = Server::start(&data, &["--private"]);

    // The first admin token, made on the data directory (the bootstrap).
    let made = ok(
        local(
            &data,
            &["token", "create", "--name", "boot", "--scope", "admin"],
        ),
        "token create on the data dir",
    );
    let admin = made.lines().next().unwrap().trim().to_string();
    assert!(admin.starts_with("tfreg_"), "{made}");

    // Through the API with it: a namespace-limited publish token that expires.
    let out = server.tfreg(
        &admin,
        &[
            "token",
            "create",
            "--name",
            "ci",
            "--scope",
            "publish",
            "--namespace",
            NS,
            "--expires-in",
            "30d",
        ],
    );
    let ci = ok(out, "token create through the API")
        .lines()
        .next()
        .unwrap()
        .trim()
        .to_string();
    let listed = json(&ok(
        local(&data, &["token", "list", "--json"]),
        "token list on the data dir",
    ));
    let tokens = listed["tokens"].as_array().unwrap();
    let ci_entry = tokens
        .iter()
        .find(|t| t["name"] == "ci")
        .expect("ci listed");
    assert_eq!(ci_entry["scopes"], serde_json::json!(["publish"]));
    assert_eq!(ci_entry["namespaces"], serde_json::json!([NS]));
    assert_eq!(
        ci_entry["grants"],
        serde_json::json!([{"scope": "publish", "namespaces": [NS]}])
    );
    assert!(ci_entry["expires_at"].as_u64().unwrap() > 29 * 86_400);
    assert!(
        !listed.to_string().contains(&ci) && !listed.to_string().contains(&admin),
        "no secret is ever listed"
    );
    // Several grants at once: read everywhere, publish to NS only.
    let out = server.tfreg(
        &admin,
        &[
            "token",
            "create",
            "--name",
            "alice",
            "--grant",
            "read",
            "--grant",
            &format!("publish:{NS}"),
        ],
    );
    let made = ok(out, "token create --grant --grant");
    assert!(
        made.contains(&format!("grants read:*, publish:{NS}")),
        "{made}"
    );
    let out = server.tfreg(
        &admin,
        &[
            "token", "create", "--name", "x", "--scope", "read", "--grant", "read",
        ],
    );
    let said = fails(out, "--scope with --grant");
    assert!(said.contains("cannot be used with"), "{said}");
    let table = ok(
        server.tfreg(&admin, &["token", "list"]),
        "token list (table)",
    );
    assert!(table.contains("ci") && table.contains(NS), "{table}");
    assert!(table.contains("GRANTS"), "{table}");
    let alice = table.lines().find(|l| l.contains("alice")).expect(&table);
    assert!(alice.contains(&format!("read:*, publish:{NS}")), "{table}");

    // A publish token may not administer: a clear refusal, exit 1.
    let out = fails(
        server.tfreg(&ci, &["token", "list"]),
        "token list with a publish token",
    );
    assert!(out.contains("403") && out.contains("admin"), "{out}");

    // Publish with the ci token, then manage the release both ways.
    let gpg = Gpg::new("rsa2048");
    let dist = tmp.path().join("dist");
    provider_dist(&dist, "null", "1.0.0", &["linux_amd64"], &gpg);
    ok(server.publish_provider(&ci, &dist, NS, &[]), "publish");
    let address = format!("{NS}/null");
    ok(
        local(
            &data,
            &[
                "deprecate",
                "provider",
                &address,
                "1.0.0",
                "--message",
                "use 2.x",
            ],
        ),
        "deprecate on the data dir",
    );
    let listed = versions(&server, &address, &ci).json::<Value>().unwrap();
    assert_eq!(
        listed["warnings"],
        serde_json::json!(["version 1.0.0 is deprecated: use 2.x"])
    );
    ok(
        server.tfreg(&admin, &["yank", "provider", &address, "1.0.0"]),
        "yank through the API",
    );
    let status = versions(&server, &address, &ci).status();
    assert_eq!(status, 404, "every version yanked: nothing to list");
    ok(
        local(&data, &["yank", "--undo", "provider", &address, "1.0.0"]),
        "unyank on the data dir",
    );
    let out = fails(
        local(
            &data,
            &["deprecate", "module", &address, "1.0.0", "--message", "x"],
        ),
        "a provider address given as a module",
    );
    assert!(out.contains("NAMESPACE/NAME/SYSTEM"), "{out}");

    // Keys: add on the data dir, list through the API, remove.
    let key = dist.join("key.asc");
    let added = json(&ok(
        local(&data, &["key", "add", NS, key.to_str().unwrap(), "--json"]),
        "key add",
    ));
    let key_id = added["keys"][0]["key_id"].as_str().unwrap().to_string();
    let listed = ok(server.tfreg(&admin, &["key", "list", NS]), "key list");
    assert!(listed.contains(&key_id), "{listed}");
    ok(
        server.tfreg(&admin, &["key", "remove", NS, &key_id]),
        "key remove",
    );

    // Delete through the API; the archives go with it.
    let archives = |d: &Path| walkdir(&d.join("blobs").join("archives"));
    let before = archives(&data);
    ok(
        server.tfreg(&admin, &["delete", "provider", &address, "1.0.0"]),
        "delete",
    );
    let after = archives(&data);
    assert!(after < before, "archive files removed: {before} -> {after}");
    let out = fails(
        server.tfreg(&admin, &["delete", "provider", &address, "1.0.0"]),
        "delete twice",
    );
    assert!(out.contains("404"), "{out}");

    // Revoke the ci token by id; it stops working at once here (this server
    // revoked it) — and the audit trail has every change, by whom.
    let id = ci_entry["id"].as_str().unwrap();
    ok(server.tfreg(&admin, &["token", "revoke", id]), "revoke");
    assert_eq!(versions(&server, &address, &ci).status(), 401);
    let audit = json(&ok(
        local(&data, &["audit", "--json", "--limit", "100"]),
        "audit",
    ));
    let events: Vec<(String, String)> = audit["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["action"].as_str().unwrap().to_string(),
                e["actor"]["kind"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    for (action, by) in [
        ("token.create", "operator"),
        ("token.create", "token"),
        ("publish", "token"),
        ("release.deprecate", "operator"),
        ("release.yank", "token"),
        ("release.unyank", "operator"),
        ("key.add", "operator"),
        ("key.remove", "token"),
        ("release.delete", "token"),
        ("token.revoke", "token"),
    ] {
        assert!(
            events.iter().any(|(a, k)| a == action && k == by),
            "{action} by {by} in {events:?}"
        );
    }
    let text = audit.to_string();
    assert!(
        !text.contains(&admin) && !text.contains(&ci),
        "no secret in the audit trail"
    );
    let lines = server.server_log();
    assert!(
        !lines.contains(&admin) && !lines.contains(&ci),
        "no secret in the server's log"
    );
}

/// How many files are under `dir`.
fn walkdir(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| {
            let path = e.path();
            if path.is_dir() { walkdir(&path) } else { 1 }
        })
        .sum()
}

/// `tfreg serve` on `dir` with `env` set (TFREG_LOG and RUST_LOG removed
/// first), its stderr in `dir/serve.log`; returns once it says it serves.
fn serve_logging(dir: &Path, env: &[(&str, &str)]) -> (std::process::Child, String, PathBuf) {
    let listen = format!("127.0.0.1:{}", crate::support::server::free_port());
    let log = dir.join("serve.log");
    let mut command = Command::new(tfreg_bin());
    command
        .args(["serve", "--data-dir"])
        .arg(dir.join("data"))
        .args(["--listen", &listen])
        .env_remove("TFREG_LOG")
        .env_remove("RUST_LOG")
        .envs(env.iter().copied())
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap());
    let child = command.spawn().unwrap();
    wait_for_log(&log, "tfreg is serving", Duration::from_secs(30));
    (child, listen, log)
}

/// Polls `log` until it contains `text`; panics after `limit`.
fn wait_for_log(log: &Path, text: &str, limit: Duration) {
    let deadline = Instant::now() + limit;
    while !std::fs::read_to_string(log)
        .unwrap_or_default()
        .contains(text)
    {
        assert!(
            Instant::now() < deadline,
            "no {text:?} in {}",
            log.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `curl` for `count` discovery requests to the server at `listen`, over
/// one connection.
fn discover(dir: &Path, listen: &str, count: usize) {
    let mut curl = Command::new("curl");
    curl.args(["-sS", "--fail", "--cacert"])
        .arg(dir.join("data/tls/ca.pem"));
    for _ in 0..count {
        curl.args(["-o", "/dev/null"])
            .arg(format!("https://{listen}/.well-known/terraform.json"));
    }
    let out = curl.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn stop(child: &mut std::process::Child) -> std::process::ExitStatus {
    // SAFETY: kill(2) on the child this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    child.wait().unwrap()
}

/// `TFREG_LOG=off`, or `RUST_LOG=off` alone, silences every log line of
/// `tfreg serve` (its start, its warnings, one line per request); what it
/// prints for the user to paste stays.
#[test]
fn log_off_silences_the_server() {
    for var in ["TFREG_LOG", "RUST_LOG"] {
        let tmp = tempfile::tempdir().unwrap();
        let (mut child, listen, log) = serve_logging(tmp.path(), &[(var, "off")]);
        discover(tmp.path(), &listen, 1); // would log a line
        stop(&mut child);
        let text = std::fs::read_to_string(&log).unwrap();
        for line in text.lines() {
            assert!(
                !(line.contains(" INFO ") || line.contains(" WARN ") || line.contains("request")),
                "{var}=off: a log line: {line}"
            );
        }
        assert!(text.contains("Paste into the shell"), "the welcome stays");
    }
}

/// The server's request lines are written by a logging thread, off the
/// requests' threads, gathered for a few milliseconds, yet each appears
/// while the server runs (an idle server's line is not held back for more),
/// and a burst of 300 requests gives 300 lines, the last ones still there
/// after SIGTERM.
#[test]
fn the_server_logs_every_request_at_once() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut child, listen, log) = serve_logging(tmp.path(), &[]);
    discover(tmp.path(), &listen, 1);
    wait_for_log(&log, "request", Duration::from_secs(10));
    let before = std::fs::read(&log).unwrap().len();
    discover(tmp.path(), &listen, 300);
    assert!(stop(&mut child).success());
    let text = String::from_utf8(std::fs::read(&log).unwrap()[before..].to_vec()).unwrap();
    let lines = text
        .lines()
        .filter(|l| l.contains("request") && l.contains("terraform.json"))
        .count();
    assert_eq!(lines, 300, "one line per request:\n{text}");
}

/// `tfreg key add` refuses a revoked or an expired key, saying so, and adds
/// a key Terraform ≤ 1.5 cannot read with a warning on stderr.
#[test]
fn key_add_refuses_keys_that_cannot_sign_and_warns_of_modern_ones() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let _server = Server::start(&data, &[]);
    let fixtures =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("shared/verify/tests/fixtures/signing");
    let key = |name: &str| {
        fixtures
            .join(format!("{name}.pub.asc"))
            .to_str()
            .unwrap()
            .to_string()
    };
    for name in ["revoked", "expired"] {
        let out = fails(local(&data, &["key", "add", NS, &key(name)]), name);
        assert!(out.contains("400") && out.contains(name), "{out}");
    }
    let out = local(&data, &["key", "add", NS, &key("ed25519")]);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let shown = ok(out, "key add ed25519");
    assert!(
        stderr.contains("warning: ") && stderr.contains("Terraform 1.5"),
        "{stderr}"
    );
    assert!(shown.contains("EdDSA"), "{shown}");
}

/// `tfreg token create --expires-in 2s` makes a token that lives at least
/// 2 s (the expiry is rounded up to the next whole second).
#[test]
fn token_expiry_is_rounded_up() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let _server = Server::start(&data, &[]);
    // Half-way through a second: a whole-second clock cut short would give
    // the token 1.5 s.
    let now = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
    };
    let frac = now().subsec_millis();
    std::thread::sleep(std::time::Duration::from_millis(u64::from(
        (1500 - frac) % 1000,
    )));
    let before = now().as_secs_f64();
    ok(
        local(
            &data,
            &[
                "token",
                "create",
                "--name",
                "short",
                "--scope",
                "read",
                "--expires-in",
                "2s",
            ],
        ),
        "token create --expires-in 2s",
    );
    let listed = json(&ok(local(&data, &["token", "list", "--json"]), "list"));
    let short = listed["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "short")
        .expect("listed")
        .clone();
    let expires = short["expires_at"].as_u64().unwrap() as f64;
    assert!(
        expires >= before + 2.0,
        "a 2 s token expires at {expires}, made after {before}"
    );
}
