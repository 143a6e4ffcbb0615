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

use crate::{
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
        ErrorKind::NotFound => StoreError::NotFound(format!("{key} not found")),
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

    /// A fresh temporary file's path, removed when the guard drops: when the
    /// write fails, and when the request is cancelled half-way (the client
    /// went away) too.
    fn temp_file(&self) -> Result<tempfile::TempPath, StoreError> {
        let path = self
            .root
            .join(TMP)
            .join(format!("{:032x}", rand::random::<u128>()));
        tempfile::TempPath::try_from_path(path).map_err(StoreError::unavailable)
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
    pub fn sweep_uploads(&self, max_age: Duration) -> Result<Swept, StoreError> {
        self.sweep(
            &self.root.join(tfreg_model::blob_key::UPLOADS),
            max_age,
            modified,
        )
    }

    /// Delete temporary files whose inode has not changed for longer than
    /// `max_age` (a write or a new link changes it): left by a process that
    /// died half-way. With zero, all of them: only for a process that knows
    /// no other one is writing (`tfreg serve` holds the data directory's lock).
    pub fn sweep_temp(&self, max_age: Duration) -> Result<Swept, StoreError> {
        self.sweep(&self.root.join(TMP), max_age, changed)
    }

    /// Remove the entries of `dir` (files or whole directories) not changed for `max_age`.
    fn sweep(
        &self,
        dir: &Path,
        max_age: Duration,
        stamp: fn(&std::fs::Metadata) -> SystemTime,
    ) -> Result<Swept, StoreError> {
        let entries = match std::fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Swept::default()),
            Err(e) => return Err(StoreError::unavailable(e)),
        };
        let now = SystemTime::now();
        let mut swept = Swept::default();
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            if now.duration_since(stamp(&meta)).unwrap_or_default() < max_age {
                continue;
            }
            let bytes = disk_usage(&path);
            let removed = if meta.is_dir() {
                std::fs::remove_dir_all(&path)
            } else {
                std::fs::remove_file(&path)
            };
            if removed.is_ok() {
                swept.entries += 1;
                swept.bytes += bytes;
            }
        }
        Ok(swept)
    }
}

/// What a sweep removed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Swept {
    pub entries: usize,
    pub bytes: u64,
}

/// When a file's data last changed (an upload slot's directory: when a file was added).
fn modified(meta: &std::fs::Metadata) -> SystemTime {
    meta.modified().unwrap_or(SystemTime::UNIX_EPOCH)
}

/// When an inode last changed: its ctime on Unix (data written, or a link
/// added or removed), else its mtime.
fn changed(meta: &std::fs::Metadata) -> SystemTime {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let secs = u64::try_from(meta.ctime()).unwrap_or(0);
        SystemTime::UNIX_EPOCH + Duration::new(secs, meta.ctime_nsec().clamp(0, 999_999_999) as u32)
    }
    #[cfg(not(unix))]
    modified(meta)
}

/// Bytes of the files under `path`.
fn disk_usage(path: &Path) -> u64 {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => std::fs::read_dir(path)
            .map(|entries| entries.flatten().map(|e| disk_usage(&e.path())).sum())
            .unwrap_or(0),
        Ok(m) => m.len(),
        Err(_) => 0,
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

/// Every object under `dir` (its key `rel`) whose key starts with
/// `prefix`, with its modification time (unix seconds; 0 if unknown).
fn list_under(dir: &Path, rel: &str, prefix: &str, out: &mut Vec<(BlobKey, u64)>) {
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
                    let modified = entry
                        .metadata()
                        .and_then(|m| m.modified())
                        .ok()
                        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                        .map_or(0, |d| d.as_secs());
                    out.push((k, modified));
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
        // A taken slot (uploaded, or closed as its publish ended) is refused
        // before a byte is read, whatever the bytes; the link below still
        // refuses one taken meanwhile.
        if tokio::fs::symlink_metadata(self.path(key)).await.is_ok() {
            return Err(StoreError::AlreadyExists(key.to_string()));
        }
        let tmp = self.temp_file()?;
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
        if result.is_err() {
            // The slot's directory, if this receive made it and nothing else is in it.
            self.prune_dirs(key).await;
        }
        result
    }

    async fn claim(&self, key: &BlobKey, max: u64) -> Result<Claimed, StoreError> {
        // The link is ours; the guard removes it on every exit.
        let link = self.temp_file()?;
        tokio::fs::hard_link(self.path(key), &link)
            .await
            .map_err(|e| io_error(key.as_str(), e))?;
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
        let tmp = self.temp_file()?;
        tokio::fs::File::create(&tmp)
            .await
            .map_err(StoreError::unavailable)?;
        // Replaces the upload (if any) with an empty file: the slot stays
        // taken, so a late upload is refused.
        tokio::fs::rename(&tmp, &dest)
            .await
            .map_err(StoreError::unavailable)
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

    async fn list_dated(&self, prefix: &str) -> Result<Vec<(BlobKey, u64)>, StoreError> {
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
        // Opening and sizing a file, and reading a small one (checksum and
        // signature files, small archives), take microseconds from the page
        // cache: done here, on the caller's thread, as the SQLite store reads,
        // rather than paying a hand-over to a blocking thread for each. A
        // larger file is read whole by one blocking call, or streamed in large
        // chunks: each read of a tokio file is a hand-over of its own, and the
        // default 4 KiB chunks made a 5 MB provider zip cost some 1,200 of them.
        let path = self.path(key);
        let name = key.as_str();
        let mut file = std::fs::File::open(&path).map_err(|e| io_error(name, e))?;
        let len = file.metadata().map_err(StoreError::unavailable)?.len();
        // A small file is read for a HEAD too (one more `read` from the page
        // cache): its whole answer can then be kept for the GET that follows
        // (Terraform 1.11.0-1.12.0 sends a HEAD first); HEAD drops the body.
        let opened = if len <= INLINE_READ_BYTES {
            Opened::Whole(read_whole(&mut file, len)?)
        } else if head {
            Opened::Nothing
        } else if len <= WHOLE_READ_BYTES {
            let bytes = tokio::task::spawn_blocking(move || read_whole(&mut file, len))
                .await
                .map_err(StoreError::internal)??;
            Opened::Whole(bytes)
        } else {
            Opened::File(file)
        };
        let body: ByteStream = match opened {
            Opened::Whole(bytes) => return Ok(Download::Whole(bytes)),
            Opened::Nothing => Box::pin(futures_util::stream::empty()),
            Opened::File(file) => Box::pin(tokio_util::io::ReaderStream::with_capacity(
                tokio::fs::File::from_std(file),
                STREAM_CHUNK_BYTES,
            )),
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

/// Files up to this size are read whole on the caller's thread.
const INLINE_READ_BYTES: u64 = 64 * 1024;
/// Files up to this size are read whole in one blocking call.
const WHOLE_READ_BYTES: u64 = 256 * 1024;

/// All `len` bytes of `file`.
fn read_whole(file: &mut std::fs::File, len: u64) -> Result<bytes::Bytes, StoreError> {
    let mut bytes = Vec::with_capacity(len as usize);
    std::io::Read::read_to_end(file, &mut bytes).map_err(StoreError::unavailable)?;
    Ok(bytes::Bytes::from(bytes))
}
/// The chunk a larger file streams in.
const STREAM_CHUNK_BYTES: usize = 256 * 1024;

/// A file opened for a download.
enum Opened {
    /// A HEAD: no body.
    Nothing,
    Whole(bytes::Bytes),
    File(std::fs::File),
}

#[cfg(test)]
mod tests {
    use super::*;
    use tfreg_model::blob_key::{FileName, UploadId};

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
        assert_eq!(
            store
                .sweep_uploads(Duration::from_secs(3600))
                .unwrap()
                .entries,
            1
        );
        let left = store.list("uploads/").await.unwrap();
        assert_eq!(left, [BlobKey::upload(&new, &name)]);
        assert_eq!(
            store.list("archives/").await.unwrap(),
            [archive],
            "archives are never swept"
        );
    }

    #[tokio::test]
    async fn downloads_small_files_whole_and_large_ones_in_chunks() {
        use futures_util::StreamExt as _;
        let dir = tempfile::tempdir().unwrap();
        let store = FsBlobStore::open(dir.path()).unwrap();
        let id = UploadId::random();
        std::fs::create_dir_all(dir.path().join("archives").join(id.as_str())).unwrap();
        let sizes = [
            0,
            10,
            INLINE_READ_BYTES as usize,
            INLINE_READ_BYTES as usize + 1,
            WHOLE_READ_BYTES as usize,
            WHOLE_READ_BYTES as usize + 1,
            700_000,
        ];
        for size in sizes {
            let key = BlobKey::archive(&id, &FileName::parse(&format!("f{size}.zip")).unwrap());
            let bytes: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
            std::fs::write(dir.path().join(key.as_str()), &bytes).unwrap();
            match store.download(&key, false).await.unwrap() {
                Download::Whole(got) => {
                    assert!(size as u64 <= WHOLE_READ_BYTES, "{size} bytes held whole");
                    assert!(got == bytes, "{size} bytes come back as written");
                }
                Download::Stream { len, mut body } => {
                    assert!(size as u64 > WHOLE_READ_BYTES, "{size} bytes streamed");
                    assert_eq!(len, size as u64);
                    let (mut got, mut chunks) = (Vec::new(), 0);
                    while let Some(chunk) = body.next().await {
                        got.extend_from_slice(&chunk.unwrap());
                        chunks += 1;
                    }
                    assert!(got == bytes, "{size} bytes come back as written");
                    let expected = size.div_ceil(STREAM_CHUNK_BYTES);
                    assert_eq!(chunks, expected, "chunks of a {size}-byte file");
                }
                Download::Redirect(_) => panic!("a local store never redirects"),
            }
            // A HEAD: a small file whole (its answer is kept for the GET),
            // a larger one only its length.
            match store.download(&key, true).await.unwrap() {
                Download::Whole(got) => {
                    assert!(
                        size as u64 <= INLINE_READ_BYTES,
                        "{size} bytes read for a HEAD"
                    );
                    assert!(got == bytes, "{size} bytes come back as written");
                }
                Download::Stream { len, mut body } => {
                    assert!(size as u64 > INLINE_READ_BYTES, "{size} bytes not read");
                    assert_eq!(len, size as u64, "HEAD has the length");
                    assert!(body.next().await.is_none(), "and no body");
                }
                Download::Redirect(_) => panic!("a local store never redirects"),
            }
        }
        let missing = BlobKey::archive(&id, &FileName::parse("gone.zip").unwrap());
        assert!(matches!(
            store.download(&missing, false).await,
            Err(StoreError::NotFound(_))
        ));
    }

    fn temp_files(dir: &Path) -> Vec<PathBuf> {
        std::fs::read_dir(dir.join(TMP))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect()
    }

    #[tokio::test]
    async fn temp_files_are_swept_by_inode_age() {
        let dir = tempfile::tempdir().unwrap();
        let store = FsBlobStore::open(dir.path()).unwrap();
        let old = dir.path().join(TMP).join("old");
        std::fs::write(&old, vec![0u8; 1000]).unwrap();
        std::thread::sleep(Duration::from_millis(1100));
        let new = dir.path().join(TMP).join("new");
        std::fs::write(&new, b"x").unwrap();
        let swept = store.sweep_temp(Duration::from_secs(1)).unwrap();
        assert_eq!(
            swept,
            Swept {
                entries: 1,
                bytes: 1000
            }
        );
        assert_eq!(temp_files(dir.path()), [new]);
        assert_eq!(store.sweep_temp(Duration::ZERO).unwrap().entries, 1);
        assert!(temp_files(dir.path()).is_empty());
    }

    #[tokio::test]
    async fn a_cancelled_or_failed_upload_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let store = FsBlobStore::open(dir.path()).unwrap();
        let key = BlobKey::upload(&UploadId::random(), &FileName::parse("m.tar.gz").unwrap());
        let expected = Digest {
            size: 10,
            sha256: "0".repeat(64),
        };
        // A client that sends 4 bytes and then goes silent; the request is dropped.
        use futures_util::StreamExt;
        let silent = futures_util::stream::iter([Ok(bytes::Bytes::from_static(b"abcd"))])
            .chain(futures_util::stream::pending());
        let receive = store.receive(&key, Box::pin(silent), &expected);
        let cancelled = tokio::time::timeout(Duration::from_millis(200), receive).await;
        assert!(cancelled.is_err(), "the upload waits for more data");
        assert!(
            temp_files(dir.path()).is_empty(),
            "a cancelled upload leaves no temp file"
        );
        // Wrong bytes: refused, and neither the temp file nor the slot's directory stays.
        let body = futures_util::stream::iter([Ok(bytes::Bytes::from_static(b"0123456789"))]);
        let refused = store.receive(&key, Box::pin(body), &expected).await;
        assert!(
            matches!(refused, Err(StoreError::Mismatch { .. })),
            "{refused:?}"
        );
        assert!(temp_files(dir.path()).is_empty());
        assert!(!dir.path().join(key.as_str()).parent().unwrap().exists());
    }
}
