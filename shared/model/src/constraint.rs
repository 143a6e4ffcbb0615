//! Version constraints as Terraform writes them (`>= 1.2, < 2.0`, `~> 1.4`,
//! `!= 1.3.1`, `1.0.0`): what `tfreg sync --constraint` selects with, read
//! the way Terraform's provider installer reads them (apparentlymart's
//! go-versions, "Ruby style"): `~> 1.2` allows 1.2.0 up to but not
//! including 2.0.0, `~> 1.2.3` up to 1.3.0; missing parts are zero; a
//! prerelease matches only a clause naming exactly it.

use std::fmt;

use crate::error::Invalid;
use crate::version::Version;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Eq,
    Ne,
    Gt,
    Ge,
    Lt,
    Le,
    Pessimistic,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Clause {
    op: Op,
    version: Version,
    /// How many of major.minor.patch were written (for `~>`).
    parts: usize,
}

/// Every clause must hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Constraints {
    clauses: Vec<Clause>,
    text: String,
}

impl Constraints {
    pub fn parse(text: &str) -> Result<Self, Invalid> {
        let bad = |why: &str| Invalid::bad(format!("invalid version constraint {text:?}: {why}"));
        let mut clauses = Vec::new();
        for part in text.split(',') {
            let part = part.trim();
            if part.is_empty() {
                return Err(bad("an empty clause"));
            }
            let (op, rest) = [
                ("~>", Op::Pessimistic),
                (">=", Op::Ge),
                ("<=", Op::Le),
                ("!=", Op::Ne),
                (">", Op::Gt),
                ("<", Op::Lt),
                ("=", Op::Eq),
            ]
            .iter()
            .find_map(|(p, op)| part.strip_prefix(p).map(|rest| (*op, rest.trim())))
            .unwrap_or((Op::Eq, part));
            let (core, pre) = match rest.split_once('-') {
                Some((core, pre)) => (core, Some(pre)),
                None => (rest, None),
            };
            let numbers: Vec<&str> = core.split('.').collect();
            if numbers.is_empty()
                || numbers.len() > 3
                || numbers
                    .iter()
                    .any(|n| n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()))
            {
                return Err(bad(&format!(
                    "{rest:?} is not a version such as 1, 1.2 or 1.2.3"
                )));
            }
            let parts = numbers.len();
            let mut full: Vec<&str> = numbers.clone();
            full.resize(3, "0");
            let mut written = full.join(".");
            if let Some(pre) = pre {
                written = format!("{written}-{pre}");
            }
            let version = Version::parse(&written).map_err(|e| bad(&e.0))?;
            clauses.push(Clause { op, version, parts });
        }
        Ok(Constraints {
            clauses,
            text: text.trim().to_string(),
        })
    }

    /// Does `version` meet every clause?
    pub fn matches(&self, version: &Version) -> bool {
        if version.is_prerelease()
            && !self
                .clauses
                .iter()
                .any(|c| c.op == Op::Eq && c.version == *version)
        {
            return false;
        }
        self.clauses.iter().all(|c| c.holds(version))
    }
}

impl Clause {
    fn holds(&self, v: &Version) -> bool {
        let c = &self.version;
        match self.op {
            Op::Eq => v == c,
            Op::Ne => v != c,
            Op::Gt => v > c,
            Op::Ge => v >= c,
            Op::Lt => v < c,
            Op::Le => v <= c,
            Op::Pessimistic => v >= c && *v < self.pessimistic_bound(),
        }
    }

    /// `~> 1.2` → 2.0.0, `~> 1.2.3` → 1.3.0, `~> 1` → 2.0.0.
    fn pessimistic_bound(&self) -> Version {
        let (major, minor) = (self.version.major(), self.version.minor());
        let bound = match self.parts {
            3 => format!("{major}.{}.0", minor + 1),
            _ => format!("{}.0.0", major + 1),
        };
        Version::parse(&bound).expect("a plain version")
    }
}

impl fmt::Display for Constraints {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allows(c: &str, v: &str) -> bool {
        Constraints::parse(c)
            .unwrap()
            .matches(&Version::parse(v).unwrap())
    }

    #[test]
    fn terraform_operators() {
        assert!(allows(">= 1.2, < 2.0", "1.2.0"));
        assert!(allows(">= 1.2, < 2.0", "1.9.9"));
        assert!(!allows(">= 1.2, < 2.0", "2.0.0"));
        assert!(!allows(">= 1.2, < 2.0", "1.1.9"));
        assert!(allows("1.0.0", "1.0.0"));
        assert!(!allows("1.0.0", "1.0.1"));
        assert!(allows("= 1.0", "1.0.0"));
        assert!(!allows("!= 1.3.1", "1.3.1"));
        assert!(allows("!= 1.3.1", "1.3.2"));
        assert!(allows("> 1.0", "1.0.1"));
        assert!(!allows("> 1.0", "1.0.0"));
        assert!(allows("<= 1.0", "1.0.0"));
    }

    #[test]
    fn pessimistic_moves_the_rightmost_part_written() {
        assert!(allows("~> 1.2", "1.2.0"));
        assert!(allows("~> 1.2", "1.99.0"));
        assert!(!allows("~> 1.2", "2.0.0"));
        assert!(!allows("~> 1.2", "1.1.0"));
        assert!(allows("~> 1.2.3", "1.2.9"));
        assert!(!allows("~> 1.2.3", "1.3.0"));
        assert!(!allows("~> 1.2.3", "1.2.2"));
        assert!(allows("~> 1", "1.5.0"));
        assert!(!allows("~> 1", "2.0.0"));
    }

    #[test]
    fn a_prerelease_matches_only_a_clause_naming_it() {
        assert!(!allows(">= 1.0", "2.0.0-rc.1"));
        assert!(allows("2.0.0-rc.1", "2.0.0-rc.1"));
        assert!(allows("= 2.0.0-rc.1, >= 1.0", "2.0.0-rc.1"));
        assert!(!allows("2.0.0-rc.2", "2.0.0-rc.1"));
    }

    #[test]
    fn bad_constraints_are_refused_with_the_text() {
        for bad in ["", ">= ", "~> x", "1.2.3.4", ">= 1.0,", "v1.0", "=> 1.0"] {
            let e = Constraints::parse(bad).unwrap_err();
            assert!(e.0.contains("invalid version constraint"), "{bad}: {}", e.0);
        }
    }
}
