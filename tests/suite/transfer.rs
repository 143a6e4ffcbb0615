//! `tfreg export` / `tfreg import` (issue 39), through the library the CLI
//! runs, on both backends: an export imported into the other backend
//! serves the same versions and bytes and takes the same tokens; a tampered
//! archive is refused by name with nothing stored; an import cut off
//! half-way goes on where it stopped; a registry holding another version
//! of the same name refuses and keeps its own.

use std::time::{SystemTime, UNIX_EPOCH};

use http::StatusCode;
use tfreg_model::address::ModuleName;
use tfreg_model::token::Scope;
use tfreg_store::maintenance::transfer::{self, TransferError};
use tfreg_store::scan_all;
use tfreg_testkit::{TestRegistry, module_archive};

use crate::backend_contract::publish_module;

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// A registry of the other kind than `r`.
async fn other(r: &TestRegistry) -> TestRegistry {
    if r.name == "embedded" {
        TestRegistry::aws().await
    } else {
        TestRegistry::embedded().await
    }
}

const MODULES: [&str; 3] = ["vpc", "dns", "iam"];

/// Three modules, two versions each; the export of it; a read token.
/// Each version is two files: its archive and the zip the OCI view serves.
async fn exported(r: &TestRegistry, dir: &std::path::Path) -> String {
    exported_with(r, dir, 12).await
}

/// [`exported`] of a registry holding `files` files with those.
async fn exported_with(r: &TestRegistry, dir: &std::path::Path, files: usize) -> String {
    let token = r.token(Scope::Publish, None).await;
    for name in MODULES {
        for v in ["1.0.0", "1.1.0"] {
            let archive = module_archive(&[("main.tf", &format!("# {name} {v}\n"))]);
            let resp = publish_module(r, &token, &format!("acme/{name}/aws"), v, &archive).await;
            assert_eq!(resp.status, StatusCode::CREATED, "{}", resp.text());
        }
    }
    let read = r.token(Scope::Read, None).await;
    let out = transfer::export(
        r.registry.items.as_ref(),
        r.registry.blobs.as_ref(),
        dir,
        &Default::default(),
        (None, now()),
        &|_, _| {},
    )
    .await
    .unwrap();
    assert_eq!(out.files, files, "{}: {out:?}", r.name);
    read
}

/// `file` served by `r` whole: a 200, its bytes hashing to its sha256.
async fn served_whole(r: &TestRegistry, file: &tfreg_model::release::StoredFile, what: &str) {
    let url = r.registry.read_url(&file.key).await.unwrap();
    let got = r.download(&url).await;
    assert_eq!(got.status, StatusCode::OK, "{}: {what}", r.name);
    assert_eq!(
        hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&got.body)),
        file.sha256,
        "{}: {what}",
        r.name
    );
}

async fn import(
    to: &TestRegistry,
    dir: &std::path::Path,
) -> Result<transfer::Imported, TransferError> {
    transfer::import(
        to.registry.items.as_ref(),
        to.registry.blobs.as_ref(),
        dir,
        (None, now()),
        &|_, _| {},
    )
    .await
}

/// `to` answers like the source: every version listed, each archive the
/// same bytes, the source's read token accepted.
async fn serves_the_same(from: &TestRegistry, to: &TestRegistry, read: &str) {
    for name in MODULES {
        let path = format!("/v1/modules/acme/{name}/aws/versions");
        let resp = to.get_with(&path, read).await;
        assert_eq!(resp.status, StatusCode::OK, "{}: {}", to.name, resp.text());
        let mut versions: Vec<String> = resp.json()["modules"][0]["versions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["version"].as_str().unwrap().to_string())
            .collect();
        versions.sort();
        assert_eq!(versions, ["1.0.0", "1.1.0"], "{}", to.name);
        let m = ModuleName::parse("acme", name, "aws").unwrap();
        let (here, there) = (
            tfreg_store::catalog::module_releases(to.registry.items.as_ref(), &m)
                .await
                .unwrap(),
            tfreg_store::catalog::module_releases(from.registry.items.as_ref(), &m)
                .await
                .unwrap(),
        );
        assert_eq!(here, there, "{}: the same releases", to.name);
        for release in &here {
            // The OCI view's zip came along: the same record, its bytes there.
            let zip = tfreg_store::catalog::module_zip(to.registry.items.as_ref(), &m, release)
                .await
                .unwrap()
                .unwrap_or_else(|| panic!("{}: no zip of {m} {}", to.name, release.version));
            let theirs =
                tfreg_store::catalog::module_zip(from.registry.items.as_ref(), &m, release)
                    .await
                    .unwrap();
            assert_eq!(Some(&zip), theirs.as_ref(), "{}: the same zip", to.name);
            served_whole(to, &zip, "the zip").await;
            served_whole(to, &release.file, "the archive").await;
        }
    }
}

async fn an_export_imported_into_the_other_backend_serves_the_same(r: TestRegistry) {
    let dir = tempfile::tempdir().unwrap();
    let read = exported(&r, dir.path()).await;
    let to = other(&r).await;
    let done = import(&to, dir.path()).await.unwrap();
    assert_eq!(
        (done.files_written, done.reindexed),
        (12, 6),
        "{}: {done:?}",
        to.name
    );
    serves_the_same(&r, &to, &read).await;
    // Again: everything is there already, nothing written.
    let again = import(&to, dir.path()).await.unwrap();
    assert_eq!(
        (
            again.items_written,
            again.files_written,
            again.files_present
        ),
        (0, 0, 12),
        "{again:?}"
    );
}

async fn a_tampered_archive_is_refused_by_name_and_nothing_is_stored(r: TestRegistry) {
    let dir = tempfile::tempdir().unwrap();
    exported(&r, dir.path()).await;
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("manifest.json")).unwrap()).unwrap();
    let key = manifest["files"][3]["key"].as_str().unwrap().to_string();
    std::fs::write(dir.path().join("files").join(&key), b"not the archive").unwrap();
    let to = other(&r).await;
    let keys = async || -> Vec<(String, String)> {
        let items = scan_all(to.registry.items.as_ref()).await.unwrap();
        items.into_iter().map(|i| (i.pk, i.sk)).collect()
    };
    let before = keys().await;
    let e = import(&to, dir.path()).await.unwrap_err().to_string();
    assert!(
        e.contains(&format!("files/{key}")) && e.contains("refused, nothing imported"),
        "{e}"
    );
    assert_eq!(keys().await, before, "{}: items stored", to.name);
    assert!(
        to.registry.blobs.list("").await.unwrap().is_empty(),
        "{}: files stored",
        to.name
    );
}

/// `tfreg import` itself into `r`'s stores (the data directory; the table
/// and bucket), killed with SIGKILL amid its files, then amid its
/// releases, then run to its end: after each kill every release is served
/// whole (its file there, its bytes its sha256) and no other; at the end `r`
/// serves what the export has.
async fn an_import_killed_amid_its_files_and_its_releases_is_run_again(r: TestRegistry) {
    let dir = tempfile::tempdir().unwrap();
    let from = other(&r).await;
    // Enough releases that a kill falls amid them.
    const EXTRA: usize = 100;
    let extra: Vec<String> = (0..EXTRA).map(|i| format!("extra{i}")).collect();
    let token = from.token(Scope::Publish, None).await;
    for name in &extra {
        let archive = module_archive(&[("main.tf", &format!("# {name}\n"))]);
        let resp = publish_module(
            &from,
            &token,
            &format!("acme/{name}/aws"),
            "1.0.0",
            &archive,
        )
        .await;
        assert_eq!(resp.status, StatusCode::CREATED, "{}", resp.text());
    }
    let read = exported_with(&from, dir.path(), 2 * (EXTRA + 6)).await;
    let names: Vec<&str> = MODULES
        .iter()
        .copied()
        .chain(extra.iter().map(String::as_str))
        .collect();
    let whole = || async {
        let mut releases = 0;
        for name in &names {
            let m = ModuleName::parse("acme", name, "aws").unwrap();
            let items = r.registry.items.as_ref();
            for release in tfreg_store::catalog::module_releases(items, &m)
                .await
                .unwrap()
            {
                served_whole(&r, &release.file, &format!("{m} {}", release.version)).await;
                releases += 1;
            }
        }
        releases
    };
    let command = || {
        let mut cmd = std::process::Command::new(crate::support::tools::tfreg_bin());
        cmd.arg("import").arg(dir.path()).args(r.store_args());
        cmd
    };
    // Killed amid the files (ten of them kept): no release is served yet.
    let blobs = r.registry.blobs.as_ref();
    let killed = crate::support::kill::when(command, || async {
        blobs.list("archives/").await.unwrap().len() >= 10
    })
    .await;
    assert!(killed, "{}: the import ended before it was killed", r.name);
    assert_eq!(whole().await, 0, "{}", r.name);
    // Killed again once the releases are being written (the first one is
    // there): those written are whole, the others not served at all.
    let first = ModuleName::parse("acme", "dns", "aws").unwrap();
    let v1 = tfreg_model::version::Version::parse("1.0.0").unwrap();
    let items = r.registry.items.as_ref();
    let killed = crate::support::kill::when(command, || async {
        tfreg_store::catalog::module_release(items, &first, &v1)
            .await
            .unwrap()
            .is_some()
    })
    .await;
    assert!(killed, "{}: the import ended before it was killed", r.name);
    let n = whole().await;
    // Some or all of them: on SQLite the releases are written in a few
    // milliseconds, so the kill may land after the last one, before the
    // indexes; either way the import had not ended.
    assert!(
        (1..=EXTRA + 6).contains(&n),
        "{}: {n} releases after the kill",
        r.name
    );
    eprintln!(
        "{}: killed with {n} of {} releases written",
        r.name,
        EXTRA + 6
    );
    // Run again to its end: everything, once.
    let out = tokio::task::block_in_place(|| command().output().unwrap());
    let text = crate::support::kill::text(&out);
    assert!(out.status.success(), "{}: {text}", r.name);
    assert!(text.contains("were already there"), "{text}");
    assert_eq!(whole().await, EXTRA + 6);
    serves_the_same(&from, &r, &read).await;
}

async fn another_version_of_the_same_name_is_refused_and_kept(r: TestRegistry) {
    let dir = tempfile::tempdir().unwrap();
    exported(&r, dir.path()).await;
    let to = other(&r).await;
    let token = to.token(Scope::Publish, None).await;
    let theirs = module_archive(&[("main.tf", "# their own dns 1.0.0\n")]);
    let resp = publish_module(&to, &token, "acme/dns/aws", "1.0.0", &theirs).await;
    assert_eq!(resp.status, StatusCode::CREATED);
    let e = import(&to, dir.path()).await.unwrap_err().to_string();
    assert!(e.contains("modules/acme/dns/aws/1.0.0"), "{e}");
    let m = ModuleName::parse("acme", "dns", "aws").unwrap();
    let kept = tfreg_store::catalog::module_releases(to.registry.items.as_ref(), &m)
        .await
        .unwrap();
    assert_eq!(kept.len(), 1);
    assert_eq!(
        kept[0].file.sha256,
        hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&theirs)),
        "its own 1.0.0, not overwritten"
    );
    let vpc = ModuleName::parse("acme", "vpc", "aws").unwrap();
    assert!(
        tfreg_store::catalog::module_releases(to.registry.items.as_ref(), &vpc)
            .await
            .unwrap()
            .is_empty(),
        "nothing else imported"
    );
}

/// `--namespace`: one namespace's releases and files, nothing registry-wide.
async fn an_export_of_one_namespace_carries_it_alone(r: TestRegistry) {
    let token = r.token(Scope::Publish, None).await;
    for ns in ["acme", "other"] {
        let archive = module_archive(&[("main.tf", &format!("# {ns}\n"))]);
        let resp = publish_module(&r, &token, &format!("{ns}/net/aws"), "1.0.0", &archive).await;
        assert_eq!(resp.status, StatusCode::CREATED);
    }
    let dir = tempfile::tempdir().unwrap();
    let select = transfer::Selection {
        namespaces: vec!["other".into()],
        ..Default::default()
    };
    let out = transfer::export(
        r.registry.items.as_ref(),
        r.registry.blobs.as_ref(),
        dir.path(),
        &select,
        (None, now()),
        &|_, _| {},
    )
    .await
    .unwrap();
    assert_eq!(out.files, 2, "{}: {out:?}", r.name);
    let jsonl = std::fs::read_to_string(dir.path().join("items.jsonl")).unwrap();
    assert!(jsonl.contains("MODULE#other/net/aws"), "{jsonl}");
    assert!(
        !jsonl.contains("acme/") && !jsonl.contains("\"TOKENS\""),
        "{jsonl}"
    );
    let to = other(&r).await;
    import(&to, dir.path()).await.unwrap();
    let m = ModuleName::parse("other", "net", "aws").unwrap();
    assert_eq!(
        tfreg_store::catalog::module_releases(to.registry.items.as_ref(), &m)
            .await
            .unwrap()
            .len(),
        1
    );
}

/// The CLI on `r`'s stores: one module's newer versions exported as one
/// `.tar` (`--name`, `--constraint`), imported by the CLI into the other
/// backend's stores: that version alone arrives, served whole.
async fn one_name_and_its_newer_versions_go_as_one_archive(r: TestRegistry) {
    let dir = tempfile::tempdir().unwrap();
    exported(&r, dir.path()).await;
    let file = dir.path().join("vpc.tar");
    let tfreg = |args: &[&str], on: &TestRegistry| {
        let (ok, text) = crate::support::tools::tfreg_on_stores(on, args);
        assert!(ok, "{args:?}: {text}");
        text
    };
    let file_arg = file.to_str().unwrap();
    let text = tfreg(
        &[
            "export",
            file_arg,
            "--name",
            "acme/vpc/aws",
            "--constraint",
            ">= 1.1",
        ],
        &r,
    );
    assert!(text.contains("and 2 files"), "{text}");
    let to = other(&r).await;
    tfreg(&["import", file_arg], &to);
    let items = to.registry.items.as_ref();
    let vpc = ModuleName::parse("acme", "vpc", "aws").unwrap();
    let releases = tfreg_store::catalog::module_releases(items, &vpc)
        .await
        .unwrap();
    let versions: Vec<&str> = releases.iter().map(|r| r.version.as_str()).collect();
    assert_eq!(versions, ["1.1.0"], "{}", to.name);
    let dns = ModuleName::parse("acme", "dns", "aws").unwrap();
    assert!(
        tfreg_store::catalog::module_releases(items, &dns)
            .await
            .unwrap()
            .is_empty()
    );
    served_whole(&to, &releases[0].file, "acme/vpc/aws 1.1.0").await;
    // A second export to the same file is refused, the first one kept.
    let (ok, text) = crate::support::tools::tfreg_on_stores(&r, &["export", file_arg]);
    assert!(
        !ok && text.contains("exists: export into a new file"),
        "{text}"
    );
}

/// A registry moved to a new hostname keeps its download counts: they are
/// kept under the hostname, and the import moves them to the new one.
async fn download_counts_follow_a_move_to_a_new_hostname(r: TestRegistry) {
    let dir = tempfile::tempdir().unwrap();
    let items = r.registry.items.as_ref();
    let sk = "CONSUMER#1.0.0#token-1";
    items
        .add(tfreg_store::Add {
            pk: "USAGE#old.example.com/acme/vpc/aws".into(),
            sk: sk.into(),
            by: 7,
            at: now(),
            data: b"{}".to_vec(),
            expires_at: None,
        })
        .await
        .unwrap();
    transfer::export(
        items,
        r.registry.blobs.as_ref(),
        dir.path(),
        &Default::default(),
        (Some("old.example.com"), now()),
        &|_, _| {},
    )
    .await
    .unwrap();
    let to = other(&r).await;
    transfer::import(
        to.registry.items.as_ref(),
        to.registry.blobs.as_ref(),
        dir.path(),
        (Some("new.example.com"), now()),
        &|_, _| {},
    )
    .await
    .unwrap();
    let moved = to
        .registry
        .items
        .get("USAGE#new.example.com/acme/vpc/aws", sk)
        .await
        .unwrap()
        .expect("the count under the new hostname");
    assert_eq!(moved.counter.unwrap().n, 7, "{}", to.name);
    let left = to
        .registry
        .items
        .get("USAGE#old.example.com/acme/vpc/aws", sk)
        .await
        .unwrap();
    assert!(left.is_none(), "{}", to.name);
}

crate::backend_contract::contract!(
    an_export_of_one_namespace_carries_it_alone,
    an_export_imported_into_the_other_backend_serves_the_same,
    a_tampered_archive_is_refused_by_name_and_nothing_is_stored,
    an_import_killed_amid_its_files_and_its_releases_is_run_again,
    one_name_and_its_newer_versions_go_as_one_archive,
    download_counts_follow_a_move_to_a_new_hostname,
    another_version_of_the_same_name_is_refused_and_kept,
);

/// A laptop's registry moved to the Lambda functions (issue 39): `tfreg
/// export` from `tfreg serve`'s data directory, `tfreg import` into the
/// functions' table and bucket on the emulators, served under the same
/// hostname (a move keeps it: modules name their providers by it); then
/// the real Terraform, with the laptop's read token and its lock file,
/// installs the same provider and modules from the new home.
#[test]
fn a_laptop_registry_moves_to_the_lambda_functions_and_its_lock_file_installs() {
    use crate::support::fixtures::*;
    use crate::support::*;
    let tools = Tools::get();
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let port = crate::support::server::free_port_pair();
    let laptop = Server::start_at(&data, &format!("127.0.0.1:{port}"), &["--private"]);
    let publish = laptop.token("publish", None);
    publish_fixture(&laptop, &publish, tmp.path());
    let read = laptop.token("read", None);
    let tf = Terraform::new(
        tools.path("TFREG_TERRAFORM_NEW"),
        &laptop,
        &credentials(&laptop.host, &read),
    );
    let before = tmp.path().join("work-laptop");
    root_config(&before, &laptop.host);
    init_and_apply(&tf, &before, "on the laptop");
    let lock = lock_file(&before);

    let export = tmp.path().join("export");
    ok(
        std::process::Command::new(tools::tfreg_bin())
            .args(["export"])
            .arg(&export)
            .arg("--data-dir")
            .arg(&data)
            .output()
            .unwrap(),
        "tfreg export",
    );
    drop(laptop);
    let stack = Server::start_lambda_on(&tmp.path().join("lambda"), port, &[]);
    let imported = ok(
        std::process::Command::new(tools::tfreg_bin())
            .arg("import")
            .arg(&export)
            .args(&stack.store_args)
            .envs(stack.store_env.iter().map(|(k, v)| (k, v)))
            .output()
            .unwrap(),
        "tfreg import into the functions' table and bucket",
    );
    assert!(imported.contains("versions indexed"), "{imported}");

    let after = tmp.path().join("work-stack");
    root_config(&after, &stack.host);
    std::fs::write(after.join(".terraform.lock.hcl"), &lock).unwrap();
    let tf = Terraform::new(
        tools.path("TFREG_TERRAFORM_NEW"),
        &stack,
        &credentials(&stack.host, &read),
    );
    init_and_apply(&tf, &after, "on the stack, the laptop's lock file");
    assert_eq!(lock_file(&after), lock, "the same hashes installed");
}
