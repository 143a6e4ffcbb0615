//! Versions: strict semantic versions, ordered by precedence.

use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

use crate::error::Invalid;

/// A strict semver version (`1.2.3`, `1.2.3-beta.1`). No `v` prefix and no build
/// metadata: `1.0.0+a` and `1.0.0+b` have equal precedence, so allowing them would
/// make two "different" versions indistinguishable to Terraform.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Version(semver::Version);

impl Version {
    /// Parse a version as it appears in a request path or publish command.
    pub fn parse(s: &str) -> Result<Self, Invalid> {
        if let Some(rest) = s.strip_prefix(['v', 'V'])
            && semver::Version::parse(rest).is_ok()
        {
            return Err(Invalid::bad(format!(
                "invalid version {s:?}: write it without the leading \"v\" ({rest})"
            )));
        }
        if s.len() > 128 {
            return Err(Invalid::bad("invalid version: longer than 128 characters"));
        }
        let v = semver::Version::parse(s).map_err(|e| {
            Invalid::bad(format!(
                "invalid version {s:?}: {e}; expected a semantic version such as 1.2.3"
            ))
        })?;
        if !v.build.is_empty() {
            return Err(Invalid::bad(format!(
                "invalid version {s:?}: build metadata (+...) is not allowed"
            )));
        }
        Ok(Version(v))
    }

    /// True for versions with a prerelease part (`1.0.0-rc.1`).
    pub fn is_prerelease(&self) -> bool {
        !self.0.pre.is_empty()
    }

    pub fn major(&self) -> u64 {
        self.0.major
    }

    pub fn minor(&self) -> u64 {
        self.0.minor
    }
}

impl Ord for Version {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.cmp_precedence(&other.0)
    }
}

impl PartialOrd for Version {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl FromStr for Version {
    type Err = Invalid;
    fn from_str(s: &str) -> Result<Self, Invalid> {
        Version::parse(s)
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// Sort version strings by semver precedence, oldest first; unparsable strings
/// (which a correct store never holds) are dropped.
pub fn sort_versions<T>(items: Vec<T>, version_of: impl Fn(&T) -> &str) -> Vec<T> {
    let mut keyed: Vec<(Version, T)> = items
        .into_iter()
        .filter_map(|item| Version::parse(version_of(&item)).ok().map(|v| (v, item)))
        .collect();
    keyed.sort_by(|a, b| a.0.cmp(&b.0));
    keyed.into_iter().map(|(_, item)| item).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v_prefix_is_refused_with_a_hint() {
        let err = Version::parse("v1.2.3").unwrap_err().to_string();
        assert!(err.contains("without the leading \"v\""), "{err}");
        assert!(err.contains("1.2.3"));
    }

    #[test]
    fn malformed_versions_are_refused() {
        for bad in [
            "",
            "1",
            "1.2",
            "1.2.3.4",
            "01.2.3",
            "1.2.3+build",
            "latest",
            "1.2.3 ",
            "../1.2.3",
        ] {
            assert!(Version::parse(bad).is_err(), "{bad:?} must be refused");
        }
    }

    #[test]
    fn sorting_is_by_precedence_not_by_string() {
        let v = vec![
            "1.10.0",
            "1.2.0",
            "1.2.0-rc.1",
            "1.2.0-beta",
            "0.9.0",
            "2.0.0-alpha",
        ];
        let sorted = sort_versions(v, |s| s);
        assert_eq!(
            sorted,
            [
                "0.9.0",
                "1.2.0-beta",
                "1.2.0-rc.1",
                "1.2.0",
                "1.10.0",
                "2.0.0-alpha"
            ]
        );
    }

    #[test]
    fn prereleases_are_not_releases() {
        assert!(Version::parse("1.0.0-rc.1").unwrap().is_prerelease());
        assert!(!Version::parse("1.0.0").unwrap().is_prerelease());
        assert!(Version::parse("1.0.0-rc.1").unwrap() < Version::parse("1.0.0").unwrap());
    }
}
