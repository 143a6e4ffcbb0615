//! The CI token exchange's pure parts (issue 21): what a CI job sends
//! (`POST /v1/auth/exchange`, [`ExchangeRequest`]), what a verified OIDC
//! token's claims must also say ([`check_ci_claims`]: exactly our audience,
//! a `sub`, a `jti`), which namespaces its issuer's trust policies give it
//! ([`trusted_namespaces`]), the token it gets ([`exchange_token`]: publish
//! on those namespaces only, short-lived) and the answer
//! ([`ExchangeAnswer`]). The signature, `iss` and times are checked before
//! (`tfreg_auth`); the used `jti` is kept by the store under [`jti_key`].

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::Invalid;
use crate::grants::TokenGrant;
use crate::hashing::sha256_hex;
use crate::oidc::{Audience, ClaimError};
use crate::scope::{MAX_NAMESPACES, Namespaces, Scope};
use crate::token::{NewToken, Subject};
use crate::trust::TrustRecord;

/// Default lifetime of an exchanged token: 15 minutes (PyPI's; crates.io
/// gives 30), enough to upload a provider's archives.
pub const DEFAULT_CI_TOKEN_TTL_SECS: u64 = 15 * 60;
/// Shortest and longest lifetime an operator may configure.
pub const MIN_CI_TOKEN_TTL_SECS: u64 = 60;
pub const MAX_CI_TOKEN_TTL_SECS: u64 = 3600;
/// Most live exchanged tokens one CI identity (an issuer's `sub`) holds at
/// once: past GitHub's 20 concurrent jobs of a free account, with room for
/// re-runs, while a job exchanging in a loop is stopped (429 with
/// `Retry-After`, until the first token expires) instead of piling up
/// tokens.
pub const MAX_LIVE_EXCHANGED: usize = 32;
/// Longest CI OIDC token accepted (GitHub's are about 1 KiB, GitLab's 2).
pub const MAX_JWT_LEN: usize = 16 * 1024;
/// Longest `jti` accepted (GitHub and GitLab send a UUID).
pub const MAX_JTI_LEN: usize = 256;
/// Longest `sub` accepted (it names the job in the token's `issued_to`).
pub const MAX_SUB_LEN: usize = 512;
/// Largest exchange request body.
pub const MAX_EXCHANGE_BODY: usize = 32 * 1024;

/// `POST /v1/auth/exchange`'s body: the CI job's OIDC token, and
/// optionally the namespaces to narrow the issued token to (each must be
/// trusted; without it, every trusting namespace).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExchangeRequest {
    pub token: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespaces: Option<Vec<String>>,
}

impl ExchangeRequest {
    /// The token's size, and the namespaces asked for (valid names, at
    /// least one when the list is given). The token is not quoted back.
    pub fn check(&self) -> Result<Option<BTreeSet<String>>, Invalid> {
        if self.token.is_empty() {
            return Err(Invalid::bad(
                "token is empty: send the CI job's OIDC token as {\"token\": \"...\"}",
            ));
        }
        if self.token.len() > MAX_JWT_LEN {
            return Err(Invalid(format!(
                "token is longer than {MAX_JWT_LEN} bytes: not a CI OIDC token"
            )));
        }
        let Some(names) = &self.namespaces else {
            return Ok(None);
        };
        if names.is_empty() {
            return Err(Invalid::bad(
                "namespaces is empty: leave it out for every namespace that trusts the job",
            ));
        }
        if names.len() > MAX_NAMESPACES {
            return Err(Invalid(format!(
                "at most {MAX_NAMESPACES} namespaces may be asked for"
            )));
        }
        names
            .iter()
            .map(|n| crate::address::module_namespace(n))
            .collect::<Result<BTreeSet<_>, _>>()
            .map(Some)
    }
}

/// The exchange's answer. `token` is shown once; `grants` is publish over
/// `namespaces`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExchangeAnswer {
    pub token: String,
    /// Its public id (`tfreg token list`, `tfreg token revoke`).
    pub token_id: String,
    /// Unix seconds.
    pub expires_at: u64,
    pub namespaces: Vec<String>,
    pub grants: Vec<TokenGrant>,
}

/// Why a verified CI token's claims are refused (after its signature,
/// issuer and times).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CiClaimError {
    #[error(transparent)]
    Claim(#[from] ClaimError),
    #[error("the token has no jti (a CI OIDC token names itself, so it can be used once)")]
    NoJti,
    #[error("the token has no sub")]
    NoSub,
    #[error("the token's {0} is not a string of 1 to {1} printable characters")]
    Unreadable(&'static str, usize),
}

/// What the exchange keeps of a verified CI token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CiIdentity {
    pub iss: String,
    pub sub: String,
    pub jti: String,
    pub exp: u64,
}

/// `aud` is exactly `audience` (a string, or a list of that one): a token
/// also meant for another service could be replayed here by that service.
pub fn check_exact_audience(aud: &Audience, audience: &str) -> Result<(), ClaimError> {
    match aud.as_slice() {
        [one] if one == audience => Ok(()),
        _ => Err(ClaimError::WrongAudience {
            client_id: audience.to_string(),
        }),
    }
}

/// The `sub` and `jti` of a token from `iss` (already verified, with its
/// `exp`): each a string of printable characters, bounded.
pub fn check_ci_claims(
    iss: &str,
    exp: u64,
    claims: &Map<String, Value>,
) -> Result<CiIdentity, CiClaimError> {
    let text = |name: &'static str, max: usize, missing: CiClaimError| match claims.get(name) {
        None | Some(Value::Null) => Err(missing),
        Some(Value::String(s))
            if !s.is_empty()
                && s.len() <= max
                && s.chars().all(|c| c.is_ascii_graphic() || c == ' ') =>
        {
            Ok(s.clone())
        }
        Some(_) => Err(CiClaimError::Unreadable(name, max)),
    };
    Ok(CiIdentity {
        iss: iss.to_string(),
        jti: text("jti", MAX_JTI_LEN, CiClaimError::NoJti)?,
        sub: text("sub", MAX_SUB_LEN, CiClaimError::NoSub)?,
        exp,
    })
}

/// The sort key a used `jti` is kept under: sha256 of `iss`, a newline and
/// the `jti` (one issuer's ids cannot collide with another's: an issuer is
/// an allow-listed URL, which holds no newline).
pub fn jti_key(iss: &str, jti: &str) -> String {
    sha256_hex(format!("{iss}\n{jti}").as_bytes())
}

/// The namespaces a token may publish to, and the policies that said so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trusted {
    /// Sorted, unique.
    pub namespaces: Vec<String>,
    /// `<namespace>/<policy id>` of each policy that matched, for the audit.
    pub policies: Vec<String>,
}

/// Why no token is issued for a verified CI token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TrustRefusal {
    #[error(
        "no trust policy matches this token (issuer {0}): ask an admin to `tfreg trust add` one"
    )]
    NoMatch(String),
    #[error("no trust policy of namespace {0} matches this token")]
    NotTrusted(String),
    #[error(
        "{0} namespaces trust this token, more than the {MAX_NAMESPACES} one token may cover: ask for some with \"namespaces\""
    )]
    TooMany(usize),
}

/// Which namespaces' policies (`records`, any namespaces) match a verified
/// token from `issuer` with `claims`; narrowed to `wanted` when given, every
/// one of which must be trusted.
pub fn trusted_namespaces(
    records: &[TrustRecord],
    issuer: &str,
    claims: &Map<String, Value>,
    wanted: Option<&BTreeSet<String>>,
) -> Result<Trusted, TrustRefusal> {
    let mut namespaces = BTreeSet::new();
    let mut policies = Vec::new();
    for r in records {
        if wanted.is_some_and(|w| !w.contains(&r.namespace)) {
            continue;
        }
        if r.policy.matches(issuer, claims) {
            namespaces.insert(r.namespace.clone());
            policies.push(format!("{}/{}", r.namespace, r.id));
        }
    }
    if let Some(missing) = wanted.and_then(|w| w.iter().find(|ns| !namespaces.contains(*ns))) {
        return Err(TrustRefusal::NotTrusted(missing.clone()));
    }
    if namespaces.is_empty() {
        return Err(TrustRefusal::NoMatch(issuer.to_string()));
    }
    if namespaces.len() > MAX_NAMESPACES {
        return Err(TrustRefusal::TooMany(namespaces.len()));
    }
    Ok(Trusted {
        namespaces: namespaces.into_iter().collect(),
        policies,
    })
}

/// The token an exchange issues: publish (which includes read) on the
/// trusted namespaces only, never admin, expiring after `ttl_secs`, named
/// after the job's `sub`.
pub fn exchange_token(trusted: &Trusted, who: &Subject, now: u64, ttl_secs: u64) -> NewToken {
    let label: String = who
        .sub
        .chars()
        .filter(char::is_ascii_graphic)
        .take(56)
        .collect();
    let label = if label.is_empty() { "job" } else { &label };
    let namespaces = Namespaces::Only(trusted.namespaces.clone());
    NewToken {
        expires_at: Some(now + ttl_secs),
        ..NewToken::with_grants(
            &format!("ci {label}"),
            vec![TokenGrant::new(Scope::Publish, namespaces)],
        )
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::json;

    use super::*;
    use crate::trust::{GITHUB_ISSUER, GITLAB_COM_ISSUER, TrustPolicy};

    fn record(namespace: &str, issuer: &str, claims: &[(&str, &str)]) -> TrustRecord {
        let claims: BTreeMap<String, String> = claims
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let policy = TrustPolicy::new(issuer, None, None, &claims).unwrap();
        TrustRecord {
            id: policy.id(),
            namespace: namespace.into(),
            policy,
            added_at: 1,
            added_by: "admin".into(),
        }
    }

    fn github() -> Map<String, Value> {
        json!({
            "iss": GITHUB_ISSUER, "aud": "https://registry.example.com",
            "sub": "repo:acme/app:environment:release",
            "repository": "acme/app", "repository_id": "5678", "repository_owner_id": "1234",
            "ref": "refs/tags/v1.2.0", "ref_protected": "true", "environment": "release",
            "job_workflow_ref": "acme/app/.github/workflows/release.yml@refs/tags/v1.2.0",
            "jti": "4c1d", "iat": 1000, "exp": 1300, "nbf": 400,
        })
        .as_object()
        .unwrap()
        .clone()
    }

    fn policies() -> Vec<TrustRecord> {
        vec![
            record(
                "acme",
                GITHUB_ISSUER,
                &[("repository_owner_id", "1234"), ("ref", "refs/tags/v*")],
            ),
            record(
                "tools",
                GITHUB_ISSUER,
                &[("repository_id", "5678"), ("environment", "release")],
            ),
            record("other", GITHUB_ISSUER, &[("repository_owner_id", "9999")]),
            record("gl", GITLAB_COM_ISSUER, &[("namespace_id", "1234")]),
        ]
    }

    #[test]
    fn the_namespaces_whose_policies_match_and_only_those() {
        let t = trusted_namespaces(&policies(), GITHUB_ISSUER, &github(), None).unwrap();
        assert_eq!(t.namespaces, ["acme", "tools"]);
        assert_eq!(t.policies.len(), 2);
        assert!(t.policies[0].starts_with("acme/"));
        // Narrowed.
        let want = BTreeSet::from(["tools".to_string()]);
        let t = trusted_namespaces(&policies(), GITHUB_ISSUER, &github(), Some(&want)).unwrap();
        assert_eq!(t.namespaces, ["tools"]);
        let want = BTreeSet::from(["tools".to_string(), "other".to_string()]);
        assert_eq!(
            trusted_namespaces(&policies(), GITHUB_ISSUER, &github(), Some(&want)),
            Err(TrustRefusal::NotTrusted("other".into()))
        );
        // A claim that differs: a branch, not a tag.
        let mut branch = github();
        branch.insert("ref".into(), json!("refs/heads/main"));
        branch.insert("environment".into(), json!("dev"));
        assert_eq!(
            trusted_namespaces(&policies(), GITHUB_ISSUER, &branch, None),
            Err(TrustRefusal::NoMatch(GITHUB_ISSUER.into()))
        );
        // Same claims from another issuer: nothing (the gitlab policy pins
        // namespace_id, which this token lacks; the GitHub ones another issuer).
        assert!(trusted_namespaces(&policies(), GITLAB_COM_ISSUER, &github(), None).is_err());
        assert!(trusted_namespaces(&[], GITHUB_ISSUER, &github(), None).is_err());
    }

    #[test]
    fn the_token_publishes_to_the_trusted_namespaces_only_and_expires() {
        let trusted = Trusted {
            namespaces: vec!["acme".into(), "tools".into()],
            policies: vec![],
        };
        let who = Subject {
            iss: GITHUB_ISSUER.into(),
            sub: "repo:acme/app:ref:refs/tags/v1\u{202e}".into(),
            name: None,
            email: None,
            ci: None,
        };
        let t = exchange_token(&trusted, &who, 100, 900).check(100).unwrap();
        assert_eq!(crate::grants::describe(&t.grants), "publish:acme,tools");
        assert_eq!(t.expires_at, Some(1000));
        assert_eq!(t.name, "ci repo:acme/app:ref:refs/tags/v1");
        assert!(!crate::grants::allows(
            &t.grants,
            Scope::Admin,
            crate::scope::Realm::Namespace("acme")
        ));
        assert!(!crate::grants::allows(
            &t.grants,
            Scope::Read,
            crate::scope::Realm::Namespace("other")
        ));
        let long = Subject {
            sub: "x".repeat(500),
            ..who
        };
        assert!(exchange_token(&trusted, &long, 1, 60).check(1).is_ok());
    }

    #[test]
    fn the_audience_must_be_exactly_ours() {
        let ours = "https://registry.example.com";
        assert_eq!(
            check_exact_audience(&Audience::One(ours.into()), ours),
            Ok(())
        );
        assert_eq!(
            check_exact_audience(&Audience::Many(vec![ours.into()]), ours),
            Ok(())
        );
        for bad in [
            Audience::One(format!("{ours}/")),
            Audience::One("https://registry.example.co".into()),
            Audience::Many(vec![ours.into(), "sts.amazonaws.com".into()]),
            Audience::Many(vec![]),
        ] {
            assert!(check_exact_audience(&bad, ours).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_ci_token_names_itself_and_its_job() {
        let id = check_ci_claims(GITHUB_ISSUER, 1300, &github()).unwrap();
        assert_eq!(id.jti, "4c1d");
        assert_eq!(id.sub, "repo:acme/app:environment:release");
        let without = |name: &str| {
            let mut c = github();
            c.remove(name);
            check_ci_claims(GITHUB_ISSUER, 1300, &c)
        };
        assert_eq!(without("jti"), Err(CiClaimError::NoJti));
        assert_eq!(without("sub"), Err(CiClaimError::NoSub));
        for bad in [json!(""), json!(5), json!("a\nb"), json!("x".repeat(300))] {
            let mut c = github();
            c.insert("jti".into(), bad.clone());
            assert_eq!(
                check_ci_claims(GITHUB_ISSUER, 1300, &c),
                Err(CiClaimError::Unreadable("jti", MAX_JTI_LEN)),
                "{bad}"
            );
        }
        // One issuer's jti is not another's.
        assert_ne!(jti_key("https://a", "1"), jti_key("https://b", "1"));
        // (An issuer never holds a newline: it is an allow-listed URL.)
        assert_eq!(jti_key("https://a", "1").len(), 64);
    }

    #[test]
    fn requests_are_checked_without_quoting_the_token() {
        let req = |body: Value| serde_json::from_value::<ExchangeRequest>(body);
        assert_eq!(
            req(json!({"token": "a.b.c"})).unwrap().check().unwrap(),
            None
        );
        assert_eq!(
            req(json!({"token": "a.b.c", "namespaces": ["Acme", "tools"]}))
                .unwrap()
                .check()
                .unwrap(),
            Some(BTreeSet::from(["acme".to_string(), "tools".to_string()]))
        );
        assert!(req(json!({"token": "a.b.c", "scope": "admin"})).is_err());
        assert!(req(json!({})).is_err());
        for bad in [
            json!({"token": ""}),
            json!({"token": "x".repeat(MAX_JWT_LEN + 1)}),
            json!({"token": "a.b.c", "namespaces": []}),
            json!({"token": "a.b.c", "namespaces": ["no such/ns"]}),
        ] {
            let e = req(bad.clone()).unwrap().check().unwrap_err();
            assert!(!e.0.contains("xxxx"), "{e}");
        }
    }
}
