//! The pull-through cache's items on both backends (the embedded store and
//! DynamoDB on its emulator): one lease holder per fill and the waits,
//! take-overs and failures around it; releases created once with
//! immutable SHA256SUMS; archives added; lists marked failed; 404s
//! remembered with an expiry.

use std::collections::BTreeMap;

use tfreg_model::cache::lease::{LEASE_SECS, Outcome};
use tfreg_model::cache::{CachedArchive, CachedRelease, OriginList, OriginVersion, StoredArchive};
use tfreg_store::StoreError;
use tfreg_store::catalog::cache::{CachedProvider, KeepError};
use tfreg_store::catalog::lease::{self, Taken};
use tfreg_testkit::TestRegistry;

use crate::backend_contract::contract;

async fn one_holder_per_fill(r: TestRegistry) {
    let store = r.registry.items.as_ref();
    let what = "providers registry.example.test/hashicorp/null 1.0.0";
    let Taken::Held(a) = lease::take(store, what, "a", 1000).await.unwrap() else {
        panic!("the first taker holds it")
    };
    assert_eq!(
        lease::take(store, what, "b", 1001).await.unwrap(),
        Taken::Wait
    );
    // Other fills are independent.
    assert!(matches!(
        lease::take(store, "another", "b", 1001).await.unwrap(),
        Taken::Held(_)
    ));
    // Renewed, it holds on; its holder gone, it is taken over.
    let a = lease::renew(store, &a, 1050).await.unwrap();
    assert_eq!(
        lease::take(store, what, "b", 1100).await.unwrap(),
        Taken::Wait
    );
    let Taken::Held(b) = lease::take(store, what, "b", 1050 + LEASE_SECS)
        .await
        .unwrap()
    else {
        panic!("an expired lease is taken over")
    };
    // The old holder can neither renew nor release it now.
    assert!(matches!(
        lease::renew(store, &a, 1111).await,
        Err(StoreError::ConditionFailed)
    ));
    lease::release(store, &a, Outcome::Stored, 1111)
        .await
        .unwrap();
    assert_eq!(lease::lease(store, what).await.unwrap().unwrap(), b);
    // A failure is answered to those who come within seconds, then retried.
    let failed = Outcome::Failed {
        status: 502,
        message: "registry.example.test: bad signature".into(),
    };
    lease::release(store, &b, failed, 1200).await.unwrap();
    assert_eq!(
        lease::take(store, what, "c", 1205).await.unwrap(),
        Taken::Failed {
            status: 502,
            message: "registry.example.test: bad signature".into()
        }
    );
    assert!(matches!(
        lease::take(store, what, "c", 1210).await.unwrap(),
        Taken::Held(_)
    ));
}

/// Many processes at once: exactly one holds the lease.
async fn concurrent_takers_leave_one_holder(r: TestRegistry) {
    let store = r.registry.items.clone();
    let mut tasks = Vec::new();
    for i in 0..20 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            lease::take(store.as_ref(), "burst", &format!("p{i}"), 5000)
                .await
                .unwrap()
        }));
    }
    let mut held = 0;
    for t in tasks {
        if matches!(t.await.unwrap(), Taken::Held(_)) {
            held += 1;
        }
    }
    assert_eq!(held, 1);
}

fn release(version: &str, sums: &str) -> CachedRelease {
    CachedRelease {
        version: version.into(),
        protocols: vec!["5.0".into()],
        shasums_sha256: sums.repeat(32),
        signature_sha256: None,
        signed_by: Some("34365D9472D7468F".into()),
        key_expired: false,
        signing_keys: r#"{"gpg_public_keys":[]}"#.into(),
        platforms: BTreeMap::from([(
            "linux_amd64".to_string(),
            CachedArchive {
                filename: format!("terraform-provider-null_{version}_linux_amd64.zip"),
                sha256: "cd".repeat(32),
                stored: None,
            },
        )]),
        verified_at: 1,
    }
}

async fn cached_releases_and_lists(r: TestRegistry) {
    let store = r.registry.items.as_ref();
    let p = CachedProvider::new("registry.example.test", "hashicorp", "null");
    let other = CachedProvider::new("other.example.test", "hashicorp", "null");
    assert_eq!(p.origin_list(store).await.unwrap(), None);
    p.list_failed(store, 5).await.unwrap();
    assert_eq!(p.origin_list(store).await.unwrap(), None, "nothing to mark");
    let list = OriginList {
        versions: vec![OriginVersion {
            version: "1.0.0".into(),
            protocols: vec!["5.0".into()],
            platforms: vec!["linux_amd64".into()],
        }],
        warnings: vec![],
        fetched_at: 10,
        failed_at: None,
    };
    p.put_origin_list(store, &list).await.unwrap();
    p.list_failed(store, 20).await.unwrap();
    assert_eq!(
        p.origin_list(store).await.unwrap().unwrap().failed_at,
        Some(20)
    );
    assert_eq!(
        other.origin_list(store).await.unwrap(),
        None,
        "per upstream"
    );

    // Created once; the same SHA256SUMS again keeps it; others are refused.
    let first = release("1.0.0", "ab");
    assert_eq!(p.keep_release(store, &first).await.unwrap(), first);
    let mut again = first.clone();
    again.verified_at = 99;
    assert_eq!(p.keep_release(store, &again).await.unwrap(), first);
    assert!(matches!(
        p.keep_release(store, &release("1.0.0", "ef")).await,
        Err(KeepError::SumsChanged { .. })
    ));
    assert_eq!(
        p.release(store, "1.0.0").await.unwrap(),
        Some(first.clone())
    );
    // An archive is added once.
    let stored = StoredArchive {
        size: 42,
        h1: Some("h1:x=".into()),
        stored_at: 30,
    };
    let now = p
        .archive_stored(store, "1.0.0", "linux_amd64", stored.clone())
        .await
        .unwrap();
    assert_eq!(now.platforms["linux_amd64"].stored, Some(stored.clone()));
    let mut later = stored.clone();
    later.stored_at = 40;
    let kept = p
        .archive_stored(store, "1.0.0", "linux_amd64", later)
        .await
        .unwrap();
    assert_eq!(kept.platforms["linux_amd64"].stored, Some(stored));
    assert!(matches!(
        p.archive_stored(
            store,
            "1.0.0",
            "windows_386",
            StoredArchive {
                size: 1,
                h1: None,
                stored_at: 1
            }
        )
        .await,
        Err(StoreError::NotFound(_))
    ));
    p.keep_release(store, &release("1.1.0", "ab"))
        .await
        .unwrap();
    let all = p.releases(store).await.unwrap();
    assert_eq!(all.keys().collect::<Vec<_>>(), ["1.0.0", "1.1.0"]);
    assert!(other.releases(store).await.unwrap().is_empty());

    // An origin 404, remembered with its expiry.
    assert_eq!(p.missing(store, "9.9.9").await.unwrap(), None);
    p.note_missing(store, "9.9.9", 50, 60).await.unwrap();
    assert_eq!(p.missing(store, "9.9.9").await.unwrap(), Some(50));
}

/// A verified file is stored under its content-addressed key, hashed
/// again on the way; storing it twice is fine; bytes that are not what the
/// caller verified are refused and leave nothing.
async fn verified_files_are_stored_once(r: TestRegistry) {
    use tfreg_model::blob_key::{BlobKey, FileName};
    use tfreg_store::Digest;
    let s = r.registry.blobs.as_ref();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("archive.zip");
    std::fs::write(&path, b"the origin's bytes").unwrap();
    let sha256 = tfreg_model::hashing::sha256_hex(b"the origin's bytes");
    let digest = Digest {
        size: 18,
        sha256: sha256.clone(),
    };
    let name = FileName::parse("terraform-provider-null_1.0.0_linux_amd64.zip").unwrap();
    let key =
        BlobKey::cached("registry.example.test", "hashicorp", "null", &sha256, &name).unwrap();
    s.put_file(&key, &path, &digest).await.unwrap();
    s.put_file(&key, &path, &digest).await.unwrap();
    let url = r.registry.read_url(&key).await.unwrap();
    assert_eq!(r.download(&url).await.body.as_ref(), b"the origin's bytes");

    std::fs::write(&path, b"the origin's bytez").unwrap();
    let other = BlobKey::cached(
        "registry.example.test",
        "hashicorp",
        "null",
        &"0".repeat(64),
        &name,
    )
    .unwrap();
    let refused = s
        .put_file(
            &other,
            &path,
            &Digest {
                sha256: "0".repeat(64),
                ..digest.clone()
            },
        )
        .await;
    assert!(
        matches!(refused, Err(StoreError::Mismatch { .. })),
        "{refused:?}"
    );
    assert_eq!(
        s.list("cache/").await.unwrap(),
        std::slice::from_ref(&key),
        "nothing of the refused file"
    );
    let publish_key = BlobKey::archive(&tfreg_model::blob_key::UploadId::random(), &name);
    assert!(matches!(
        s.put_file(&publish_key, &path, &digest).await,
        Err(StoreError::Internal(_))
    ));
}

contract!(
    one_holder_per_fill,
    concurrent_takers_leave_one_holder,
    cached_releases_and_lists,
    verified_files_are_stored_once
);
