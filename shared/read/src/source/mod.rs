//! Where the read views get providers and modules from (issue 40), in the
//! manner of Terraform's `internal/getproviders` (`Source`, `MultiSource`):
//! one source per kind of thing this registry answers for, each behind the
//! same two questions (which versions? what is this version?), and every
//! view (the registry protocols, the network mirror) one reader of them.
//!
//! - [`own::Releases`]: what is published here ([`Origin::Registry`]) and
//!   what `tfreg mirror import` brought from another host
//!   ([`Origin::Mirror`]): one read of a versions index, one of a release.
//! - [`cached::Cached`] and [`cached_module::CachedModule`]: a configured
//!   upstream's, through the pull-through cache, as one request sees them
//!   (may it make the cache fetch?).
//! - [`own::Modules`]: the modules published here.
//!
//! `multi` picks a route's source, as a `MultiSource` picks by host:
//! the registry's own hostname, an imported host, an upstream.

pub(crate) mod cached;
pub(crate) mod cached_module;
pub(crate) mod multi;
pub(crate) mod own;

use async_trait::async_trait;
use tfreg_http::error::Error;
use tfreg_model::address::Platform;
use tfreg_model::blob_key::BlobKey;
use tfreg_model::release::{SigningKey, StoredFile};
use tfreg_model::version::Version;

/// One version as a versions list shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Listed {
    pub version: String,
    pub protocols: Vec<String>,
    pub platforms: Vec<Platform>,
    /// The deprecation's message.
    pub deprecated: Option<String>,
}

/// The versions to list (yanked ones are not), and the warnings to show.
#[derive(Debug, Clone, Default)]
pub(crate) struct Versions {
    pub listed: Vec<Listed>,
    pub warnings: Vec<String>,
}

/// One platform's archive of a version.
#[derive(Debug, Clone)]
pub(crate) struct Package {
    pub platform: Platform,
    pub filename: String,
    /// Its SHA256SUMS line: the `zh:` hash.
    pub sha256: String,
    pub key: BlobKey,
    /// The lock file's hashes (`h1:` once known, `zh:`).
    pub hashes: Vec<String>,
    /// Once stored here.
    pub size: Option<u64>,
    /// May this request be handed its URL (stored, or fetched on download)?
    pub offered: bool,
}

/// Who vouches for a version's archives.
#[derive(Debug, Clone)]
pub(crate) enum Signed {
    /// SHA256SUMS and its signature verified here at publish, with the key.
    Here {
        shasums: BlobKey,
        signature: BlobKey,
        key: SigningKey,
    },
    /// The origin's SHA256SUMS, signature and `signing_keys` object, as it
    /// served them (verified by the cache; Terraform verifies them again).
    Origin {
        shasums: BlobKey,
        signature: Option<BlobKey>,
        signing_keys: String,
    },
    /// Nothing: a mirror import carries only the zips and their hashes.
    Unsigned,
}

/// One version of a provider.
#[derive(Debug, Clone)]
pub(crate) struct Release {
    pub version: String,
    pub protocols: Vec<String>,
    pub packages: Vec<Package>,
    pub signed: Signed,
}

/// A provider as one source holds it.
#[async_trait]
pub(crate) trait ProviderSource: Send + Sync {
    /// Its versions to list: 404 when none.
    async fn versions(&self) -> Result<Versions, Error>;
    /// One version: 404 when the source has none such.
    async fn release(&self, version: &Version) -> Result<Release, Error>;
    /// The 404 of a platform `release` has no build for.
    fn no_package(&self, release: &Release, platform: &Platform) -> Error;
    /// The 404 of `what`, which this request may not be handed.
    fn not_offered(&self, what: &str) -> Error;
    /// May its answers be kept for every caller allowed to read the route
    /// (not a cache's, which answer by who may make it fetch)?
    fn keepable(&self) -> bool {
        false
    }
    /// Every version it has, listed or not (the OCI view answers a yanked
    /// version by digest): the listed ones, unless it has more.
    async fn every_version(&self) -> Result<Vec<String>, Error> {
        Ok(self
            .versions()
            .await?
            .listed
            .into_iter()
            .map(|v| v.version)
            .collect())
    }
    /// The size of a package offered but not stored here yet (a cache's):
    /// fetched now, within the archive wait; `None` while it is still
    /// being fetched.
    async fn fetched_size(
        &self,
        _release: &Release,
        package: &Package,
    ) -> Result<Option<u64>, Error> {
        Ok(package.size)
    }
}

/// A module as one source holds it.
#[async_trait]
pub(crate) trait ModuleSource: Send + Sync {
    /// Its versions to list: 404 when none.
    async fn versions(&self) -> Result<Vec<Listed>, Error>;
    /// Where a version's archive is (`X-Terraform-Get`).
    async fn location(&self, version: &Version) -> Result<String, Error>;
    /// Every version it has, listed or not (the OCI view answers a yanked
    /// version by digest): the listed ones, unless it has more.
    async fn every_version(&self) -> Result<Vec<String>, Error> {
        Ok(self
            .versions()
            .await?
            .into_iter()
            .map(|v| v.version)
            .collect())
    }
    /// A version's archive as a zip (the OCI view's layer): 404 where there
    /// is none.
    async fn zip(&self, version: &Version) -> Result<StoredFile, Error> {
        Err(Error::not_found(format!(
            "version {version} of this module is not served as an OCI artifact"
        )))
    }
}
