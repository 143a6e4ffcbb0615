//! `tfreg gc` and `tfreg verify` (issue 39) on both backends, in-process
//! through the library the CLI runs (`tfreg_store::maintenance`), and the
//! CLI itself on a data directory: gc collects the leftovers of publishes
//! and nothing a release or a publish in progress needs, also while
//! publishes race it; verify names a tampered and a missing file and
//! changes nothing.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::StatusCode;
use tfreg_model::blob_key::{BlobKey, FileName, UploadId};
use tfreg_model::protocol::{PublishBegin, PublishRequest};
use tfreg_model::router::PublishStep;
use tfreg_model::token::Scope;
use tfreg_store::maintenance::{self, Why};
use tfreg_store::{BlobStore, Digest};
use tfreg_testkit::{TestRegistry, module_archive};

use crate::backend_contract::{module, publish_module};

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn digest(bytes: &[u8]) -> Digest {
    use sha2::Digest as _;
    Digest {
        size: bytes.len() as u64,
        sha256: hex::encode(sha2::Sha256::digest(bytes)),
    }
}

/// Write `bytes` as the object `key` (through an upload slot, as a
/// publish's `complete` keeps its files).
async fn put_object(blobs: &dyn BlobStore, key: &BlobKey, bytes: &[u8]) {
    let slot = BlobKey::upload(&UploadId::random(), &FileName::parse("slot").unwrap());
    let body = futures_util::stream::once(std::future::ready(Ok(Bytes::from(bytes.to_vec()))));
    blobs
        .receive(&slot, Box::pin(body), &digest(bytes))
        .await
        .unwrap();
    let claimed = blobs.claim(&slot, u64::MAX).await.unwrap();
    blobs.keep(&claimed, key).await.unwrap();
    blobs.delete(&slot).await.unwrap();
}

fn key(s: &str) -> BlobKey {
    BlobKey::parse(s).unwrap()
}

async fn gc(r: &TestRegistry, grace: u64, apply: bool) -> maintenance::GcReport {
    maintenance::gc(
        r.registry.items.as_ref(),
        r.registry.blobs.as_ref(),
        now(),
        grace,
        apply,
        &|_, _| {},
    )
    .await
    .unwrap()
}

/// Every stored file is what its record promises (asserted); how many.
pub(crate) async fn all_verify(r: &TestRegistry) -> usize {
    let (items, blobs) = (r.registry.items.as_ref(), r.registry.blobs.as_ref());
    let files = maintenance::promised(items, blobs, now()).await.unwrap();
    for (key, promised) in &files {
        let (mismatch, _) = maintenance::check(blobs, key, promised).await.unwrap();
        assert!(mismatch.is_none(), "{}: {mismatch:?}", r.name);
    }
    files.len()
}

async fn gc_collects_leftovers_and_nothing_a_release_or_a_publish_needs(r: TestRegistry) {
    let token = r.token(Scope::Publish, None).await;
    let archive = module_archive(&[("main.tf", "# kept\n")]);
    let resp = publish_module(&r, &token, "acme/kept/aws", "1.0.0", &archive).await;
    assert_eq!(resp.status, StatusCode::CREATED, "{}", r.name);
    // A publish in progress: begun, its file uploaded, not completed.
    let open_target = module("acme/open/aws", "1.0.0");
    let open_bytes = module_archive(&[("main.tf", "# open\n")]);
    let request = PublishRequest {
        files: vec![tfreg_testkit::decl("m.tar.gz", &open_bytes)],
        ..Default::default()
    };
    let begin = r
        .publish_step(&open_target, PublishStep::Begin, &token, &request)
        .await;
    assert!(begin.status.is_success(), "{}", begin.text());
    let begun: PublishBegin = serde_json::from_slice(&begin.body).unwrap();
    let upload = &begun.uploads[0];
    let put = r
        .send_url(http::Method::PUT, &upload.url, &upload.headers, open_bytes)
        .await;
    assert!(put.status.is_success(), "{}", put.text());
    // Leftovers: a file a `complete` kept before it failed, an upload of a
    // publish that no longer exists.
    let orphan = key(&format!("archives/{}/m.tar.gz", UploadId::random()));
    put_object(r.registry.blobs.as_ref(), &orphan, b"left over").await;
    let abandoned = BlobKey::upload(&UploadId::random(), &FileName::parse("m.tar.gz").unwrap());
    let body = futures_util::stream::once(std::future::ready(Ok(Bytes::from_static(b"abandoned"))));
    r.registry
        .blobs
        .receive(&abandoned, Box::pin(body), &digest(b"abandoned"))
        .await
        .unwrap();

    // The finished publish closed its upload slot (an empty object stays,
    // refusing late uploads while its URL lives): garbage once its session
    // is gone, like any upload of no publish in progress.
    let open_slot = BlobKey::upload(
        begun.upload_id.as_ref().unwrap(),
        &FileName::parse("m.tar.gz").unwrap(),
    );
    // Within the grace period nothing is garbage yet.
    let fresh = gc(&r, 3600, true).await;
    assert_eq!(
        (fresh.garbage.len(), fresh.recent, fresh.deleted),
        (0, 3, 0),
        "{}: {fresh:?}",
        r.name
    );
    // Past it (object times are whole seconds): a dry run names them, deletes nothing.
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let dry = gc(&r, 1, false).await;
    let found: Vec<(&str, Why)> = dry
        .garbage
        .iter()
        .map(|g| (g.key.as_str(), g.why))
        .collect();
    assert!(
        found.contains(&(orphan.as_str(), Why::Unreferenced)),
        "{}: {dry:?}",
        r.name
    );
    assert!(
        found.contains(&(abandoned.as_str(), Why::AbandonedUpload)),
        "{}: {dry:?}",
        r.name
    );
    assert_eq!(found.len(), 3, "{}: and the closed slot: {dry:?}", r.name);
    assert!(
        !found.iter().any(|(k, _)| *k == open_slot.as_str()),
        "{}: {dry:?}",
        r.name
    );
    assert_eq!(
        found
            .iter()
            .filter(|(k, _)| k.starts_with("archives/"))
            .count(),
        1,
        "{}: of archives/ only the leftover: {dry:?}",
        r.name
    );
    assert_eq!(dry.deleted, 0);
    // The release's archive and its OCI zip.
    assert_eq!(
        r.registry.blobs.list("archives/").await.unwrap().len(),
        2 + 1,
        "{}",
        r.name
    );
    let applied = gc(&r, 1, true).await;
    assert_eq!(applied.deleted, 3, "{}: {applied:?}", r.name);
    let mut left: Vec<String> = r
        .registry
        .blobs
        .list("")
        .await
        .unwrap()
        .into_iter()
        .map(|k| k.to_string())
        .collect();
    left.sort();
    assert!(left.contains(&open_slot.to_string()), "{left:?}");
    assert_eq!(
        left.len(),
        3,
        "{}: the release's file, its OCI zip and the open upload: {left:?}",
        r.name
    );
    // What is left serves: the release downloads, the open publish completes.
    assert_eq!(all_verify(&r).await, 2, "the archive and its OCI zip");
    let mut request = request;
    request.upload_id = begun.upload_id;
    let complete = r
        .publish_step(&open_target, PublishStep::Complete, &token, &request)
        .await;
    assert_eq!(complete.status, StatusCode::CREATED, "{}", complete.text());
    assert_eq!(all_verify(&r).await, 2 * 2, "two archives, two OCI zips");
    // Again: nothing more.
    assert_eq!(gc(&r, 1, true).await.garbage.len(), 0);
}

async fn gc_racing_concurrent_publishes_loses_nothing(r: TestRegistry) {
    let r = Arc::new(r);
    let token = r.token(Scope::Publish, None).await;
    let orphan = key(&format!("archives/{}/m.tar.gz", UploadId::random()));
    put_object(r.registry.blobs.as_ref(), &orphan, b"left over").await;
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let publishes: Vec<_> = (0..12)
        .map(|i| {
            let (r, token) = (r.clone(), token.clone());
            tokio::spawn(async move {
                let archive = module_archive(&[("main.tf", &format!("# {i}\n"))]);
                let resp =
                    publish_module(&r, &token, &format!("acme/race{i}/aws"), "1.0.0", &archive)
                        .await;
                assert_eq!(resp.status, StatusCode::CREATED, "{}", resp.text());
            })
        })
        .collect();
    // gc over and over while they run (a grace of 1 s: each publish takes
    // a fraction of it here).
    let collector = {
        let r = r.clone();
        tokio::spawn(async move {
            let mut deleted = 0;
            for _ in 0..8 {
                deleted += gc(&r, 1, true).await.deleted;
            }
            deleted
        })
    };
    for p in publishes {
        p.await.unwrap();
    }
    let deleted = collector.await.unwrap() + gc(&r, 1, true).await.deleted;
    assert_eq!(deleted, 1, "{}: only the leftover", r.name);
    // Each module version's archive and its OCI zip.
    assert_eq!(
        all_verify(&r).await,
        2 * 12,
        "{}: every release's file is there",
        r.name
    );
    for i in 0..12 {
        let m =
            tfreg_model::address::ModuleName::parse("acme", &format!("race{i}"), "aws").unwrap();
        let releases = tfreg_store::catalog::module_releases(r.registry.items.as_ref(), &m)
            .await
            .unwrap();
        let url = r.registry.read_url(&releases[0].file.key).await.unwrap();
        assert_eq!(r.download(&url).await.status, StatusCode::OK, "{}", r.name);
    }
}

async fn verify_names_a_tampered_and_a_missing_file_and_changes_nothing(r: TestRegistry) {
    let token = r.token(Scope::Publish, None).await;
    for name in ["tampered", "missing", "intact"] {
        let archive = module_archive(&[("main.tf", &format!("# {name}\n"))]);
        let resp = publish_module(&r, &token, &format!("acme/{name}/aws"), "1.0.0", &archive).await;
        assert_eq!(resp.status, StatusCode::CREATED);
    }
    let (items, blobs) = (r.registry.items.as_ref(), r.registry.blobs.as_ref());
    let file_of = async |name: &str| {
        let m = tfreg_model::address::ModuleName::parse("acme", name, "aws").unwrap();
        tfreg_store::catalog::module_releases(items, &m)
            .await
            .unwrap()[0]
            .file
            .clone()
    };
    let tampered = file_of("tampered").await;
    blobs.delete(&tampered.key).await.unwrap();
    put_object(blobs, &tampered.key, b"someone edited the bucket").await;
    let missing = file_of("missing").await;
    blobs.delete(&missing.key).await.unwrap();
    let files = maintenance::promised(items, blobs, now()).await.unwrap();
    let mut mismatches = vec![];
    for (key, promised) in &files {
        if let (Some(m), _) = maintenance::check(blobs, key, promised).await.unwrap() {
            mismatches.push(m);
        }
    }
    mismatches.sort_by(|a, b| a.record.cmp(&b.record));
    assert_eq!(mismatches.len(), 2, "{}: {mismatches:?}", r.name);
    assert_eq!(
        mismatches[0].record,
        "MODULE#acme/missing/aws VERSION#1.0.0"
    );
    assert_eq!(mismatches[0].found, None);
    assert_eq!(
        mismatches[1].record,
        "MODULE#acme/tampered/aws VERSION#1.0.0"
    );
    assert_eq!(mismatches[1].expected_sha256, tampered.sha256);
    assert_eq!(
        mismatches[1].found.as_ref().map(|f| f.sha256.clone()),
        Some(digest(b"someone edited the bucket").sha256)
    );
    // Nothing "repaired": the edited bytes are still there, the record unchanged.
    assert_eq!(file_of("tampered").await, tampered);
    assert_eq!(
        blobs.claim(&tampered.key, u64::MAX).await.unwrap().digest,
        digest(b"someone edited the bucket")
    );
}

crate::backend_contract::contract!(
    gc_collects_leftovers_and_nothing_a_release_or_a_publish_needs,
    gc_racing_concurrent_publishes_loses_nothing,
    verify_names_a_tampered_and_a_missing_file_and_changes_nothing,
    reindex_rebuilds_what_a_crash_left_behind,
    reindex_reads_the_docs_of_versions_that_have_none,
    a_gc_killed_at_any_moment_is_run_again,
);

/// `tfreg ARGS --data-dir DATA`.
fn tfreg_on(data: &std::path::Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(crate::support::tools::tfreg_bin())
        .args(args)
        .arg("--data-dir")
        .arg(data)
        .output()
        .unwrap()
}

fn text(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The CLI on `tfreg serve`'s data directory, the server running: gc's dry
/// run names a leftover a day old, `--apply` deletes it and audits the run;
/// a grace under 15 minutes and a registry's URL are refused; verify names
/// an edited archive, exits non-zero, audits it and changes nothing.
#[test]
fn gc_and_verify_on_a_data_directory() {
    use crate::support::fixtures::*;
    use crate::support::*;
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let server = Server::start(&data, &["--private"]);
    let admin = server.token("admin", None);
    publish_fixture(&server, &admin, tmp.path());
    let blobs = data.join("blobs");
    // A file a `complete` kept before it failed, a day ago.
    let orphan = format!(
        "archives/{}/terraform-provider-null_9.9.9_linux_amd64.zip",
        UploadId::random()
    );
    let path = blobs.join(&orphan);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, b"left over").unwrap();
    let day_ago = SystemTime::now() - Duration::from_secs(86_400 + 60);
    std::fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(day_ago)
        .unwrap();

    let dry = tfreg_on(&data, &["gc"]);
    assert!(dry.status.success(), "{}", text(&dry));
    let said = text(&dry);
    assert!(said.contains(&format!("{orphan}  unreferenced")), "{said}");
    assert!(said.contains("dry run"), "{said}");
    assert!(path.exists(), "a dry run deletes nothing");
    let refused = tfreg_on(&data, &["gc", "--grace", "1m"]);
    assert!(!refused.status.success());
    assert!(
        text(&refused).contains("shorter than 15m"),
        "{}",
        text(&refused)
    );
    let remote = std::process::Command::new(crate::support::tools::tfreg_bin())
        .args(["gc", "--registry", &server.url("")])
        .output()
        .unwrap();
    assert!(!remote.status.success());
    assert!(
        text(&remote).contains("works on the stores themselves"),
        "{}",
        text(&remote)
    );
    let applied = tfreg_on(&data, &["gc", "--apply", "--json"]);
    assert!(applied.status.success(), "{}", text(&applied));
    let report: serde_json::Value = serde_json::from_slice(&applied.stdout).unwrap();
    assert_eq!(report["deleted"], 1, "{report}");
    assert!(!path.exists());
    // The registry still installs what it published: every file verifies.
    let clean = tfreg_on(&data, &["verify"]);
    assert!(clean.status.success(), "{}", text(&clean));
    assert!(
        text(&clean).contains("0 not what their records promise"),
        "{}",
        text(&clean)
    );

    // Someone edits a published archive in place.
    let items = tfreg_store::sqlite::SqliteStore::open(&data.join("registry.db")).unwrap();
    let rt = crate::login::runtime();
    let m = tfreg_model::address::ModuleName::parse(NS, "greeting", "null").unwrap();
    let release = rt
        .block_on(tfreg_store::catalog::module_releases(&items, &m))
        .unwrap()
        .into_iter()
        .next()
        .unwrap();
    let edited = blobs.join(release.file.key.as_str());
    let mut perms = std::fs::metadata(&edited).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o600);
    std::fs::set_permissions(&edited, perms).unwrap();
    std::fs::write(&edited, b"edited in place").unwrap();
    let found = tfreg_on(&data, &["verify"]);
    assert!(!found.status.success(), "{}", text(&found));
    let said = text(&found);
    assert!(
        said.contains(&format!("MISMATCH {}", release.file.key))
            && said.contains(&release.file.sha256),
        "{said}"
    );
    assert_eq!(
        std::fs::read(&edited).unwrap(),
        b"edited in place",
        "nothing repaired"
    );
    let audit = tfreg_on(&data, &["audit", "--json"]);
    let audit = text(&audit);
    assert!(
        audit.contains("verify.mismatch") && audit.contains("\"gc\""),
        "{audit}"
    );
}

/// `tfreg reindex`'s library: an index left behind by a crash (a deleted
/// release still listed, a written release not listed) is rebuilt from
/// the releases; run again, the same.
async fn reindex_rebuilds_what_a_crash_left_behind(r: TestRegistry) {
    use tfreg_store::catalog::schema::{INDEX_SK, module_pk};
    let token = r.token(Scope::Publish, None).await;
    for v in ["1.0.0", "1.1.0"] {
        let archive = module_archive(&[("main.tf", &format!("# {v}\n"))]);
        let resp = publish_module(&r, &token, "acme/idx/aws", v, &archive).await;
        assert_eq!(resp.status, StatusCode::CREATED);
    }
    let m = tfreg_model::address::ModuleName::parse("acme", "idx", "aws").unwrap();
    let items = r.registry.items.as_ref();
    let pk = module_pk(&m);
    // The index as it was before 1.2.0 (a crash after its release was
    // written), and 1.0.0's release gone (a delete cut short).
    let index_before = items.get(&pk, INDEX_SK).await.unwrap().unwrap();
    let archive = module_archive(&[("main.tf", "# 1.2.0\n")]);
    let resp = publish_module(&r, &token, "acme/idx/aws", "1.2.0", &archive).await;
    assert_eq!(resp.status, StatusCode::CREATED);
    let current = items.get(&pk, INDEX_SK).await.unwrap().unwrap();
    items
        .put(
            tfreg_store::Item::new(&pk, INDEX_SK, index_before.data.clone()),
            tfreg_store::Condition::IfUnchanged(current.data),
        )
        .await
        .unwrap();
    items.take(&pk, "VERSION#1.0.0").await.unwrap();
    let listed = async || -> Vec<String> {
        let resp = r
            .get_with("/v1/modules/acme/idx/aws/versions", &token)
            .await;
        let mut v: Vec<String> = resp.json()["modules"][0]["versions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["version"].as_str().unwrap().to_string())
            .collect();
        v.sort();
        v
    };
    assert_eq!(
        listed().await,
        ["1.0.0", "1.1.0"],
        "{}: the stale index",
        r.name
    );
    let rebuilt = maintenance::reindex(items, &|_, _| {}).await.unwrap();
    assert_eq!(rebuilt, 1, "{}", r.name);
    assert_eq!(
        listed().await,
        ["1.1.0", "1.2.0"],
        "{}: from the releases",
        r.name
    );
    maintenance::reindex(items, &|_, _| {}).await.unwrap();
    assert_eq!(listed().await, ["1.1.0", "1.2.0"], "{}", r.name);
}

/// `tfreg reindex` itself, on the stores: a module version whose docs item
/// is gone (published before tfreg read docs) gets the docs a publish reads,
/// from its archive; run again, it reads none.
async fn reindex_reads_the_docs_of_versions_that_have_none(r: TestRegistry) {
    let token = r.token(Scope::Publish, None).await;
    let archive = module_archive(&[
        ("README.md", "# Net\n\nA network for acme.\n"),
        ("variables.tf", "variable \"cidr\" {\n  type = string\n}\n"),
    ]);
    let resp = publish_module(&r, &token, "acme/net/aws", "1.0.0", &archive).await;
    assert_eq!(resp.status, StatusCode::CREATED);
    let m = tfreg_model::address::ModuleName::parse("acme", "net", "aws").unwrap();
    let items = r.registry.items.as_ref();
    let release = &tfreg_store::catalog::module_releases(items, &m)
        .await
        .unwrap()[0];
    let published = tfreg_store::catalog::module_docs(items, &m, release)
        .await
        .unwrap()
        .expect("docs read at publish");
    let v = tfreg_model::version::Version::parse("1.0.0").unwrap();
    let pk = tfreg_store::catalog::schema::module_pk(&m);
    let sk = tfreg_store::catalog::schema::docs_sk(&v, &release.file.sha256);
    items.take(&pk, &sk).await.unwrap().expect("the docs item");
    assert_eq!(
        maintenance::undocumented_modules(items)
            .await
            .unwrap()
            .len(),
        1
    );
    let reindex = || {
        let (ok, text) = crate::support::tools::tfreg_on_stores(&r, &["reindex"]);
        assert!(ok, "{}: {text}", r.name);
        text
    };
    let text = reindex();
    assert!(text.contains("docs read for 1 module versions"), "{text}");
    let read = tfreg_store::catalog::module_docs(items, &m, release)
        .await
        .unwrap()
        .expect("docs read by reindex");
    assert_eq!(read, published, "{}", r.name);
    assert_eq!(read.root.inputs[0].name, "cidr");
    assert!(reindex().contains("docs read for 0 module versions"));
}

/// `tfreg gc --apply` itself, on the stores (the data directory; the
/// table and bucket), killed with SIGKILL at growing moments and run again
/// until a run ends: after each kill every release is whole; at the end
/// every leftover is collected and nothing else.
async fn a_gc_killed_at_any_moment_is_run_again(r: TestRegistry) {
    let token = r.token(Scope::Publish, None).await;
    let archive = module_archive(&[("main.tf", "# kept\n")]);
    let resp = publish_module(&r, &token, "acme/kept/aws", "1.0.0", &archive).await;
    assert_eq!(resp.status, StatusCode::CREATED);
    const ORPHANS: usize = 400;
    let blobs = r.registry.blobs.clone();
    let puts = (0..ORPHANS).map(|_| {
        let blobs = blobs.clone();
        async move {
            let orphan = key(&format!("archives/{}/m.tar.gz", UploadId::random()));
            put_object(blobs.as_ref(), &orphan, b"left over").await;
        }
    });
    futures_util::future::join_all(puts).await;
    // A day and more old: past the grace.
    r.age_objects(Duration::from_secs(2 * 86_400));
    // What archives/ holds besides the release's archive and its OCI zip.
    let left = || async { r.registry.blobs.list("archives/").await.unwrap().len() - 1 };
    let cut_between = std::cell::Cell::new(false);
    let killed = crate::support::kill::until_done(
        || {
            let mut cmd = std::process::Command::new(crate::support::tools::tfreg_bin());
            cmd.args(["gc", "--apply", "--grace", "1h"])
                .args(r.store_args());
            cmd
        },
        |_| {
            let cut = &cut_between;
            let (r, left) = (&r, &left);
            async move {
                // Its archive and its OCI zip.
                assert_eq!(all_verify(r).await, 2, "{}: the release is whole", r.name);
                let n = left().await;
                cut.set(cut.get() || (2..=ORPHANS).contains(&n));
            }
        },
    )
    .await;
    let text = crate::support::kill::text(&killed.output);
    assert!(killed.output.status.success(), "{}: {text}", r.name);
    assert!(
        cut_between.get(),
        "{}: no kill fell amid the deletions ({:?})",
        r.name,
        killed.kills
    );
    assert_eq!(left().await, 1, "{}: {text}", r.name);
    assert_eq!(all_verify(&r).await, 2, "the archive and its OCI zip");
    let module = r.get("/v1/modules/acme/kept/aws/1.0.0/download").await;
    assert_eq!(module.status, StatusCode::NO_CONTENT, "{}", r.name);
    assert_eq!(gc(&r, 1, true).await.garbage.len(), 0);
}
