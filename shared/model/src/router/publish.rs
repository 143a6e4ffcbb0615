//! A publish's routes: what it is for (a provider, a module, a mirrored
//! provider, at a version) and which of its two calls.

use crate::address::{Hostname, ModuleName, ProviderName};
use crate::router::segments::host_segment;
use crate::token::Realm;
use crate::version::Version;
use strum::VariantArray as _;

/// The two calls of every publish: announce the files, then finish after
/// uploading them. The last path segment is the variant's name, lowercase.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    strum::VariantArray,
    strum::IntoStaticStr,
)]
#[strum(serialize_all = "lowercase")]
pub enum PublishStep {
    Begin,
    Complete,
}

impl PublishStep {
    pub(crate) fn segment(self) -> &'static str {
        self.into()
    }

    pub(crate) fn parse(s: &str) -> Option<Self> {
        Self::VARIANTS
            .iter()
            .copied()
            .find(|step| step.segment() == s)
    }
}

/// What a publish is for.
#[derive(
    Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, strum::EnumDiscriminants,
)]
#[serde(try_from = "String", into = "String")]
#[strum_discriminants(
    name(PublishKind),
    vis(pub),
    doc = "What kind of thing a [`PublishTarget`] is.",
    derive(Hash, PartialOrd, Ord, strum::VariantArray, strum::IntoStaticStr),
    strum(serialize_all = "kebab-case")
)]
pub enum PublishTarget {
    /// A signed provider release of this registry.
    Provider {
        provider: ProviderName,
        version: Version,
    },
    /// A module version.
    Module {
        module: ModuleName,
        version: Version,
    },
    /// Provider packages of another registry, for the network mirror.
    Mirror {
        hostname: Hostname,
        provider: ProviderName,
        version: Version,
    },
}

/// One call of a publish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublishRoute {
    pub target: PublishTarget,
    pub step: PublishStep,
}

impl PublishTarget {
    /// `providers/ns/type/1.0.0`, `modules/ns/name/system/1.0.0` or `mirror/host/ns/type/1.0.0`.
    pub(crate) fn segments(&self) -> String {
        match self {
            PublishTarget::Provider { provider, version } => {
                format!("providers/{provider}/{version}")
            }
            PublishTarget::Module { module, version } => format!("modules/{module}/{version}"),
            PublishTarget::Mirror {
                hostname,
                provider,
                version,
            } => format!("mirror/{}/{provider}/{version}", host_segment(hostname)),
        }
    }

    /// What a token must cover to publish or manage this: its namespace;
    /// mirror imports (other registries' providers) are registry-wide.
    pub fn realm(&self) -> Realm<'_> {
        match self {
            PublishTarget::Provider { provider, .. } => Realm::Namespace(&provider.namespace),
            PublishTarget::Module { module, .. } => Realm::Namespace(&module.namespace),
            PublishTarget::Mirror { .. } => Realm::Registry,
        }
    }

    /// The version being published.
    pub fn version(&self) -> &Version {
        match self {
            PublishTarget::Provider { version, .. }
            | PublishTarget::Module { version, .. }
            | PublishTarget::Mirror { version, .. } => version,
        }
    }
}

impl std::fmt::Display for PublishTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.segments())
    }
}

impl From<PublishTarget> for String {
    fn from(t: PublishTarget) -> String {
        t.segments()
    }
}

impl PublishRoute {
    pub fn path(&self) -> String {
        format!(
            "/v1/publish/{}/{}",
            self.target.segments(),
            self.step.segment()
        )
    }
}
