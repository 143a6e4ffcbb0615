//! The upstream registries the pull-through cache reads from (issue 22):
//! [`UpstreamRecord`]s an admin manages, partition [`UPSTREAMS_PK`], sort key
//! the hostname. A cached request reads its one upstream by key; a list is
//! one query of the partition.

use tfreg_model::upstream::{MAX_UPSTREAMS, UpstreamHost, UpstreamRecord, UpstreamSettings};

use super::codec::{decode, encode};
use super::schema::UPSTREAMS_PK;
use crate::{Condition, Item, ItemStore, StoreError, query_all};

/// The upstream `host`, if configured.
pub async fn upstream(
    store: &dyn ItemStore,
    host: &UpstreamHost,
) -> Result<Option<UpstreamRecord>, StoreError> {
    store
        .get(UPSTREAMS_PK, host.as_str())
        .await?
        .map(|item| decode(&item))
        .transpose()
}

/// Every configured upstream, by hostname.
pub async fn upstreams(store: &dyn ItemStore) -> Result<Vec<UpstreamRecord>, StoreError> {
    query_all(store, UPSTREAMS_PK, "")
        .await?
        .iter()
        .map(decode)
        .collect()
}

/// Configure `host` with `settings`, as `by` at `now`: created (refused
/// beyond [`MAX_UPSTREAMS`]) or its settings replaced, keeping when and by
/// whom it was created. The record, and the settings replaced. A
/// concurrent change of the same upstream makes this one fail with
/// [`StoreError::ConditionFailed`] rather than be lost silently.
pub async fn put_upstream(
    store: &dyn ItemStore,
    host: &UpstreamHost,
    settings: UpstreamSettings,
    by: &str,
    now: u64,
) -> Result<(UpstreamRecord, Option<UpstreamSettings>), StoreError> {
    let old = store.get(UPSTREAMS_PK, host.as_str()).await?;
    let (record, replaced, condition) = match old {
        Some(item) => {
            let old: UpstreamRecord = decode(&item)?;
            let record = UpstreamRecord {
                settings,
                updated_at: now,
                updated_by: by.to_string(),
                ..old.clone()
            };
            (
                record,
                Some(old.settings),
                Condition::IfUnchanged(item.data),
            )
        }
        None => {
            if upstreams(store).await?.len() >= MAX_UPSTREAMS {
                return Err(StoreError::invalid(format!(
                    "a registry may have at most {MAX_UPSTREAMS} upstreams; remove one first"
                )));
            }
            let record = UpstreamRecord {
                hostname: host.clone(),
                settings,
                created_at: now,
                created_by: by.to_string(),
                updated_at: now,
                updated_by: by.to_string(),
            };
            (record, None, Condition::IfAbsent)
        }
    };
    let item = Item::new(UPSTREAMS_PK, host.as_str(), encode(&record)?);
    store.put(item, condition).await?;
    Ok((record, replaced))
}

/// Remove the upstream `host`; what it was, or none. What was cached from
/// it stays: only fetching from it stops.
pub async fn remove_upstream(
    store: &dyn ItemStore,
    host: &UpstreamHost,
) -> Result<Option<UpstreamRecord>, StoreError> {
    store
        .take(UPSTREAMS_PK, host.as_str())
        .await?
        .map(|item| decode(&item))
        .transpose()
}

#[cfg(all(test, feature = "embedded"))]
mod tests {
    use tfreg_model::upstream::{Mode, Serves};

    use super::*;
    use crate::sqlite::SqliteStore;

    fn host(s: &str) -> UpstreamHost {
        UpstreamHost::parse(s).unwrap()
    }

    fn providers() -> UpstreamSettings {
        UpstreamSettings::new(Serves {
            providers: true,
            modules: false,
        })
    }

    #[tokio::test]
    async fn an_upstream_is_created_replaced_and_removed() {
        let store = SqliteStore::in_memory().unwrap();
        let h = host("registry.terraform.io");
        assert_eq!(upstream(&store, &h).await.unwrap(), None);
        let (created, replaced) = put_upstream(&store, &h, providers(), "alice", 10)
            .await
            .unwrap();
        assert_eq!(replaced, None);
        assert_eq!((created.created_at, created.updated_at), (10, 10));
        let mut sealed = providers();
        sealed.mode = Mode::Sealed;
        let (updated, replaced) = put_upstream(&store, &h, sealed.clone(), "bob", 20)
            .await
            .unwrap();
        assert_eq!(replaced, Some(providers()));
        assert_eq!(
            (updated.created_by.as_str(), updated.updated_by.as_str()),
            ("alice", "bob"),
            "created by alice, changed by bob"
        );
        assert_eq!(updated.created_at, 10);
        assert_eq!(updated.settings, sealed);
        assert_eq!(upstream(&store, &h).await.unwrap(), Some(updated.clone()));
        // Listed by hostname, other hosts apart.
        put_upstream(
            &store,
            &host("registry.opentofu.org"),
            providers(),
            "alice",
            30,
        )
        .await
        .unwrap();
        let names: Vec<String> = upstreams(&store)
            .await
            .unwrap()
            .iter()
            .map(|u| u.hostname.to_string())
            .collect();
        assert_eq!(names, ["registry.opentofu.org", "registry.terraform.io"]);
        assert_eq!(remove_upstream(&store, &h).await.unwrap(), Some(updated));
        assert_eq!(remove_upstream(&store, &h).await.unwrap(), None);
        assert_eq!(upstreams(&store).await.unwrap().len(), 1);
    }

    #[tokio::test]
    async fn a_registry_keeps_a_bounded_number_of_upstreams() {
        let store = SqliteStore::in_memory().unwrap();
        for i in 0..MAX_UPSTREAMS {
            put_upstream(
                &store,
                &host(&format!("r{i}.example.com")),
                providers(),
                "a",
                1,
            )
            .await
            .unwrap();
        }
        let over = put_upstream(&store, &host("one-more.example.com"), providers(), "a", 1).await;
        assert!(matches!(over, Err(StoreError::Invalid(_))), "{over:?}");
        // Changing one that exists is still fine.
        put_upstream(&store, &host("r0.example.com"), providers(), "b", 2)
            .await
            .unwrap();
    }
}
