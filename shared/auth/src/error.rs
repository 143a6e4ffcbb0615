//! What can go wrong in a sign-in, as one type, and how each becomes HTTP
//! (the pipeline's [`tfreg_http::Error`], whose `status` is the one mapping
//! to a status code).

use tfreg_model::exchange::{CiClaimError, TrustRefusal};
use tfreg_model::login::OAuthError;
use tfreg_model::oidc::ClaimError;
use tfreg_model::signin::MAX_NEXT_BYTES;
use tfreg_model::sso::GrantError;
use tfreg_store::StoreError;

/// Why a sign-in step failed.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// The identity provider could not be reached or answered nonsense
    /// (discovery, JWKS, token endpoint): not the user's mistake.
    #[error("the identity provider: {0}")]
    Upstream(String),
    /// A request to the provider got no answer (TLS, DNS, a refused
    /// connection, a timeout): what was asked, and why, every cause told.
    #[error("the identity provider: {what}: {}", with_causes(source))]
    Unreachable {
        what: String,
        #[source]
        source: reqwest::Error,
    },
    /// The provider's discovery document names another issuer than the one
    /// configured (OpenID Connect Discovery 4.3: byte for byte).
    #[error("the identity provider's discovery names issuer {found:?}, not {expected:?}")]
    IssuerMismatch { expected: String, found: String },
    /// The provider refused to redeem the code (`invalid_grant` and the like).
    #[error("the identity provider refused the sign-in ({0}): start it again")]
    CodeRefused(String),
    /// The ID token is not a JWT we can read.
    #[error("the ID token is malformed: {0}")]
    Malformed(String),
    /// An algorithm other than RS256/ES256 (`none` and HS256 included), or
    /// one the key was not published for.
    #[error("the ID token's algorithm {0} is not accepted (RS256 or ES256 only)")]
    BadAlg(String),
    /// The header marks an extension critical (`crit`, RFC 7515 4.1.11):
    /// none is implemented here, so the token must be refused.
    #[error(
        "the ID token's header marks {0} critical (crit): an extension this registry does not implement, so the token is refused (RFC 7515 4.1.11)"
    )]
    Critical(String),
    /// No `kid` in the header: the key is never taken from the token itself.
    #[error("the ID token names no key (kid)")]
    NoKid,
    /// No published key has this `kid`, even after fetching the keys again.
    #[error("the ID token is signed by an unknown key {0:?}")]
    UnknownKey(String),
    /// The signature does not verify with the provider's key.
    #[error("the ID token's signature does not verify")]
    BadSignature,
    /// `iss` is not the configured issuer.
    #[error("the ID token is from another issuer")]
    WrongIssuer,
    /// A CI token's `iss` is none of the allow-listed CI issuers (nothing
    /// was fetched for it).
    #[error("the token's issuer is not one this registry accepts CI tokens from")]
    UnknownIssuer,
    /// A CI token's `sub` or `jti` (`tfreg_model::exchange`).
    #[error("the ID token is refused: {0}")]
    CiClaim(#[from] CiClaimError),
    /// Times or audience (`tfreg_model::oidc`).
    #[error("the ID token is refused: {0}")]
    Claim(#[from] ClaimError),
    /// The nonce is not the one this sign-in sent.
    #[error("the ID token's nonce is not this sign-in's")]
    BadNonce,
    /// The nonce was seen before: a replayed ID token.
    #[error("the ID token was already used")]
    NonceReused,
    /// A login.v1 step's OAuth error (`invalid_request`, `invalid_grant`, ...).
    #[error(transparent)]
    OAuth(#[from] OAuthError),
    /// The callback's `state` names no sign-in in progress (unknown, used or expired).
    #[error("this sign-in is unknown, already finished or expired: start it again")]
    UnknownLogin,
    /// The callback came to another browser than the one that started the sign-in.
    #[error(
        "this sign-in was started in another browser (or its cookie is missing): start it again"
    )]
    OtherBrowser,
    /// The UI's sign-in was asked to end at a `next` over
    /// [`MAX_NEXT_BYTES`]: refused, never cut (nothing is stored for it).
    #[error("next must be a path of the web UI of at most {MAX_NEXT_BYTES} bytes")]
    NextTooLong,
    /// The provider said no at its own page (`error=access_denied`, ...).
    #[error("the identity provider did not sign you in: {0}")]
    ProviderSaidNo(String),
    /// The person's groups give nothing here: deny by default.
    #[error(transparent)]
    Grant(#[from] GrantError),
    /// The item store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The registry's own refusal (no signing secret for a session yet, ...).
    #[error(transparent)]
    Registry(#[from] tfreg_http::Error),
}

impl From<AuthError> for tfreg_http::Error {
    fn from(e: AuthError) -> Self {
        use tfreg_http::Error as H;
        match e {
            AuthError::Upstream(_)
            | AuthError::Unreachable { .. }
            | AuthError::IssuerMismatch { .. } => H::BadGateway(e.to_string()),
            AuthError::OAuth(oauth) => H::OAuth(oauth),
            AuthError::Grant(_) => H::Forbidden(e.to_string()),
            AuthError::Store(store) => store.into(),
            AuthError::Registry(e) => e,
            AuthError::CodeRefused(_)
            | AuthError::Malformed(_)
            | AuthError::BadAlg(_)
            | AuthError::Critical(_)
            | AuthError::NoKid
            | AuthError::UnknownKey(_)
            | AuthError::BadSignature
            | AuthError::WrongIssuer
            | AuthError::UnknownIssuer
            | AuthError::CiClaim(_)
            | AuthError::Claim(_)
            | AuthError::BadNonce
            | AuthError::NonceReused
            | AuthError::UnknownLogin
            | AuthError::OtherBrowser
            | AuthError::NextTooLong
            | AuthError::ProviderSaidNo(_) => H::BadRequest(e.to_string()),
        }
    }
}

/// Why a CI token exchange (`POST /v1/auth/exchange`) gave no token.
#[derive(Debug, thiserror::Error)]
pub enum ExchangeError {
    /// The request is not `{"token": "...", "namespaces": [...]}` as it must be.
    #[error("{0}")]
    BadRequest(String),
    /// The CI job's OIDC token does not verify (or its issuer could not be
    /// reached, or the store failed, inside).
    #[error("the CI job's OIDC token is refused: {0}")]
    Refused(#[from] AuthError),
    /// Its `jti` was exchanged before.
    #[error("the CI job's OIDC token was already exchanged: request a new one")]
    Replayed,
    /// No trust policy gives it a namespace.
    #[error(transparent)]
    NotTrusted(#[from] TrustRefusal),
    /// The item store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<ExchangeError> for tfreg_http::Error {
    /// 400 for a malformed request, 401 for a token that does not verify
    /// or was used, 403 when no trust policy matches; the issuer down: 502;
    /// the store: as the store says (503 with `Retry-After` when down).
    fn from(e: ExchangeError) -> Self {
        use tfreg_http::Error as H;
        match e {
            ExchangeError::BadRequest(m) => H::BadRequest(m),
            ExchangeError::Refused(AuthError::Store(store)) | ExchangeError::Store(store) => {
                store.into()
            }
            ExchangeError::Refused(
                AuthError::Upstream(_)
                | AuthError::Unreachable { .. }
                | AuthError::IssuerMismatch { .. },
            ) => H::BadGateway(e.to_string()),
            ExchangeError::Refused(_) | ExchangeError::Replayed => H::Unauthorized(e.to_string()),
            ExchangeError::NotTrusted(_) => H::Forbidden(e.to_string()),
        }
    }
}

/// `e` and each distinct cause under it, `: `-separated (reqwest's own
/// text names only the URL: "error sending request for url (...)"). The
/// causes inside `io::Error`s are looked at too (rustls's certificate
/// errors arrive wrapped in them).
pub(crate) fn with_causes(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut last = out.clone();
    let mut cause = next_cause(e);
    while let Some(c) = cause {
        let text = c.to_string();
        if text != last && !last.ends_with(&text) {
            out += &format!(": {text}");
        }
        last = text;
        cause = next_cause(c);
    }
    out
}

/// The error under `e`, looking inside an `io::Error` (whose `source()`
/// skips the error it wraps).
fn next_cause<'a>(
    e: &'a (dyn std::error::Error + 'static),
) -> Option<&'a (dyn std::error::Error + 'static)> {
    match e
        .downcast_ref::<std::io::Error>()
        .and_then(|io| io.get_ref())
    {
        Some(wrapped) => Some(wrapped as &(dyn std::error::Error + 'static)),
        None => e.source(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exchange_errors_are_the_client_s_4xx_and_ours_5xx() {
        use tfreg_model::oidc::ClaimError;
        let status = |e: ExchangeError| tfreg_http::Error::from(e).status().as_u16();
        assert_eq!(status(ExchangeError::BadRequest("x".into())), 400);
        for refused in [
            AuthError::BadAlg("none".into()),
            AuthError::Critical("exp-unknown".into()),
            AuthError::BadSignature,
            AuthError::UnknownKey("k".into()),
            AuthError::UnknownIssuer,
            AuthError::Malformed("x".into()),
            AuthError::Claim(ClaimError::Expired { exp: 1, now: 2 }),
            AuthError::CiClaim(CiClaimError::NoJti),
        ] {
            assert_eq!(status(ExchangeError::Refused(refused)), 401);
        }
        assert_eq!(status(ExchangeError::Replayed), 401);
        assert_eq!(
            status(ExchangeError::NotTrusted(TrustRefusal::NoMatch("i".into()))),
            403
        );
        assert_eq!(
            status(ExchangeError::Refused(AuthError::Upstream("down".into()))),
            502
        );
        assert_eq!(
            status(ExchangeError::Store(StoreError::Unavailable("x".into()))),
            503
        );
        assert_eq!(
            status(ExchangeError::Refused(AuthError::Store(
                StoreError::Unavailable("x".into())
            ))),
            503
        );
    }
}
