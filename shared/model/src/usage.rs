//! Who installs what (issue 38): a download, who made it (a consumer, never
//! a secret), and the usage report the admin API, `tfreg usage` and the UI
//! show.
//!
//! A download is counted where the protocol shows one: a provider's
//! `download/<os>/<arch>` (own and the pull-through cache's, with its
//! platform), a module's `download`, a mirror's `<version>.json` (one per
//! version an init installs; the platform it picks is not shown to the
//! registry, so none is recorded).

use serde::{Deserialize, Serialize};

/// What was downloaded, as Terraform writes its address: the registry's
/// own packages under its hostname, mirror-imported and cached ones under
/// their origin's.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Package {
    Provider {
        hostname: String,
        namespace: String,
        r#type: String,
    },
    Module {
        hostname: String,
        namespace: String,
        name: String,
        system: String,
    },
}

impl Package {
    /// `HOST/NS/TYPE` or `HOST/NS/NAME/SYSTEM`.
    pub fn address(&self) -> String {
        match self {
            Package::Provider {
                hostname,
                namespace,
                r#type,
            } => format!("{hostname}/{namespace}/{type}"),
            Package::Module {
                hostname,
                namespace,
                name,
                system,
            } => format!("{hostname}/{namespace}/{name}/{system}"),
        }
    }

    /// The namespace, whose admins may see its consumers.
    pub fn namespace(&self) -> &str {
        match self {
            Package::Provider { namespace, .. } | Package::Module { namespace, .. } => namespace,
        }
    }
}

/// How a consumer was identified.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ConsumerKind {
    /// A token an admin made: by its name and public id.
    Token,
    /// A person signed in through the identity provider (`terraform login`,
    /// the UI): by the account, whatever token the sign-in issued.
    Sso,
    /// A CI job through the token exchange: by repository and workflow.
    Ci,
    /// No token (a registry open to anonymous reads).
    Anonymous,
}

/// Who downloaded: never a secret.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Consumer {
    pub kind: ConsumerKind,
    /// Stable across that consumer's tokens (the key counts are kept by):
    /// `token:<token id>`, `sso:<issuer>|<subject>`, `ci:<issuer>|<repository>|<workflow>`, `anonymous`.
    pub id: String,
    /// What people read: `ci-deploy (3f2a9c1b)`, `alice@example.com`,
    /// `acme/infra .github/workflows/plan.yml`, `anonymous`.
    pub label: String,
}

/// One download, as the read side reports it to the usage sink.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Download {
    pub package: Package,
    pub version: String,
    /// `linux_amd64`, where the protocol shows it.
    pub platform: Option<String>,
    pub consumer: Consumer,
    /// Unix seconds.
    pub at: u64,
}

/// Downloads of one version on one day (UTC), per platform where known.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DayCount {
    /// `2026-12-02`.
    pub day: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platform: Option<String>,
    pub downloads: u64,
}

/// One consumer of one version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsumerUsage {
    pub consumer: Consumer,
    pub downloads: u64,
    /// Unix seconds.
    pub first_seen: u64,
    pub last_seen: u64,
}

/// One version's usage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VersionUsage {
    pub version: String,
    /// Every download counted (the day counts are kept for
    /// a bounded time; this is not).
    pub downloads: u64,
    /// The last download's time (none: never downloaded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_download: Option<u64>,
    /// Newest day first.
    pub days: Vec<DayCount>,
    /// Most recently seen first. Empty where the reader may not see
    /// consumers (counts are for every reader; consumers for admins of the
    /// package's namespace).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub consumers: Vec<ConsumerUsage>,
}

/// A package's usage: `GET /v1/admin/usage/...`, `tfreg usage --json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageReport {
    pub package: Package,
    /// Newest version first (semver order). The store's report lists the
    /// versions it has counts for; the surfaces that know the package's
    /// versions (the admin API, the CLI, the UI) add the others with 0.
    pub versions: Vec<VersionUsage>,
}
