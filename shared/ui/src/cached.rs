//! The page of what the pull-through cache holds (issue 22, `/ui/cache`):
//! each configured upstream (its hostname, mode and what it serves) with
//! what is cached from it, and what is still cached from a host that is no
//! longer an upstream. It shows what `GET /v1/admin/cache` and `GET
//! /v1/admin/upstreams` answer and needs what they need (an admin token
//! over the whole registry: [`UiRoute::scope`], authorised by the pipeline
//! before this runs); of an upstream's settings it shows neither where its
//! credentials are read from nor how it is reached (`connect`).

use std::collections::BTreeMap;

use askama::Template;
use tfreg_http::body::Response;
use tfreg_http::{Error, Registry};
use tfreg_model::cache::{CachedList, CachedModuleInfo, CachedProviderInfo};
use tfreg_model::router::UiRoute;
use tfreg_model::token::Principal;
use tfreg_model::upstream::{Mode, Serves, UpstreamRecord};
use tfreg_model::version::Version;
use tfreg_store::catalog::{cache_listing, upstreams};

use crate::pages::Layout;

#[derive(Template)]
#[template(path = "ui/cache.html")]
pub struct CachePage {
    pub layout: Layout,
    pub upstreams: Vec<UpstreamView>,
}

/// One registry the cache reads from, or read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamView {
    pub hostname: String,
    /// `online` or `sealed`; `None`: no longer an upstream (what was cached
    /// from it stays).
    pub mode: Option<&'static str>,
    /// `providers and modules`, `providers`, `modules` or `nothing`.
    pub serves: &'static str,
    pub providers: Vec<ProviderView>,
    pub modules: Vec<ModuleView>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderView {
    /// `namespace/type`.
    pub address: String,
    /// When its list was last fetched, and when fetching it last failed.
    pub fetched: String,
    pub failed: Option<String>,
    /// Newest first.
    pub versions: Vec<ProviderVersionView>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderVersionView {
    pub version: String,
    /// The key id that signed its SHA256SUMS; `None`: unsigned.
    pub signed_by: Option<String>,
    /// `os_arch` of the archives stored here.
    pub platforms: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModuleView {
    /// `namespace/name/system`.
    pub address: String,
    pub fetched: String,
    pub failed: Option<String>,
    /// Newest first.
    pub versions: Vec<ModuleVersionView>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModuleVersionView {
    pub version: String,
    /// The origin's source, credentials in it hidden ([`shown_source`]).
    pub source: String,
    /// The commit a git source was pinned to.
    pub commit: Option<String>,
    pub stored: bool,
    /// Why it is passed through (not stored).
    pub passed_through: Option<String>,
}

/// The page: the upstreams and the cache's listing, each one read of the
/// store (what `GET /v1/admin/upstreams` and `GET /v1/admin/cache` read).
pub async fn page(registry: &Registry, layout: Layout) -> Result<Response, Error> {
    let items = registry.items.as_ref();
    let configured = upstreams::upstreams(items).await?;
    let cached = cache_listing::cached(items, None).await?;
    crate::page(&CachePage {
        layout,
        upstreams: view(&configured, cached),
    })
}

/// May `principal` open the cache's page (for the link to it)? The same
/// rule the pipeline applies to its route: [`UiRoute::scope`] over
/// [`UiRoute::realm`]; never an anonymous reader (anonymous reads do not
/// reach an admin's page).
pub fn may_see(principal: &Principal) -> bool {
    let route = UiRoute::Cache;
    let Some(realm) = route.realm() else {
        return true;
    };
    match principal {
        Principal::Operator => true,
        Principal::Anonymous => false,
        Principal::Token(record) => record.allows(route.scope(), realm),
    }
}

/// The upstreams as configured (by hostname), each with what is cached
/// from it; then each host something is still cached from that is no
/// longer an upstream.
pub fn view(configured: &[UpstreamRecord], cached: CachedList) -> Vec<UpstreamView> {
    let mut by_host: BTreeMap<String, (Vec<ProviderView>, Vec<ModuleView>)> = BTreeMap::new();
    for p in cached.providers {
        by_host
            .entry(p.host.clone())
            .or_default()
            .0
            .push(provider(p));
    }
    for m in cached.modules {
        by_host.entry(m.host.clone()).or_default().1.push(module(m));
    }
    let mut shown: Vec<UpstreamView> = configured
        .iter()
        .map(|u| {
            let hostname = u.hostname.as_str().to_string();
            let (providers, modules) = by_host.remove(&hostname).unwrap_or_default();
            UpstreamView {
                mode: Some(match u.settings.mode {
                    Mode::Online => "online",
                    Mode::Sealed => "sealed",
                }),
                serves: serves(u.settings.serves),
                hostname,
                providers,
                modules,
            }
        })
        .collect();
    shown.extend(
        by_host
            .into_iter()
            .map(|(hostname, (providers, modules))| UpstreamView {
                hostname,
                mode: None,
                serves: "nothing",
                providers,
                modules,
            }),
    );
    for u in &mut shown {
        u.providers.sort_by(|a, b| a.address.cmp(&b.address));
        u.modules.sort_by(|a, b| a.address.cmp(&b.address));
    }
    shown
}

fn serves(s: Serves) -> &'static str {
    match (s.providers, s.modules) {
        (true, true) => "providers and modules",
        (true, false) => "providers",
        (false, true) => "modules",
        (false, false) => "nothing",
    }
}

fn provider(p: CachedProviderInfo) -> ProviderView {
    let mut versions: Vec<ProviderVersionView> = p
        .versions
        .into_iter()
        .map(|v| ProviderVersionView {
            version: v.version,
            signed_by: v.signed_by,
            platforms: v.stored,
        })
        .collect();
    newest_first(&mut versions, |v| &v.version);
    ProviderView {
        address: format!("{}/{}", p.namespace, p.name),
        fetched: date_time(p.fetched_at),
        failed: p.failed_at.map(date_time),
        versions,
    }
}

fn module(m: CachedModuleInfo) -> ModuleView {
    let mut versions: Vec<ModuleVersionView> = m
        .versions
        .into_iter()
        .map(|v| ModuleVersionView {
            source: shown_source(&v.source),
            version: v.version,
            commit: v.commit,
            stored: v.stored,
            passed_through: v.passed_through,
        })
        .collect();
    newest_first(&mut versions, |v| &v.version);
    ModuleView {
        address: format!("{}/{}/{}", m.namespace, m.name, m.system),
        fetched: date_time(m.fetched_at),
        failed: m.failed_at.map(date_time),
        versions,
    }
}

/// Highest version first (semver order); text that is no version last.
fn newest_first<T>(items: &mut [T], version: impl Fn(&T) -> &str) {
    items.sort_by_cached_key(|item| {
        let text = version(item).to_string();
        (std::cmp::Reverse(Version::parse(&text).ok()), text)
    });
}

/// `2026-11-23 14:05 UTC` of a unix time: a list's age matters in minutes.
pub fn date_time(unix: u64) -> String {
    let (hour, minute) = ((unix % 86_400) / 3_600, (unix % 3_600) / 60);
    format!("{} {hour:02}:{minute:02} UTC", crate::pages::date(unix))
}

/// A module source as every view shows it (the page, `tfreg cache list`,
/// the admin API): credentials in it hidden.
pub use tfreg_model::cache::shown_source;

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use tfreg_model::cache::{CachedModuleVersionInfo, CachedVersionInfo};
    use tfreg_model::grants::TokenGrant;
    use tfreg_model::sso::Namespaces;
    use tfreg_model::token::{Scope, TokenRecord};
    use tfreg_model::upstream::{CredentialRef, UpstreamHost, UpstreamSettings};

    fn upstream(host: &str, mode: Mode, serves: Serves) -> UpstreamRecord {
        let mut settings = UpstreamSettings::new(serves);
        settings.mode = mode;
        settings.credentials = Some(CredentialRef::Env("UPSTREAM_SECRET_VAR".into()));
        UpstreamRecord {
            hostname: UpstreamHost::parse(host).unwrap(),
            settings,
            created_at: 0,
            created_by: "operator".into(),
            updated_at: 0,
            updated_by: "operator".into(),
        }
    }

    fn provider_info(
        host: &str,
        ns: &str,
        versions: &[(&str, Option<&str>, &[&str])],
    ) -> CachedProviderInfo {
        CachedProviderInfo {
            host: host.into(),
            namespace: ns.into(),
            name: "null".into(),
            fetched_at: 1_795_392_000 + 14 * 3600 + 5 * 60 + 7,
            failed_at: None,
            versions: versions
                .iter()
                .map(|(v, key, stored)| CachedVersionInfo {
                    version: v.to_string(),
                    signed_by: key.map(str::to_string),
                    stored: stored.iter().map(|s| s.to_string()).collect(),
                })
                .collect(),
        }
    }

    #[test]
    fn upstreams_in_order_each_with_what_is_cached_from_it() {
        let both = Serves {
            providers: true,
            modules: true,
        };
        let configured = [
            upstream("a.example.test", Mode::Online, both),
            upstream(
                "b.example.test",
                Mode::Sealed,
                Serves {
                    providers: true,
                    modules: false,
                },
            ),
        ];
        let mut failed = provider_info("b.example.test", "hashicorp", &[]);
        failed.failed_at = Some(1_795_392_000 + 3600);
        let list = CachedList {
            providers: vec![
                provider_info(
                    "a.example.test",
                    "hashicorp",
                    &[
                        (
                            "1.10.0",
                            Some("34365D9472D7468F"),
                            &["linux_amd64", "darwin_arm64"],
                        ),
                        ("1.9.0", None, &[]),
                        ("1.10.0-rc.1", Some("34365D9472D7468F"), &["linux_amd64"]),
                    ],
                ),
                failed,
                provider_info(
                    "gone.example.test",
                    "acme",
                    &[("0.1.0", None, &["linux_amd64"])],
                ),
            ],
            modules: vec![CachedModuleInfo {
                host: "a.example.test".into(),
                namespace: "hashicorp".into(),
                name: "consul".into(),
                system: "aws".into(),
                fetched_at: 0,
                failed_at: None,
                versions: vec![
                    CachedModuleVersionInfo {
                        version: "0.1.0".into(),
                        source: "git::https://github.com/hashicorp/consul.git?ref=v0.1.0".into(),
                        commit: Some("0123456789abcdef0123456789abcdef01234567".into()),
                        stored: true,
                        passed_through: None,
                    },
                    CachedModuleVersionInfo {
                        version: "0.2.0".into(),
                        source: "git::https://x-access-token:ghp_secret@github.com/h/c.git".into(),
                        commit: None,
                        stored: false,
                        passed_through: Some("credentials in the URL".into()),
                    },
                ],
            }],
        };
        let shown = view(&configured, list);
        let hosts: Vec<(&str, Option<&str>, &str)> = shown
            .iter()
            .map(|u| (u.hostname.as_str(), u.mode, u.serves))
            .collect();
        assert_eq!(
            hosts,
            [
                ("a.example.test", Some("online"), "providers and modules"),
                ("b.example.test", Some("sealed"), "providers"),
                ("gone.example.test", None, "nothing"),
            ]
        );
        let a = &shown[0];
        assert_eq!(a.providers.len(), 1);
        assert_eq!(a.providers[0].address, "hashicorp/null");
        assert_eq!(a.providers[0].fetched, "2026-11-23 14:05 UTC");
        let versions: Vec<&str> = a.providers[0]
            .versions
            .iter()
            .map(|v| v.version.as_str())
            .collect();
        assert_eq!(
            versions,
            ["1.10.0", "1.10.0-rc.1", "1.9.0"],
            "semver, newest first"
        );
        assert_eq!(
            a.providers[0].versions[0].platforms,
            ["linux_amd64", "darwin_arm64"]
        );
        assert_eq!(a.providers[0].versions[2].signed_by, None);
        assert_eq!(a.modules[0].address, "hashicorp/consul/aws");
        assert_eq!(a.modules[0].versions[0].version, "0.2.0");
        assert_eq!(
            a.modules[0].versions[0].source,
            "git::https://***@github.com/h/c.git"
        );
        assert_eq!(
            a.modules[0].versions[1].source,
            "git::https://github.com/hashicorp/consul.git?ref=v0.1.0"
        );
        assert_eq!(
            shown[1].providers[0].failed.as_deref(),
            Some("2026-11-23 01:00 UTC")
        );
        assert!(shown[1].modules.is_empty());
        assert_eq!(shown[2].providers[0].address, "acme/null");
        assert!(!format!("{shown:?}").contains("UPSTREAM_SECRET_VAR"));
        assert!(
            view(
                &[],
                CachedList {
                    providers: vec![],
                    modules: vec![]
                }
            )
            .is_empty()
        );
    }

    #[test]
    fn credentials_in_a_source_are_hidden_the_rest_kept() {
        for (source, shown) in [
            (
                "git::https://github.com/org/repo.git//modules/vpc?ref=v1.2.0&depth=1",
                "git::https://github.com/org/repo.git//modules/vpc?ref=v1.2.0&depth=1",
            ),
            (
                "https://user:pass@example.com/m.tar.gz",
                "https://***@example.com/m.tar.gz",
            ),
            (
                "git::ssh://git@github.com/org/repo.git?sshkey=LS0tLS1CRUdJTg&ref=main",
                "git::ssh://***@github.com/org/repo.git?sshkey=***&ref=main",
            ),
            (
                "s3::https://s3.amazonaws.com/b/m.zip?aws_access_key_id=AKIA&aws_access_key_secret=s",
                "s3::https://s3.amazonaws.com/b/m.zip?aws_access_key_id=***&aws_access_key_secret=***",
            ),
            (
                "https://example.com/m.zip?archive=zip&X-Amz-Signature=abc",
                "https://example.com/m.zip?archive=zip&X-Amz-Signature=***",
            ),
            ("git@github.com:org/repo.git", "git@github.com:org/repo.git"),
            ("hashicorp/consul/aws", "hashicorp/consul/aws"),
            (
                "https://example.com/a@b/m.zip",
                "https://example.com/a@b/m.zip",
            ),
            ("", ""),
        ] {
            assert_eq!(shown_source(source), shown, "{source}");
        }
    }

    #[test]
    fn only_an_admin_over_the_whole_registry_is_offered_the_page() {
        let token = |scope, namespaces| {
            Principal::Token(Arc::new(TokenRecord {
                id: "0".repeat(12),
                name: "t".into(),
                grants: vec![TokenGrant::new(scope, namespaces)],
                created_at: 0,
                expires_at: None,
                created_by: "operator".into(),
                issued_to: None,
                fill: true,
            }))
        };
        let acme = || Namespaces::parse(&["acme".to_string()]).unwrap();
        for (who, sees) in [
            (Principal::Anonymous, false),
            (Principal::Operator, true),
            (token(Scope::Read, Namespaces::All), false),
            (token(Scope::Publish, Namespaces::All), false),
            (token(Scope::Admin, acme()), false),
            (token(Scope::Admin, Namespaces::All), true),
        ] {
            assert_eq!(may_see(&who), sees, "{who:?}");
        }
    }

    #[test]
    fn times_to_the_minute() {
        assert_eq!(date_time(0), "1970-01-01 00:00 UTC");
        assert_eq!(date_time(1_795_392_000 + 86_399), "2026-11-23 23:59 UTC");
    }
}
