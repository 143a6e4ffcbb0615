//! Storage: a tiny item store for metadata and a blob store for archives.
//!
//! The catalog logic ([`crate::catalog`]) is written once against these traits.
//! The item model is DynamoDB's (partition key + sort key + an opaque JSON body),
//! so every backend implements it natively: SQLite locally ([`sqlite`]),
//! DynamoDB in AWS. Archives go to a [`BlobStore`]: a directory locally
//! ([`fs`]), S3 in AWS.

pub mod fs;
pub mod sqlite;

use std::pin::Pin;

use async_trait::async_trait;
use bytes::Bytes;
use futures_util::Stream;

/// A failure of a storage backend.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A conditional write found the item already there.
    #[error("condition failed: the item already exists")]
    ConditionFailed,
    /// The object or item does not exist.
    #[error("{0} not found")]
    NotFound(String),
    /// The object is larger than the caller allows.
    #[error("object {key} is larger than {max} bytes")]
    TooLarge { key: String, max: u64 },
    /// Anything else (I/O, backend down, corrupt data).
    #[error("{0}")]
    Backend(String),
}

impl StoreError {
    pub fn backend(e: impl std::fmt::Display) -> Self {
        StoreError::Backend(e.to_string())
    }
}

/// One metadata item: `pk` + `sk` identify it, `data` is its JSON body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    pub pk: String,
    pub sk: String,
    pub data: Vec<u8>,
}

/// One page of a partition query, in ascending sort-key order.
#[derive(Debug, Clone, Default)]
pub struct Page {
    pub items: Vec<Item>,
    /// The sort key to continue after, when more items may follow.
    pub next: Option<String>,
}

/// When a put may happen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Condition {
    /// Always: create or replace.
    Always,
    /// Only if no item with the same keys exists; else
    /// [`StoreError::ConditionFailed`] and nothing changes.
    IfAbsent,
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

/// Copy a stream of chunks into `file`, refusing more than `max` bytes
/// ([`StoreError::TooLarge`] for `key`); returns the number of bytes written.
pub async fn write_limited<S, B, E>(
    mut body: S,
    file: &mut tokio::fs::File,
    key: &str,
    max: u64,
) -> Result<u64, StoreError>
where
    S: Stream<Item = Result<B, E>> + Unpin,
    B: AsRef<[u8]>,
    E: std::fmt::Display,
{
    use futures_util::StreamExt;
    use tokio::io::AsyncWriteExt;
    let mut written = 0u64;
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(StoreError::backend)?;
        written += chunk.as_ref().len() as u64;
        if written > max {
            return Err(StoreError::TooLarge {
                key: key.to_string(),
                max,
            });
        }
        file.write_all(chunk.as_ref())
            .await
            .map_err(StoreError::backend)?;
    }
    file.flush().await.map_err(StoreError::backend)?;
    Ok(written)
}

/// A stream of archive bytes.
pub type ByteStream = Pin<Box<dyn Stream<Item = std::io::Result<Bytes>> + Send>>;

/// How an archive download is answered once the registry's own signed URL checked out.
pub enum Download {
    /// Stream the bytes from here (local mode).
    Stream { len: u64, body: ByteStream },
    /// Redirect to this short-lived URL (e.g. an S3 presigned GET).
    Redirect(String),
}

/// Where a client uploads a file for publishing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UploadVia {
    /// To the registry's own signed `/v1/blobs/...` URL.
    Registry,
    /// Straight to this presigned URL (e.g. an S3 presigned PUT).
    Url(String),
}

/// Archive storage.
#[async_trait]
pub trait BlobStore: Send + Sync {
    /// Size of an object, or `None` if it does not exist.
    async fn size(&self, key: &str) -> Result<Option<u64>, StoreError>;
    /// A local file holding the object's bytes, for verification and hashing
    /// (the object itself for a directory store, a temporary copy otherwise).
    /// Fails with [`StoreError::TooLarge`] past `max` bytes.
    async fn fetch(&self, key: &str, max: u64) -> Result<std::fs::File, StoreError>;
    /// Store an object from a stream; returns its size. Fails past `max` bytes
    /// and then leaves nothing behind.
    async fn write(&self, key: &str, body: ByteStream, max: u64) -> Result<u64, StoreError>;
    /// Copy an object (used to move verified uploads to their final key).
    async fn copy(&self, from: &str, to: &str) -> Result<(), StoreError>;
    /// Delete an object; deleting a missing object is not an error.
    async fn delete(&self, key: &str) -> Result<(), StoreError>;
    /// Answer a download of `key` whose URL the registry already verified.
    async fn download(&self, key: &str, head: bool) -> Result<Download, StoreError>;
    /// Where a client should PUT `key` while publishing.
    async fn upload_via(&self, key: &str) -> Result<UploadVia, StoreError>;
}
