//! Size caps, the deadline and the read timeout: an origin that sends too
//! much, claims too much or sends too slowly is cut off, and a partial
//! archive never stays on disk.

use std::time::Duration;

use sha2::{Digest, Sha256};
use tfreg_cache::origin::{OriginError, SmallFile, Timeouts};
use tokio::time::Instant;

use crate::support::{Body, Rig, Script, at, soon};

const MIB: u64 = 1024 * 1024;

#[tokio::test]
async fn an_archive_is_written_and_hashed_on_the_way() {
    let rig = Rig::new().await;
    let bytes: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    rig.origin.script("/p.zip", Script::bytes(bytes.clone()));
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("p.zip");
    let fetched = rig
        .client
        .fetch_archive(&at("/p.zip"), &dest, MIB, soon())
        .await
        .unwrap();
    assert_eq!(fetched.len, bytes.len() as u64);
    assert_eq!(fetched.sha256, <[u8; 32]>::from(Sha256::digest(&bytes)));
    assert_eq!(std::fs::read(&dest).unwrap(), bytes);
    // Never over an existing file, which stays as it was.
    let err = rig
        .client
        .fetch_archive(&at("/p.zip"), &dest, MIB, soon())
        .await
        .unwrap_err();
    assert!(matches!(err, OriginError::Local { .. }), "{err:?}");
    assert_eq!(std::fs::read(&dest).unwrap(), bytes);
}

#[tokio::test]
async fn bodies_over_the_cap_are_cut_and_leave_no_file() {
    let rig = Rig::with(|s| s.caps.archive = 2 * MIB).await;
    rig.origin
        .script("/endless.zip", Script::body(200, Body::Endless))
        .script("/huge.zip", Script::body(200, Body::Claims(2048 * MIB)))
        .script("/exact.zip", Script::bytes(vec![7u8; MIB as usize]))
        .script(
            "/.well-known/terraform.json",
            Script::body(200, Body::Endless).header("content-type", "application/json"),
        );
    let dir = tempfile::tempdir().unwrap();
    for path in ["/endless.zip", "/huge.zip"] {
        let dest = dir.path().join("a.zip");
        let started = Instant::now();
        let err = rig
            .client
            .fetch_archive(&at(path), &dest, MIB, soon())
            .await
            .unwrap_err();
        assert!(
            matches!(err, OriginError::TooLarge { cap: MIB, .. }),
            "{path}: {err:?}"
        );
        assert!(!dest.exists(), "{path}: the partial file stayed");
        // The claimed 2 GiB is refused on its Content-Length, unread.
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{path}: {:?}",
            started.elapsed()
        );
    }
    // Exactly the cap is fine.
    let dest = dir.path().join("exact.zip");
    let fetched = rig
        .client
        .fetch_archive(&at("/exact.zip"), &dest, MIB, soon())
        .await
        .unwrap();
    assert_eq!(fetched.len, MIB);
    // And the cap is never above the settings' own.
    let err = rig
        .client
        .fetch_archive(
            &at("/endless.zip"),
            &dir.path().join("b.zip"),
            u64::MAX,
            soon(),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, OriginError::TooLarge { cap, .. } if cap == 2 * MIB),
        "{err:?}"
    );
    // Metadata: the discovery document's 1 MiB.
    let err = rig.client.discover(soon()).await.unwrap_err();
    assert!(
        matches!(err, OriginError::TooLarge { cap: MIB, .. }),
        "{err:?}"
    );
}

#[tokio::test]
async fn a_slow_drip_meets_the_deadline_and_leaves_no_file() {
    let rig = Rig::new().await;
    rig.origin
        .script(
            "/slow.zip",
            Script::body(200, Body::Drip(Duration::from_millis(100))),
        )
        .script(
            "/slow-sums",
            Script::body(200, Body::Drip(Duration::from_millis(100))),
        );
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("slow.zip");
    let started = Instant::now();
    let deadline = started + Duration::from_millis(1500);
    let err = rig
        .client
        .fetch_archive(&at("/slow.zip"), &dest, MIB, deadline)
        .await
        .unwrap_err();
    assert!(err.is_transient(), "{err:?}");
    assert!(err.to_string().contains("deadline"), "{err}");
    assert!(!dest.exists(), "the partial file stayed");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    let err = rig
        .client
        .fetch_small(
            &at("/slow-sums"),
            SmallFile::Shasums,
            Instant::now() + Duration::from_millis(500),
        )
        .await
        .unwrap_err();
    assert!(err.is_transient(), "{err:?}");
}

/// A body that stops (no byte for longer than the read timeout) fails
/// long before the deadline.
#[tokio::test]
async fn a_stalled_body_meets_the_read_timeout() {
    let rig = Rig::with(|s| {
        s.timeouts = Timeouts {
            connect: Duration::from_secs(2),
            read: Duration::from_millis(300),
        }
    })
    .await;
    rig.origin.script(
        "/stalled",
        Script::body(200, Body::Drip(Duration::from_secs(30))),
    );
    let started = Instant::now();
    let err = rig
        .client
        .fetch_small(&at("/stalled"), SmallFile::Signature, soon())
        .await
        .unwrap_err();
    assert!(err.is_transient(), "{err:?}");
    assert!(err.to_string().contains("timed out"), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn statuses() {
    let rig = Rig::new().await;
    rig.origin
        .script("/busy", Script::status(503).header("retry-after", "7"))
        .script("/slow-down", Script::status(429))
        .script("/teapot", Script::status(418));
    assert!(matches!(
        get(&rig, "/missing").await,
        Err(OriginError::NotFound { .. })
    ));
    match get(&rig, "/busy").await {
        Err(OriginError::Transient { retry_after, .. }) => {
            assert_eq!(retry_after, Some(Duration::from_secs(7)))
        }
        other => panic!("{other:?}"),
    }
    assert!(get(&rig, "/slow-down").await.unwrap_err().is_transient());
    assert!(matches!(
        get(&rig, "/teapot").await,
        Err(OriginError::Protocol { .. })
    ));
}

async fn get(rig: &Rig, path: &str) -> Result<Vec<u8>, OriginError> {
    rig.client
        .fetch_small(&at(path), SmallFile::Shasums, soon())
        .await
}
