//! The bottom of what a token may do: its [`Scope`]s, the [`Realm`] an
//! action applies in, and [`Namespaces`] (every one, or a list). Tokens
//! ([`crate::token`]), their grants ([`crate::grants`]) and group mappings
//! ([`crate::sso`]) are built on these.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::error::Invalid;

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

/// Why a list of namespaces is refused (the messages are a group mapping's
/// and a grant's alike).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NamespacesError {
    #[error("a group mapping needs namespaces: names, or [\"*\"] for every namespace")]
    NoNamespaces,
    #[error("\"*\" already means every namespace: give it alone")]
    StarWithNames,
    #[error("at most {MAX_NAMESPACES} namespaces, not {0}: give [\"*\"] for every namespace")]
    TooManyNamespaces(usize),
    #[error(transparent)]
    Namespace(#[from] Invalid),
}

/// The namespaces a mapping (or a grant) covers: every one (`["*"]` in
/// JSON), or a list of 1 to [`MAX_NAMESPACES`] names, validated as a token's
/// are (lowercase, sorted, no duplicates).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "Vec<String>", into = "Vec<String>")]
pub enum Namespaces {
    All,
    Only(Vec<String>),
}

impl Namespaces {
    /// `["*"]` for every namespace, else the names. Refused: an empty list
    /// (none and every one are both plausible readings), `*` among names,
    /// an invalid name, more than [`MAX_NAMESPACES`] names.
    pub fn parse(names: &[impl AsRef<str>]) -> Result<Self, NamespacesError> {
        if names.is_empty() {
            return Err(NamespacesError::NoNamespaces);
        }
        let stars = names.iter().filter(|n| n.as_ref() == "*").count();
        if stars == names.len() {
            return Ok(Namespaces::All);
        }
        if stars > 0 {
            return Err(NamespacesError::StarWithNames);
        }
        let set = names
            .iter()
            .map(|n| crate::address::module_namespace(n.as_ref()))
            .collect::<Result<BTreeSet<_>, _>>()?;
        if set.len() > MAX_NAMESPACES {
            return Err(NamespacesError::TooManyNamespaces(set.len()));
        }
        Ok(Namespaces::Only(set.into_iter().collect()))
    }

    /// Does it cover `namespace` (lowercase)?
    pub fn covers(&self, namespace: &str) -> bool {
        match self {
            Namespaces::All => true,
            Namespaces::Only(names) => names.iter().any(|n| n == namespace),
        }
    }

    /// As a token records it ([`crate::token::TokenRecord::namespaces`]):
    /// empty for every namespace.
    pub fn for_token(&self) -> Vec<String> {
        match self {
            Namespaces::All => Vec::new(),
            Namespaces::Only(names) => names.clone(),
        }
    }
}

impl TryFrom<Vec<String>> for Namespaces {
    type Error = NamespacesError;
    fn try_from(names: Vec<String>) -> Result<Self, NamespacesError> {
        Namespaces::parse(&names)
    }
}

impl From<Namespaces> for Vec<String> {
    fn from(n: Namespaces) -> Self {
        match n {
            Namespaces::All => vec!["*".to_string()],
            Namespaces::Only(names) => names,
        }
    }
}

impl From<NamespacesError> for Invalid {
    fn from(e: NamespacesError) -> Self {
        match e {
            NamespacesError::Namespace(e) => e,
            other => Invalid(other.to_string()),
        }
    }
}
