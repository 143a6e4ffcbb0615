//! Concurrent publishes, in-process, on both backends. All at once: 50
//! different versions of one provider and 50 of one module; for each of the
//! two, 20 publishes of one version with different contents (exactly one
//! wins, the others get 409) and 20 of another version with identical
//! contents (exactly one publishes, the others answer "unchanged"). Then a
//! late wave of 5 more of each of those two versions, refused or "unchanged"
//! at `begin` already.
//!
//! Then every version is listed and downloads whole, with the bytes its
//! winner published; the blob store's `archives/` holds exactly the files of
//! the stored releases; and `uploads/` holds only what the protocol keeps: the
//! empty, closed slots of every publish that got past `begin` (a late upload
//! to them is refused; the bucket's lifecycle rule or `sweep_uploads` removes
//! them), none of them still open.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use http::StatusCode;
use tfreg_model::address::{ModuleName, ProviderName};
use tfreg_model::blob_key::{BlobKey, UploadId};
use tfreg_model::hashing::sha256_hex;
use tfreg_model::protocol::PublishRequest;
use tfreg_model::router::PublishTarget;
use tfreg_model::token::Scope;
use tfreg_model::version::Version;
use tfreg_store::Download;
use tfreg_store::catalog::{self, Origin};
use tfreg_testkit::{
    TestRegistry, TestResponse, TestSigner, module_archive, provider_release, provider_request,
};

use crate::backend_contract::{contract, module};

const NAMESPACE: &str = "acme";
const NAME: &str = "conc";
const MODULE: &str = "acme/conc/aws";
const DISTINCT: usize = 50;
const RACERS: usize = 20;
const LATE: usize = 5;
/// The version many publish with different contents, and the one many publish alike.
const CONTESTED: &str = "2.0.0";
const IDENTICAL: &str = "3.0.0";
/// One platform per contender of the contested provider version: their
/// releases differ in their files, not only in their bytes.
const OSES: [&str; 5] = ["linux", "darwin", "windows", "freebsd", "openbsd"];
const ARCHES: [&str; 5] = ["amd64", "arm64", "386", "arm", "riscv64"];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Provider,
    Module,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Group {
    /// A version of its own.
    Distinct,
    /// [`CONTESTED`], with contents of its own.
    Contested,
    /// [`IDENTICAL`], with the same contents as the others.
    Identical,
}

/// One publish to run.
struct Publish {
    label: String,
    kind: Kind,
    group: Group,
    target: PublishTarget,
    files: Vec<(String, Vec<u8>)>,
    request: PublishRequest,
}

impl Publish {
    fn file(&self, name: &str) -> &[u8] {
        &self
            .files
            .iter()
            .find(|(n, _)| n == name)
            .unwrap_or_else(|| panic!("{}: no file {name}", self.label))
            .1
    }
}

/// How a publish ended, and where: refused or "unchanged" at `begin` (no
/// upload slot was made) or at `complete`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ended {
    Published,
    Unchanged { at_begin: bool },
    Conflict { at_begin: bool },
}

impl Ended {
    fn of(p: &Publish, resp: &TestResponse, backend: &str) -> Ended {
        match resp.status {
            StatusCode::CREATED => {
                assert_eq!(resp.json()["status"], "published", "{backend}: {}", p.label);
                Ended::Published
            }
            StatusCode::OK => {
                let body = resp.json();
                assert_eq!(body["status"], "unchanged", "{backend}: {}", p.label);
                // begin answers {status, uploads}; complete {status, address, version}.
                Ended::Unchanged {
                    at_begin: body.get("address").is_none(),
                }
            }
            // begin: "this version is already published with different
            // content"; complete: "<kind> <name> <version> is already ...".
            StatusCode::CONFLICT => Ended::Conflict {
                at_begin: resp.error().starts_with("this version"),
            },
            other => panic!(
                "{backend}: {}: unexpected {other}: {}",
                p.label,
                resp.text()
            ),
        }
    }

    fn made_slots(self) -> bool {
        !matches!(
            self,
            Ended::Unchanged { at_begin: true } | Ended::Conflict { at_begin: true }
        )
    }
}

fn provider_target(version: &str) -> PublishTarget {
    PublishTarget::Provider {
        provider: ProviderName::parse(NAMESPACE, NAME).unwrap(),
        version: Version::parse(version).unwrap(),
    }
}

/// Every publish of the test: those started at once, then the late wave.
fn publishes(signer: &TestSigner) -> (Vec<Publish>, Vec<Publish>) {
    let (mut out, mut late) = (Vec::new(), Vec::new());
    let provider = |label: String, group, version: &str, files| Publish {
        label,
        kind: Kind::Provider,
        group,
        target: provider_target(version),
        files,
        request: provider_request(signer),
    };
    let module_publish = |label: String, group, version: &str, archive: Vec<u8>| Publish {
        label,
        kind: Kind::Module,
        group,
        target: module(MODULE, version),
        files: vec![("m.tar.gz".to_string(), archive)],
        request: PublishRequest::default(),
    };
    let archive = |main_tf: &str| module_archive(&[("main.tf", main_tf)]);
    for i in 0..DISTINCT {
        let version = format!("1.0.{i}");
        let files = provider_release(NAME, &version, &["linux_amd64"], signer);
        out.push(provider(
            format!("provider {version}"),
            Group::Distinct,
            &version,
            files,
        ));
        out.push(module_publish(
            format!("module {version}"),
            Group::Distinct,
            &version,
            archive(&format!("# module version {version}\n")),
        ));
    }
    let identical = provider_release(NAME, IDENTICAL, &["linux_amd64", "darwin_arm64"], signer);
    let identical_archive = archive("# alike\n");
    for i in 0..RACERS + LATE {
        if i == RACERS {
            std::mem::swap(&mut out, &mut late);
        }
        let platform = format!("{}_{}", OSES[i % OSES.len()], ARCHES[i / OSES.len()]);
        let files = provider_release(NAME, CONTESTED, &[platform.as_str()], signer);
        out.push(provider(
            format!("provider {CONTESTED} contender {i} ({platform})"),
            Group::Contested,
            CONTESTED,
            files,
        ));
        out.push(module_publish(
            format!("module {CONTESTED} contender {i}"),
            Group::Contested,
            CONTESTED,
            archive(&format!("# contender {i}\n")),
        ));
        out.push(provider(
            format!("provider {IDENTICAL} #{i}"),
            Group::Identical,
            IDENTICAL,
            identical.clone(),
        ));
        out.push(module_publish(
            format!("module {IDENTICAL} #{i}"),
            Group::Identical,
            IDENTICAL,
            identical_archive.clone(),
        ));
    }
    std::mem::swap(&mut out, &mut late);
    (out, late)
}

/// Run `publishes` at once: each waits for the others to be ready, then all go.
/// More than a token or a namespace may have in progress at once (20 and
/// 100): a publish refused with 429 (at `begin`, before anything is stored)
/// begins again shortly, as a client told `Retry-After` would, until it is
/// let in (each publish that ends frees its places).
async fn run_at_once(
    r: &Arc<TestRegistry>,
    token: &str,
    publishes: Vec<Publish>,
) -> Vec<(Publish, Ended)> {
    let barrier = Arc::new(tokio::sync::Barrier::new(publishes.len()));
    let tasks: Vec<_> = publishes
        .into_iter()
        .map(|p| {
            let (r, token, barrier) = (r.clone(), token.to_string(), barrier.clone());
            tokio::spawn(async move {
                barrier.wait().await;
                let mut waits = 0;
                loop {
                    let resp = r
                        .publish(&p.target, &token, &p.files, p.request.clone())
                        .await;
                    if resp.status != StatusCode::TOO_MANY_REQUESTS || waits == 2_000 {
                        break (p, resp);
                    }
                    waits += 1;
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                }
            })
        })
        .collect();
    let mut results = Vec::new();
    for task in futures_util::future::join_all(tasks).await {
        let (p, resp) = task.unwrap();
        let ended = Ended::of(&p, &resp, r.name);
        results.push((p, ended));
    }
    results
}

async fn concurrent_publishes_land_whole_with_one_winner_and_no_orphan(r: TestRegistry) {
    let name = r.name;
    let r = Arc::new(r);
    let token = r.token(Scope::Publish, None).await;
    let signer = TestSigner::rsa();
    let (first, late) = publishes(&signer);
    let started = std::time::Instant::now();
    let mut results = run_at_once(&r, &token, first).await;
    eprintln!(
        "FIGURE {name}: {} concurrent publishes took {:.2} s",
        results.len(),
        started.elapsed().as_secs_f64()
    );
    // Once the versions exist, begin answers: no upload slot is made.
    for (p, ended) in run_at_once(&r, &token, late).await {
        let want = match p.group {
            Group::Contested => Ended::Conflict { at_begin: true },
            _ => Ended::Unchanged { at_begin: true },
        };
        assert_eq!(ended, want, "{name}: late {}", p.label);
        results.push((p, ended));
    }

    // Outcomes, counted by kind, group and ending.
    let mut outcomes: BTreeMap<String, usize> = BTreeMap::new();
    for (p, ended) in &results {
        *outcomes
            .entry(format!("{:?} {:?} {ended:?}", p.kind, p.group))
            .or_default() += 1;
    }
    eprintln!("{name}: outcomes {outcomes:#?}");
    for (p, ended) in &results {
        match p.group {
            Group::Distinct => assert_eq!(*ended, Ended::Published, "{name}: {}", p.label),
            Group::Contested => assert!(
                matches!(ended, Ended::Published | Ended::Conflict { .. }),
                "{name}: {}: {ended:?}",
                p.label
            ),
            Group::Identical => assert!(
                matches!(ended, Ended::Published | Ended::Unchanged { .. }),
                "{name}: {}: {ended:?}",
                p.label
            ),
        }
    }
    let winners: Vec<&Publish> = results
        .iter()
        .filter(|(_, e)| *e == Ended::Published)
        .map(|(p, _)| p)
        .collect();
    for kind in [Kind::Provider, Kind::Module] {
        for group in [Group::Contested, Group::Identical] {
            let n = winners
                .iter()
                .filter(|p| p.kind == kind && p.group == group)
                .count();
            assert_eq!(
                n, 1,
                "{name}: {kind:?} {group:?}: exactly one publish wins: {outcomes:?}"
            );
        }
    }

    // Every version is listed and whole, with its winner's bytes.
    let mut expected_versions: Vec<String> = (0..DISTINCT).map(|i| format!("1.0.{i}")).collect();
    expected_versions.extend([CONTESTED.to_string(), IDENTICAL.to_string()]);
    expected_versions.sort();
    let provider = ProviderName::parse(NAMESPACE, NAME).unwrap();
    let listed = r
        .get(&format!("/v1/providers/{provider}/versions"))
        .await
        .json();
    assert_eq!(
        sorted_versions(&listed["versions"]),
        expected_versions,
        "{name}: provider versions"
    );
    let listed = r
        .get(&format!("/v1/modules/{MODULE}/versions"))
        .await
        .json();
    assert_eq!(
        sorted_versions(&listed["modules"][0]["versions"]),
        expected_versions,
        "{name}: module versions"
    );
    for p in &winners {
        match p.kind {
            Kind::Provider => provider_is_whole(&r, p).await,
            Kind::Module => module_is_whole(&r, p).await,
        }
    }

    // No orphan: the archives are exactly the stored releases' files.
    let items = r.registry.items.as_ref();
    let mut referenced = BTreeSet::new();
    let mut zips = BTreeSet::new();
    for p in &winners {
        referenced.extend(catalog::release_keys(items, &p.target).await.unwrap());
        // A module's OCI zip, made once its publish won (issue 40).
        if let PublishTarget::Module { module, version } = &p.target {
            let release = catalog::module_release(items, module, version)
                .await
                .unwrap()
                .expect("the winner's release");
            let zip = catalog::module_zip(items, module, &release).await.unwrap();
            zips.extend(zip.map(|z| z.key));
        }
    }
    let archives: BTreeSet<BlobKey> = r
        .registry
        .blobs
        .list("archives/")
        .await
        .unwrap()
        .into_iter()
        .collect();
    referenced.extend(zips.iter().cloned());
    let orphans: Vec<_> = archives.difference(&referenced).collect();
    let missing: Vec<_> = referenced.difference(&archives).collect();
    assert!(
        orphans.is_empty() && missing.is_empty(),
        "{name}: archives no release refers to: {orphans:?}; files of releases not stored: {missing:?}"
    );

    // Upload slots: only the closed (empty) slots of the publishes that got
    // past begin, every publish finished (its session taken).
    let mut slots: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for key in r.registry.blobs.list("uploads/").await.unwrap() {
        let len = match r.registry.blobs.download(&key, true).await {
            Ok(Download::Stream { len, .. }) => len,
            // A small file's bytes may come with a HEAD (the directory store).
            Ok(Download::Whole(bytes)) => bytes.len() as u64,
            Ok(Download::Redirect(_)) => panic!("{name}: HEAD of {key} redirected"),
            Err(e) => panic!("{name}: HEAD of {key}: {e}"),
        };
        assert_eq!(
            len, 0,
            "{name}: {key} still holds {len} bytes: an upload slot left open"
        );
        let (id, file) = key.as_str()["uploads/".len()..].split_once('/').unwrap();
        slots
            .entry(id.to_string())
            .or_default()
            .insert(file.to_string());
    }
    for id in slots.keys() {
        let session = tfreg_store::catalog::uploads::get(items, &UploadId::parse(id).unwrap())
            .await
            .unwrap();
        assert!(
            session.is_none(),
            "{name}: upload {id} is still open: {session:?}"
        );
    }
    let declared: Vec<BTreeSet<String>> = results
        .iter()
        .filter(|(_, e)| e.made_slots())
        .map(|(p, _)| p.files.iter().map(|(n, _)| n.clone()).collect())
        .collect();
    assert_eq!(
        slots.len(),
        declared.len(),
        "{name}: one set of closed slots per publish that got past begin: {outcomes:?}"
    );
    for (id, files) in &slots {
        assert!(
            declared.contains(files),
            "{name}: upload {id} holds slots {files:?}, which no publish declared"
        );
    }
    // (An OCI zip is made in a key of its own, not a publish's.)
    for key in archives.difference(&zips) {
        let id = key.as_str()["archives/".len()..].split('/').next().unwrap();
        assert!(
            slots.contains_key(id),
            "{name}: {key} was kept, but its publish's slots are not there, closed"
        );
    }
    eprintln!(
        "{name}: {} archives, {} closed upload sets, no orphan",
        archives.len(),
        slots.len()
    );
}

/// The `version` of each entry of a versions list, sorted.
fn sorted_versions(list: &serde_json::Value) -> Vec<String> {
    let mut versions: Vec<String> = list
        .as_array()
        .unwrap_or_else(|| panic!("a versions list, got {list}"))
        .iter()
        .map(|v| v["version"].as_str().unwrap().to_string())
        .collect();
    versions.sort();
    versions
}

/// GET a URL the registry handed out: its bytes (200 required).
async fn fetch(r: &TestRegistry, url: &str, what: &str) -> Vec<u8> {
    let got = r.download(url).await;
    got.expect(StatusCode::OK, &format!("{}: {what}", r.name));
    got.body.to_vec()
}

/// The winner's release is stored as published, and every file downloads
/// with its bytes.
async fn provider_is_whole(r: &TestRegistry, p: &Publish) {
    let PublishTarget::Provider { provider, version } = &p.target else {
        unreachable!()
    };
    let release = catalog::provider_release(
        r.registry.items.as_ref(),
        &Origin::Registry,
        provider,
        version,
    )
    .await
    .unwrap()
    .unwrap_or_else(|| panic!("{}: {} is not stored", r.name, p.label));
    let mut published: Vec<(String, String)> = p
        .files
        .iter()
        .filter(|(n, _)| !n.ends_with("_manifest.json"))
        .map(|(n, b)| (n.clone(), sha256_hex(b)))
        .collect();
    published.sort();
    assert_eq!(release.content(), published, "{}: {}", r.name, p.label);
    for package in &release.packages {
        let download = r
            .get(&format!(
                "/v1/providers/{provider}/{version}/download/{}/{}",
                package.os, package.arch
            ))
            .await;
        download.expect(StatusCode::OK, &format!("{}: {}", r.name, p.label));
        let download = download.json();
        let filename = download["filename"].as_str().unwrap();
        for (url, file) in [
            ("download_url", filename.to_string()),
            (
                "shasums_url",
                format!("terraform-provider-{NAME}_{version}_SHA256SUMS"),
            ),
            (
                "shasums_signature_url",
                format!("terraform-provider-{NAME}_{version}_SHA256SUMS.sig"),
            ),
        ] {
            let what = format!("{} {url}", p.label);
            let bytes = fetch(r, download[url].as_str().unwrap(), &what).await;
            assert!(bytes == p.file(&file), "{}: {what}: other bytes", r.name);
        }
    }
}

async fn module_is_whole(r: &TestRegistry, p: &Publish) {
    let PublishTarget::Module { module, version } = &p.target else {
        unreachable!()
    };
    let resp = r
        .get(&format!("/v1/modules/{module}/{version}/download"))
        .await;
    resp.expect(StatusCode::NO_CONTENT, &format!("{}: {}", r.name, p.label));
    let url = resp.headers["x-terraform-get"]
        .to_str()
        .unwrap()
        .to_string();
    let bytes = fetch(r, &url, &p.label).await;
    assert!(
        bytes == p.file("m.tar.gz"),
        "{}: {}: other bytes",
        r.name,
        p.label
    );
    let stored = catalog::module_release(
        r.registry.items.as_ref(),
        &ModuleName::parse(NAMESPACE, NAME, "aws").unwrap(),
        version,
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(stored.file.sha256, sha256_hex(p.file("m.tar.gz")));
}

contract!(concurrent_publishes_land_whole_with_one_winner_and_no_orphan);
