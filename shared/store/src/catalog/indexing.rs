//! Each provider's and module's versions index, kept in step with its
//! release items (see [`super::index`] for what it holds), and its listing
//! entry kept in step with the index.

use tfreg_model::address::{ModuleName, ProviderName};
use tfreg_model::release::{ModuleRelease, Origin, ProviderRelease};
use tfreg_model::router::PublishTarget;
use tfreg_model::version::Version;

use super::cas::{self, Step};
use super::codec::decode;
use super::docs;
use super::index::{Listing, MAX_INDEX_BYTES, VersionIndex};
use super::items::get;
use super::listing;
use super::schema::{
    INDEX_SK, VERSION_PREFIX, module_pk, provider_pk, release_location, version_sk,
};
use crate::{Item, ItemStore, StoreError, query_all};

/// What a versions list shows of a stored release.
pub(crate) type ListingOf = fn(&Item) -> Result<Listing, StoreError>;

pub(crate) fn provider_listing(item: &Item) -> Result<Listing, StoreError> {
    Ok(Listing::from(&decode::<ProviderRelease>(item)?))
}

pub(crate) fn module_listing(item: &Item) -> Result<Listing, StoreError> {
    Ok(Listing::from(&decode::<ModuleRelease>(item)?))
}

fn listing_of(target: &PublishTarget) -> ListingOf {
    match target {
        PublishTarget::Provider { .. } | PublishTarget::Mirror { .. } => provider_listing,
        PublishTarget::Module { .. } => module_listing,
    }
}

/// The index of every release in `pk`, from a query of them.
async fn index_from_releases(
    store: &dyn ItemStore,
    pk: &str,
    listing: ListingOf,
) -> Result<VersionIndex, StoreError> {
    let items = query_all(store, pk, VERSION_PREFIX).await?;
    let listings = items.iter().map(listing).collect::<Result<Vec<_>, _>>()?;
    Ok(VersionIndex::of(0, listings))
}

/// A stored index, unless it is unreadable or overflowed (then `None`:
/// the releases are queried instead).
fn usable(pk: &str, item: &Item) -> Option<VersionIndex> {
    match VersionIndex::decode(&item.data) {
        Ok(index) if !index.overflow => Some(index),
        Ok(_) => None,
        Err(e) => {
            tracing::warn!(pk, error = %e, "unreadable versions index: querying the releases");
            None
        }
    }
}

/// The versions index of `pk`: one `GetItem`; a query of the releases where
/// there is no usable index (a store from before it, or an overflow).
async fn read_index(
    store: &dyn ItemStore,
    pk: &str,
    listing: ListingOf,
) -> Result<VersionIndex, StoreError> {
    if let Some(index) = store
        .get(pk, INDEX_SK)
        .await?
        .and_then(|item| usable(pk, &item))
    {
        return Ok(index);
    }
    index_from_releases(store, pk, listing).await
}

/// How many times an index update retries after losing a race (many
/// publishes of one provider at once all update its one index).
const SYNC_ATTEMPTS: u32 = 60;

/// Copy the stored state of release `version` (or its absence) into the index
/// of `pk`, with a compare-and-swap; with no `version`, or no usable index,
/// build the index from a query of every release. The index is read before
/// the release, and every write bumps its `rev`, so of racing updates the
/// last to write read the latest release.
pub(crate) async fn sync(
    store: &dyn ItemStore,
    pk: &str,
    version: Option<&Version>,
    listing: ListingOf,
) -> Result<(), StoreError> {
    let decide = |current: Option<Item>| async move {
        let rev = current
            .as_ref()
            .and_then(|item| VersionIndex::decode(&item.data).ok())
            .map_or(0, |index| index.rev);
        let stored = current.as_ref().and_then(|item| usable(pk, item));
        let mut index = match (stored, version) {
            (Some(mut index), Some(version)) => {
                let release = store.get(pk, &version_sk(version)).await?;
                index.set(
                    &version.to_string(),
                    release.as_ref().map(listing).transpose()?,
                );
                index
            }
            _ => index_from_releases(store, pk, listing).await?,
        };
        index.rev = rev + 1;
        let mut data = index.encode();
        if data.len() > MAX_INDEX_BYTES {
            tracing::warn!(
                pk,
                bytes = data.len(),
                "the versions index does not fit in one item: lists will query the releases"
            );
            data = VersionIndex::overflowed(index.rev).encode();
        }
        Ok(Step::Write(data, index))
    };
    let index = cas::update(store, pk, INDEX_SK, SYNC_ATTEMPTS, decide, || {
        StoreError::Unavailable(format!(
            "the versions index of {pk} kept changing while it was updated; try again"
        ))
    })
    .await?;
    record_listing(store, pk, &index).await
}

/// Write the listing entry of `pk` from its index just written.
async fn record_listing(
    store: &dyn ItemStore,
    pk: &str,
    index: &VersionIndex,
) -> Result<(), StoreError> {
    let Some(mut entry) = listing::Entry::of(pk, index, tfreg_model::unix_now()) else {
        return Ok(());
    };
    if entry.kind == listing::Kind::Module
        && let Some(latest) = entry.latest.as_deref().and_then(|v| Version::parse(v).ok())
        && let Some(release) = get::<ModuleRelease>(store, pk, &latest).await?
    {
        entry.description = docs::docs_item(store, pk, &latest, &release.file.sha256)
            .await?
            .and_then(|docs| docs.description);
    }
    listing::record(store, pk, &entry).await
}

/// Bring the index entry of `target`'s release up to date with its release
/// item (a publish found already done calls this: it may be the retry of one
/// that stopped between the two writes).
pub async fn sync_index(store: &dyn ItemStore, target: &PublishTarget) -> Result<(), StoreError> {
    let (pk, _) = release_location(target);
    sync(store, &pk, Some(target.version()), listing_of(target)).await
}

/// The versions index of a provider: what its versions list and mirror index show.
pub async fn provider_index(
    store: &dyn ItemStore,
    origin: &Origin,
    provider: &ProviderName,
) -> Result<VersionIndex, StoreError> {
    read_index(store, &provider_pk(origin, provider), provider_listing).await
}

/// The versions index of a module.
pub async fn module_index(
    store: &dyn ItemStore,
    module: &ModuleName,
) -> Result<VersionIndex, StoreError> {
    read_index(store, &module_pk(module), module_listing).await
}

/// Rebuild a provider's versions index from its releases.
pub async fn reindex_provider(
    store: &dyn ItemStore,
    origin: &Origin,
    provider: &ProviderName,
) -> Result<(), StoreError> {
    sync(
        store,
        &provider_pk(origin, provider),
        None,
        provider_listing,
    )
    .await
}

/// Rebuild a module's versions index from its releases.
pub async fn reindex_module(store: &dyn ItemStore, module: &ModuleName) -> Result<(), StoreError> {
    sync(store, &module_pk(module), None, module_listing).await
}
