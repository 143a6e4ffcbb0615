//! Publishing a module version: one `.tar.gz`.

use tfreg_http::error::Error;
use tfreg_http::registry::Registry;
use tfreg_model::address::ModuleName;
use tfreg_model::protocol::FileDecl;
use tfreg_model::version::Version;
use tfreg_store::catalog::{self, ModuleRelease};
use tfreg_verify::release_files::{self, ReleaseError};

use super::Recorded;
use super::staging::Staging;

/// The one archive a module publish declares.
pub(super) fn declared(files: &[FileDecl], max: u64) -> Result<&FileDecl, Error> {
    let [decl] = files else {
        return Err(crate::refused(ReleaseError::invalid(
            "a module publish uploads exactly one .tar.gz file",
        )));
    };
    release_files::check_decl(decl, max).map_err(crate::refused)?;
    if !decl.name.ends_with(".tar.gz") {
        return Err(crate::refused(ReleaseError::invalid(format!(
            "{}: module archives must be .tar.gz",
            decl.name
        ))));
    }
    Ok(decl)
}

/// `Some(same content?)` when the version exists.
pub(super) async fn same_as_published(
    registry: &Registry,
    module: &ModuleName,
    version: &Version,
    archive: &FileDecl,
) -> Result<Option<bool>, Error> {
    let existing = catalog::module_release(registry.items.as_ref(), module, version).await?;
    Ok(existing.map(|e| e.file.sha256 == archive.sha256))
}

/// Claim the archive, check exactly those bytes, keep them and record the version.
pub(super) async fn complete(
    registry: &Registry,
    staging: &mut Staging<'_>,
    module: &ModuleName,
    version: &Version,
    archive: &FileDecl,
) -> Result<Recorded, Error> {
    let claimed = staging
        .claim(archive, registry.config.max_archive_bytes)
        .await?;
    let reader = claimed.file.try_clone().map_err(Error::internal)?;
    let file = archive.name.clone();
    // The docs (README, inputs, outputs...) are read in the same pass over
    // the archive as its check, from exactly the bytes kept.
    let docs = tokio::task::spawn_blocking(move || {
        tfreg_verify::archives::module::checked_docs(std::io::BufReader::new(reader))
            .map_err(|source| ReleaseError::Archive { file, source })
    })
    .await?
    .map_err(crate::refused)?;
    // Past a bound the version is published without its interface, and
    // the publisher (and the audit trail, and the log) is told so.
    let warnings: Vec<String> = docs
        .unread
        .iter()
        .map(|unread| format!("the module's page shows no inputs or outputs: {unread}"))
        .collect();
    if let Some(unread) = &docs.unread {
        tracing::warn!(module = %module, %version, "module docs not read: {unread}");
    }
    let docs = docs.docs;
    catalog::put_module_docs(
        registry.items.as_ref(),
        module,
        version,
        &archive.sha256,
        &docs,
    )
    .await?;
    // Kept under the name the publisher declared (checked at begin; it ends
    // in .tar.gz, which go-getter needs) in a key of this publish's own.
    let release = ModuleRelease {
        version: version.to_string(),
        file: staging.keep(&claimed, &archive.name).await?,
        published_at: registry.now(),
        lifecycle: Default::default(),
    };
    let outcome =
        catalog::put_module_release(registry.items.as_ref(), module, version, &release).await?;
    // The zip the OCI view serves for this version (issue 40), made once
    // this publish has won (a losing one leaves none behind): its digest
    // never changes. Should it fail, the version is published all the same
    // and `tfreg reindex` makes it (its OCI manifest says so until then).
    if outcome == catalog::PutOutcome::Created
        && let Err(e) = tfreg_store::keep_module_zip(
            registry.items.as_ref(),
            registry.blobs.as_ref(),
            module,
            version,
            &archive.sha256,
            &claimed.file,
            tfreg_verify::archives::module_zip::zip_file,
        )
        .await
    {
        tracing::error!(module = %module, %version, "no OCI zip made: {e}");
    }
    Ok(Recorded {
        outcome,
        address: format!("{}/{module}", registry.config.hostname),
        signed_by: None,
        warnings,
    })
}
