//! What a person's groups give after signing in (issue 21): registry data
//! an admin manages (CLI and admin API, audited), one [`GroupMapping`] per
//! identity-provider group, and [`grant`], the grants (scope over
//! namespaces, one per scope) they add up to. No matching mapping, no token. The ID token
//! itself is checked first ([`crate::oidc`]); CI jobs are trusted through
//! [`crate::trust`] instead.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::error::Invalid;
use crate::grants::{GrantsError, TokenGrant, normalise};
use crate::scope::MAX_NAMESPACES;
use crate::token::Scope;

/// Longest group name or id a mapping names.
pub const MAX_GROUP_CHARS: usize = 256;

pub use crate::scope::{Namespaces, NamespacesError};

/// Longest name of the identity provider on the sign-in page.
pub const MAX_DISPLAY_NAME_CHARS: usize = 64;

/// A display name that is not 1 to [`MAX_DISPLAY_NAME_CHARS`] printable
/// characters.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid identity provider display name {0:?}: 1 to {MAX_DISPLAY_NAME_CHARS} printable characters"
)]
pub struct BadDisplayName(pub String);

/// What the sign-in page calls the identity provider ("Sign in with
/// NAME"): `configured` where given (checked), else the issuer's host
/// (`https://acme.okta.com/oauth2/default`: `acme.okta.com`).
pub fn display_name(issuer: &str, configured: Option<&str>) -> Result<String, BadDisplayName> {
    if let Some(name) = configured {
        if !crate::text::verbatim(name, MAX_DISPLAY_NAME_CHARS) {
            return Err(BadDisplayName(name.to_string()));
        }
        return Ok(name.to_string());
    }
    Ok(url::Url::parse(issuer)
        .ok()
        .and_then(|u| u.host_str().map(str::to_string))
        .unwrap_or_else(|| issuer.to_string()))
}

/// Why a group mapping is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MappingError {
    #[error("a group mapping needs a group: the name or id the identity provider sends")]
    NoGroup,
    #[error("invalid group {0:?}: up to {MAX_GROUP_CHARS} printable characters")]
    BadGroup(String),
    #[error(transparent)]
    Namespaces(#[from] NamespacesError),
}

impl From<MappingError> for Invalid {
    fn from(e: MappingError) -> Self {
        Invalid(e.to_string())
    }
}

/// What members of one identity-provider group may do: `scope` over
/// `namespaces`. Registry data an admin manages; one per group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "RawMapping")]
pub struct GroupMapping {
    group: String,
    scope: Scope,
    namespaces: Namespaces,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMapping {
    group: String,
    scope: Scope,
    namespaces: Vec<String>,
}

impl GroupMapping {
    /// A mapping for `group`, compared byte for byte with the groups claim.
    pub fn new(
        group: &str,
        scope: Scope,
        namespaces: &[impl AsRef<str>],
    ) -> Result<Self, MappingError> {
        Ok(Self {
            group: check_group(group)?.to_string(),
            scope,
            namespaces: Namespaces::parse(namespaces)?,
        })
    }

    pub fn group(&self) -> &str {
        &self.group
    }

    pub fn scope(&self) -> Scope {
        self.scope
    }

    pub fn namespaces(&self) -> &Namespaces {
        &self.namespaces
    }
}

/// A group as a mapping names it (and as `tfreg sso unmap` gives it):
/// 1 to [`MAX_GROUP_CHARS`] printable characters, kept byte for byte
/// (Keycloak's group paths contain `/`).
pub fn check_group(group: &str) -> Result<&str, MappingError> {
    if group.is_empty() {
        return Err(MappingError::NoGroup);
    }
    if !crate::text::verbatim(group, MAX_GROUP_CHARS) {
        return Err(MappingError::BadGroup(group.to_string()));
    }
    Ok(group)
}

/// The body of `POST /v1/admin/sso/unmap`: the group whose mapping goes,
/// validated as [`check_group`] does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "RawUnmap")]
pub struct Unmap {
    pub group: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawUnmap {
    group: String,
}

impl TryFrom<RawUnmap> for Unmap {
    type Error = MappingError;
    fn try_from(raw: RawUnmap) -> Result<Self, MappingError> {
        check_group(&raw.group)?;
        Ok(Unmap { group: raw.group })
    }
}

impl TryFrom<RawMapping> for GroupMapping {
    type Error = MappingError;
    fn try_from(raw: RawMapping) -> Result<Self, MappingError> {
        GroupMapping::new(&raw.group, raw.scope, &raw.namespaces)
    }
}

/// What a person's groups give: one token's grants, and the groups whose
/// mappings gave them (for the audit note).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Grant {
    pub grants: Vec<TokenGrant>,
    pub groups: Vec<String>,
}

/// Why a person gets no token (deny by default): a page says which.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GrantError {
    #[error("none of your groups is given access to this registry: ask its admins")]
    NoMatch,
    #[error("your groups give {0} namespaces, more than one token covers ({MAX_NAMESPACES})")]
    TooManyNamespaces(usize),
}

/// What `groups` (the ID token's groups claim) get from `mappings`: every
/// matching mapping's scope over its namespaces, as one token's grants
/// ([`crate::grants`], normalised), so "read everywhere" and "publish on
/// acme" give exactly that (never "publish everywhere"), and `admin` only
/// ever comes from a mapping that says `admin`. No matching mapping:
/// [`GrantError::NoMatch`]. Grants over more than [`MAX_NAMESPACES`] names
/// in all (each mapping is within it) are refused, never cut short.
pub fn grant(mappings: &[GroupMapping], groups: &[impl AsRef<str>]) -> Result<Grant, GrantError> {
    let matching: Vec<&GroupMapping> = mappings
        .iter()
        .filter(|m| groups.iter().any(|g| g.as_ref() == m.group))
        .collect();
    let grants = normalise(
        matching
            .iter()
            .map(|m| TokenGrant::new(m.scope, m.namespaces.clone())),
    )
    .map_err(|e| match e {
        GrantsError::None => GrantError::NoMatch,
        GrantsError::TooManyNamespaces(n) => GrantError::TooManyNamespaces(n),
    })?;
    let from: BTreeSet<String> = matching.iter().map(|m| m.group.clone()).collect();
    Ok(Grant {
        grants,
        groups: from.into_iter().collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn mapping(group: &str, scope: Scope, namespaces: &[&str]) -> GroupMapping {
        GroupMapping::new(group, scope, namespaces).unwrap()
    }

    #[test]
    fn the_provider_is_named_as_configured_or_by_its_issuer_s_host() {
        assert_eq!(
            display_name("https://acme.okta.com/oauth2/default", None).as_deref(),
            Ok("acme.okta.com")
        );
        assert_eq!(
            display_name("https://127.0.0.1:8443/", None).as_deref(),
            Ok("127.0.0.1")
        );
        assert_eq!(
            display_name(
                "https://login.microsoftonline.com/t/v2.0",
                Some("Acme Entra ID")
            )
            .as_deref(),
            Ok("Acme Entra ID")
        );
        let long = "n".repeat(MAX_DISPLAY_NAME_CHARS + 1);
        for bad in ["", " Okta", "a\nb", long.as_str()] {
            assert_eq!(
                display_name("https://idp.test", Some(bad)),
                Err(BadDisplayName(bad.into()))
            );
        }
        assert!(
            BadDisplayName("x".into())
                .to_string()
                .contains("1 to 64 printable characters")
        );
    }

    #[test]
    fn an_unmap_names_a_valid_group() {
        let unmap: Unmap = serde_json::from_value(json!({"group": "/acme/platform"})).unwrap();
        assert_eq!(unmap.group, "/acme/platform");
        for (bad, says) in [
            (json!({"group": ""}), "needs a group"),
            (json!({"group": "a\nb"}), "invalid group"),
            (
                json!({"group": "x".repeat(MAX_GROUP_CHARS + 1)}),
                "invalid group",
            ),
            (json!({"group": "a", "scope": "read"}), "unknown field"),
            (json!({}), "missing field"),
        ] {
            let err = serde_json::from_value::<Unmap>(bad.clone()).unwrap_err();
            assert!(err.to_string().contains(says), "{bad}: {err}");
        }
    }

    #[test]
    fn namespaces_are_every_one_or_a_valid_list() {
        assert_eq!(Namespaces::parse(&["*"]), Ok(Namespaces::All));
        assert_eq!(Namespaces::parse(&["*", "*"]), Ok(Namespaces::All));
        let list = Namespaces::parse(&["B", "a", "b", "Team_X"]).unwrap();
        assert_eq!(
            list,
            Namespaces::Only(vec!["a".into(), "b".into(), "team_x".into()])
        );
        assert!(list.covers("team_x") && !list.covers("c") && !list.covers("B"));
        assert!(Namespaces::All.covers("anything"));
        assert_eq!(list.for_token(), ["a", "b", "team_x"]);
        assert!(Namespaces::All.for_token().is_empty());
        assert_eq!(
            Namespaces::parse(&[] as &[&str]),
            Err(NamespacesError::NoNamespaces)
        );
        assert_eq!(
            Namespaces::parse(&["*", "a"]),
            Err(NamespacesError::StarWithNames)
        );
        assert!(matches!(
            Namespaces::parse(&["bad/ns"]),
            Err(NamespacesError::Namespace(_))
        ));
        assert!(matches!(
            Namespaces::parse(&["a*"]),
            Err(NamespacesError::Namespace(_))
        ));
        let names: Vec<String> = (0..101).map(|i| format!("ns{i:03}")).collect();
        assert!(Namespaces::parse(&names[..100]).is_ok());
        assert_eq!(
            Namespaces::parse(&names),
            Err(NamespacesError::TooManyNamespaces(101))
        );
        // Counted once normalised.
        let mut twice = names[..100].to_vec();
        twice.push("NS000".into());
        assert!(Namespaces::parse(&twice).is_ok());
    }

    #[test]
    fn group_mappings_are_checked() {
        let m = mapping("acme-publishers", Scope::Publish, &["Acme"]);
        assert_eq!(m.group(), "acme-publishers");
        assert_eq!(m.scope(), Scope::Publish);
        assert_eq!(m.namespaces(), &Namespaces::Only(vec!["acme".into()]));
        // Ids and paths as providers send them are fine.
        for group in [
            "3f2a7c1e-5b6d-4e8f-9a0b-1c2d3e4f5a6b",
            "/org/team",
            "Registry Admins",
        ] {
            assert!(GroupMapping::new(group, Scope::Read, &["*"]).is_ok());
        }
        assert_eq!(
            GroupMapping::new("", Scope::Read, &["*"]),
            Err(MappingError::NoGroup)
        );
        let long = "g".repeat(MAX_GROUP_CHARS + 1);
        for bad in [" admins", "admins ", "a\nb", "a\u{202e}b", long.as_str()] {
            assert!(
                matches!(
                    GroupMapping::new(bad, Scope::Read, &["*"]),
                    Err(MappingError::BadGroup(_))
                ),
                "{bad:?}"
            );
        }
        assert!(GroupMapping::new(&"g".repeat(MAX_GROUP_CHARS), Scope::Read, &["*"]).is_ok());
    }

    #[test]
    fn group_mappings_read_and_write_json() {
        let m: GroupMapping = serde_json::from_value(json!({
            "group": "acme-publishers", "scope": "publish", "namespaces": ["acme", "Infra"]
        }))
        .unwrap();
        assert_eq!(
            m,
            mapping("acme-publishers", Scope::Publish, &["acme", "infra"])
        );
        let back = serde_json::to_value(&m).unwrap();
        assert_eq!(
            back,
            json!({"group": "acme-publishers", "scope": "publish", "namespaces": ["acme", "infra"]})
        );
        assert_eq!(serde_json::from_value::<GroupMapping>(back).unwrap(), m);
        let all = mapping("ops", Scope::Admin, &["*"]);
        assert_eq!(
            serde_json::to_value(&all).unwrap()["namespaces"],
            json!(["*"])
        );
        for (bad, says) in [
            (
                json!({"group": "g", "scope": "owner", "namespaces": ["*"]}),
                "unknown variant",
            ),
            (json!({"group": "g", "scope": "read"}), "missing field"),
            (
                json!({"group": "g", "scope": "read", "namespaces": []}),
                "needs namespaces",
            ),
            (
                json!({"group": "g", "scope": "read", "namespaces": ["*", "a"]}),
                "give it alone",
            ),
            (
                json!({"group": "g", "scope": "read", "namespaces": ["*"], "admin": true}),
                "unknown field",
            ),
        ] {
            let err = serde_json::from_value::<GroupMapping>(bad.clone()).unwrap_err();
            assert!(err.to_string().contains(says), "{bad}: {err}");
        }
        let invalid: Invalid = MappingError::from(NamespacesError::NoNamespaces).into();
        assert!(invalid.0.contains("[\"*\"]"));
    }

    #[test]
    fn no_matching_group_no_grant() {
        let mappings = [mapping("acme-publishers", Scope::Publish, &["acme"])];
        assert_eq!(grant(&[], &["acme-publishers"]), Err(GrantError::NoMatch));
        assert_eq!(grant(&mappings, &[] as &[&str]), Err(GrantError::NoMatch));
        // Exact, case-sensitive, whole names.
        for groups in [["Acme-Publishers"], ["acme-publishers "], ["acme"]] {
            assert_eq!(grant(&mappings, &groups), Err(GrantError::NoMatch));
        }
    }

    fn grants(list: &[(Scope, &[&str])]) -> Vec<TokenGrant> {
        list.iter()
            .map(|(s, n)| TokenGrant::new(*s, Namespaces::parse(n).unwrap()))
            .collect()
    }

    #[test]
    fn every_matching_mapping_gives_its_scope_over_its_namespaces() {
        let mappings = [
            mapping("acme-publishers", Scope::Publish, &["acme"]),
            mapping("infra-publishers", Scope::Publish, &["infra", "acme"]),
            mapping("everyone", Scope::Read, &["*"]),
            mapping("ops", Scope::Admin, &["*"]),
        ];
        let got = grant(
            &mappings,
            &["everyone", "acme-publishers", "infra-publishers"],
        )
        .unwrap();
        assert_eq!(
            got,
            Grant {
                grants: grants(&[(Scope::Read, &["*"]), (Scope::Publish, &["acme", "infra"])]),
                groups: vec![
                    "acme-publishers".into(),
                    "everyone".into(),
                    "infra-publishers".into()
                ],
            }
        );
        // "engineering" reads everything, "platform" publishes on acme: one
        // token does both, and publishes nowhere else.
        let got = grant(&mappings, &["everyone", "acme-publishers"]).unwrap();
        assert_eq!(
            got.grants,
            grants(&[(Scope::Read, &["*"]), (Scope::Publish, &["acme"])])
        );
        assert!(!crate::grants::allows(
            &got.grants,
            Scope::Publish,
            crate::token::Realm::Namespace("infra")
        ));
        let got = grant(&mappings, &["everyone", "unknown"]).unwrap();
        assert_eq!(got.grants, grants(&[(Scope::Read, &["*"])]));
        assert_eq!(got.groups, ["everyone"]);
        // Admin only from a mapping that says admin; it includes the rest.
        let got = grant(&mappings, &["ops", "everyone"]).unwrap();
        assert_eq!(got.grants, grants(&[(Scope::Admin, &["*"])]));
        let got = grant(&mappings, &["acme-publishers"]).unwrap();
        assert!(!crate::grants::allows(
            &got.grants,
            Scope::Admin,
            crate::token::Realm::Namespace("acme")
        ));
    }

    #[test]
    fn every_namespace_in_a_scope_wins_over_a_list() {
        let mappings = [
            mapping("a", Scope::Publish, &["acme"]),
            mapping("b", Scope::Publish, &["*"]),
            mapping("c", Scope::Read, &["acme", "web"]),
        ];
        let got = grant(&mappings, &["a", "b", "c"]).unwrap();
        assert_eq!(got.grants, grants(&[(Scope::Publish, &["*"])]));
        assert_eq!(got.groups, ["a", "b", "c"]);
    }

    #[test]
    fn a_grant_over_100_namespaces_is_refused_not_cut() {
        let names: Vec<String> = (0..120).map(|i| format!("ns{i:03}")).collect();
        let mappings = [
            GroupMapping::new("a", Scope::Publish, &names[..60]).unwrap(),
            GroupMapping::new("b", Scope::Publish, &names[60..]).unwrap(),
            GroupMapping::new("c", Scope::Publish, &names[..100]).unwrap(),
            GroupMapping::new("d", Scope::Read, &names[100..]).unwrap(),
        ];
        assert_eq!(
            grant(&mappings, &["a", "b"]),
            Err(GrantError::TooManyNamespaces(120))
        );
        // Over every scope together.
        assert_eq!(
            grant(&mappings, &["c", "d"]),
            Err(GrantError::TooManyNamespaces(120))
        );
        // Overlaps count once.
        let got = grant(&mappings, &["a", "c"]).unwrap();
        assert_eq!(got.grants[0].namespaces.for_token().len(), 100);
        assert!(
            GrantError::TooManyNamespaces(120)
                .to_string()
                .contains("100")
        );
    }

    fn scope() -> impl Strategy<Value = Scope> {
        prop_oneof![Just(Scope::Read), Just(Scope::Publish), Just(Scope::Admin)]
    }

    fn mapping_value() -> impl Strategy<Value = GroupMapping> {
        let namespaces = prop_oneof![
            1 => Just(vec!["*".to_string()]),
            4 => proptest::collection::vec("[a-e]", 1..4),
        ];
        ("g[0-4]", scope(), namespaces).prop_map(|(g, s, n)| GroupMapping::new(&g, s, &n).unwrap())
    }

    proptest! {
        #![proptest_config(crate::property_config())]

        /// A grant allows exactly what some matching mapping allows (for
        /// every scope and namespace: never more, never less), admin only
        /// from an admin mapping, and exists exactly when a mapping matches;
        /// more groups never take a right away.
        #[test]
        fn grants_are_sound(
            mappings in proptest::collection::vec(mapping_value(), 0..6),
            groups in proptest::collection::vec("g[0-5]", 0..4),
            extra in "g[0-5]",
        ) {
            use crate::token::Realm;
            let matching: Vec<&GroupMapping> =
                mappings.iter().filter(|m| groups.contains(&m.group)).collect();
            match grant(&mappings, &groups) {
                Err(e) => {
                    prop_assert_eq!(e, GrantError::NoMatch);
                    prop_assert!(matching.is_empty());
                }
                Ok(g) => {
                    prop_assert!(!matching.is_empty());
                    let mut more = groups.clone();
                    more.push(extra);
                    let wider = grant(&mappings, &more).unwrap();
                    for s in [Scope::Read, Scope::Publish, Scope::Admin] {
                        for ns in ["a", "b", "c", "d", "e", "f"] {
                            let backed = matching
                                .iter()
                                .any(|m| m.scope >= s && m.namespaces.covers(ns));
                            let given = crate::grants::allows(&g.grants, s, Realm::Namespace(ns));
                            prop_assert_eq!(given, backed, "{} on {}", s, ns);
                            if given {
                                prop_assert!(crate::grants::allows(
                                    &wider.grants, s, Realm::Namespace(ns)
                                ));
                            }
                        }
                        let everywhere = matching
                            .iter()
                            .any(|m| m.scope >= s && m.namespaces == Namespaces::All);
                        prop_assert_eq!(
                            crate::grants::allows(&g.grants, s, Realm::Registry),
                            everywhere
                        );
                    }
                }
            }
        }

        /// Valid mappings print and parse back to themselves.
        #[test]
        fn mappings_round_trip(m in mapping_value()) {
            let text = serde_json::to_string(&m).unwrap();
            prop_assert_eq!(serde_json::from_str::<GroupMapping>(&text).unwrap(), m);
        }
    }
}
