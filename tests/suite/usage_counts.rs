//! Download counts end to end (issue 38): a real `terraform init` against
//! `tfreg serve` (counted in memory, written every 5 s) and against the
//! Lambda functions under `cargo lambda watch` on the emulators (written
//! after each response by the read function's extension, or before it
//! where the runtime API has none): the counts converge, read from the
//! store itself, polled with a deadline (never a fixed sleep).

use std::time::{Duration, Instant};

use tfreg_model::usage::{ConsumerKind, Package, UsageReport};
use tfreg_store::ItemStore;
use tfreg_store::catalog::usage::report;

use crate::support::fixtures::*;
use crate::support::*;

fn packages(host: &str) -> (Package, Package) {
    (
        Package::Provider {
            hostname: host.into(),
            namespace: NS.into(),
            r#type: "null".into(),
        },
        Package::Module {
            hostname: host.into(),
            namespace: NS.into(),
            name: "greeting".into(),
            system: "null".into(),
        },
    )
}

fn downloads(r: &UsageReport, version: &str) -> u64 {
    r.versions
        .iter()
        .find(|v| v.version == version)
        .map_or(0, |v| v.downloads)
}

/// One init: the provider's 2.1.2 for this platform once, the module's
/// 1.1.0 (`~> 1.0`) and 1.0.0 (`//modules/sub`) once each, by the read
/// token; polled until the store shows them.
fn counted_after_one_init(server: &Server, store: &dyn ItemStore, dir: &std::path::Path) {
    let tools = Tools::get();
    let read = server.token("read", None);
    let tf = Terraform::new(
        tools.path("TFREG_TERRAFORM_NEW"),
        server,
        &credentials(&server.host, &read),
    );
    let work = dir.join("work-usage");
    root_config(&work, &server.host);
    init_and_apply(&tf, &work, "terraform init, counted");
    let (provider, module) = packages(&server.host);
    let rt = crate::login::runtime();
    let deadline = Instant::now() + Duration::from_secs(30);
    let (p, m) = loop {
        let p = rt.block_on(report(store, &provider, None, true)).unwrap();
        let m = rt.block_on(report(store, &module, None, true)).unwrap();
        if downloads(&p, "2.1.2") >= 1 && downloads(&m, "1.1.0") + downloads(&m, "1.0.0") >= 2 {
            break (p, m);
        }
        assert!(
            Instant::now() < deadline,
            "download counts did not converge: {p:?} {m:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(downloads(&p, "2.1.2"), 1, "{p:?}");
    assert_eq!(
        (downloads(&m, "1.1.0"), downloads(&m, "1.0.0")),
        (1, 1),
        "{m:?}"
    );
    let v = &p.versions[0];
    assert!(
        v.days[0]
            .platform
            .as_deref()
            .is_some_and(|p| p.contains('_')),
        "a provider download has its platform: {v:?}"
    );
    assert_eq!(v.consumers.len(), 1, "{v:?}");
    assert_eq!(v.consumers[0].consumer.kind, ConsumerKind::Token);
    assert!(
        v.consumers[0].consumer.label.starts_with("test-read ("),
        "{v:?}"
    );
}

#[test]
fn a_terraform_init_against_serve_is_counted() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let server = Server::start(&data, &["--private"]);
    let token = server.token("publish", None);
    publish_fixture(&server, &token, tmp.path());
    let store = tfreg_store::sqlite::SqliteStore::open(&data.join("registry.db")).unwrap();
    counted_after_one_init(&server, &store, tmp.path());
}

#[test]
fn a_terraform_init_against_the_lambda_functions_is_counted() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start_lambda(&tmp.path().join("lambda"));
    let token = server.token("publish", None);
    publish_fixture(&server, &token, tmp.path());
    let table = server
        .store_args
        .iter()
        .skip_while(|a| *a != "--table")
        .nth(1)
        .expect("the functions' table")
        .clone();
    let rt = crate::login::runtime();
    let registry = rt.block_on(tfreg_testkit::TestRegistry::aws_existing(&table));
    counted_after_one_init(&server, registry.registry.items.as_ref(), tmp.path());
    // Written by the extension, after each response: the functions found
    // the Extensions API (cargo lambda watch has one, as Lambda does).
    let log = server.server_log();
    assert!(
        !log.contains("has no Extensions API"),
        "the counts were written before the responses:\n{log}"
    );
}

/// The usage report at `path` once its version's 20 downloads are counted
/// by consumer and by day: on the Lambda functions each download's two
/// adds are written after its response, so a report read at once may
/// still miss some.
fn converged(server: &Server, admin: &str, path: &str) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let resp = server.get_as(admin, path);
        assert_eq!(resp.status(), 200, "the usage API answers an admin");
        let report: serde_json::Value = resp.json().unwrap();
        let version = &report["versions"][0];
        if version["downloads"].as_u64() >= Some(20)
            && version["days"][0]["downloads"].as_u64() >= Some(20)
        {
            return report;
        }
        assert!(
            Instant::now() < deadline,
            "counts did not converge: {report}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// 20 concurrent "inits" (a provider download and a module download each)
/// by three identities, counted exactly, as the admin API reports them;
/// a read token may not see them. Returns the admin token.
fn twenty_concurrent_inits_count_exactly(server: &Server) -> String {
    let tokens = [
        server.token("read", None),
        server.token("publish", None),
        server.token("admin", None),
    ];
    let provider = format!("/v1/providers/{NS}/null/2.1.2/download/linux/amd64");
    let module = format!("/v1/modules/{NS}/greeting/null/1.1.0/download");
    std::thread::scope(|scope| {
        for i in 0..20 {
            let (token, provider, module) = (&tokens[i % 3], &provider, &module);
            scope.spawn(move || {
                for path in [provider, module] {
                    let resp = server.get_as(token, path);
                    assert!(resp.status().is_success(), "{path}: {}", resp.status());
                }
            });
        }
    });
    let admin = tokens[2].clone();
    let path = format!("/v1/admin/usage/providers/{NS}/null?version=2.1.2");
    let report = converged(server, &admin, &path);
    let version = &report["versions"][0];
    assert_eq!(version["version"], "2.1.2", "{report}");
    assert_eq!(version["downloads"], 20, "exactly: {report}");
    let mut by_label: Vec<(String, u64)> = version["consumers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let label = c["consumer"]["label"].as_str().unwrap();
            let name = label.split(' ').next().unwrap().to_string();
            (name, c["downloads"].as_u64().unwrap())
        })
        .collect();
    by_label.sort();
    assert_eq!(
        by_label,
        [
            ("test-admin".to_string(), 6),
            ("test-publish".to_string(), 7),
            ("test-read".to_string(), 7),
        ],
        "{report}"
    );
    let module_path = format!("/v1/admin/usage/modules/{NS}/greeting/null?version=1.1.0");
    let module = converged(server, &admin, &module_path);
    assert_eq!(module["versions"][0]["downloads"], 20, "{module}");
    assert_eq!(
        module["versions"][0]["days"][0]["downloads"], 20,
        "{module}"
    );
    // A read token counts but cannot see who else did.
    let refused = server.get_as(&tokens[0], &path);
    assert_eq!(refused.status(), 403);
    let body = refused.text().unwrap();
    assert!(!body.contains("test-publish"), "{body}");
    admin
}

#[test]
fn concurrent_inits_by_three_identities_count_exactly_on_serve_and_survive_a_restart() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let server = Server::start(&data, &["--private"]);
    let token = server.token("publish", None);
    publish_fixture(&server, &token, tmp.path());
    let admin = twenty_concurrent_inits_count_exactly(&server);
    let listen = server.host.clone();
    // A graceful stop writes what is still tallied; the next start reads it.
    drop(server);
    let server = Server::start_at(&data, &listen, &["--private"]);
    let path = format!("/v1/admin/usage/providers/{NS}/null?version=2.1.2");
    let report: serde_json::Value = server.get_as(&admin, &path).json().unwrap();
    assert_eq!(
        report["versions"][0]["downloads"], 20,
        "after a restart: {report}"
    );
}

#[test]
fn concurrent_inits_by_three_identities_count_exactly_on_the_lambda_functions() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start_lambda(&tmp.path().join("lambda"));
    let token = server.token("publish", None);
    publish_fixture(&server, &token, tmp.path());
    twenty_concurrent_inits_count_exactly(&server);
}

/// `tfreg serve --no-download-counts`: downloads answered, none counted
/// (a graceful stop writes whatever is tallied, so none was).
#[test]
fn serve_without_download_counts_counts_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let server = Server::start(&data, &["--private", "--no-download-counts"]);
    let token = server.token("publish", None);
    publish_fixture(&server, &token, tmp.path());
    let read = server.token("read", None);
    for path in [
        format!("/v1/providers/{NS}/null/2.1.2/download/linux/amd64"),
        format!("/v1/modules/{NS}/greeting/null/1.1.0/download"),
    ] {
        let resp = server.get_as(&read, &path);
        assert!(resp.status().is_success(), "{path}: {}", resp.status());
    }
    let (provider, module) = packages(&server.host);
    drop(server);
    let store = tfreg_store::sqlite::SqliteStore::open(&data.join("registry.db")).unwrap();
    let rt = crate::login::runtime();
    for package in [provider, module] {
        let r = rt.block_on(report(&store, &package, None, true)).unwrap();
        assert!(r.versions.is_empty(), "counted: {r:?}");
    }
}
