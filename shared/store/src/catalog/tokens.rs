//! API tokens as items: partition [`TOKENS_PK`], sort key the token's
//! sha256 (the token itself is never stored). A request's token is one
//! `GetItem`, the list one `Query`, and a public id (the hash's first
//! digits) finds its item by prefix. The last use is a separate attribute,
//! written by [`ItemStore::touch`], so a function allowed to stamp it cannot
//! change what a token may do.
//!
//! A token that expires is an item that expires: the store deletes it by
//! itself (DynamoDB's TTL, the embedded store's sweep) a day after
//! ([`TokenRecord::removable_at`]); lists hide it from its expiry on
//! ([`live`]), whether or not it is gone yet. Each CI identity holds at most
//! [`MAX_LIVE_EXCHANGED`] live exchanged tokens ([`hold_exchanged`]).

use base64::Engine as _;
use tfreg_model::signin::Subject;
use tfreg_model::token::{
    Actor, NewToken, TOKEN_ID_LEN, TOKEN_PREFIX, TokenInfo, TokenRecord, hash_of, id_of,
};

use super::codec::{decode, encode};
use super::places::{self, Place, Places};
use super::schema::{CI_TOKENS_PK, TOKENS_PK, ci_tokens_prefix};
use crate::{Condition, Item, ItemStore, StoreError, query_all};

pub use tfreg_model::exchange::MAX_LIVE_EXCHANGED;

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
    let mut item = Item::new(TOKENS_PK, hash, encode(&record)?);
    if let Some(at) = record.removable_at() {
        item = item.expiring_at(at);
    }
    store.put(item, Condition::IfAbsent).await?;
    Ok((token, record))
}

/// The tokens of `tokens` live at `now` (all of them with `all`), and how
/// many expired ones were left out.
pub fn live(tokens: Vec<TokenInfo>, now: u64, all: bool) -> (Vec<TokenInfo>, usize) {
    let before = tokens.len();
    let kept: Vec<TokenInfo> = tokens
        .into_iter()
        .filter(|t| all || !t.record.expired(now))
        .collect();
    let hidden = before - kept.len();
    (kept, hidden)
}

/// Hold one of the [`MAX_LIVE_EXCHANGED`] places of CI identity `who` for
/// an exchange (`holder`: its `jti` key) whose token lives until `until`.
/// All held: [`StoreError::Full`] (429), with the seconds until the first
/// token expires and frees its place. Taken before the `jti` is used, so
/// the job may send the same OIDC token again then.
pub async fn hold_exchanged(
    store: &dyn ItemStore,
    who: &Subject,
    holder: &str,
    until: u64,
    now: u64,
) -> Result<Place, StoreError> {
    let prefix = ci_tokens_prefix(&who.iss, &who.sub);
    let set = Places {
        pk: CI_TOKENS_PK,
        prefix: &prefix,
        max: MAX_LIVE_EXCHANGED,
    };
    let full = || {
        format!(
            "the CI identity {} of {} already holds {MAX_LIVE_EXCHANGED} live tokens from the exchange, the most it may: retry once the first expires (Retry-After)",
            sanitised(&who.sub),
            who.iss
        )
    };
    places::take_in(store, set, holder, until, now, full).await
}

/// Let go of the place [`hold_exchanged`] gave `holder`: its exchange
/// issued no token after all.
pub async fn let_go_exchanged(
    store: &dyn ItemStore,
    place: &Place,
    holder: &str,
    until: u64,
    now: u64,
) -> Result<(), StoreError> {
    places::release_as(store, place, holder, until, now).await
}

/// `sub` as a message may quote it: printable ASCII, at most 128.
fn sanitised(sub: &str) -> String {
    sub.chars()
        .filter(|c| c.is_ascii_graphic() || *c == ' ')
        .take(128)
        .collect()
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

    /// An expiring token's item expires a day after it; one that never
    /// expires never does; lists hide it from its expiry on.
    #[tokio::test]
    async fn an_expiring_token_is_an_expiring_item_and_hidden_once_expired() {
        let store = SqliteStore::in_memory().unwrap();
        let operator = Principal::Operator.actor();
        let lasting = NewToken {
            expires_at: Some(100),
            ..new(&[Scope::Read], &[])
        };
        let (token, record) = create(&store, lasting, 10, &operator).await.unwrap();
        let item = store
            .get(TOKENS_PK, &hash_of(&token))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            item.expires_at,
            Some(100 + tfreg_model::token::EXPIRED_TOKEN_KEPT_SECS)
        );
        let (forever, _) = create(&store, new(&[Scope::Read], &[]), 10, &operator)
            .await
            .unwrap();
        let item = store
            .get(TOKENS_PK, &hash_of(&forever))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(item.expires_at, None);
        let (shown, hidden) = live(list(&store).await.unwrap(), 99, false);
        assert_eq!((shown.len(), hidden), (2, 0));
        let (shown, hidden) = live(list(&store).await.unwrap(), 100, false);
        assert_eq!((shown.len(), hidden), (1, 1));
        assert_ne!(shown[0].record.id, record.id);
        let (shown, hidden) = live(list(&store).await.unwrap(), 100, true);
        assert_eq!((shown.len(), hidden), (2, 0));
        // Swept a day on, the other kept.
        store
            .sweep_expired(100 + tfreg_model::token::EXPIRED_TOKEN_KEPT_SECS + 1)
            .await
            .unwrap();
        let left = list(&store).await.unwrap();
        assert_eq!(left.len(), 1);
        assert_eq!(left[0].record.expires_at, None);
        // A far expiry is no expiry in the past to the sweep.
        let far = NewToken {
            expires_at: Some(u64::MAX),
            ..new(&[Scope::Read], &[])
        };
        create(&store, far, 10, &operator).await.unwrap();
        store.sweep_expired(1_000_000).await.unwrap();
        assert_eq!(list(&store).await.unwrap().len(), 2);
    }

    /// A CI identity's places: at most [`MAX_LIVE_EXCHANGED`] at once, each
    /// until its token expires, another identity's apart.
    #[tokio::test]
    async fn a_ci_identity_holds_a_bounded_number_of_live_exchanged_tokens() {
        let store = SqliteStore::in_memory().unwrap();
        let who = Subject {
            iss: "https://ci.test".into(),
            sub: "repo:acme/app:ref:refs/heads/main".into(),
            name: None,
            email: None,
            ci: None,
        };
        let mut held = Vec::new();
        for i in 0..MAX_LIVE_EXCHANGED {
            let holder = format!("j{i}");
            let until = 1000 + i as u64;
            held.push((
                hold_exchanged(&store, &who, &holder, until, 10)
                    .await
                    .unwrap(),
                holder,
                until,
            ));
        }
        match hold_exchanged(&store, &who, "one-more", 2000, 10).await {
            Err(StoreError::Full {
                message,
                retry_after_secs,
            }) => {
                assert_eq!(
                    message,
                    format!(
                        "the CI identity repo:acme/app:ref:refs/heads/main of https://ci.test already holds {MAX_LIVE_EXCHANGED} live tokens from the exchange, the most it may: retry once the first expires (Retry-After)"
                    )
                );
                assert_eq!(retry_after_secs, 1000 - 10 + 1);
            }
            other => panic!("{other:?}"),
        }
        let other = Subject {
            sub: "repo:acme/other:ref:refs/heads/main".into(),
            ..who.clone()
        };
        hold_exchanged(&store, &other, "o", 2000, 10).await.unwrap();
        // One let go: its place is free at once.
        let (place, holder, until) = &held[3];
        let_go_exchanged(&store, place, holder, *until, 10)
            .await
            .unwrap();
        hold_exchanged(&store, &who, "again", 2000, 10)
            .await
            .unwrap();
        assert!(
            hold_exchanged(&store, &who, "full", 2000, 10)
                .await
                .is_err()
        );
        // Once the first token expired, its place is free.
        hold_exchanged(&store, &who, "later", 3000, 1001)
            .await
            .unwrap();
    }
}
