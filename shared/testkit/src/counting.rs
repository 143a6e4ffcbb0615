//! An [`ItemStore`] wrapper that counts the requests it passes on, by kind,
//! and what they read: what an endpoint costs in metadata requests and in
//! DynamoDB read capacity is measured, not assumed.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;

use tfreg_store::{Condition, Item, ItemStore, Page, StoreError};

/// Requests made so far, by kind (a DynamoDB request each).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    pub gets: u64,
    pub queries: u64,
    pub puts: u64,
    pub takes: u64,
    pub touches: u64,
    /// Counter adds (an `UpdateItem` each).
    pub adds: u64,
}

impl Counts {
    /// Every request.
    pub fn total(&self) -> u64 {
        self.gets + self.queries + self.puts + self.takes + self.touches + self.adds
    }

    /// Reads (GetItem and Query pages).
    pub fn reads(&self) -> u64 {
        self.gets + self.queries
    }

    /// Writes (PutItem, DeleteItem, UpdateItem).
    pub fn writes(&self) -> u64 {
        self.puts + self.takes + self.touches + self.adds
    }
}

impl std::ops::Sub for Counts {
    type Output = Counts;
    fn sub(self, before: Counts) -> Counts {
        Counts {
            gets: self.gets - before.gets,
            queries: self.queries - before.queries,
            puts: self.puts - before.puts,
            takes: self.takes - before.takes,
            touches: self.touches - before.touches,
            adds: self.adds - before.adds,
        }
    }
}

/// What reads returned, and what DynamoDB bills for them.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ReadVolume {
    /// Item bytes returned, as DynamoDB sizes items (names and values).
    pub bytes: u64,
    /// Read capacity units as DynamoDB bills them, in halves: a strongly
    /// consistent `GetItem` is one unit per 4 KB of its item, an eventually
    /// consistent `Query` half a unit per 4 KB of its page.
    pub half_units: u64,
}

impl ReadVolume {
    /// Read capacity units.
    pub fn units(&self) -> f64 {
        self.half_units as f64 / 2.0
    }
}

impl std::ops::Sub for ReadVolume {
    type Output = ReadVolume;
    fn sub(self, before: ReadVolume) -> ReadVolume {
        ReadVolume {
            bytes: self.bytes - before.bytes,
            half_units: self.half_units - before.half_units,
        }
    }
}

/// An item's size as DynamoDB counts it: attribute names and values.
pub fn item_size(item: &Item) -> u64 {
    let number = |n: Option<u64>, name: &str| n.map_or(0, |n| name.len() + n.to_string().len());
    (2 + item.pk.len()
        + 2
        + item.sk.len()
        + 4
        + item.data.len()
        + number(item.expires_at, "expires_at")
        + number(item.touched_at, "touched_at")
        + item.counter.map_or(0, |c| {
            number(Some(c.n), "n")
                + number(Some(c.first_at), "first_at")
                + number(Some(c.last_at), "last_at")
        })) as u64
}

/// 4 KB blocks, rounded up (at least one: an empty read is billed too).
fn blocks(bytes: u64) -> u64 {
    bytes.div_ceil(4096).max(1)
}

#[derive(Default)]
struct Counters {
    gets: AtomicU64,
    queries: AtomicU64,
    puts: AtomicU64,
    takes: AtomicU64,
    touches: AtomicU64,
    adds: AtomicU64,
    bytes_read: AtomicU64,
    half_units: AtomicU64,
}

/// Counts every request to the store it wraps.
#[derive(Clone)]
pub struct CountingStore {
    inner: Arc<dyn ItemStore>,
    counters: Arc<Counters>,
}

impl CountingStore {
    pub fn new(inner: Arc<dyn ItemStore>) -> Self {
        Self {
            inner,
            counters: Arc::default(),
        }
    }

    /// The counts so far.
    pub fn counts(&self) -> Counts {
        let c = &self.counters;
        Counts {
            gets: c.gets.load(Ordering::Relaxed),
            queries: c.queries.load(Ordering::Relaxed),
            puts: c.puts.load(Ordering::Relaxed),
            takes: c.takes.load(Ordering::Relaxed),
            touches: c.touches.load(Ordering::Relaxed),
            adds: c.adds.load(Ordering::Relaxed),
        }
    }

    /// What the reads so far returned.
    pub fn read_volume(&self) -> ReadVolume {
        ReadVolume {
            bytes: self.counters.bytes_read.load(Ordering::Relaxed),
            half_units: self.counters.half_units.load(Ordering::Relaxed),
        }
    }

    fn read(&self, bytes: u64, half_units: u64) {
        self.counters.bytes_read.fetch_add(bytes, Ordering::Relaxed);
        self.counters
            .half_units
            .fetch_add(half_units, Ordering::Relaxed);
    }
}

fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

#[async_trait]
impl ItemStore for CountingStore {
    async fn get(&self, pk: &str, sk: &str) -> Result<Option<Item>, StoreError> {
        bump(&self.counters.gets);
        let item = self.inner.get(pk, sk).await?;
        let bytes = item.as_ref().map_or(0, item_size);
        self.read(bytes, 2 * blocks(bytes));
        Ok(item)
    }

    async fn query_page(
        &self,
        pk: &str,
        sk_prefix: &str,
        start_after: Option<&str>,
    ) -> Result<Page, StoreError> {
        bump(&self.counters.queries);
        let page = self.inner.query_page(pk, sk_prefix, start_after).await?;
        let bytes = page.items.iter().map(item_size).sum();
        self.read(bytes, blocks(bytes));
        Ok(page)
    }

    async fn put(&self, item: Item, condition: Condition) -> Result<(), StoreError> {
        bump(&self.counters.puts);
        self.inner.put(item, condition).await
    }

    async fn take(&self, pk: &str, sk: &str) -> Result<Option<Item>, StoreError> {
        bump(&self.counters.takes);
        self.inner.take(pk, sk).await
    }

    async fn touch(
        &self,
        pk: &str,
        sk: &str,
        at: u64,
        unless_after: u64,
    ) -> Result<bool, StoreError> {
        bump(&self.counters.touches);
        self.inner.touch(pk, sk, at, unless_after).await
    }

    async fn add(&self, add: tfreg_store::Add) -> Result<(), StoreError> {
        bump(&self.counters.adds);
        self.inner.add(add).await
    }
}
