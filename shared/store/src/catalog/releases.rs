//! Releases as items: one item per provider or module version holding
//! every platform (a download is one `GetItem`); a release's lifecycle
//! (deprecated, yanked) lives in its item, and a change of it is one
//! compare-and-swap write. Module docs are items of their own.
//!
//! A versions list is one `GetItem` too, of the partition's versions index
//! ([`super::index`]): what the lists show of every release, in semver
//! order. The release items stay the truth; after every change of one (publish,
//! lifecycle, delete) [`sync_index`] copies that release's state into the index
//! with a compare-and-swap, reading the release only after the index, so the
//! last writer always copies the latest state. A crash between the two writes
//! leaves the index behind (a new version not yet listed, a deleted one still
//! listed) until the operation is retried: a retried publish, lifecycle change
//! or delete syncs again, even when it finds nothing left to change. A
//! partition without an index (a store from before it) is read with a query of
//! its releases; its next write builds the index from that query.
use tfreg_model::address::{ModuleName, ProviderName};
use tfreg_model::blob_key::BlobKey;
pub use tfreg_model::release::{
    Lifecycle, Mark, ModuleRelease, Origin, ProviderPackage, ProviderRelease, SigningKey,
    StoredFile,
};
use tfreg_model::router::{LifecycleAction, PublishTarget};
use tfreg_model::version::Version;

use super::cas::{self, Step};
use super::codec::{decode, encode};
use super::indexing::{module_listing, provider_listing, sync, sync_index};
pub use super::items::PutOutcome;
use super::items::{get, list, put_new};
use super::schema::{docs_sk, module_pk, provider_pk, release_location};
use crate::{Item, ItemStore, StoreError};

/// Every archive key a stored release item of `target`'s kind refers to.
fn item_keys(target: &PublishTarget, item: &Item) -> Result<Vec<BlobKey>, StoreError> {
    Ok(match target {
        PublishTarget::Provider { .. } | PublishTarget::Mirror { .. } => {
            decode::<ProviderRelease>(item)?.keys()
        }
        PublishTarget::Module { .. } => vec![decode::<ModuleRelease>(item)?.file.key],
    })
}

/// Every blob key the stored release of `target` refers to (none if there is
/// no such release).
pub async fn release_keys(
    store: &dyn ItemStore,
    target: &PublishTarget,
) -> Result<Vec<BlobKey>, StoreError> {
    let (pk, sk) = release_location(target);
    match store.get(&pk, &sk).await? {
        Some(item) => item_keys(target, &item),
        None => Ok(vec![]),
    }
}

fn no_release(target: &PublishTarget) -> StoreError {
    StoreError::not_found(format!("{target} is not published"))
}

/// How many times a lifecycle change retries after losing a race.
const CAS_ATTEMPTS: u32 = 5;

/// Apply `action` to the release `target` (one compare-and-swap write, so a
/// concurrent change or delete is never undone); its lifecycle afterwards and
/// whether it changed.
pub async fn change_lifecycle(
    store: &dyn ItemStore,
    target: &PublishTarget,
    action: LifecycleAction,
    mark: Mark,
) -> Result<(Lifecycle, bool), StoreError> {
    let result = change_release_lifecycle(store, target, action, mark).await;
    // Also when nothing changed or nothing is there: a retry after a crash
    // between the release's write and the index's repairs the index.
    if matches!(result, Ok(_) | Err(StoreError::NotFound(_))) {
        sync_index(store, target).await?;
    }
    result
}

async fn change_release_lifecycle(
    store: &dyn ItemStore,
    target: &PublishTarget,
    action: LifecycleAction,
    mark: Mark,
) -> Result<(Lifecycle, bool), StoreError> {
    let (pk, sk) = release_location(target);
    let decide = |current: Option<Item>| {
        let (pk, sk, mark) = (&pk, &sk, mark.clone());
        async move {
            let item = current.ok_or_else(|| no_release(target))?;
            // Edited as JSON: the same code for provider and module releases,
            // and every other field is kept exactly.
            let mut value: serde_json::Value = serde_json::from_slice(&item.data)
                .map_err(|e| StoreError::internal(format!("corrupt item {pk}/{sk}: {e}")))?;
            let fields = value.as_object_mut().ok_or_else(|| {
                StoreError::internal(format!("corrupt item {pk}/{sk}: not an object"))
            })?;
            let mut lifecycle: Lifecycle = match fields.get("lifecycle") {
                Some(v) => serde_json::from_value(v.clone()).map_err(|e| {
                    StoreError::internal(format!("corrupt lifecycle of {pk}/{sk}: {e}"))
                })?,
                None => Lifecycle::default(),
            };
            if !lifecycle.apply(action, mark) {
                return Ok(Step::Keep((lifecycle, false)));
            }
            if lifecycle.is_empty() {
                fields.remove("lifecycle");
            } else {
                fields.insert(
                    "lifecycle".into(),
                    serde_json::to_value(&lifecycle).map_err(StoreError::internal)?,
                );
            }
            Ok(Step::Write(encode(&value)?, (lifecycle, true)))
        }
    };
    cas::update(store, &pk, &sk, CAS_ATTEMPTS, decide, || {
        StoreError::Conflict(format!(
            "{target} kept changing while this change was made; try again"
        ))
    })
    .await
}

/// Remove the release `target` from the catalog: from every response at
/// once. Returns the archive keys its item referred to (the caller deletes
/// them), or 404 if it is not published.
///
/// No other release can refer to them: a published file's key names the
/// upload that published it ([`BlobKey::archive`]), and one upload publishes
/// one release. So a delete costs one `take` and the index's update, not a
/// read of every release of the partition (2.9 s at 5,000 versions before).
pub async fn delete_release(
    store: &dyn ItemStore,
    target: &PublishTarget,
) -> Result<Vec<BlobKey>, StoreError> {
    let (pk, sk) = release_location(target);
    let taken = store.take(&pk, &sk).await?;
    if let (PublishTarget::Module { version, .. }, Some(item)) = (target, &taken) {
        let release: ModuleRelease = decode(item)?;
        store
            .take(&pk, &docs_sk(version, &release.file.sha256))
            .await?;
    }
    // Also when it was gone already: a retried delete repairs the index.
    sync_index(store, target).await?;
    let item = taken.ok_or_else(|| no_release(target))?;
    let mut keys = item_keys(target, &item)?;
    keys.sort();
    keys.dedup();
    Ok(keys)
}

/// All releases of a provider, oldest first.
pub async fn provider_releases(
    store: &dyn ItemStore,
    origin: &Origin,
    provider: &ProviderName,
) -> Result<Vec<ProviderRelease>, StoreError> {
    list(
        store,
        &provider_pk(origin, provider),
        |r: &ProviderRelease| &r.version,
    )
    .await
}

/// One release of a provider.
pub async fn provider_release(
    store: &dyn ItemStore,
    origin: &Origin,
    provider: &ProviderName,
    version: &Version,
) -> Result<Option<ProviderRelease>, StoreError> {
    get(store, &provider_pk(origin, provider), version).await
}

/// Make a provider release visible, all at once; a second publish of the same
/// version succeeds only with identical content.
pub async fn put_provider_release(
    store: &dyn ItemStore,
    origin: &Origin,
    provider: &ProviderName,
    version: &Version,
    release: &ProviderRelease,
) -> Result<PutOutcome, StoreError> {
    let what = format!("provider {provider}");
    let pk = provider_pk(origin, provider);
    let outcome = put_new(
        store,
        pk.clone(),
        version,
        release,
        ProviderRelease::content,
        &what,
    )
    .await?;
    // Also when unchanged: a retried publish repairs the index.
    sync(store, &pk, Some(version), provider_listing).await?;
    Ok(outcome)
}

/// All releases of a module, oldest first (what the index is checked against).
pub async fn module_releases(
    store: &dyn ItemStore,
    module: &ModuleName,
) -> Result<Vec<ModuleRelease>, StoreError> {
    list(store, &module_pk(module), |r: &ModuleRelease| &r.version).await
}

/// One release of a module.
pub async fn module_release(
    store: &dyn ItemStore,
    module: &ModuleName,
    version: &Version,
) -> Result<Option<ModuleRelease>, StoreError> {
    get(store, &module_pk(module), version).await
}

/// Make a module release visible (immutable, like providers).
pub async fn put_module_release(
    store: &dyn ItemStore,
    module: &ModuleName,
    version: &Version,
    release: &ModuleRelease,
) -> Result<PutOutcome, StoreError> {
    let what = format!("module {module}");
    let pk = module_pk(module);
    let outcome = put_new(
        store,
        pk.clone(),
        version,
        release,
        |r: &ModuleRelease| r.file.sha256.clone(),
        &what,
    )
    .await?;
    sync(store, &pk, Some(version), module_listing).await?;
    Ok(outcome)
}

// ---------------------------------------------------------------------------
// The versions index (see the module documentation).
// ---------------------------------------------------------------------------

#[cfg(all(test, feature = "embedded"))]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::catalog::index::{Listing, VersionIndex};
    use crate::catalog::indexing::module_index;
    use crate::sqlite::SqliteStore;

    fn release(version: &str, sha: char) -> ModuleRelease {
        ModuleRelease {
            version: version.into(),
            file: StoredFile {
                filename: "m.tar.gz".into(),
                sha256: sha.to_string().repeat(64),
                size: 1,
                key: BlobKey::parse(&format!("archives/{sha}/m.tar.gz")).unwrap(),
            },
            published_at: 0,
            lifecycle: Lifecycle::default(),
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_publishes_of_one_version_have_one_winner() {
        let store = Arc::new(SqliteStore::in_memory().unwrap());
        let module = ModuleName::parse("ns", "m", "aws").unwrap();
        let version = Version::parse("1.0.0").unwrap();
        let tasks: Vec<_> = (0..20)
            .map(|i| {
                let (store, module, version) = (store.clone(), module.clone(), version.clone());
                let sha = if i % 2 == 0 { 'a' } else { 'b' };
                tokio::spawn(async move {
                    // Each publish keeps its files under keys of its own.
                    let mut ours = release("1.0.0", sha);
                    ours.file.key = BlobKey::parse(&format!("archives/{i}/m.tar.gz")).unwrap();
                    put_module_release(store.as_ref(), &module, &version, &ours).await
                })
            })
            .collect();
        let mut created = 0;
        let mut unchanged = 0;
        let mut conflicts = 0;
        for t in tasks {
            match t.await.unwrap() {
                Ok(PutOutcome::Created) => created += 1,
                Ok(PutOutcome::Unchanged) => unchanged += 1,
                Err(StoreError::Conflict(_)) => conflicts += 1,
                Err(e) => panic!("unexpected {e}"),
            }
        }
        assert_eq!(created, 1);
        assert_eq!(unchanged, 9, "the winner's twins are no-ops");
        assert_eq!(conflicts, 10, "the others are refused");
        assert_eq!(
            module_releases(store.as_ref(), &module)
                .await
                .unwrap()
                .len(),
            1
        );
    }

    #[tokio::test]
    async fn a_retried_put_of_the_same_item_is_its_creation() {
        // A store call retried after its first attempt landed finds our own
        // item: that is "created", not "unchanged" (whose files would be
        // deleted as unused).
        let store = SqliteStore::in_memory().unwrap();
        let module = ModuleName::parse("ns", "m", "aws").unwrap();
        let version = Version::parse("1.0.0").unwrap();
        let ours = release("1.0.0", 'a');
        let put = |r: ModuleRelease| {
            let (store, module, version) = (&store, &module, &version);
            async move {
                put_module_release(store, module, version, &r)
                    .await
                    .unwrap()
            }
        };
        assert_eq!(put(ours.clone()).await, PutOutcome::Created);
        assert_eq!(put(ours.clone()).await, PutOutcome::Created);
        let mut same_content = ours.clone();
        same_content.file.key = BlobKey::parse("archives/other/m.tar.gz").unwrap();
        assert_eq!(put(same_content).await, PutOutcome::Unchanged);
    }

    fn indexed(index: &VersionIndex) -> Vec<(String, Option<String>, bool)> {
        index
            .versions()
            .map(|v| {
                (
                    v.version.to_string(),
                    v.deprecated.map(str::to_string),
                    v.yanked,
                )
            })
            .collect()
    }

    #[tokio::test]
    async fn a_retried_publish_repairs_an_index_left_behind_by_a_crash() {
        let store = SqliteStore::in_memory().unwrap();
        let module = ModuleName::parse("ns", "m", "aws").unwrap();
        let v1 = Version::parse("1.0.0").unwrap();
        put_module_release(&store, &module, &v1, &release("1.0.0", 'a'))
            .await
            .unwrap();
        // A publish that stopped after its release item: the index lags.
        let v2 = Version::parse("2.0.0").unwrap();
        let ours = release("2.0.0", 'b');
        put_new(
            &store,
            module_pk(&module),
            &v2,
            &ours,
            |r| r.file.sha256.clone(),
            "m",
        )
        .await
        .unwrap();
        let index = module_index(&store, &module).await.unwrap();
        assert_eq!(
            indexed(&index).len(),
            1,
            "not listed yet, never listed without its release"
        );
        assert_eq!(
            put_module_release(&store, &module, &v2, &ours)
                .await
                .unwrap(),
            PutOutcome::Created
        );
        let index = module_index(&store, &module).await.unwrap();
        assert_eq!(
            indexed(&index),
            vec![("1.0.0".into(), None, false), ("2.0.0".into(), None, false)]
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn racing_publishes_lifecycle_changes_and_deletes_leave_the_index_equal_to_the_releases()
    {
        let store = Arc::new(SqliteStore::in_memory().unwrap());
        let module = ModuleName::parse("ns", "m", "aws").unwrap();
        let target = |v: &str| PublishTarget::try_from(format!("modules/ns/m/aws/{v}")).unwrap();
        let mark = Mark {
            message: "old".into(),
            at: 0,
            by: "test".into(),
        };
        let tasks: Vec<_> = (0..24)
            .map(|i| {
                let (store, module, mark) = (store.clone(), module.clone(), mark.clone());
                let v = format!("1.{}.0", i % 8);
                let t = target(&v);
                tokio::spawn(async move {
                    let version = Version::parse(&v).unwrap();
                    match i / 8 {
                        0 => drop(
                            put_module_release(
                                store.as_ref(),
                                &module,
                                &version,
                                &release(&v, 'a'),
                            )
                            .await,
                        ),
                        1 => drop(
                            change_lifecycle(store.as_ref(), &t, LifecycleAction::Deprecate, mark)
                                .await,
                        ),
                        _ => drop(delete_release(store.as_ref(), &t).await),
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
        let from_releases: Vec<_> = module_releases(store.as_ref(), &module)
            .await
            .unwrap()
            .iter()
            .map(|r| {
                let l = Listing::from(r);
                (l.version, l.deprecated, l.yanked)
            })
            .collect();
        let index = module_index(store.as_ref(), &module).await.unwrap();
        assert_eq!(indexed(&index), from_releases);
    }

    #[tokio::test]
    async fn versions_are_listed_in_semver_order_across_pages() {
        let store = SqliteStore::in_memory().unwrap();
        let module = ModuleName::parse("ns", "m", "aws").unwrap();
        let n = crate::sqlite::PAGE_SIZE * 2 + 7;
        for i in (0..n).rev() {
            let v = format!("1.{i}.0");
            put_module_release(
                &store,
                &module,
                &Version::parse(&v).unwrap(),
                &release(&v, 'a'),
            )
            .await
            .unwrap();
        }
        let listed: Vec<String> = module_releases(&store, &module)
            .await
            .unwrap()
            .into_iter()
            .map(|r| r.version)
            .collect();
        let expected: Vec<String> = (0..n).map(|i| format!("1.{i}.0")).collect();
        assert_eq!(listed, expected);
    }
}
