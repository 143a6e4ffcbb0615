//! The sources of what this registry holds itself: providers published
//! here or imported for the mirror ([`Releases`], by [`Origin`]) and
//! modules published here ([`Modules`]). A list is one read of the versions
//! index, a version one read of its release; yanked versions are listed by
//! no one and still answered exactly.

use async_trait::async_trait;
use tfreg_http::error::Error;
use tfreg_http::registry::Registry;
use tfreg_model::address::{ModuleName, Platform, ProviderName};
use tfreg_model::release::StoredFile;
use tfreg_model::version::Version;
use tfreg_store::catalog::index::{VersionIndex, View};
use tfreg_store::catalog::{self, Origin};

use super::{Listed, ModuleSource, Package, ProviderSource, Release, Signed, Versions};

/// A provider this registry holds: published here, or imported from
/// another host for the network mirror.
pub(crate) struct Releases<'a> {
    registry: &'a Registry,
    origin: Origin,
    provider: &'a ProviderName,
    /// `provider acme/widget` (published), `provider host/acme/widget` (the mirror's).
    what: String,
}

impl<'a> Releases<'a> {
    pub fn new(
        registry: &'a Registry,
        origin: Origin,
        provider: &'a ProviderName,
        what: String,
    ) -> Self {
        Releases {
            registry,
            origin,
            provider,
            what,
        }
    }
}

/// What a versions list shows of an index: all but the yanked versions;
/// 404 when nothing is published, or everything is yanked (exact downloads
/// still work).
fn listed<'i>(index: &'i VersionIndex, what: &str) -> Result<Vec<View<'i>>, Error> {
    if index.is_empty() {
        return Err(Error::not_found(format!("{what} not found")));
    }
    let listed: Vec<View<'_>> = index.versions().filter(|v| !v.yanked).collect();
    if listed.is_empty() {
        return Err(Error::not_found(format!(
            "every version of {what} is yanked"
        )));
    }
    Ok(listed)
}

/// One warning per deprecation message, naming its versions in order:
/// `versions 1.0.0, 1.1.0 are deprecated: use 2.x`.
fn deprecation_warnings(listed: &[View<'_>]) -> Vec<String> {
    let mut by_message: Vec<(&str, Vec<&str>)> = Vec::new();
    for v in listed {
        if let Some(message) = v.deprecated {
            match by_message.iter_mut().find(|(m, _)| *m == message) {
                Some((_, versions)) => versions.push(v.version),
                None => by_message.push((message, vec![v.version])),
            }
        }
    }
    by_message
        .into_iter()
        .map(|(message, versions)| match versions.as_slice() {
            [one] => format!("version {one} is deprecated: {message}"),
            many => format!("versions {} are deprecated: {message}", many.join(", ")),
        })
        .collect()
}

fn entry(v: &View<'_>) -> Listed {
    Listed {
        version: v.version.to_string(),
        protocols: v.protocols.to_vec(),
        platforms: v
            .platforms
            .iter()
            .map(|(os, arch)| Platform {
                os: os.clone(),
                arch: arch.clone(),
            })
            .collect(),
        deprecated: v.deprecated.map(String::from),
    }
}

#[async_trait]
impl ProviderSource for Releases<'_> {
    async fn versions(&self) -> Result<Versions, Error> {
        let index =
            catalog::provider_index(self.registry.items.as_ref(), &self.origin, self.provider)
                .await?;
        let what = match self.origin {
            Origin::Registry => self.what.clone(),
            Origin::Mirror(_) => format!("{} in this mirror", self.what),
        };
        let views = listed(&index, &what)?;
        Ok(Versions {
            warnings: deprecation_warnings(&views),
            listed: views.iter().map(entry).collect(),
        })
    }

    async fn release(&self, version: &Version) -> Result<Release, Error> {
        let not_found = || Error::not_found(format!("{} version {version} not found", self.what));
        let release = catalog::provider_release(
            self.registry.items.as_ref(),
            &self.origin,
            self.provider,
            version,
        )
        .await?
        .ok_or_else(not_found)?;
        let signed = match (
            &release.shasums,
            &release.shasums_signature,
            &release.signing_key,
        ) {
            (Some(sums), Some(sig), Some(key)) => Signed::Here {
                shasums: sums.key.clone(),
                signature: sig.key.clone(),
                key: key.clone(),
            },
            _ => Signed::Unsigned,
        };
        let packages = release
            .packages
            .iter()
            .map(|p| Package {
                platform: Platform {
                    os: p.os.clone(),
                    arch: p.arch.clone(),
                },
                filename: p.file.filename.clone(),
                sha256: p.file.sha256.clone(),
                key: p.file.key.clone(),
                hashes: p.hashes(),
                size: Some(p.file.size),
                offered: true,
            })
            .collect();
        Ok(Release {
            version: release.version,
            protocols: release.protocols,
            packages,
            signed,
        })
    }

    fn no_package(&self, release: &Release, platform: &Platform) -> Error {
        Error::not_found(format!(
            "{} version {} has no package for {platform}",
            self.what, release.version
        ))
    }

    fn not_offered(&self, what: &str) -> Error {
        Error::not_found(format!("{what} of {} not found", self.what))
    }

    fn keepable(&self) -> bool {
        true
    }

    async fn every_version(&self) -> Result<Vec<String>, Error> {
        let index =
            catalog::provider_index(self.registry.items.as_ref(), &self.origin, self.provider)
                .await?;
        if index.is_empty() {
            return Err(Error::not_found(format!("{} not found", self.what)));
        }
        Ok(index.versions().map(|v| v.version.to_string()).collect())
    }
}

/// A module published here.
pub(crate) struct Modules<'a> {
    registry: &'a Registry,
    module: &'a ModuleName,
}

impl<'a> Modules<'a> {
    pub fn new(registry: &'a Registry, module: &'a ModuleName) -> Self {
        Modules { registry, module }
    }
}

#[async_trait]
impl ModuleSource for Modules<'_> {
    async fn versions(&self) -> Result<Vec<Listed>, Error> {
        let index = catalog::module_index(self.registry.items.as_ref(), self.module).await?;
        let views = listed(&index, &format!("module {}", self.module))?;
        Ok(views.iter().map(entry).collect())
    }

    async fn location(&self, version: &Version) -> Result<String, Error> {
        let not_found = || {
            Error::not_found(format!(
                "module {} version {version} not found",
                self.module
            ))
        };
        let release = catalog::module_release(self.registry.items.as_ref(), self.module, version)
            .await?
            .ok_or_else(not_found)?;
        self.registry.read_url(&release.file.key).await
    }

    async fn every_version(&self) -> Result<Vec<String>, Error> {
        let index = catalog::module_index(self.registry.items.as_ref(), self.module).await?;
        if index.is_empty() {
            return Err(Error::not_found(format!(
                "module {} not found",
                self.module
            )));
        }
        Ok(index.versions().map(|v| v.version.to_string()).collect())
    }

    /// The zip made of the archive at publish (or by `tfreg reindex`, for a
    /// version published before the OCI view).
    async fn zip(&self, version: &Version) -> Result<StoredFile, Error> {
        let items = self.registry.items.as_ref();
        let release = catalog::module_release(items, self.module, version)
            .await?
            .ok_or_else(|| {
                Error::not_found(format!(
                    "module {} version {version} not found",
                    self.module
                ))
            })?;
        catalog::module_zip(items, self.module, &release)
            .await?
            .ok_or_else(|| {
                Error::not_found(format!(
                    "module {} version {version} has no OCI artifact yet: it was published before the OCI view; an operator's `tfreg reindex` makes it",
                    self.module
                ))
            })
    }
}
