//! `tfreg sync --from HOST` (issue 39): another registry's providers and
//! modules made this registry's own releases.
//!
//! Every version is fetched and verified by the pull-through cache's fill
//! engine ([`Cache::fill_now`]: the origin's SHA256SUMS and signature
//! checked with its keys, each archive against its SHA256SUMS line, a
//! module's archive checked as a publish checks one), into a *scratch*
//! store the caller gives (the CLI: a temporary SQLite and directory), so
//! nothing of the cache's lingers here. What was verified there is then
//! written into this registry as a publish writes it: each file through an
//! upload slot of its own (hashed again on the way in) to a key of its own,
//! a module's docs, then the release, create-only, which alone makes the
//! version visible. A sync killed at any moment has made visible only
//! whole, verified versions; run again it does the rest, and it never
//! fetches a version this registry already holds.
//!
//! Unlike the cache's copies, synced versions are listed as this
//! registry's own (`providers.v1`, `modules.v1` under its hostname), are
//! served while the origin is gone or has deleted them, and are exported,
//! verified and gc'd like published ones.

mod promote;

use std::sync::Arc;

use serde::Serialize;
use tfreg_model::address::{ModuleName, ProviderName};
use tfreg_model::audit::{Event, Outcome as AuditOutcome};
use tfreg_model::cache::lease::{Fill, FillWhat};
use tfreg_model::constraint::Constraints;
use tfreg_model::release::Origin as ReleaseOrigin;
use tfreg_model::token::Principal;
use tfreg_model::upstream::UpstreamRecord;
use tfreg_model::version::Version;
use tfreg_store::catalog::cache::CachedProvider;
use tfreg_store::catalog::cached_module::CachedModule;
use tfreg_store::catalog::{self, audit, upstreams};
use tfreg_store::{BlobStore, ItemStore, StoreError};

use crate::fill::{Cache, FillError};

/// What to sync: a provider (`NAMESPACE/TYPE`) or a module
/// (`NAMESPACE/NAME/SYSTEM`), by its name at the origin and here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Wanted {
    Provider(ProviderName),
    Module(ModuleName),
}

impl Wanted {
    pub fn parse(text: &str) -> Result<Self, String> {
        let parts: Vec<&str> = text.split('/').collect();
        match parts.as_slice() {
            [ns, t] => ProviderName::parse(ns, t)
                .map(Wanted::Provider)
                .map_err(|e| e.0),
            [ns, n, s] => ModuleName::parse(ns, n, s)
                .map(Wanted::Module)
                .map_err(|e| e.0),
            _ => Err(format!(
                "{text:?} is neither a provider (NAMESPACE/TYPE) nor a module (NAMESPACE/NAME/SYSTEM)"
            )),
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            Wanted::Provider(_) => "provider",
            Wanted::Module(_) => "module",
        }
    }

    fn name(&self) -> String {
        match self {
            Wanted::Provider(p) => p.to_string(),
            Wanted::Module(m) => m.to_string(),
        }
    }
}

/// One run's request.
#[derive(Debug, Clone)]
pub struct Plan {
    pub wanted: Vec<Wanted>,
    /// Only the versions meeting it (none: every version the origin lists).
    pub constraint: Option<Constraints>,
    /// Say what would be fetched; fetch and store nothing.
    pub dry_run: bool,
}

/// How one version (or a whole name, when its list could not be read) ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", content = "why", rename_all = "snake_case")]
pub enum SyncOutcome {
    /// Fetched, verified and stored: this registry's own now.
    Stored,
    /// This registry holds that version already: not fetched.
    Present,
    /// A dry run: would be fetched.
    WouldStore,
    /// Not something this registry can hold as its own (a module source
    /// the cache does not fetch, a `.zip` module, a `//subdir`).
    Skipped(String),
    /// What the origin served failed verification: nothing stored.
    Refused(String),
    /// The origin or a store failed (worth running again).
    Failed(String),
}

/// One line of a sync's report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Synced {
    pub kind: &'static str,
    pub name: String,
    /// Empty when the name's version list could not be read.
    pub version: String,
    #[serde(flatten)]
    pub outcome: SyncOutcome,
}

/// Why a sync could not start.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Stores with their blobs.
#[derive(Clone)]
pub struct Stores {
    pub items: Arc<dyn ItemStore>,
    pub blobs: Arc<dyn BlobStore>,
}

/// A sync from one origin into one registry.
pub struct Syncer {
    cache: Cache,
    scratch: Stores,
    target: Stores,
    origin: UpstreamRecord,
    clock: fn() -> u64,
}

impl Syncer {
    /// Sync from `origin` (its connection settings as an upstream's) into
    /// `target`, fetching through `scratch` (empty stores of this run
    /// alone; files are streamed to `temp_dir` first).
    pub async fn new(
        target: Stores,
        scratch: Stores,
        temp_dir: std::path::PathBuf,
        origin: UpstreamRecord,
        policy: tfreg_model::upstream::OperatorPolicy,
        max_archive_bytes: u64,
    ) -> Result<Self, SyncError> {
        let clock = tfreg_model::unix_now;
        upstreams::put_upstream(
            scratch.items.as_ref(),
            &origin.hostname,
            origin.settings.clone(),
            "sync",
            clock(),
        )
        .await?;
        let cache = Cache::new(
            scratch.items.clone(),
            scratch.blobs.clone(),
            temp_dir,
            tfreg_outbound::Deployment::Serve,
            max_archive_bytes,
        )
        .with_policy(policy);
        Ok(Syncer {
            cache,
            scratch,
            target,
            origin,
            clock,
        })
    }

    fn host(&self) -> String {
        self.origin.hostname.to_string()
    }

    /// Sync `plan`, calling `each` as each version ends; every line.
    pub async fn run(&self, plan: &Plan, each: &(dyn Fn(&Synced) + Send + Sync)) -> Vec<Synced> {
        let mut report = Vec::new();
        for wanted in &plan.wanted {
            let line = |version: &str, outcome| Synced {
                kind: wanted.kind(),
                name: wanted.name(),
                version: version.to_string(),
                outcome,
            };
            let versions = match self.versions(wanted, plan.constraint.as_ref()).await {
                Ok(v) => v,
                Err(e) => {
                    let synced = line("", failed(e));
                    each(&synced);
                    report.push(synced);
                    continue;
                }
            };
            for version in versions {
                let outcome = match self.present(wanted, &version).await {
                    Ok(true) => SyncOutcome::Present,
                    Ok(false) if plan.dry_run => SyncOutcome::WouldStore,
                    Ok(false) => self.sync_version(wanted, &version).await,
                    Err(e) => SyncOutcome::Failed(e.to_string()),
                };
                let synced = line(&version.to_string(), outcome);
                self.audit(&synced).await;
                each(&synced);
                report.push(synced);
            }
        }
        report
    }

    /// The origin's versions of `wanted` that `constraint` allows, oldest first.
    async fn versions(
        &self,
        wanted: &Wanted,
        constraint: Option<&Constraints>,
    ) -> Result<Vec<Version>, FillError> {
        let items = self.scratch.items.as_ref();
        let list = match wanted {
            Wanted::Provider(p) => {
                self.fill(&p.namespace, &p.r#type, FillWhat::ProviderList)
                    .await?;
                CachedProvider::new(&self.host(), &p.namespace, &p.r#type)
                    .origin_list(items)
                    .await?
            }
            Wanted::Module(m) => {
                let what = FillWhat::ModuleList {
                    system: m.system.clone(),
                };
                self.fill(&m.namespace, &m.name, what).await?;
                CachedModule::new(&self.host(), &m.namespace, &m.name, &m.system)
                    .origin_list(items)
                    .await?
            }
        };
        let mut versions: Vec<Version> = list
            .map(|l| l.versions)
            .unwrap_or_default()
            .into_iter()
            .filter_map(|v| Version::parse(&v.version).ok())
            .filter(|v| constraint.is_none_or(|c| c.matches(v)))
            .collect();
        versions.sort();
        Ok(versions)
    }

    /// Does this registry hold `version` of `wanted` already?
    async fn present(&self, wanted: &Wanted, version: &Version) -> Result<bool, StoreError> {
        let items = self.target.items.as_ref();
        Ok(match wanted {
            Wanted::Provider(p) => {
                catalog::provider_release(items, &ReleaseOrigin::Registry, p, version)
                    .await?
                    .is_some()
            }
            Wanted::Module(m) => catalog::module_release(items, m, version).await?.is_some(),
        })
    }

    async fn sync_version(&self, wanted: &Wanted, version: &Version) -> SyncOutcome {
        let done = match wanted {
            Wanted::Provider(p) => self.provider_version(p, version).await,
            Wanted::Module(m) => self.module_version(m, version).await,
        };
        match done {
            Ok(outcome) => outcome,
            Err(e) => failed(e),
        }
    }

    /// Run one fill of the origin's `namespace/name` now, in the scratch store.
    async fn fill(&self, namespace: &str, name: &str, what: FillWhat) -> Result<(), FillError> {
        self.cache
            .fill_now(&Fill {
                host: self.origin.hostname.clone(),
                namespace: namespace.to_string(),
                name: name.to_string(),
                what,
            })
            .await
    }

    /// One audit line per version stored, refused or failed (actor `operator`).
    async fn audit(&self, synced: &Synced) {
        let (outcome, status, detail) = match &synced.outcome {
            SyncOutcome::Stored => (AuditOutcome::Ok, 201, None),
            SyncOutcome::Refused(why) => (AuditOutcome::Refused, 502, Some(why.clone())),
            SyncOutcome::Failed(why) => (AuditOutcome::Failed, 503, Some(why.clone())),
            _ => return,
        };
        let target = format!("{} {} {}", synced.kind, synced.name, synced.version);
        self.record("sync", &target, (outcome, status), detail)
            .await;
    }

    /// One audit event of this sync.
    async fn record(
        &self,
        action: &str,
        target: &str,
        (outcome, status): (AuditOutcome, u16),
        detail: Option<String>,
    ) {
        let event = Event {
            at: (self.clock)(),
            actor: Principal::Operator.actor(),
            action: action.into(),
            target: format!("{target} from {}", self.host()),
            outcome,
            status,
            detail,
            request_id: format!("sync-{:016x}", rand::random::<u64>()),
        };
        audit::record(self.target.items.as_ref(), &event, true).await;
    }
}

/// A fill's failure as a line of the report: what the origin served and
/// failed verification is a refusal, anything else a failure to retry.
fn failed(e: FillError) -> SyncOutcome {
    match e {
        FillError::Refused(why) => SyncOutcome::Refused(why),
        e => SyncOutcome::Failed(e.to_string()),
    }
}
