//! Identity-provider group mappings (`tfreg_model::sso::GroupMapping`):
//! partition [`SSOMAP_PK`], sort key the group, read whole by a sign-in.

use tfreg_model::sso::GroupMapping;

use super::codec::{decode, encode};
use super::schema::SSOMAP_PK;
use crate::{Condition, Item, ItemStore, StoreError, query_all};

/// Set the mapping of its group (replacing one there).
pub async fn put_mapping(store: &dyn ItemStore, mapping: &GroupMapping) -> Result<(), StoreError> {
    let item = Item::new(SSOMAP_PK, mapping.group(), encode(mapping)?);
    store.put(item, Condition::Always).await
}

/// Every group mapping.
pub async fn mappings(store: &dyn ItemStore) -> Result<Vec<GroupMapping>, StoreError> {
    query_all(store, SSOMAP_PK, "")
        .await?
        .iter()
        .map(decode)
        .collect()
}

#[cfg(all(test, feature = "embedded"))]
mod tests {
    use tfreg_model::token::Scope;

    use super::*;
    use crate::sqlite::SqliteStore;

    #[tokio::test]
    async fn mappings_are_kept_one_per_group() {
        let store = SqliteStore::in_memory().unwrap();
        assert!(mappings(&store).await.unwrap().is_empty());
        let a = GroupMapping::new("platform", Scope::Read, &["*"]).unwrap();
        let b = GroupMapping::new("platform", Scope::Publish, &["acme"]).unwrap();
        put_mapping(&store, &a).await.unwrap();
        put_mapping(&store, &b).await.unwrap();
        assert_eq!(mappings(&store).await.unwrap(), [b]);
    }
}
