//! Who uses what (issue 38): `GET /v1/admin/usage/providers/{ns}/{type}`
//! and `/v1/admin/usage/modules/{ns}/{name}/{system}` answer a package's
//! [`UsageReport`] with its consumers (the route needs an admin of the
//! package's namespace), every version of it listed (those never
//! downloaded with 0) with its lifecycle; and the delete guard: a version
//! downloaded in the last [`GUARD_DAYS`] days is deleted only with
//! `force=true`, else 409 naming its consumers.

use std::collections::BTreeMap;

use http::StatusCode;
use serde::{Deserialize, Serialize};
use tfreg_http::body::{Response, json};
use tfreg_http::{Error, Registry};
use tfreg_model::address::{Hostname, ModuleName, ProviderName};
use tfreg_model::router::{AdminRoute, PublishTarget};
use tfreg_model::text::escaped;
use tfreg_model::token::Principal;
use tfreg_model::usage::{Package, UsageReport, VersionUsage};
use tfreg_model::version::Version;
use tfreg_store::catalog::index::VersionIndex;
use tfreg_store::catalog::{self, Origin, usage};

/// A version downloaded this recently is deleted only with `force`.
pub const GUARD_DAYS: u64 = 30;
/// Most consumers a 409 names (the rest are counted).
const GUARD_NAMED: usize = 20;

/// What the usage API answers: the [`UsageReport`] (its fields at the top
/// level: a client reading a `UsageReport` reads this) and each version's
/// lifecycle.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageAnswer {
    #[serde(flatten)]
    pub report: UsageReport,
    /// By version: its state in the registry's versions index (empty for a
    /// package the registry keeps no index of: a cached one).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub lifecycle: BTreeMap<String, VersionState>,
}

/// A version's lifecycle, as the usage view shows it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VersionState {
    /// The deprecation message, if deprecated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deprecated: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub yanked: bool,
    /// Counted, but no longer in the registry (deleted).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deleted: bool,
}

impl VersionState {
    /// `listed`, `deprecated`, `yanked`, `deprecated, yanked`, `deleted`.
    pub fn describe(&self) -> &'static str {
        match (self.deleted, self.deprecated.is_some(), self.yanked) {
            (true, _, _) => "deleted",
            (false, true, true) => "deprecated, yanked",
            (false, true, false) => "deprecated",
            (false, false, true) => "yanked",
            (false, false, false) => "listed",
        }
    }
}

/// The usage API's query: `version=V`, `host=H`, nothing else.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct UsageQuery {
    pub version: Option<Version>,
    pub host: Option<Hostname>,
}

impl UsageQuery {
    pub fn parse(query: Option<&str>) -> Result<UsageQuery, Error> {
        let mut out = UsageQuery::default();
        for (key, value) in url::form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
            let shown = || escaped(&value.chars().take(80).collect::<String>()).into_owned();
            match &*key {
                "version" if out.version.is_none() => {
                    out.version = Some(
                        Version::parse(&value)
                            .map_err(|e| Error::bad(format!("version {:?}: {e}", shown())))?,
                    );
                }
                "host" if out.host.is_none() => {
                    out.host = Some(
                        Hostname::parse(&value)
                            .map_err(|e| Error::bad(format!("host {:?}: {e}", shown())))?,
                    );
                }
                "version" | "host" => return Err(Error::bad(format!("{key} given twice"))),
                other => {
                    return Err(Error::bad(format!(
                        "unknown parameter {:?}: the usage API takes version and host",
                        escaped(&other.chars().take(40).collect::<String>())
                    )));
                }
            }
        }
        Ok(out)
    }
}

/// The usage package a route and host name.
pub fn package_of(route: &AdminRoute, hostname: &Hostname) -> Option<Package> {
    Some(match route {
        AdminRoute::ProviderUsage { provider } => provider_package(hostname, provider),
        AdminRoute::ModuleUsage { module } => module_package(hostname, module),
        _ => return None,
    })
}

pub fn provider_package(hostname: &Hostname, provider: &ProviderName) -> Package {
    Package::Provider {
        hostname: hostname.to_string(),
        namespace: provider.namespace.clone(),
        r#type: provider.r#type.clone(),
    }
}

pub fn module_package(hostname: &Hostname, module: &ModuleName) -> Package {
    Package::Module {
        hostname: hostname.to_string(),
        namespace: module.namespace.clone(),
        name: module.name.clone(),
        system: module.system.clone(),
    }
}

/// The package a release is of, as its downloads are counted.
pub fn release_package(own: &Hostname, release: &PublishTarget) -> Package {
    match release {
        PublishTarget::Provider { provider, .. } => provider_package(own, provider),
        PublishTarget::Module { module, .. } => module_package(own, module),
        PublishTarget::Mirror {
            hostname, provider, ..
        } => provider_package(hostname, provider),
    }
}

/// May `principal` use `realm` with the admin scope (the operator may)?
fn may(principal: &Principal, realm: tfreg_model::token::Realm<'_>) -> bool {
    match principal {
        Principal::Operator => true,
        Principal::Anonymous => false,
        Principal::Token(record) => record.allows(tfreg_model::token::Scope::Admin, realm),
    }
}

/// Answer a usage route (the pipeline checked the namespace's admin).
pub(crate) async fn handle(
    registry: &Registry,
    principal: &Principal,
    route: AdminRoute,
    query: Option<&str>,
) -> Result<Response, Error> {
    let q = UsageQuery::parse(query)?;
    let own = &registry.config.hostname;
    let foreign = q.host.as_ref().is_some_and(|h| h != own);
    // Another registry's package (mirror-imported, cached) is the whole
    // registry's, as its reads are: the same rule, from the route.
    if let Some(realm) = route.usage_realm(foreign)
        && !may(principal, realm)
    {
        return Err(Error::Forbidden(
            "the usage of another registry's packages needs an admin token over the whole registry"
                .into(),
        ));
    }
    let host = q.host.clone().unwrap_or_else(|| own.clone());
    let package = package_of(&route, &host).ok_or_else(|| Error::internal("not a usage route"))?;
    let index = versions_index(registry, &route, foreign.then_some(&host)).await?;
    let version = q.version.as_ref().map(ToString::to_string);
    let report = usage::report(registry.items.as_ref(), &package, version.as_deref(), true).await?;
    let answer = complete(report, index.as_ref(), version.as_deref());
    if answer.report.versions.is_empty() {
        return Err(Error::not_found(match version {
            Some(v) => format!("{} has no version {v}", package.address()),
            None => format!("{} is not in this registry", package.address()),
        }));
    }
    Ok(json(StatusCode::OK, &answer))
}

/// The versions index of the package, where the registry keeps one: its
/// own providers and modules, and providers imported for the mirror.
async fn versions_index(
    registry: &Registry,
    route: &AdminRoute,
    foreign: Option<&Hostname>,
) -> Result<Option<VersionIndex>, Error> {
    let store = registry.items.as_ref();
    Ok(match (route, foreign) {
        (AdminRoute::ProviderUsage { provider }, None) => {
            Some(catalog::provider_index(store, &Origin::Registry, provider).await?)
        }
        (AdminRoute::ProviderUsage { provider }, Some(host)) => {
            let index =
                catalog::provider_index(store, &Origin::Mirror(host.clone()), provider).await?;
            (!index.is_empty()).then_some(index)
        }
        (AdminRoute::ModuleUsage { module }, None) => {
            Some(catalog::module_index(store, module).await?)
        }
        _ => None,
    })
}

/// The report with every version of `index` (those it has no counts of
/// with 0; only `version`, where asked) and each one's lifecycle; newest
/// version first.
pub fn complete(
    mut report: UsageReport,
    index: Option<&VersionIndex>,
    version: Option<&str>,
) -> UsageAnswer {
    let mut lifecycle = BTreeMap::new();
    if let Some(index) = index.filter(|i| !i.overflow) {
        for v in index.versions() {
            if version.is_some_and(|asked| asked != v.version) {
                continue;
            }
            lifecycle.insert(
                v.version.to_string(),
                VersionState {
                    deprecated: v.deprecated.map(str::to_string),
                    yanked: v.yanked,
                    deleted: false,
                },
            );
            if !report.versions.iter().any(|u| u.version == v.version) {
                report.versions.push(VersionUsage {
                    version: v.version.to_string(),
                    downloads: 0,
                    last_download: None,
                    days: vec![],
                    consumers: vec![],
                });
            }
        }
        for u in &report.versions {
            lifecycle.entry(u.version.clone()).or_insert(VersionState {
                deleted: true,
                ..VersionState::default()
            });
        }
    }
    report
        .versions
        .sort_by_cached_key(|u| std::cmp::Reverse(Version::parse(&u.version).ok()));
    UsageAnswer { report, lifecycle }
}

/// The delete guard: `Ok` when `release` may be deleted (`force`, or no
/// download in the last [`GUARD_DAYS`] days); else 409 naming who
/// downloaded it lately.
pub(crate) async fn guard_delete(
    registry: &Registry,
    release: &PublishTarget,
    force: bool,
) -> Result<(), Error> {
    if force {
        return Ok(());
    }
    let package = release_package(&registry.config.hostname, release);
    let version = release.version().to_string();
    let consumers = usage::version_consumers(registry.items.as_ref(), &package, &version).await?;
    let since = registry.now().saturating_sub(GUARD_DAYS * 86_400);
    let recent: Vec<_> = consumers.iter().filter(|c| c.last_seen >= since).collect();
    if recent.is_empty() {
        return Ok(());
    }
    let downloads: u64 = consumers.iter().map(|c| c.downloads).sum();
    let last = recent[0].last_seen;
    let named: Vec<String> = recent
        .iter()
        .take(GUARD_NAMED)
        .map(|c| {
            format!(
                "{} (last {})",
                escaped(&c.consumer.label),
                tfreg_model::date::ymd(c.last_seen)
            )
        })
        .collect();
    let more = recent.len().saturating_sub(GUARD_NAMED);
    Err(Error::Conflict(format!(
        "{release} was downloaded in the last {GUARD_DAYS} days ({} downloads in all, last {}) by {} consumer{}: {}{}; delete it anyway with force=true (`tfreg delete --force`)",
        downloads,
        tfreg_model::date::ymd(last),
        recent.len(),
        if recent.len() == 1 { "" } else { "s" },
        named.join(", "),
        if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        }
    )))
}

/// `force=true` (delete a version downloaded lately) or `force=false`.
pub(crate) fn force_of(query: Option<&str>) -> Result<bool, Error> {
    let mut force = false;
    for (key, value) in url::form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
        if key == "force" {
            force = match &*value {
                "true" => true,
                "false" => false,
                _ => return Err(Error::bad("force must be true or false")),
            };
        }
    }
    Ok(force)
}

#[cfg(test)]
mod tests;
