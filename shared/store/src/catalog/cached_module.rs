//! What the pull-through cache keeps of an upstream's modules (issue 22),
//! in the partition `CACHEMOD#<host>/<ns>/<name>/<system>`
//! ([`schema::cache_module_pk`]): besides the list and remembered 404s of
//! every [`CachePlace`], each version's source as first resolved, with our
//! archive of it ([`CachedModuleRelease`], created once, after the archive
//! is stored: a pinned commit never changes).

use tfreg_model::cache::CachedModuleInfo;
use tfreg_model::cache::module::CachedModuleRelease;

use super::cache_place::{CachePlace, Listed};
use super::codec::{decode, encode};
use super::schema::{VERSION_PREFIX, cache_module_pk};
use crate::{Condition, Item, ItemStore, StoreError, query_all};

/// One upstream module's place in the cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachedModule {
    place: CachePlace,
    listed: Listed,
}

impl std::ops::Deref for CachedModule {
    type Target = CachePlace;
    fn deref(&self) -> &CachePlace {
        &self.place
    }
}

impl CachedModule {
    pub fn new(host: &str, namespace: &str, name: &str, system: &str) -> Self {
        CachedModule {
            place: CachePlace::new(cache_module_pk(host, namespace, name, system)),
            listed: Listed {
                host: host.to_string(),
                namespace: namespace.to_string(),
                name: name.to_string(),
                system: Some(system.to_string()),
            },
        }
    }

    /// Keep a freshly fetched list (replacing the last one), and list the
    /// module among those the cache holds.
    pub async fn put_origin_list(
        &self,
        store: &dyn ItemStore,
        list: &tfreg_model::cache::OriginList,
    ) -> Result<(), StoreError> {
        self.place.put_list(store, list).await?;
        self.listed.put(store).await
    }

    /// What `tfreg cache list` shows of it.
    pub async fn info(
        &self,
        store: &dyn ItemStore,
    ) -> Result<Option<CachedModuleInfo>, StoreError> {
        let Some(list) = self.origin_list(store).await? else {
            return Ok(None);
        };
        let mut versions = Vec::new();
        for item in query_all(store, &self.place.pk, VERSION_PREFIX).await? {
            let release: CachedModuleRelease = decode(&item)?;
            versions.push(release.info());
        }
        let Listed {
            host,
            namespace,
            name,
            system,
        } = self.listed.clone();
        Ok(Some(CachedModuleInfo {
            host,
            namespace,
            name,
            system: system.unwrap_or_default(),
            fetched_at: list.fetched_at,
            failed_at: list.failed_at,
            versions,
        }))
    }

    /// A version as resolved.
    pub async fn release(
        &self,
        store: &dyn ItemStore,
        version: &str,
    ) -> Result<Option<CachedModuleRelease>, StoreError> {
        self.place
            .get(store, &CachePlace::version_sk(version))
            .await
    }

    /// Keep a version just resolved: created once; if it is already there
    /// (another fill, or an earlier one), the stored one is kept and
    /// answered: a tag that moved since changes nothing.
    pub async fn keep_release(
        &self,
        store: &dyn ItemStore,
        release: &CachedModuleRelease,
    ) -> Result<CachedModuleRelease, StoreError> {
        let sk = CachePlace::version_sk(&release.version);
        let item = Item::new(&self.place.pk, &sk, encode(release)?);
        match store.put(item, Condition::IfAbsent).await {
            Ok(()) => Ok(release.clone()),
            Err(StoreError::ConditionFailed) => self
                .release(store, &release.version)
                .await?
                .ok_or_else(|| StoreError::unavailable("a cached module version vanished")),
            Err(e) => Err(e),
        }
    }
}
