//! The fill engine (plan §3, §5, §6): one fill ([`Fill`]) at a time per
//! thing, across processes (the store's lease), fetched from the origin
//! through [`crate::origin`], verified with `tfreg_verify::origin` before
//! anything is stored, stored create-only, and its outcome recorded in the
//! lease for whoever waits. [`InProcess`] runs fills as tasks of `tfreg
//! serve`; the fill function (AWS) will run [`Cache::run`] per event.

mod clients;
mod module;
mod provider;

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use tfreg_http::fill::Filler;
use tfreg_http::metrics::{FillOutcome, FillRecord, PackageKind, Recorder};
use tfreg_model::audit::{Event, Outcome as AuditOutcome};
use tfreg_model::cache::lease::{Fill, FillWhat, Lease, Outcome};
use tfreg_model::token::Actor;
use tfreg_model::upstream::{Mode, UpstreamRecord};
use tfreg_outbound::Deployment;
use tfreg_store::catalog::cache::KeepError;
use tfreg_store::catalog::cache_place::CachePlace;
use tfreg_store::catalog::{audit, lease, upstreams};
use tfreg_store::{BlobStore, ItemStore, StoreError};

use crate::origin::OriginError;
pub use clients::read_credentials;

/// How long metadata fetches may take (the waiting client gives up at 8 s;
/// the fill finishes for the next one).
pub(crate) const METADATA_DEADLINE: std::time::Duration = std::time::Duration::from_secs(30);

pub(crate) fn deadline(after: std::time::Duration) -> tokio::time::Instant {
    tokio::time::Instant::now() + after
}

/// Store the verified file at `path` as `key`, trying once more when the
/// store was unavailable: a pooled connection the store had closed fails
/// the first write (seen with S3: "broken pipe"), and the streamed body
/// cannot be replayed by the SDK. `put_file` is create-only and the file is
/// still here, so a second attempt is safe.
pub(crate) async fn keep_file(
    blobs: &dyn BlobStore,
    key: &tfreg_model::blob_key::BlobKey,
    path: &std::path::Path,
    digest: &tfreg_store::Digest,
) -> Result<(), FillError> {
    match blobs.put_file(key, path, digest).await {
        Err(StoreError::Unavailable(first)) => {
            tracing::warn!(%key, error = %first, "storing a filled file failed; trying once more");
            Ok(blobs.put_file(key, path, digest).await?)
        }
        other => Ok(other?),
    }
}

/// A file an archive is streamed into, removed when done.
pub(crate) struct TempFile(pub(crate) PathBuf);

impl TempFile {
    pub(crate) fn new(dir: &std::path::Path) -> Result<Self, FillError> {
        std::fs::create_dir_all(dir).map_err(|e| FillError::Store(e.to_string()))?;
        Ok(TempFile(
            dir.join(format!("fill-{:032x}", rand::random::<u128>())),
        ))
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// What a provider's and a module's fill share: the upstream, its name,
/// and its origin client.
pub(crate) struct Origin<'a> {
    pub(crate) cache: &'a Cache,
    pub(crate) upstream: &'a UpstreamRecord,
    pub(crate) host: String,
    pub(crate) client: Arc<crate::origin::OriginClient>,
}

impl<'a> Origin<'a> {
    fn new(cache: &'a Cache, upstream: &'a UpstreamRecord) -> Result<Self, FillError> {
        Ok(Origin {
            cache,
            upstream,
            host: upstream.hostname.to_string(),
            client: cache.clients.client(upstream, cache.max_archive_bytes)?,
        })
    }

    /// The origin's services (discovery, cached with the client).
    pub(crate) async fn services(&self) -> Result<crate::origin::Services, FillError> {
        self.cache
            .clients
            .services(self.upstream, &self.client, deadline(METADATA_DEADLINE))
            .await
    }

    /// One registry API call of the origin: its services discovered (cached
    /// with the client), then `call` with them and `until`, the origin's
    /// failure classed for waiting clients.
    pub(crate) async fn ask<T>(
        &self,
        until: tokio::time::Instant,
        call: impl AsyncFnOnce(
            &crate::origin::OriginClient,
            &crate::origin::Services,
            tokio::time::Instant,
        ) -> Result<T, OriginError>,
    ) -> Result<T, FillError> {
        let services = self.services().await?;
        call(&self.client, &services, until)
            .await
            .map_err(|e| FillError::origin(&self.host, e))
    }

    /// Remember the origin's 404 of `what` in `place`, and say so.
    pub(crate) async fn missing_in(
        &self,
        place: &CachePlace,
        what: &str,
        e: FillError,
    ) -> FillError {
        let ttl = self.upstream.settings.negative_ttl_secs;
        if matches!(e, FillError::NotFound(_))
            && ttl > 0
            && let Err(err) = place
                .note_missing(self.cache.items.as_ref(), what, self.cache.now(), ttl)
                .await
        {
            tracing::warn!(error = %err, "cannot remember an origin's 404");
        }
        e
    }

    /// A version list as fetched: a transient failure marks `place`'s
    /// cached list as failing (answered degraded), a 404 is remembered.
    pub(crate) async fn list_fetched<T>(
        &self,
        place: &CachePlace,
        fetched: Result<T, FillError>,
    ) -> Result<T, FillError> {
        match fetched {
            Ok(v) => Ok(v),
            Err(e @ FillError::Unavailable(_)) => {
                place
                    .list_failed(self.cache.items.as_ref(), self.cache.now())
                    .await?;
                Err(e)
            }
            Err(e) => Err(self.missing_in(place, "versions", e).await),
        }
    }
}

/// Why a fill ended without storing, and what waiting clients are told.
#[derive(Debug, thiserror::Error)]
pub enum FillError {
    /// The origin has no such thing (remembered for the upstream's
    /// `negative_ttl`).
    #[error("{0}")]
    NotFound(String),
    /// The origin failed in a way worth retrying (5xx, 429, timeout).
    #[error("{0}")]
    Unavailable(String),
    /// What the origin served was refused: a signature, a checksum, an
    /// address; audited.
    #[error("{0}")]
    Refused(String),
    /// Our store or disk failed.
    #[error("{0}")]
    Store(String),
    /// The upstream's settings cannot be used here: credentials outside the
    /// operator's allow-list or unreadable, a client that cannot be made.
    /// The detail names the admin's configuration: log and audit only.
    #[error("{0}")]
    Setup(String),
    /// An address or URL the origin (or a `connect` setting) led to that
    /// may not be fetched: log and audit only.
    #[error("{0}")]
    Unreachable(String),
}

impl FillError {
    fn status(&self) -> u16 {
        match self {
            FillError::NotFound(_) => 404,
            FillError::Unavailable(_) | FillError::Store(_) => 503,
            FillError::Refused(_) | FillError::Setup(_) | FillError::Unreachable(_) => 502,
        }
    }

    /// What a waiting client is told: the origin's 404 and what its
    /// releases failed (signatures, checksums) as they are; for anything
    /// naming this registry's configuration or network (credentials,
    /// `connect`, addresses, connection errors, the store) a generic cause,
    /// the detail staying in the log and the audit trail.
    fn public(&self, host: &str) -> String {
        match self {
            FillError::NotFound(m) | FillError::Refused(m) => m.clone(),
            FillError::Unavailable(_) => {
                format!("{host}: the origin did not answer in time or failed; try again later")
            }
            FillError::Store(_) => "the registry's store failed; try again later".into(),
            FillError::Setup(_) => format!(
                "{host}: the registry cannot use this upstream's settings (an admin finds why in the audit trail)"
            ),
            FillError::Unreachable(_) => {
                format!("{host}: the origin led to an address or URL the registry may not fetch")
            }
        }
    }

    /// An origin's failure, for `host`.
    fn origin(host: &str, e: OriginError) -> Self {
        match e {
            OriginError::NotFound { .. } => FillError::NotFound(format!("{host}: {e}")),
            e if e.is_transient() => FillError::Unavailable(format!("{host}: {e}")),
            OriginError::Local { .. } => FillError::Store(e.to_string()),
            OriginError::Refused { .. } => FillError::Unreachable(format!("{host}: {e}")),
            e => FillError::Refused(format!("{host}: {e}")),
        }
    }

    /// What the origin served failed verification.
    fn refused(host: &str, why: impl std::fmt::Display) -> Self {
        FillError::Refused(format!("{host}: {why}"))
    }
}

impl From<StoreError> for FillError {
    fn from(e: StoreError) -> Self {
        FillError::Store(e.to_string())
    }
}

impl From<KeepError> for FillError {
    fn from(e: KeepError) -> Self {
        match e {
            KeepError::SumsChanged { .. } => FillError::Refused(e.to_string()),
            KeepError::Store(e) => e.into(),
        }
    }
}

/// The cache of one registry: its stores, where archives are streamed to
/// before they are verified, and one origin client per upstream.
pub struct Cache {
    pub(crate) items: Arc<dyn ItemStore>,
    pub(crate) blobs: Arc<dyn BlobStore>,
    pub(crate) temp_dir: PathBuf,
    /// The registry's own archive size limit (an upstream may set less).
    pub(crate) max_archive_bytes: u64,
    pub(crate) clients: clients::Clients,
    /// Where each fill's outcome is recorded (issue 38).
    metrics: Arc<dyn Recorder>,
    clock: fn() -> u64,
}

impl Cache {
    pub fn new(
        items: Arc<dyn ItemStore>,
        blobs: Arc<dyn BlobStore>,
        temp_dir: PathBuf,
        deployment: Deployment,
        max_archive_bytes: u64,
    ) -> Self {
        Cache {
            items,
            blobs,
            temp_dir,
            max_archive_bytes,
            clients: clients::Clients::new(deployment),
            metrics: Arc::new(tfreg_http::metrics::NoMetrics),
            clock: tfreg_model::unix_now,
        }
    }

    /// The operator's allow-list for upstream credentials and `connect`
    /// (`tfreg serve`'s flags, the fill function's environment).
    pub fn with_policy(mut self, policy: tfreg_model::upstream::OperatorPolicy) -> Self {
        self.clients = self.clients.with_policy(policy);
        self
    }

    /// Record each fill's outcome in `metrics`.
    pub fn with_metrics(mut self, metrics: Arc<dyn Recorder>) -> Self {
        self.metrics = metrics;
        self
    }

    /// Resolve names through `lookup` (the tests' scripted resolver).
    pub fn with_lookup(mut self, lookup: Arc<dyn tfreg_outbound::Lookup>) -> Self {
        self.clients = self.clients.with_lookup(lookup);
        self
    }

    pub(crate) fn now(&self) -> u64 {
        (self.clock)()
    }

    /// Carry out `fill`, if nobody else is: take its lease, fetch, verify,
    /// store, and record the outcome in the lease. Never fails: every
    /// outcome is for the waiting clients (and the log).
    pub async fn run(&self, fill: &Fill) {
        let what = fill.key();
        let upstream = match upstreams::upstream(self.items.as_ref(), &fill.host).await {
            Ok(Some(u)) if u.settings.mode == Mode::Online => u,
            Ok(_) => return,
            Err(e) => {
                tracing::warn!(fill = %what, error = %e, "cannot read the upstream");
                return;
            }
        };
        let holder = format!("{:032x}", rand::random::<u128>());
        let held = match lease::take(self.items.as_ref(), &what, &holder, self.now()).await {
            Ok(lease::Taken::Held(l)) => l,
            Ok(_) => return,
            Err(e) => {
                tracing::warn!(fill = %what, error = %e, "cannot take the fill's lease");
                return;
            }
        };
        let held = Arc::new(Mutex::new(held));
        let started = std::time::Instant::now();
        let result = tokio::select! {
            r = self.fetch(&upstream, fill) => r,
            () = self.keep_renewing(held.clone()) => unreachable!("renewing ends only by pending"),
        };
        self.record(&fill.what, &result, started.elapsed());
        let outcome = match result {
            Ok(()) => {
                tracing::info!(fill = %what, "filled");
                Outcome::Stored
            }
            Err(e) => {
                tracing::warn!(fill = %what, error = %e, "fill failed");
                if let FillError::Refused(reason)
                | FillError::Setup(reason)
                | FillError::Unreachable(reason) = &e
                {
                    self.audit("cache.refused", &what, 502, reason).await;
                }
                Outcome::Failed {
                    status: e.status(),
                    message: e.public(&fill.host.to_string()),
                }
            }
        };
        let held = held.lock().expect("lease lock").clone();
        if let Err(e) = lease::release(self.items.as_ref(), &held, outcome, self.now()).await {
            tracing::warn!(fill = %what, error = %e, "cannot release the fill's lease");
        }
    }

    /// Carry out `fill` here and now, with no lease (a store of one run's
    /// alone: `tfreg sync`'s scratch store), and say how it ended.
    pub async fn fill_now(&self, fill: &Fill) -> Result<(), FillError> {
        let upstream = upstreams::upstream(self.items.as_ref(), &fill.host)
            .await?
            .ok_or_else(|| FillError::Setup(format!("{} is no upstream here", fill.host)))?;
        self.fetch(&upstream, fill).await
    }

    /// One version's fill (its release verified and kept, or a provider
    /// archive's) as a metric; version lists are no fill of a version, and
    /// the origin's 404 (a version nobody has) is no failure of the cache.
    fn record(
        &self,
        what: &FillWhat,
        result: &Result<(), FillError>,
        duration: std::time::Duration,
    ) {
        let kind = match what {
            FillWhat::ProviderVersion { .. } | FillWhat::ProviderArchive { .. } => {
                PackageKind::Provider
            }
            FillWhat::ModuleVersion { .. } => PackageKind::Module,
            FillWhat::ProviderList | FillWhat::ModuleList { .. } => return,
        };
        let outcome = match result {
            Ok(()) => FillOutcome::Filled,
            Err(FillError::NotFound(_)) => return,
            Err(FillError::Refused(_) | FillError::Unreachable(_)) => FillOutcome::Refused,
            Err(FillError::Unavailable(_)) => FillOutcome::OriginFailed,
            Err(FillError::Store(_) | FillError::Setup(_)) => FillOutcome::Failed,
        };
        self.metrics.fill(&FillRecord {
            kind,
            outcome,
            duration,
        });
    }

    /// Renew the lease every 20 s while the fetch goes on; if it was taken
    /// over, stop renewing (the fetch still ends; its writes are idempotent).
    async fn keep_renewing(&self, held: Arc<Mutex<Lease>>) {
        loop {
            tokio::time::sleep(std::time::Duration::from_secs(20)).await;
            let current = held.lock().expect("lease lock").clone();
            match lease::renew(self.items.as_ref(), &current, self.now()).await {
                Ok(renewed) => *held.lock().expect("lease lock") = renewed,
                Err(_) => break,
            }
        }
        std::future::pending::<()>().await
    }

    async fn fetch(&self, upstream: &UpstreamRecord, fill: &Fill) -> Result<(), FillError> {
        let provider = || provider::Filling::new(self, upstream, fill);
        let module = |system| module::Filling::new(self, upstream, fill, system);
        match &fill.what {
            FillWhat::ProviderList => provider()?.list().await.map(|_| ()),
            FillWhat::ProviderVersion { version } => provider()?.version(version).await.map(|_| ()),
            FillWhat::ProviderArchive { version, platform } => {
                provider()?.archive(version, platform).await
            }
            FillWhat::ModuleList { system } => module(system)?.list().await.map(|_| ()),
            FillWhat::ModuleVersion { system, version } => {
                module(system)?.version(version).await.map(|_| ())
            }
        }
    }

    /// One audit event of the cache (`cache.refused`, `cache.key-changed`).
    pub(crate) async fn audit(&self, action: &str, target: &str, status: u16, detail: &str) {
        let event = Event {
            at: self.now(),
            actor: Actor {
                kind: "cache".into(),
                token_id: None,
                token_name: None,
            },
            action: action.to_string(),
            target: target.to_string(),
            outcome: if status < 400 {
                AuditOutcome::Ok
            } else {
                AuditOutcome::Refused
            },
            status,
            detail: Some(detail.to_string()),
            request_id: format!("fill-{:016x}", rand::random::<u64>()),
        };
        audit::record(self.items.as_ref(), &event, true).await;
    }
}

/// `tfreg serve`'s filler: each fill a task of this process, at most one
/// per thing at a time here (the lease makes it one across processes).
#[derive(Clone)]
pub struct InProcess {
    cache: Arc<Cache>,
    in_flight: Arc<Mutex<HashSet<String>>>,
}

impl InProcess {
    pub fn new(cache: Cache) -> Self {
        InProcess {
            cache: Arc::new(cache),
            in_flight: Arc::default(),
        }
    }
}

#[async_trait]
impl Filler for InProcess {
    async fn start(&self, fill: Fill) -> Result<(), tfreg_http::Error> {
        let key = fill.key();
        if !self
            .in_flight
            .lock()
            .expect("in-flight lock")
            .insert(key.clone())
        {
            return Ok(());
        }
        let (cache, in_flight) = (self.cache.clone(), self.in_flight.clone());
        tokio::spawn(async move {
            cache.run(&fill).await;
            in_flight.lock().expect("in-flight lock").remove(&key);
        });
        Ok(())
    }
}
