//! What the pull-through cache keeps of an upstream's providers (issue
//! 22), in the partition `CACHE#<host>/<ns>/<type>`
//! ([`schema::cache_pk`]): besides the list and remembered 404s of every
//! [`CachePlace`], each verified release ([`CachedRelease`], created once;
//! its SHA256SUMS never changes, archives are added as they are stored),
//! and the provider's entry in the listing of what the cache holds.

use std::collections::BTreeMap;

use tfreg_model::cache::{
    CachedProviderInfo, CachedRelease, CachedVersionInfo, OriginList, StoredArchive,
};

use super::cache_place::{CachePlace, Listed};
use super::cas::{Step, update};
use super::codec::{decode, encode};
use super::schema::{VERSION_PREFIX, cache_pk};
use crate::{Condition, Item, ItemStore, StoreError, query_all};

/// One upstream provider's place in the cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachedProvider {
    place: CachePlace,
    /// Its entry in the [`CACHED_PK`] listing (the rest is read from its
    /// partition).
    listed: Listed,
}

/// Why a verified release cannot be kept.
#[derive(Debug, thiserror::Error)]
pub enum KeepError {
    /// SHA256SUMS is immutable once stored: the origin changed a release.
    #[error("SHA256SUMS changed since first fill (stored sha256 {stored}, now {now})")]
    SumsChanged { stored: String, now: String },
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl std::ops::Deref for CachedProvider {
    type Target = CachePlace;
    fn deref(&self) -> &CachePlace {
        &self.place
    }
}

impl CachedProvider {
    pub fn new(host: &str, namespace: &str, provider_type: &str) -> Self {
        CachedProvider {
            place: CachePlace::new(cache_pk(host, namespace, provider_type)),
            listed: Listed {
                host: host.to_string(),
                namespace: namespace.to_string(),
                name: provider_type.to_string(),
                system: None,
            },
        }
    }

    /// Keep a freshly fetched list (replacing the last one), and list the
    /// provider among those the cache holds.
    pub async fn put_origin_list(
        &self,
        store: &dyn ItemStore,
        list: &OriginList,
    ) -> Result<(), StoreError> {
        self.place.put_list(store, list).await?;
        self.listed.put(store).await
    }

    /// What `tfreg cache list` shows of it.
    pub async fn info(
        &self,
        store: &dyn ItemStore,
    ) -> Result<Option<CachedProviderInfo>, StoreError> {
        let Some(list) = self.origin_list(store).await? else {
            return Ok(None);
        };
        let Listed {
            host,
            namespace,
            name,
            ..
        } = self.listed.clone();
        let versions = self
            .releases(store)
            .await?
            .into_values()
            .map(|r| CachedVersionInfo {
                stored: r
                    .platforms
                    .iter()
                    .filter(|(_, a)| a.stored.is_some())
                    .map(|(p, _)| p.clone())
                    .collect(),
                signed_by: r.signed_by,
                version: r.version,
            })
            .collect();
        Ok(Some(CachedProviderInfo {
            host,
            namespace,
            name,
            fetched_at: list.fetched_at,
            failed_at: list.failed_at,
            versions,
        }))
    }

    /// A verified release.
    pub async fn release(
        &self,
        store: &dyn ItemStore,
        version: &str,
    ) -> Result<Option<CachedRelease>, StoreError> {
        self.place
            .get(store, &CachePlace::version_sk(version))
            .await
    }

    /// Every verified release, by version text.
    pub async fn releases(
        &self,
        store: &dyn ItemStore,
    ) -> Result<BTreeMap<String, CachedRelease>, StoreError> {
        query_all(store, &self.place.pk, VERSION_PREFIX)
            .await?
            .iter()
            .map(|item| {
                let r: CachedRelease = decode(item)?;
                Ok((r.version.clone(), r))
            })
            .collect()
    }

    /// Keep a release just verified: created once. If it is already there
    /// with the same SHA256SUMS, the stored one is kept (and answered); with
    /// other SHA256SUMS, [`KeepError::SumsChanged`] and nothing changes.
    pub async fn keep_release(
        &self,
        store: &dyn ItemStore,
        release: &CachedRelease,
    ) -> Result<CachedRelease, KeepError> {
        let sk = CachePlace::version_sk(&release.version);
        let item = Item::new(&self.place.pk, &sk, encode(release)?);
        match store.put(item, Condition::IfAbsent).await {
            Ok(()) => Ok(release.clone()),
            Err(StoreError::ConditionFailed) => {
                let stored = self
                    .release(store, &release.version)
                    .await?
                    .ok_or_else(|| StoreError::unavailable("a cached release vanished"))?;
                if stored.shasums_sha256 == release.shasums_sha256 {
                    Ok(stored)
                } else {
                    Err(KeepError::SumsChanged {
                        stored: stored.shasums_sha256,
                        now: release.shasums_sha256.clone(),
                    })
                }
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Record that `platform`'s archive of `version` is stored (after the
    /// object exists); the release as it now is. A platform the release
    /// does not list is refused.
    pub async fn archive_stored(
        &self,
        store: &dyn ItemStore,
        version: &str,
        platform: &str,
        stored: StoredArchive,
    ) -> Result<CachedRelease, StoreError> {
        let sk = CachePlace::version_sk(version);
        update(
            store,
            &self.place.pk,
            &sk,
            8,
            |item| {
                let stored = stored.clone();
                async move {
                    let item =
                        item.ok_or_else(|| StoreError::not_found("no such cached release"))?;
                    let mut release: CachedRelease = decode(&item)?;
                    let archive = release.platforms.get_mut(platform).ok_or_else(|| {
                        StoreError::not_found(format!("{version} has no {platform} archive"))
                    })?;
                    if archive.stored.is_some() {
                        return Ok(Step::Keep(release));
                    }
                    archive.stored = Some(stored);
                    Ok(Step::Write(encode(&release)?, release))
                }
            },
            || StoreError::unavailable("the cached release kept changing"),
        )
        .await
    }
}
