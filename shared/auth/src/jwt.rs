//! What verifying a JWT from an OpenID issuer takes, shared by the sign-in's
//! ID tokens ([`crate::oidc`]) and CI jobs' tokens ([`crate::ci`]): fetching
//! JSON from the issuer (https, bounded, no redirects), its keys ([`Jwks`]:
//! fetched again on an unknown `kid` at most once per interval), and the
//! signature check ([`verify_signature`]: RS256/ES256 only, the `kid`
//! required, never a key the token carries, no `crit` extension). The
//! claims are each caller's.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use base64::Engine as _;
use jsonwebtoken::jwk::{Jwk, JwkSet, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::{Map, Value};
use tokio::sync::RwLock;

use crate::error::AuthError;

/// Largest discovery document, JWKS or token answer read from an issuer.
pub const MAX_UPSTREAM_BODY: usize = 64 * 1024;
/// Each call to an issuer gives up after this.
pub const UPSTREAM_TIMEOUT: Duration = Duration::from_secs(5);
/// An unknown `kid` fetches the keys again at most this often (per process):
/// a flood of made-up key ids cannot make us hammer the issuer.
pub const REFETCH_INTERVAL: Duration = Duration::from_secs(60);

/// An HTTP client for issuers: `tls` as the entry point trusts, no
/// redirects followed, [`UPSTREAM_TIMEOUT`] per call.
pub fn http_client(tls: rustls::ClientConfig) -> Result<reqwest::Client, AuthError> {
    reqwest::Client::builder()
        .use_preconfigured_tls(tls)
        .redirect(reqwest::redirect::Policy::none())
        .timeout(UPSTREAM_TIMEOUT)
        .build()
        .map_err(|e| AuthError::Upstream(format!("cannot make an HTTP client: {e}")))
}

/// `https://`, or `http://` to a loopback host only (an issuer on the same
/// machine, as in tests and development).
pub fn check_scheme(url: &url::Url, what: &str) -> Result<(), AuthError> {
    let loopback = match url.host() {
        Some(url::Host::Domain(d)) => d == "localhost",
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    };
    match url.scheme() {
        "https" => Ok(()),
        "http" if loopback => Ok(()),
        _ => Err(AuthError::Upstream(format!(
            "{what} {url} must be https:// (http:// only on loopback)"
        ))),
    }
}

/// A URL from an issuer's discovery document, checked as [`check_scheme`].
pub fn parse_url(text: &str, what: &str) -> Result<url::Url, AuthError> {
    let url = url::Url::parse(text)
        .map_err(|e| AuthError::Upstream(format!("discovery's {what} {text:?}: {e}")))?;
    check_scheme(&url, what)?;
    Ok(url)
}

/// `{issuer}/.well-known/openid-configuration`.
pub fn discovery_url(issuer: &str) -> Result<url::Url, AuthError> {
    let parsed = url::Url::parse(issuer)
        .map_err(|e| AuthError::Upstream(format!("issuer {issuer:?}: {e}")))?;
    check_scheme(&parsed, "the issuer")?;
    url::Url::parse(&format!(
        "{}/.well-known/openid-configuration",
        issuer.trim_end_matches('/')
    ))
    .map_err(|e| AuthError::Upstream(format!("discovery URL: {e}")))
}

/// GET `url` and read its JSON, at most [`MAX_UPSTREAM_BODY`] bytes.
pub async fn get_json<T: serde::de::DeserializeOwned>(
    http: &reqwest::Client,
    url: &url::Url,
    what: &str,
) -> Result<T, AuthError> {
    let resp = http
        .get(url.clone())
        .header(http::header::ACCEPT, "application/json")
        .send()
        .await
        .map_err(|source| AuthError::Unreachable {
            what: format!("{what} {url}"),
            source,
        })?;
    let status = resp.status();
    let body = read_capped(resp, what).await?;
    if !status.is_success() {
        return Err(AuthError::Upstream(format!("{what} {url}: HTTP {status}")));
    }
    serde_json::from_slice(&body)
        .map_err(|e| AuthError::Upstream(format!("{what} {url} is not what OpenID says: {e}")))
}

/// A response's body, at most [`MAX_UPSTREAM_BODY`] bytes.
pub async fn read_capped(mut resp: reqwest::Response, what: &str) -> Result<Vec<u8>, AuthError> {
    let mut body = Vec::new();
    while let Some(chunk) = resp
        .chunk()
        .await
        .map_err(|e| AuthError::Upstream(format!("{what}: {e}")))?
    {
        if body.len() + chunk.len() > MAX_UPSTREAM_BODY {
            return Err(AuthError::Upstream(format!(
                "{what}: larger than {MAX_UPSTREAM_BODY} bytes"
            )));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// The keys last fetched, and when an unknown `kid` last fetched them.
struct Keys {
    set: JwkSet,
    refetched_at: Option<Instant>,
}

/// An issuer's signing keys (its JWKS), kept, and fetched again when a
/// token names a key id not among them, at most once per refetch interval.
pub struct Jwks {
    uri: url::Url,
    keys: RwLock<Keys>,
    http: reqwest::Client,
    refetch_interval: Duration,
}

impl Jwks {
    /// Fetch the keys at `uri`.
    pub async fn fetch(uri: url::Url, http: reqwest::Client) -> Result<Self, AuthError> {
        // Whichever crate enables another backend later, ours is the one in use.
        let _ = jsonwebtoken::crypto::rust_crypto::DEFAULT_PROVIDER.install_default();
        let set = get_json(&http, &uri, "JWKS").await?;
        Ok(Self {
            uri,
            keys: RwLock::new(Keys {
                set,
                refetched_at: None,
            }),
            http,
            refetch_interval: REFETCH_INTERVAL,
        })
    }

    /// Change how often an unknown `kid` may fetch the keys again (tests).
    pub fn set_refetch_interval(&mut self, interval: Duration) {
        self.refetch_interval = interval;
    }

    /// The signing key `kid` names: from the keys held, else from the keys
    /// fetched again (at most once per refetch interval), else
    /// [`AuthError::UnknownKey`].
    pub async fn key_for(&self, kid: &str) -> Result<Jwk, AuthError> {
        let find = |set: &JwkSet| {
            set.keys
                .iter()
                .find(|k| {
                    k.common.key_id.as_deref() == Some(kid)
                        && !matches!(
                            k.common.public_key_use,
                            Some(ref u) if *u != PublicKeyUse::Signature
                        )
                })
                .cloned()
        };
        if let Some(key) = find(&self.keys.read().await.set) {
            return Ok(key);
        }
        let mut keys = self.keys.write().await;
        if let Some(key) = find(&keys.set) {
            return Ok(key);
        }
        if keys
            .refetched_at
            .is_some_and(|at| at.elapsed() < self.refetch_interval)
        {
            return Err(AuthError::UnknownKey(kid.to_string()));
        }
        keys.refetched_at = Some(Instant::now());
        keys.set = get_json(&self.http, &self.uri, "JWKS").await?;
        tracing::info!(kid, jwks = %self.uri, "fetched the issuer's keys again");
        find(&keys.set).ok_or_else(|| AuthError::UnknownKey(kid.to_string()))
    }
}

/// The header's algorithm, if it is one we accept (RS256, ES256), and its
/// `kid`; before any key is looked up.
fn accepted_header(token: &str) -> Result<(Algorithm, String), AuthError> {
    // Before jsonwebtoken reads the header: it refuses a `crit` it cannot
    // parse as unreadable, and ignores one it can.
    if let Some(crit) = critical_of(token) {
        return Err(AuthError::Critical(crit));
    }
    let header = jsonwebtoken::decode_header(token).map_err(|e| match alg_of(token) {
        // alg "none" and algorithms jsonwebtoken does not know fail to
        // parse here; other unreadable headers are malformed.
        Some(alg) if !matches!(alg.as_str(), "RS256" | "ES256") => AuthError::BadAlg(alg),
        _ => AuthError::Malformed(e.to_string()),
    })?;
    if !matches!(header.alg, Algorithm::RS256 | Algorithm::ES256) {
        return Err(AuthError::BadAlg(format!("{:?}", header.alg)));
    }
    let kid = header.kid.ok_or(AuthError::NoKid)?;
    Ok((header.alg, kid))
}

/// Check the algorithm and key id of `token` without a key: the refusals
/// that need no issuer (alg `none`, HS256, a `crit` header, no `kid`,
/// unreadable).
pub fn check_header(token: &str) -> Result<(), AuthError> {
    accepted_header(token).map(|_| ())
}

/// Verify `token`'s signature by one of `jwks`' keys: RS256/ES256 only,
/// the `kid` required, the key's published algorithm (if any) the header's,
/// never `jwk`/`jku` from the token. Its claims, of which nothing is
/// checked yet (not even `exp`: times are checked on the registry's clock).
pub async fn verify_signature(token: &str, jwks: &Jwks) -> Result<Map<String, Value>, AuthError> {
    let (alg, kid) = accepted_header(token)?;
    let jwk = jwks.key_for(&kid).await?;
    if let Some(published) = jwk.common.key_algorithm
        && published.to_string() != format!("{alg:?}")
    {
        return Err(AuthError::BadAlg(format!(
            "{alg:?} (the key is for {published})"
        )));
    }
    let key = DecodingKey::from_jwk(&jwk)
        .map_err(|e| AuthError::Upstream(format!("the issuer's key {kid:?} is unusable: {e}")))?;
    let mut validation = Validation::new(alg);
    validation.validate_exp = false;
    validation.validate_nbf = false;
    validation.validate_aud = false;
    validation.required_spec_claims = HashSet::new();
    let data = jsonwebtoken::decode::<Map<String, Value>>(token, &key, &validation).map_err(
        |e| match e.kind() {
            jsonwebtoken::errors::ErrorKind::InvalidSignature => AuthError::BadSignature,
            jsonwebtoken::errors::ErrorKind::InvalidAlgorithm => {
                AuthError::BadAlg(format!("{alg:?}"))
            }
            _ => AuthError::Malformed(e.to_string()),
        },
    )?;
    Ok(data.claims)
}

/// The `iss` a token claims, read WITHOUT verifying it: only to pick which
/// allow-listed issuer's keys verify it (an issuer not on the list is
/// refused before any fetch). Trust nothing else from here.
pub fn unverified_issuer(token: &str) -> Option<String> {
    let payload = token.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .ok()?;
    let value: Value = serde_json::from_slice(&bytes).ok()?;
    value.get("iss")?.as_str().map(str::to_string)
}

/// The `alg` a token's header claims, as text (for the error of one we
/// cannot parse, like `none`).
fn alg_of(token: &str) -> Option<String> {
    let head = token.split('.').next()?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(head)
        .ok()?;
    let value: Value = serde_json::from_slice(&bytes).ok()?;
    let alg = value.get("alg")?.as_str()?;
    Some(
        alg.chars()
            .filter(char::is_ascii_graphic)
            .take(16)
            .collect(),
    )
}

/// The header's `crit` (RFC 7515 4.1.11), as text, when it has one: the
/// extensions a verifier must understand or refuse the token. We implement
/// none, so any `crit` refuses it (an empty or malformed one too: the RFC
/// forbids it). jsonwebtoken ignores header members it does not know, so
/// the header is read here. At most 64 printable characters are kept.
fn critical_of(token: &str) -> Option<String> {
    let head = token.split('.').next()?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(head)
        .ok()?;
    let value: Value = serde_json::from_slice(&bytes).ok()?;
    let crit = value.get("crit")?;
    let names = match crit {
        Value::Array(names) if !names.is_empty() => names
            .iter()
            .map(|n| n.as_str().map_or_else(|| n.to_string(), str::to_string))
            .collect::<Vec<_>>()
            .join(", "),
        other => other.to_string(),
    };
    Some(
        names
            .chars()
            .filter(char::is_ascii_graphic)
            .take(64)
            .collect(),
    )
}

/// Equal, in time that does not depend on where they differ.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;

    fn token(header: Value, claims: Value) -> String {
        let part = |v: Value| URL_SAFE_NO_PAD.encode(v.to_string());
        format!("{}.{}.sig", part(header), part(claims))
    }

    #[test]
    fn headers_other_than_rs256_or_es256_with_a_kid_are_refused_without_a_key() {
        let claims = serde_json::json!({"iss": "https://ci.test"});
        for alg in ["none", "HS256", "HS512", "RS384", "PS256", "EdDSA", "ES384"] {
            let t = token(serde_json::json!({"alg": alg, "kid": "k"}), claims.clone());
            assert!(
                matches!(check_header(&t), Err(AuthError::BadAlg(a)) if a.contains(alg)),
                "{alg}: {:?}",
                check_header(&t)
            );
        }
        let t = token(serde_json::json!({"alg": "RS256"}), claims.clone());
        assert!(matches!(check_header(&t), Err(AuthError::NoKid)));
        for alg in ["RS256", "ES256"] {
            let t = token(serde_json::json!({"alg": alg, "kid": "k"}), claims.clone());
            assert!(check_header(&t).is_ok(), "{alg}");
        }
        assert!(matches!(
            check_header("not a jwt"),
            Err(AuthError::Malformed(_))
        ));
    }

    /// RFC 7515 4.1.11: an extension marked critical that the verifier does
    /// not understand refuses the token; this verifier understands none.
    #[test]
    fn a_header_with_crit_is_refused_whatever_it_names() {
        let claims = serde_json::json!({"iss": "https://ci.test"});
        for (crit, says) in [
            (serde_json::json!(["exp-unknown"]), "exp-unknown"),
            (serde_json::json!(["b64"]), "b64"),
            (serde_json::json!(["a", "b"]), "a,b"),
            (serde_json::json!([]), "[]"),
            (serde_json::json!("x"), "\"x\""),
        ] {
            let header =
                serde_json::json!({"alg": "RS256", "kid": "k", "crit": crit, "exp-unknown": 1});
            let t = token(header, claims.clone());
            match check_header(&t) {
                Err(e @ AuthError::Critical(_)) => assert_eq!(
                    e.to_string(),
                    format!(
                        "the ID token's header marks {says} critical (crit): an extension this registry does not implement, so the token is refused (RFC 7515 4.1.11)"
                    )
                ),
                other => panic!("{crit}: {other:?}"),
            }
        }
        // Without crit, the same header passes.
        let t = token(
            serde_json::json!({"alg": "RS256", "kid": "k", "exp-unknown": 1}),
            claims,
        );
        assert!(check_header(&t).is_ok());
    }

    #[test]
    fn the_unverified_issuer_only_picks_whose_keys_to_use() {
        let t = token(
            serde_json::json!({"alg": "RS256", "kid": "k"}),
            serde_json::json!({"iss": "https://ci.test"}),
        );
        assert_eq!(unverified_issuer(&t).as_deref(), Some("https://ci.test"));
        assert_eq!(unverified_issuer("a.b.c"), None);
        let t = token(serde_json::json!({}), serde_json::json!({"iss": 5}));
        assert_eq!(unverified_issuer(&t), None);
    }

    #[test]
    fn equal_bytes_only() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
    }
}
