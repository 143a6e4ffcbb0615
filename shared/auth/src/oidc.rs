//! The upstream OpenID Provider: its discovery document (the exact `issuer`
//! check), its keys (JWKS, fetched again on an unknown `kid` at most once a
//! minute per process), redeeming a code (client_secret_basic), and
//! verifying an ID token (RS256/ES256 only, `kid` required, never a key the
//! token carries, `iss`, `aud`/`azp`, times on the registry's clock, nonce).

use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;
use tfreg_model::oidc::{Audience, LEEWAY_SECS, Times, check_audience, check_times};

use crate::error::AuthError;
use crate::jwt::{Jwks, constant_time_eq, get_json, parse_url, read_capped, verify_signature};
pub use crate::jwt::{MAX_UPSTREAM_BODY, REFETCH_INTERVAL, UPSTREAM_TIMEOUT, http_client};
use crate::reach::Reach;

/// A secret read from configuration: never printed.
#[derive(Clone)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

/// The registry as the provider's confidential client.
#[derive(Debug, Clone)]
pub struct OidcConfig {
    /// The provider's issuer URL, exactly as its ID tokens' `iss`.
    pub issuer: String,
    pub client_id: String,
    pub client_secret: Secret,
    /// The scopes asked for, space-separated ([`DEFAULT_SCOPES`]).
    pub scopes: String,
    /// The ID token claim naming the person's groups ([`DEFAULT_GROUPS_CLAIM`]).
    pub groups_claim: String,
}

/// The scopes every provider knows: the ID token, email and name. A
/// provider that wants `groups` asked for is configured to (Okta's custom
/// authorization servers); Entra ID and Google refuse a scope they do not know.
pub const DEFAULT_SCOPES: &str = "openid email profile";
/// Where Okta, Keycloak (its group membership mapper), Entra ID and most
/// others put the groups when configured to.
pub const DEFAULT_GROUPS_CLAIM: &str = "groups";

impl OidcConfig {
    /// A provider with the default scopes and groups claim.
    pub fn new(issuer: &str, client_id: &str, client_secret: Secret) -> Self {
        Self {
            issuer: issuer.to_string(),
            client_id: client_id.to_string(),
            client_secret,
            scopes: DEFAULT_SCOPES.to_string(),
            groups_claim: DEFAULT_GROUPS_CLAIM.to_string(),
        }
    }

    /// Ask for `scopes` (space-separated; `openid` is added when missing).
    pub fn with_scopes(mut self, scopes: &str) -> Self {
        let mut list: Vec<&str> = scopes.split_whitespace().collect();
        if !list.contains(&"openid") {
            list.insert(0, "openid");
        }
        self.scopes = list.join(" ");
        self
    }

    /// Read the groups from claim `name`.
    pub fn with_groups_claim(mut self, name: &str) -> Self {
        self.groups_claim = name.to_string();
        self
    }
}

/// The fields of the provider's discovery document we use.
#[derive(Debug, Clone, Deserialize)]
struct RawMeta {
    issuer: String,
    authorization_endpoint: String,
    token_endpoint: String,
    jwks_uri: String,
}

/// [`RawMeta`], its URLs parsed.
#[derive(Debug, Clone)]
struct ProviderMeta {
    authorization_endpoint: url::Url,
    token_endpoint: url::Url,
    jwks_uri: url::Url,
}

/// What a verified ID token says about the person.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdClaims {
    pub iss: String,
    pub sub: String,
    pub name: Option<String>,
    pub email: Option<String>,
    /// The groups claim (`groups`), as strings.
    pub groups: Vec<String>,
    /// The nonce the token carries (checked by [`Upstream::verify_id_token`]).
    pub nonce: String,
    /// When it expires: how long its nonce is kept as used.
    pub exp: u64,
}

#[derive(Deserialize)]
struct KnownClaims {
    iss: String,
    sub: String,
    aud: Audience,
    #[serde(default)]
    azp: Option<String>,
    #[serde(default)]
    nonce: Option<String>,
    #[serde(flatten)]
    times: Times,
}

/// The provider this registry signs people in with.
pub struct Upstream {
    config: OidcConfig,
    meta: ProviderMeta,
    keys: Jwks,
    http: reqwest::Client,
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstream")
            .field("issuer", &self.config.issuer)
            .field("client_id", &self.config.client_id)
            .finish_non_exhaustive()
    }
}

/// `application/x-www-form-urlencoded` encoding of one value (RFC 6749
/// 2.3.1 encodes the client id and secret so before Basic).
fn form_encode(value: &str) -> String {
    url::form_urlencoded::byte_serialize(value.as_bytes()).collect()
}

impl Upstream {
    /// Read the provider's discovery document (its `issuer` must be the
    /// configured one, byte for byte) and its keys.
    pub async fn discover(config: OidcConfig, http: reqwest::Client) -> Result<Self, AuthError> {
        Self::discover_within(config, http, Reach::Any).await
    }

    /// [`Upstream::discover`], every URL it or a later step fetches (the
    /// discovery document, the JWKS, the token endpoint) checked against
    /// `reach` first (give `http` a [`crate::reach::guarded_client`] too).
    pub async fn discover_within(
        config: OidcConfig,
        http: reqwest::Client,
        reach: Reach,
    ) -> Result<Self, AuthError> {
        let well_known = crate::jwt::discovery_url(&config.issuer)?;
        reach.check(&well_known, "discovery")?;
        let raw: RawMeta = get_json(&http, &well_known, "discovery").await?;
        if raw.issuer != config.issuer {
            return Err(AuthError::IssuerMismatch {
                expected: config.issuer.clone(),
                found: raw.issuer,
            });
        }
        let meta = ProviderMeta {
            authorization_endpoint: parse_url(
                &raw.authorization_endpoint,
                "authorization_endpoint",
            )?,
            token_endpoint: parse_url(&raw.token_endpoint, "token_endpoint")?,
            jwks_uri: parse_url(&raw.jwks_uri, "jwks_uri")?,
        };
        reach.check(&meta.token_endpoint, "token_endpoint")?;
        reach.check(&meta.jwks_uri, "jwks_uri")?;
        let keys = Jwks::fetch(meta.jwks_uri.clone(), http.clone()).await?;
        Ok(Self {
            config,
            meta,
            keys,
            http,
        })
    }

    /// Change how often an unknown `kid` may fetch the keys again (tests).
    pub fn with_refetch_interval(mut self, interval: Duration) -> Self {
        self.keys.set_refetch_interval(interval);
        self
    }

    pub fn issuer(&self) -> &str {
        &self.config.issuer
    }

    pub fn client_id(&self) -> &str {
        &self.config.client_id
    }

    /// The scopes asked of the provider.
    pub fn scopes(&self) -> &str {
        &self.config.scopes
    }

    /// The provider's authorization endpoint.
    pub fn authorization_endpoint(&self) -> &url::Url {
        &self.meta.authorization_endpoint
    }

    /// Redeem an authorization code (with our PKCE verifier) at the
    /// provider's token endpoint, as a confidential client
    /// (client_secret_basic); the ID token it returns. The access token is
    /// opaque to us and ignored.
    pub async fn redeem(
        &self,
        code: &str,
        verifier: &str,
        redirect_uri: &str,
    ) -> Result<String, AuthError> {
        #[derive(Deserialize)]
        struct TokenAnswer {
            id_token: Option<String>,
            error: Option<String>,
        }
        let url = &self.meta.token_endpoint;
        let resp = self
            .http
            .post(url.clone())
            .basic_auth(
                form_encode(&self.config.client_id),
                Some(form_encode(self.config.client_secret.expose())),
            )
            .header(http::header::ACCEPT, "application/json")
            .form(&[
                ("grant_type", "authorization_code"),
                ("code", code),
                ("redirect_uri", redirect_uri),
                ("code_verifier", verifier),
            ])
            .send()
            .await
            .map_err(|source| AuthError::Unreachable {
                what: format!("token endpoint {url}"),
                source,
            })?;
        let status = resp.status();
        let body = read_capped(resp, "token endpoint").await?;
        let answer: Option<TokenAnswer> = serde_json::from_slice(&body).ok();
        match answer {
            Some(TokenAnswer {
                id_token: Some(t), ..
            }) if status.is_success() => Ok(t),
            Some(TokenAnswer { error: Some(e), .. }) if status.is_client_error() => {
                // The provider's error code is its word, not ours to repeat
                // at length: a short code, printable.
                let code: String = e.chars().filter(char::is_ascii_graphic).take(64).collect();
                Err(AuthError::CodeRefused(code))
            }
            _ => Err(AuthError::Upstream(format!(
                "token endpoint {url}: HTTP {status} without an ID token"
            ))),
        }
    }

    /// Verify an ID token: signature by a published key (RS256/ES256, the
    /// `kid` required, never `jwk`/`jku` from the token), `iss`, `aud`/`azp`,
    /// times at `now` (the registry's clock) with [`LEEWAY_SECS`], and the
    /// sign-in's `nonce`.
    pub async fn verify_id_token(
        &self,
        token: &str,
        nonce: &str,
        now: u64,
    ) -> Result<IdClaims, AuthError> {
        let claims = verify_signature(token, &self.keys).await?;
        let known: KnownClaims = serde_json::from_value(Value::Object(claims.clone()))
            .map_err(|e| AuthError::Malformed(e.to_string()))?;
        if known.iss != self.config.issuer {
            return Err(AuthError::WrongIssuer);
        }
        check_audience(&known.aud, known.azp.as_deref(), &self.config.client_id)?;
        check_times(&known.times, now, LEEWAY_SECS, None)?;
        let got = known.nonce.unwrap_or_default();
        if !constant_time_eq(got.as_bytes(), nonce.as_bytes()) {
            return Err(AuthError::BadNonce);
        }
        let text = |name: &str| claims.get(name).and_then(Value::as_str).map(str::to_string);
        Ok(IdClaims {
            iss: known.iss,
            sub: known.sub,
            name: text("name"),
            email: text("email"),
            groups: tfreg_model::oidc::claim_strings(&claims, &self.config.groups_claim),
            nonce: got,
            exp: known.times.exp,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_always_ask_for_an_id_token() {
        let c = OidcConfig::new("https://idp.test", "c", Secret::new("s"));
        assert_eq!(c.scopes, "openid email profile");
        assert_eq!(c.groups_claim, "groups");
        let c = c.with_scopes("email  groups").with_groups_claim("roles");
        assert_eq!(c.scopes, "openid email groups");
        assert_eq!(c.groups_claim, "roles");
        assert_eq!(c.with_scopes("profile openid").scopes, "profile openid");
    }
}
