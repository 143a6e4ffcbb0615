//! CI jobs' OIDC tokens (issue 21): which issuers the operator allow-lists
//! ([`CiSettings`], from `tfreg serve` flags or a Lambda function's
//! environment), and verifying a token from one of them ([`CiIssuers`]):
//! the issuer picked from the allow-list by the token's `iss` (another is
//! refused before anything is fetched), its discovery document and keys
//! fetched when first needed and kept (an unknown `kid` fetches the keys
//! again as [`crate::jwt::Jwks`] says), the signature
//! ([`crate::jwt::verify_signature`]), `iss` again, exactly our audience,
//! times on the registry's clock with a cap on `exp − iat`, a `sub` and a
//! `jti`.

use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::Value;
use tfreg_model::exchange::{
    CiIdentity, DEFAULT_CI_TOKEN_TTL_SECS, MAX_CI_TOKEN_TTL_SECS, MIN_CI_TOKEN_TTL_SECS,
    check_ci_claims, check_exact_audience,
};
use tfreg_model::oidc::{Audience, CI_MAX_LIFETIME_SECS, LEEWAY_SECS, Times, check_times};
use tokio::sync::{Mutex, OnceCell};

use crate::error::AuthError;
use crate::jwt::{Jwks, check_header, discovery_url, get_json, parse_url, unverified_issuer};

/// Most CI issuers one registry allow-lists.
pub const MAX_CI_ISSUERS: usize = 16;
/// The longest cap on a CI token's lifetime an operator may set (GitLab's
/// tokens live as long as the job's timeout).
pub const MAX_CI_TOKEN_LIFETIME_SECS: u64 = 24 * 3600;
/// After an issuer's discovery failed, requests naming it are answered 502
/// without trying again for this long (a flood cannot hammer it).
pub const DISCOVERY_RETRY: Duration = Duration::from_secs(10);

/// The environment variables a Lambda entry point reads (see
/// [`CiSettings::from_lookup`]).
pub const ENV_ISSUERS: &str = "TFREG_CI_ISSUERS";
pub const ENV_AUDIENCE: &str = "TFREG_CI_AUDIENCE";
pub const ENV_TOKEN_TTL: &str = "TFREG_CI_TOKEN_TTL";
pub const ENV_MAX_TOKEN_LIFETIME: &str = "TFREG_CI_MAX_TOKEN_LIFETIME";

/// Why the CI exchange's configuration is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SettingsError {
    #[error(
        "CI issuer {0:?}: an https:// URL (http:// only on loopback), exactly the tokens' iss, no query or fragment"
    )]
    BadIssuer(String),
    #[error("CI issuer {0} is given twice")]
    DuplicateIssuer(String),
    #[error("at most {MAX_CI_ISSUERS} CI issuers")]
    TooManyIssuers,
    #[error("the CI audience must be 1 to 512 printable characters without spaces")]
    BadAudience,
    #[error("{what} {text:?}: {why}")]
    BadDuration {
        what: &'static str,
        text: String,
        why: String,
    },
    #[error("{0} is set without {ENV_ISSUERS}")]
    WithoutIssuers(&'static str),
}

/// How this registry exchanges CI jobs' OIDC tokens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CiSettings {
    /// The allow-listed issuers, each exactly as its tokens' `iss`.
    pub issuers: Vec<String>,
    /// The `aud` tokens must carry, exactly; `None`: the registry's public
    /// URL (`https://HOSTNAME`).
    pub audience: Option<String>,
    /// Lifetime of an exchanged token.
    pub token_ttl_secs: u64,
    /// The longest `exp − iat` accepted.
    pub max_token_lifetime_secs: u64,
}

impl CiSettings {
    /// Settings for `issuers` (each checked), with the defaults: the
    /// registry's URL as audience, 15-minute tokens, a 1-hour cap on the
    /// CI token's own lifetime.
    pub fn new(issuers: &[impl AsRef<str>]) -> Result<Self, SettingsError> {
        if issuers.len() > MAX_CI_ISSUERS {
            return Err(SettingsError::TooManyIssuers);
        }
        let mut checked: Vec<String> = Vec::new();
        for issuer in issuers {
            let issuer = check_issuer(issuer.as_ref())?;
            if checked.contains(&issuer) {
                return Err(SettingsError::DuplicateIssuer(issuer));
            }
            checked.push(issuer);
        }
        Ok(Self {
            issuers: checked,
            audience: None,
            token_ttl_secs: DEFAULT_CI_TOKEN_TTL_SECS,
            max_token_lifetime_secs: CI_MAX_LIFETIME_SECS,
        })
    }

    /// With `audience` (checked) instead of the registry's URL.
    pub fn with_audience(mut self, audience: &str) -> Result<Self, SettingsError> {
        if audience.is_empty()
            || audience.len() > 512
            || !audience.bytes().all(|b| b.is_ascii_graphic())
        {
            return Err(SettingsError::BadAudience);
        }
        self.audience = Some(audience.to_string());
        Ok(self)
    }

    /// The exchange's settings from variables as `get` gives them (a Lambda
    /// function's environment): [`ENV_ISSUERS`] (comma- or space-separated;
    /// unset or empty: no exchange, `None`), [`ENV_AUDIENCE`],
    /// [`ENV_TOKEN_TTL`] and [`ENV_MAX_TOKEN_LIFETIME`] (`15m`, `1h`, `900`
    /// seconds).
    pub fn from_lookup(
        get: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<Self>, SettingsError> {
        let get = |name| get(name).filter(|v| !v.trim().is_empty());
        let Some(list) = get(ENV_ISSUERS) else {
            for other in [ENV_AUDIENCE, ENV_TOKEN_TTL, ENV_MAX_TOKEN_LIFETIME] {
                if get(other).is_some() {
                    return Err(SettingsError::WithoutIssuers(other));
                }
            }
            return Ok(None);
        };
        let issuers: Vec<&str> = list
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|s| !s.is_empty())
            .collect();
        let mut settings = Self::new(&issuers)?;
        if let Some(aud) = get(ENV_AUDIENCE) {
            settings = settings.with_audience(aud.trim())?;
        }
        if let Some(ttl) = get(ENV_TOKEN_TTL) {
            settings.token_ttl_secs = parse_token_ttl(&ttl)?;
        }
        if let Some(cap) = get(ENV_MAX_TOKEN_LIFETIME) {
            settings.max_token_lifetime_secs = parse_max_lifetime(&cap)?;
        }
        Ok(Some(settings))
    }

    /// The audience tokens must carry on a registry at `public_url`.
    pub fn audience_for<'a>(&'a self, public_url: &'a str) -> &'a str {
        self.audience.as_deref().unwrap_or(public_url)
    }
}

/// An allow-listed issuer: `https://` (or `http://` on loopback), a host,
/// no credentials, query or fragment. Kept as given: it is compared byte
/// for byte with tokens' `iss`.
pub fn check_issuer(issuer: &str) -> Result<String, SettingsError> {
    match tfreg_model::trust::issuer_url(issuer, 512) {
        Some(url) if crate::jwt::check_scheme(&url, "issuer").is_ok() => Ok(issuer.to_string()),
        _ => Err(SettingsError::BadIssuer(issuer.to_string())),
    }
}

/// A duration as `15m`, `1h`, `90s` or plain seconds.
fn parse_duration(what: &'static str, text: &str) -> Result<u64, SettingsError> {
    let text = text.trim();
    let bad = |why: String| SettingsError::BadDuration {
        what,
        text: text.to_string(),
        why,
    };
    let (digits, unit) = text.split_at(
        text.find(|c: char| !c.is_ascii_digit())
            .unwrap_or(text.len()),
    );
    let n: u64 = digits
        .parse()
        .map_err(|_| bad("a number of seconds, or with s, m or h".into()))?;
    let scale = match unit {
        "" | "s" => 1,
        "m" => 60,
        "h" => 3600,
        _ => return Err(bad("a number of seconds, or with s, m or h".into())),
    };
    n.checked_mul(scale).ok_or_else(|| bad("too long".into()))
}

/// An exchanged token's lifetime: 1 minute to 1 hour.
pub fn parse_token_ttl(text: &str) -> Result<u64, SettingsError> {
    let secs = parse_duration("the CI token lifetime", text)?;
    if !(MIN_CI_TOKEN_TTL_SECS..=MAX_CI_TOKEN_TTL_SECS).contains(&secs) {
        return Err(SettingsError::BadDuration {
            what: "the CI token lifetime",
            text: text.to_string(),
            why: "between 1m and 1h".into(),
        });
    }
    Ok(secs)
}

/// The cap on a CI token's `exp − iat`: 1 minute to 24 hours.
pub fn parse_max_lifetime(text: &str) -> Result<u64, SettingsError> {
    let secs = parse_duration("the CI OIDC token lifetime cap", text)?;
    if !(60..=MAX_CI_TOKEN_LIFETIME_SECS).contains(&secs) {
        return Err(SettingsError::BadDuration {
            what: "the CI OIDC token lifetime cap",
            text: text.to_string(),
            why: "between 1m and 24h".into(),
        });
    }
    Ok(secs)
}

/// What a CI token must say besides its signature and `iss`.
#[derive(Deserialize)]
struct CiKnownClaims {
    iss: String,
    aud: Audience,
    #[serde(flatten)]
    times: Times,
}

/// The part of an issuer's discovery document used here.
#[derive(Deserialize)]
struct CiMeta {
    issuer: String,
    jwks_uri: String,
}

/// One allow-listed issuer: its keys once first needed.
struct Issuer {
    issuer: String,
    keys: OnceCell<Jwks>,
    /// When its discovery last failed (answered 502 until [`DISCOVERY_RETRY`]).
    failed_at: Mutex<Option<Instant>>,
}

/// The allow-listed CI issuers and how their tokens are verified.
pub struct CiIssuers {
    issuers: Vec<Issuer>,
    http: reqwest::Client,
    max_lifetime_secs: u64,
}

impl std::fmt::Debug for CiIssuers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.issuers.iter().map(|i| i.issuer.as_str()).collect();
        f.debug_struct("CiIssuers")
            .field("issuers", &names)
            .finish()
    }
}

impl CiIssuers {
    /// The issuers of `settings`; nothing is fetched until a token names one.
    pub fn new(settings: &CiSettings, http: reqwest::Client) -> Self {
        Self {
            issuers: settings
                .issuers
                .iter()
                .map(|issuer| Issuer {
                    issuer: issuer.clone(),
                    keys: OnceCell::new(),
                    failed_at: Mutex::new(None),
                })
                .collect(),
            http,
            max_lifetime_secs: settings.max_token_lifetime_secs,
        }
    }

    /// The keys of `issuer`: its discovery document (whose `issuer` must be
    /// it, byte for byte) and JWKS, fetched the first time.
    async fn keys<'a>(&self, issuer: &'a Issuer) -> Result<&'a Jwks, AuthError> {
        if let Some(keys) = issuer.keys.get() {
            return Ok(keys);
        }
        let mut failed_at = issuer.failed_at.lock().await;
        if failed_at.is_some_and(|at| at.elapsed() < DISCOVERY_RETRY) {
            return Err(AuthError::Upstream(format!(
                "{} could not be reached a moment ago",
                issuer.issuer
            )));
        }
        let fetched = issuer
            .keys
            .get_or_try_init(|| async {
                let url = discovery_url(&issuer.issuer)?;
                let meta: CiMeta = get_json(&self.http, &url, "discovery").await?;
                if meta.issuer != issuer.issuer {
                    return Err(AuthError::IssuerMismatch {
                        expected: issuer.issuer.clone(),
                        found: meta.issuer,
                    });
                }
                let jwks_uri = parse_url(&meta.jwks_uri, "jwks_uri")?;
                let keys = Jwks::fetch(jwks_uri, self.http.clone()).await?;
                tracing::info!(issuer = issuer.issuer, "read the CI issuer's keys");
                Ok(keys)
            })
            .await;
        *failed_at = fetched.is_err().then(Instant::now);
        fetched
    }

    /// Verify a CI job's OIDC token at `now` (the registry's clock) for
    /// `audience`: the identity it names, and all of its claims (to match
    /// trust policies against).
    pub async fn verify(
        &self,
        token: &str,
        audience: &str,
        now: u64,
    ) -> Result<(CiIdentity, serde_json::Map<String, Value>), AuthError> {
        // Refusals that need no key first: no fetch for a token that cannot pass.
        check_header(token)?;
        let claimed = unverified_issuer(token).ok_or_else(|| {
            AuthError::Malformed("the token's payload names no issuer (iss)".into())
        })?;
        let issuer = self
            .issuers
            .iter()
            .find(|i| i.issuer == claimed)
            .ok_or(AuthError::UnknownIssuer)?;
        let keys = self.keys(issuer).await?;
        let claims = crate::jwt::verify_signature(token, keys).await?;
        let known: CiKnownClaims = serde_json::from_value(Value::Object(claims.clone()))
            .map_err(|e| AuthError::Malformed(e.to_string()))?;
        if known.iss != issuer.issuer {
            return Err(AuthError::WrongIssuer);
        }
        check_exact_audience(&known.aud, audience)?;
        check_times(&known.times, now, LEEWAY_SECS, Some(self.max_lifetime_secs))?;
        let identity = check_ci_claims(&known.iss, known.times.exp, &claims)?;
        Ok((identity, claims))
    }

    /// The issuers, as configured.
    pub fn issuers(&self) -> impl Iterator<Item = &str> {
        self.issuers.iter().map(|i| i.issuer.as_str())
    }

    /// Change how often an unknown `kid` fetches an issuer's keys again (tests).
    pub fn set_refetch_interval(&mut self, interval: Duration) {
        for issuer in &mut self.issuers {
            if let Some(keys) = issuer.keys.get_mut() {
                keys.set_refetch_interval(interval);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn lookup(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| map.get(name).cloned()
    }

    #[test]
    fn settings_from_the_environment() {
        assert_eq!(CiSettings::from_lookup(lookup(&[])), Ok(None));
        assert_eq!(
            CiSettings::from_lookup(lookup(&[(ENV_ISSUERS, " ")])),
            Ok(None)
        );
        let s = CiSettings::from_lookup(lookup(&[(
            ENV_ISSUERS,
            "https://token.actions.githubusercontent.com, https://gitlab.com",
        )]))
        .unwrap()
        .unwrap();
        assert_eq!(
            s.issuers,
            [
                "https://token.actions.githubusercontent.com",
                "https://gitlab.com"
            ]
        );
        assert_eq!(s.audience, None);
        assert_eq!(
            s.audience_for("https://r.example.com"),
            "https://r.example.com"
        );
        assert_eq!(s.token_ttl_secs, 900);
        assert_eq!(s.max_token_lifetime_secs, 3600);
        let s = CiSettings::from_lookup(lookup(&[
            (ENV_ISSUERS, "https://gitlab.example.com"),
            (ENV_AUDIENCE, "tfreg"),
            (ENV_TOKEN_TTL, "30m"),
            (ENV_MAX_TOKEN_LIFETIME, "3h"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(s.audience_for("https://r.example.com"), "tfreg");
        assert_eq!(s.token_ttl_secs, 1800);
        assert_eq!(s.max_token_lifetime_secs, 3 * 3600);
        assert_eq!(
            CiSettings::from_lookup(lookup(&[(ENV_AUDIENCE, "x")])),
            Err(SettingsError::WithoutIssuers(ENV_AUDIENCE))
        );
    }

    #[test]
    fn bad_settings_are_refused_with_why() {
        for bad in [
            "http://ci.example.com",
            "ftp://ci.example.com",
            "https://ci.example.com?x=1",
            "https://ci.example.com#x",
            "https://u:p@ci.example.com",
            "https://",
            "ci.example.com",
            "https://ci.example .com",
        ] {
            assert!(
                matches!(CiSettings::new(&[bad]), Err(SettingsError::BadIssuer(_))),
                "{bad}"
            );
        }
        assert!(CiSettings::new(&["http://127.0.0.1:9000"]).is_ok());
        assert_eq!(
            CiSettings::new(&["https://a.test", "https://a.test"]),
            Err(SettingsError::DuplicateIssuer("https://a.test".into()))
        );
        let many: Vec<String> = (0..=MAX_CI_ISSUERS)
            .map(|i| format!("https://ci{i}.test"))
            .collect();
        assert_eq!(CiSettings::new(&many), Err(SettingsError::TooManyIssuers));
        let ok = CiSettings::new(&["https://a.test"]).unwrap();
        assert!(ok.clone().with_audience("a b").is_err());
        assert!(ok.clone().with_audience("").is_err());
        for (ttl, secs) in [("15m", Some(900)), ("60", Some(60)), ("1h", Some(3600))] {
            assert_eq!(parse_token_ttl(ttl).ok(), secs, "{ttl}");
        }
        for bad in ["59s", "61m", "2h", "0", "x", "5d", "-1m", ""] {
            assert!(parse_token_ttl(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_max_lifetime("2h"), Ok(7200));
        assert!(parse_max_lifetime("25h").is_err());
    }
}
