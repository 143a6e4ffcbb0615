//! What a token may do, as grants: each a scope over namespaces (every one,
//! or a list). A token holds one or more, so a person can read everything
//! and publish to `acme` only with one token. A request is allowed when some
//! grant of at least the scope it needs covers its realm ([`allows`]).
//!
//! Grants are kept normalised ([`normalise`]): one per scope, a namespace
//! never listed under a scope below one that already covers it, none that
//! adds nothing. Normalising never changes what the grants allow.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::error::Invalid;
use crate::scope::{MAX_NAMESPACES, Namespaces, Realm, Scope};

/// One grant: `scope` (and the scopes it includes) over `namespaces`.
/// JSON: `{"scope": "publish", "namespaces": ["acme"]}`, every namespace
/// `["*"]` (never an empty list: none and every one are both plausible).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenGrant {
    pub scope: Scope,
    pub namespaces: Namespaces,
}

impl TokenGrant {
    pub fn new(scope: Scope, namespaces: Namespaces) -> Self {
        Self { scope, namespaces }
    }

    /// Does it cover `realm` (whatever its scope)?
    pub fn covers(&self, realm: Realm<'_>) -> bool {
        match realm {
            Realm::Namespace(ns) => self.namespaces.covers(ns),
            Realm::Registry => self.namespaces == Namespaces::All,
            Realm::AnyNamespace => true,
        }
    }

    /// `SCOPE` or `SCOPE:*` (every namespace), `SCOPE:NS[,NS...]`: the
    /// form [`std::fmt::Display`] prints and `tfreg token create --grant`
    /// takes.
    pub fn parse(text: &str) -> Result<Self, Invalid> {
        let (scope, namespaces) = text.split_once(':').unwrap_or((text, "*"));
        let names: Vec<&str> = namespaces.split(',').map(str::trim).collect();
        Ok(Self {
            scope: Scope::parse(scope.trim())?,
            namespaces: Namespaces::parse(&names)?,
        })
    }
}

impl std::fmt::Display for TokenGrant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.namespaces {
            Namespaces::All => write!(f, "{}:*", self.scope),
            Namespaces::Only(names) => write!(f, "{}:{}", self.scope, names.join(",")),
        }
    }
}

/// Grants as one line: `read:*, publish:acme`.
pub fn describe(grants: &[TokenGrant]) -> String {
    let each: Vec<String> = grants.iter().map(ToString::to_string).collect();
    each.join(", ")
}

/// Does some grant of at least `scope` cover `realm`?
pub fn allows(grants: &[TokenGrant], scope: Scope, realm: Realm<'_>) -> bool {
    grants.iter().any(|g| g.scope >= scope && g.covers(realm))
}

/// Why grants are refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GrantsError {
    #[error("a token needs a grant: a scope (read, publish or admin) over namespaces")]
    None,
    #[error(
        "a token may be limited to at most {MAX_NAMESPACES} namespaces, not {0}: leave the limit out for one that covers every namespace"
    )]
    TooManyNamespaces(usize),
}

impl From<GrantsError> for Invalid {
    fn from(e: GrantsError) -> Self {
        Invalid(e.to_string())
    }
}

/// The same rights as `grants`, normalised: at most one grant per scope
/// (lowest scope first), each namespace listed under the highest scope that
/// covers it only, no grant that adds nothing. Refused: no grant at all, more
/// than [`MAX_NAMESPACES`] names in all (a token's record is read on every
/// request it makes).
pub fn normalise(
    grants: impl IntoIterator<Item = TokenGrant>,
) -> Result<Vec<TokenGrant>, GrantsError> {
    // Per scope: every namespace (None), or these.
    let mut by_scope: BTreeMap<Scope, Option<BTreeSet<String>>> = BTreeMap::new();
    for g in grants {
        let entry = by_scope
            .entry(g.scope)
            .or_insert_with(|| Some(BTreeSet::new()));
        match (entry.as_mut(), g.namespaces) {
            (_, Namespaces::All) => *entry = None,
            (Some(names), Namespaces::Only(list)) => names.extend(list),
            (None, Namespaces::Only(_)) => {}
        }
    }
    if by_scope.is_empty() {
        return Err(GrantsError::None);
    }
    // From the highest scope down, what the higher ones cover already.
    let mut above: Option<BTreeSet<String>> = Some(BTreeSet::new());
    let mut out = Vec::new();
    for (scope, names) in by_scope.into_iter().rev() {
        let Some(covered) = above.as_mut() else {
            break; // every namespace, with a higher scope
        };
        match names {
            None => {
                out.push(TokenGrant::new(scope, Namespaces::All));
                above = None;
            }
            Some(names) => {
                let left: Vec<String> = names.difference(covered).cloned().collect();
                if !left.is_empty() {
                    covered.extend(left.iter().cloned());
                    out.push(TokenGrant::new(scope, Namespaces::Only(left)));
                }
            }
        }
    }
    let listed: usize = out
        .iter()
        .map(|g| match &g.namespaces {
            Namespaces::All => 0,
            Namespaces::Only(names) => names.len(),
        })
        .sum();
    if listed > MAX_NAMESPACES {
        return Err(GrantsError::TooManyNamespaces(listed));
    }
    out.reverse();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn g(scope: Scope, names: &[&str]) -> TokenGrant {
        TokenGrant::new(scope, Namespaces::parse(names).unwrap())
    }

    #[test]
    fn some_grant_of_at_least_the_scope_must_cover_the_realm() {
        // Read everything, publish to acme.
        let grants = [g(Scope::Read, &["*"]), g(Scope::Publish, &["acme"])];
        let ns = Realm::Namespace;
        assert!(allows(&grants, Scope::Read, ns("other")));
        assert!(allows(&grants, Scope::Publish, ns("acme")));
        assert!(!allows(&grants, Scope::Publish, ns("other")));
        assert!(!allows(&grants, Scope::Admin, ns("acme")));
        assert!(allows(&grants, Scope::Read, Realm::Registry));
        assert!(!allows(&grants, Scope::Publish, Realm::Registry));
        assert!(allows(&grants, Scope::Publish, Realm::AnyNamespace));
        assert!(!allows(&grants, Scope::Admin, Realm::AnyNamespace));
        assert!(!allows(&[], Scope::Read, Realm::AnyNamespace));
    }

    #[test]
    fn grants_parse_print_and_read_json() {
        assert_eq!(TokenGrant::parse("read").unwrap(), g(Scope::Read, &["*"]));
        assert_eq!(TokenGrant::parse("read:*").unwrap(), g(Scope::Read, &["*"]));
        let p = TokenGrant::parse("publish:Infra, acme").unwrap();
        assert_eq!(p, g(Scope::Publish, &["acme", "infra"]));
        assert_eq!(p.to_string(), "publish:acme,infra");
        assert_eq!(TokenGrant::parse(&p.to_string()).unwrap(), p);
        for bad in [
            "owner",
            "read:",
            "read:a/b",
            "read:*,a",
            ":acme",
            "read:a,,b",
        ] {
            assert!(TokenGrant::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(
            serde_json::to_value(&p).unwrap(),
            json!({"scope": "publish", "namespaces": ["acme", "infra"]})
        );
        for bad in [
            json!({"scope": "read", "namespaces": []}),
            json!({"scope": "read"}),
            json!({"scope": "read", "namespaces": ["*"], "admin": true}),
        ] {
            assert!(
                serde_json::from_value::<TokenGrant>(bad.clone()).is_err(),
                "{bad}"
            );
        }
        let grants = [g(Scope::Read, &["*"]), g(Scope::Publish, &["acme"])];
        assert_eq!(describe(&grants), "read:*, publish:acme");
    }

    #[test]
    fn normalising_merges_and_drops_what_adds_nothing() {
        let got = normalise([
            g(Scope::Publish, &["acme"]),
            g(Scope::Read, &["acme", "infra"]),
            g(Scope::Publish, &["infra", "web"]),
        ])
        .unwrap();
        assert_eq!(got, [g(Scope::Publish, &["acme", "infra", "web"])]);
        let got = normalise([g(Scope::Read, &["*"]), g(Scope::Publish, &["acme"])]).unwrap();
        assert_eq!(got, [g(Scope::Read, &["*"]), g(Scope::Publish, &["acme"])]);
        let got = normalise([g(Scope::Read, &["a", "b"]), g(Scope::Admin, &["*"])]).unwrap();
        assert_eq!(got, [g(Scope::Admin, &["*"])]);
        assert_eq!(normalise([]), Err(GrantsError::None));
        let names: Vec<String> = (0..101).map(|i| format!("ns{i:03}")).collect();
        let many = |scope, range: std::ops::Range<usize>| {
            TokenGrant::new(scope, Namespaces::parse(&names[range]).unwrap())
        };
        assert!(normalise([many(Scope::Read, 0..100)]).is_ok());
        // Counted over every grant, once each.
        assert_eq!(
            normalise([many(Scope::Read, 0..60), many(Scope::Publish, 40..101)]),
            Err(GrantsError::TooManyNamespaces(101))
        );
        assert!(normalise([many(Scope::Read, 0..100), many(Scope::Publish, 0..100)]).is_ok());
        assert!(
            GrantsError::TooManyNamespaces(101)
                .to_string()
                .contains("100 namespaces")
        );
    }

    fn scope() -> impl Strategy<Value = Scope> {
        prop_oneof![Just(Scope::Read), Just(Scope::Publish), Just(Scope::Admin)]
    }

    pub(crate) fn grant_value() -> impl Strategy<Value = TokenGrant> {
        let namespaces = prop_oneof![
            1 => Just(vec!["*".to_string()]),
            4 => proptest::collection::vec("[a-e]", 1..4),
        ];
        (scope(), namespaces).prop_map(|(s, n)| TokenGrant::new(s, Namespaces::parse(&n).unwrap()))
    }

    proptest! {
        #![proptest_config(crate::property_config())]

        /// Normalising keeps exactly what the grants allow, for every scope
        /// and realm; it is one grant per scope at most, and idempotent.
        #[test]
        fn normalising_keeps_the_rights(grants in proptest::collection::vec(grant_value(), 1..6)) {
            let got = normalise(grants.clone()).unwrap();
            for s in [Scope::Read, Scope::Publish, Scope::Admin] {
                for ns in ["a", "b", "c", "d", "e", "f"] {
                    prop_assert_eq!(
                        allows(&got, s, Realm::Namespace(ns)),
                        allows(&grants, s, Realm::Namespace(ns)),
                        "{} on {}", s, ns
                    );
                }
                for realm in [Realm::Registry, Realm::AnyNamespace] {
                    prop_assert_eq!(allows(&got, s, realm), allows(&grants, s, realm));
                }
            }
            let scopes: Vec<Scope> = got.iter().map(|g| g.scope).collect();
            let mut sorted = scopes.clone();
            sorted.sort();
            sorted.dedup();
            prop_assert_eq!(scopes, sorted);
            prop_assert_eq!(normalise(got.clone()).unwrap(), got);
        }
    }
}
