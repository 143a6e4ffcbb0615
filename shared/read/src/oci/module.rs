//! Modules over OCI (`oci://HOST/modules/NS/NAME/SYSTEM?tag=...`): a tag
//! (a version, or `latest`: the newest listed that is no prerelease) is an
//! image manifest (`application/vnd.opentofu.modulepkg`) whose one
//! `archive/zip` layer is the zip made of the module's archive once, at
//! publish.

use tfreg_http::error::Error;
use tfreg_http::registry::Registry;
use tfreg_model::address::ModuleName;
use tfreg_model::oci::{self, Digest, LATEST, MODULE_ARTIFACT, Manifest, Reference, Repository};
use tfreg_model::release::StoredFile;
use tfreg_model::version::Version;

use super::{Found, remember, search_order, unknown};
use crate::source::own::Modules;
use crate::source::{Listed, ModuleSource};

/// The newest listed version that is no prerelease: what `latest` names.
fn latest(listed: &[Listed]) -> Option<Version> {
    listed
        .iter()
        .filter_map(|v| Version::parse(&v.version).ok())
        .filter(|v| !v.is_prerelease())
        .max()
}

/// The listed versions' tags (not the yanked), and `latest`.
pub(super) async fn tags(registry: &Registry, module: &ModuleName) -> Result<Vec<String>, Error> {
    let listed = Modules::new(registry, module).versions().await?;
    let mut tags: Vec<String> = listed
        .iter()
        .filter_map(|v| Version::parse(&v.version).ok())
        .map(|v| oci::tag_of(&v))
        .collect();
    if latest(&listed).is_some() {
        tags.push(LATEST.into());
    }
    Ok(tags)
}

fn manifest_of(zip: &StoredFile) -> Result<Manifest, Error> {
    let digest = Digest::of_sha256(&zip.sha256)
        .map_err(|e| Error::internal(format!("{}: {}", zip.filename, e.0)))?;
    Ok(Manifest::of_zip(
        MODULE_ARTIFACT,
        &digest,
        zip.size,
        &zip.filename,
    ))
}

/// Search every version for `digest` (its manifest's, or with `zips` its
/// zip's), newest first: two reads each.
async fn find(
    source: &dyn ModuleSource,
    repository: &Repository,
    digest: &Digest,
    zips: bool,
) -> Result<Option<(Version, StoredFile)>, Error> {
    for version in search_order(repository, digest, source.every_version().await?) {
        let zip = match source.zip(&version).await {
            Ok(zip) => zip,
            Err(Error::NotFound(_)) => continue,
            Err(e) => return Err(e),
        };
        let manifest = manifest_of(&zip)?.digest();
        let layer = Digest::of_sha256(&zip.sha256).ok();
        remember(
            repository,
            [&manifest].into_iter().chain(layer.as_ref()),
            &version.to_string(),
        );
        let hit = if zips {
            layer.as_ref() == Some(digest)
        } else {
            manifest == *digest
        };
        if hit {
            return Ok(Some((version, zip)));
        }
    }
    Ok(None)
}

/// `manifests/<reference>`: a version's (a yanked one's too, by its tag or
/// digest: lock files and `?digest=` pins keep working), or `latest`'s.
pub(super) async fn manifest(
    registry: &Registry,
    module: &ModuleName,
    reference: &Reference,
) -> Result<Manifest, Error> {
    let source = Modules::new(registry, module);
    let repository = Repository::Module(module.clone());
    match reference {
        Reference::Version(version) => manifest_of(&source.zip(version).await?),
        Reference::Latest => {
            let version = latest(&source.versions().await?).ok_or_else(|| {
                Error::not_found(format!(
                    "module {module} has no version for latest (only prereleases): name one with ?tag="
                ))
            })?;
            manifest_of(&source.zip(&version).await?)
        }
        Reference::Digest(digest) => match find(&source, &repository, digest, false).await? {
            Some((_, zip)) => manifest_of(&zip),
            None => Err(unknown(&repository, digest, "manifest")),
        },
    }
}

/// `blobs/<digest>`: the zip whose sha256 it is.
pub(super) async fn blob(
    registry: &Registry,
    module: &ModuleName,
    digest: &Digest,
) -> Result<Found, Error> {
    let source = Modules::new(registry, module);
    let repository = Repository::Module(module.clone());
    match find(&source, &repository, digest, true).await? {
        Some((version, zip)) => Ok(Found {
            version: version.to_string(),
            platform: None,
            key: zip.key,
        }),
        None => Err(unknown(&repository, digest, "blob")),
    }
}
