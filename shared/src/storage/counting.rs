//! An [`ItemStore`] wrapper that counts the requests it passes on, by kind:
//! what an endpoint costs in metadata requests is measured, not assumed.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;

use super::{Condition, Item, ItemStore, Page, StoreError};

/// Requests made so far, by kind (a DynamoDB request each).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    pub gets: u64,
    pub queries: u64,
    pub puts: u64,
    pub takes: u64,
    pub touches: u64,
}

impl Counts {
    /// Every request.
    pub fn total(&self) -> u64 {
        self.gets + self.queries + self.puts + self.takes + self.touches
    }

    /// Reads (GetItem and Query pages).
    pub fn reads(&self) -> u64 {
        self.gets + self.queries
    }

    /// Writes (PutItem, DeleteItem, UpdateItem).
    pub fn writes(&self) -> u64 {
        self.puts + self.takes + self.touches
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
        }
    }
}

#[derive(Default)]
struct Counters {
    gets: AtomicU64,
    queries: AtomicU64,
    puts: AtomicU64,
    takes: AtomicU64,
    touches: AtomicU64,
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
        }
    }
}

fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

#[async_trait]
impl ItemStore for CountingStore {
    async fn get(&self, pk: &str, sk: &str) -> Result<Option<Item>, StoreError> {
        bump(&self.counters.gets);
        self.inner.get(pk, sk).await
    }

    async fn query_page(
        &self,
        pk: &str,
        sk_prefix: &str,
        start_after: Option<&str>,
    ) -> Result<Page, StoreError> {
        bump(&self.counters.queries);
        self.inner.query_page(pk, sk_prefix, start_after).await
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
}
