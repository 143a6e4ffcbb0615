//! What the registry measures (issue 38): one record per request, per fill
//! and per publish, handed to the [`Recorder`] the entry point gave the
//! registry. In AWS: CloudWatch embedded-metric-format log lines
//! (tfreg-lambda); in `tfreg serve`: Prometheus counters and histograms on
//! `--metrics-listen` (the CLI); in tests and by default: nothing.
//!
//! Labels are bounded: an endpoint's name (never a raw path), a status
//! class, a package kind and an outcome; never a version, a name or who
//! asked (that is usage: [`crate::usage`]).

use std::time::Duration;

/// One request, as the pipeline's metrics layer saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestRecord {
    /// [`tfreg_model::router::Endpoint::name`], or `none` for a path no
    /// route matches.
    pub endpoint: &'static str,
    pub status: u16,
    pub latency: Duration,
    /// The first request this process served (a Lambda cold start).
    pub cold_start: bool,
}

impl RequestRecord {
    /// `2xx`, `3xx`, `4xx` or `5xx`.
    pub fn status_class(&self) -> &'static str {
        match self.status {
            200..=299 => "2xx",
            300..=399 => "3xx",
            400..=499 => "4xx",
            _ => "5xx",
        }
    }
}

/// A provider or a module.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PackageKind {
    Provider,
    Module,
}

impl PackageKind {
    pub fn name(self) -> &'static str {
        match self {
            PackageKind::Provider => "provider",
            PackageKind::Module => "module",
        }
    }
}

/// How one fill of the pull-through cache (one upstream version fetched,
/// verified and kept) ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FillOutcome {
    /// Fetched, verified, kept.
    Filled,
    /// Refused: the origin's bytes or signatures did not verify, or the
    /// origin's answer was bad (the origin's fault, not ours).
    Refused,
    /// The origin was unreachable, timed out or failed (5xx).
    OriginFailed,
    /// Our store or our bug.
    Failed,
}

impl FillOutcome {
    pub fn name(self) -> &'static str {
        match self {
            FillOutcome::Filled => "filled",
            FillOutcome::Refused => "refused",
            FillOutcome::OriginFailed => "origin_failed",
            FillOutcome::Failed => "failed",
        }
    }

    /// Counted as a fill failure (alarmed on).
    pub fn is_failure(self) -> bool {
        !matches!(self, FillOutcome::Filled)
    }
}

/// One fill.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FillRecord {
    pub kind: PackageKind,
    pub outcome: FillOutcome,
    pub duration: Duration,
}

/// How one publish (a version's `complete`, or an import) ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PublishOutcome {
    Published,
    /// The client's mistake (bad archive, signature, conflict): 4xx.
    Refused,
    /// Ours or the store's: 5xx.
    Failed,
}

impl PublishOutcome {
    pub fn name(self) -> &'static str {
        match self {
            PublishOutcome::Published => "published",
            PublishOutcome::Refused => "refused",
            PublishOutcome::Failed => "failed",
        }
    }
}

/// One publish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublishRecord {
    pub kind: PackageKind,
    pub outcome: PublishOutcome,
}

/// Where the records go. Called on the request's path: an implementation
/// only updates memory or writes a log line, never waits on the network.
pub trait Recorder: Send + Sync {
    fn request(&self, record: &RequestRecord);
    fn fill(&self, record: &FillRecord);
    fn publish(&self, record: &PublishRecord);
}

/// Records nothing: the default.
pub struct NoMetrics;

impl Recorder for NoMetrics {
    fn request(&self, _: &RequestRecord) {}
    fn fill(&self, _: &FillRecord) {}
    fn publish(&self, _: &PublishRecord) {}
}
