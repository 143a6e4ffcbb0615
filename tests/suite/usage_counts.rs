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
    let inline = server.server_log().contains("has no Extensions API");
    eprintln!(
        "FIGURE usage counts under cargo lambda watch written by: {}",
        if inline {
            "the handler (no Extensions API)"
        } else {
            "the internal extension"
        }
    );
}
