//! Catalogs written in bulk (the scale test and benchmark; a migration):
//! release items put directly, then each partition's index built once.

use serde::Serialize;
use tfreg_model::address::{ModuleName, ProviderName};
use tfreg_model::release::{ModuleRelease, Origin, ProviderRelease};
use tfreg_model::version::Version;

use super::codec::encode;
use super::indexing::{module_listing, provider_listing, sync};
use super::schema::{module_pk, provider_pk, version_sk};
use crate::{Condition, Item, ItemStore, StoreError};

/// Write many provider releases at once (none may exist yet), then their
/// index: a bulk import, many writes at a time, one index write at the end.
pub async fn import_provider_releases(
    store: &dyn ItemStore,
    origin: &Origin,
    provider: &ProviderName,
    releases: &[ProviderRelease],
) -> Result<(), StoreError> {
    let pk = provider_pk(origin, provider);
    import(store, &pk, releases, |r| &r.version).await?;
    sync(store, &pk, None, provider_listing).await
}

/// Write many module releases at once (none may exist yet), then their index.
pub async fn import_module_releases(
    store: &dyn ItemStore,
    module: &ModuleName,
    releases: &[ModuleRelease],
) -> Result<(), StoreError> {
    let pk = module_pk(module);
    import(store, &pk, releases, |r| &r.version).await?;
    sync(store, &pk, None, module_listing).await
}

/// How many writes an import keeps in flight. dynalite answers one request at
/// a time: more in flight only makes each wait longer, and with several
/// imports at once (the scale suite on a loaded machine) past the SDK's
/// per-attempt timeout.
const IMPORT_CONCURRENCY: usize = 8;

async fn import<T: Serialize>(
    store: &dyn ItemStore,
    pk: &str,
    releases: &[T],
    version_of: impl Fn(&T) -> &str,
) -> Result<(), StoreError> {
    use futures_util::{StreamExt, TryStreamExt};
    let items = releases
        .iter()
        .map(|r| {
            let version = Version::parse(version_of(r))?;
            let data = encode(r)?;
            Ok(Item::new(pk, version_sk(&version), data))
        })
        .collect::<Result<Vec<_>, StoreError>>()?;
    futures_util::stream::iter(items)
        .map(|item| store.put(item, Condition::IfAbsent))
        .buffer_unordered(IMPORT_CONCURRENCY)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(())
}
