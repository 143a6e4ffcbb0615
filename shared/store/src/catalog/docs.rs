//! A module version's docs (what its page shows), one item per archive they
//! were read from, beside the module's releases.

use tfreg_model::address::ModuleName;
use tfreg_model::docs::ModuleDocs;
use tfreg_model::release::ModuleRelease;
use tfreg_model::version::Version;

use super::codec::decode;
use super::schema::{docs_sk, module_pk};
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
