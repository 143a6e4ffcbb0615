//! What the registry protocols and the network mirror answer, each made
//! from a source ([`crate::source`]), whichever kind it is: published
//! here, imported, or a configured upstream's through the cache.

use std::collections::BTreeMap;

use http::StatusCode;
use tfreg_http::answer_cache::Answer;
use tfreg_http::body::header_value;
use tfreg_http::error::Error;
use tfreg_http::registry::Registry;
use tfreg_model::address::Platform;
use tfreg_model::protocol::*;
use tfreg_model::version::Version;

use crate::source::{ModuleSource, ProviderSource, Release, Signed};

/// A view of a provider.
#[derive(Debug, Clone, Copy)]
pub(crate) enum ProviderView<'r> {
    /// `providers.v1`'s `versions`.
    Versions,
    /// `providers.v1`'s `download/<os>/<arch>`.
    Download {
        version: &'r Version,
        platform: &'r Platform,
    },
    /// The network mirror's `index.json`.
    MirrorIndex,
    /// The network mirror's `<version>.json`.
    MirrorVersion { version: &'r Version },
}

/// A view of a module.
#[derive(Debug, Clone, Copy)]
pub(crate) enum ModuleView<'r> {
    Versions,
    Download { version: &'r Version },
}

pub(crate) async fn provider(
    registry: &Registry,
    source: &dyn ProviderSource,
    view: ProviderView<'_>,
) -> Result<Answer, Error> {
    match view {
        ProviderView::Versions => {
            let versions = source.versions().await?;
            let listed = versions
                .listed
                .into_iter()
                .map(|v| ProviderVersionEntry {
                    version: v.version,
                    protocols: v.protocols,
                    platforms: v
                        .platforms
                        .into_iter()
                        .map(|p| PlatformEntry {
                            os: p.os,
                            arch: p.arch,
                        })
                        .collect(),
                })
                .collect();
            Ok(Answer::json(
                StatusCode::OK,
                &ProviderVersions {
                    versions: listed,
                    warnings: versions.warnings,
                },
            ))
        }
        ProviderView::Download { version, platform } => {
            let release = source.release(version).await?;
            download(registry, source, &release, platform).await
        }
        ProviderView::MirrorIndex => {
            let versions: BTreeMap<String, EmptyObject> = source
                .versions()
                .await?
                .listed
                .into_iter()
                .map(|v| (v.version, EmptyObject {}))
                .collect();
            Ok(Answer::json(StatusCode::OK, &MirrorIndex { versions }))
        }
        ProviderView::MirrorVersion { version } => {
            let release = source.release(version).await?;
            let mut archives = BTreeMap::new();
            for p in release.packages.iter().filter(|p| p.offered) {
                let archive = MirrorArchive {
                    url: registry.read_url(&p.key).await?,
                    hashes: p.hashes.clone(),
                };
                archives.insert(p.platform.to_string(), archive);
            }
            if archives.is_empty() {
                return Err(source.not_offered(&format!("any archive of {version}")));
            }
            Ok(Answer::json(StatusCode::OK, &MirrorVersion { archives }))
        }
    }
}

/// A download answer of the origin's signature, as the origin served it
/// (Terraform verifies the signature itself and names who signed; the lock
/// file gets every platform's `zh:` from SHA256SUMS), with our URLs.
#[derive(serde::Serialize)]
struct OriginSigned<'a> {
    protocols: &'a [String],
    os: &'a str,
    arch: &'a str,
    filename: &'a str,
    download_url: String,
    shasums_url: String,
    shasums_signature_url: String,
    shasum: &'a str,
    signing_keys: &'a serde_json::value::RawValue,
}

/// `download/<os>/<arch>`: the platform's archive, SHA256SUMS, its
/// signature and the key that made it.
async fn download(
    registry: &Registry,
    source: &dyn ProviderSource,
    release: &Release,
    platform: &Platform,
) -> Result<Answer, Error> {
    let package = release
        .packages
        .iter()
        .find(|p| p.platform == *platform)
        .ok_or_else(|| source.no_package(release, platform))?;
    if !package.offered {
        return Err(source.not_offered(&format!("{} for {platform}", release.version)));
    }
    let download_url = registry.read_url(&package.key).await?;
    match &release.signed {
        Signed::Here {
            shasums,
            signature,
            key,
        } => {
            let packages = release
                .packages
                .iter()
                .map(|p| {
                    let hashes = PackageHashes {
                        hashes: p.hashes.clone(),
                        package_size: p.size.unwrap_or_default(),
                    };
                    (p.platform.to_string(), hashes)
                })
                .collect();
            let body = ProviderDownload {
                protocols: release.protocols.clone(),
                os: platform.os.clone(),
                arch: platform.arch.clone(),
                filename: package.filename.clone(),
                download_url,
                shasums_url: registry.read_url(shasums).await?,
                shasums_signature_url: registry.read_url(signature).await?,
                shasum: package.sha256.clone(),
                signing_keys: SigningKeys {
                    gpg_public_keys: vec![GpgPublicKey {
                        key_id: key.key_id.clone(),
                        ascii_armor: key.ascii_armor.clone(),
                        trust_signature: String::new(),
                        source: String::new(),
                        source_url: None,
                    }],
                },
                packages,
            };
            Ok(Answer::json(StatusCode::OK, &body))
        }
        Signed::Origin {
            shasums,
            signature,
            signing_keys,
        } => {
            let signing_keys = serde_json::value::RawValue::from_string(signing_keys.clone())
                .map_err(|e| Error::internal(format!("a cached release's signing keys: {e}")))?;
            let shasums_signature_url = match signature {
                Some(key) => registry.read_url(key).await?,
                None => String::new(),
            };
            let body = OriginSigned {
                protocols: &release.protocols,
                os: &platform.os,
                arch: &platform.arch,
                filename: &package.filename,
                download_url,
                shasums_url: registry.read_url(shasums).await?,
                shasums_signature_url,
                shasum: &package.sha256,
                signing_keys: &signing_keys,
            };
            Ok(Answer::json(StatusCode::OK, &body))
        }
        Signed::Unsigned => Err(Error::internal(format!(
            "release {} has no signature to answer a download with",
            release.version
        ))),
    }
}

pub(crate) async fn module(
    source: &dyn ModuleSource,
    view: ModuleView<'_>,
) -> Result<Answer, Error> {
    match view {
        ModuleView::Versions => {
            let versions = source
                .versions()
                .await?
                .into_iter()
                .map(|v| ModuleVersionEntry {
                    version: v.version,
                    deprecation: v.deprecated.map(|reason| ModuleDeprecation { reason }),
                })
                .collect();
            Ok(Answer::json(
                StatusCode::OK,
                &ModuleVersions {
                    modules: vec![ModuleVersionList { versions }],
                },
            ))
        }
        ModuleView::Download { version } => {
            let location = source.location(version).await?;
            Ok(Answer::empty(StatusCode::NO_CONTENT).with_header(
                http::HeaderName::from_static("x-terraform-get"),
                header_value(&location)?,
            ))
        }
    }
}
