//! The network mirror for a configured upstream (issue 22): the answers
//! come from what the pull-through cache keeps of it (`CACHE#`, never a
//! publish's or an import's items), and a miss is fetched by the registry's
//! filler when the caller may cause that ([`may_fill`]), within Terraform's
//! request timeout. How a list is answered is
//! [`tfreg_model::cache::fresh::decide`]'s decision.

use std::collections::BTreeMap;

use http::StatusCode;
use tfreg_http::answer_cache::Answer;
use tfreg_http::error::Error;
use tfreg_http::registry::Registry;
use tfreg_model::address::{Platform, ProviderName};
use tfreg_model::blob_key::{BlobKey, CachedParts, FileName};
use tfreg_model::cache::fresh::listable;
use tfreg_model::cache::lease::{Fill, FillWhat};
use tfreg_model::cache::{CachedRelease, OriginVersion};
use tfreg_model::protocol::{
    EmptyObject, MirrorArchive, MirrorIndex, MirrorVersion, PlatformEntry, ProviderVersionEntry,
    ProviderVersions,
};
use tfreg_model::token::Principal;
use tfreg_model::upstream::UpstreamRecord;
use tfreg_store::catalog::cache::CachedProvider;

use crate::asked::Asked;
use crate::wait::{ARCHIVE_WAIT, fill_and_wait};

/// One upstream provider, as one request sees it.
struct Cached<'a> {
    asked: Asked<'a, CachedProvider>,
}

impl<'a> std::ops::Deref for Cached<'a> {
    type Target = Asked<'a, CachedProvider>;
    fn deref(&self) -> &Self::Target {
        &self.asked
    }
}

impl<'a> Cached<'a> {
    fn new(
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
    async fn release(&self, version: &str) -> Result<CachedRelease, Error> {
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

/// `index.json` of a configured upstream's provider.
pub async fn mirror_index(
    registry: &Registry,
    upstream: &UpstreamRecord,
    provider: &ProviderName,
    principal: &Principal,
) -> Result<Answer, Error> {
    let cached = Cached::new(registry, upstream, provider, principal)?;
    let (listed, _) = cached.listed().await?;
    let versions: BTreeMap<String, EmptyObject> = listed
        .into_iter()
        .map(|v| (v.version, EmptyObject {}))
        .collect();
    Ok(Answer::json(StatusCode::OK, &MirrorIndex { versions }))
}

/// `<version>.json` of a configured upstream's provider: every platform
/// with the archive's URL (fetched when first downloaded, for a caller
/// that may fill) and its hashes; only stored archives for a caller that
/// may not.
pub async fn mirror_version(
    registry: &Registry,
    upstream: &UpstreamRecord,
    provider: &ProviderName,
    version: &str,
    principal: &Principal,
) -> Result<Answer, Error> {
    let cached = Cached::new(registry, upstream, provider, principal)?;
    let release = cached.release(version).await?;
    let mut archives = BTreeMap::new();
    for (platform, archive) in &release.platforms {
        if archive.stored.is_none() && !cached.may_fill {
            continue;
        }
        let key = archive_key(upstream, provider, &archive.sha256, &archive.filename)?;
        archives.insert(
            platform.clone(),
            MirrorArchive {
                url: registry.read_url(&key).await?,
                hashes: release.hashes(platform),
            },
        );
    }
    if archives.is_empty() {
        return Err(cached.not_cached(&format!("any archive of {version}")));
    }
    Ok(Answer::json(StatusCode::OK, &MirrorVersion { archives }))
}

/// The provider registry protocol's `versions` for a configured
/// upstream's provider (Terraform's `host` block points `providers.v1`
/// here): the origin's list as cached, each version with its platforms
/// (only stored ones when answered degraded).
pub async fn provider_versions(
    registry: &Registry,
    upstream: &UpstreamRecord,
    provider: &ProviderName,
    principal: &Principal,
) -> Result<Answer, Error> {
    let cached = Cached::new(registry, upstream, provider, principal)?;
    let (listed, warnings) = cached.listed().await?;
    let versions: Vec<ProviderVersionEntry> = listed
        .into_iter()
        .map(|v| ProviderVersionEntry {
            version: v.version,
            protocols: v.protocols,
            platforms: v
                .platforms
                .iter()
                .filter_map(|p| Platform::parse_joined(p).ok())
                .map(|p| PlatformEntry {
                    os: p.os,
                    arch: p.arch,
                })
                .collect(),
        })
        .collect();
    Ok(Answer::json(
        StatusCode::OK,
        &ProviderVersions { versions, warnings },
    ))
}

/// A cached provider's download answer: the origin's SHA256SUMS, its
/// signature and its `signing_keys` as the origin served them (Terraform
/// verifies the signature itself and names who signed; the lock file gets
/// every platform's `zh:`), with this registry's URLs.
#[derive(serde::Serialize)]
struct CachedDownload<'a> {
    protocols: &'a [String],
    os: &'a str,
    arch: &'a str,
    filename: &'a str,
    download_url: String,
    shasums_url: String,
    shasums_signature_url: String,
    shasum: &'a str,
    signing_keys: &'a serde_json::value::RawValue,
}

/// The provider registry protocol's `download` for a configured upstream.
pub async fn provider_download(
    registry: &Registry,
    upstream: &UpstreamRecord,
    provider: &ProviderName,
    version: &str,
    platform: &Platform,
    principal: &Principal,
) -> Result<Answer, Error> {
    let cached = Cached::new(registry, upstream, provider, principal)?;
    let release = cached.release(version).await?;
    let name = platform.to_string();
    let archive = release.platforms.get(&name).ok_or_else(|| {
        let has: Vec<&str> = release.platforms.keys().map(String::as_str).collect();
        Error::not_found(format!(
            "{} {version} has no {name} build at the origin (it has {})",
            cached.name,
            has.join(", ")
        ))
    })?;
    if archive.stored.is_none() && !cached.may_fill {
        return Err(cached.not_cached(&format!("{version} for {name}")));
    }
    let url = |sha256: &str, file: &str| -> Result<BlobKey, Error> {
        archive_key(upstream, provider, sha256, file)
    };
    let signature_url = match &release.signature_sha256 {
        Some(sha) => registry.read_url(&url(sha, "SHA256SUMS.sig")?).await?,
        None => String::new(),
    };
    let signing_keys = serde_json::value::RawValue::from_string(release.signing_keys.clone())
        .map_err(|e| Error::internal(format!("a cached release's signing keys: {e}")))?;
    let body = CachedDownload {
        protocols: &release.protocols,
        os: &platform.os,
        arch: &platform.arch,
        filename: &archive.filename,
        download_url: registry
            .read_url(&url(&archive.sha256, &archive.filename)?)
            .await?,
        shasums_url: registry
            .read_url(&url(&release.shasums_sha256, "SHA256SUMS")?)
            .await?,
        shasums_signature_url: signature_url,
        shasum: &archive.sha256,
        signing_keys: &signing_keys,
    };
    Ok(Answer::json(StatusCode::OK, &body))
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
