//! Sign-in and CI trust data an admin manages (issue 21):
//! - identity-provider group mappings (`tfreg_model::sso::GroupMapping`):
//!   partition [`SSOMAP_PK`], sort key the group, read whole by a sign-in;
//! - CI trust policies (`tfreg_model::trust::TrustRecord`): partition
//!   [`TRUST_PK`], sort key `<namespace>#<policy id>`: a namespace's are one
//!   query by prefix, every namespace's one query of the partition.

use tfreg_model::sso::GroupMapping;
use tfreg_model::trust::{MAX_POLICIES, TrustRecord};

use super::codec::{decode, encode};
use super::schema::{SSOMAP_PK, TRUST_PK, trust_prefix, trust_sk};
use crate::{Condition, Item, ItemStore, StoreError, query_all};

/// Most group mappings a registry keeps (every sign-in reads them all).
pub const MAX_MAPPINGS: usize = 500;

/// Set the mapping of its group; the mapping it replaced, if any. Refused
/// when a new group would make more than [`MAX_MAPPINGS`].
pub async fn put_mapping(
    store: &dyn ItemStore,
    mapping: &GroupMapping,
) -> Result<Option<GroupMapping>, StoreError> {
    let existing = mappings(store).await?;
    let replaced = existing
        .iter()
        .find(|m| m.group() == mapping.group())
        .cloned();
    if replaced.is_none() && existing.len() >= MAX_MAPPINGS {
        return Err(StoreError::invalid(format!(
            "a registry may have at most {MAX_MAPPINGS} group mappings; unmap old ones first"
        )));
    }
    let item = Item::new(SSOMAP_PK, mapping.group(), encode(mapping)?);
    store.put(item, Condition::Always).await?;
    Ok(replaced)
}

/// Every group mapping, by group.
pub async fn mappings(store: &dyn ItemStore) -> Result<Vec<GroupMapping>, StoreError> {
    query_all(store, SSOMAP_PK, "")
        .await?
        .iter()
        .map(decode)
        .collect()
}

/// Remove a group's mapping; what it was, or none if the group had none.
pub async fn remove_mapping(
    store: &dyn ItemStore,
    group: &str,
) -> Result<Option<GroupMapping>, StoreError> {
    store
        .take(SSOMAP_PK, group)
        .await?
        .map(|item| decode(&item))
        .transpose()
}

/// A namespace's trust policies (`Some`), or every namespace's (`None`), by
/// namespace and id.
pub async fn policies(
    store: &dyn ItemStore,
    namespace: Option<&str>,
) -> Result<Vec<TrustRecord>, StoreError> {
    let prefix = namespace.map(trust_prefix).unwrap_or_default();
    query_all(store, TRUST_PK, &prefix)
        .await?
        .iter()
        .map(decode)
        .collect()
}

/// Add a trust policy to its namespace; false (and the record kept as it
/// was) when the namespace already has this very policy. Refused when the
/// namespace would have more than [`MAX_POLICIES`].
pub async fn add_policy(
    store: &dyn ItemStore,
    record: &TrustRecord,
) -> Result<(TrustRecord, bool), StoreError> {
    let existing = policies(store, Some(&record.namespace)).await?;
    if let Some(same) = existing.iter().find(|p| p.id == record.id) {
        return Ok((same.clone(), false));
    }
    if existing.len() >= MAX_POLICIES {
        return Err(StoreError::invalid(format!(
            "a namespace may have at most {MAX_POLICIES} trust policies; remove old ones first"
        )));
    }
    let item = Item::new(
        TRUST_PK,
        trust_sk(&record.namespace, &record.id),
        encode(record)?,
    );
    match store.put(item, Condition::IfAbsent).await {
        Ok(()) => Ok((record.clone(), true)),
        // Added meanwhile by another request: the same policy, kept.
        Err(StoreError::ConditionFailed) => Ok((record.clone(), false)),
        Err(e) => Err(e),
    }
}

/// Remove a namespace's trust policy; what it was, or none.
pub async fn remove_policy(
    store: &dyn ItemStore,
    namespace: &str,
    id: &str,
) -> Result<Option<TrustRecord>, StoreError> {
    store
        .take(TRUST_PK, &trust_sk(namespace, id))
        .await?
        .map(|item| decode(&item))
        .transpose()
}

#[cfg(all(test, feature = "embedded"))]
mod tests {
    use std::collections::BTreeMap;

    use tfreg_model::token::Scope;
    use tfreg_model::trust::{GITHUB_ISSUER, TrustPolicy};

    use super::*;
    use crate::sqlite::SqliteStore;

    #[tokio::test]
    async fn mappings_are_kept_one_per_group() {
        let store = SqliteStore::in_memory().unwrap();
        assert!(mappings(&store).await.unwrap().is_empty());
        let a = GroupMapping::new("platform", Scope::Read, &["*"]).unwrap();
        let b = GroupMapping::new("platform", Scope::Publish, &["acme"]).unwrap();
        assert_eq!(put_mapping(&store, &a).await.unwrap(), None);
        assert_eq!(put_mapping(&store, &b).await.unwrap(), Some(a));
        assert_eq!(mappings(&store).await.unwrap(), std::slice::from_ref(&b));
        assert_eq!(remove_mapping(&store, "nobody").await.unwrap(), None);
        assert_eq!(remove_mapping(&store, "platform").await.unwrap(), Some(b));
        assert!(mappings(&store).await.unwrap().is_empty());
    }

    fn record(namespace: &str, repository_id: &str) -> TrustRecord {
        let claims = BTreeMap::from([("repository_id".to_string(), repository_id.to_string())]);
        let policy = TrustPolicy::new(GITHUB_ISSUER, None, None, &claims).unwrap();
        TrustRecord {
            id: policy.id(),
            namespace: namespace.into(),
            policy,
            added_at: 1,
            added_by: "operator".into(),
        }
    }

    #[tokio::test]
    async fn trust_policies_are_kept_per_namespace() {
        let store = SqliteStore::in_memory().unwrap();
        let (a1, a2, ab) = (record("a", "1"), record("a", "2"), record("ab", "3"));
        for r in [&a1, &a2, &ab] {
            assert!(add_policy(&store, r).await.unwrap().1);
        }
        let mut again = a1.clone();
        again.added_by = "someone else".into();
        assert_eq!(
            add_policy(&store, &again).await.unwrap(),
            (a1.clone(), false)
        );
        // "a" is not a prefix match of "ab".
        let of_a = policies(&store, Some("a")).await.unwrap();
        assert_eq!(of_a.len(), 2);
        assert!(of_a.iter().all(|p| p.namespace == "a"));
        assert_eq!(policies(&store, None).await.unwrap().len(), 3);
        assert_eq!(remove_policy(&store, "ab", &a1.id).await.unwrap(), None);
        assert_eq!(remove_policy(&store, "a", &ab.id).await.unwrap(), None);
        assert_eq!(remove_policy(&store, "a", &a1.id).await.unwrap(), Some(a1));
        assert_eq!(policies(&store, Some("a")).await.unwrap(), [a2]);
        for i in 0..MAX_POLICIES {
            let _ = add_policy(&store, &record("c", &(100 + i).to_string()))
                .await
                .unwrap();
        }
        assert!(matches!(
            add_policy(&store, &record("c", "99")).await,
            Err(StoreError::Invalid(_))
        ));
    }
}
