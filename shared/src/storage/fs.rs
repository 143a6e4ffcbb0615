//! The embedded blob store: a directory of archives.
//!
//! Nothing is ever written in place: every object is written to `.tmp/` and
//! then linked or renamed into its key. That is what makes a claimed upload
//! safe: [`BlobStore::claim`] hard-links the uploaded file's inode to a private
//! name, and no later request can change the bytes of that inode.

use std::io::{ErrorKind, Seek};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use sha2::Digest as _;

use super::{
    BlobKey, BlobStore, ByteStream, ClaimSource, Claimed, Digest, Download, StoreError, UploadVia,
};

/// [`BlobStore`] on a local directory; objects are files under `root`.
#[derive(Debug, Clone)]
pub struct FsBlobStore {
    root: PathBuf,
}

const TMP: &str = ".tmp";

fn io_error(key: &str, e: std::io::Error) -> StoreError {
    match e.kind() {
        ErrorKind::NotFound => StoreError::NotFound(key.to_string()),
        ErrorKind::AlreadyExists => StoreError::AlreadyExists(key.to_string()),
        _ => StoreError::Unavailable(format!("{key}: {e}")),
    }
}

impl FsBlobStore {
    /// A store rooted at `root` (created if missing).
    pub fn open(root: &Path) -> Result<Self, StoreError> {
        std::fs::create_dir_all(root.join(TMP)).map_err(StoreError::unavailable)?;
        Ok(Self {
            root: root.to_path_buf(),
        })
    }

    fn path(&self, key: &BlobKey) -> PathBuf {
        // A BlobKey is safe by construction: relative, no `.` or `..` segments.
        self.root.join(key.as_str())
    }

    fn temp_path(&self) -> PathBuf {
        self.root
            .join(TMP)
            .join(format!("{:032x}", rand::random::<u128>()))
    }

    /// Link `from` to the key's path, creating its directory; fails with
    /// [`StoreError::AlreadyExists`] rather than replace anything.
    async fn link_new(&self, from: &Path, key: &BlobKey) -> Result<(), StoreError> {
        let dest = self.path(key);
        if let Some(parent) = dest.parent() {
            tokio::fs::create_dir_all(parent)
                .await
                .map_err(|e| io_error(key.as_str(), e))?;
        }
        tokio::fs::hard_link(from, &dest)
            .await
            .map_err(|e| io_error(key.as_str(), e))
    }

    /// Remove directories left empty under the root, from `key`'s upwards.
    async fn prune_dirs(&self, key: &BlobKey) {
        let mut dir = self.path(key);
        while dir.pop() && dir != self.root {
            if tokio::fs::remove_dir(&dir).await.is_err() {
                break;
            }
        }
    }

    /// Delete upload directories (slots and their tombstones) untouched for
    /// longer than `max_age`: every URL that could write them has expired.
    pub fn sweep_uploads(&self, max_age: Duration) -> Result<usize, StoreError> {
        let uploads = self.root.join(crate::blob_key::UPLOADS);
        let entries = match std::fs::read_dir(&uploads) {
            Ok(entries) => entries,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(0),
            Err(e) => return Err(StoreError::unavailable(e)),
        };
        let now = SystemTime::now();
        let mut removed = 0;
        for entry in entries.flatten() {
            let old = entry
                .metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|t| now.duration_since(t).unwrap_or_default() > max_age);
            if old && std::fs::remove_dir_all(entry.path()).is_ok() {
                removed += 1;
            }
        }
        Ok(removed)
    }
}

fn hash_file(file: &mut std::fs::File) -> std::io::Result<Digest> {
    let mut hasher = sha2::Sha256::new();
    let size = std::io::copy(file, &mut hasher)?;
    file.rewind()?;
    Ok(Digest {
        size,
        sha256: hex::encode(hasher.finalize()),
    })
}

fn list_under(dir: &Path, rel: &str, prefix: &str, out: &mut Vec<BlobKey>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let key = if rel.is_empty() {
            name.clone()
        } else {
            format!("{rel}/{name}")
        };
        if key == TMP || !(key.starts_with(prefix) || prefix.starts_with(&key)) {
            continue;
        }
        match entry.file_type() {
            Ok(t) if t.is_dir() => list_under(&entry.path(), &key, prefix, out),
            Ok(t) if t.is_file() => {
                if let Ok(k) = BlobKey::parse(&key)
                    && key.starts_with(prefix)
                {
                    out.push(k);
                }
            }
            _ => {}
        }
    }
}

#[async_trait]
impl BlobStore for FsBlobStore {
    async fn receive(
        &self,
        key: &BlobKey,
        body: ByteStream,
        expected: &Digest,
    ) -> Result<(), StoreError> {
        let tmp = self.temp_path();
        let result = async {
            let mut file = tokio::fs::File::create(&tmp)
                .await
                .map_err(StoreError::unavailable)?;
            let got = super::write_hashed(
                body,
                super::StreamFrom::Client,
                &mut file,
                key.as_str(),
                expected.size,
            )
            .await?;
            super::check_digest(key, &got, expected)?;
            file.sync_all().await.map_err(StoreError::unavailable)?;
            self.link_new(&tmp, key).await
        }
        .await;
        let _ = tokio::fs::remove_file(&tmp).await;
        result
    }

    async fn claim(&self, key: &BlobKey, max: u64) -> Result<Claimed, StoreError> {
        let tmp = self.temp_path();
        tokio::fs::hard_link(self.path(key), &tmp)
            .await
            .map_err(|e| io_error(key.as_str(), e))?;
        // From here the link is ours; TempPath removes it on every exit.
        let link = tempfile::TempPath::try_from_path(tmp).map_err(StoreError::internal)?;
        let path = link.to_path_buf();
        let key_text = key.to_string();
        let (file, digest) = tokio::task::spawn_blocking(move || {
            let mut file = std::fs::File::open(&path).map_err(StoreError::unavailable)?;
            let len = file.metadata().map_err(StoreError::unavailable)?.len();
            if len > max {
                return Err(StoreError::TooLarge { key: key_text, max });
            }
            let digest = hash_file(&mut file).map_err(StoreError::unavailable)?;
            Ok((file, digest))
        })
        .await
        .map_err(StoreError::internal)??;
        Ok(Claimed {
            file,
            digest,
            source: ClaimSource::Link(link),
        })
    }

    async fn keep(&self, claimed: &Claimed, dest: &BlobKey) -> Result<(), StoreError> {
        match &claimed.source {
            ClaimSource::Link(link) => self.link_new(link, dest).await,
            ClaimSource::Object { .. } => Err(StoreError::internal(
                "an upload claimed by another store cannot be kept here",
            )),
        }
    }

    async fn close_upload(&self, key: &BlobKey) -> Result<(), StoreError> {
        let dest = self.path(key);
        if let Some(parent) = dest.parent() {
            tokio::fs::create_dir_all(parent)
                .await
                .map_err(StoreError::unavailable)?;
        }
        let tmp = self.temp_path();
        let result = async {
            tokio::fs::File::create(&tmp)
                .await
                .map_err(StoreError::unavailable)?;
            // Replaces the upload (if any) with an empty file: the slot stays
            // taken, so a late upload is refused.
            tokio::fs::rename(&tmp, &dest)
                .await
                .map_err(StoreError::unavailable)
        }
        .await;
        if result.is_err() {
            let _ = tokio::fs::remove_file(&tmp).await;
        }
        result
    }

    async fn delete(&self, key: &BlobKey) -> Result<(), StoreError> {
        match tokio::fs::remove_file(self.path(key)).await {
            Ok(()) => {
                self.prune_dirs(key).await;
                Ok(())
            }
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io_error(key.as_str(), e)),
        }
    }

    async fn list(&self, prefix: &str) -> Result<Vec<BlobKey>, StoreError> {
        let root = self.root.clone();
        let prefix = prefix.to_string();
        tokio::task::spawn_blocking(move || {
            let mut out = Vec::new();
            list_under(&root, "", &prefix, &mut out);
            out
        })
        .await
        .map_err(StoreError::internal)
    }

    async fn download(&self, key: &BlobKey, head: bool) -> Result<Download, StoreError> {
        let file = tokio::fs::File::open(self.path(key))
            .await
            .map_err(|e| io_error(key.as_str(), e))?;
        let len = file
            .metadata()
            .await
            .map_err(StoreError::unavailable)?
            .len();
        let body: ByteStream = if head {
            Box::pin(futures_util::stream::empty())
        } else {
            Box::pin(tokio_util::io::ReaderStream::new(file))
        };
        Ok(Download::Stream { len, body })
    }

    async fn upload_via(
        &self,
        _key: &BlobKey,
        _expected: &Digest,
    ) -> Result<UploadVia, StoreError> {
        Ok(UploadVia::Registry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::blob_key::{FileName, UploadId};

    #[tokio::test]
    async fn sweeping_removes_only_old_upload_slots() {
        let dir = tempfile::tempdir().unwrap();
        let store = FsBlobStore::open(dir.path()).unwrap();
        let name = FileName::parse("m.tar.gz").unwrap();
        let (old, new) = (UploadId::random(), UploadId::random());
        for id in [&old, &new] {
            store
                .close_upload(&BlobKey::upload(id, &name))
                .await
                .unwrap();
        }
        let archive = BlobKey::archive(&old, &name);
        std::fs::create_dir_all(dir.path().join("archives").join(old.as_str())).unwrap();
        std::fs::write(dir.path().join(archive.as_str()), b"kept").unwrap();
        let past = SystemTime::now() - Duration::from_secs(7200);
        std::fs::File::open(dir.path().join("uploads").join(old.as_str()))
            .unwrap()
            .set_modified(past)
            .unwrap();
        assert_eq!(store.sweep_uploads(Duration::from_secs(3600)).unwrap(), 1);
        let left = store.list("uploads/").await.unwrap();
        assert_eq!(left, [BlobKey::upload(&new, &name)]);
        assert_eq!(
            store.list("archives/").await.unwrap(),
            [archive],
            "archives are never swept"
        );
    }
}
