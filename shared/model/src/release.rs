//! What is published, as the registry keeps it: a provider release with
//! every platform's package, a module release, where each archive's bytes
//! are kept, and a release's lifecycle (deprecated, yanked). Pure data; the
//! store keeps these as items.

use serde::{Deserialize, Serialize};

use crate::address::Hostname;
use crate::blob_key::BlobKey;

/// A change of a release's status that keeps its files (every one:
/// [`strum::VariantArray::VARIANTS`]; its name and path segment: the
/// variant's, lowercase).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    serde::Serialize,
    serde::Deserialize,
    strum::VariantArray,
    strum::IntoStaticStr,
)]
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "lowercase")]
pub enum LifecycleAction {
    /// Still installable everywhere; clients are warned.
    Deprecate,
    Undeprecate,
    /// Left out of versions lists; exact downloads still answer.
    Yank,
    Unyank,
}

impl LifecycleAction {
    pub fn name(self) -> &'static str {
        self.into()
    }

    /// The action done, for audit lines and answers ("yanked", "deprecated").
    pub fn done(self) -> &'static str {
        match self {
            Self::Deprecate => "deprecated",
            Self::Undeprecate => "undeprecated",
            Self::Yank => "yanked",
            Self::Unyank => "unyanked",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        <Self as strum::VariantArray>::VARIANTS
            .iter()
            .copied()
            .find(|a| a.name() == s)
    }
}

/// Where a provider release comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// Published to this registry (`providers.v1`, and the mirror under our own hostname).
    Registry,
    /// Imported for the network mirror, from another origin registry.
    Mirror(Hostname),
}

/// An archive file kept in the blob store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredFile {
    pub filename: String,
    /// Lowercase hex sha256.
    pub sha256: String,
    pub size: u64,
    /// Where the bytes are kept.
    pub key: BlobKey,
}

/// One platform package of a provider release.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderPackage {
    pub os: String,
    pub arch: String,
    pub file: StoredFile,
    /// `h1:` hash of the zip's contents.
    pub h1: String,
}

impl ProviderPackage {
    /// `os_arch`.
    pub fn platform(&self) -> String {
        format!("{}_{}", self.os, self.arch)
    }

    /// `["h1:…", "zh:…"]`.
    pub fn hashes(&self) -> Vec<String> {
        vec![self.h1.clone(), crate::hashing::zh_hash(&self.file.sha256)]
    }
}

/// The public key a release was signed with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SigningKey {
    pub key_id: String,
    pub ascii_armor: String,
}

/// Who marked a release, when and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mark {
    pub message: String,
    pub at: u64,
    /// [`crate::token::Actor::describe`].
    pub by: String,
}

/// A release's status besides "published": both marks keep every file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lifecycle {
    /// Still listed and installable; clients are told.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deprecated: Option<Mark>,
    /// Left out of versions lists (new resolutions skip it); exact downloads answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub yanked: Option<Mark>,
}

impl Lifecycle {
    pub fn is_empty(&self) -> bool {
        self.deprecated.is_none() && self.yanked.is_none()
    }

    /// Listed in versions lists?
    pub fn listed(&self) -> bool {
        self.yanked.is_none()
    }

    /// Apply `action`; whether anything changed.
    pub fn apply(&mut self, action: LifecycleAction, mark: Mark) -> bool {
        let slot = match action {
            LifecycleAction::Deprecate | LifecycleAction::Undeprecate => &mut self.deprecated,
            LifecycleAction::Yank | LifecycleAction::Unyank => &mut self.yanked,
        };
        let new = match action {
            LifecycleAction::Deprecate | LifecycleAction::Yank => Some(mark),
            LifecycleAction::Undeprecate | LifecycleAction::Unyank => None,
        };
        let changed = match (&*slot, &new) {
            (Some(old), Some(new)) => old.message != new.message,
            (None, None) => false,
            _ => true,
        };
        if changed {
            *slot = new;
        }
        changed
    }
}

/// One version of a provider, with every platform.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderRelease {
    pub version: String,
    pub protocols: Vec<String>,
    pub packages: Vec<ProviderPackage>,
    /// SHA256SUMS, its signature and the key (registry releases; mirrored ones have none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shasums: Option<StoredFile>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shasums_signature: Option<StoredFile>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signing_key: Option<SigningKey>,
    pub published_at: u64,
    #[serde(default, skip_serializing_if = "Lifecycle::is_empty")]
    pub lifecycle: Lifecycle,
}

impl ProviderRelease {
    /// What makes two publishes "the same content": every file's name and sha256.
    pub fn content(&self) -> Vec<(String, String)> {
        let mut files: Vec<(String, String)> = self
            .packages
            .iter()
            .map(|p| &p.file)
            .chain(self.shasums.iter())
            .chain(self.shasums_signature.iter())
            .map(|f| (f.filename.clone(), f.sha256.clone()))
            .collect();
        files.sort();
        files
    }

    pub fn package(&self, os: &str, arch: &str) -> Option<&ProviderPackage> {
        self.packages.iter().find(|p| p.os == os && p.arch == arch)
    }

    /// Every archive file the release refers to.
    pub fn keys(&self) -> Vec<BlobKey> {
        self.packages
            .iter()
            .map(|p| &p.file)
            .chain(self.shasums.iter())
            .chain(self.shasums_signature.iter())
            .map(|f| f.key.clone())
            .collect()
    }
}

/// One version of a module.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModuleRelease {
    pub version: String,
    pub file: StoredFile,
    pub published_at: u64,
    #[serde(default, skip_serializing_if = "Lifecycle::is_empty")]
    pub lifecycle: Lifecycle,
}
