//! The read side of the four protocols: discovery, providers, modules, mirror.

use std::collections::BTreeMap;

use http::StatusCode;

use crate::address::{Hostname, ProviderName};
use crate::catalog::{self, Lifecycle, Origin, ProviderRelease};
use crate::error::Error;
use crate::http_types::{Response, empty, header_value, json};
use crate::protocol::*;
use crate::registry::Registry;
use crate::router::ReadRoute;

/// `/.well-known/terraform.json`.
pub fn discovery() -> Response {
    json(StatusCode::OK, &Discovery::default())
}

/// Answer a read route.
pub async fn handle(registry: &Registry, route: ReadRoute) -> Result<Response, Error> {
    match route {
        ReadRoute::ProviderVersions { provider } => provider_versions(registry, &provider).await,
        ReadRoute::ProviderDownload {
            provider,
            version,
            platform,
        } => {
            let release = catalog::provider_release(
                registry.items.as_ref(),
                &Origin::Registry,
                &provider,
                &version,
            )
            .await?
            .ok_or_else(|| {
                Error::not_found(format!("provider {provider} version {version} not found"))
            })?;
            provider_download(registry, &provider, &release, &platform.os, &platform.arch).await
        }
        ReadRoute::ModuleVersions { module } => {
            let releases = catalog::module_releases(registry.items.as_ref(), &module).await?;
            let releases = listed(releases, |r| &r.lifecycle, || format!("module {module}"))?;
            let versions = releases
                .into_iter()
                .map(|r| ModuleVersionEntry {
                    version: r.version,
                    deprecation: r
                        .lifecycle
                        .deprecated
                        .map(|d| ModuleDeprecation { reason: d.message }),
                })
                .collect();
            Ok(json(
                StatusCode::OK,
                &ModuleVersions {
                    modules: vec![ModuleVersionList { versions }],
                },
            ))
        }
        ReadRoute::ModuleDownload { module, version } => {
            let release = catalog::module_release(registry.items.as_ref(), &module, &version)
                .await?
                .ok_or_else(|| {
                    Error::not_found(format!("module {module} version {version} not found"))
                })?;
            let url = registry.read_url(&release.file.key).await?;
            let mut resp = empty(StatusCode::NO_CONTENT);
            resp.headers_mut()
                .insert("x-terraform-get", header_value(&url)?);
            Ok(resp)
        }
        ReadRoute::MirrorIndex { hostname, provider } => {
            let releases = mirror_releases(registry, &hostname, &provider).await?;
            let versions = releases
                .into_iter()
                .map(|r| (r.version, EmptyObject {}))
                .collect();
            Ok(json(StatusCode::OK, &MirrorIndex { versions }))
        }
        ReadRoute::MirrorVersion {
            hostname,
            provider,
            version,
        } => {
            let origin = origin_of(registry, &hostname);
            let release =
                catalog::provider_release(registry.items.as_ref(), &origin, &provider, &version)
                    .await?
                    .ok_or_else(|| {
                        Error::not_found(format!(
                            "provider {hostname}/{provider} version {version} not found"
                        ))
                    })?;
            let mut archives = std::collections::BTreeMap::new();
            for p in &release.packages {
                let archive = MirrorArchive {
                    url: registry.read_url(&p.file.key).await?,
                    hashes: p.hashes(),
                };
                archives.insert(p.platform(), archive);
            }
            Ok(json(StatusCode::OK, &MirrorVersion { archives }))
        }
    }
}

/// The releases a versions list shows: all but the yanked ones. 404 when
/// nothing is published, or everything is yanked (exact downloads still work).
fn listed<T>(
    releases: Vec<T>,
    lifecycle: impl Fn(&T) -> &Lifecycle,
    what: impl Fn() -> String,
) -> Result<Vec<T>, Error> {
    if releases.is_empty() {
        return Err(Error::not_found(format!("{} not found", what())));
    }
    let listed: Vec<T> = releases
        .into_iter()
        .filter(|r| lifecycle(r).listed())
        .collect();
    if listed.is_empty() {
        return Err(Error::not_found(format!(
            "every version of {} is yanked",
            what()
        )));
    }
    Ok(listed)
}

/// One warning per deprecation message, naming its versions in order:
/// `versions 1.0.0, 1.1.0 are deprecated: use 2.x`.
fn deprecation_warnings(releases: &[ProviderRelease]) -> Vec<String> {
    let mut by_message: Vec<(&str, Vec<&str>)> = Vec::new();
    for r in releases {
        if let Some(d) = &r.lifecycle.deprecated {
            match by_message.iter_mut().find(|(m, _)| *m == d.message) {
                Some((_, versions)) => versions.push(&r.version),
                None => by_message.push((&d.message, vec![&r.version])),
            }
        }
    }
    by_message
        .into_iter()
        .map(|(message, versions)| match versions.as_slice() {
            [one] => format!("version {one} is deprecated: {message}"),
            many => format!("versions {} are deprecated: {message}", many.join(", ")),
        })
        .collect()
}

/// Providers published here are mirrored under the registry's own hostname;
/// any other hostname is looked up among the imported mirror providers.
fn origin_of(registry: &Registry, hostname: &Hostname) -> Origin {
    if *hostname == registry.config.hostname {
        Origin::Registry
    } else {
        Origin::Mirror(hostname.clone())
    }
}

async fn mirror_releases(
    registry: &Registry,
    hostname: &Hostname,
    provider: &ProviderName,
) -> Result<Vec<ProviderRelease>, Error> {
    let releases = catalog::provider_releases(
        registry.items.as_ref(),
        &origin_of(registry, hostname),
        provider,
    )
    .await?;
    listed(
        releases,
        |r| &r.lifecycle,
        || format!("provider {hostname}/{provider} in this mirror"),
    )
}

async fn provider_versions(
    registry: &Registry,
    provider: &ProviderName,
) -> Result<Response, Error> {
    let releases =
        catalog::provider_releases(registry.items.as_ref(), &Origin::Registry, provider).await?;
    let releases = listed(
        releases,
        |r| &r.lifecycle,
        || format!("provider {provider}"),
    )?;
    let warnings = deprecation_warnings(&releases);
    let versions = releases
        .into_iter()
        .map(|r| ProviderVersionEntry {
            version: r.version,
            protocols: r.protocols,
            platforms: r
                .packages
                .into_iter()
                .map(|p| PlatformEntry {
                    os: p.os,
                    arch: p.arch,
                })
                .collect(),
        })
        .collect();
    Ok(json(
        StatusCode::OK,
        &ProviderVersions { versions, warnings },
    ))
}

async fn provider_download(
    registry: &Registry,
    provider: &ProviderName,
    release: &ProviderRelease,
    os: &str,
    arch: &str,
) -> Result<Response, Error> {
    let package = release.package(os, arch).ok_or_else(|| {
        Error::not_found(format!(
            "provider {provider} version {} has no package for {os}_{arch}",
            release.version
        ))
    })?;
    let unsigned = || {
        Error::internal(format!(
            "release {} of {provider} has no signature",
            release.version
        ))
    };
    let shasums = release.shasums.as_ref().ok_or_else(unsigned)?;
    let signature = release.shasums_signature.as_ref().ok_or_else(unsigned)?;
    let key = release.signing_key.as_ref().ok_or_else(unsigned)?;
    let packages: BTreeMap<String, PackageHashes> = release
        .packages
        .iter()
        .map(|p| {
            (
                p.platform(),
                PackageHashes {
                    hashes: vec![crate::hashing::zh_hash(&p.file.sha256), p.h1.clone()],
                    package_size: p.file.size,
                },
            )
        })
        .collect();
    let body = ProviderDownload {
        protocols: release.protocols.clone(),
        os: package.os.clone(),
        arch: package.arch.clone(),
        filename: package.file.filename.clone(),
        download_url: registry.read_url(&package.file.key).await?,
        shasums_url: registry.read_url(&shasums.key).await?,
        shasums_signature_url: registry.read_url(&signature.key).await?,
        shasum: package.file.sha256.clone(),
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
    Ok(json(StatusCode::OK, &body))
}
