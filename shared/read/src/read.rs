//! The read side of the protocols: providers, modules, the mirror.

use std::collections::BTreeMap;

use http::StatusCode;

use tfreg_http::answer_cache::Answer;
use tfreg_http::body::{Response, header_value};
use tfreg_http::error::Error;
use tfreg_http::registry::Registry;
use tfreg_model::address::{Hostname, ProviderName};
use tfreg_model::protocol::*;
use tfreg_model::router::ReadRoute;
use tfreg_model::token::Principal;
use tfreg_model::upstream::{UpstreamHost, UpstreamRecord};
use tfreg_store::catalog::index::{VersionIndex, View};
use tfreg_store::catalog::{self, Origin, ProviderRelease, upstreams};

use crate::{cached, cached_module};

/// Answer a read route. A configured upstream's providers (the cache's
/// routes, and the mirror of a host that has no imported providers here)
/// are answered from the pull-through cache, by who asks (who may make it
/// fetch): never kept as everyone's answer. A mirror read of an imported
/// host costs one read as before; the upstream is looked up only when that
/// finds nothing (`tfreg mirror import` refuses a configured upstream's
/// hostname, so the two never overlap).
///
/// A successful download is counted ([`crate::counted`]), however it was
/// answered.
pub async fn handle(
    registry: &Registry,
    route: ReadRoute,
    principal: &Principal,
) -> Result<Response, Error> {
    let download = crate::counted::download_of(registry, &route, principal);
    let answered = answer_route(registry, route, principal).await;
    if let (Some(download), Ok(response)) = (download, &answered)
        && response.status().is_success()
    {
        registry.usage.count(download);
    }
    answered
}

async fn answer_route(
    registry: &Registry,
    route: ReadRoute,
    principal: &Principal,
) -> Result<Response, Error> {
    let other_host = match &route {
        _ if route.cache_host().is_some() => {
            // The cache's own routes: their host must be an upstream (404).
            let found = upstream_of(registry, &route).await?;
            return cached_answer(
                registry,
                found.expect("a cache route's upstream"),
                principal,
            )
            .await;
        }
        ReadRoute::MirrorIndex { hostname, .. } | ReadRoute::MirrorVersion { hostname, .. } => {
            *hostname != registry.config.hostname
        }
        _ => false,
    };
    match kept_or_made(registry, route.clone()).await {
        Err(Error::NotFound(why)) if other_host => match upstream_of(registry, &route).await? {
            Some(found) => cached_answer(registry, found, principal).await,
            None => Err(Error::NotFound(why)),
        },
        other => other,
    }
}

/// A configured upstream's answer from the cache.
async fn cached_answer(
    registry: &Registry,
    (upstream, route): (UpstreamRecord, ReadRoute),
    principal: &Principal,
) -> Result<Response, Error> {
    Ok(match route {
        ReadRoute::MirrorIndex { provider, .. } => {
            cached::mirror_index(registry, &upstream, &provider, principal).await?
        }
        ReadRoute::MirrorVersion {
            provider, version, ..
        } => {
            cached::mirror_version(
                registry,
                &upstream,
                &provider,
                &version.to_string(),
                principal,
            )
            .await?
        }
        ReadRoute::CacheProviderVersions { provider, .. } => {
            cached::provider_versions(registry, &upstream, &provider, principal).await?
        }
        ReadRoute::CacheProviderDownload {
            provider,
            version,
            platform,
            ..
        } => {
            cached::provider_download(
                registry,
                &upstream,
                &provider,
                &version.to_string(),
                &platform,
                principal,
            )
            .await?
        }
        ReadRoute::CacheModuleVersions { module, .. } => {
            cached_module::module_versions(registry, &upstream, &module, principal).await?
        }
        ReadRoute::CacheModuleDownload {
            module, version, ..
        } => {
            cached_module::module_download(
                registry,
                &upstream,
                &module,
                &version.to_string(),
                principal,
            )
            .await?
        }
        _ => unreachable!("upstream_of answers mirror and cache routes only"),
    }
    .response())
}

/// The answer kept from an earlier request while the store and the second
/// are unchanged (the caller was authorised already: every caller allowed
/// to read a route gets the same answer), else a new one.
async fn kept_or_made(registry: &Registry, route: ReadRoute) -> Result<Response, Error> {
    let keeping = registry.keeping(|| route.path());
    if let Some(kept) = registry.kept_answer(keeping.as_ref()) {
        return Ok(kept.response());
    }
    let made = answer(registry, route).await?;
    registry.keep_answer(keeping.as_ref(), &made);
    Ok(made.response())
}

/// The upstream a mirror route's hostname names, if it is one; a cache
/// route's, which must be one (404).
async fn upstream_of(
    registry: &Registry,
    route: &ReadRoute,
) -> Result<Option<(UpstreamRecord, ReadRoute)>, Error> {
    if let Some(host) = route.cache_host() {
        let upstream = upstreams::upstream(registry.items.as_ref(), host)
            .await?
            .ok_or_else(|| Error::not_found(format!("{host} is not an upstream registry here")))?;
        return Ok(Some((upstream, route.clone())));
    }
    let (ReadRoute::MirrorIndex { hostname, .. } | ReadRoute::MirrorVersion { hostname, .. }) =
        route
    else {
        return Ok(None);
    };
    if *hostname == registry.config.hostname {
        return Ok(None);
    }
    let Ok(host) = UpstreamHost::parse(hostname.as_str()) else {
        return Ok(None);
    };
    Ok(upstreams::upstream(registry.items.as_ref(), &host)
        .await?
        .map(|u| (u, route.clone())))
}

/// A read route's answer, made afresh.
async fn answer(registry: &Registry, route: ReadRoute) -> Result<Answer, Error> {
    match route {
        ReadRoute::CacheProviderVersions { .. }
        | ReadRoute::CacheProviderDownload { .. }
        | ReadRoute::CacheModuleVersions { .. }
        | ReadRoute::CacheModuleDownload { .. } => Err(Error::internal(
            "a cache route reached the registry's own answers",
        )),
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
            let index = catalog::module_index(registry.items.as_ref(), &module).await?;
            let versions = listed(&index, || format!("module {module}"))?
                .into_iter()
                .map(|v| ModuleVersionEntry {
                    version: v.version.to_string(),
                    deprecation: v.deprecated.map(|m| ModuleDeprecation {
                        reason: m.to_string(),
                    }),
                })
                .collect();
            Ok(Answer::json(
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
            Ok(Answer::empty(StatusCode::NO_CONTENT).with_header(
                http::HeaderName::from_static("x-terraform-get"),
                header_value(&url)?,
            ))
        }
        ReadRoute::MirrorIndex { hostname, provider } => {
            let origin = origin_of(registry, &hostname);
            let index =
                catalog::provider_index(registry.items.as_ref(), &origin, &provider).await?;
            let versions = listed(&index, || {
                format!("provider {hostname}/{provider} in this mirror")
            })?
            .into_iter()
            .map(|v| (v.version.to_string(), EmptyObject {}))
            .collect();
            Ok(Answer::json(StatusCode::OK, &MirrorIndex { versions }))
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
            Ok(Answer::json(StatusCode::OK, &MirrorVersion { archives }))
        }
    }
}

/// The versions a versions list shows: all but the yanked ones. 404 when
/// nothing is published, or everything is yanked (exact downloads still work).
fn listed(index: &VersionIndex, what: impl Fn() -> String) -> Result<Vec<View<'_>>, Error> {
    if index.is_empty() {
        return Err(Error::not_found(format!("{} not found", what())));
    }
    let listed: Vec<View<'_>> = index.versions().filter(|v| !v.yanked).collect();
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
fn deprecation_warnings(listed: &[View<'_>]) -> Vec<String> {
    let mut by_message: Vec<(&str, Vec<&str>)> = Vec::new();
    for v in listed {
        if let Some(message) = v.deprecated {
            match by_message.iter_mut().find(|(m, _)| *m == message) {
                Some((_, versions)) => versions.push(v.version),
                None => by_message.push((message, vec![v.version])),
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

async fn provider_versions(registry: &Registry, provider: &ProviderName) -> Result<Answer, Error> {
    let index =
        catalog::provider_index(registry.items.as_ref(), &Origin::Registry, provider).await?;
    let listed = listed(&index, || format!("provider {provider}"))?;
    let warnings = deprecation_warnings(&listed);
    let versions = listed
        .into_iter()
        .map(|v| ProviderVersionEntry {
            version: v.version.to_string(),
            protocols: v.protocols.to_vec(),
            platforms: v
                .platforms
                .iter()
                .map(|(os, arch)| PlatformEntry {
                    os: os.clone(),
                    arch: arch.clone(),
                })
                .collect(),
        })
        .collect();
    Ok(Answer::json(
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
) -> Result<Answer, Error> {
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
                    hashes: p.hashes(),
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
    Ok(Answer::json(StatusCode::OK, &body))
}
