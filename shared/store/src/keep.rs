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
