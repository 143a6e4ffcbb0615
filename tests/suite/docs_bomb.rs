//! Found from outside (issue 35): reading a module's docs cost 5.1 s of CPU
//! and +72 MB for an 8.9 MB module expanding to 479 MB of `.tf` (the same
//! bytes as `.txt`: 0.5 s). What docs extraction reads is bounded (bytes,
//! files, time); past a bound the version is published without its
//! interface, and the publish answer, the audit trail and the module's page
//! say so. In-process on both backends; the real CLI against `tfreg serve`
//! with the server's CPU time and peak memory measured.

use http::{Method, StatusCode};
use serde_json::Value;
use tfreg_model::address::ModuleName;
use tfreg_model::token::Scope;
use tfreg_model::version::Version;
use tfreg_testkit::TestRegistry;

use crate::access::send;
use crate::backend_contract::{contract, publish_module};

/// What the publish answer warns when the bytes bound is passed.
const BYTES_WARNING: &str = "the module's page shows no inputs or outputs: its .tf files pass 2097152 bytes in all; the inputs, outputs and resources are not shown";

/// `examples/eN/main.tf` for N in 0..`files`, each `size` bytes of
/// variable blocks (they compress ~200:1), a root `main.tf` and a README.
pub(crate) fn bomb_files(files: usize, size: usize) -> Vec<(String, String)> {
    let block = "variable \"v\" {\n  type    = string\n  default = \"x\"\n}\n";
    let body = block.repeat(size / block.len());
    let mut out: Vec<(String, String)> = (0..files)
        .map(|i| (format!("examples/e{i:04}/main.tf"), body.clone()))
        .collect();
    out.push(("main.tf".into(), "variable \"region\" {}\n".into()));
    out.push(("README.md".into(), "# Bomb\n\nLooks harmless.\n".into()));
    out
}

fn archive_of(files: &[(String, String)]) -> Vec<u8> {
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, c)| (p.as_str(), c.as_str()))
        .collect();
    tfreg_testkit::module_archive(&refs)
}

async fn a_docs_bomb_is_published_without_its_interface_and_says_so(r: TestRegistry) {
    let token = r.token(Scope::Publish, None).await;
    // 40 files of 500 KB: 20 MB of .tf, ten times the bound.
    let bomb = archive_of(&bomb_files(40, 500 * 1024));
    assert!(bomb.len() < 1024 * 1024, "{} bytes", bomb.len());
    let resp = publish_module(&r, &token, "acme/bomb/aws", "1.0.0", &bomb).await;
    resp.expect(StatusCode::CREATED, "the bomb is published");
    assert_eq!(
        resp.json()["warnings"],
        serde_json::json!([BYTES_WARNING]),
        "{}",
        resp.text()
    );
    // The page: its README, no inputs, and the note saying why.
    let module = ModuleName::parse("acme", "bomb", "aws").unwrap();
    let release = tfreg_store::catalog::module_release(
        r.registry.items.as_ref(),
        &module,
        &Version::parse("1.0.0").unwrap(),
    )
    .await
    .unwrap()
    .unwrap();
    let docs = tfreg_store::catalog::module_docs(r.registry.items.as_ref(), &module, &release)
        .await
        .unwrap()
        .unwrap();
    assert!(docs.root.inputs.is_empty(), "{:?}", docs.root.inputs);
    assert!(docs.examples.is_empty());
    assert_eq!(docs.description.as_deref(), Some("Looks harmless."));
    assert_eq!(
        docs.notes,
        [
            "The module's docs were not read in full: its .tf files pass 2097152 bytes in all; the inputs, outputs and resources are not shown."
        ]
    );
    // The audit trail says so too.
    let admin = r.token(Scope::Admin, None).await;
    let audit = send(&r, Method::GET, "/v1/admin/audit", &admin, Value::Null).await;
    audit.expect(StatusCode::OK, "audit");
    assert!(
        audit
            .text()
            .contains(&format!("published; warning: {BYTES_WARNING}")),
        "{}",
        audit.text()
    );
    // A module within the bounds keeps its interface, with no warning.
    let fine = archive_of(&bomb_files(3, 4 * 1024));
    let resp = publish_module(&r, &token, "acme/fine/aws", "1.0.0", &fine).await;
    resp.expect(StatusCode::CREATED, "a module within the bounds");
    assert_eq!(resp.json()["warnings"], serde_json::json!([]));
}

contract!(a_docs_bomb_is_published_without_its_interface_and_says_so);

/// The CPU time (user + system, in seconds) a process has used so far.
fn cpu_secs(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // After the command name (in parentheses): utime and stime are fields 14, 15.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    ticks / 100.0
}

/// The real `tfreg publish module` of a docs bomb against `tfreg serve`:
/// published with the CLI's warning and the server's log line, and what it
/// cost the server (CPU time, peak memory) measured.
#[test]
fn the_cli_publishes_a_docs_bomb_with_a_warning_and_the_server_pays_little() {
    let tmp = tempfile::tempdir().unwrap();
    let server = crate::support::Server::start(&tmp.path().join("data"), &[]);
    let token = server.token("publish", None);
    // 120 files of 500 KB: 60 MB of .tf.
    let src = tmp.path().join("bomb");
    for (path, content) in bomb_files(120, 500 * 1024) {
        let file = src.join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, content).unwrap();
    }
    let pid = server.pid();
    let (cpu_before, (_, rss_before)) = (cpu_secs(pid), crate::hardening::memory_kib(pid));
    let out = server.publish_module(&token, &src, "acme/bomb/aws", "1.0.0");
    let (cpu_after, (peak, _)) = (cpu_secs(pid), crate::hardening::memory_kib(pid));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("warning: {BYTES_WARNING}\n")),
        "{stderr}"
    );
    let log = server.server_log();
    assert!(
        log.contains("module docs not read: its .tf files pass 2097152 bytes in all"),
        "{log}"
    );
    eprintln!(
        "FIGURE a 60 MB-of-.tf module published: the server used {:.2} s of CPU, peak RSS {} KiB over {} KiB before",
        cpu_after - cpu_before,
        peak.saturating_sub(rss_before),
        rss_before
    );
}
