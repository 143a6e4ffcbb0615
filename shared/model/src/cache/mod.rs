//! The pull-through cache's records (issue 22), pure: what is kept of an
//! origin's provider lists and releases once verified ([`OriginList`],
//! [`CachedRelease`]), which requests may make the cache fetch
//! ([`may_fill`]), and the decisions on them: how to answer a list from
//! what is cached ([`fresh::decide`]), and who fetches a missing thing
//! ([`lease`]). The fetching is `tfreg-cache`'s; the keys are
//! `tfreg_store::catalog::schema`'s.

pub mod fresh;
pub mod lease;
pub mod module;
pub use module::shown_source;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::scope::Realm;
use crate::token::{Principal, Scope};
use crate::upstream::{FillBy, Mode, UpstreamRecord};

/// An origin's version list of one provider, as last fetched: what it
/// listed and when, and when fetching it last failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OriginList {
    /// Each listed version with its protocols and platforms, in the
    /// origin's order.
    pub versions: Vec<OriginVersion>,
    /// The origin's `warnings`, passed on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// When it was last fetched (unix seconds).
    pub fetched_at: u64,
    /// When fetching it last failed (a timeout, a 5xx), if after `fetched_at`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_at: Option<u64>,
}

/// One version as the origin lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OriginVersion {
    pub version: String,
    #[serde(default)]
    pub protocols: Vec<String>,
    /// `os_arch`.
    #[serde(default)]
    pub platforms: Vec<String>,
}

/// A provider the cache holds, as `tfreg cache list` shows it: where it
/// comes from, when its list was last fetched, and each cached version with
/// the platforms whose archives are stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CachedProviderInfo {
    pub host: String,
    pub namespace: String,
    pub name: String,
    pub fetched_at: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_at: Option<u64>,
    #[serde(default)]
    pub versions: Vec<CachedVersionInfo>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CachedVersionInfo {
    pub version: String,
    /// The key that signed its SHA256SUMS (none: unsigned).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signed_by: Option<String>,
    /// Platforms whose archives are stored.
    pub stored: Vec<String>,
}

/// A module the cache holds, as `tfreg cache list` shows it: where it
/// comes from, when its list was last fetched, and each resolved version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CachedModuleInfo {
    pub host: String,
    pub namespace: String,
    pub name: String,
    pub system: String,
    pub fetched_at: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_at: Option<u64>,
    #[serde(default)]
    pub versions: Vec<CachedModuleVersionInfo>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CachedModuleVersionInfo {
    pub version: String,
    /// Where it came from: the origin's source as it answered.
    pub source: String,
    /// The commit a git source was pinned to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    /// Stored here (else passed through: why).
    pub stored: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub passed_through: Option<String>,
}

/// `GET /v1/admin/cache[/<host>]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CachedList {
    pub providers: Vec<CachedProviderInfo>,
    #[serde(default)]
    pub modules: Vec<CachedModuleInfo>,
}

/// A provider release the cache verified: SHA256SUMS and its signature
/// checked with the origin's keys, every platform's hash from it. Archives
/// are added as they are fetched (`stored`), each checked against its line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CachedRelease {
    pub version: String,
    pub protocols: Vec<String>,
    /// sha256 (hex) of the origin's SHA256SUMS: never changes once stored
    /// (kept as `SHA256SUMS` under that content's key).
    pub shasums_sha256: String,
    /// sha256 (hex) of the origin's signature of it, kept as
    /// `SHA256SUMS.sig` under that content's key (none: unsigned).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature_sha256: Option<String>,
    /// The key that signed SHA256SUMS (none: accepted unsigned, on its
    /// checksums only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signed_by: Option<String>,
    /// That key had expired by the fill (accepted as Terraform accepts it).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub key_expired: bool,
    /// The origin's `signing_keys` object, byte for byte (passed to
    /// clients, never re-signed).
    pub signing_keys: String,
    /// `os_arch` → that platform's archive.
    pub platforms: BTreeMap<String, CachedArchive>,
    pub verified_at: u64,
}

/// One platform's archive of a cached release.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CachedArchive {
    pub filename: String,
    /// Its SHA256SUMS line (hex): the `zh:` hash, and what its bytes must hash to.
    pub sha256: String,
    /// Once stored: its size, and its `h1:` hash when its zip could be read
    /// within the limits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stored: Option<StoredArchive>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredArchive {
    pub size: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub h1: Option<String>,
    pub stored_at: u64,
}

impl CachedRelease {
    /// Terraform's lock-file hashes of one platform's archive: `zh:` from
    /// SHA256SUMS, and `h1:` once the archive is stored.
    pub fn hashes(&self, platform: &str) -> Vec<String> {
        let Some(a) = self.platforms.get(platform) else {
            return Vec::new();
        };
        let mut hashes = Vec::new();
        if let Some(h1) = a.stored.as_ref().and_then(|s| s.h1.as_ref()) {
            hashes.push(h1.clone());
        }
        hashes.push(format!("zh:{}", a.sha256));
        hashes
    }

    /// Is any archive of it stored (so a degraded list may show it)?
    pub fn any_stored(&self) -> bool {
        self.platforms.values().any(|a| a.stored.is_some())
    }
}

/// May `principal`'s request make the cache fetch from `upstream`? Never
/// a sealed upstream, never anonymous; the operator, tokens made with
/// `--fill`, and admin tokens of the whole registry always; otherwise as
/// the upstream's `fill_by` says, for a token that reads the whole
/// registry. A token limited to some namespaces (which the upstream admin
/// routes refuse) fills only with the `--fill` right (issue 35).
pub fn may_fill(principal: &Principal, upstream: &UpstreamRecord) -> bool {
    if upstream.settings.mode == Mode::Sealed {
        return false;
    }
    match principal {
        Principal::Anonymous => false,
        Principal::Operator => true,
        Principal::Token(t) => {
            let whole = |scope| t.allows(scope, Realm::Registry);
            t.fill
                || whole(Scope::Admin)
                || (upstream.settings.fill_by == FillBy::AnyToken && whole(Scope::Read))
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::grants::TokenGrant;
    use crate::sso::Namespaces;
    use crate::token::TokenRecord;
    use crate::upstream::{Serves, UpstreamHost, UpstreamSettings};

    fn upstream(mode: Mode, fill_by: FillBy) -> UpstreamRecord {
        let mut settings = UpstreamSettings::new(Serves {
            providers: true,
            modules: false,
        });
        settings.mode = mode;
        settings.fill_by = fill_by;
        UpstreamRecord {
            hostname: UpstreamHost::parse("registry.example.test").unwrap(),
            settings,
            created_at: 0,
            created_by: "operator".into(),
            updated_at: 0,
            updated_by: "operator".into(),
        }
    }

    fn token(scope: Scope, fill: bool) -> Principal {
        token_in(scope, Namespaces::All, fill)
    }

    fn token_in(scope: Scope, namespaces: Namespaces, fill: bool) -> Principal {
        Principal::Token(Arc::new(TokenRecord {
            id: "0".repeat(12),
            name: "t".into(),
            grants: vec![TokenGrant::new(scope, namespaces)],
            created_at: 0,
            expires_at: None,
            created_by: "operator".into(),
            issued_to: None,
            fill,
        }))
    }

    fn acme() -> Namespaces {
        Namespaces::parse(&["acme"]).unwrap()
    }

    #[test]
    fn who_may_make_the_cache_fetch() {
        let marked = upstream(Mode::Online, FillBy::MarkedTokens);
        let any = upstream(Mode::Online, FillBy::AnyToken);
        let sealed = upstream(Mode::Sealed, FillBy::AnyToken);
        for (who, on_marked, on_any) in [
            (Principal::Anonymous, false, false),
            (token(Scope::Read, false), false, true),
            (token(Scope::Publish, false), false, true),
            (token(Scope::Read, true), true, true),
            (token(Scope::Admin, false), true, true),
            (Principal::Operator, true, true),
            // Limited to a namespace: only the explicit right fills.
            (token_in(Scope::Admin, acme(), false), false, false),
            (token_in(Scope::Read, acme(), false), false, false),
            (token_in(Scope::Publish, acme(), false), false, false),
            (token_in(Scope::Read, acme(), true), true, true),
        ] {
            assert_eq!(may_fill(&who, &marked), on_marked, "{who:?}");
            assert_eq!(may_fill(&who, &any), on_any, "{who:?}");
            assert!(!may_fill(&who, &sealed), "sealed never fetches: {who:?}");
        }
    }

    #[test]
    fn hashes_are_zh_from_the_sums_and_h1_once_stored() {
        let mut release = CachedRelease {
            version: "1.0.0".into(),
            protocols: vec!["5.0".into()],
            shasums_sha256: "ab".repeat(32),
            signature_sha256: None,
            signed_by: Some("0123456789ABCDEF".into()),
            key_expired: false,
            signing_keys: "{}".into(),
            platforms: BTreeMap::from([(
                "linux_amd64".to_string(),
                CachedArchive {
                    filename: "p_1.0.0_linux_amd64.zip".into(),
                    sha256: "cd".repeat(32),
                    stored: None,
                },
            )]),
            verified_at: 1,
        };
        assert_eq!(
            release.hashes("linux_amd64"),
            [format!("zh:{}", "cd".repeat(32))]
        );
        assert!(!release.any_stored());
        assert!(release.hashes("darwin_arm64").is_empty());
        release.platforms.get_mut("linux_amd64").unwrap().stored = Some(StoredArchive {
            size: 10,
            h1: Some("h1:abc=".into()),
            stored_at: 2,
        });
        assert_eq!(
            release.hashes("linux_amd64"),
            ["h1:abc=".to_string(), format!("zh:{}", "cd".repeat(32))]
        );
        assert!(release.any_stored());
    }
}
