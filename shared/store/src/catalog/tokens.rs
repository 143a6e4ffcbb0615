//! API tokens as items: partition [`TOKENS_PK`], sort key the token's
//! sha256 (the token itself is never stored). A request's token is one
//! `GetItem`, the list one `Query`, and a public id (the hash's first
//! digits) finds its item by prefix. The last use is a separate attribute,
//! written by [`ItemStore::touch`], so a function allowed to stamp it cannot
//! change what a token may do.

use base64::Engine as _;
use tfreg_model::signin::Subject;
use tfreg_model::token::{
    Actor, NewToken, TOKEN_ID_LEN, TOKEN_PREFIX, TokenInfo, TokenRecord, hash_of, id_of,
};

use super::codec::{decode, encode};
use super::schema::TOKENS_PK;
use crate::{Condition, Item, ItemStore, StoreError, query_all};

/// Create a token, store its hash and return the token (the only time it is
/// seen) with its record.
pub async fn create(
    store: &dyn ItemStore,
    new: NewToken,
    now: u64,
    created_by: &Actor,
) -> Result<(String, TokenRecord), StoreError> {
    create_issued(store, new, now, created_by, None).await
}

/// [`create`], for a sign-in: the token records the identity-provider
/// account it was `issued_to`.
pub async fn create_issued(
    store: &dyn ItemStore,
    new: NewToken,
    now: u64,
    created_by: &Actor,
    issued_to: Option<Subject>,
) -> Result<(String, TokenRecord), StoreError> {
    let new = new.check(now)?;
    let bytes: [u8; 32] = rand::random();
    let token = format!(
        "{TOKEN_PREFIX}{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    );
    let hash = hash_of(&token);
    let record = TokenRecord {
        id: id_of(&hash),
        name: new.name,
        grants: new.grants,
        created_at: now,
        expires_at: new.expires_at,
        created_by: created_by.describe(),
        issued_to,
        fill: new.fill,
    };
    store
        .put(
            Item::new(TOKENS_PK, hash, encode(&record)?),
            Condition::IfAbsent,
        )
        .await?;
    Ok((token, record))
}

/// Every token, oldest first.
pub async fn list(store: &dyn ItemStore) -> Result<Vec<TokenInfo>, StoreError> {
    let mut tokens = query_all(store, TOKENS_PK, "")
        .await?
        .iter()
        .map(|item| {
            Ok(TokenInfo {
                record: decode(item)?,
                last_used_at: item.touched_at,
            })
        })
        .collect::<Result<Vec<_>, StoreError>>()?;
    tokens.sort_by(|a, b| {
        (a.record.created_at, &a.record.id).cmp(&(b.record.created_at, &b.record.id))
    });
    Ok(tokens)
}

/// The token stored under `hash` and when it was last used.
pub async fn get(
    store: &dyn ItemStore,
    hash: &str,
) -> Result<Option<(TokenRecord, Option<u64>)>, StoreError> {
    store
        .get(TOKENS_PK, hash)
        .await?
        .map(|item| Ok((decode(&item)?, item.touched_at)))
        .transpose()
}

/// Record that the token stored under `hash` was used at `now`, unless its
/// last record is at `due` or later; whether it was written.
pub async fn touch(
    store: &dyn ItemStore,
    hash: &str,
    now: u64,
    due: u64,
) -> Result<bool, StoreError> {
    store.touch(TOKENS_PK, hash, now, due).await
}

/// Revoke (delete) the token with public id `id`: its hash and record, or
/// none if no token has that id.
pub async fn revoke(
    store: &dyn ItemStore,
    id: &str,
) -> Result<Option<(String, TokenRecord)>, StoreError> {
    if id.len() != TOKEN_ID_LEN || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(StoreError::Invalid(format!(
            "invalid token id {id:?}: {TOKEN_ID_LEN} hex digits, as `tfreg token list` shows"
        )));
    }
    let id = id.to_ascii_lowercase();
    let page = store.query_page(TOKENS_PK, &id, None).await?;
    let mut revoked = None;
    for item in page.items {
        if let Some(taken) = store.take(&item.pk, &item.sk).await? {
            revoked = Some((taken.sk.clone(), decode(&taken)?));
        }
    }
    Ok(revoked)
}

#[cfg(all(test, feature = "embedded"))]
mod tests {
    use tfreg_model::token::{Principal, Scope};

    use super::*;
    use crate::sqlite::SqliteStore;

    fn new(scopes: &[Scope], namespaces: &[&str]) -> NewToken {
        NewToken {
            name: "ci".into(),
            scopes: scopes.to_vec(),
            namespaces: namespaces.iter().map(|s| s.to_string()).collect(),
            grants: Vec::new(),
            expires_at: None,
            fill: false,
        }
    }

    #[tokio::test]
    async fn tokens_are_stored_hashed_listed_and_revoked_by_id() {
        let store = SqliteStore::in_memory().unwrap();
        let operator = Principal::Operator.actor();
        let (token, record) = create(&store, new(&[Scope::Publish], &["Team"]), 10, &operator)
            .await
            .unwrap();
        assert!(token.starts_with(TOKEN_PREFIX));
        assert_eq!(record.describe_grants(), "publish:team");
        assert_eq!(record.created_by, "operator");
        let items = query_all(&store, TOKENS_PK, "").await.unwrap();
        assert_eq!(items.len(), 1);
        assert_eq!(items[0].sk, hash_of(&token));
        assert!(!String::from_utf8_lossy(&items[0].data).contains(&token));
        let listed = list(&store).await.unwrap();
        assert_eq!(listed[0].record, record);
        assert!(matches!(
            revoke(&store, "xyz").await,
            Err(StoreError::Invalid(_))
        ));
        assert_eq!(
            revoke(&store, &record.id).await.unwrap(),
            Some((hash_of(&token), record.clone()))
        );
        assert_eq!(revoke(&store, &record.id).await.unwrap(), None);
        assert!(list(&store).await.unwrap().is_empty());
    }
}
