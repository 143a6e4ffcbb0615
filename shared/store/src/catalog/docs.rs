//! A module version's docs (what its page shows), one item per archive they
//! were read from, beside the module's releases; and its archive as a zip
//! (the OCI view's layer, issue 40), the same way.

use tfreg_model::address::ModuleName;
use tfreg_model::docs::ModuleDocs;
use tfreg_model::release::{ModuleRelease, StoredFile};
use tfreg_model::version::Version;

use super::codec::{decode, encode};
use super::schema::{docs_sk, module_pk, zip_sk};
use crate::{Condition, Item, ItemStore, StoreError};

/// Largest stored docs item: DynamoDB's item limit is 400 KB.
pub const MAX_DOCS_ITEM_BYTES: usize = 350 * 1024;

/// Docs are keyed by the archive they were read from, so a refused publish
/// of different content for a published version cannot replace them.
pub(crate) async fn docs_item(
    store: &dyn ItemStore,
    pk: &str,
    version: &Version,
    archive_sha256: &str,
) -> Result<Option<ModuleDocs>, StoreError> {
    store
        .get(pk, &docs_sk(version, archive_sha256))
        .await?
        .map(|item| decode(&item))
        .transpose()
}

/// The docs of a module release (none for releases published before docs
/// were read).
pub async fn module_docs(
    store: &dyn ItemStore,
    module: &ModuleName,
    release: &ModuleRelease,
) -> Result<Option<ModuleDocs>, StoreError> {
    let version = Version::parse(&release.version)?;
    docs_item(store, &module_pk(module), &version, &release.file.sha256).await
}

/// Store the docs read from a module archive, before its release item (so
/// the listing's description is there when the release appears): a publish
/// that stops between the two leaves docs nobody shows, which its retry
/// writes again.
pub async fn put_module_docs(
    store: &dyn ItemStore,
    module: &ModuleName,
    version: &Version,
    archive_sha256: &str,
    docs: &ModuleDocs,
) -> Result<(), StoreError> {
    let data = docs.stored(MAX_DOCS_ITEM_BYTES);
    let sk = docs_sk(version, archive_sha256);
    store
        .put(Item::new(module_pk(module), sk, data), Condition::Always)
        .await?;
    Ok(())
}

/// The zip made of a module release's archive, once made (none for a
/// version published before the OCI view, until `tfreg reindex`).
pub async fn module_zip(
    store: &dyn ItemStore,
    module: &ModuleName,
    release: &ModuleRelease,
) -> Result<Option<StoredFile>, StoreError> {
    let version = Version::parse(&release.version)?;
    store
        .get(&module_pk(module), &zip_sk(&version, &release.file.sha256))
        .await?
        .map(|item| decode(&item))
        .transpose()
}

/// Record the zip made of the archive `archive_sha256` of `version`, before
/// its release item (as docs are). Create-only: the first one made stays
/// (a second would have other bytes only from another crate version), so
/// a digest once answered never changes.
pub async fn put_module_zip(
    store: &dyn ItemStore,
    module: &ModuleName,
    version: &Version,
    archive_sha256: &str,
    zip: &StoredFile,
) -> Result<StoredFile, StoreError> {
    let (pk, sk) = (module_pk(module), zip_sk(version, archive_sha256));
    let item = Item::new(pk.clone(), sk.clone(), encode(zip)?);
    match store.put(item, Condition::IfAbsent).await {
        Ok(()) => Ok(zip.clone()),
        Err(StoreError::ConditionFailed) => match store.get(&pk, &sk).await? {
            Some(item) => decode(&item),
            None => Err(StoreError::internal(format!("{pk} {sk} vanished"))),
        },
        Err(e) => Err(e),
    }
}
