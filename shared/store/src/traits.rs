//! The two traits every backend implements: a tiny item store for metadata
//! and a blob store for archives, and what can go wrong in either.

use std::pin::Pin;

use async_trait::async_trait;
use bytes::Bytes;
use futures_util::Stream;

pub use tfreg_model::blob_key::BlobKey;

/// A failure of a storage backend.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A conditional write's condition did not hold: the item already
    /// existed ([`Condition::IfAbsent`]) or had changed ([`Condition::IfUnchanged`]).
    #[error("condition failed: the item was there already, or had changed")]
    ConditionFailed,
    /// The object, item or release does not exist (the message says which).
    #[error("{0}")]
    NotFound(String),
    /// A change that contradicts what is stored: a version published again
    /// with other files, a change that kept losing races.
    #[error("{0}")]
    Conflict(String),
    /// What the client asked for is not acceptable (too many keys, an
    /// expired publish): the message says what to fix.
    #[error("{0}")]
    Invalid(String),
    /// A bound on things in progress is reached (publishes in progress per
    /// token or namespace): the same request works again once one of them
    /// is done or has expired, in `retry_after_secs` at the latest.
    #[error("{message}")]
    Full {
        message: String,
        retry_after_secs: u64,
    },
    /// A write-once object (an upload slot, a kept archive) is already there.
    #[error("{0} already exists")]
    AlreadyExists(String),
    /// The object is larger than the caller allows.
    #[error("object {key} is larger than {max} bytes")]
    TooLarge { key: String, max: u64 },
    /// Received bytes differ from what was declared (size or sha256), or an
    /// upload changed after it was verified: the client's fault; nothing was kept.
    #[error("{key}: {reason}")]
    Mismatch { key: String, reason: String },
    /// The backend is down, unreachable, throttled, locked or out of space:
    /// retrying later may work.
    #[error("{0}")]
    Unavailable(String),
    /// Anything that retrying will not fix: corrupt data, a misconfigured
    /// backend, our own bug.
    #[error("{0}")]
    Internal(String),
}

impl From<tfreg_model::Invalid> for StoreError {
    fn from(e: tfreg_model::Invalid) -> Self {
        StoreError::Invalid(e.0)
    }
}

impl StoreError {
    /// A transient failure (I/O, network).
    pub fn unavailable(e: impl std::fmt::Display) -> Self {
        StoreError::Unavailable(e.to_string())
    }

    /// A failure retrying will not fix.
    pub fn internal(e: impl std::fmt::Display) -> Self {
        StoreError::Internal(e.to_string())
    }

    /// The client's mistake, saying what to fix.
    pub fn invalid(msg: impl Into<String>) -> Self {
        StoreError::Invalid(msg.into())
    }

    /// No such release, object or item.
    pub fn not_found(msg: impl Into<String>) -> Self {
        StoreError::NotFound(msg.into())
    }
}

/// One metadata item: `pk` + `sk` identify it, `data` is its JSON body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    pub pk: String,
    pub sk: String,
    pub data: Vec<u8>,
    /// When (unix seconds) the store may delete the item by itself: DynamoDB's
    /// TTL, the embedded store's hourly sweep. Deletion is lazy (DynamoDB takes
    /// up to days): whoever reads such an item checks its time itself.
    pub expires_at: Option<u64>,
    /// When (unix seconds) the item was last used, set only by
    /// [`ItemStore::touch`] (a token's last use). Kept apart from `data` so a
    /// function allowed to touch an item cannot change what it holds.
    pub touched_at: Option<u64>,
    /// A counter's fields, set only by [`ItemStore::add`] (download
    /// counts): kept apart from `data`, like `touched_at`, so the function
    /// allowed to count may change nothing else.
    pub counter: Option<Counter>,
}

/// What [`ItemStore::add`] keeps: a number and when it was first and last
/// added to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counter {
    pub n: u64,
    /// Unix seconds of the add that created it.
    pub first_at: u64,
    /// Unix seconds of the last add (the last to be written, which across
    /// processes is not always the latest time: each add sets its own).
    pub last_at: u64,
}

/// One atomic add to a counter ([`ItemStore::add`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Add {
    pub pk: String,
    pub sk: String,
    /// Added to the counter's number.
    pub by: u64,
    /// The counter's `last_at`, and its `first_at` when this creates it.
    pub at: u64,
    /// The item's `data`, set on every add (the latest wins: a label).
    pub data: Vec<u8>,
    /// The item's expiry, set on every add; `None` leaves it as it was.
    pub expires_at: Option<u64>,
}

impl Item {
    /// An item kept until deleted.
    pub fn new(pk: impl Into<String>, sk: impl Into<String>, data: Vec<u8>) -> Self {
        Self {
            pk: pk.into(),
            sk: sk.into(),
            data,
            expires_at: None,
            touched_at: None,
            counter: None,
        }
    }

    /// The item, deletable by the store after `at` (unix seconds).
    pub fn expiring_at(self, at: u64) -> Self {
        Self {
            expires_at: Some(at),
            ..self
        }
    }
}

/// One page of a partition query, in ascending sort-key order.
#[derive(Debug, Clone, Default)]
pub struct Page {
    pub items: Vec<Item>,
    /// The sort key to continue after, when more items may follow.
    pub next: Option<String>,
}

/// When a put may happen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Condition {
    /// Always: create or replace.
    Always,
    /// Only if no item with the same keys exists; else
    /// [`StoreError::ConditionFailed`] and nothing changes.
    IfAbsent,
    /// Only if the item exists and its `data` is exactly this (compare and
    /// swap: a read-modify-write that lost a race fails instead of undoing
    /// the other write, or bringing back a deleted item).
    IfUnchanged(Vec<u8>),
}

/// Metadata storage with DynamoDB's semantics.
#[async_trait]
pub trait ItemStore: Send + Sync {
    /// One item by its keys.
    async fn get(&self, pk: &str, sk: &str) -> Result<Option<Item>, StoreError>;
    /// One page of the items of partition `pk` whose sort key starts with
    /// `sk_prefix`, after `start_after` when given.
    async fn query_page(
        &self,
        pk: &str,
        sk_prefix: &str,
        start_after: Option<&str>,
    ) -> Result<Page, StoreError>;
    /// Write one item, atomically, if `condition` holds. Every catalog change
    /// is one such write, so nothing is ever half-visible.
    async fn put(&self, item: Item, condition: Condition) -> Result<(), StoreError>;
    /// Delete one item and return what it held, atomically: of several
    /// concurrent takes of one item, exactly one gets it.
    async fn take(&self, pk: &str, sk: &str) -> Result<Option<Item>, StoreError>;
    /// Set an existing item's `touched_at` to `at`, unless it is already at
    /// or after `unless_after`; `data` is not touched. `Ok(true)` when it was
    /// set; a missing item is `Ok(false)`, not an error.
    async fn touch(
        &self,
        pk: &str,
        sk: &str,
        at: u64,
        unless_after: u64,
    ) -> Result<bool, StoreError>;
    /// Add `add.by` to a counter, atomically, creating the item when it is
    /// absent (with `first_at = add.at`); set `last_at`, `data` and (when
    /// given) `expires_at`. Never a read-modify-write: concurrent adds of
    /// any number of processes sum exactly. Returns nothing (DynamoDB's
    /// `UpdateItem` with `ReturnValues NONE`, all a counting role may do).
    async fn add(&self, add: Add) -> Result<(), StoreError>;
    /// One page of every item in the store, in key order, after the item
    /// `start_after` (its `pk` and `sk`) when given: for maintenance (`tfreg
    /// gc`, `tfreg verify`), never on a request's path. The default: this
    /// store cannot be read whole.
    async fn scan_page(&self, start_after: Option<(&str, &str)>) -> Result<ScanPage, StoreError> {
        let _ = start_after;
        Err(StoreError::internal("this store cannot be read whole"))
    }
    /// A number that differs whenever anything in the store has changed
    /// since it was last read: every write through this value, once the
    /// write returns, and (where the backend can see them) other processes'
    /// writes, once they commit. Read it *before* the data it vouches for: an
    /// answer made from reads that followed `change_counter() == n` is
    /// current for as long as the counter still reads `n`. `None` (the
    /// default): this store cannot tell, and nothing read from it may be
    /// kept as current.
    fn change_counter(&self) -> Option<u64> {
        None
    }
}

/// A file's bytes as a stream of large chunks (what
/// [`BlobStore::receive`] reads).
pub fn file_chunks(file: tokio::fs::File) -> ByteStream {
    Box::pin(futures_util::stream::try_unfold(
        file,
        |mut file| async move {
            use tokio::io::AsyncReadExt;
            let mut buf = vec![0u8; 256 * 1024];
            let n = file.read(&mut buf).await?;
            if n == 0 {
                return Ok(None);
            }
            buf.truncate(n);
            Ok(Some((Bytes::from(buf), file)))
        },
    ))
}

/// One page of a [`ItemStore::scan_page`].
#[derive(Debug, Clone, Default)]
pub struct ScanPage {
    pub items: Vec<Item>,
    /// The `pk` and `sk` to continue after, when more items may follow.
    pub next: Option<(String, String)>,
}

/// Every item of the store, page by page ([`ItemStore::scan_page`]).
pub async fn scan_all(store: &dyn ItemStore) -> Result<Vec<Item>, StoreError> {
    let mut items = Vec::new();
    let mut after: Option<(String, String)> = None;
    loop {
        let page = store
            .scan_page(after.as_ref().map(|(p, s)| (p.as_str(), s.as_str())))
            .await?;
        items.extend(page.items);
        match page.next {
            Some(next) if after.as_ref() != Some(&next) => after = Some(next),
            _ => return Ok(items),
        }
    }
}

/// Read every page of a partition query.
pub async fn query_all(
    store: &dyn ItemStore,
    pk: &str,
    sk_prefix: &str,
) -> Result<Vec<Item>, StoreError> {
    let mut items = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let page = store.query_page(pk, sk_prefix, after.as_deref()).await?;
        items.extend(page.items);
        match page.next {
            Some(next) if after.as_deref() != Some(next.as_str()) => after = Some(next),
            _ => return Ok(items),
        }
    }
}

/// Size and lowercase hex sha256 of some bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Digest {
    pub size: u64,
    pub sha256: String,
}

/// Who a stream's failure is blamed on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamFrom {
    /// A client's upload: a cut-short body is its fault ([`StoreError::Mismatch`]).
    Client,
    /// A backend (an S3 GET): a broken stream is [`StoreError::Unavailable`].
    Backend,
}

/// Copy a stream of chunks into `file`, hashing it on the way and refusing
/// more than `max` bytes ([`StoreError::TooLarge`] for `key`).
pub async fn write_hashed<S, B, E>(
    mut body: S,
    from: StreamFrom,
    file: &mut tokio::fs::File,
    key: &str,
    max: u64,
) -> Result<Digest, StoreError>
where
    S: Stream<Item = Result<B, E>> + Unpin,
    B: AsRef<[u8]>,
    E: std::fmt::Display,
{
    use futures_util::StreamExt;
    use sha2::Digest as _;
    use tokio::io::AsyncWriteExt;
    let mut hasher = sha2::Sha256::new();
    let mut size = 0u64;
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|e| match from {
            StreamFrom::Client => StoreError::Mismatch {
                key: key.to_string(),
                reason: format!("the upload was cut short: {e}"),
            },
            StreamFrom::Backend => StoreError::Unavailable(format!("reading {key}: {e}")),
        })?;
        let chunk = chunk.as_ref();
        size += chunk.len() as u64;
        if size > max {
            return Err(StoreError::TooLarge {
                key: key.to_string(),
                max,
            });
        }
        hasher.update(chunk);
        file.write_all(chunk)
            .await
            .map_err(StoreError::unavailable)?;
    }
    file.flush().await.map_err(StoreError::unavailable)?;
    Ok(Digest {
        size,
        sha256: hex::encode(hasher.finalize()),
    })
}

/// Check received bytes against a declaration.
pub fn check_digest(key: &BlobKey, got: &Digest, expected: &Digest) -> Result<(), StoreError> {
    let reason = if got.size != expected.size {
        format!(
            "{} bytes arrived but {} were declared",
            got.size, expected.size
        )
    } else if got.sha256 != expected.sha256 {
        format!(
            "the uploaded bytes' sha256 is {}, not the declared {}",
            got.sha256, expected.sha256
        )
    } else {
        return Ok(());
    };
    Err(StoreError::Mismatch {
        key: key.to_string(),
        reason,
    })
}

/// A stream of archive bytes.
pub type ByteStream = Pin<Box<dyn Stream<Item = std::io::Result<Bytes>> + Send>>;

/// How an archive download is answered once the registry's own signed URL checked out.
pub enum Download {
    /// The whole file, already read (local mode, a file small enough to
    /// hold): answered as one body of known length, no stream to poll.
    Whole(Bytes),
    /// Stream the bytes from here (local mode: a larger file, or a HEAD's
    /// empty body).
    Stream { len: u64, body: ByteStream },
    /// Redirect to this short-lived URL (e.g. an S3 presigned GET).
    Redirect(String),
}

/// Where a client uploads a file for publishing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UploadVia {
    /// To the registry's own signed `/v1/blobs/...` URL.
    Registry,
    /// Straight to this presigned URL (an S3 presigned PUT), sending exactly
    /// these headers (they are signed: the declared length and checksum, and
    /// "create only").
    Presigned {
        url: String,
        headers: Vec<(String, String)>,
    },
}

/// An upload the registry took out of its uploader's reach: a private snapshot
/// whose bytes no later request can change, hashed while it was taken.
pub struct Claimed {
    /// The snapshot's bytes, positioned at the start.
    pub file: std::fs::File,
    /// What the snapshot holds, measured while it was taken.
    pub digest: Digest,
    #[cfg_attr(not(any(feature = "embedded", feature = "s3")), allow(dead_code))]
    pub(crate) source: ClaimSource,
}

impl Claimed {
    /// The whole snapshot in memory (small files only: SHA256SUMS, its
    /// signature, a manifest; the caller bounded the size when claiming).
    pub fn read_all(&mut self) -> Result<Vec<u8>, StoreError> {
        use std::io::{Read, Seek};
        let mut buf = Vec::with_capacity(usize::try_from(self.digest.size).unwrap_or(0));
        self.file
            .read_to_end(&mut buf)
            .map_err(StoreError::unavailable)?;
        self.file.rewind().map_err(StoreError::unavailable)?;
        Ok(buf)
    }
}

/// How a backend keeps exactly the claimed bytes.
pub(crate) enum ClaimSource {
    /// A private hard link to the uploaded file (directory store): the file is
    /// never written in place, so the linked bytes cannot change. Removed on drop.
    #[cfg_attr(not(feature = "embedded"), allow(dead_code))]
    Link(tempfile::TempPath),
    /// The uploaded object and the ETag of the version that was read (S3): a
    /// copy is made only if the object still has that ETag.
    #[cfg_attr(not(feature = "s3"), allow(dead_code))]
    Object { key: BlobKey, etag: String },
}

/// Archive storage.
///
/// Upload slots ([`BlobKey::upload`]) are write-once: [`BlobStore::receive`]
/// and a presigned upload both refuse a slot that holds anything, and
/// [`BlobStore::close_upload`] leaves an empty slot behind so that a late
/// upload is refused too. Published files ([`BlobKey::archive`]) are written
/// only by [`BlobStore::keep`], which never replaces an object.
#[async_trait]
pub trait BlobStore: Send + Sync {
    /// Receive an upload into its slot. At most `expected.size` bytes are read
    /// ([`StoreError::TooLarge`] past that); the bytes must have exactly the
    /// expected size and sha256 ([`StoreError::Mismatch`]); a slot is written
    /// once ([`StoreError::AlreadyExists`]). A refused upload leaves nothing.
    async fn receive(
        &self,
        key: &BlobKey,
        body: ByteStream,
        expected: &Digest,
    ) -> Result<(), StoreError>;
    /// Take a private snapshot of an upload that its uploader can no longer
    /// change, measuring it on the way. [`StoreError::NotFound`] if nothing was
    /// uploaded, [`StoreError::TooLarge`] past `max` bytes.
    async fn claim(&self, key: &BlobKey, max: u64) -> Result<Claimed, StoreError>;
    /// Store exactly the claimed bytes at `dest`, never replacing an object
    /// ([`StoreError::AlreadyExists`]).
    async fn keep(&self, claimed: &Claimed, dest: &BlobKey) -> Result<(), StoreError>;
    /// Close an upload slot for good: drop its bytes and make every later
    /// upload to it fail.
    async fn close_upload(&self, key: &BlobKey) -> Result<(), StoreError>;
    /// Delete an object; deleting a missing object is not an error.
    async fn delete(&self, key: &BlobKey) -> Result<(), StoreError>;
    /// Every key that starts with `prefix`, in no particular order.
    /// (The default: the keys of [`BlobStore::list_dated`].)
    async fn list(&self, prefix: &str) -> Result<Vec<BlobKey>, StoreError> {
        Ok(self
            .list_dated(prefix)
            .await?
            .into_iter()
            .map(|(key, _)| key)
            .collect())
    }
    /// [`BlobStore::list`] with each object's last modification (unix
    /// seconds): what `tfreg gc`'s grace period is measured from. The
    /// default: this store cannot say.
    async fn list_dated(&self, prefix: &str) -> Result<Vec<(BlobKey, u64)>, StoreError> {
        let _ = prefix;
        Err(StoreError::internal("this store cannot date its objects"))
    }
    /// Answer a download of `key` whose URL the registry already verified;
    /// for a `head`, the bytes may be left out (a store may still give a
    /// small object's, which the HEAD's answer drops).
    async fn download(&self, key: &BlobKey, head: bool) -> Result<Download, StoreError>;
    /// Where a client should upload the slot `key`, declared as `expected`.
    async fn upload_via(&self, key: &BlobKey, expected: &Digest) -> Result<UploadVia, StoreError>;

    /// Store the file at `path`, which the caller verified to be
    /// `expected`, as the content-addressed object `key` (a file the cache
    /// keeps, [`BlobKey::cached`]): hashed again on the way, never replacing
    /// an object. Its key names its sha256, so an object already there is
    /// these bytes: storing it again (a duplicate fill) is not an error.
    async fn put_file(
        &self,
        key: &BlobKey,
        path: &std::path::Path,
        expected: &Digest,
    ) -> Result<(), StoreError> {
        if !key.is_cached() {
            return Err(StoreError::internal(format!(
                "{key} is not a content-addressed key"
            )));
        }
        let file = tokio::fs::File::open(path)
            .await
            .map_err(StoreError::unavailable)?;
        match self.receive(key, file_chunks(file), expected).await {
            Err(StoreError::AlreadyExists(_)) => Ok(()),
            other => other,
        }
    }
}

/// The blob store of a process that reaches no archives (a read function,
/// the UI): every call is our bug, answered as one.
pub struct NoBlobs;

impl NoBlobs {
    fn none() -> StoreError {
        StoreError::Internal("this function reaches no archives (no blob store)".into())
    }
}

#[async_trait]
impl BlobStore for NoBlobs {
    async fn receive(&self, _: &BlobKey, _: ByteStream, _: &Digest) -> Result<(), StoreError> {
        Err(Self::none())
    }
    async fn claim(&self, _: &BlobKey, _: u64) -> Result<Claimed, StoreError> {
        Err(Self::none())
    }
    async fn keep(&self, _: &Claimed, _: &BlobKey) -> Result<(), StoreError> {
        Err(Self::none())
    }
    async fn close_upload(&self, _: &BlobKey) -> Result<(), StoreError> {
        Err(Self::none())
    }
    async fn delete(&self, _: &BlobKey) -> Result<(), StoreError> {
        Err(Self::none())
    }
    async fn list(&self, _: &str) -> Result<Vec<BlobKey>, StoreError> {
        Err(Self::none())
    }
    async fn download(&self, _: &BlobKey, _: bool) -> Result<Download, StoreError> {
        Err(Self::none())
    }
    async fn upload_via(&self, _: &BlobKey, _: &Digest) -> Result<UploadVia, StoreError> {
        Err(Self::none())
    }
}
