//! The admin API's routes: one variant per operation, the method part of
//! it, and how `/v1/admin/...` maps to one.

use http::Method;
use strum::VariantArray as _;

use crate::address::{Hostname, ModuleName, ProviderName};
use crate::error::RouteError;
use crate::protocol::ADMIN_V1;
use crate::release::LifecycleAction;
use crate::router::publish::PublishTarget;
use crate::router::segments::{
    DELETE, GET, GET_POST, GET_PUT_DELETE, POST, PUT, host_segment, key_id_segment, not_found,
    token_id,
};
use crate::token::Realm;
use crate::upstream::UpstreamHost;
use crate::version::Version;

/// What the admin API does: one variant per operation (the method is part
/// of it: `GET /v1/admin/tokens` lists, `POST` creates).
#[derive(Debug, Clone, PartialEq, Eq, strum::EnumDiscriminants)]
#[strum_discriminants(
    name(AdminOp),
    vis(pub),
    doc = "The admin API's operations: one per [`AdminRoute`] variant, named in kebab case.",
    derive(Hash, PartialOrd, Ord, strum::VariantArray, strum::IntoStaticStr),
    strum(serialize_all = "kebab-case")
)]
pub enum AdminRoute {
    /// `GET /v1/admin/tokens`.
    ListTokens,
    /// `POST /v1/admin/tokens` with a [`crate::token::NewToken`].
    CreateToken,
    /// `DELETE /v1/admin/tokens/{id}`.
    RevokeToken { id: String },
    /// `GET /v1/admin/keys/{namespace}`.
    ListKeys { namespace: String },
    /// `POST /v1/admin/keys/{namespace}` with ASCII-armored public keys.
    AddKeys { namespace: String },
    /// `DELETE /v1/admin/keys/{namespace}/{key_id}`.
    RemoveKey { namespace: String, key_id: String },
    /// `POST /v1/admin/{release}/{deprecate|undeprecate|yank|unyank}`.
    Lifecycle {
        release: PublishTarget,
        action: LifecycleAction,
    },
    /// `DELETE /v1/admin/{release}`.
    Delete { release: PublishTarget },
    /// `GET /v1/admin/audit[?limit=N]`.
    Audit,
    /// `GET /v1/admin/sso`: every identity-provider group mapping.
    ListMappings,
    /// `POST /v1/admin/sso/map` with a [`crate::sso::GroupMapping`] (the
    /// group is in the body: group paths contain `/`).
    MapGroup,
    /// `POST /v1/admin/sso/unmap` with a [`crate::sso::Unmap`].
    UnmapGroup,
    /// `GET /v1/admin/trust` (every namespace's) or `/v1/admin/trust/{namespace}`.
    ListTrust { namespace: Option<String> },
    /// `POST /v1/admin/trust/{namespace}` with a [`crate::trust::TrustPolicy`].
    AddTrust { namespace: String },
    /// `DELETE /v1/admin/trust/{namespace}/{id}`.
    RemoveTrust { namespace: String, id: String },
    /// `GET /v1/admin/upstreams`: every registry the cache reads from.
    ListUpstreams,
    /// `GET /v1/admin/upstreams/{host}`.
    ShowUpstream { host: UpstreamHost },
    /// `PUT /v1/admin/upstreams/{host}` with [`crate::upstream::UpstreamSettings`].
    SetUpstream { host: UpstreamHost },
    /// `DELETE /v1/admin/upstreams/{host}`.
    RemoveUpstream { host: UpstreamHost },
    /// `GET /v1/admin/cache` or `/v1/admin/cache/{host}`: what the cache holds.
    ListCached { host: Option<UpstreamHost> },
    /// `GET /v1/admin/usage/providers/{namespace}/{type}[?version=V&host=H]`:
    /// a provider's downloads and consumers ([`crate::usage::UsageReport`]).
    ProviderUsage { provider: ProviderName },
    /// `GET /v1/admin/usage/modules/{namespace}/{name}/{system}[?version=V&host=H]`.
    ModuleUsage { module: ModuleName },
}

impl AdminRoute {
    /// One of every admin operation (each form of it: with and without
    /// its optional part, every lifecycle action), on these releases (for
    /// tests of the routes and of who may use them).
    pub fn examples(targets: &[PublishTarget]) -> Vec<AdminRoute> {
        AdminOp::VARIANTS
            .iter()
            .flat_map(|op| op.examples(targets))
            .collect()
    }

    /// The one method of this operation.
    pub fn method(&self) -> &'static [Method] {
        match self {
            AdminRoute::ListTokens
            | AdminRoute::ListKeys { .. }
            | AdminRoute::Audit
            | AdminRoute::ListMappings
            | AdminRoute::ListTrust { .. }
            | AdminRoute::ListUpstreams
            | AdminRoute::ShowUpstream { .. }
            | AdminRoute::ListCached { .. }
            | AdminRoute::ProviderUsage { .. }
            | AdminRoute::ModuleUsage { .. } => GET,
            AdminRoute::SetUpstream { .. } => PUT,
            AdminRoute::CreateToken
            | AdminRoute::AddKeys { .. }
            | AdminRoute::Lifecycle { .. }
            | AdminRoute::MapGroup
            | AdminRoute::UnmapGroup
            | AdminRoute::AddTrust { .. } => POST,
            AdminRoute::RevokeToken { .. }
            | AdminRoute::RemoveKey { .. }
            | AdminRoute::Delete { .. }
            | AdminRoute::RemoveTrust { .. }
            | AdminRoute::RemoveUpstream { .. } => DELETE,
        }
    }

    /// Token management, group mappings (which grant any namespace), every
    /// namespace's trust policies, the upstream registries (which any
    /// namespace may be cached from) and the audit trail are registry-wide;
    /// keys, a namespace's trust policies, releases and the usage of its
    /// packages are in their namespace (the usage of a mirror-imported or
    /// cached package, `?host=` another registry, also needs the registry:
    /// [`AdminRoute::usage_realm`]).
    pub fn realm(&self) -> Realm<'_> {
        match self {
            AdminRoute::ListTokens
            | AdminRoute::CreateToken
            | AdminRoute::RevokeToken { .. }
            | AdminRoute::Audit
            | AdminRoute::ListMappings
            | AdminRoute::MapGroup
            | AdminRoute::UnmapGroup
            | AdminRoute::ListTrust { namespace: None }
            | AdminRoute::ListUpstreams
            | AdminRoute::ShowUpstream { .. }
            | AdminRoute::SetUpstream { .. }
            | AdminRoute::RemoveUpstream { .. }
            | AdminRoute::ListCached { .. } => Realm::Registry,
            AdminRoute::ListKeys { namespace }
            | AdminRoute::AddKeys { namespace }
            | AdminRoute::RemoveKey { namespace, .. }
            | AdminRoute::ListTrust {
                namespace: Some(namespace),
            }
            | AdminRoute::AddTrust { namespace }
            | AdminRoute::RemoveTrust { namespace, .. } => Realm::Namespace(namespace),
            AdminRoute::ProviderUsage { provider } => Realm::Namespace(&provider.namespace),
            AdminRoute::ModuleUsage { module } => Realm::Namespace(&module.namespace),
            AdminRoute::Lifecycle { release, .. } | AdminRoute::Delete { release } => {
                release.realm()
            }
        }
    }

    pub fn path(&self) -> String {
        match self {
            AdminRoute::ListTokens | AdminRoute::CreateToken => format!("{ADMIN_V1}tokens"),
            AdminRoute::RevokeToken { id } => format!("{ADMIN_V1}tokens/{id}"),
            AdminRoute::ListKeys { namespace } | AdminRoute::AddKeys { namespace } => {
                format!("{ADMIN_V1}keys/{namespace}")
            }
            AdminRoute::RemoveKey { namespace, key_id } => {
                format!("{ADMIN_V1}keys/{namespace}/{key_id}")
            }
            AdminRoute::Lifecycle { release, action } => {
                format!("{ADMIN_V1}{}/{}", release.segments(), action.name())
            }
            AdminRoute::Delete { release } => format!("{ADMIN_V1}{}", release.segments()),
            AdminRoute::Audit => format!("{ADMIN_V1}audit"),
            AdminRoute::ListMappings => format!("{ADMIN_V1}sso"),
            AdminRoute::MapGroup => format!("{ADMIN_V1}sso/map"),
            AdminRoute::UnmapGroup => format!("{ADMIN_V1}sso/unmap"),
            AdminRoute::ListTrust { namespace: None } => format!("{ADMIN_V1}trust"),
            AdminRoute::ListTrust {
                namespace: Some(namespace),
            }
            | AdminRoute::AddTrust { namespace } => format!("{ADMIN_V1}trust/{namespace}"),
            AdminRoute::RemoveTrust { namespace, id } => {
                format!("{ADMIN_V1}trust/{namespace}/{id}")
            }
            AdminRoute::ListUpstreams => format!("{ADMIN_V1}upstreams"),
            AdminRoute::ShowUpstream { host }
            | AdminRoute::SetUpstream { host }
            | AdminRoute::RemoveUpstream { host } => {
                format!("{ADMIN_V1}upstreams/{}", host_segment(host.hostname()))
            }
            AdminRoute::ListCached { host: None } => format!("{ADMIN_V1}cache"),
            AdminRoute::ListCached { host: Some(host) } => {
                format!("{ADMIN_V1}cache/{}", host_segment(host.hostname()))
            }
            AdminRoute::ProviderUsage { provider } => {
                format!("{ADMIN_V1}usage/providers/{provider}")
            }
            AdminRoute::ModuleUsage { module } => format!("{ADMIN_V1}usage/modules/{module}"),
        }
    }

    /// What reading usage needs for a package of `host` (`None`: this
    /// registry's own): the route's realm, the package's namespace, for
    /// this registry's packages; the whole registry for another
    /// registry's (mirror-imported or cached), as their reads and releases
    /// are registry-wide ([`crate::router::ReadRoute::realm`],
    /// [`PublishTarget::realm`]). `None` for a route that is not a usage one.
    pub fn usage_realm(&self, foreign_host: bool) -> Option<Realm<'_>> {
        match self {
            AdminRoute::ProviderUsage { .. } | AdminRoute::ModuleUsage { .. } if foreign_host => {
                Some(Realm::Registry)
            }
            AdminRoute::ProviderUsage { .. } | AdminRoute::ModuleUsage { .. } => Some(self.realm()),
            _ => None,
        }
    }
}

/// The admin operation of `method` on `/v1/admin/<rest>`: 405 listing the
/// path's methods when it has no such operation.
pub(crate) fn admin_route(
    method: &Method,
    rest: &[&str],
    path: &str,
) -> Result<AdminRoute, RouteError> {
    use AdminRoute as A;
    let pick = |choices: &[(Method, AdminRoute)], allow: &'static [Method]| {
        choices
            .iter()
            .find(|(m, _)| m == method)
            .map(|(_, r)| r.clone())
            .ok_or_else(|| RouteError::MethodNotAllowed {
                method: method.clone(),
                allow,
            })
    };
    let release = |release: PublishTarget, action: Option<&str>| match action {
        None => pick(&[(Method::DELETE, A::Delete { release })], DELETE),
        Some(a) => match LifecycleAction::parse(a) {
            Some(action) => pick(&[(Method::POST, A::Lifecycle { release, action })], POST),
            None => Err(not_found(path)),
        },
    };
    match rest {
        ["tokens"] => pick(
            &[(Method::GET, A::ListTokens), (Method::POST, A::CreateToken)],
            GET_POST,
        ),
        ["tokens", id] => {
            let id = token_id(id)?;
            pick(&[(Method::DELETE, A::RevokeToken { id })], DELETE)
        }
        ["keys", ns] => {
            let namespace = crate::address::namespace(ns)?;
            pick(
                &[
                    (
                        Method::GET,
                        A::ListKeys {
                            namespace: namespace.clone(),
                        },
                    ),
                    (Method::POST, A::AddKeys { namespace }),
                ],
                GET_POST,
            )
        }
        ["keys", ns, key_id] => {
            let namespace = crate::address::namespace(ns)?;
            let key_id = key_id_segment(key_id)?;
            pick(
                &[(Method::DELETE, A::RemoveKey { namespace, key_id })],
                DELETE,
            )
        }
        ["providers", ns, ty, v, action @ ..] if action.len() <= 1 => release(
            PublishTarget::Provider {
                provider: ProviderName::parse(ns, ty)?,
                version: Version::parse(v)?,
            },
            action.first().copied(),
        ),
        ["modules", ns, name, system, v, action @ ..] if action.len() <= 1 => release(
            PublishTarget::Module {
                module: ModuleName::parse(ns, name, system)?,
                version: Version::parse(v)?,
            },
            action.first().copied(),
        ),
        ["mirror", host, ns, ty, v, action @ ..] if action.len() <= 1 => release(
            PublishTarget::Mirror {
                hostname: Hostname::parse(host)?,
                provider: ProviderName::parse(ns, ty)?,
                version: Version::parse(v)?,
            },
            action.first().copied(),
        ),
        ["audit"] => pick(&[(Method::GET, A::Audit)], GET),
        ["sso"] => pick(&[(Method::GET, A::ListMappings)], GET),
        ["sso", "map"] => pick(&[(Method::POST, A::MapGroup)], POST),
        ["sso", "unmap"] => pick(&[(Method::POST, A::UnmapGroup)], POST),
        ["trust"] => pick(&[(Method::GET, A::ListTrust { namespace: None })], GET),
        ["trust", ns] => {
            let namespace = crate::address::namespace(ns)?;
            pick(
                &[
                    (
                        Method::GET,
                        A::ListTrust {
                            namespace: Some(namespace.clone()),
                        },
                    ),
                    (Method::POST, A::AddTrust { namespace }),
                ],
                GET_POST,
            )
        }
        ["trust", ns, id] => {
            let namespace = crate::address::namespace(ns)?;
            let id = crate::trust::check_policy_id(id)?;
            pick(
                &[(Method::DELETE, A::RemoveTrust { namespace, id })],
                DELETE,
            )
        }
        ["usage", "providers", ns, ty] => {
            let provider = ProviderName::parse(ns, ty)?;
            pick(&[(Method::GET, A::ProviderUsage { provider })], GET)
        }
        ["usage", "modules", ns, name, system] => {
            let module = ModuleName::parse(ns, name, system)?;
            pick(&[(Method::GET, A::ModuleUsage { module })], GET)
        }
        ["upstreams"] => pick(&[(Method::GET, A::ListUpstreams)], GET),
        ["cache"] => pick(&[(Method::GET, A::ListCached { host: None })], GET),
        ["cache", host] => {
            let host = Some(UpstreamHost::parse(host)?);
            pick(&[(Method::GET, A::ListCached { host })], GET)
        }
        ["upstreams", host] => {
            let host = UpstreamHost::parse(host)?;
            pick(
                &[
                    (Method::GET, A::ShowUpstream { host: host.clone() }),
                    (Method::PUT, A::SetUpstream { host: host.clone() }),
                    (Method::DELETE, A::RemoveUpstream { host }),
                ],
                GET_PUT_DELETE,
            )
        }
        _ => Err(not_found(path)),
    }
}

/// The upstream the examples name.
fn example_upstream() -> UpstreamHost {
    UpstreamHost::parse("registry.example.test").expect("a valid host")
}

impl AdminOp {
    /// Its name: the variant's, in kebab case.
    pub fn name(self) -> &'static str {
        self.into()
    }

    /// Every form of this operation (on each of `targets`, for those on a
    /// release): an exhaustive match, so a new operation has examples, and
    /// with them a route test, a template check and an access rule.
    pub fn examples(self, targets: &[PublishTarget]) -> Vec<AdminRoute> {
        let team = || "team".to_string();
        let upstream = example_upstream;
        match self {
            AdminOp::ListTokens => vec![AdminRoute::ListTokens],
            AdminOp::CreateToken => vec![AdminRoute::CreateToken],
            AdminOp::RevokeToken => vec![AdminRoute::RevokeToken {
                id: "0123456789ab".into(),
            }],
            AdminOp::ListKeys => vec![AdminRoute::ListKeys { namespace: team() }],
            AdminOp::AddKeys => vec![AdminRoute::AddKeys { namespace: team() }],
            AdminOp::RemoveKey => vec![AdminRoute::RemoveKey {
                namespace: team(),
                key_id: "0123456789ABCDEF".into(),
            }],
            AdminOp::Lifecycle => targets
                .iter()
                .flat_map(|release| {
                    LifecycleAction::VARIANTS
                        .iter()
                        .map(|&action| AdminRoute::Lifecycle {
                            release: release.clone(),
                            action,
                        })
                })
                .collect(),
            AdminOp::Delete => targets
                .iter()
                .map(|release| AdminRoute::Delete {
                    release: release.clone(),
                })
                .collect(),
            AdminOp::Audit => vec![AdminRoute::Audit],
            AdminOp::ListMappings => vec![AdminRoute::ListMappings],
            AdminOp::MapGroup => vec![AdminRoute::MapGroup],
            AdminOp::UnmapGroup => vec![AdminRoute::UnmapGroup],
            AdminOp::ListTrust => vec![
                AdminRoute::ListTrust { namespace: None },
                AdminRoute::ListTrust {
                    namespace: Some(team()),
                },
            ],
            AdminOp::AddTrust => vec![AdminRoute::AddTrust { namespace: team() }],
            AdminOp::RemoveTrust => vec![AdminRoute::RemoveTrust {
                namespace: team(),
                id: "0123456789ab".into(),
            }],
            AdminOp::ListUpstreams => vec![AdminRoute::ListUpstreams],
            AdminOp::ShowUpstream => vec![AdminRoute::ShowUpstream { host: upstream() }],
            AdminOp::SetUpstream => vec![AdminRoute::SetUpstream { host: upstream() }],
            AdminOp::RemoveUpstream => vec![AdminRoute::RemoveUpstream { host: upstream() }],
            AdminOp::ListCached => vec![
                AdminRoute::ListCached { host: None },
                AdminRoute::ListCached {
                    host: Some(upstream()),
                },
            ],
            AdminOp::ProviderUsage => vec![AdminRoute::ProviderUsage {
                provider: ProviderName::parse("team", "null").expect("a provider"),
            }],
            AdminOp::ModuleUsage => vec![AdminRoute::ModuleUsage {
                module: ModuleName::parse("team", "vpc", "aws").expect("a module"),
            }],
        }
    }
}
