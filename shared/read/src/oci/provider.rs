//! Providers over OCI (`oci_mirror`), from the sources the registry
//! protocols read ([`crate::source::multi::with_provider`]): a tag is a version's
//! image index, one image manifest per platform, whose one `archive/zip`
//! layer is the stored zip itself (its digest the SHA256SUMS line, so the
//! lock file's `zh:` is the registry protocol's).

use async_trait::async_trait;
use tfreg_http::answer_cache::Answer;
use tfreg_http::error::Error;
use tfreg_http::registry::Registry;
use tfreg_model::address::{Platform, ProviderName};
use tfreg_model::oci::{self, Digest, Manifest, PROVIDER_TARGET_ARTIFACT, Reference, Repository};
use tfreg_model::token::Principal;
use tfreg_model::version::Version;

use super::{Found, remember, search_order, unknown};
use crate::kept::kept;
use crate::source::multi::{ProviderFrom, UseProvider, with_provider};
use crate::source::{Package, ProviderSource, Release};

/// The provider a repository is, and where it comes from.
fn provider_of(repository: &Repository) -> Result<(ProviderFrom<'_>, &ProviderName), Error> {
    match repository {
        Repository::Provider(p) => Ok((ProviderFrom::Here, p)),
        Repository::Mirrored { hostname, provider } => {
            Ok((ProviderFrom::Mirrored(hostname), provider))
        }
        Repository::Module(m) => Err(Error::internal(format!("{m} is a module"))),
    }
}

/// The listed versions' tags (not the yanked).
pub(super) struct Tags;

#[async_trait]
impl UseProvider for Tags {
    type Out = Vec<String>;
    async fn with(&self, source: &dyn ProviderSource) -> Result<Vec<String>, Error> {
        Ok(source
            .versions()
            .await?
            .listed
            .iter()
            .filter_map(|v| Version::parse(&v.version).ok())
            .map(|v| oci::tag_of(&v))
            .collect())
    }
}

/// What `user` reads of `repository`'s provider, made into an answer by
/// `answer`, and kept under `key` where its source may be
/// ([`ProviderSource::keepable`]: not the pull-through cache's, which a
/// request may fill).
pub(super) async fn answered<U: UseProvider>(
    registry: &Registry,
    repository: &Repository,
    principal: &Principal,
    key: &str,
    user: U,
    answer: &(dyn Fn(U::Out) -> Result<Answer, Error> + Sync),
) -> Result<Answer, Error> {
    struct Answered<'r, U: UseProvider> {
        registry: &'r Registry,
        key: &'r str,
        user: U,
        answer: &'r (dyn Fn(U::Out) -> Result<Answer, Error> + Sync),
    }
    #[async_trait]
    impl<U: UseProvider> UseProvider for Answered<'_, U> {
        type Out = Answer;
        async fn with(&self, source: &dyn ProviderSource) -> Result<Answer, Error> {
            let made = async { (self.answer)(self.user.with(source).await?) };
            if source.keepable() {
                kept(self.registry, || self.key.to_string(), made).await
            } else {
                made.await
            }
        }
    }
    let (from, provider) = provider_of(repository)?;
    let user = Answered {
        registry,
        key,
        user,
        answer,
    };
    with_provider(registry, from, provider, principal, &user).await
}

/// A version's manifests, as written from its release.
struct Written {
    index: Manifest,
    platforms: Vec<(Platform, Manifest)>,
}

impl Written {
    fn digests(&self) -> Vec<Digest> {
        std::iter::once(self.index.digest())
            .chain(self.platforms.iter().map(|(_, m)| m.digest()))
            .collect()
    }
}

/// Write a release's manifests. Every platform is in the index or none is
/// (a digest may not depend on who asks): a package a cache has not
/// stored yet is fetched first when `fetch` (and the caller may), else the
/// version has no OCI view now.
async fn write(
    source: &dyn ProviderSource,
    release: &Release,
    fetch: bool,
) -> Result<Written, Error> {
    let mut platforms = Vec::with_capacity(release.packages.len());
    for package in &release.packages {
        let size = match package.size {
            Some(size) => size,
            None if fetch && package.offered => source
                .fetched_size(release, package)
                .await?
                .ok_or_else(|| Error::OriginUnavailable {
                    message: format!(
                        "{} of {} is still being fetched from its origin",
                        package.filename, release.version
                    ),
                    retry_after_secs: 5,
                })?,
            None => {
                return Err(source.not_offered(&format!(
                    "{} for {} (not cached yet)",
                    release.version, package.platform
                )));
            }
        };
        let zip = zip_digest(package)?;
        platforms.push((
            package.platform.clone(),
            Manifest::of_zip(PROVIDER_TARGET_ARTIFACT, &zip, size, &package.filename),
        ));
    }
    if platforms.is_empty() {
        return Err(source.not_offered(&format!("any archive of {}", release.version)));
    }
    Ok(Written {
        index: Manifest::provider_index(&platforms),
        platforms,
    })
}

fn zip_digest(package: &Package) -> Result<Digest, Error> {
    Digest::of_sha256(&package.sha256)
        .map_err(|e| Error::internal(format!("{}: {}", package.filename, e.0)))
}

/// What a digest names in a repository.
enum Named {
    Manifest(Manifest),
    Zip { version: String, package: Package },
}

/// Search a source's versions for `digest`, newest first: one release read
/// each, nothing fetched.
async fn find(
    source: &dyn ProviderSource,
    repository: &Repository,
    digest: &Digest,
    zips: bool,
) -> Result<Option<Named>, Error> {
    let versions = search_order(repository, digest, source.every_version().await?);
    for version in versions {
        let release = match source.release(&version).await {
            Ok(release) => release,
            Err(Error::NotFound(_)) => continue,
            Err(e) => return Err(e),
        };
        if zips {
            if let Some(package) = release.packages.iter().find(|p| p.sha256 == digest.hex()) {
                return Ok(Some(Named::Zip {
                    version: release.version.clone(),
                    package: package.clone(),
                }));
            }
            continue;
        }
        let written = match write(source, &release, false).await {
            Ok(written) => written,
            Err(Error::NotFound(_)) => continue,
            Err(e) => return Err(e),
        };
        remember(repository, &written.digests(), &release.version);
        if written.index.digest() == *digest {
            return Ok(Some(Named::Manifest(written.index)));
        }
        if let Some((_, m)) = written
            .platforms
            .into_iter()
            .find(|(_, m)| m.digest() == *digest)
        {
            return Ok(Some(Named::Manifest(m)));
        }
    }
    Ok(None)
}

/// `manifests/<reference>`: a version's index by its tag; an index or a
/// platform's manifest by digest (a yanked version's too: lock files keep
/// working, as exact downloads do).
pub(super) struct ByReference<'r> {
    pub repository: &'r Repository,
    pub reference: &'r Reference,
}

#[async_trait]
impl UseProvider for ByReference<'_> {
    type Out = Manifest;
    async fn with(&self, source: &dyn ProviderSource) -> Result<Manifest, Error> {
        match self.reference {
            Reference::Version(version) => {
                let release = source.release(version).await?;
                let written = write(source, &release, true).await?;
                remember(self.repository, &written.digests(), &release.version);
                Ok(written.index)
            }
            Reference::Latest => Err(Error::not_found(format!(
                "{}: a provider's tags are its versions (there is no latest)",
                self.repository
            ))),
            Reference::Digest(digest) => {
                match find(source, self.repository, digest, false).await? {
                    Some(Named::Manifest(m)) => Ok(m),
                    _ => Err(unknown(self.repository, digest, "manifest")),
                }
            }
        }
    }
}

/// `blobs/<digest>`: the zip whose sha256 it is.
pub(super) async fn blob(
    registry: &Registry,
    repository: &Repository,
    digest: &Digest,
    principal: &Principal,
) -> Result<Found, Error> {
    struct Zip<'r> {
        repository: &'r Repository,
        digest: &'r Digest,
    }
    #[async_trait]
    impl UseProvider for Zip<'_> {
        type Out = Found;
        async fn with(&self, source: &dyn ProviderSource) -> Result<Found, Error> {
            match find(source, self.repository, self.digest, true).await? {
                Some(Named::Zip { version, package }) if package.offered => Ok(Found {
                    version,
                    platform: Some(package.platform.to_string()),
                    key: package.key,
                }),
                Some(Named::Zip { version, .. }) => {
                    Err(source.not_offered(&format!("{} of {version}", self.digest)))
                }
                _ => Err(unknown(self.repository, self.digest, "blob")),
            }
        }
    }
    let (from, provider) = provider_of(repository)?;
    let user = Zip { repository, digest };
    with_provider(registry, from, provider, principal, &user).await
}
