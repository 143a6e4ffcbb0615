use tfreg_model::blob_key::{FileName, UploadId};
use tfreg_model::release::Lifecycle;

use super::*;
use crate::catalog::codec::encode;

fn key(s: &str) -> BlobKey {
    BlobKey::parse(s).unwrap()
}

fn module_item(file_key: &BlobKey) -> Item {
    let release = ModuleRelease {
        version: "1.0.0".into(),
        file: StoredFile {
            filename: "m.tar.gz".into(),
            sha256: "ab".repeat(32),
            size: 42,
            key: file_key.clone(),
        },
        published_at: 1,
        lifecycle: Lifecycle::default(),
    };
    Item::new(
        "MODULE#acme/m/aws",
        "VERSION#1.0.0",
        encode(&release).unwrap(),
    )
}

#[test]
fn a_release_refers_to_its_file_and_an_unexpired_session_keeps_its_upload() {
    let id = UploadId::random();
    let kept = BlobKey::archive(&id, &FileName::parse("m.tar.gz").unwrap());
    let session = serde_json::json!({
        "target": "modules/acme/m/aws/2.0.0",
        "files": [],
        "created_at": 0,
        "expires_at": 100,
    });
    let open = UploadId::random();
    let items = vec![
        module_item(&kept),
        Item::new(
            format!("UPLOAD#{open}"),
            UPLOAD_SK,
            serde_json::to_vec(&session).unwrap(),
        ),
    ];
    let refs = references(&items, 50).unwrap();
    assert_eq!(refs.files[&kept].record, "MODULE#acme/m/aws VERSION#1.0.0");
    assert_eq!(refs.files[&kept].size, Some(42));
    assert!(refs.open_uploads.contains(&open.to_string()));
    // Expired: no longer in progress.
    assert!(references(&items, 100).unwrap().open_uploads.is_empty());
}

#[test]
fn an_unreadable_release_stops_gc() {
    let items = vec![Item::new(
        "MODULE#acme/m/aws",
        "VERSION#1.0.0",
        b"{".to_vec(),
    )];
    let e = references(&items, 0).unwrap_err().to_string();
    assert!(e.contains("MODULE#acme/m/aws VERSION#1.0.0"), "{e}");
}

#[test]
fn garbage_is_what_nothing_refers_to_and_is_older_than_the_cutoff() {
    let (a, b, c) = (UploadId::random(), UploadId::random(), UploadId::random());
    let referenced = key(&format!("archives/{a}/x.zip"));
    let orphan_old = key(&format!("archives/{b}/x.zip"));
    let orphan_new = key(&format!("archives/{b}/y.zip"));
    let upload_abandoned = key(&format!("uploads/{b}/x.zip"));
    let upload_open = key(&format!("uploads/{c}/x.zip"));
    let kept_by_open = key(&format!("archives/{c}/x.zip"));
    let cached = key("cache/example.com/p/hashicorp/null/abc/x.zip");
    let mut refs = References::default();
    refs.files.insert(
        referenced.clone(),
        Promised {
            sha256: "00".into(),
            size: None,
            record: "r".into(),
        },
    );
    refs.open_uploads.insert(c.to_string());
    let listed = vec![
        (referenced, 1),
        (orphan_old.clone(), 1),
        (orphan_new, 10),
        (upload_abandoned.clone(), 1),
        (upload_open, 1),
        (kept_by_open, 1),
        (cached, 1),
    ];
    let (garbage, recent) = garbage(&listed, &refs, 10);
    let got: Vec<(&str, Why)> = garbage.iter().map(|g| (g.key.as_str(), g.why)).collect();
    assert_eq!(
        got,
        [
            (orphan_old.as_str(), Why::Unreferenced),
            (upload_abandoned.as_str(), Why::AbandonedUpload),
        ]
    );
    assert_eq!(recent, 1, "the orphan modified at the cutoff waits");
}
