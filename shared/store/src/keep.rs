//! A file kept as a publish keeps it, by whoever brings verified bytes
//! from elsewhere (`tfreg import`, `tfreg sync`).

use crate::{BlobKey, BlobStore, Digest, StoreError, file_chunks};

/// What [`keep_as`] found at its key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kept {
    /// The bytes are stored there now.
    Written,
    /// The same bytes were there already.
    Present,
    /// Other bytes are stored there (nothing was changed).
    Other(Digest),
}

/// Store `file` (whose bytes the caller verified to be `expected`) as the
/// published object `key`, as a publish does: through an upload slot of its
/// own (hashed on the way in, `expected` checked), claimed, kept create-only.
/// The slot is deleted whatever happens (`tfreg gc` takes it if not).
pub async fn keep_as(
    blobs: &dyn BlobStore,
    file: tokio::fs::File,
    expected: &Digest,
    key: &BlobKey,
) -> Result<Kept, StoreError> {
    let name = tfreg_model::blob_key::FileName::parse(key.file_name())
        .map_err(|e| StoreError::internal(e.to_string()))?;
    let slot = BlobKey::upload(&tfreg_model::blob_key::UploadId::random(), &name);
    let kept = async {
        blobs.receive(&slot, file_chunks(file), expected).await?;
        let claimed = blobs.claim(&slot, expected.size).await?;
        blobs.keep(&claimed, key).await
    }
    .await;
    let _ = blobs.delete(&slot).await;
    match kept {
        Ok(()) => Ok(Kept::Written),
        Err(StoreError::AlreadyExists(_)) => {
            let here = blobs.claim(key, u64::MAX).await?.digest;
            Ok(if here == *expected {
                Kept::Present
            } else {
                Kept::Other(here)
            })
        }
        Err(e) => Err(e),
    }
}

/// What makes a module archive's zip (`tfreg_verify`'s, which this crate
/// does not link): the checked archive, a directory for the new file; the
/// file's path.
pub type MakeZip = fn(std::fs::File, &std::path::Path) -> Result<std::path::PathBuf, String>;

/// Make the zip of a module version's checked archive `source` (whose
/// sha256 is `archive_sha256`) with `make`, keep it under a key of its own
/// and record it (the OCI view's layer, issue 40): the zip the OCI view
/// answers for that version from now on. The first one recorded stays
/// (what is returned), so its digest never changes.
pub async fn keep_module_zip(
    items: &dyn crate::ItemStore,
    blobs: &dyn BlobStore,
    module: &tfreg_model::address::ModuleName,
    version: &tfreg_model::version::Version,
    archive_sha256: &str,
    source: &std::fs::File,
    make: MakeZip,
) -> Result<tfreg_model::release::StoredFile, StoreError> {
    use std::io::Seek as _;
    let mut source = source.try_clone().map_err(StoreError::unavailable)?;
    let path = tokio::task::spawn_blocking(move || {
        source.rewind().map_err(|e| e.to_string())?;
        make(source, &std::env::temp_dir())
    })
    .await
    .map_err(StoreError::internal)?
    .map_err(|e| StoreError::internal(format!("the zip of {module} {version}: {e}")))?;
    let kept = keep_zip_file(items, blobs, module, version, archive_sha256, &path).await;
    let _ = tokio::fs::remove_file(&path).await;
    kept
}

async fn keep_zip_file(
    items: &dyn crate::ItemStore,
    blobs: &dyn BlobStore,
    module: &tfreg_model::address::ModuleName,
    version: &tfreg_model::version::Version,
    archive_sha256: &str,
    path: &std::path::Path,
) -> Result<tfreg_model::release::StoredFile, StoreError> {
    use sha2::Digest as _;
    let bytes = tokio::fs::read(path)
        .await
        .map_err(StoreError::unavailable)?;
    let digest = Digest {
        size: bytes.len() as u64,
        sha256: hex::encode(sha2::Sha256::digest(&bytes)),
    };
    drop(bytes);
    // Its name as a file (the layer's title, what `oras pull` writes); a
    // plain one where the module's would not make a file name (too long).
    let named = format!("{}-{}-{version}.zip", module.name, module.system);
    let (filename, name) = match tfreg_model::blob_key::FileName::parse(&named) {
        Ok(name) => (named, name),
        Err(_) => {
            let plain = "module.zip";
            let name = tfreg_model::blob_key::FileName::parse(plain)
                .map_err(|e| StoreError::internal(e.to_string()))?;
            (plain.to_string(), name)
        }
    };
    let key = BlobKey::archive(&tfreg_model::blob_key::UploadId::random(), &name);
    let file = tokio::fs::File::open(path)
        .await
        .map_err(StoreError::unavailable)?;
    if let Kept::Other(_) = keep_as(blobs, file, &digest, &key).await? {
        return Err(StoreError::internal(format!("{key} holds other bytes")));
    }
    let zip = tfreg_model::release::StoredFile {
        filename,
        sha256: digest.sha256,
        size: digest.size,
        key,
    };
    let recorded =
        crate::catalog::put_module_zip(items, module, version, archive_sha256, &zip).await?;
    if recorded.key != zip.key {
        // Another maker (a reindex beside the publish) recorded its zip
        // first: that one stays, and the copy just kept is nobody's.
        if let Err(e) = blobs.delete(&zip.key).await {
            tracing::warn!(key = %zip.key, "a zip no record names is left for gc: {e}");
        }
    }
    Ok(recorded)
}
