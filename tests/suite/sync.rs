//! `tfreg sync --from HOST` (issue 39), on both backends, from a real
//! origin: a second `tfreg serve` with its own CA, publishing gpg-signed
//! releases of hashicorp/null and a module. Synced versions are this
//! registry's own (listed under its hostname, with the origin's bytes and
//! signature), a rerun fetches only what is new, a tampered archive is
//! refused by name with nothing stored, and the origin's death changes
//! nothing. The CLI itself, killed with SIGKILL at growing moments and run
//! again, serves only whole versions and finishes (both backends).

use http::StatusCode;
use serde_json::Value;
use tfreg_cache::sync::{Plan, Stores, SyncOutcome, Syncer, Wanted};
use tfreg_model::constraint::Constraints;
use tfreg_model::upstream::{
    Connect, Net, OperatorPolicy, Serves, UpstreamHost, UpstreamRecord, UpstreamSettings,
};
use tfreg_testkit::TestRegistry;

use crate::cache_mirror::Origin;
use crate::support::gpg::Gpg;

fn now() -> u64 {
    tfreg_model::unix_now()
}

/// `f`, which blocks (the origin's `tfreg serve` and its blocking HTTP
/// client), on this runtime's thread.
fn blocking<T>(f: impl FnOnce() -> T) -> T {
    tokio::task::block_in_place(f)
}

/// Each backend's origin on its own loopback address (the two run at once).
fn origin_ip(r: &TestRegistry, base: u8) -> String {
    format!("127.0.0.{}", base + u8::from(r.name == "aws"))
}

/// The origin as `tfreg sync` reaches it: its name at its address, its CA.
fn origin_record(origin: &Origin) -> UpstreamRecord {
    let host = UpstreamHost::parse(&origin.host).unwrap();
    let mut s = UpstreamSettings::new(Serves {
        providers: true,
        modules: true,
    });
    s.module_hosts.push(host.clone());
    let mut connect = Connect::default();
    connect
        .to
        .insert(host.clone(), vec![origin.listen.parse().unwrap()]);
    connect.ca_pem = Some(std::fs::read_to_string(&origin.server.ca).unwrap());
    s.connect = Some(connect);
    UpstreamRecord {
        hostname: host,
        settings: s,
        created_at: 0,
        created_by: "test".into(),
        updated_at: 0,
        updated_by: "test".into(),
    }
}

/// A syncer from `origin` into `r`, through a scratch registry of its own.
async fn syncer(r: &TestRegistry, origin: &Origin) -> (Syncer, TestRegistry, tempfile::TempDir) {
    syncer_of(r, origin_record(origin)).await
}

/// [`syncer`] from the origin `record` says.
async fn syncer_of(
    r: &TestRegistry,
    record: UpstreamRecord,
) -> (Syncer, TestRegistry, tempfile::TempDir) {
    let scratch = TestRegistry::embedded().await;
    let temp = tempfile::tempdir().unwrap();
    let policy = OperatorPolicy {
        connect_allow: vec![Net::parse(crate::cache_mirror::LOOPBACK).unwrap()],
        credentials_dir: None,
    };
    let syncer = Syncer::new(
        Stores {
            items: r.registry.items.clone(),
            blobs: r.registry.blobs.clone(),
        },
        Stores {
            items: scratch.registry.items.clone(),
            blobs: scratch.registry.blobs.clone(),
        },
        temp.path().to_path_buf(),
        record,
        policy,
        r.registry.config.max_archive_bytes,
    )
    .await
    .unwrap();
    (syncer, scratch, temp)
}

fn plan(names: &[&str], constraint: Option<&str>) -> Plan {
    Plan {
        wanted: names.iter().map(|n| Wanted::parse(n).unwrap()).collect(),
        constraint: constraint.map(|c| Constraints::parse(c).unwrap()),
        dry_run: false,
    }
}

/// `(version, outcome)` of each line, for one name.
fn outcomes(report: &[tfreg_cache::sync::Synced], name: &str) -> Vec<(String, SyncOutcome)> {
    report
        .iter()
        .filter(|s| s.name == name)
        .map(|s| (s.version.clone(), s.outcome.clone()))
        .collect()
}

/// The provider versions `r` lists as its own.
async fn own_versions(r: &TestRegistry) -> Vec<String> {
    let resp = r.get("/v1/providers/hashicorp/null/versions").await;
    if resp.status == StatusCode::NOT_FOUND {
        return vec![];
    }
    assert_eq!(resp.status, StatusCode::OK, "{}", resp.text());
    let mut v: Vec<String> = resp.json()["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["version"].as_str().unwrap().to_string())
        .collect();
    v.sort();
    v
}

/// How many times the origin was asked for `version`'s downloads.
fn downloads_asked(origin: &Origin, version: &str) -> usize {
    blocking(|| origin.server.server_log())
        .lines()
        .filter(|l| l.contains(&format!("/{version}/download/")))
        .count()
}

/// Every provider version `r` lists is whole: each platform's archive is
/// served, its bytes are the SHA256SUMS line the answer names, and the
/// signature verifies with the key the answer carries (gpg).
async fn every_listed_version_is_whole(r: &TestRegistry) -> usize {
    let versions = own_versions(r).await;
    for v in &versions {
        for platform in ["linux_amd64", "darwin_arm64"] {
            let (os, arch) = platform.split_once('_').unwrap();
            let path = format!("/v1/providers/hashicorp/null/{v}/download/{os}/{arch}");
            let resp = r.get(&path).await;
            assert_eq!(resp.status, StatusCode::OK, "{}: {}", r.name, resp.text());
            let answer: Value = resp.json();
            let zip = r.download(answer["download_url"].as_str().unwrap()).await;
            assert_eq!(zip.status, StatusCode::OK, "{}", r.name);
            let sha = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&zip.body));
            assert_eq!(sha, answer["shasum"].as_str().unwrap(), "{}", r.name);
            let sums = r.download(answer["shasums_url"].as_str().unwrap()).await;
            let sig = r
                .download(answer["shasums_signature_url"].as_str().unwrap())
                .await;
            let line = format!("{sha}  {}", answer["filename"].as_str().unwrap());
            assert!(sums.text().lines().any(|l| l == line), "{line}");
            let armor = answer["signing_keys"]["gpg_public_keys"][0]["ascii_armor"]
                .as_str()
                .unwrap();
            let key = tfreg_verify::signing::PublicKey::parse(armor).unwrap();
            assert!(
                tfreg_verify::release_check::select_key(&[key], &sums.body, &sig.body, now())
                    .is_some(),
                "{}: {v}'s signature does not verify with the key served",
                r.name
            );
        }
    }
    versions.len()
}

async fn a_sync_makes_the_origins_versions_this_registrys_own(r: TestRegistry) {
    let tmp = tempfile::tempdir().unwrap();
    let gpg = Gpg::new("rsa2048");
    let name = format!("sync-origin-{}.example.test", r.name);
    let origin = blocking(|| {
        Origin::start_with(
            tmp.path(),
            &origin_ip(&r, 170),
            &name,
            &[("1.0.0", &gpg), ("1.1.0", &gpg)],
        )
    });
    let names = ["hashicorp/null", "hashicorp/greeting/null"];
    let (sync, _scratch, _temp) = syncer(&r, &origin).await;
    let report = sync.run(&plan(&names, Some("< 1.1")), &|_| {}).await;
    assert_eq!(
        outcomes(&report, "hashicorp/null"),
        [("1.0.0".to_string(), SyncOutcome::Stored)],
        "{}: {report:?}",
        r.name
    );
    assert_eq!(
        outcomes(&report, "hashicorp/greeting/null"),
        [("1.0.0".to_string(), SyncOutcome::Stored)],
        "{}: {report:?}",
        r.name
    );
    assert_eq!(own_versions(&r).await, ["1.0.0"], "{}", r.name);
    // The origin's bytes, under this registry's own hostname.
    let answer: Value = r
        .get("/v1/providers/hashicorp/null/1.0.0/download/linux/amd64")
        .await
        .json();
    let zip = r
        .download(answer["download_url"].as_str().unwrap())
        .await
        .body;
    assert_eq!(zip, origin.linux_zip, "{}", r.name);
    let module = r
        .get("/v1/modules/hashicorp/greeting/null/1.0.0/download")
        .await;
    assert_eq!(module.status, StatusCode::NO_CONTENT, "{}", module.text());
    let m = tfreg_model::address::ModuleName::parse("hashicorp", "greeting", "null").unwrap();
    let items = r.registry.items.as_ref();
    let release = &tfreg_store::catalog::module_releases(items, &m)
        .await
        .unwrap()[0];
    let docs = tfreg_store::catalog::module_docs(items, &m, release)
        .await
        .unwrap()
        .expect("the synced module's docs");
    assert_eq!(docs.root.inputs[0].name, "name", "{}: {docs:?}", r.name);

    // Run again with no constraint: 1.0.0 is here, only 1.1.0 is fetched.
    let before = downloads_asked(&origin, "1.0.0");
    let report = sync.run(&plan(&names, None), &|_| {}).await;
    assert_eq!(
        outcomes(&report, "hashicorp/null"),
        [
            ("1.0.0".to_string(), SyncOutcome::Present),
            ("1.1.0".to_string(), SyncOutcome::Stored)
        ],
        "{}",
        r.name
    );
    assert_eq!(
        outcomes(&report, "hashicorp/greeting/null"),
        [("1.0.0".to_string(), SyncOutcome::Present)]
    );
    assert_eq!(
        downloads_asked(&origin, "1.0.0"),
        before,
        "1.0.0 fetched again"
    );
    assert!(downloads_asked(&origin, "1.1.0") > 0);

    // The origin gone, every version is still served, whole and verified.
    blocking(|| drop(origin));
    assert_eq!(every_listed_version_is_whole(&r).await, 2, "{}", r.name);
    assert!(crate::maintenance::all_verify(&r).await > 0, "{}", r.name);
    // One audit line per version stored.
    let events = tfreg_store::catalog::audit::recent(items, 50)
        .await
        .unwrap();
    let stored = events
        .iter()
        .filter(|e| e.action == "sync" && e.status == 201)
        .count();
    assert_eq!(stored, 3, "{}: {events:?}", r.name);
}

async fn a_tampered_archive_is_refused_by_name_and_nothing_is_stored(r: TestRegistry) {
    let tmp = tempfile::tempdir().unwrap();
    let name = format!("sync-tampered-{}.example.test", r.name);
    let origin = blocking(|| Origin::start(tmp.path(), &origin_ip(&r, 172), &name));
    // The origin's zip changes after its SHA256SUMS was signed.
    let zip = crate::cache_mirror::files_named(&tmp.path().join("origin"), |n| {
        n.ends_with("_linux_amd64.zip")
    })
    .into_iter()
    .find(|p| p.to_string_lossy().contains("/archives/"))
    .unwrap();
    let mut bytes = std::fs::read(&zip).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(&zip, bytes).unwrap();

    let (sync, _scratch, _temp) = syncer(&r, &origin).await;
    let report = sync.run(&plan(&["hashicorp/null"], None), &|_| {}).await;
    let [(version, SyncOutcome::Refused(why))] = &outcomes(&report, "hashicorp/null")[..] else {
        panic!("{}: {report:?}", r.name);
    };
    assert_eq!(version, "1.0.0");
    assert!(
        why.contains("terraform-provider-null_1.0.0_linux_amd64.zip has sha256")
            && why.ends_with("as its SHA256SUMS says"),
        "{why}"
    );
    assert!(own_versions(&r).await.is_empty(), "{}", r.name);
    let kept = r.registry.blobs.list("archives/").await.unwrap();
    assert!(kept.is_empty(), "{}: {kept:?}", r.name);
    let events = tfreg_store::catalog::audit::recent(r.registry.items.as_ref(), 10)
        .await
        .unwrap();
    assert!(
        events
            .iter()
            .any(|e| e.action == "sync" && e.status == 502 && e.target.contains("1.0.0")),
        "{events:?}"
    );
    blocking(|| drop(origin));
}

/// A namespace with registered keys takes only what one of them signed,
/// as a publish does; a key not seen before is refused with
/// `--on-key-change refuse`.
async fn registered_keys_and_key_changes_rule_as_for_a_publish(r: TestRegistry) {
    let tmp = tempfile::tempdir().unwrap();
    let (first, second) = (Gpg::new("rsa2048"), Gpg::new("rsa2048"));
    let name = format!("sync-keys-{}.example.test", r.name);
    let origin = blocking(|| {
        Origin::start_with(
            tmp.path(),
            &origin_ip(&r, 174),
            &name,
            &[("1.0.0", &first), ("1.1.0", &second)],
        )
    });
    let items = r.registry.items.as_ref();
    // The namespace has a key of its own: neither version is signed by it.
    let armor = tmp.path().join("other.asc");
    Gpg::new("rsa2048").export(&armor);
    let armor = std::fs::read_to_string(&armor).unwrap();
    let key_id = tfreg_verify::signing::PublicKey::parse(&armor)
        .unwrap()
        .info()
        .key_id
        .clone();
    let registered = tfreg_model::keys::RegisteredKey {
        key_id: key_id.clone(),
        ascii_armor: armor,
        algorithms: vec![],
        added_at: 0,
        added_by: "test".into(),
    };
    tfreg_store::catalog::keys::add(items, "hashicorp", vec![registered])
        .await
        .unwrap();
    let (sync, _scratch, _temp) = syncer(&r, &origin).await;
    let report = sync.run(&plan(&["hashicorp/null"], None), &|_| {}).await;
    for (_, outcome) in outcomes(&report, "hashicorp/null") {
        let SyncOutcome::Refused(why) = outcome else {
            panic!("{report:?}")
        };
        assert!(
            why.contains("any key registered for namespace hashicorp"),
            "{why}"
        );
    }
    assert!(own_versions(&r).await.is_empty());
    tfreg_store::catalog::keys::remove(items, "hashicorp", &key_id)
        .await
        .unwrap();
    // No registered key; with refuse, 1.1.0's new key is refused.
    let mut record = origin_record(&origin);
    record.settings.on_key_change = tfreg_model::upstream::KeyChange::Refuse;
    let (sync, _scratch, _temp) = syncer_of(&r, record).await;
    let report = sync.run(&plan(&["hashicorp/null"], None), &|_| {}).await;
    let got = outcomes(&report, "hashicorp/null");
    assert_eq!(
        got[0],
        ("1.0.0".to_string(), SyncOutcome::Stored),
        "{got:?}"
    );
    let SyncOutcome::Refused(why) = &got[1].1 else {
        panic!("{got:?}")
    };
    assert!(
        why.contains("1.1.0 is signed by") && why.contains("earlier versions by"),
        "{why}"
    );
    assert_eq!(own_versions(&r).await, ["1.0.0"]);
    blocking(|| drop(origin));
}

/// `tfreg sync` of hashicorp/null (and `more`) from `origin`, on the
/// stores `stores` name.
fn sync_command(origin: &Origin, more: &[&str], stores: &[String]) -> std::process::Command {
    let mut cmd = std::process::Command::new(crate::support::tools::tfreg_bin());
    cmd.args(["sync", "--from", &format!("https://{}", origin.host)])
        .arg("hashicorp/null")
        .args(more)
        .arg("--connect-to")
        .arg(format!("{}={}", origin.host, origin.listen))
        .arg("--ca-file")
        .arg(&origin.server.ca)
        .args(stores);
    cmd
}

/// The CLI killed with SIGKILL at growing moments of its run, then run to
/// its end: after each kill every version listed is whole; the last run
/// stores what is left and the registry holds every version once.
async fn a_sync_killed_at_any_moment_is_run_again(r: TestRegistry) {
    let tmp = tempfile::tempdir().unwrap();
    let gpg = Gpg::new("rsa2048");
    let name = format!("sync-kill-{}.example.test", r.name);
    let versions = [("1.0.0", &gpg), ("1.1.0", &gpg), ("1.2.0", &gpg)];
    let origin = blocking(|| Origin::start_with(tmp.path(), &origin_ip(&r, 176), &name, &versions));
    let cut_between = std::cell::Cell::new(false);
    let killed = crate::support::kill::until_done(
        || sync_command(&origin, &["hashicorp/greeting/null"], &r.store_args()),
        |wait| {
            let r = &r;
            let cut = &cut_between;
            async move {
                // Only whole versions are served after a kill.
                let whole = every_listed_version_is_whole(r).await;
                eprintln!("{}: killed after {wait:?}: {whole} versions served", r.name);
                cut.set(cut.get() || (1..3).contains(&whole));
            }
        },
    )
    .await;
    let text = crate::support::kill::text(&killed.output);
    assert!(killed.output.status.success(), "{}: {text}", r.name);
    let kills = killed.kills.len();
    assert!(kills >= 2, "{}: killed {kills} times only", r.name);
    assert!(
        cut_between.get(),
        "{}: no kill fell between two versions",
        r.name
    );
    assert_eq!(
        own_versions(&r).await,
        ["1.0.0", "1.1.0", "1.2.0"],
        "{}",
        r.name
    );
    assert_eq!(every_listed_version_is_whole(&r).await, 3);
    assert!(crate::maintenance::all_verify(&r).await > 0);
    // Run again: nothing left to fetch.
    let out = tokio::task::block_in_place(|| {
        sync_command(&origin, &["hashicorp/greeting/null"], &r.store_args())
            .output()
            .unwrap()
    });
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("0 stored, 4 already here, 0 skipped, 0 refused or failed"),
        "{text}"
    );
    blocking(|| drop(origin));
}

crate::backend_contract::contract!(
    a_sync_makes_the_origins_versions_this_registrys_own,
    a_tampered_archive_is_refused_by_name_and_nothing_is_stored,
    registered_keys_and_key_changes_rule_as_for_a_publish,
    a_sync_killed_at_any_moment_is_run_again,
);

/// A private origin (another tfreg's API needs a token) synced through the
/// CLI into a running `tfreg serve`'s data directory: refused without its
/// credentials, synced with them (the token named by the upstreams'
/// variable convention, never printed); then real Terraform installs the
/// provider from its new home under the new hostname, with the origin's
/// `zh:` hash, and `tfreg sync --dry-run` says nothing is left to fetch.
#[test]
fn a_private_registry_synced_installs_with_terraform_from_its_new_home() {
    use crate::support::*;
    let tools = Tools::get();
    let tmp = tempfile::tempdir().unwrap();
    let origin = Origin::start_private(tmp.path(), "127.0.0.178", "sync-private.example.test");
    let origin_token = origin.server.token("read", None);
    const VARIABLE: &str = "TFREG_UPSTREAM_CREDENTIAL_SYNC__PRIVATE_EXAMPLE_TEST";
    let data = tmp.path().join("data");
    let home = Server::start(&data, &["--private"]);
    let stores = ["--data-dir".to_string(), data.display().to_string()];
    let sync = |extra: &[&str], with_token: bool| {
        let mut cmd = sync_command(&origin, extra, &stores);
        if with_token {
            cmd.env(VARIABLE, &origin_token);
        }
        cmd.output().unwrap()
    };
    let out = sync(&[], false);
    let text = crate::support::kill::text(&out);
    assert!(!out.status.success(), "{text}");
    assert!(
        text.contains("REFUSED  provider hashicorp/null: ") && text.contains("(401)"),
        "{text}"
    );
    let out = sync(&["--credentials-env", VARIABLE], true);
    let text = crate::support::kill::text(&out);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("stored   provider hashicorp/null 1.0.0"),
        "{text}"
    );
    assert!(!text.contains(&origin_token));
    let out = sync(&["--credentials-env", VARIABLE, "--dry-run"], true);
    let text = crate::support::kill::text(&out);
    assert!(
        text.contains("0 to fetch (dry run), 1 already here"),
        "{text}"
    );

    let read = home.token("read", None);
    let tf = Terraform::new(
        tools.path("TFREG_TERRAFORM_NEW"),
        &home,
        &fixtures::credentials(&home.host, &read),
    );
    let work = tmp.path().join("work");
    let main = format!(
        "terraform {{\n  required_providers {{\n    null = {{\n      source  = \"{}/hashicorp/null\"\n      version = \"1.0.0\"\n    }}\n  }}\n}}\n",
        home.host
    );
    write_tree(&work, &[("main.tf", &main)]);
    ok(tf.run(&work, &["init", "-no-color"]), "terraform init");
    let lock = fixtures::lock_file(&work);
    let zh = fixtures::zh(&origin.zips[0]);
    assert!(lock.contains(&zh), "{zh} not in\n{lock}");
    assert!(
        lock.contains(&format!("provider \"{}/hashicorp/null\"", home.host)),
        "{lock}"
    );
}
