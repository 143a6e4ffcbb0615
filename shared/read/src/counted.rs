//! Which read answers are downloads (issue 38): a provider's
//! `download/<os>/<arch>` (own and the cache's, with its platform), a
//! module's `download` (own and the cache's), a mirror's `<version>.json`
//! (own host, imported and cached; the platform Terraform then picks is not
//! shown to the registry). Versions lists are not. Counted after a
//! successful answer, wherever it came from (made, the answer cache, the
//! pull-through cache), and reported to the registry's sink, which returns
//! at once: counting never fails or delays the answer.

use tfreg_http::registry::Registry;
use tfreg_http::usage::consumer_of;
use tfreg_model::address::{ModuleName, ProviderName};
use tfreg_model::router::ReadRoute;
use tfreg_model::token::Principal;
use tfreg_model::usage::{Download, Package};

pub(crate) fn provider(hostname: &str, p: &ProviderName) -> Package {
    Package::Provider {
        hostname: hostname.to_string(),
        namespace: p.namespace.clone(),
        r#type: p.r#type.clone(),
    }
}

pub(crate) fn module(hostname: &str, m: &ModuleName) -> Package {
    Package::Module {
        hostname: hostname.to_string(),
        namespace: m.namespace.clone(),
        name: m.name.clone(),
        system: m.system.clone(),
    }
}

/// The download `route` is, when answered: what it fetched, by whom; `None`
/// for a route that is no download, and for the operator.
pub(crate) fn download_of(
    registry: &Registry,
    route: &ReadRoute,
    principal: &Principal,
) -> Option<Download> {
    let own = registry.config.hostname.as_str();
    let (package, version, platform) = match route {
        ReadRoute::ProviderDownload {
            provider: p,
            version,
            platform,
        } => (provider(own, p), version, Some(platform)),
        ReadRoute::CacheProviderDownload {
            host,
            provider: p,
            version,
            platform,
        } => (provider(host.as_str(), p), version, Some(platform)),
        ReadRoute::ModuleDownload { module: m, version } => (module(own, m), version, None),
        ReadRoute::CacheModuleDownload {
            host,
            module: m,
            version,
        } => (module(host.as_str(), m), version, None),
        ReadRoute::MirrorVersion {
            hostname,
            provider: p,
            version,
        } => (provider(hostname.as_str(), p), version, None),
        ReadRoute::ProviderVersions { .. }
        | ReadRoute::ModuleVersions { .. }
        | ReadRoute::MirrorIndex { .. }
        | ReadRoute::CacheProviderVersions { .. }
        | ReadRoute::CacheModuleVersions { .. } => return None,
        // Counted where a zip is found (crate::oci::blob): a route by
        // digest names no version.
        ReadRoute::Oci(_) => return None,
    };
    Some(Download {
        package,
        version: version.to_string(),
        platform: platform.map(|p| format!("{}_{}", p.os, p.arch)),
        consumer: consumer_of(principal)?,
        at: registry.now(),
    })
}
