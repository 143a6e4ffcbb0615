//! What the pull-through cache keeps of an upstream's modules (issue 22),
//! in the partition `CACHEMOD#<host>/<ns>/<name>/<system>`
//! ([`schema::cache_module_pk`]): besides the list and remembered 404s of
//! every [`CachePlace`], each version's source as first resolved, with our
//! archive of it ([`CachedModuleRelease`], created once, after the archive
//! is stored: a pinned commit never changes).

use tfreg_model::cache::module::CachedModuleRelease;

use super::cache_place::CachePlace;
use super::codec::encode;
use super::schema::cache_module_pk;
use crate::{Condition, Item, ItemStore, StoreError};

/// One upstream module's place in the cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachedModule {
    place: CachePlace,
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
        }
    }

    /// Keep a freshly fetched list, replacing the last one.
    pub async fn put_origin_list(
        &self,
        store: &dyn ItemStore,
        list: &tfreg_model::cache::OriginList,
    ) -> Result<(), StoreError> {
        self.place.put_list(store, list).await
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
