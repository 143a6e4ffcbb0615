//! Counting downloads (issue 38): the read side reports each download to
//! the registry's [`UsageSink`]; the sink keeps it off the path the client
//! waits for. `tfreg serve`: tallied in memory and written in batches (and
//! at stop); a Lambda function: tallied during the invocation and written
//! after its response is sent, before the sandbox is frozen. Counting never
//! fails a download: a sink that cannot write logs it.
//!
//! [`Tallied`] is the one sink both use: [`UsageSink::count`] adds the
//! download to an in-memory [`Tally`] (a lock and a map insert: no I/O),
//! [`Tallied::flush`] writes what was counted, one atomic add per distinct
//! counter, and puts back what failed (tried again at the next flush).
//! When and where a flush runs is the entry point's: serve's
//! [`write_every`] interval and its stop, the Lambda extension's
//! after-response hook.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tfreg_model::token::Principal;
use tfreg_model::usage::{Consumer, ConsumerKind, Download};
use tfreg_store::ItemStore;
use tfreg_store::catalog::usage::Tally;

/// Where downloads are reported.
pub trait UsageSink: Send + Sync {
    /// Count one download; returns at once (never waits on the store).
    fn count(&self, download: Download);
}

/// Counts nothing: the default (and the CLI's local commands).
pub struct NoUsage;

impl UsageSink for NoUsage {
    fn count(&self, _: Download) {}
}

/// Most distinct counters kept waiting: past it (a store down for long
/// under heavy traffic) new downloads are dropped, said once a flush, so
/// memory stays bounded.
pub const MAX_PENDING_COUNTERS: usize = 100_000;

/// Downloads counted in memory until flushed.
#[derive(Default)]
pub struct Tallied {
    pending: Mutex<Tally>,
    dropped: std::sync::atomic::AtomicU64,
}

/// What a flush wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Flushed {
    pub downloads: u64,
    /// The adds made (one per distinct counter).
    pub counters: usize,
}

impl Tallied {
    pub fn new() -> Self {
        Self::default()
    }

    /// Downloads counted and not yet written.
    pub fn pending(&self) -> u64 {
        self.pending.lock().map_or(0, |t| t.downloads())
    }

    /// Write what was counted. A failure is logged and its counts kept for
    /// the next flush; the error is returned for the caller to know.
    pub async fn flush(&self, store: &dyn ItemStore) -> Result<Flushed, tfreg_store::StoreError> {
        let taken = match self.pending.lock() {
            Ok(mut pending) => std::mem::take(&mut *pending),
            Err(_) => return Ok(Flushed::default()),
        };
        let dropped = self.dropped.swap(0, std::sync::atomic::Ordering::Relaxed);
        if dropped > 0 {
            tracing::warn!(
                dropped,
                "downloads not counted: too many counters waiting for the store"
            );
        }
        if taken.is_empty() {
            return Ok(Flushed::default());
        }
        let flushed = Flushed {
            downloads: taken.downloads(),
            counters: taken.counters(),
        };
        match taken.write(store).await {
            Ok(()) => Ok(flushed),
            Err((e, failed)) => {
                tracing::warn!(error = %e, counters = failed.counters(), "writing download counts failed; kept for the next try");
                if let Ok(mut pending) = self.pending.lock() {
                    pending.merge(failed);
                }
                Err(e)
            }
        }
    }
}

impl UsageSink for Tallied {
    fn count(&self, download: Download) {
        if let Ok(mut pending) = self.pending.lock() {
            if pending.counters() >= MAX_PENDING_COUNTERS {
                self.dropped
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                return;
            }
            pending.count(&download);
        }
    }
}

/// `tfreg serve`'s writer: flush `sink` into `store` every `interval`
/// until `stop`, then once more (a flush under way is finished first, never
/// cut: its counts were taken out of the sink). Returns the last flush's.
pub async fn write_every(
    sink: Arc<Tallied>,
    store: Arc<dyn ItemStore>,
    interval: Duration,
    stop: impl std::future::Future<Output = ()>,
) -> Result<Flushed, tfreg_store::StoreError> {
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tokio::pin!(stop);
    loop {
        tokio::select! {
            biased;
            () = &mut stop => break,
            _ = tick.tick() => {
                // A failure was logged and its counts kept.
                let _ = sink.flush(store.as_ref()).await;
            }
        }
    }
    sink.flush(store.as_ref()).await
}

/// Who a principal is, as usage counts them; `None` for the operator (the
/// CLI on the stores directly), whose reads are not a consumer's.
///
/// A CI job (a token the exchange issued) by its issuer, repository and
/// workflow, as the exchange kept them from the job token's verified
/// claims; an exchanged token of before that was kept, by its subject. A
/// person by the identity provider's issuer and subject (whatever token the
/// sign-in issued), labelled with their email or name. A token an admin
/// made by its public id, labelled with its name. Never a secret: ids are
/// the token's public id (a hash prefix) or the identity provider's names.
pub fn consumer_of(principal: &Principal) -> Option<Consumer> {
    Some(match principal {
        Principal::Operator => return None,
        Principal::Anonymous => Consumer {
            kind: ConsumerKind::Anonymous,
            id: "anonymous".into(),
            label: "anonymous".into(),
        },
        Principal::Token(record) => match &record.issued_to {
            None => Consumer {
                kind: ConsumerKind::Token,
                id: format!("token:{}", record.id),
                label: format!("{} ({})", record.name, record.id),
            },
            Some(subject) if record.created_by == "ci-exchange" => match &subject.ci {
                Some(job) => Consumer {
                    kind: ConsumerKind::Ci,
                    id: format!("ci:{}|{}|{}", subject.iss, job.repository, job.workflow),
                    label: format!("{} {}", job.repository, job.workflow),
                },
                None => Consumer {
                    kind: ConsumerKind::Ci,
                    id: format!("ci:{}|{}", subject.iss, subject.sub),
                    label: subject.sub.clone(),
                },
            },
            Some(subject) => Consumer {
                kind: ConsumerKind::Sso,
                id: format!("sso:{}|{}", subject.iss, subject.sub),
                label: subject.label().to_string(),
            },
        },
    })
}

#[cfg(test)]
mod tests;
