//! What the pull-through cache holds, listed (`tfreg cache list`, `GET
//! /v1/admin/cache`): every provider and module with an entry in the
//! `CACHED` partition, each read from its own partition.

use tfreg_model::cache::CachedList;

use super::cache::CachedProvider;
use super::cache_place::Listed;
use super::cached_module::CachedModule;
use super::codec::decode;
use super::schema::CACHED_PK;
use crate::{ItemStore, StoreError, query_all};

/// Every provider and module the cache holds, from one upstream (`Some`)
/// or all, by host and address.
pub async fn cached(store: &dyn ItemStore, host: Option<&str>) -> Result<CachedList, StoreError> {
    let prefix = host.map(|h| format!("{h}/")).unwrap_or_default();
    let mut found = CachedList {
        providers: Vec::new(),
        modules: Vec::new(),
    };
    for item in query_all(store, CACHED_PK, &prefix).await? {
        let listed: Listed = decode(&item)?;
        match &listed.system {
            None => {
                let place = CachedProvider::new(&listed.host, &listed.namespace, &listed.name);
                found.providers.extend(place.info(store).await?);
            }
            Some(system) => {
                let place =
                    CachedModule::new(&listed.host, &listed.namespace, &listed.name, system);
                found.modules.extend(place.info(store).await?);
            }
        }
    }
    Ok(found)
}
