//! The OCI view's token endpoint: Basic credentials whose password is a
//! tfreg token, for a bearer of the repositories asked for
//! ([`tfreg_http::oci_bearer`]), each authorised as a read of its package
//! is, through the one `authorize`.

use base64::Engine as _;
use http::{HeaderValue, StatusCode, header};
use tfreg_http::answer_cache::Answer;
use tfreg_http::auth::{self, Credential, presented_hash};
use tfreg_http::error::Error;
use tfreg_http::oci_bearer::{self, BEARER_TTL_SECS, Grant};
use tfreg_http::registry::Registry;
use tfreg_model::oci::{self, Repository};
use tfreg_model::router::repository_realm;
use tfreg_model::token::{Access, Realm, Scope};

use super::params;

/// What the token endpoint's `401`s ask for.
const BASIC_CHALLENGE: &str = "Basic realm=\"tfreg\"";

/// `GET /v2/token`: Basic credentials whose password is a tfreg token (the
/// user name is not looked at), for a bearer that may pull the `scope`s
/// asked for, each authorised as a read of its package is. Its `401`s
/// (none, malformed, unknown, expired, revoked) ask for Basic credentials.
pub(super) async fn token(
    registry: &Registry,
    query: Option<&str>,
    headers: &http::HeaderMap,
) -> Result<Answer, Error> {
    grant(registry, query, headers).await.map_err(|e| match e {
        Error::Unauthorized(message) => Error::Challenged {
            message,
            challenge: BASIC_CHALLENGE.into(),
        },
        other => other,
    })
}

async fn grant(
    registry: &Registry,
    query: Option<&str>,
    headers: &http::HeaderMap,
) -> Result<Answer, Error> {
    let repositories = oci::pull_scopes(params(query, "scope").iter().map(String::as_str))?;
    let password = basic_password(headers)?;
    let own = &registry.config.hostname;
    let realms: Vec<Realm<'_>> = match repositories.as_slice() {
        [] => vec![Realm::AnyNamespace],
        some => some.iter().map(|r| repository_realm(r, own)).collect(),
    };
    for realm in realms {
        let access = Access::Token {
            scope: Scope::Read,
            realm,
        };
        let (_, verdict) =
            auth::authorize(registry, Credential::Presented(&password), access).await;
        verdict?;
    }
    let hash = presented_hash(&password)
        .ok_or_else(|| Error::Unauthorized("the password is not a tfreg token".into()))?;
    let grant = Grant {
        token_hash: hash,
        repositories: repositories.iter().map(Repository::name).collect(),
        expires: registry.now() + BEARER_TTL_SECS,
    };
    let bearer = oci_bearer::issue(registry.signer().await?, &grant);
    Ok(Answer::json(
        StatusCode::OK,
        &serde_json::json!({
            "token": bearer,
            "access_token": bearer,
            "expires_in": BEARER_TTL_SECS,
        }),
    )
    .with_header(header::CACHE_CONTROL, HeaderValue::from_static("no-store")))
}

/// The password of the token request's Basic credentials.
fn basic_password(headers: &http::HeaderMap) -> Result<String, Error> {
    let challenge = || {
        Error::Unauthorized(
            "the token endpoint needs Basic credentials: any user name, a tfreg token as the password"
                .into(),
        )
    };
    let value = tfreg_http::body::authorization(headers).ok_or_else(challenge)?;
    let (scheme, encoded) = value.trim().split_once(' ').ok_or_else(challenge)?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return Err(challenge());
    }
    let malformed = || Error::Unauthorized("malformed Basic credentials".into());
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .ok_or_else(malformed)?;
    let (_, password) = decoded.split_once(':').ok_or_else(malformed)?;
    Ok(password.to_string())
}
