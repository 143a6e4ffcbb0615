//! A sign-in's state after the provider has signed the person in, as
//! items with an expiry (each step may run in another process): login.v1
//! codes ([`LOGINCODE_PK`]), used nonces ([`NONCE_PK`]) and the used ids of
//! CI OIDC tokens ([`JTI_PK`]). Nothing is kept for a sign-in that has only
//! started: it travels as its MAC'd state (`tfreg_auth::sealed`), so no
//! unauthenticated request writes here. The secrets they are found by (the
//! code, the nonce) appear only as their sha256, as sort keys. Each is
//! written once (`IfAbsent`); a code is consumed by an atomic `take`: of two
//! token requests, one wins. Expiry is checked by the callers on every
//! read, as the stores delete expired items lazily.

use tfreg_model::hashing::sha256_hex;
use tfreg_model::signin::LoginCode;

use super::codec::{decode, encode};
use super::schema::{JTI_PK, LOGINCODE_PK, NONCE_PK};
use crate::{Condition, Item, ItemStore, StoreError};

/// Keep `login` under `code` until the code expires.
pub async fn put_code(
    store: &dyn ItemStore,
    code: &str,
    login: &LoginCode,
) -> Result<(), StoreError> {
    let item = Item::new(LOGINCODE_PK, sha256_hex(code.as_bytes()), encode(login)?)
        .expiring_at(login.issued.expires_at);
    store.put(item, Condition::IfAbsent).await
}

/// What `code` was issued for, taken: a second exchange finds nothing. Its
/// expiry is the caller's to check (`IssuedCode::redeem`).
pub async fn take_code(store: &dyn ItemStore, code: &str) -> Result<Option<LoginCode>, StoreError> {
    store
        .take(LOGINCODE_PK, &sha256_hex(code.as_bytes()))
        .await?
        .map(|item| decode(&item))
        .transpose()
}

/// Record `nonce` as used until `until`: `false` when it already was (a
/// replayed ID token).
pub async fn use_nonce(store: &dyn ItemStore, nonce: &str, until: u64) -> Result<bool, StoreError> {
    let item = Item::new(NONCE_PK, sha256_hex(nonce.as_bytes()), b"{}".to_vec()).expiring_at(until);
    match store.put(item, Condition::IfAbsent).await {
        Ok(()) => Ok(true),
        Err(StoreError::ConditionFailed) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Record CI token `jti` of issuer `iss` as used until `until` (its `exp`
/// and the leeway): `false` when it already was (a replayed token). Of two
/// concurrent exchanges of one token, one wins (`IfAbsent`).
pub async fn use_jti(
    store: &dyn ItemStore,
    iss: &str,
    jti: &str,
    until: u64,
) -> Result<bool, StoreError> {
    let key = tfreg_model::exchange::jti_key(iss, jti);
    let item = Item::new(JTI_PK, key, b"{}".to_vec()).expiring_at(until);
    match store.put(item, Condition::IfAbsent).await {
        Ok(()) => Ok(true),
        Err(StoreError::ConditionFailed) => Ok(false),
        Err(e) => Err(e),
    }
}

#[cfg(all(test, feature = "embedded"))]
mod tests {
    use tfreg_model::login::{AuthorizeRequest, IssuedCode};
    use tfreg_model::signin::Subject;

    use super::*;
    use crate::sqlite::SqliteStore;

    fn request() -> AuthorizeRequest {
        AuthorizeRequest {
            redirect_uri: "http://localhost:10000/login".into(),
            port: 10000,
            state: "cli-state".into(),
            code_challenge: "c".repeat(43),
        }
    }

    #[tokio::test]
    async fn a_code_is_taken_once_and_a_nonce_used_once() {
        let store = SqliteStore::in_memory().unwrap();
        let login = LoginCode {
            issued: IssuedCode::new("terraform-cli", &request(), 50),
            subject: Subject {
                iss: "https://idp.test".into(),
                sub: "alice".into(),
                name: None,
                email: None,
                ci: None,
            },
            groups: vec!["platform".into()],
        };
        put_code(&store, "the-code", &login).await.unwrap();
        let item = store
            .get(LOGINCODE_PK, &sha256_hex(b"the-code"))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            item.expires_at,
            Some(50 + tfreg_model::login::CODE_TTL_SECS)
        );
        assert_eq!(take_code(&store, "the-code").await.unwrap(), Some(login));
        assert_eq!(take_code(&store, "the-code").await.unwrap(), None);
        assert!(use_nonce(&store, "n1", 99).await.unwrap());
        assert!(!use_nonce(&store, "n1", 99).await.unwrap());
    }

    #[tokio::test]
    async fn a_ci_token_id_is_used_once_per_issuer_and_kept_until_its_expiry() {
        let store = SqliteStore::in_memory().unwrap();
        assert!(use_jti(&store, "https://a.test", "j1", 500).await.unwrap());
        assert!(!use_jti(&store, "https://a.test", "j1", 500).await.unwrap());
        assert!(use_jti(&store, "https://b.test", "j1", 500).await.unwrap());
        let key = tfreg_model::exchange::jti_key("https://a.test", "j1");
        let item = store.get(JTI_PK, &key).await.unwrap().unwrap();
        assert_eq!(item.expires_at, Some(500));
        assert!(!key.contains("j1"), "kept hashed");
    }
}
