//! One upstream provider's or module's partition in the pull-through
//! cache (`CACHE#…` or `CACHEMOD#…`): what both keep alike: the origin's
//! version list ([`OriginList`], replaced on each fetch, marked when
//! fetching it fails) and an origin's 404 remembered for the upstream's
//! `negative_ttl` (an item that expires). [`super::cache::CachedProvider`]
//! and [`super::cached_module::CachedModule`] add their releases.

use serde::de::DeserializeOwned;
use tfreg_model::cache::OriginList;

use super::cas::{Step, update};
use super::codec::{decode, encode};
use super::schema::{CACHED_PK, MISSING_PREFIX, ORIGIN_SK, VERSION_PREFIX};
use crate::{Condition, Item, ItemStore, StoreError};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachePlace {
    pub(super) pk: String,
}

impl CachePlace {
    pub(super) fn new(pk: String) -> Self {
        CachePlace { pk }
    }

    /// The item `sk` of this partition, decoded.
    pub(super) async fn get<T: DeserializeOwned>(
        &self,
        store: &dyn ItemStore,
        sk: &str,
    ) -> Result<Option<T>, StoreError> {
        store
            .get(&self.pk, sk)
            .await?
            .map(|item| decode(&item))
            .transpose()
    }

    /// The sort key of `version`'s release.
    pub(super) fn version_sk(version: &str) -> String {
        format!("{VERSION_PREFIX}{version}")
    }

    /// The origin's list as last fetched.
    pub async fn origin_list(
        &self,
        store: &dyn ItemStore,
    ) -> Result<Option<OriginList>, StoreError> {
        self.get(store, ORIGIN_SK).await
    }

    /// Keep a freshly fetched list, replacing the last one.
    pub async fn put_list(
        &self,
        store: &dyn ItemStore,
        list: &OriginList,
    ) -> Result<(), StoreError> {
        let item = Item::new(&self.pk, ORIGIN_SK, encode(list)?);
        store.put(item, Condition::Always).await
    }

    /// Note that fetching the list failed at `now` (the cached list is then
    /// answered degraded); nothing when no list is cached.
    pub async fn list_failed(&self, store: &dyn ItemStore, now: u64) -> Result<(), StoreError> {
        update(
            store,
            &self.pk,
            ORIGIN_SK,
            8,
            |item| async move {
                let Some(item) = item else {
                    return Ok(Step::Keep(()));
                };
                let mut list: OriginList = decode(&item)?;
                list.failed_at = Some(now);
                Ok(Step::Write(encode(&list)?, ()))
            },
            || StoreError::unavailable("the cached list kept changing"),
        )
        .await
    }

    /// When the origin last answered 404 for `what` (a version, or
    /// `versions` for the list), if that is remembered.
    pub async fn missing(
        &self,
        store: &dyn ItemStore,
        what: &str,
    ) -> Result<Option<u64>, StoreError> {
        self.get(store, &format!("{MISSING_PREFIX}{what}")).await
    }

    /// Remember the origin's 404 for `what` from `now` for `ttl_secs`.
    pub async fn note_missing(
        &self,
        store: &dyn ItemStore,
        what: &str,
        now: u64,
        ttl_secs: u32,
    ) -> Result<(), StoreError> {
        let item = Item::new(&self.pk, format!("{MISSING_PREFIX}{what}"), encode(&now)?)
            .expiring_at(now.saturating_add(u64::from(ttl_secs)));
        store.put(item, Condition::Always).await
    }
}

/// A provider or module the cache holds, as the listing names it (sort
/// key `<host>/<ns>/<type>` or `<host>/<ns>/<name>/<system>`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(super) struct Listed {
    pub host: String,
    pub namespace: String,
    pub name: String,
    /// A module's system (none: a provider).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<String>,
}

impl Listed {
    /// List it among what the cache holds.
    pub(super) async fn put(&self, store: &dyn ItemStore) -> Result<(), StoreError> {
        let mut sk = format!("{}/{}/{}", self.host, self.namespace, self.name);
        if let Some(system) = &self.system {
            sk = format!("{sk}/{system}");
        }
        store
            .put(Item::new(CACHED_PK, sk, encode(self)?), Condition::Always)
            .await
    }
}
