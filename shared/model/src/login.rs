//! The `login.v1` protocol as `terraform login` and `tofu login` speak it to
//! the registry (issue 21), as pure checks: the registry is the OAuth server
//! and the CLI a public client that always uses PKCE S256, a random `state`
//! and the redirect URI `http://localhost:PORT/login`, with PORT taken from
//! the advertised range. No I/O: the handler stores what these return (a
//! pending login, a single-use code) in the item store.
//!
//! - [`PortRange`]: the `ports` advertised in discovery.
//! - [`redirect_port`]: the one redirect URI shape accepted.
//! - [`AuthorizeRequest::parse`], [`TokenRequest::parse`]: the two requests.
//! - [`IssuedCode::redeem`]: a code exchanged by the client it was issued to.
//! - [`pkce_challenge`], [`verify_pkce`]: RFC 7636 S256 (never `plain`).
//! - [`random_value`], [`lookup_key`]: secrets made here, and the hash a
//!   secret is stored under (never the secret itself).

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The path of every redirect URI Terraform and OpenTofu send.
pub const REDIRECT_PATH: &str = "/login";
/// The only grant `login.v1` advertises.
pub const GRANT_AUTHZ_CODE: &str = "authz_code";
/// The client id Terraform (and OpenTofu, `tfreg login`) use: public, no
/// secret. Advertised by discovery (the read function too, which links no
/// sign-in code) and required at the authorize endpoint.
pub const CLI_CLIENT_ID: &str = "terraform-cli";
/// The longest `state` accepted (Terraform sends a UUID, 36 characters).
pub const MAX_STATE_LEN: usize = 256;
/// How long a code issued to the CLI may wait for its exchange.
pub const CODE_TTL_SECS: u64 = 60;
/// Random bytes in every value made by [`random_value`].
pub const RANDOM_BYTES: usize = 32;

/// Why a `login.v1` request is refused, as OAuth 2.0 names it (RFC 6749
/// 4.1.2.1 and 5.2). An authorize request with a bad client or redirect
/// URI is answered with a page (400) and never redirected; the token
/// endpoint answers JSON `{"error": code, "error_description": ...}`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {description}")]
pub struct OAuthError {
    pub code: &'static str,
    pub description: String,
}

impl OAuthError {
    pub fn invalid_request(description: impl Into<String>) -> Self {
        Self::new("invalid_request", description)
    }

    pub fn invalid_grant(description: impl Into<String>) -> Self {
        Self::new("invalid_grant", description)
    }

    /// The person was not signed in (RFC 6749 4.1.2.1): the provider said
    /// no, its ID token failed a check, or their groups give nothing here.
    pub fn access_denied(description: impl Into<String>) -> Self {
        Self::new("access_denied", description)
    }

    fn new(code: &'static str, description: impl Into<String>) -> Self {
        Self {
            code,
            description: description.into(),
        }
    }
}

/// The loopback ports a CLI may listen on, as advertised in `login.v1`.
/// Terraform picks `min + rand(max - min)`: `max` itself is never chosen
/// and `min == max` fails in the CLI, so a range holds at least two ports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortRange {
    min: u16,
    max: u16,
}

impl PortRange {
    /// Terraform's default when `ports` is absent.
    pub const TERRAFORM_DEFAULT: PortRange = PortRange {
        min: 1024,
        max: 65535,
    };

    /// A range Terraform accepts: both ends at least 1024, `min < max`.
    pub fn new(min: u16, max: u16) -> Result<Self, crate::Invalid> {
        if min < 1024 {
            return Err(crate::Invalid::bad(format!(
                "login ports start at 1024 or above (Terraform refuses {min})"
            )));
        }
        if min >= max {
            return Err(crate::Invalid::bad(format!(
                "login ports {min}-{max}: the first must be below the last (Terraform never listens on the last, and fails when they are equal)"
            )));
        }
        Ok(Self { min, max })
    }

    pub fn min(self) -> u16 {
        self.min
    }

    pub fn max(self) -> u16 {
        self.max
    }

    /// Whether `port` is in the advertised range, both ends included.
    pub fn contains(self, port: u16) -> bool {
        (self.min..=self.max).contains(&port)
    }

    /// The `ports` value of discovery's `login.v1`.
    pub fn advertised(self) -> [u16; 2] {
        [self.min, self.max]
    }
}

/// The port of a redirect URI that is exactly `http://localhost:PORT/login`
/// with PORT in `ports`: the byte-for-byte shape Terraform and OpenTofu send
/// (`fmt.Sprintf("http://localhost:%d/login", port)`). Nothing is normalised:
/// another case, scheme, host, user info, escape, trailing slash, query or
/// fragment is refused, so no parser can read it as another host.
pub fn redirect_port(uri: &str, ports: PortRange) -> Result<u16, OAuthError> {
    let refuse = || {
        OAuthError::invalid_request(format!(
            "redirect_uri must be http://localhost:PORT{REDIRECT_PATH} with PORT in {}-{}",
            ports.min, ports.max
        ))
    };
    let rest = uri.strip_prefix("http://localhost:").ok_or_else(refuse)?;
    let digits = rest.strip_suffix(REDIRECT_PATH).ok_or_else(refuse)?;
    let canonical = !digits.is_empty()
        && digits.len() <= 5
        && digits.bytes().all(|b| b.is_ascii_digit())
        && !digits.starts_with('0');
    if !canonical {
        return Err(refuse());
    }
    let port: u16 = digits.parse().map_err(|_| refuse())?;
    if !ports.contains(port) {
        return Err(refuse());
    }
    // The same string through a URL parser: one host, no user info, the
    // path and nothing else, and nothing it would rewrite.
    let parsed = url::Url::parse(uri).map_err(|_| refuse())?;
    let same = parsed.scheme() == "http"
        && parsed.host_str() == Some("localhost")
        && parsed.port() == Some(port)
        && parsed.username().is_empty()
        && parsed.password().is_none()
        && parsed.path() == REDIRECT_PATH
        && parsed.query().is_none()
        && parsed.fragment().is_none()
        && parsed.as_str() == uri;
    if !same {
        return Err(refuse());
    }
    Ok(port)
}

/// `base64url(sha256(verifier))`, the S256 code challenge (RFC 7636 4.2).
pub fn pkce_challenge(verifier: &str) -> String {
    URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

/// A `code_verifier` as RFC 7636 4.1 allows: 43 to 128 characters of
/// `[A-Za-z0-9-._~]`.
pub fn check_verifier(verifier: &str) -> Result<(), OAuthError> {
    let allowed = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~');
    if !(43..=128).contains(&verifier.len()) || !verifier.bytes().all(allowed) {
        return Err(OAuthError::invalid_grant(
            "code_verifier must be 43 to 128 characters of A-Z a-z 0-9 - . _ ~",
        ));
    }
    Ok(())
}

/// An S256 `code_challenge` as the authorize request must carry it: 43
/// characters of base64url, the encoding of 32 bytes.
pub fn check_challenge(challenge: &str) -> Result<(), OAuthError> {
    let decoded = URL_SAFE_NO_PAD.decode(challenge).ok();
    if challenge.len() != 43 || decoded.is_none_or(|d| d.len() != 32) {
        return Err(OAuthError::invalid_request(
            "code_challenge must be the base64url SHA-256 of the code_verifier (43 characters)",
        ));
    }
    Ok(())
}

/// The `code_challenge_method`: S256 only. `plain` (or none, which means
/// `plain`) is refused.
pub fn check_challenge_method(method: Option<&str>) -> Result<(), OAuthError> {
    match method {
        Some("S256") => Ok(()),
        Some("plain") | None => Err(OAuthError::invalid_request(
            "PKCE with code_challenge_method=S256 is required (plain is not accepted)",
        )),
        Some(other) => Err(OAuthError::invalid_request(format!(
            "unknown code_challenge_method {other:?}: use S256"
        ))),
    }
}

/// Whether `verifier` is the one `challenge` was made from (S256).
pub fn verify_pkce(verifier: &str, challenge: &str) -> Result<(), OAuthError> {
    check_verifier(verifier)?;
    if !constant_time_eq(pkce_challenge(verifier).as_bytes(), challenge.as_bytes()) {
        return Err(OAuthError::invalid_grant(
            "code_verifier does not match the code_challenge",
        ));
    }
    Ok(())
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A fresh secret: [`RANDOM_BYTES`] random bytes as base64url, 43
/// characters (a valid `code_verifier`, `state`, `nonce` or code). From
/// `rand`'s thread generator, a CSPRNG seeded by the OS, as API tokens are.
pub fn random_value() -> String {
    URL_SAFE_NO_PAD.encode(rand::random::<[u8; RANDOM_BYTES]>())
}

/// The key a secret (a code, a `state`) is stored under: its sha256 in hex,
/// so the store never holds a secret a reader could replay.
pub fn lookup_key(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

/// A form or query string's parameters, each at most once (RFC 6749 3.1:
/// "Request and response parameters MUST NOT be included more than once").
fn params(encoded: &str, names: &[&'static str]) -> Result<Vec<Option<String>>, OAuthError> {
    let mut values: Vec<Option<String>> = vec![None; names.len()];
    for (name, value) in url::form_urlencoded::parse(encoded.as_bytes()) {
        if let Some(i) = names.iter().position(|n| *n == name) {
            if values[i].is_some() {
                return Err(OAuthError::invalid_request(format!(
                    "{name} is given more than once"
                )));
            }
            values[i] = Some(value.into_owned());
        }
    }
    Ok(values)
}

fn required(value: Option<String>, name: &str) -> Result<String, OAuthError> {
    value
        .filter(|v| !v.is_empty())
        .ok_or_else(|| OAuthError::invalid_request(format!("{name} is missing")))
}

/// Why an authorize request is refused, and where the answer goes: a page
/// while the client or redirect URI is in doubt (`back_to` is `None`),
/// else the CLI's own listener, as RFC 6749 4.1.2.1 says: its redirect URI
/// with `error`, `error_description` and the request's `state`, so the
/// CLI stops waiting and says why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{error}")]
pub struct AuthorizeRefusal {
    pub error: OAuthError,
    pub back_to: Option<String>,
}

impl AuthorizeRefusal {
    /// A refusal sent back to `redirect_uri` (already checked: `http`,
    /// loopback, no query), naming `state` when it is fit to echo.
    pub fn back_to(redirect_uri: &str, state: Option<&str>, error: OAuthError) -> Self {
        let back_to = url::Url::parse(redirect_uri).ok().map(|mut url| {
            {
                let mut query = url.query_pairs_mut();
                query
                    .append_pair("error", error.code)
                    .append_pair("error_description", &error.description);
                if let Some(state) = state
                    .filter(|s| s.len() <= MAX_STATE_LEN && s.bytes().all(|b| b.is_ascii_graphic()))
                {
                    query.append_pair("state", state);
                }
            }
            url.to_string()
        });
        Self { error, back_to }
    }
}

impl From<OAuthError> for AuthorizeRefusal {
    fn from(error: OAuthError) -> Self {
        Self {
            error,
            back_to: None,
        }
    }
}

/// The CLI's authorize request (`login.v1` `authz`), checked. Until the
/// client and redirect URI are known good, an error must be shown as a page
/// and never redirected to the redirect URI.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuthorizeRequest {
    pub redirect_uri: String,
    pub port: u16,
    /// The CLI's `state`, returned untouched with the code.
    pub state: String,
    /// The S256 challenge the code's exchange must answer.
    pub code_challenge: String,
}

impl AuthorizeRequest {
    /// Parse the query of `GET authz`: `response_type=code`, the advertised
    /// `client_id`, a [`redirect_port`] URI, a `state`, and PKCE S256.
    pub fn parse(query: &str, client_id: &str, ports: PortRange) -> Result<Self, AuthorizeRefusal> {
        let [
            response_type,
            got_client,
            redirect_uri,
            state,
            challenge,
            method,
        ]: [Option<String>; 6] = params(
            query,
            &[
                "response_type",
                "client_id",
                "redirect_uri",
                "state",
                "code_challenge",
                "code_challenge_method",
            ],
        )?
        .try_into()
        .expect("six names, six values");
        if required(got_client, "client_id")? != client_id {
            return Err(OAuthError::new(
                "unauthorized_client",
                format!("unknown client_id: this registry's CLI client is {client_id:?}"),
            )
            .into());
        }
        let redirect_uri = required(redirect_uri, "redirect_uri")?;
        let port = redirect_port(&redirect_uri, ports)?;
        // The client and its redirect URI are good: from here on the CLI
        // hears of a refusal at its listener, with its `state`.
        let back =
            |error: OAuthError| AuthorizeRefusal::back_to(&redirect_uri, state.as_deref(), error);
        let checked = || -> Result<(String, String), OAuthError> {
            if response_type.as_deref() != Some("code") {
                return Err(OAuthError::new(
                    "unsupported_response_type",
                    "response_type must be code",
                ));
            }
            let state = required(state.clone(), "state")?;
            if state.len() > MAX_STATE_LEN || state.bytes().any(|b| !b.is_ascii_graphic()) {
                return Err(OAuthError::invalid_request(format!(
                    "state must be at most {MAX_STATE_LEN} printable ASCII characters"
                )));
            }
            check_challenge_method(method.as_deref())?;
            let code_challenge = required(challenge.clone(), "code_challenge")?;
            check_challenge(&code_challenge)?;
            Ok((state, code_challenge))
        };
        let (state, code_challenge) = checked().map_err(back)?;
        Ok(Self {
            redirect_uri,
            port,
            state,
            code_challenge,
        })
    }
}

/// The CLI's token request (`login.v1` `token`), a form POST.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenRequest {
    pub code: String,
    pub redirect_uri: String,
    pub code_verifier: String,
    pub client_id: String,
}

impl TokenRequest {
    /// Parse `grant_type=authorization_code&code&redirect_uri&code_verifier&client_id`.
    pub fn parse(form: &str) -> Result<Self, OAuthError> {
        let [grant_type, code, redirect_uri, code_verifier, client_id]: [Option<String>; 5] =
            params(
                form,
                &[
                    "grant_type",
                    "code",
                    "redirect_uri",
                    "code_verifier",
                    "client_id",
                ],
            )?
            .try_into()
            .expect("five names, five values");
        if grant_type.as_deref() != Some("authorization_code") {
            return Err(OAuthError::new(
                "unsupported_grant_type",
                "grant_type must be authorization_code",
            ));
        }
        Ok(Self {
            code: required(code, "code")?,
            redirect_uri: required(redirect_uri, "redirect_uri")?,
            code_verifier: required(code_verifier, "code_verifier")?,
            client_id: required(client_id, "client_id")?,
        })
    }
}

/// What the registry keeps for a code it issued to the CLI (under
/// [`lookup_key`] of the code, expiring at `expires_at`), taken once by
/// the exchange.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IssuedCode {
    pub client_id: String,
    pub redirect_uri: String,
    pub code_challenge: String,
    /// Unix seconds; at most [`CODE_TTL_SECS`] after it was issued.
    pub expires_at: u64,
}

impl IssuedCode {
    /// The code's record for `request`, issued at `now`.
    pub fn new(client_id: &str, request: &AuthorizeRequest, now: u64) -> Self {
        Self {
            client_id: client_id.to_string(),
            redirect_uri: request.redirect_uri.clone(),
            code_challenge: request.code_challenge.clone(),
            expires_at: now + CODE_TTL_SECS,
        }
    }

    /// Whether `request` may exchange this code at `now`: in time, by the
    /// same client, with the same redirect URI, answering its challenge.
    /// Every refusal is `invalid_grant`. The caller has already taken the
    /// record out of the store, so a code is never exchanged twice.
    pub fn redeem(&self, request: &TokenRequest, now: u64) -> Result<(), OAuthError> {
        if now > self.expires_at {
            return Err(OAuthError::invalid_grant(
                "the code has expired: run the login again",
            ));
        }
        if request.client_id != self.client_id {
            return Err(OAuthError::invalid_grant(
                "the code was issued to another client",
            ));
        }
        if request.redirect_uri != self.redirect_uri {
            return Err(OAuthError::invalid_grant(
                "redirect_uri differs from the authorization request's",
            ));
        }
        verify_pkce(&request.code_verifier, &self.code_challenge)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PORTS: PortRange = PortRange {
        min: 10000,
        max: 10010,
    };
    const CLIENT: &str = "terraform-cli";
    // RFC 7636 appendix B.
    const VERIFIER: &str = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
    const CHALLENGE: &str = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";

    #[test]
    fn port_ranges_are_what_terraform_accepts() {
        assert!(PortRange::new(10000, 10010).is_ok());
        assert!(PortRange::new(1023, 2000).is_err());
        assert!(
            PortRange::new(10000, 10000).is_err(),
            "min == max fails in Terraform"
        );
        assert!(PortRange::new(10001, 10000).is_err());
        assert_eq!(
            PortRange::new(10000, 10010).unwrap().advertised(),
            [10000, 10010]
        );
    }

    #[test]
    fn the_one_redirect_uri_shape_is_accepted() {
        assert_eq!(
            redirect_port("http://localhost:10000/login", PORTS),
            Ok(10000)
        );
        assert_eq!(
            redirect_port("http://localhost:10009/login", PORTS),
            Ok(10009)
        );
        assert_eq!(
            redirect_port("http://localhost:10010/login", PORTS),
            Ok(10010)
        );
    }

    #[test]
    fn every_other_redirect_uri_is_refused() {
        for uri in [
            "http://localhost.evil.com/login",
            "http://localhost.evil.com:10000/login",
            "http://localhost:1@evil.com/login",
            "http://localhost:10000@evil.com/login",
            "http://localhost:10000%40evil.com/login",
            "http://localhost%25@evil.com:10000/login",
            "http://localhost:10000%25@evil.com/login",
            "http://localhost%2eevil.com:10000/login",
            "http://localhost:10000/login%2f..",
            "http://localhost:10000/%6cogin",
            "http://localhost:9999/login",
            "http://localhost:10011/login",
            "http://localhost:65536/login",
            "http://localhost:010000/login",
            "http://localhost:+10000/login",
            "http://localhost:/login",
            "http://localhost/login",
            "http://localhost:10000/login/",
            "http://localhost:10000/login/../login",
            "http://localhost:10000/Login",
            "http://localhost:10000//login",
            "http://localhost:10000/login?x=1",
            "http://localhost:10000/login?",
            "http://localhost:10000/login#frag",
            "http://localhost:10000/login#",
            "https://localhost:10000/login",
            "HTTP://localhost:10000/login",
            "http://LOCALHOST:10000/login",
            "http://127.0.0.1:10000/login",
            "http://[::1]:10000/login",
            "http://localhost.:10000/login",
            "http:/localhost:10000/login",
            "http://localhost:10000/login ",
            " http://localhost:10000/login",
            "http://localhost:10000\\@evil.com/login",
            "http://localhost:10000\t/login",
            "http://evil.com/http://localhost:10000/login",
            "",
        ] {
            let err = redirect_port(uri, PORTS).expect_err(uri);
            assert_eq!(err.code, "invalid_request", "{uri}");
        }
    }

    #[test]
    fn pkce_s256_matches_rfc_7636() {
        assert_eq!(pkce_challenge(VERIFIER), CHALLENGE);
        assert_eq!(verify_pkce(VERIFIER, CHALLENGE), Ok(()));
        check_challenge(CHALLENGE).unwrap();
    }

    #[test]
    fn pkce_refuses_plain_wrong_and_malformed_verifiers() {
        assert!(check_challenge_method(Some("S256")).is_ok());
        for method in [Some("plain"), None, Some("s256"), Some("S512")] {
            assert_eq!(
                check_challenge_method(method).unwrap_err().code,
                "invalid_request"
            );
        }
        // `plain`: the verifier as its own challenge.
        assert_eq!(
            verify_pkce(VERIFIER, VERIFIER).unwrap_err().code,
            "invalid_grant"
        );
        let other = random_value();
        assert_eq!(
            verify_pkce(&other, CHALLENGE).unwrap_err().code,
            "invalid_grant"
        );
        for bad in [
            &VERIFIER[..42],                               // too short
            &"a".repeat(129),                              // too long
            "dBjftJeZ4CVP+mB92K27uhbUJU1p1r/wW1gFWFOEjXk", // base64, not url-safe
            "dBjftJeZ4CVP mB92K27uhbUJU1p1r_wW1gFWFOEjXk",
            "dBjftJeZ4CVP%2DmB92K27uhbUJU1p1r_wW1gFWFOEjX",
        ] {
            assert!(check_verifier(bad).is_err(), "{bad}");
        }
        assert!(check_verifier(&"a.b-c_d~".repeat(16)).is_ok());
        for bad in [
            "",
            &CHALLENGE[..42],
            &format!("{CHALLENGE}A"),
            VERIFIER.trim_end_matches('k'),
        ] {
            assert!(check_challenge(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn random_values_are_fresh_and_usable_as_verifiers() {
        let a = random_value();
        let b = random_value();
        assert_ne!(a, b);
        assert_eq!(a.len(), 43);
        check_verifier(&a).unwrap();
        assert_eq!(lookup_key(&a).len(), 64);
        assert_ne!(lookup_key(&a), a);
    }

    fn authorize_query(redirect_uri: &str) -> String {
        url::form_urlencoded::Serializer::new(String::new())
            .append_pair("client_id", CLIENT)
            .append_pair("code_challenge", CHALLENGE)
            .append_pair("code_challenge_method", "S256")
            .append_pair("redirect_uri", redirect_uri)
            .append_pair("response_type", "code")
            .append_pair("state", "8b3c4f9e-5d4e-4b0c-9a1e-2f7d6c5b4a39")
            .finish()
    }

    #[test]
    fn terraforms_authorize_request_parses() {
        let request = AuthorizeRequest::parse(
            &authorize_query("http://localhost:10003/login"),
            CLIENT,
            PORTS,
        )
        .unwrap();
        assert_eq!(request.port, 10003);
        assert_eq!(request.state, "8b3c4f9e-5d4e-4b0c-9a1e-2f7d6c5b4a39");
        assert_eq!(request.code_challenge, CHALLENGE);
    }

    #[test]
    fn bad_authorize_requests_are_refused() {
        let good = authorize_query("http://localhost:10003/login");
        let cases: Vec<(String, &str)> = vec![
            (
                authorize_query("http://localhost:1@evil.com/login"),
                "invalid_request",
            ),
            (
                good.replace("client_id=terraform-cli", "client_id=other"),
                "unauthorized_client",
            ),
            (
                good.replace("response_type=code", "response_type=token"),
                "unsupported_response_type",
            ),
            (
                good.replace("code_challenge_method=S256", "code_challenge_method=plain"),
                "invalid_request",
            ),
            (
                good.replace("&code_challenge_method=S256", ""),
                "invalid_request",
            ),
            (
                good.replace(&format!("code_challenge={CHALLENGE}&"), ""),
                "invalid_request",
            ),
            (
                good.replace("&state=8b3c4f9e-5d4e-4b0c-9a1e-2f7d6c5b4a39", ""),
                "invalid_request",
            ),
            (format!("{good}&state=again"), "invalid_request"),
            (
                format!("{good}&redirect_uri=http%3A%2F%2Flocalhost%3A10004%2Flogin"),
                "invalid_request",
            ),
            (
                good.replace("state=8b3c4f9e", "state=%0A8b3c4f9e"),
                "invalid_request",
            ),
        ];
        for (i, (query, code)) in cases.into_iter().enumerate() {
            let err = AuthorizeRequest::parse(&query, CLIENT, PORTS).expect_err(&query);
            assert_eq!(err.error.code, code, "{query}: {err}");
            // A bad redirect URI, an unknown client and a parameter given
            // twice (which state, which URI?) are answered with a page; the
            // rest go back to the CLI's listener.
            let page = matches!(i, 0 | 1 | 7 | 8);
            assert_eq!(err.back_to.is_none(), page, "{query}: {err:?}");
        }
    }

    #[test]
    fn a_refusal_after_the_redirect_uri_goes_back_with_the_state() {
        let good = authorize_query("http://localhost:10003/login");
        let plain = good.replace("code_challenge_method=S256", "code_challenge_method=plain");
        let err = AuthorizeRequest::parse(&plain, CLIENT, PORTS).unwrap_err();
        let back = url::Url::parse(err.back_to.as_deref().unwrap()).unwrap();
        assert_eq!(
            (back.host_str(), back.port(), back.path()),
            (Some("localhost"), Some(10003), "/login")
        );
        let q: std::collections::HashMap<_, _> = back.query_pairs().into_owned().collect();
        assert_eq!(q["error"], "invalid_request");
        assert!(q["error_description"].contains("S256"), "{q:?}");
        assert_eq!(q["state"], "8b3c4f9e-5d4e-4b0c-9a1e-2f7d6c5b4a39");
        // A state unfit to echo is left out, the error still goes back.
        let bad_state = good.replace("state=8b3c4f9e", "state=%0A8b3c4f9e");
        let err = AuthorizeRequest::parse(&bad_state, CLIENT, PORTS).unwrap_err();
        let back = url::Url::parse(err.back_to.as_deref().unwrap()).unwrap();
        assert!(back.query_pairs().all(|(k, _)| k != "state"), "{back}");
    }

    fn token_form(code: &str, verifier: &str, redirect_uri: &str) -> String {
        url::form_urlencoded::Serializer::new(String::new())
            .append_pair("client_id", CLIENT)
            .append_pair("code", code)
            .append_pair("code_verifier", verifier)
            .append_pair("grant_type", "authorization_code")
            .append_pair("redirect_uri", redirect_uri)
            .finish()
    }

    #[test]
    fn a_code_is_redeemed_in_time_by_its_client_with_its_verifier() {
        let uri = "http://localhost:10003/login";
        let authorize = AuthorizeRequest::parse(&authorize_query(uri), CLIENT, PORTS).unwrap();
        let issued = IssuedCode::new(CLIENT, &authorize, 1_000);
        assert_eq!(issued.expires_at, 1_060);
        let request = TokenRequest::parse(&token_form("c0de", VERIFIER, uri)).unwrap();
        assert_eq!(issued.redeem(&request, 1_060), Ok(()));

        let grant = |form: String, now| {
            TokenRequest::parse(&form)
                .and_then(|r| issued.redeem(&r, now))
                .unwrap_err()
                .code
        };
        assert_eq!(
            grant(token_form("c0de", VERIFIER, uri), 1_061),
            "invalid_grant"
        );
        assert_eq!(
            grant(token_form("c0de", CHALLENGE, uri), 1_001),
            "invalid_grant"
        );
        assert_eq!(
            grant(
                token_form("c0de", VERIFIER, "http://localhost:10004/login"),
                1_001
            ),
            "invalid_grant"
        );
        assert_eq!(
            grant(
                token_form("c0de", VERIFIER, uri).replace(CLIENT, "other"),
                1_001
            ),
            "invalid_grant"
        );
        assert_eq!(
            grant(
                token_form("c0de", VERIFIER, uri).replace("authorization_code", "password"),
                1_001
            ),
            "unsupported_grant_type"
        );
        assert_eq!(
            grant(
                token_form("c0de", VERIFIER, uri).replace("&code_verifier=", "&x="),
                1_001
            ),
            "invalid_request"
        );
        assert_eq!(
            grant(
                format!("{}&code=again", token_form("c0de", VERIFIER, uri)),
                1_001
            ),
            "invalid_request"
        );
    }
}
