//! Download counts and consumers (issue 38): per (version, day, platform)
//! and per (version, consumer), each counter one item written with an
//! atomic add ([`ItemStore::add`]), never a read-modify-write. `schema`
//! names the keys: one partition per package (`USAGE#<address>`), so a
//! package's report is two queries and a counting role is granted the
//! `USAGE#` partitions alone.
//!
//! - `DAY#<version>#<yyyy-mm-dd>#<platform or ->`: that day's downloads,
//!   expiring [`DAYS_KEPT`] days after the day.
//! - `CONSUMER#<version>#<consumer id>`: the consumer's downloads of the
//!   version, first and last seen, its kind and label in `data`; kept
//!   (a version's total is the sum of its consumers': every download has
//!   one, so no third counter is written).
//!
//! A batch is aggregated first ([`Tally`]): one add per distinct counter,
//! whatever the number of downloads; the sinks (serve's interval, a Lambda
//! invocation) keep a [`Tally`] rather than the downloads, so what waits to
//! be written is bounded by the counters, not by the traffic.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use tfreg_model::usage::{
    Consumer, ConsumerUsage, DayCount, Download, Package, UsageReport, VersionUsage,
};

use crate::catalog::codec::{decode, encode};
use crate::catalog::schema::{
    USAGE_CONSUMER_PREFIX, USAGE_DAY_PREFIX, usage_consumer_sk, usage_day_sk, usage_pk,
};
use crate::{Add, ItemStore, StoreError, query_all};

/// How long a day's counts are kept (their items expire after that).
pub const DAYS_KEPT: u64 = 400;

const DAY_SECS: u64 = 86_400;

/// A day counter's body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct DayBody {
    version: String,
    day: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    platform: Option<String>,
}

/// A consumer counter's body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct ConsumerBody {
    version: String,
    consumer: Consumer,
}

/// One counter's pending add.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Pending {
    by: u64,
    /// The latest download's time (the add's `at`).
    at: u64,
    data: Vec<u8>,
    expires_at: Option<u64>,
}

/// Downloads aggregated by the counters they add to: pure (no I/O), so
/// every sink shares it and [`Tally::write`] is the one place it is stored.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tally {
    counters: BTreeMap<(String, String), Pending>,
    downloads: u64,
}

impl Tally {
    pub fn new() -> Self {
        Self::default()
    }

    /// Count one download: one more on its day's counter and on its
    /// consumer's.
    pub fn count(&mut self, download: &Download) {
        let pk = usage_pk(&download.package);
        let day = tfreg_model::date::ymd(download.at);
        let day_body = DayBody {
            version: download.version.clone(),
            day: day.clone(),
            platform: download.platform.clone(),
        };
        let consumer_body = ConsumerBody {
            version: download.version.clone(),
            consumer: download.consumer.clone(),
        };
        // Bodies of plain strings always encode.
        let (Ok(day_data), Ok(consumer_data)) = (encode(&day_body), encode(&consumer_body)) else {
            return;
        };
        let day_end = (download.at / DAY_SECS + 1) * DAY_SECS;
        self.bump(
            (
                pk.clone(),
                usage_day_sk(&download.version, &day, download.platform.as_deref()),
            ),
            download.at,
            day_data,
            Some(day_end + DAYS_KEPT * DAY_SECS),
        );
        self.bump(
            (
                pk,
                usage_consumer_sk(&download.version, &download.consumer.id),
            ),
            download.at,
            consumer_data,
            None,
        );
        self.downloads += 1;
    }

    fn bump(&mut self, key: (String, String), at: u64, data: Vec<u8>, expires_at: Option<u64>) {
        let entry = self.counters.entry(key).or_insert(Pending {
            by: 0,
            at,
            data: Vec::new(),
            expires_at,
        });
        entry.by += 1;
        if at >= entry.at || entry.data.is_empty() {
            // The latest download's label wins (a renamed token).
            entry.at = at;
            entry.data = data;
        }
        entry.expires_at = entry.expires_at.max(expires_at);
    }

    /// Take `other`'s counts too (a batch that failed to write, put back).
    pub fn merge(&mut self, other: Tally) {
        for (key, p) in other.counters {
            match self.counters.get_mut(&key) {
                Some(entry) => {
                    entry.by += p.by;
                    if p.at >= entry.at {
                        entry.at = p.at;
                        entry.data = p.data;
                    }
                    entry.expires_at = entry.expires_at.max(p.expires_at);
                }
                None => {
                    self.counters.insert(key, p);
                }
            }
        }
        self.downloads += other.downloads;
    }

    /// Downloads counted.
    pub fn downloads(&self) -> u64 {
        self.downloads
    }

    /// Distinct counters (the adds [`Tally::write`] makes).
    pub fn counters(&self) -> usize {
        self.counters.len()
    }

    pub fn is_empty(&self) -> bool {
        self.counters.is_empty()
    }

    /// The adds this tally makes, one per counter.
    pub fn adds(&self) -> impl Iterator<Item = Add> + '_ {
        self.counters.iter().map(|((pk, sk), p)| Add {
            pk: pk.clone(),
            sk: sk.clone(),
            by: p.by,
            at: p.at,
            data: p.data.clone(),
            expires_at: p.expires_at,
        })
    }

    /// Write every counter: one add each, several at once. On failure,
    /// what was not written is returned to be tried again (a counter whose
    /// add failed may still have been written, as any write that times
    /// out: counted once more at worst).
    pub async fn write(self, store: &dyn ItemStore) -> Result<(), (StoreError, Tally)> {
        use futures_util::StreamExt;
        let adds: Vec<((String, String), Pending, Add)> = self
            .counters
            .into_iter()
            .map(|(key, p)| {
                let add = Add {
                    pk: key.0.clone(),
                    sk: key.1.clone(),
                    by: p.by,
                    at: p.at,
                    data: p.data.clone(),
                    expires_at: p.expires_at,
                };
                (key, p, add)
            })
            .collect();
        let results: Vec<_> = futures_util::stream::iter(adds)
            .map(|(key, p, add)| async move { (key, p, store.add(add).await) })
            .buffer_unordered(WRITES_AT_ONCE)
            .collect()
            .await;
        let mut failed = Tally::default();
        let mut error = None;
        for (key, p, result) in results {
            if let Err(e) = result {
                error.get_or_insert(e);
                failed.counters.insert(key, p);
            }
        }
        match error {
            None => Ok(()),
            Some(e) => Err((e, failed)),
        }
    }
}

/// Adds in flight at once when a batch is written.
const WRITES_AT_ONCE: usize = 16;

/// Add `downloads` (a batch: a serve flush, one Lambda invocation's), one
/// atomic add per distinct counter they touch.
pub async fn add(store: &dyn ItemStore, downloads: &[Download]) -> Result<(), StoreError> {
    let mut tally = Tally::new();
    for d in downloads {
        tally.count(d);
    }
    tally.write(store).await.map_err(|(e, _)| e)
}

/// The usage of `package`: every version with counts, or only `version`;
/// with its consumers only when `consumers` (the caller decided the reader
/// may see them). Day counts of the last [`DAYS_KEPT`] days.
pub async fn report(
    store: &dyn ItemStore,
    package: &Package,
    version: Option<&str>,
    consumers: bool,
) -> Result<UsageReport, StoreError> {
    let pk = usage_pk(package);
    let under = |prefix: &str| match version {
        Some(v) => format!("{prefix}{v}#"),
        None => prefix.to_string(),
    };
    let mut versions: BTreeMap<String, VersionUsage> = BTreeMap::new();
    // The totals are the consumers' sums: read them whether shown or not.
    for item in query_all(store, &pk, &under(USAGE_CONSUMER_PREFIX)).await? {
        let body: ConsumerBody = decode(&item)?;
        let counter = item.counter.unwrap_or_default();
        let v = version_entry(&mut versions, &body.version);
        v.downloads += counter.n;
        v.last_download = v.last_download.max(Some(counter.last_at));
        if consumers {
            v.consumers.push(ConsumerUsage {
                consumer: body.consumer,
                downloads: counter.n,
                first_seen: counter.first_at,
                last_seen: counter.last_at,
            });
        }
    }
    for item in query_all(store, &pk, &under(USAGE_DAY_PREFIX)).await? {
        let body: DayBody = decode(&item)?;
        version_entry(&mut versions, &body.version)
            .days
            .push(DayCount {
                day: body.day,
                platform: body.platform,
                downloads: item.counter.map_or(0, |c| c.n),
            });
    }
    let versions = tfreg_model::version::sort_versions(versions.into_values().collect(), |v| {
        v.version.as_str()
    });
    let versions = versions
        .into_iter()
        .rev()
        .map(|mut v| {
            // Newest day first; a day's platforms by name.
            v.days
                .sort_by(|a, b| b.day.cmp(&a.day).then(a.platform.cmp(&b.platform)));
            v.consumers.sort_by(|a, b| {
                b.last_seen
                    .cmp(&a.last_seen)
                    .then_with(|| a.consumer.id.cmp(&b.consumer.id))
            });
            v
        })
        .collect();
    Ok(UsageReport {
        package: package.clone(),
        versions,
    })
}

/// Who downloaded `version` of `package`, and how often: one query of the
/// version's consumer counters (bounded by its consumers, never by the
/// package's other versions or days). The delete guard's read.
pub async fn version_consumers(
    store: &dyn ItemStore,
    package: &Package,
    version: &str,
) -> Result<Vec<ConsumerUsage>, StoreError> {
    let prefix = format!("{USAGE_CONSUMER_PREFIX}{version}#");
    let mut consumers = Vec::new();
    for item in query_all(store, &usage_pk(package), &prefix).await? {
        let body: ConsumerBody = decode(&item)?;
        let counter = item.counter.unwrap_or_default();
        consumers.push(ConsumerUsage {
            consumer: body.consumer,
            downloads: counter.n,
            first_seen: counter.first_at,
            last_seen: counter.last_at,
        });
    }
    consumers.sort_by(|a, b| {
        b.last_seen
            .cmp(&a.last_seen)
            .then_with(|| a.consumer.id.cmp(&b.consumer.id))
    });
    Ok(consumers)
}

/// The report's entry of `version`, made empty when it is not there yet.
fn version_entry<'a>(
    versions: &'a mut BTreeMap<String, VersionUsage>,
    version: &str,
) -> &'a mut VersionUsage {
    versions
        .entry(version.to_string())
        .or_insert_with(|| VersionUsage {
            version: version.to_string(),
            downloads: 0,
            last_download: None,
            days: Vec::new(),
            consumers: Vec::new(),
        })
}

#[cfg(all(test, feature = "embedded"))]
mod tests;
