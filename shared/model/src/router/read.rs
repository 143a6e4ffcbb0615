//! The read protocols' routes: provider versions and downloads, module
//! versions and downloads, the network mirror.

use crate::address::{Hostname, ModuleName, Platform, ProviderName};
use crate::error::RouteError;
use crate::router::oci::OciRoute;
use crate::router::segments::host_segment;
use crate::token::Realm;
use crate::upstream::UpstreamHost;
use crate::version::Version;

/// The read endpoints of the provider, module and network mirror protocols.
///
/// Each variant is its own function ([`ReadEndpoint`], derived: one per
/// variant, named in kebab case, `provider-versions`).
#[derive(Debug, Clone, PartialEq, Eq, strum::EnumDiscriminants)]
#[strum_discriminants(
    name(ReadEndpoint),
    vis(pub),
    doc = "Which function serves a read route: one per [`ReadRoute`] variant, its name (kebab case) in logs and the template.",
    derive(Hash, PartialOrd, Ord, strum::VariantArray, strum::IntoStaticStr),
    strum(serialize_all = "kebab-case")
)]
pub enum ReadRoute {
    ProviderVersions {
        provider: ProviderName,
    },
    ProviderDownload {
        provider: ProviderName,
        version: Version,
        platform: Platform,
    },
    ModuleVersions {
        module: ModuleName,
    },
    ModuleDownload {
        module: ModuleName,
        version: Version,
    },
    MirrorIndex {
        hostname: Hostname,
        provider: ProviderName,
    },
    MirrorVersion {
        hostname: Hostname,
        provider: ProviderName,
        version: Version,
    },
    /// `/v1/cache/<host>/providers/<ns>/<type>/versions`: the provider
    /// registry protocol for a configured upstream's providers, reached
    /// through Terraform's `host "<upstream>" { services = {...} }` block.
    CacheProviderVersions {
        host: UpstreamHost,
        provider: ProviderName,
    },
    /// `/v1/cache/<host>/providers/<ns>/<type>/<v>/download/<os>/<arch>`.
    CacheProviderDownload {
        host: UpstreamHost,
        provider: ProviderName,
        version: Version,
        platform: Platform,
    },
    /// `/v1/cache/<host>/modules/<ns>/<name>/<system>/versions`: the module
    /// registry protocol for a configured upstream's modules (`host` block,
    /// `modules.v1`), so module sources stay as users wrote them.
    CacheModuleVersions {
        host: UpstreamHost,
        module: ModuleName,
    },
    /// `/v1/cache/<host>/modules/<ns>/<name>/<system>/<v>/download`.
    CacheModuleDownload {
        host: UpstreamHost,
        module: ModuleName,
        version: Version,
    },
    /// `/v2/...`: the same packages as OCI artifacts (OpenTofu's
    /// `oci_mirror` and `oci://` module sources), one function.
    Oci(OciRoute),
}

impl ReadRoute {
    /// Reads are in their provider's or module's namespace, except reads of
    /// other registries' providers (the mirror's, the cache's).
    pub fn realm(&self, own_host: &Hostname) -> Realm<'_> {
        match self {
            ReadRoute::ProviderVersions { provider }
            | ReadRoute::ProviderDownload { provider, .. } => Realm::Namespace(&provider.namespace),
            ReadRoute::ModuleVersions { module } | ReadRoute::ModuleDownload { module, .. } => {
                Realm::Namespace(&module.namespace)
            }
            ReadRoute::MirrorIndex { hostname, provider }
            | ReadRoute::MirrorVersion {
                hostname, provider, ..
            } => {
                if hostname == own_host {
                    Realm::Namespace(&provider.namespace)
                } else {
                    Realm::Registry
                }
            }
            ReadRoute::CacheProviderVersions { .. }
            | ReadRoute::CacheProviderDownload { .. }
            | ReadRoute::CacheModuleVersions { .. }
            | ReadRoute::CacheModuleDownload { .. } => Realm::Registry,
            ReadRoute::Oci(oci) => oci.realm(own_host),
        }
    }

    pub fn endpoint(&self) -> ReadEndpoint {
        self.into()
    }

    /// The read route of a path's segments after `/v1/` (decoded), if it is
    /// one: `None` for a path of another kind.
    pub fn parse(s: &[&str]) -> Option<Result<ReadRoute, RouteError>> {
        let route = || -> Result<Option<ReadRoute>, RouteError> {
            Ok(Some(match s {
                ["providers", ns, ty, "versions"] => ReadRoute::ProviderVersions {
                    provider: ProviderName::parse(ns, ty)?,
                },
                ["providers", ns, ty, v, "download", os, arch] => ReadRoute::ProviderDownload {
                    provider: ProviderName::parse(ns, ty)?,
                    version: Version::parse(v)?,
                    platform: Platform::parse(os, arch)?,
                },
                ["modules", ns, name, system, "versions"] => ReadRoute::ModuleVersions {
                    module: ModuleName::parse(ns, name, system)?,
                },
                ["modules", ns, name, system, v, "download"] => ReadRoute::ModuleDownload {
                    module: ModuleName::parse(ns, name, system)?,
                    version: Version::parse(v)?,
                },
                ["mirror", host, ns, ty, "index.json"] => ReadRoute::MirrorIndex {
                    hostname: Hostname::parse(host)?,
                    provider: ProviderName::parse(ns, ty)?,
                },
                ["mirror", host, ns, ty, file] if file.ends_with(".json") => {
                    ReadRoute::MirrorVersion {
                        hostname: Hostname::parse(host)?,
                        provider: ProviderName::parse(ns, ty)?,
                        version: Version::parse(&file[..file.len() - ".json".len()])?,
                    }
                }
                ["cache", host, "providers", ns, ty, "versions"] => {
                    ReadRoute::CacheProviderVersions {
                        host: cache_host(host)?,
                        provider: ProviderName::parse(ns, ty)?,
                    }
                }
                ["cache", host, "providers", ns, ty, v, "download", os, arch] => {
                    ReadRoute::CacheProviderDownload {
                        host: cache_host(host)?,
                        provider: ProviderName::parse(ns, ty)?,
                        version: Version::parse(v)?,
                        platform: Platform::parse(os, arch)?,
                    }
                }
                ["cache", host, "modules", ns, name, system, "versions"] => {
                    ReadRoute::CacheModuleVersions {
                        host: cache_host(host)?,
                        module: ModuleName::parse(ns, name, system)?,
                    }
                }
                ["cache", host, "modules", ns, name, system, v, "download"] => {
                    ReadRoute::CacheModuleDownload {
                        host: cache_host(host)?,
                        module: ModuleName::parse(ns, name, system)?,
                        version: Version::parse(v)?,
                    }
                }
                _ => return Ok(None),
            }))
        };
        route().transpose()
    }

    pub fn path(&self) -> String {
        match self {
            ReadRoute::ProviderVersions { provider } => {
                format!("/v1/providers/{provider}/versions")
            }
            ReadRoute::ProviderDownload {
                provider,
                version,
                platform,
            } => format!(
                "/v1/providers/{provider}/{version}/download/{}/{}",
                platform.os, platform.arch
            ),
            ReadRoute::ModuleVersions { module } => format!("/v1/modules/{module}/versions"),
            ReadRoute::ModuleDownload { module, version } => {
                format!("/v1/modules/{module}/{version}/download")
            }
            ReadRoute::MirrorIndex { hostname, provider } => {
                format!(
                    "/v1/mirror/{}/{provider}/index.json",
                    host_segment(hostname)
                )
            }
            ReadRoute::MirrorVersion {
                hostname,
                provider,
                version,
            } => format!(
                "/v1/mirror/{}/{provider}/{version}.json",
                host_segment(hostname)
            ),
            ReadRoute::CacheProviderVersions { host, provider } => format!(
                "/v1/cache/{}/providers/{provider}/versions",
                host_segment(host.hostname())
            ),
            ReadRoute::CacheProviderDownload {
                host,
                provider,
                version,
                platform,
            } => format!(
                "/v1/cache/{}/providers/{provider}/{version}/download/{}/{}",
                host_segment(host.hostname()),
                platform.os,
                platform.arch
            ),
            ReadRoute::CacheModuleVersions { host, module } => format!(
                "/v1/cache/{}/modules/{module}/versions",
                host_segment(host.hostname())
            ),
            ReadRoute::CacheModuleDownload {
                host,
                module,
                version,
            } => format!(
                "/v1/cache/{}/modules/{module}/{version}/download",
                host_segment(host.hostname())
            ),
            ReadRoute::Oci(oci) => oci.path(),
        }
    }

    /// The upstream a cache route reads from (`/v1/cache/<host>/...`).
    pub fn cache_host(&self) -> Option<&UpstreamHost> {
        match self {
            ReadRoute::CacheProviderVersions { host, .. }
            | ReadRoute::CacheProviderDownload { host, .. }
            | ReadRoute::CacheModuleVersions { host, .. }
            | ReadRoute::CacheModuleDownload { host, .. } => Some(host),
            _ => None,
        }
    }
}

/// A cache route's host segment: an upstream's name, else no such route
/// (404, as for a name that is not a configured upstream).
fn cache_host(segment: &str) -> Result<UpstreamHost, RouteError> {
    UpstreamHost::parse(segment)
        .map_err(|_| RouteError::NotFound(format!("{segment:?} is not an upstream registry here")))
}

impl ReadEndpoint {
    /// Its name in logs, the template and the function's log group.
    pub fn name(self) -> &'static str {
        self.into()
    }
}
