//! Which CI jobs may publish without a stored secret (issue 21): per
//! namespace, [`TrustPolicy`]s an admin manages (CLI and admin API,
//! audited), each an OIDC issuer and required claims matched exactly or by a
//! trailing `*` ([`Pattern`]). A job's token is verified first (signature,
//! `iss`, `aud`, [`crate::oidc::check_times`], a fresh `jti`); then the
//! policies it matches name the namespaces its short-lived publish token
//! covers.
//!
//! A policy is valid once built: one that would trust every repository of
//! its issuer, or that pins only names (which can be registered again after
//! a rename or deletion), is refused with why ([`IssuerKind::pinned_claims`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::Invalid;
use crate::oidc::claim_text;
use crate::text::verbatim;

/// GitHub Actions' issuer (an enterprise's own is this followed by `/<slug>`).
pub const GITHUB_ISSUER: &str = "https://token.actions.githubusercontent.com";
/// gitlab.com's issuer (a self-managed instance's is its URL).
pub const GITLAB_COM_ISSUER: &str = "https://gitlab.com";
/// Most claims one trust policy may require.
pub const MAX_POLICY_CLAIMS: usize = 32;
/// Longest claim name.
pub const MAX_CLAIM_NAME_CHARS: usize = 128;
/// Longest claim pattern (a `job_workflow_ref` is about 150).
pub const MAX_PATTERN_CHARS: usize = 1024;
/// Longest issuer URL or audience.
pub const MAX_URL_CHARS: usize = 512;

/// A required claim's value: matched exactly, or, when it ends in `*`, by
/// prefix: `refs/tags/v*` matches `refs/tags/v1.2.0` but not `refs/tags/v`
/// (the `*` stands for at least one character). The prefix is literal:
/// `repo:acme/*` needs `repo:acme/`, so it matches neither `repo:acme` nor
/// `repo:acme-evil/x`, while `repo:acme*` would match the latter: end a
/// prefix at a separator. A `*` anywhere else, a bare `*`, an empty value
/// and spaces at the ends are refused; a trailing `*` is always the wildcard.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Pattern(String);

/// Why a claim pattern is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatternError {
    #[error("the value is empty")]
    Empty,
    #[error("a bare * would match any value: give a value or a prefix")]
    BareStar,
    #[error("* is allowed only at the end, as a prefix match")]
    InnerStar,
    #[error("the value is longer than {MAX_PATTERN_CHARS} characters")]
    TooLong,
    #[error("the value has spaces at its ends or a control or invisible character")]
    Unprintable,
}

impl Pattern {
    pub fn parse(text: &str) -> Result<Self, PatternError> {
        let body = text.strip_suffix('*').unwrap_or(text);
        if text.is_empty() {
            Err(PatternError::Empty)
        } else if body.is_empty() {
            Err(PatternError::BareStar)
        } else if body.contains('*') {
            Err(PatternError::InnerStar)
        } else if text.chars().count() > MAX_PATTERN_CHARS {
            Err(PatternError::TooLong)
        } else if !verbatim(body, MAX_PATTERN_CHARS) {
            Err(PatternError::Unprintable)
        } else {
            Ok(Pattern(text.to_string()))
        }
    }

    /// No wildcard: only the value itself matches.
    pub fn is_exact(&self) -> bool {
        !self.0.ends_with('*')
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Does `value` match (exactly, or the prefix and at least one more character)?
    pub fn matches(&self, value: &str) -> bool {
        match self.0.strip_suffix('*') {
            Some(prefix) => value.len() > prefix.len() && value.starts_with(prefix),
            None => value == self.0,
        }
    }
}

impl TryFrom<String> for Pattern {
    type Error = PatternError;
    fn try_from(s: String) -> Result<Self, PatternError> {
        Pattern::parse(&s)
    }
}

impl From<Pattern> for String {
    fn from(p: Pattern) -> Self {
        p.0
    }
}

/// Which CI system issues the tokens, deciding the claims a policy must pin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IssuerKind {
    GitHub,
    GitLab,
    /// Any other OpenID Connect issuer.
    Other,
}

impl IssuerKind {
    /// The kind of a well-known issuer: GitHub Actions' (and an
    /// enterprise's `/<slug>` under it), gitlab.com's. Others must be told.
    pub fn known(issuer: &str) -> Option<Self> {
        if issuer == GITHUB_ISSUER
            || issuer
                .strip_prefix(GITHUB_ISSUER)
                .and_then(|rest| rest.strip_prefix('/'))
                .is_some_and(|slug| !slug.is_empty())
        {
            Some(IssuerKind::GitHub)
        } else if issuer == GITLAB_COM_ISSUER {
            Some(IssuerKind::GitLab)
        } else {
            None
        }
    }

    /// The claims of which a policy must pin at least one, exactly: ids that
    /// are never given to another owner or project. Names (`repository`,
    /// `project_path`) can be taken again after a rename or deletion; and
    /// GitHub's and GitLab's `sub` are built from names.
    pub fn pinned_claims(self) -> &'static [&'static str] {
        match self {
            IssuerKind::GitHub => &["repository_owner_id", "repository_id"],
            IssuerKind::GitLab => &["namespace_id", "project_id"],
            IssuerKind::Other => &["sub"],
        }
    }

    fn pin_is_number(self) -> bool {
        self != IssuerKind::Other
    }

    fn name(self) -> &'static str {
        match self {
            IssuerKind::GitHub => "GitHub Actions",
            IssuerKind::GitLab => "GitLab CI",
            IssuerKind::Other => "OpenID Connect",
        }
    }
}

/// Why a trust policy is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    #[error("the issuer must be an https URL, exactly the tokens' iss, not {0:?}")]
    BadIssuer(String),
    #[error("say which CI system issues {0}: kind github, gitlab or other")]
    KindNeeded(String),
    #[error("{issuer} is {known}'s issuer: give no other kind")]
    KindConflict { issuer: String, known: &'static str },
    #[error("the audience must be 1 to {MAX_URL_CHARS} printable characters")]
    BadAudience,
    #[error("a trust policy needs required claims, or it trusts every token {0} issues")]
    NoClaims(String),
    #[error("a trust policy may require at most {MAX_POLICY_CLAIMS} claims")]
    TooManyClaims,
    #[error("invalid claim name {0:?}: up to {MAX_CLAIM_NAME_CHARS} printable ASCII characters")]
    BadClaimName(String),
    #[error("{claim} cannot be a required claim: {why}")]
    Reserved { claim: String, why: &'static str },
    #[error("claim {claim}: {source}")]
    Pattern { claim: String, source: PatternError },
    #[error(
        "a {} policy must pin {} exactly: names can be reused, ids cannot",
        .0.name(), .0.pinned_claims().join(" or ")
    )]
    Unpinned(IssuerKind),
    #[error("{claim} must be the exact id {} sends, not {pattern:?}", .kind.name())]
    PinNotId {
        claim: String,
        kind: IssuerKind,
        pattern: String,
    },
    #[error(
        "{issuer} is not among the CI issuers this registry accepts tokens from ({}), so a policy for it could never match: allow-list it first (tfreg serve --ci-issuer, or the stack's CiIssuers)",
        allowed_list(.allowed)
    )]
    NotAllowListed {
        issuer: String,
        allowed: Vec<String>,
    },
}

fn allowed_list(allowed: &[String]) -> String {
    match allowed {
        [] => "none: the CI exchange is off".to_string(),
        some => some.join(", "),
    }
}

/// Is `issuer` one of the `allowed` CI issuers (exactly, as the exchange
/// compares a token's `iss`)? A trust policy for another could never match.
pub fn check_allow_listed(issuer: &str, allowed: &[String]) -> Result<(), PolicyError> {
    match allowed.iter().any(|a| a == issuer) {
        true => Ok(()),
        false => Err(PolicyError::NotAllowListed {
            issuer: issuer.to_string(),
            allowed: allowed.to_vec(),
        }),
    }
}

impl From<PolicyError> for Invalid {
    fn from(e: PolicyError) -> Self {
        Invalid(e.to_string())
    }
}

/// Why a token does not match a policy (for the log; the client is told
/// only that no policy matched).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Mismatch {
    #[error("another issuer")]
    Issuer,
    #[error("another audience")]
    Audience,
    #[error("claim {0} does not match")]
    Claim(String),
}

/// Which CI tokens may publish to a namespace (the namespace is the
/// record's key): tokens of `issuer` whose `claims` all match, and, when
/// `audience` is set, whose `aud` includes it (besides the exact audience
/// the verifier already required). Claims are the token's top-level ones,
/// compared as [`claim_text`] gives them, case-sensitively.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "RawPolicy")]
pub struct TrustPolicy {
    issuer: String,
    kind: IssuerKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    audience: Option<String>,
    claims: BTreeMap<String, Pattern>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPolicy {
    issuer: String,
    #[serde(default)]
    kind: Option<IssuerKind>,
    #[serde(default)]
    audience: Option<String>,
    #[serde(default)]
    claims: BTreeMap<String, String>,
}

/// Claims a policy may not require, and why.
const RESERVED: &[(&str, &str)] = &[
    ("iss", "give the issuer"),
    ("aud", "give the audience"),
    ("exp", "times are checked, not matched"),
    ("iat", "times are checked, not matched"),
    ("nbf", "times are checked, not matched"),
    ("jti", "it is new in every token"),
];

impl TrustPolicy {
    /// A policy, validated: an https issuer; its kind (known issuers need
    /// none, and a given one must agree); at least one required claim,
    /// among them one of [`IssuerKind::pinned_claims`] with an exact value
    /// (digits for GitHub and GitLab ids); no reserved claim (`iss`, `aud`,
    /// times, `jti`); every pattern valid.
    pub fn new(
        issuer: &str,
        kind: Option<IssuerKind>,
        audience: Option<&str>,
        claims: &BTreeMap<String, String>,
    ) -> Result<Self, PolicyError> {
        check_issuer(issuer)?;
        let kind = match (IssuerKind::known(issuer), kind) {
            (Some(known), Some(given)) if known != given => {
                let (issuer, known) = (issuer.to_string(), known.name());
                return Err(PolicyError::KindConflict { issuer, known });
            }
            (Some(kind), _) | (None, Some(kind)) => kind,
            (None, None) => return Err(PolicyError::KindNeeded(issuer.to_string())),
        };
        if audience.is_some_and(|aud| !verbatim(aud, MAX_URL_CHARS)) {
            return Err(PolicyError::BadAudience);
        }
        if claims.is_empty() {
            return Err(PolicyError::NoClaims(issuer.to_string()));
        }
        if claims.len() > MAX_POLICY_CLAIMS {
            return Err(PolicyError::TooManyClaims);
        }
        let mut patterns = BTreeMap::new();
        for (claim, text) in claims {
            if claim.is_empty()
                || claim.len() > MAX_CLAIM_NAME_CHARS
                || !claim.bytes().all(|b| b.is_ascii_graphic())
            {
                return Err(PolicyError::BadClaimName(claim.clone()));
            }
            if let Some((_, why)) = RESERVED.iter().find(|(name, _)| name == claim) {
                return Err(PolicyError::Reserved {
                    claim: claim.clone(),
                    why,
                });
            }
            let pattern = Pattern::parse(text).map_err(|source| PolicyError::Pattern {
                claim: claim.clone(),
                source,
            })?;
            patterns.insert(claim.clone(), pattern);
        }
        let mut pinned = false;
        for claim in kind.pinned_claims() {
            let Some(pattern) = patterns.get(*claim) else {
                continue;
            };
            let id = pattern.is_exact()
                && (!kind.pin_is_number() || pattern.0.bytes().all(|b| b.is_ascii_digit()));
            if !id {
                return Err(PolicyError::PinNotId {
                    claim: claim.to_string(),
                    kind,
                    pattern: pattern.0.clone(),
                });
            }
            pinned = true;
        }
        if !pinned {
            return Err(PolicyError::Unpinned(kind));
        }
        Ok(Self {
            issuer: issuer.to_string(),
            kind,
            audience: audience.map(str::to_string),
            claims: patterns,
        })
    }

    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    pub fn kind(&self) -> IssuerKind {
        self.kind
    }

    pub fn audience(&self) -> Option<&str> {
        self.audience.as_deref()
    }

    pub fn claims(&self) -> &BTreeMap<String, Pattern> {
        &self.claims
    }

    /// Does a verified token from `issuer` with `claims` match?
    pub fn matches(&self, issuer: &str, claims: &Map<String, Value>) -> bool {
        self.check(issuer, claims).is_ok()
    }

    /// [`Self::matches`], saying what differs first: the issuer (byte for
    /// byte), the audience, then the claims in name order.
    pub fn check(&self, issuer: &str, claims: &Map<String, Value>) -> Result<(), Mismatch> {
        if issuer != self.issuer {
            return Err(Mismatch::Issuer);
        }
        if let Some(want) = &self.audience {
            let ok = match claims.get("aud") {
                Some(Value::String(a)) => a == want,
                Some(Value::Array(list)) => list.iter().any(|a| a.as_str() == Some(want)),
                _ => false,
            };
            if !ok {
                return Err(Mismatch::Audience);
            }
        }
        for (name, pattern) in &self.claims {
            let value = claims.get(name).and_then(claim_text);
            if !value.is_some_and(|v| pattern.matches(&v)) {
                return Err(Mismatch::Claim(name.clone()));
            }
        }
        Ok(())
    }
}

/// An issuer's URL as its tokens' `iss` may name it: at most `max_chars`
/// printable ASCII characters, a host, no credentials, query or fragment
/// (the scheme is the caller's rule). `None` when it is not one.
pub fn issuer_url(issuer: &str, max_chars: usize) -> Option<url::Url> {
    if issuer.len() > max_chars || !issuer.bytes().all(|b| b.is_ascii_graphic()) {
        return None;
    }
    let url = url::Url::parse(issuer).ok()?;
    let plain = url.host_str().is_some_and(|h| !h.is_empty())
        && url.username().is_empty()
        && url.password().is_none()
        && url.query().is_none()
        && url.fragment().is_none();
    plain.then_some(url)
}

fn check_issuer(issuer: &str) -> Result<(), PolicyError> {
    let known = [GITHUB_ISSUER, GITLAB_COM_ISSUER]
        .iter()
        .any(|known| issuer.strip_suffix('/') == Some(known));
    if known || !issuer.starts_with("https://") || issuer_url(issuer, MAX_URL_CHARS).is_none() {
        return Err(PolicyError::BadIssuer(issuer.to_string()));
    }
    Ok(())
}

impl TryFrom<RawPolicy> for TrustPolicy {
    type Error = PolicyError;
    fn try_from(raw: RawPolicy) -> Result<Self, PolicyError> {
        TrustPolicy::new(&raw.issuer, raw.kind, raw.audience.as_deref(), &raw.claims)
    }
}

/// Most trust policies one namespace may have.
pub const MAX_POLICIES: usize = 20;
/// Hex digits of a policy's id.
pub const POLICY_ID_LEN: usize = 12;

/// A namespace's trust policy as the registry keeps it: its id (derived
/// from the policy, so adding the same policy twice keeps one), who added it
/// and when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrustRecord {
    pub id: String,
    pub namespace: String,
    pub policy: TrustPolicy,
    pub added_at: u64,
    pub added_by: String,
}

impl TrustPolicy {
    /// Its id: the first [`POLICY_ID_LEN`] hex digits of the sha256 of its
    /// JSON (claims sorted, so one policy has one id).
    pub fn id(&self) -> String {
        let json = serde_json::to_vec(self).expect("a policy serialises");
        crate::hashing::sha256_hex(&json)[..POLICY_ID_LEN].to_string()
    }
}

/// A policy id as a path segment or a CLI argument gives it.
pub fn check_policy_id(id: &str) -> Result<String, Invalid> {
    if id.len() == POLICY_ID_LEN && id.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(id.to_ascii_lowercase())
    } else {
        Err(Invalid(format!(
            "invalid trust policy id {:?}: {POLICY_ID_LEN} hex digits, as `tfreg trust list` shows",
            id.chars().take(40).collect::<String>()
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn claims(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn github(pairs: &[(&str, &str)]) -> Result<TrustPolicy, PolicyError> {
        TrustPolicy::new(GITHUB_ISSUER, None, None, &claims(pairs))
    }

    fn github_claims() -> Map<String, Value> {
        json!({
            "iss": GITHUB_ISSUER,
            "aud": "https://registry.example.com",
            "sub": "repo:acme/app:ref:refs/tags/v1.2.0",
            "repository": "acme/app",
            "repository_id": "5678",
            "repository_owner": "acme",
            "repository_owner_id": "1234",
            "ref": "refs/tags/v1.2.0",
            "ref_protected": "true",
            "job_workflow_ref": "acme/app/.github/workflows/release.yml@refs/tags/v1.2.0",
            "environment": "release",
            "jti": "0b8f", "exp": 2000, "iat": 1000,
        })
        .as_object()
        .unwrap()
        .clone()
    }

    #[test]
    fn patterns_match_exactly_or_by_a_literal_prefix() {
        let p = |s: &str| Pattern::parse(s).unwrap();
        assert!(p("acme/app").matches("acme/app"));
        assert!(!p("acme/app").matches("acme/app2"));
        assert!(!p("acme/app").matches("Acme/app"));
        assert!(!p("acme/app").matches("acme/ap"));
        let repo = p("repo:acme/*");
        assert!(!repo.is_exact());
        assert!(repo.matches("repo:acme/app:ref:refs/heads/main"));
        for no in [
            "repo:acme",
            "repo:acme/",
            "repo:acme-evil/x",
            "repo:acmeX/y",
            "",
        ] {
            assert!(!repo.matches(no), "{no}");
        }
        let tags = p("refs/tags/v*");
        assert!(tags.matches("refs/tags/v1.2.0"));
        assert!(!tags.matches("refs/tags/v"));
        assert!(!tags.matches("refs/heads/v1"));
        assert!(p("acme*").matches("acme-evil"), "a prefix is only a prefix");
        // No other character is special.
        assert!(p("a.b?c[d]").matches("a.b?c[d]"));
        assert!(!p("a.b").matches("axb"));
    }

    #[test]
    fn bad_patterns_are_refused() {
        for (bad, why) in [
            ("", PatternError::Empty),
            ("*", PatternError::BareStar),
            ("**", PatternError::InnerStar),
            ("a*b", PatternError::InnerStar),
            ("*a", PatternError::InnerStar),
            ("a**", PatternError::InnerStar),
            (" a", PatternError::Unprintable),
            ("a ", PatternError::Unprintable),
            ("a *", PatternError::Unprintable),
            ("a\nb", PatternError::Unprintable),
            ("a\u{200b}b", PatternError::Unprintable),
        ] {
            assert_eq!(Pattern::parse(bad), Err(why), "{bad:?}");
        }
        assert!(Pattern::parse(&"a".repeat(MAX_PATTERN_CHARS)).is_ok());
        assert_eq!(
            Pattern::parse(&"a".repeat(MAX_PATTERN_CHARS + 1)),
            Err(PatternError::TooLong)
        );
        assert!(serde_json::from_value::<Pattern>(json!("a*b")).is_err());
        assert_eq!(
            serde_json::from_value::<Pattern>(json!("a*")).unwrap(),
            Pattern::parse("a*").unwrap()
        );
    }

    #[test]
    fn well_known_issuers_have_a_kind() {
        assert_eq!(IssuerKind::known(GITHUB_ISSUER), Some(IssuerKind::GitHub));
        assert_eq!(
            IssuerKind::known("https://token.actions.githubusercontent.com/acme-corp"),
            Some(IssuerKind::GitHub)
        );
        assert_eq!(
            IssuerKind::known(GITLAB_COM_ISSUER),
            Some(IssuerKind::GitLab)
        );
        for other in [
            "https://token.actions.githubusercontent.com.evil.com",
            "https://token.actions.githubusercontent.com/",
            "https://gitlab.example.com",
            "https://gitlab.com.evil.com",
            "https://gitlab.com/",
        ] {
            assert_eq!(IssuerKind::known(other), None, "{other}");
        }
        assert_eq!(
            serde_json::to_value(IssuerKind::GitHub).unwrap(),
            json!("github")
        );
    }

    #[test]
    fn github_policies_pin_an_owner_or_repository_id() {
        let p = github(&[
            ("repository_owner_id", "1234"),
            ("repository", "acme/app"),
            ("ref", "refs/tags/v*"),
        ])
        .unwrap();
        assert_eq!(p.kind(), IssuerKind::GitHub);
        assert_eq!(p.issuer(), GITHUB_ISSUER);
        assert_eq!(p.audience(), None);
        assert_eq!(p.claims().len(), 3);
        assert!(github(&[("repository_id", "99")]).is_ok());
        assert_eq!(
            github(&[]),
            Err(PolicyError::NoClaims(GITHUB_ISSUER.into()))
        );
        let unpinned =
            github(&[("repository", "acme/app"), ("repository_owner", "acme")]).unwrap_err();
        assert!(matches!(
            unpinned,
            PolicyError::Unpinned(IssuerKind::GitHub)
        ));
        assert_eq!(
            unpinned.to_string(),
            "a GitHub Actions policy must pin repository_owner_id or repository_id exactly: names can be reused, ids cannot"
        );
        for (claim, value) in [
            ("repository_owner_id", "12*"),
            ("repository_owner_id", "acme"),
            ("repository_id", "-1"),
            ("repository_id", "1.0"),
        ] {
            assert!(
                matches!(
                    github(&[(claim, value), ("repository", "acme/app")]),
                    Err(PolicyError::PinNotId { .. })
                ),
                "{claim}={value}"
            );
        }
        // One good pin does not excuse a wildcard on the other.
        assert!(matches!(
            github(&[("repository_owner_id", "1"), ("repository_id", "2*")]),
            Err(PolicyError::PinNotId { .. })
        ));
    }

    #[test]
    fn gitlab_and_other_issuers_pin_their_own_ids() {
        let gl = |issuer, kind, pairs: &[(&str, &str)]| {
            TrustPolicy::new(issuer, kind, None, &claims(pairs))
        };
        assert!(gl(GITLAB_COM_ISSUER, None, &[("project_id", "42")]).is_ok());
        assert!(gl(GITLAB_COM_ISSUER, None, &[("namespace_id", "7")]).is_ok());
        assert!(matches!(
            gl(GITLAB_COM_ISSUER, None, &[("project_path", "acme/app")]),
            Err(PolicyError::Unpinned(IssuerKind::GitLab))
        ));
        // A self-managed instance: its kind must be said, since "protected
        // refs in environment prod" alone would trust every project there.
        let own = "https://gitlab.example.com";
        assert_eq!(
            gl(
                own,
                None,
                &[("ref_protected", "true"), ("environment", "prod")]
            ),
            Err(PolicyError::KindNeeded(own.into()))
        );
        assert!(matches!(
            gl(
                own,
                Some(IssuerKind::GitLab),
                &[("ref_protected", "true"), ("environment", "prod")]
            ),
            Err(PolicyError::Unpinned(_))
        ));
        let p = gl(
            own,
            Some(IssuerKind::GitLab),
            &[("project_id", "42"), ("ref_protected", "true")],
        )
        .unwrap();
        assert_eq!(p.kind(), IssuerKind::GitLab);
        // A known issuer's kind cannot be overridden.
        assert!(matches!(
            gl(GITHUB_ISSUER, Some(IssuerKind::Other), &[("sub", "x")]),
            Err(PolicyError::KindConflict { .. })
        ));
        assert!(
            gl(
                GITHUB_ISSUER,
                Some(IssuerKind::GitHub),
                &[("repository_id", "1")]
            )
            .is_ok()
        );
        // Other issuers pin `sub` exactly.
        let idp = "https://idp.example.com/realms/ci";
        assert!(gl(idp, Some(IssuerKind::Other), &[("sub", "svc-publisher")]).is_ok());
        assert!(matches!(
            gl(idp, Some(IssuerKind::Other), &[("email", "ci@example.com")]),
            Err(PolicyError::Unpinned(IssuerKind::Other))
        ));
        assert!(matches!(
            gl(idp, Some(IssuerKind::Other), &[("sub", "svc-*")]),
            Err(PolicyError::PinNotId { .. })
        ));
    }

    #[test]
    fn policies_refuse_bad_issuers_claims_and_audiences() {
        let pin = claims(&[("repository_id", "1")]);
        for issuer in [
            "http://token.actions.githubusercontent.com",
            "HTTPS://gitlab.com",
            "https://",
            "https://gitlab.example.com?x=1",
            "https://gitlab.example.com#x",
            "https://user@gitlab.example.com",
            "https://gitlab.example .com",
            "https://token.actions.githubusercontent.com/",
            "https://gitlab.com/",
            "gitlab.com",
            "",
        ] {
            assert!(
                matches!(
                    TrustPolicy::new(issuer, Some(IssuerKind::GitHub), None, &pin),
                    Err(PolicyError::BadIssuer(_))
                ),
                "{issuer}"
            );
        }
        for aud in ["", " x", "a\nb"] {
            assert_eq!(
                TrustPolicy::new(GITHUB_ISSUER, None, Some(aud), &pin),
                Err(PolicyError::BadAudience)
            );
        }
        for claim in ["iss", "aud", "exp", "iat", "nbf", "jti"] {
            let mut c = pin.clone();
            c.insert(claim.into(), "x".into());
            assert!(
                matches!(
                    TrustPolicy::new(GITHUB_ISSUER, None, None, &c),
                    Err(PolicyError::Reserved { .. })
                ),
                "{claim}"
            );
        }
        for claim in ["", "a b", "é", &"c".repeat(MAX_CLAIM_NAME_CHARS + 1)] {
            let mut c = pin.clone();
            c.insert(claim.to_string(), "x".into());
            assert!(
                matches!(
                    TrustPolicy::new(GITHUB_ISSUER, None, None, &c),
                    Err(PolicyError::BadClaimName(_))
                ),
                "{claim:?}"
            );
        }
        let mut c = pin.clone();
        c.insert("ref".into(), "refs/*/x".into());
        assert_eq!(
            TrustPolicy::new(GITHUB_ISSUER, None, None, &c)
                .unwrap_err()
                .to_string(),
            "claim ref: * is allowed only at the end, as a prefix match"
        );
        let mut many = pin.clone();
        for i in 0..MAX_POLICY_CLAIMS {
            many.insert(format!("c{i}"), "x".into());
        }
        assert_eq!(
            TrustPolicy::new(GITHUB_ISSUER, None, None, &many),
            Err(PolicyError::TooManyClaims)
        );
        many.remove("c0");
        assert!(TrustPolicy::new(GITHUB_ISSUER, None, None, &many).is_ok());
        let invalid: Invalid = PolicyError::TooManyClaims.into();
        assert!(invalid.0.contains("32"));
    }

    #[test]
    fn a_github_token_matches_its_policy_claim_by_claim() {
        let policy = github(&[
            ("repository_owner_id", "1234"),
            ("repository", "acme/app"),
            ("ref", "refs/tags/v*"),
            ("ref_protected", "true"),
            (
                "job_workflow_ref",
                "acme/app/.github/workflows/release.yml@*",
            ),
        ])
        .unwrap();
        let token = github_claims();
        assert!(policy.matches(GITHUB_ISSUER, &token));
        assert_eq!(policy.check(GITHUB_ISSUER, &token), Ok(()));
        assert_eq!(
            policy.check("https://gitlab.com", &token),
            Err(Mismatch::Issuer)
        );
        assert_eq!(
            policy.check(&format!("{GITHUB_ISSUER}/"), &token),
            Err(Mismatch::Issuer)
        );
        let with = |key: &str, value: Value| {
            let mut t = token.clone();
            t.insert(key.into(), value);
            policy.check(GITHUB_ISSUER, &t)
        };
        // Booleans and numbers match by their JSON text.
        assert_eq!(with("ref_protected", json!(true)), Ok(()));
        assert_eq!(with("repository_owner_id", json!(1234)), Ok(()));
        for (key, value) in [
            ("ref_protected", json!(false)),
            ("ref_protected", json!("True")),
            ("ref_protected", json!(["true"])),
            ("ref_protected", json!(null)),
            ("repository_owner_id", json!(12345)),
            ("repository_owner_id", json!("01234")),
            ("repository", json!("acme/app-evil")),
            ("repository", json!("Acme/App")),
            ("ref", json!("refs/heads/main")),
            ("ref", json!("refs/tags/v")),
            (
                "job_workflow_ref",
                json!("acme/evil/.github/workflows/release.yml@refs/tags/v1"),
            ),
        ] {
            assert_eq!(
                with(key, value.clone()),
                Err(Mismatch::Claim(key.into())),
                "{key}={value}"
            );
        }
        let mut missing = token.clone();
        missing.remove("ref_protected");
        assert_eq!(
            policy.check(GITHUB_ISSUER, &missing),
            Err(Mismatch::Claim("ref_protected".into()))
        );
        assert_eq!(
            Mismatch::Claim("ref".into()).to_string(),
            "claim ref does not match"
        );
    }

    #[test]
    fn a_policy_audience_must_be_among_the_tokens() {
        let policy = TrustPolicy::new(
            GITHUB_ISSUER,
            None,
            Some("https://registry.example.com"),
            &claims(&[("repository_owner_id", "1234")]),
        )
        .unwrap();
        let mut token = github_claims();
        assert!(policy.matches(GITHUB_ISSUER, &token));
        for (aud, ok) in [
            (json!(["x", "https://registry.example.com"]), true),
            (json!("https://registry.example.com/"), false),
            (json!(["x"]), false),
            (json!(5), false),
        ] {
            token.insert("aud".into(), aud.clone());
            assert_eq!(policy.matches(GITHUB_ISSUER, &token), ok, "{aud}");
        }
        token.remove("aud");
        assert_eq!(policy.check(GITHUB_ISSUER, &token), Err(Mismatch::Audience));
    }

    #[test]
    fn a_gitlab_token_matches_its_policy() {
        let own = "https://gitlab.example.com";
        let policy: TrustPolicy = serde_json::from_value(json!({
            "issuer": own, "kind": "gitlab",
            "claims": {"namespace_id": "72", "project_path": "acme/app",
                       "ref_protected": "true", "ci_config_ref_uri": "gitlab.example.com/acme/app//.gitlab-ci.yml@refs/tags/*"}
        }))
        .unwrap();
        let token = json!({
            "iss": own, "namespace_id": "72", "namespace_path": "acme", "project_id": "9",
            "project_path": "acme/app", "ref_protected": "true", "ref_type": "tag",
            "ci_config_ref_uri": "gitlab.example.com/acme/app//.gitlab-ci.yml@refs/tags/v1.0.0"
        });
        let token = token.as_object().unwrap();
        assert!(policy.matches(own, token));
        assert!(!policy.matches(GITLAB_COM_ISSUER, token));
        let mut other = token.clone();
        other.insert("namespace_id".into(), json!("73"));
        assert!(!policy.matches(own, &other));
    }

    #[test]
    fn a_policy_id_is_its_content() {
        let a = github(&[("repository_id", "1"), ("ref", "refs/tags/*")]).unwrap();
        let same = github(&[("ref", "refs/tags/*"), ("repository_id", "1")]).unwrap();
        let other = github(&[("repository_id", "2"), ("ref", "refs/tags/*")]).unwrap();
        assert_eq!(a.id(), same.id());
        assert_ne!(a.id(), other.id());
        assert_eq!(a.id().len(), POLICY_ID_LEN);
        assert_eq!(check_policy_id(&a.id().to_uppercase()), Ok(a.id()));
        for bad in [
            "",
            "0123456789a",
            "0123456789abc",
            "0123456789ag",
            "../../x/y/z",
        ] {
            assert!(check_policy_id(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn trust_policies_read_and_write_json() {
        let text = json!({
            "issuer": GITHUB_ISSUER,
            "audience": "https://registry.example.com",
            "claims": {"repository_owner_id": "1234", "repository": "acme/app"}
        });
        let policy: TrustPolicy = serde_json::from_value(text).unwrap();
        let printed = serde_json::to_value(&policy).unwrap();
        assert_eq!(
            printed,
            json!({
                "issuer": GITHUB_ISSUER, "kind": "github",
                "audience": "https://registry.example.com",
                "claims": {"repository": "acme/app", "repository_owner_id": "1234"}
            })
        );
        assert_eq!(
            serde_json::from_value::<TrustPolicy>(printed).unwrap(),
            policy
        );
        for (bad, says) in [
            (json!({"issuer": GITHUB_ISSUER}), "needs required claims"),
            (
                json!({"issuer": GITHUB_ISSUER, "claims": {"repository": "acme/app"}}),
                "must pin repository_owner_id or repository_id",
            ),
            (
                json!({"issuer": GITHUB_ISSUER, "claims": {"repository_id": 5}}),
                "invalid type",
            ),
            (
                json!({"issuer": GITHUB_ISSUER, "claim": {"repository_id": "5"}}),
                "unknown field",
            ),
            (
                json!({"issuer": "https://ci.example.com", "claims": {"sub": "x"}}),
                "say which CI system",
            ),
            (
                json!({"issuer": "https://ci.example.com", "kind": "jenkins", "claims": {"sub": "x"}}),
                "unknown variant",
            ),
        ] {
            let err = serde_json::from_value::<TrustPolicy>(bad.clone()).unwrap_err();
            assert!(err.to_string().contains(says), "{bad}: {err}");
        }
    }

    proptest! {
        #![proptest_config(crate::property_config())]

        /// Any text parses to a pattern or an error, never a panic; a pattern
        /// matches exactly its value, or its literal prefix plus something.
        #[test]
        fn patterns_mean_what_they_say(text in any::<String>(), value in any::<String>()) {
            if let Ok(p) = Pattern::parse(&text) {
                prop_assert_eq!(Pattern::parse(p.as_str()), Ok(p.clone()));
                let spec = match text.strip_suffix('*') {
                    Some(prefix) => value.starts_with(prefix) && value.len() > prefix.len(),
                    None => value == text,
                };
                prop_assert_eq!(p.matches(&value), spec);
                let longer = format!("{}x", text.trim_end_matches('*'));
                prop_assert!(p.matches(&longer) != p.is_exact());
            }
        }

        /// A prefix pattern never matches a value that lacks the prefix, nor
        /// the prefix alone.
        #[test]
        fn prefixes_are_literal(prefix in "[a-z:/-]{1,8}", value in "[a-z:/-]{0,12}") {
            let p = Pattern::parse(&format!("{prefix}*")).unwrap();
            prop_assert!(!p.matches(&prefix));
            prop_assert_eq!(p.matches(&value), value.starts_with(&prefix) && value != prefix);
        }
    }

    #[test]
    fn a_policy_for_an_issuer_not_allow_listed_is_refused_with_why() {
        let allowed = vec![
            GITHUB_ISSUER.to_string(),
            "https://gitlab.example.com".into(),
        ];
        assert_eq!(check_allow_listed(GITHUB_ISSUER, &allowed), Ok(()));
        for unlisted in [
            GITLAB_COM_ISSUER,
            "https://token.actions.githubusercontent.com/acme",
            "https://gitlab.example.com/",
        ] {
            assert_eq!(
                check_allow_listed(unlisted, &allowed)
                    .unwrap_err()
                    .to_string(),
                format!(
                    "{unlisted} is not among the CI issuers this registry accepts tokens from (https://token.actions.githubusercontent.com, https://gitlab.example.com), so a policy for it could never match: allow-list it first (tfreg serve --ci-issuer, or the stack's CiIssuers)"
                )
            );
        }
        assert_eq!(
            check_allow_listed(GITHUB_ISSUER, &[])
                .unwrap_err()
                .to_string(),
            "https://token.actions.githubusercontent.com is not among the CI issuers this registry accepts tokens from (none: the CI exchange is off), so a policy for it could never match: allow-list it first (tfreg serve --ci-issuer, or the stack's CiIssuers)"
        );
    }
}
