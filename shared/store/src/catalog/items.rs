//! Release items, whatever their kind: read one or a partition's, write a
//! new one exactly once (a retry of the same content is no change, other
//! content for a published version is a conflict).

use serde::{Deserialize, Serialize};
use tfreg_model::version::{Version, sort_versions};

use super::codec::{decode, encode};
use super::schema::{VERSION_PREFIX, version_sk};
use crate::{Condition, Item, ItemStore, StoreError, query_all};

pub(crate) async fn list<T: for<'de> Deserialize<'de>>(
    store: &dyn ItemStore,
    pk: &str,
    version_of: impl Fn(&T) -> &str,
) -> Result<Vec<T>, StoreError> {
    let items = query_all(store, pk, VERSION_PREFIX).await?;
    let releases = items.iter().map(decode).collect::<Result<Vec<T>, _>>()?;
    Ok(sort_versions(releases, version_of))
}

pub(crate) async fn get<T: for<'de> Deserialize<'de>>(
    store: &dyn ItemStore,
    pk: &str,
    version: &Version,
) -> Result<Option<T>, StoreError> {
    store
        .get(pk, &version_sk(version))
        .await?
        .map(|item| decode(&item))
        .transpose()
}

/// Outcome of recording a release.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PutOutcome {
    /// The version is now visible.
    Created,
    /// The same content was already published: nothing changed.
    Unchanged,
}

pub(crate) async fn put_new<T: Serialize + for<'de> Deserialize<'de> + PartialEq, C: PartialEq>(
    store: &dyn ItemStore,
    pk: String,
    version: &Version,
    release: &T,
    content: impl Fn(&T) -> C,
    what: &str,
) -> Result<PutOutcome, StoreError> {
    let item = Item::new(pk.clone(), version_sk(version), encode(release)?);
    match store.put(item, Condition::IfAbsent).await {
        Ok(()) => Ok(PutOutcome::Created),
        Err(StoreError::ConditionFailed) => {
            let existing: Option<T> = get(store, &pk, version).await?;
            match existing {
                // Our own item: a retried put whose first attempt landed.
                Some(existing) if existing == *release => Ok(PutOutcome::Created),
                Some(existing) if content(&existing) == content(release) => {
                    Ok(PutOutcome::Unchanged)
                }
                _ => Err(version_exists(what, version)),
            }
        }
        Err(e) => Err(e),
    }
}

/// The 409 for a version that exists with other content.
pub fn version_exists(what: &str, version: &Version) -> StoreError {
    StoreError::Conflict(format!(
        "{what} {version} is already published with different content; versions are immutable, publish a new version"
    ))
}
