//! Who may do what: API tokens (created once, shown once, stored only as a
//! sha256 hash) and the one authorisation step every request goes through
//! ([`authorize`], called by [`crate::app`] for HTTP requests, local CLI
//! commands included).
//!
//! A token has a name, scopes (`read` ⊂ `publish` ⊂ `admin`: each includes the
//! ones before it), the namespaces it covers (none listed: all), a creation
//! time, an optional expiry and a last-used time. Every token is one item of
//! the partition [`TOKENS_PK`], its sort key the token's sha256: a request's
//! token is one `GetItem`, the list one `Query`, and the public id (the hash's
//! first [`TOKEN_ID_LEN`] hex digits) finds the item by prefix.
//!
//! Costs and bounds:
//! - A verified token is cached in the process for [`TokenCache::ttl`]
//!   (default [`DEFAULT_TOKEN_CACHE_SECS`]): a revoked token keeps working at
//!   most that long in another process (a Lambda function, a second `tfreg
//!   serve`), not at all in the process that revoked it. Expiry is checked on
//!   every request, cached or not.
//! - The last-used time is written at most once per [`TOUCH_INTERVAL_SECS`]
//!   per token (a conditional `UpdateItem` of that one attribute): a read stays
//!   one token `GetItem` (none while cached) plus its own catalog read.

use std::sync::Arc;

pub use tfreg_model::token::presented_hash;
use tfreg_model::token::{Access, Principal, Scope, TokenRecord};
use tfreg_store::catalog::{sessions, tokens};

use crate::error::Error;
use crate::registry::Registry;
use crate::session::Session;

/// A token's last use is recorded at most this often.
pub const TOUCH_INTERVAL_SECS: u64 = 3600;

use crate::token_cache::Verified;
pub use crate::token_cache::{DEFAULT_TOKEN_CACHE_SECS, MAX_TOKEN_CACHE_SECS, TokenCache};

/// What a request presents to be authorised.
#[derive(Debug, Clone, Copy)]
pub enum Credential<'a> {
    /// Its `Authorization` header, if any: the API's way.
    Authorization(Option<&'a str>),
    /// A web UI session (its cookie's MAC and expiry checked already), if
    /// any: its token is verified again on every request, so a revoked or
    /// expired token ends its sessions, and a session signed out of is
    /// refused (one `GetItem`).
    Session(Option<&'a Session>),
    /// An OCI route's `Authorization` header: a bearer of the OCI view's
    /// token endpoint ([`crate::oci_bearer`]), which must name `repository`
    /// (`None`: `GET /v2/`, any bearer), or a tfreg token.
    Oci {
        header: Option<&'a str>,
        repository: Option<&'a str>,
    },
    /// A tfreg token presented another way than a header: the password of
    /// the OCI token endpoint's Basic credentials.
    Presented(&'a str),
}

/// The bearer token of an `Authorization` header value: `None` without a
/// header, `Err` for a header that is not `Bearer <token>`.
pub fn bearer(header: Option<&str>) -> Result<Option<&str>, Error> {
    let Some(value) = header else {
        return Ok(None);
    };
    let malformed = || {
        Error::Unauthorized(
            "malformed Authorization header: send `Authorization: Bearer <token>`".into(),
        )
    };
    let (scheme, token) = value.trim().split_once(' ').ok_or_else(malformed)?;
    let token = token.trim();
    if !scheme.eq_ignore_ascii_case("bearer") || token.is_empty() {
        return Err(malformed());
    }
    Ok(Some(token))
}

fn unknown_token() -> Error {
    Error::Unauthorized("the token is not valid for this registry (unknown or revoked)".into())
}

/// Look up a token by its hash: the cache, else one `GetItem`; then record
/// its use if the last record is older than [`TOUCH_INTERVAL_SECS`].
async fn verify(registry: &Registry, hash: String) -> Result<Arc<TokenRecord>, Error> {
    let now = registry.now();
    let verified = match registry.tokens.get(&hash) {
        Some(v) => v,
        None => {
            let (record, touched_at) = tokens::get(registry.items.as_ref(), &hash)
                .await?
                .ok_or_else(unknown_token)?;
            let v = Verified {
                record: Arc::new(record),
                touched_at,
                hash,
            };
            registry.tokens.put(v.clone());
            v
        }
    };
    if let Some(at) = verified.record.expires_at
        && at <= now
    {
        return Err(Error::Unauthorized(format!(
            "the token {} expired at {} (unix time); ask an admin for a new one",
            verified.record.name, at
        )));
    }
    let due = now.saturating_sub(TOUCH_INTERVAL_SECS);
    if verified.touched_at.is_none_or(|t| t < due) {
        // Best effort: a missed stamp must not refuse a valid request.
        match tokens::touch(registry.items.as_ref(), &verified.hash, now, due).await {
            Ok(_) => registry.tokens.put(Verified {
                touched_at: Some(now),
                ..verified.clone()
            }),
            Err(e) => {
                tracing::warn!(token_id = %verified.record.id, error = %e, "cannot record the token's last use")
            }
        }
    }
    Ok(verified.record)
}

/// The one authorisation step: who is asking, and may they do what the route
/// needs? 401 (with `WWW-Authenticate`) for a missing, malformed, unknown,
/// revoked or expired token; 403 for a valid token without the right.
///
/// The caller is named even when refused: a valid token without the right
/// (403) is still who asked, for the audit trail (a missing, malformed or
/// unknown token names nobody: [`Principal::Anonymous`]).
///
/// A presented token is always checked, even where none is needed for
/// reading (anonymous reads): a client with a bad token hears about it.
pub async fn authorize(
    registry: &Registry,
    credential: Credential<'_>,
    access: Access<'_>,
) -> (Principal, Result<(), Error>) {
    match check(registry, credential, access).await {
        Ok(principal) => (principal, Ok(())),
        Err((Some(record), e)) => (Principal::Token(record), Err(e)),
        Err((None, e)) => (Principal::Anonymous, Err(e)),
    }
}

async fn check(
    registry: &Registry,
    credential: Credential<'_>,
    access: Access<'_>,
) -> Result<Principal, (Option<Arc<TokenRecord>>, Error)> {
    let nobody = |e| (None, e);
    let (scope, realm) = match access {
        Access::Public => return Ok(Principal::Anonymous),
        Access::Session => return identify(registry, credential).await.map_err(nobody),
        Access::Token { scope, realm } => (scope, realm),
    };
    let anonymous_read = scope == Scope::Read && registry.config.anonymous_reads;
    let hash = match credential {
        Credential::Authorization(header) => bearer(header)
            .map_err(nobody)?
            .map(|token| presented_hash(token).ok_or_else(unknown_token))
            .transpose()
            .map_err(nobody)?,
        Credential::Oci { header, repository } => match bearer(header).map_err(nobody)? {
            Some(token) if crate::oci_bearer::is_bearer(token) => Some(
                oci_hash(registry, token, repository)
                    .await
                    .map_err(nobody)?,
            ),
            Some(token) => Some(
                presented_hash(token)
                    .ok_or_else(unknown_token)
                    .map_err(nobody)?,
            ),
            None => None,
        },
        Credential::Presented(token) => Some(
            presented_hash(token)
                .ok_or_else(unknown_token)
                .map_err(nobody)?,
        ),
        Credential::Session(None) => None,
        Credential::Session(Some(session)) => {
            live(registry, session).await.map_err(nobody)?;
            Some(session.token_hash.clone())
        }
    };
    let Some(hash) = hash else {
        if anonymous_read {
            return Ok(Principal::Anonymous);
        }
        return Err(nobody(Error::Unauthorized(match scope {
            Scope::Read => "this registry requires a token to read: set TF_TOKEN_<host> or a credentials \"<host>\" block (see `tfreg token create`)".into(),
            Scope::Publish => "publishing needs a token: pass --token or set TFREG_TOKEN".into(),
            Scope::Admin => "this needs an admin token: pass --token or set TFREG_TOKEN".into(),
        })));
    };
    let record = verify(registry, hash).await.map_err(nobody)?;
    if anonymous_read {
        return Ok(Principal::Token(record));
    }
    if !record.has(scope) {
        let e = Error::Forbidden(format!(
            "the token {} may not {}",
            record.name,
            match scope {
                Scope::Read => "read",
                Scope::Publish => "publish (it needs the publish scope)",
                Scope::Admin => "do this (it needs the admin scope)",
            }
        ));
        return Err((Some(record), e));
    }
    if !record.allows(scope, realm) {
        let e = Error::Forbidden(format!(
            "the token {} does not cover {realm} for {scope} (its grants: {})",
            record.name,
            record.describe_grants()
        ));
        return Err((Some(record), e));
    }
    Ok(Principal::Token(record))
}

/// The token hash an OCI bearer stands for, if it is good for `repository`.
async fn oci_hash(
    registry: &Registry,
    bearer: &str,
    repository: Option<&str>,
) -> Result<String, Error> {
    let signer = registry
        .signer_if_ready()
        .await?
        .ok_or_else(unknown_token)?;
    let grant = crate::oci_bearer::open(signer, bearer, registry.now())?;
    if let Some(name) = repository
        && !grant.repositories.iter().any(|r| r == name)
    {
        return Err(Error::Unauthorized(format!(
            "the bearer token is not for repository {name}: ask the token endpoint for scope repository:{name}:pull"
        )));
    }
    Ok(grant.token_hash)
}

/// Refuse a session that was signed out of.
async fn live(registry: &Registry, session: &Session) -> Result<(), Error> {
    if sessions::ended(registry.items.as_ref(), &session.id).await? {
        return Err(Error::Unauthorized(
            "this session was signed out of: sign in again".into(),
        ));
    }
    Ok(())
}

/// Who a live session's token is, never refusing one that is not (signed
/// out of, its token revoked or expired): [`Access::Session`]. The store
/// failing is still an error.
async fn identify(registry: &Registry, credential: Credential<'_>) -> Result<Principal, Error> {
    let Credential::Session(Some(session)) = credential else {
        return Ok(Principal::Anonymous);
    };
    let found = async {
        live(registry, session).await?;
        verify(registry, session.token_hash.clone()).await
    };
    match found.await {
        Ok(record) => Ok(Principal::Token(record)),
        Err(Error::Unauthorized(_)) => Ok(Principal::Anonymous),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_header_parsing() {
        assert_eq!(bearer(Some("Bearer abc")).unwrap(), Some("abc"));
        assert_eq!(bearer(Some("bearer  abc ")).unwrap(), Some("abc"));
        assert_eq!(bearer(None).unwrap(), None);
        for bad in ["Basic abc", "Bearer", "Bearer  ", "abc"] {
            assert!(
                matches!(bearer(Some(bad)), Err(Error::Unauthorized(_))),
                "{bad}"
            );
        }
    }
}
