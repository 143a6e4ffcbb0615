//! A configured upstream's providers as a source (issues 22, 40): the
//! answers come from what the pull-through cache keeps of it (`CACHE#`, never a
//! publish's or an import's items), and a miss is fetched by the registry's
//! filler when the caller may cause that ([`may_fill`]), within Terraform's
//! request timeout. How a list is answered is
//! [`tfreg_model::cache::fresh::decide`]'s decision.

use std::collections::BTreeMap;

use async_trait::async_trait;
use tfreg_http::error::Error;
use tfreg_http::registry::Registry;
use tfreg_model::address::{Platform, ProviderName};
use tfreg_model::blob_key::{BlobKey, CachedParts, FileName};
use tfreg_model::cache::fresh::listable;
use tfreg_model::cache::lease::{Fill, FillWhat};
use tfreg_model::cache::{CachedRelease, OriginVersion};
use tfreg_model::token::Principal;
use tfreg_model::upstream::UpstreamRecord;
use tfreg_model::version::Version;
use tfreg_store::catalog::cache::CachedProvider;

use super::{Listed, Package, ProviderSource, Release, Signed, Versions};
use crate::asked::Asked;
use crate::wait::{ARCHIVE_WAIT, fill_and_wait};

/// One upstream provider, as one request sees it.
pub(crate) struct Cached<'a> {
    asked: Asked<'a, CachedProvider>,
    provider: &'a ProviderName,
}

impl<'a> std::ops::Deref for Cached<'a> {
    type Target = Asked<'a, CachedProvider>;
    fn deref(&self) -> &Self::Target {
        &self.asked
    }
}

impl<'a> Cached<'a> {
    pub fn new(
        registry: &'a Registry,
        upstream: &'a UpstreamRecord,
        provider: &'a ProviderName,
        principal: &Principal,
    ) -> Result<Self, Error> {
        let place = CachedProvider::new(
            upstream.hostname.as_str(),
            &provider.namespace,
            &provider.r#type,
        );
        Ok(Cached {
            asked: Asked::new(
                registry,
                upstream,
                principal,
                ("providers", upstream.settings.serves.providers),
                (&provider.namespace, &provider.r#type),
                provider,
                place,
            )?,
            provider,
        })
    }

    /// The versions to list, and the origin's warnings: 404 when none can
    /// be answered from the cache now.
    async fn listed(&self) -> Result<(Vec<OriginVersion>, Vec<String>), Error> {
        let (list, degraded) = self.list(FillWhat::ProviderList).await?;
        let releases = if degraded {
            self.place.releases(self.registry.items.as_ref()).await?
        } else {
            BTreeMap::new()
        };
        let listed = listable(&list, &releases, degraded);
        if listed.is_empty() {
            return Err(Error::not_found(format!(
                "no version of {} can be answered from the cache now",
                self.name
            )));
        }
        Ok((listed, list.warnings))
    }

    /// A version's verified release, fetched first if need be.
    async fn cached_release(&self, version: &str) -> Result<CachedRelease, Error> {
        let items = self.registry.items.as_ref();
        let what = FillWhat::ProviderVersion {
            version: version.to_string(),
        };
        self.version(version, what, || async {
            Ok(self.place.release(items, version).await?)
        })
        .await
    }
}

#[async_trait]
impl ProviderSource for Cached<'_> {
    async fn versions(&self) -> Result<Versions, Error> {
        let (listed, warnings) = self.listed().await?;
        let listed = listed
            .into_iter()
            .map(|v| Listed {
                version: v.version,
                protocols: v.protocols,
                platforms: v
                    .platforms
                    .iter()
                    .filter_map(|p| Platform::parse_joined(p).ok())
                    .collect(),
                deprecated: None,
            })
            .collect();
        Ok(Versions { listed, warnings })
    }

    /// Every platform the origin's SHA256SUMS vouches for; one not stored
    /// yet is offered to a request that may fill (fetched on download).
    async fn release(&self, version: &Version) -> Result<Release, Error> {
        let release = self.cached_release(&version.to_string()).await?;
        let key =
            |sha256: &str, file: &str| archive_key(self.upstream, self.provider, sha256, file);
        let mut packages = Vec::new();
        for (platform, archive) in &release.platforms {
            let Ok(parsed) = Platform::parse_joined(platform) else {
                continue;
            };
            packages.push(Package {
                platform: parsed,
                filename: archive.filename.clone(),
                sha256: archive.sha256.clone(),
                key: key(&archive.sha256, &archive.filename)?,
                hashes: release.hashes(platform),
                size: archive.stored.as_ref().map(|s| s.size),
                offered: archive.stored.is_some() || self.may_fill,
            });
        }
        let signature = match &release.signature_sha256 {
            Some(sha) => Some(key(sha, "SHA256SUMS.sig")?),
            None => None,
        };
        Ok(Release {
            version: release.version.clone(),
            protocols: release.protocols.clone(),
            packages,
            signed: Signed::Origin {
                shasums: key(&release.shasums_sha256, "SHA256SUMS")?,
                signature,
                signing_keys: release.signing_keys.clone(),
            },
        })
    }

    fn no_package(&self, release: &Release, platform: &Platform) -> Error {
        let has: Vec<String> = release
            .packages
            .iter()
            .map(|p| p.platform.to_string())
            .collect();
        Error::not_found(format!(
            "{} {} has no {platform} build at the origin (it has {})",
            self.name,
            release.version,
            has.join(", ")
        ))
    }

    fn not_offered(&self, what: &str) -> Error {
        self.not_cached(what)
    }

    async fn fetched_size(
        &self,
        release: &Release,
        package: &Package,
    ) -> Result<Option<u64>, Error> {
        if package.size.is_some() || !package.offered {
            return Ok(package.size);
        }
        if !fill_archive(self.registry, self.upstream, &package.key).await? {
            return Ok(None);
        }
        let cached = self.cached_release(&release.version).await?;
        Ok(cached
            .platforms
            .get(&package.platform.to_string())
            .and_then(|a| a.stored.as_ref())
            .map(|s| s.size))
    }
}

/// Where the cache keeps an archive.
pub fn archive_key(
    upstream: &UpstreamRecord,
    provider: &ProviderName,
    sha256: &str,
    filename: &str,
) -> Result<BlobKey, Error> {
    let name = FileName::parse(filename).map_err(Error::internal)?;
    BlobKey::cached(
        upstream.hostname.as_str(),
        &provider.namespace,
        &provider.r#type,
        sha256,
        &name,
    )
    .map_err(Error::internal)
}

/// A cached archive that is not stored yet: fetch it (its URL was handed
/// out to a caller that may fill) and wait; true once it is there.
pub async fn fill_archive(
    registry: &Registry,
    upstream: &UpstreamRecord,
    key: &BlobKey,
) -> Result<bool, Error> {
    let Some(CachedParts {
        namespace: ns,
        provider_type: ty,
        sha256,
        file: filename,
        ..
    }) = key.cached_parts()
    else {
        return Err(Error::not_found(format!("{key} is not a cached archive")));
    };
    let provider = ProviderName::parse(ns, ty)?;
    let place = CachedProvider::new(upstream.hostname.as_str(), ns, ty);
    let items = registry.items.as_ref();
    let releases = place.releases(items).await?;
    let Some((version, platform)) = releases.values().find_map(|r| {
        r.platforms
            .iter()
            .find(|(_, a)| a.sha256 == sha256 && a.filename == filename)
            .map(|(p, _)| (r.version.clone(), p.clone()))
    }) else {
        return Err(Error::not_found(format!("{key}: no cached release has it")));
    };
    if registry.filler.is_none() || upstream.settings.mode == tfreg_model::upstream::Mode::Sealed {
        return Err(Error::not_found(format!(
            "{filename} of {}/{provider} {version} is not cached here",
            upstream.hostname
        )));
    }
    let fill = Fill {
        host: upstream.hostname.clone(),
        namespace: provider.namespace.clone(),
        name: provider.r#type.clone(),
        what: FillWhat::ProviderArchive {
            version: version.clone(),
            platform: platform.clone(),
        },
    };
    let stored = fill_and_wait(registry, fill, ARCHIVE_WAIT, || async {
        let release = place.release(items, &version).await?;
        Ok(release
            .and_then(|r| r.platforms.get(&platform).cloned())
            .and_then(|a| a.stored))
    })
    .await?;
    Ok(stored.is_some())
}
