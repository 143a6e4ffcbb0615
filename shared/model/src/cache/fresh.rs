//! How a cached list is answered (plan §6), decided from what is stored,
//! the upstream's settings and the clock, so every case is a unit test
//! with a fixed `now`:
//!
//! | what is cached            | answer                                                        |
//! |---------------------------|---------------------------------------------------------------|
//! | a list within its lifetime | from the cache                                               |
//! | a list past its lifetime   | from the cache, and a refresh started (stale-while-revalidate) |
//! | a list whose refresh failed | from the cache, listing only what the cache can answer for   |
//! | nothing, may fetch         | fetch and wait                                                |
//! | nothing, may not fetch     | 404 "not cached"                                              |
//!
//! A sealed upstream is always answered as degraded: only what is cached.

use std::collections::BTreeMap;

use super::{CachedRelease, OriginList, OriginVersion};
use crate::upstream::{Mode, UpstreamSettings};

/// How to answer a list request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// From the cache. `refresh`: also start fetching the list again.
    /// `degraded`: list only versions the cache can answer for (the origin
    /// failed, or the upstream is sealed): Terraform treats a listed
    /// version it then cannot get as a protocol error.
    Cached { refresh: bool, degraded: bool },
    /// Nothing cached: fetch it and wait.
    Fill,
    /// Nothing cached, and this request may not fetch.
    NotCached,
}

/// Decide how to answer from `list` (what is cached of the origin's list,
/// if anything) for a request that `may_fill` (see [`super::may_fill`]).
pub fn decide(
    list: Option<&OriginList>,
    upstream: &UpstreamSettings,
    may_fill: bool,
    now: u64,
) -> Answer {
    let Some(list) = list else {
        return if may_fill {
            Answer::Fill
        } else {
            Answer::NotCached
        };
    };
    let age = now.saturating_sub(list.fetched_at);
    let stale = age >= u64::from(upstream.metadata_ttl_secs);
    let failing = list.failed_at.is_some_and(|f| f >= list.fetched_at);
    Answer::Cached {
        refresh: stale && may_fill,
        degraded: failing || upstream.mode == Mode::Sealed,
    }
}

/// Is an origin's 404 noted at `missing_at` still to be believed at `now`?
pub fn still_missing(missing_at: u64, negative_ttl_secs: u32, now: u64) -> bool {
    now < missing_at.saturating_add(u64::from(negative_ttl_secs))
}

/// The versions to list: all the origin listed when healthy (any can be
/// fetched on demand); when `degraded`, only those with a verified release
/// and a stored archive, each with only its stored platforms.
pub fn listable(
    list: &OriginList,
    releases: &BTreeMap<String, CachedRelease>,
    degraded: bool,
) -> Vec<OriginVersion> {
    if !degraded {
        return list.versions.clone();
    }
    list.versions
        .iter()
        .filter_map(|v| {
            let release = releases.get(&v.version)?;
            let platforms: Vec<String> = v
                .platforms
                .iter()
                .filter(|p| {
                    release
                        .platforms
                        .get(p.as_str())
                        .is_some_and(|a| a.stored.is_some())
                })
                .cloned()
                .collect();
            (!platforms.is_empty()).then(|| OriginVersion {
                platforms,
                ..v.clone()
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::{CachedArchive, StoredArchive};
    use crate::upstream::Serves;

    fn settings(mode: Mode) -> UpstreamSettings {
        let mut s = UpstreamSettings::new(Serves {
            providers: true,
            modules: false,
        });
        s.mode = mode;
        s.metadata_ttl_secs = 100;
        s
    }

    fn list(fetched_at: u64, failed_at: Option<u64>) -> OriginList {
        OriginList {
            versions: vec![
                version("1.0.0", &["linux_amd64", "darwin_arm64"]),
                version("1.1.0", &["linux_amd64"]),
                version("2.0.0", &["linux_amd64"]),
            ],
            warnings: vec![],
            fetched_at,
            failed_at,
        }
    }

    fn version(v: &str, platforms: &[&str]) -> OriginVersion {
        OriginVersion {
            version: v.into(),
            protocols: vec!["5.0".into()],
            platforms: platforms.iter().map(|p| p.to_string()).collect(),
        }
    }

    #[test]
    fn each_case_of_the_table() {
        let online = settings(Mode::Online);
        let sealed = settings(Mode::Sealed);
        let cached = |refresh, degraded| Answer::Cached { refresh, degraded };
        for (what, l, s, may, now, expected) in [
            (
                "fresh",
                Some(list(1000, None)),
                &online,
                true,
                1099,
                cached(false, false),
            ),
            (
                "stale: refreshed",
                Some(list(1000, None)),
                &online,
                true,
                1100,
                cached(true, false),
            ),
            (
                "stale, may not fetch",
                Some(list(1000, None)),
                &online,
                false,
                5000,
                cached(false, false),
            ),
            (
                "refresh failed",
                Some(list(1000, Some(1200))),
                &online,
                true,
                1250,
                cached(true, true),
            ),
            (
                "failed at the same second",
                Some(list(1000, Some(1000))),
                &online,
                true,
                1001,
                cached(false, true),
            ),
            (
                "sealed",
                Some(list(1000, None)),
                &sealed,
                false,
                1001,
                cached(false, true),
            ),
            ("nothing, may fetch", None, &online, true, 1, Answer::Fill),
            (
                "nothing, may not",
                None,
                &online,
                false,
                1,
                Answer::NotCached,
            ),
            (
                "nothing, sealed",
                None,
                &sealed,
                false,
                1,
                Answer::NotCached,
            ),
        ] {
            assert_eq!(decide(l.as_ref(), s, may, now), expected, "{what}");
        }
    }

    #[test]
    fn a_404_is_believed_for_its_lifetime_only() {
        assert!(still_missing(100, 60, 159));
        assert!(!still_missing(100, 60, 160));
        assert!(
            !still_missing(100, 0, 100),
            "a zero lifetime: never remembered"
        );
        assert!(
            still_missing(u64::MAX - 1, 600, u64::MAX - 1),
            "no overflow"
        );
    }

    #[test]
    fn a_degraded_list_shows_only_what_the_cache_can_answer() {
        let l = list(1000, Some(1200));
        let stored = |size| {
            Some(StoredArchive {
                size,
                h1: None,
                stored_at: 1,
            })
        };
        let release = |v: &str, archives: &[(&str, Option<StoredArchive>)]| CachedRelease {
            version: v.into(),
            protocols: vec!["5.0".into()],
            shasums_sha256: "ab".repeat(32),
            signature_sha256: None,
            signed_by: None,
            key_expired: false,
            signing_keys: "{}".into(),
            platforms: archives
                .iter()
                .map(|(p, s)| {
                    (
                        p.to_string(),
                        CachedArchive {
                            filename: format!("x_{v}_{p}.zip"),
                            sha256: "cd".repeat(32),
                            stored: s.clone(),
                        },
                    )
                })
                .collect(),
            verified_at: 1,
        };
        let releases = BTreeMap::from([
            (
                "1.0.0".to_string(),
                release(
                    "1.0.0",
                    &[("linux_amd64", stored(1)), ("darwin_arm64", None)],
                ),
            ),
            // Verified, but no archive stored: not listed when degraded.
            (
                "1.1.0".to_string(),
                release("1.1.0", &[("linux_amd64", None)]),
            ),
        ]);
        assert_eq!(listable(&l, &releases, false), l.versions, "healthy: all");
        assert_eq!(
            listable(&l, &releases, true),
            [version("1.0.0", &["linux_amd64"])]
        );
    }
}
