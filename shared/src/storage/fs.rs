//! The embedded blob store: a directory of archives.

use std::path::{Path, PathBuf};

use async_trait::async_trait;

use super::{BlobStore, ByteStream, Download, StoreError, UploadVia};

/// [`BlobStore`] on a local directory; objects are files under `root`.
#[derive(Debug, Clone)]
pub struct FsBlobStore {
    root: PathBuf,
}

/// True when `key` is a safe relative object key: `/`-separated segments of
/// letters, digits, `.`, `_`, `-`, none empty, `.` or `..`.
pub fn is_valid_key(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= 512
        && key.split('/').all(|seg| {
            !seg.is_empty()
                && seg != "."
                && seg != ".."
                && seg
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        })
}

impl FsBlobStore {
    /// A store rooted at `root` (created if missing).
    pub fn open(root: &Path) -> Result<Self, StoreError> {
        std::fs::create_dir_all(root.join(".tmp")).map_err(StoreError::backend)?;
        Ok(Self {
            root: root.to_path_buf(),
        })
    }

    fn path(&self, key: &str) -> Result<PathBuf, StoreError> {
        if !is_valid_key(key) {
            return Err(StoreError::NotFound(key.to_string()));
        }
        Ok(self.root.join(key))
    }

    fn temp_path(&self) -> PathBuf {
        self.root
            .join(".tmp")
            .join(format!("{:032x}", rand::random::<u128>()))
    }
}

fn not_found_or_backend(key: &str, e: std::io::Error) -> StoreError {
    if e.kind() == std::io::ErrorKind::NotFound {
        StoreError::NotFound(key.to_string())
    } else {
        StoreError::backend(e)
    }
}

#[async_trait]
impl BlobStore for FsBlobStore {
    async fn size(&self, key: &str) -> Result<Option<u64>, StoreError> {
        match tokio::fs::metadata(self.path(key)?).await {
            Ok(m) if m.is_file() => Ok(Some(m.len())),
            Ok(_) => Ok(None),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(StoreError::backend(e)),
        }
    }

    async fn fetch(&self, key: &str, max: u64) -> Result<std::fs::File, StoreError> {
        let file =
            std::fs::File::open(self.path(key)?).map_err(|e| not_found_or_backend(key, e))?;
        let len = file.metadata().map_err(StoreError::backend)?.len();
        if len > max {
            return Err(StoreError::TooLarge {
                key: key.to_string(),
                max,
            });
        }
        Ok(file)
    }

    async fn write(&self, key: &str, body: ByteStream, max: u64) -> Result<u64, StoreError> {
        let dest = self.path(key)?;
        let tmp = self.temp_path();
        let result = async {
            let mut file = tokio::fs::File::create(&tmp)
                .await
                .map_err(StoreError::backend)?;
            let written = super::write_limited(body, &mut file, key, max).await?;
            file.sync_all().await.map_err(StoreError::backend)?;
            if let Some(parent) = dest.parent() {
                tokio::fs::create_dir_all(parent)
                    .await
                    .map_err(StoreError::backend)?;
            }
            tokio::fs::rename(&tmp, &dest)
                .await
                .map_err(StoreError::backend)?;
            Ok(written)
        }
        .await;
        if result.is_err() {
            let _ = tokio::fs::remove_file(&tmp).await;
        }
        result
    }

    async fn copy(&self, from: &str, to: &str) -> Result<(), StoreError> {
        let (src, dest) = (self.path(from)?, self.path(to)?);
        let tmp = self.temp_path();
        tokio::fs::copy(&src, &tmp)
            .await
            .map_err(|e| not_found_or_backend(from, e))?;
        if let Some(parent) = dest.parent() {
            tokio::fs::create_dir_all(parent)
                .await
                .map_err(StoreError::backend)?;
        }
        tokio::fs::rename(&tmp, &dest)
            .await
            .map_err(StoreError::backend)
    }

    async fn delete(&self, key: &str) -> Result<(), StoreError> {
        match tokio::fs::remove_file(self.path(key)?).await {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(StoreError::backend(e)),
        }
    }

    async fn download(&self, key: &str, head: bool) -> Result<Download, StoreError> {
        let path = self.path(key)?;
        let file = tokio::fs::File::open(&path)
            .await
            .map_err(|e| not_found_or_backend(key, e))?;
        let len = file.metadata().await.map_err(StoreError::backend)?.len();
        let body: ByteStream = if head {
            Box::pin(futures_util::stream::empty())
        } else {
            Box::pin(tokio_util::io::ReaderStream::new(file))
        };
        Ok(Download::Stream { len, body })
    }

    async fn upload_via(&self, _key: &str) -> Result<UploadVia, StoreError> {
        Ok(UploadVia::Registry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_cannot_escape_the_root() {
        assert!(is_valid_key(
            "archives/ab12/terraform-provider-null_2.1.2_linux_amd64.zip"
        ));
        for bad in [
            "",
            "/etc/passwd",
            "a/../b",
            "..",
            "a//b",
            "a/./b",
            "a\\b",
            "a b",
            "a/%2e%2e",
        ] {
            assert!(!is_valid_key(bad), "{bad:?} must be refused");
        }
    }
}
