//! Counting wrappers for the in-process count: an item store that also
//! sums DynamoDB write units, a blob store that counts what is stored, and
//! a filler that runs each fill as `tfreg serve` does, counted and timed.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use async_trait::async_trait;
use tfreg_cache::fill::Cache;
use tfreg_http::fill::Filler;
use tfreg_model::blob_key::BlobKey;
use tfreg_model::cache::lease::{Fill, FillWhat};
use tfreg_store::{
    BlobStore, ByteStream, Claimed, Condition, Digest, Download, Item, ItemStore, Page, StoreError,
    UploadVia,
};
use tfreg_testkit::counting::{CountingStore, Counts, item_size};

/// [`CountingStore`], and the write units DynamoDB would bill for its
/// writes: 1 per KB (rounded up) of the item written, or deleted.
#[derive(Clone)]
pub(crate) struct Tally {
    pub(crate) counting: CountingStore,
    write_units: Arc<AtomicU64>,
}

/// What one side asked of the store so far.
#[derive(Debug, Default, Clone, Copy, serde::Serialize)]
pub(crate) struct Asked {
    pub(crate) gets: u64,
    pub(crate) queries: u64,
    pub(crate) writes: u64,
    pub(crate) read_units: f64,
    pub(crate) write_units: u64,
}

impl Asked {
    pub(crate) fn requests(&self) -> u64 {
        self.gets + self.queries + self.writes
    }

    pub(crate) fn minus(&self, before: &Asked) -> Asked {
        Asked {
            gets: self.gets - before.gets,
            queries: self.queries - before.queries,
            writes: self.writes - before.writes,
            read_units: self.read_units - before.read_units,
            write_units: self.write_units - before.write_units,
        }
    }

    pub(crate) fn plus(&self, other: &Asked) -> Asked {
        Asked {
            gets: self.gets + other.gets,
            queries: self.queries + other.queries,
            writes: self.writes + other.writes,
            read_units: self.read_units + other.read_units,
            write_units: self.write_units + other.write_units,
        }
    }
}

impl Tally {
    pub(crate) fn new(inner: Arc<dyn ItemStore>) -> Self {
        Tally {
            counting: CountingStore::new(inner),
            write_units: Arc::default(),
        }
    }

    pub(crate) fn asked(&self) -> Asked {
        let c: Counts = self.counting.counts();
        Asked {
            gets: c.gets,
            queries: c.queries,
            writes: c.writes(),
            read_units: self.counting.read_volume().units(),
            write_units: self.write_units.load(Ordering::Relaxed),
        }
    }

    fn wrote(&self, bytes: u64) {
        self.write_units
            .fetch_add(bytes.div_ceil(1024).max(1), Ordering::Relaxed);
    }
}

#[async_trait]
impl ItemStore for Tally {
    async fn get(&self, pk: &str, sk: &str) -> Result<Option<Item>, StoreError> {
        self.counting.get(pk, sk).await
    }

    async fn query_page(
        &self,
        pk: &str,
        sk_prefix: &str,
        start_after: Option<&str>,
    ) -> Result<Page, StoreError> {
        self.counting.query_page(pk, sk_prefix, start_after).await
    }

    async fn put(&self, item: Item, condition: Condition) -> Result<(), StoreError> {
        self.wrote(item_size(&item));
        self.counting.put(item, condition).await
    }

    async fn take(&self, pk: &str, sk: &str) -> Result<Option<Item>, StoreError> {
        let taken = self.counting.take(pk, sk).await?;
        self.wrote(taken.as_ref().map_or(0, item_size));
        Ok(taken)
    }

    async fn touch(
        &self,
        pk: &str,
        sk: &str,
        at: u64,
        unless_after: u64,
    ) -> Result<bool, StoreError> {
        self.wrote(0);
        self.counting.touch(pk, sk, at, unless_after).await
    }

    async fn add(&self, add: tfreg_store::Add) -> Result<(), StoreError> {
        self.wrote((add.pk.len() + add.sk.len() + add.data.len() + 40) as u64);
        self.counting.add(add).await
    }
}

/// A blob store counting the objects stored (an S3 PUT each).
#[derive(Clone)]
pub(crate) struct CountingBlobs {
    inner: Arc<dyn BlobStore>,
    puts: Arc<AtomicU64>,
    put_bytes: Arc<AtomicU64>,
}

impl CountingBlobs {
    pub(crate) fn new(inner: Arc<dyn BlobStore>) -> Self {
        CountingBlobs {
            inner,
            puts: Arc::default(),
            put_bytes: Arc::default(),
        }
    }

    /// Objects stored, and their bytes.
    pub(crate) fn puts(&self) -> (u64, u64) {
        (
            self.puts.load(Ordering::Relaxed),
            self.put_bytes.load(Ordering::Relaxed),
        )
    }
}

#[async_trait]
impl BlobStore for CountingBlobs {
    async fn receive(
        &self,
        key: &BlobKey,
        body: ByteStream,
        expected: &Digest,
    ) -> Result<(), StoreError> {
        self.puts.fetch_add(1, Ordering::Relaxed);
        self.put_bytes.fetch_add(expected.size, Ordering::Relaxed);
        self.inner.receive(key, body, expected).await
    }
    async fn claim(&self, key: &BlobKey, max: u64) -> Result<Claimed, StoreError> {
        self.inner.claim(key, max).await
    }
    async fn keep(&self, claimed: &Claimed, dest: &BlobKey) -> Result<(), StoreError> {
        self.puts.fetch_add(1, Ordering::Relaxed);
        self.inner.keep(claimed, dest).await
    }
    async fn close_upload(&self, key: &BlobKey) -> Result<(), StoreError> {
        self.inner.close_upload(key).await
    }
    async fn delete(&self, key: &BlobKey) -> Result<(), StoreError> {
        self.inner.delete(key).await
    }
    async fn list(&self, prefix: &str) -> Result<Vec<BlobKey>, StoreError> {
        self.inner.list(prefix).await
    }
    async fn download(&self, key: &BlobKey, head: bool) -> Result<Download, StoreError> {
        self.inner.download(key, head).await
    }
    async fn upload_via(&self, key: &BlobKey, expected: &Digest) -> Result<UploadVia, StoreError> {
        self.inner.upload_via(key, expected).await
    }
    // put_file: the trait's own (hashes the file into `receive`, counted
    // there), as S3's is; the directory store's hard link would not be.
}

/// `tfreg serve`'s filler (`tfreg_cache::fill::InProcess`), each fill
/// counted and timed: in AWS each is one asynchronous invocation of the
/// fill function, billed for about this long.
#[derive(Clone)]
pub(crate) struct TimedFiller {
    cache: Arc<Cache>,
    in_flight: Arc<Mutex<HashSet<String>>>,
    /// Fills run, by kind, and their durations (ms).
    pub(crate) done: Arc<Mutex<Vec<(&'static str, f64)>>>,
}

impl TimedFiller {
    pub(crate) fn new(cache: Cache) -> Self {
        TimedFiller {
            cache: Arc::new(cache),
            in_flight: Arc::default(),
            done: Arc::default(),
        }
    }

    pub(crate) fn running(&self) -> usize {
        self.in_flight.lock().map_or(0, |s| s.len())
    }

    pub(crate) fn finished(&self) -> Vec<(&'static str, f64)> {
        self.done.lock().map(|d| d.clone()).unwrap_or_default()
    }
}

/// The kind of a fill, as the report names it.
pub(crate) fn kind(what: &FillWhat) -> &'static str {
    match what {
        FillWhat::ProviderList => "provider list",
        FillWhat::ProviderVersion { .. } => "provider version",
        FillWhat::ProviderArchive { .. } => "provider archive",
        FillWhat::ModuleList { .. } => "module list",
        FillWhat::ModuleVersion { .. } => "module version",
    }
}

#[async_trait]
impl Filler for TimedFiller {
    async fn start(&self, fill: Fill) -> Result<(), tfreg_http::Error> {
        let key = fill.key();
        let Ok(mut in_flight) = self.in_flight.lock() else {
            return Ok(());
        };
        if !in_flight.insert(key.clone()) {
            return Ok(());
        }
        drop(in_flight);
        let this = self.clone();
        tokio::spawn(async move {
            let started = Instant::now();
            this.cache.run(&fill).await;
            let ms = started.elapsed().as_secs_f64() * 1000.0;
            if let Ok(mut done) = this.done.lock() {
                done.push((kind(&fill.what), ms));
            }
            if let Ok(mut in_flight) = this.in_flight.lock() {
                in_flight.remove(&key);
            }
        });
        Ok(())
    }
}
