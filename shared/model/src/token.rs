//! Tokens as the registry knows them (never the secret itself): scopes,
//! the realm an action applies in, what a route needs, who made a request.
//! Pure data and validation; storing tokens is the store's, checking a
//! request's token the HTTP pipeline's.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::error::Invalid;

/// Prefix of every token, so a leaked one is easy to recognise and scan for.
pub const TOKEN_PREFIX: &str = "tfreg_";
/// The partition holding every token.
pub const TOKENS_PK: &str = "TOKENS";
/// Hex digits of a token's hash that make its public id.
pub const TOKEN_ID_LEN: usize = 12;
/// A token's last use is recorded at most this often.
pub const TOUCH_INTERVAL_SECS: u64 = 3600;
/// How long a process trusts a token it verified, by default.
pub const DEFAULT_TOKEN_CACHE_SECS: u64 = 10;
/// Longest token cache an operator may configure.
pub const MAX_TOKEN_CACHE_SECS: u64 = 300;
/// Longest token name.
pub const MAX_NAME_LEN: usize = 64;
/// Most namespaces one token may be limited to: its record is read on every
/// request it makes (a token for more is one without a namespace limit).
pub const MAX_NAMESPACES: usize = 100;

/// What a token may do. Each scope includes the ones before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// Read providers, modules and the mirror.
    Read,
    /// Read, and publish.
    Publish,
    /// Read, publish, and manage: tokens, signing keys, deprecate, yank,
    /// delete, the audit trail.
    Admin,
}

impl Scope {
    /// Parse `read` / `publish` / `admin`.
    pub fn parse(s: &str) -> Result<Self, Invalid> {
        match s {
            "read" => Ok(Scope::Read),
            "publish" => Ok(Scope::Publish),
            "admin" => Ok(Scope::Admin),
            _ => Err(Invalid::bad(format!(
                "unknown scope {s:?}: use read, publish or admin"
            ))),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Read => "read",
            Scope::Publish => "publish",
            Scope::Admin => "admin",
        }
    }
}

impl std::fmt::Display for Scope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where an action applies: in one namespace, or across the registry
/// (mirrored providers of other registries, token management, the audit
/// trail), which only a token without a namespace limit covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Realm<'a> {
    Namespace(&'a str),
    Registry,
    /// Whatever namespaces the token covers: a list (the web UI's home and
    /// search) that then shows only what [`TokenRecord::covers`] lets it.
    AnyNamespace,
}

impl std::fmt::Display for Realm<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Realm::Namespace(ns) => write!(f, "namespace {ns}"),
            Realm::Registry => f.write_str("the whole registry"),
            Realm::AnyNamespace => f.write_str("any namespace"),
        }
    }
}

/// What a route needs ([`crate::router::Route::access`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access<'a> {
    /// Anyone: discovery, and archives behind the registry's signed URLs.
    Public,
    /// A token with `scope` covering `realm` (reads: none while anonymous
    /// reads are on).
    Token { scope: Scope, realm: Realm<'a> },
}

/// What the store keeps about a token (never the token itself).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenRecord {
    /// Public id: the first hex digits of the token's sha256.
    pub id: String,
    pub name: String,
    pub scopes: Vec<Scope>,
    /// Namespaces the token covers; empty: every namespace.
    #[serde(default)]
    pub namespaces: Vec<String>,
    pub created_at: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<u64>,
    /// Who made it ([`Actor::describe`]).
    pub created_by: String,
    /// The identity-provider account a sign-in issued it to (none: made by
    /// an admin).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issued_to: Option<crate::signin::Subject>,
}

impl TokenRecord {
    /// Does any of its scopes include `scope`?
    pub fn has(&self, scope: Scope) -> bool {
        self.scopes.iter().any(|s| *s >= scope)
    }

    /// Does it cover `realm`?
    pub fn covers(&self, realm: Realm<'_>) -> bool {
        match realm {
            Realm::Namespace(ns) => {
                self.namespaces.is_empty() || self.namespaces.iter().any(|n| n == ns)
            }
            Realm::Registry => self.namespaces.is_empty(),
            Realm::AnyNamespace => true,
        }
    }

    /// Expired at `now`?
    pub fn expired(&self, now: u64) -> bool {
        self.expires_at.is_some_and(|at| at <= now)
    }
}

/// A token as listed: its record and when it was last used.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenInfo {
    #[serde(flatten)]
    pub record: TokenRecord,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_used_at: Option<u64>,
}

/// What a new token should be (validated by [`NewToken::check`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewToken {
    pub name: String,
    pub scopes: Vec<Scope>,
    #[serde(default)]
    pub namespaces: Vec<String>,
    /// Unix seconds; none: never expires.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<u64>,
}

impl NewToken {
    /// Normalise and validate: a name of 1..=64 printable characters (no
    /// control or invisible ones: names show in lists and the audit), at least
    /// one scope, valid namespaces (lowercased, deduplicated, at most
    /// [`MAX_NAMESPACES`]), an expiry in the future.
    pub fn check(mut self, now: u64) -> Result<Self, Invalid> {
        self.name = crate::text::readable("a token's name", &self.name, MAX_NAME_LEN)?;
        self.scopes.sort();
        self.scopes.dedup();
        if self.scopes.is_empty() {
            return Err(Invalid::bad(
                "a token needs a scope: read, publish or admin",
            ));
        }
        self.namespaces = self
            .namespaces
            .iter()
            .map(|ns| crate::address::module_namespace(ns))
            .collect::<Result<_, _>>()?;
        self.namespaces.sort();
        self.namespaces.dedup();
        if self.namespaces.len() > MAX_NAMESPACES {
            return Err(Invalid::bad(format!(
                "a token may be limited to at most {MAX_NAMESPACES} namespaces, not {}: leave the limit out for one that covers every namespace",
                self.namespaces.len()
            )));
        }
        if let Some(at) = self.expires_at
            && at <= now
        {
            return Err(Invalid::bad("the token's expiry is in the past"));
        }
        Ok(self)
    }
}

/// Who made a request.
#[derive(Debug, Clone)]
pub enum Principal {
    /// Nobody identified (discovery, archives, anonymous reads).
    Anonymous,
    /// A holder of this token.
    Token(Arc<TokenRecord>),
    /// Someone with the data directory or the AWS account: the `tfreg` CLI
    /// working on the stores directly (`--data-dir`, `--table`). May do anything.
    Operator,
}

/// Who, as the audit trail names them: never a secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Actor {
    /// `token`, `operator` or `anonymous`.
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_name: Option<String>,
}

impl Actor {
    /// `token ci (3f2a…)`, `operator`, `anonymous`.
    pub fn describe(&self) -> String {
        match (&self.token_name, &self.token_id) {
            (Some(name), Some(id)) => format!("token {name} ({id})"),
            _ => self.kind.clone(),
        }
    }
}

impl Principal {
    pub fn actor(&self) -> Actor {
        match self {
            Principal::Anonymous => Actor {
                kind: "anonymous".into(),
                token_id: None,
                token_name: None,
            },
            Principal::Operator => Actor {
                kind: "operator".into(),
                token_id: None,
                token_name: None,
            },
            Principal::Token(t) => Actor {
                kind: "token".into(),
                token_id: Some(t.id.clone()),
                token_name: Some(t.name.clone()),
            },
        }
    }

    /// Is this someone the registry knows (worth an audit record in the store)?
    pub fn identified(&self) -> bool {
        !matches!(self, Principal::Anonymous)
    }
}

/// The sha256 (hex) a token is stored under: the token itself never is.
pub fn hash_of(token: &str) -> String {
    crate::hashing::sha256_hex(token.as_bytes())
}

/// A token's public id: the first [`TOKEN_ID_LEN`] hex digits of its hash.
pub fn id_of(hash: &str) -> String {
    hash[..TOKEN_ID_LEN.min(hash.len())].to_string()
}

/// The hash a presented token is stored under, if it looks like one of ours.
pub fn presented_hash(token: &str) -> Option<String> {
    (token.starts_with(TOKEN_PREFIX) && token.len() <= 200).then(|| hash_of(token))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn new(scopes: &[Scope], namespaces: &[&str]) -> NewToken {
        NewToken {
            name: "ci".into(),
            scopes: scopes.to_vec(),
            namespaces: namespaces.iter().map(|s| s.to_string()).collect(),
            expires_at: None,
        }
    }

    #[test]
    fn scopes_include_the_lesser_ones_and_namespaces_limit_them() {
        let record = |scopes: &[Scope], namespaces: &[&str]| TokenRecord {
            id: "0".repeat(TOKEN_ID_LEN),
            name: "t".into(),
            scopes: scopes.to_vec(),
            namespaces: namespaces.iter().map(|s| s.to_string()).collect(),
            created_at: 0,
            expires_at: Some(100),
            created_by: "operator".into(),
            issued_to: None,
        };
        let admin = record(&[Scope::Admin], &[]);
        assert!(admin.has(Scope::Read) && admin.has(Scope::Publish) && admin.has(Scope::Admin));
        let reader = record(&[Scope::Read], &["a"]);
        assert!(reader.has(Scope::Read) && !reader.has(Scope::Publish));
        assert!(reader.covers(Realm::Namespace("a")));
        assert!(!reader.covers(Realm::Namespace("b")));
        assert!(!reader.covers(Realm::Registry));
        assert!(admin.covers(Realm::Registry));
        assert!(reader.covers(Realm::AnyNamespace) && admin.covers(Realm::AnyNamespace));
        assert!(!admin.expired(99) && admin.expired(100));
    }

    #[test]
    fn new_tokens_are_checked() {
        let ok = new(&[Scope::Read, Scope::Read], &["b", "A", "a"])
            .check(5)
            .unwrap();
        assert_eq!(ok.scopes, [Scope::Read]);
        assert_eq!(ok.namespaces, ["a", "b"]);
        for bad in [
            NewToken {
                name: " ".into(),
                ..new(&[Scope::Read], &[])
            },
            NewToken {
                name: "ci\u{202e}nimda".into(),
                ..new(&[Scope::Read], &[])
            },
            NewToken {
                name: "a\u{200b}b".into(),
                ..new(&[Scope::Read], &[])
            },
            new(&[], &[]),
            new(&[Scope::Read], &["bad/ns"]),
            NewToken {
                expires_at: Some(5),
                ..new(&[Scope::Read], &[])
            },
        ] {
            assert!(matches!(bad.check(5), Err(Invalid(_))));
        }
    }

    #[test]
    fn a_token_lists_at_most_100_namespaces() {
        let names: Vec<String> = (0..101).map(|i| format!("ns{i:03}")).collect();
        let refs = |n: usize| names[..n].iter().map(String::as_str).collect::<Vec<_>>();
        let ok = new(&[Scope::Read], &refs(100)).check(0).unwrap();
        assert_eq!(ok.namespaces.len(), 100);
        let err = new(&[Scope::Read], &refs(101)).check(0).unwrap_err();
        assert!(
            err.0.contains(&format!("{MAX_NAMESPACES} namespaces")),
            "{err}"
        );
        // Counted once normalised: the same namespace twice is one.
        let mut twice = refs(100);
        twice.push("NS000");
        assert!(new(&[Scope::Read], &twice).check(0).is_ok());
    }
}
