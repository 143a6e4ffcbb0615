//! API tokens: created once, shown once, stored only as a sha256 hash.

use base64::Engine as _;
use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::hashing::sha256_hex;
use crate::storage::{Condition, Item, ItemStore};

/// Prefix of every token, so a leaked one is easy to recognise and scan for.
pub const TOKEN_PREFIX: &str = "tfreg_";

/// What a token may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// Read providers, modules and the mirror.
    Read,
    /// Read, and publish (in its namespace if it has one).
    Publish,
}

impl Scope {
    /// Parse `read` / `publish`.
    pub fn parse(s: &str) -> Result<Self, Error> {
        match s {
            "read" => Ok(Scope::Read),
            "publish" => Ok(Scope::Publish),
            _ => Err(Error::bad(format!(
                "unknown scope {s:?}: use read or publish"
            ))),
        }
    }
}

/// What the store keeps about a token (never the token itself).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenRecord {
    pub scope: Scope,
    /// When set, publishing is limited to this namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub created_at: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

impl TokenRecord {
    /// May this token publish into `namespace`?
    pub fn may_publish(&self, namespace: &str) -> bool {
        self.scope == Scope::Publish && self.namespace.as_deref().is_none_or(|ns| ns == namespace)
    }
}

fn token_pk(token: &str) -> String {
    format!("TOKEN#{}", sha256_hex(token.as_bytes()))
}

const TOKEN_SK: &str = "TOKEN";

/// Create a token, store its hash and return the token (the only time it is seen).
pub async fn create_token(store: &dyn ItemStore, record: TokenRecord) -> Result<String, Error> {
    let bytes: [u8; 32] = rand::random();
    let token = format!(
        "{TOKEN_PREFIX}{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    );
    let data = serde_json::to_vec(&record).map_err(Error::internal)?;
    store
        .put(
            Item::new(token_pk(&token), TOKEN_SK, data),
            Condition::IfAbsent,
        )
        .await?;
    Ok(token)
}

/// The bearer token of an `Authorization` header value, if it is one.
pub fn bearer(header: Option<&str>) -> Option<&str> {
    let value = header?.trim();
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then_some(token.trim())
}

/// Look up the record of a presented token.
pub async fn authenticate(store: &dyn ItemStore, token: &str) -> Result<TokenRecord, Error> {
    let unknown = || Error::Unauthorized("the token is not valid for this registry".into());
    if !token.starts_with(TOKEN_PREFIX) || token.len() > 200 {
        return Err(unknown());
    }
    let item = store
        .get(&token_pk(token), TOKEN_SK)
        .await?
        .ok_or_else(unknown)?;
    serde_json::from_slice(&item.data)
        .map_err(|e| Error::internal(format!("corrupt token record: {e}")))
}

/// Refuse reads without a valid token when the registry requires one.
pub async fn require_reader(
    registry: &crate::Registry,
    authorization: Option<&str>,
) -> Result<(), Error> {
    if !registry.config.require_read_token {
        return Ok(());
    }
    let token = bearer(authorization).ok_or_else(|| {
        Error::Unauthorized(
            "this registry requires a token: set TF_TOKEN_<host> or a credentials block".into(),
        )
    })?;
    authenticate(registry.items.as_ref(), token)
        .await
        .map(|_| ())
}

/// The record of a token that may publish `target`: a publish token covering
/// its namespace; mirror imports need a token without a namespace limit.
pub async fn require_publisher(
    registry: &crate::Registry,
    authorization: Option<&str>,
    target: &crate::router::PublishTarget,
) -> Result<TokenRecord, Error> {
    let token = bearer(authorization).ok_or_else(|| {
        Error::Unauthorized("publishing needs a token: pass --token or set TFREG_TOKEN".into())
    })?;
    let record = authenticate(registry.items.as_ref(), token).await?;
    if record.scope != Scope::Publish {
        return Err(Error::Forbidden("this token may not publish".into()));
    }
    match target.namespace() {
        Some(ns) if !record.may_publish(ns) => Err(Error::Forbidden(format!(
            "this token may not publish into namespace {ns}"
        ))),
        None if record.namespace.is_some() => Err(Error::Forbidden(
            "mirror imports need a publish token without a namespace limit".into(),
        )),
        _ => Ok(record),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::sqlite::SqliteStore;

    #[tokio::test]
    async fn tokens_are_stored_hashed_and_found_again() {
        let store = SqliteStore::in_memory().unwrap();
        let record = TokenRecord {
            scope: Scope::Publish,
            namespace: Some("team".into()),
            created_at: 1,
            description: None,
        };
        let token = create_token(&store, record.clone()).await.unwrap();
        assert!(token.starts_with(TOKEN_PREFIX));
        assert!(
            store
                .get(&format!("TOKEN#{token}"), TOKEN_SK)
                .await
                .unwrap()
                .is_none()
        );
        assert_eq!(authenticate(&store, &token).await.unwrap(), record);
        assert!(matches!(
            authenticate(&store, "tfreg_nope").await,
            Err(Error::Unauthorized(_))
        ));
        assert!(record.may_publish("team") && !record.may_publish("other"));
    }

    #[test]
    fn bearer_header_parsing() {
        assert_eq!(bearer(Some("Bearer abc")), Some("abc"));
        assert_eq!(bearer(Some("bearer  abc ")), Some("abc"));
        assert_eq!(bearer(Some("Basic abc")), None);
        assert_eq!(bearer(None), None);
    }
}
