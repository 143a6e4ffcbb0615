//! The upstream OpenID Provider: its discovery document (the exact `issuer`
//! check), its keys (JWKS, fetched again on an unknown `kid` at most once a
//! minute per process), redeeming a code (client_secret_basic), and
//! verifying an ID token (RS256/ES256 only, `kid` required, never a key the
//! token carries, `iss`, `aud`/`azp`, times on the registry's clock, nonce).

use std::collections::HashSet;
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::{Jwk, JwkSet, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;
use serde_json::{Map, Value};
use tfreg_model::oidc::{Audience, LEEWAY_SECS, Times, check_audience, check_times};
use tokio::sync::RwLock;

use crate::error::AuthError;
use crate::reach::Reach;

/// Largest discovery document, JWKS or token answer read from the provider.
pub const MAX_UPSTREAM_BODY: usize = 64 * 1024;
/// Each call to the provider gives up after this.
pub const UPSTREAM_TIMEOUT: Duration = Duration::from_secs(5);
/// An unknown `kid` fetches the keys again at most this often (per process):
/// a flood of made-up key ids cannot make us hammer the provider.
pub const REFETCH_INTERVAL: Duration = Duration::from_secs(60);

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

fn parse_url(text: &str, what: &str) -> Result<url::Url, AuthError> {
    let url = url::Url::parse(text)
        .map_err(|e| AuthError::Upstream(format!("discovery's {what} {text:?}: {e}")))?;
    check_scheme(&url, what)?;
    Ok(url)
}

/// The keys last fetched, and when an unknown `kid` last fetched them.
struct Keys {
    set: JwkSet,
    refetched_at: Option<Instant>,
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
    keys: RwLock<Keys>,
    http: reqwest::Client,
    refetch_interval: Duration,
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstream")
            .field("issuer", &self.config.issuer)
            .field("client_id", &self.config.client_id)
            .finish_non_exhaustive()
    }
}

/// An HTTP client for the provider: `tls` as the entry point trusts, no
/// redirects followed, [`UPSTREAM_TIMEOUT`] per call.
pub fn http_client(tls: rustls::ClientConfig) -> Result<reqwest::Client, AuthError> {
    reqwest::Client::builder()
        .use_preconfigured_tls(tls)
        .redirect(reqwest::redirect::Policy::none())
        .timeout(UPSTREAM_TIMEOUT)
        .build()
        .map_err(|e| AuthError::Upstream(format!("cannot make an HTTP client: {e}")))
}

/// `https://`, or `http://` to a loopback host only (a provider on the same
/// machine, as in tests and development).
fn check_scheme(url: &url::Url, what: &str) -> Result<(), AuthError> {
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

/// GET `url` and read its JSON, at most [`MAX_UPSTREAM_BODY`] bytes.
async fn get_json<T: serde::de::DeserializeOwned>(
    http: &reqwest::Client,
    url: &url::Url,
    what: &str,
) -> Result<T, AuthError> {
    let resp = http
        .get(url.clone())
        .header(http::header::ACCEPT, "application/json")
        .send()
        .await
        .map_err(|e| AuthError::Upstream(format!("{what} {url}: {e}")))?;
    let status = resp.status();
    let body = read_capped(resp, what).await?;
    if !status.is_success() {
        return Err(AuthError::Upstream(format!("{what} {url}: HTTP {status}")));
    }
    serde_json::from_slice(&body)
        .map_err(|e| AuthError::Upstream(format!("{what} {url} is not what OpenID says: {e}")))
}

async fn read_capped(mut resp: reqwest::Response, what: &str) -> Result<Vec<u8>, AuthError> {
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
        // Whichever crate enables another backend later, ours is the one in use.
        let _ = jsonwebtoken::crypto::rust_crypto::DEFAULT_PROVIDER.install_default();
        let issuer = url::Url::parse(&config.issuer)
            .map_err(|e| AuthError::Upstream(format!("issuer {:?}: {e}", config.issuer)))?;
        check_scheme(&issuer, "the issuer")?;
        let well_known = url::Url::parse(&format!(
            "{}/.well-known/openid-configuration",
            config.issuer.trim_end_matches('/')
        ))
        .map_err(|e| AuthError::Upstream(format!("discovery URL: {e}")))?;
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
        let set = get_json(&http, &meta.jwks_uri, "JWKS").await?;
        Ok(Self {
            config,
            meta,
            keys: RwLock::new(Keys {
                set,
                refetched_at: None,
            }),
            http,
            refetch_interval: REFETCH_INTERVAL,
        })
    }

    /// Change how often an unknown `kid` may fetch the keys again (tests).
    pub fn with_refetch_interval(mut self, interval: Duration) -> Self {
        self.refetch_interval = interval;
        self
    }

    pub fn issuer(&self) -> &str {
        &self.config.issuer
    }

    pub fn client_id(&self) -> &str {
        &self.config.client_id
    }

    /// The provider's authorization endpoint.
    pub fn authorization_endpoint(&self) -> &url::Url {
        &self.meta.authorization_endpoint
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
        keys.set = get_json(&self.http, &self.meta.jwks_uri, "JWKS").await?;
        tracing::info!(kid, "fetched the identity provider's keys again");
        find(&keys.set).ok_or_else(|| AuthError::UnknownKey(kid.to_string()))
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
            .map_err(|e| AuthError::Upstream(format!("token endpoint {url}: {e}")))?;
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
        let header = jsonwebtoken::decode_header(token).map_err(|e| match alg_of(token) {
            // alg "none" and algorithms jsonwebtoken does not know fail to
            // parse here; other unreadable headers are malformed.
            Some(alg) if !matches!(alg.as_str(), "RS256" | "ES256") => AuthError::BadAlg(alg),
            _ => AuthError::Malformed(e.to_string()),
        })?;
        if !matches!(header.alg, Algorithm::RS256 | Algorithm::ES256) {
            return Err(AuthError::BadAlg(format!("{:?}", header.alg)));
        }
        let kid = header.kid.as_deref().ok_or(AuthError::NoKid)?;
        let jwk = self.key_for(kid).await?;
        if let Some(published) = jwk.common.key_algorithm
            && published.to_string() != format!("{:?}", header.alg)
        {
            return Err(AuthError::BadAlg(format!(
                "{:?} (the key is for {published})",
                header.alg
            )));
        }
        let key = DecodingKey::from_jwk(&jwk).map_err(|e| {
            AuthError::Upstream(format!("the provider's key {kid:?} is unusable: {e}"))
        })?;
        let mut validation = Validation::new(header.alg);
        validation.validate_exp = false;
        validation.validate_nbf = false;
        validation.validate_aud = false;
        validation.required_spec_claims = HashSet::new();
        let data =
            jsonwebtoken::decode::<Map<String, Value>>(token, &key, &validation).map_err(|e| {
                match e.kind() {
                    jsonwebtoken::errors::ErrorKind::InvalidSignature => AuthError::BadSignature,
                    jsonwebtoken::errors::ErrorKind::InvalidAlgorithm => {
                        AuthError::BadAlg(format!("{:?}", header.alg))
                    }
                    _ => AuthError::Malformed(e.to_string()),
                }
            })?;
        let claims = data.claims;
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
            groups: tfreg_model::oidc::claim_strings(&claims, "groups"),
            nonce: got,
            exp: known.times.exp,
        })
    }
}

/// The `alg` a token's header claims, as text (for the error of one we
/// cannot parse, like `none`).
fn alg_of(token: &str) -> Option<String> {
    use base64::Engine as _;
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

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
