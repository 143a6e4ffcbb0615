//! Web UI sessions signed out of: one item per session ended before its
//! cookie's expiry, partition [`SIGNED_OUT_PK`], sort key the sha256 of the
//! session's random id, kept until that expiry (after it the cookie is
//! refused anyway, so the store may delete the item: DynamoDB's TTL, the
//! embedded store's sweep). A session is one `GetItem` away from knowing it
//! was ended. Token items are never written here: a function allowed to end
//! sessions cannot change what a token may do.

use tfreg_model::hashing::sha256_hex;

use super::schema::SIGNED_OUT_PK;
use crate::{Condition, Item, ItemStore, StoreError};

fn sk(session_id: &str) -> String {
    sha256_hex(session_id.as_bytes())
}

/// Record that the session `session_id`, whose cookie expires at `expires`
/// (unix seconds), was signed out of. Idempotent.
pub async fn end(store: &dyn ItemStore, session_id: &str, expires: u64) -> Result<(), StoreError> {
    let item = Item::new(SIGNED_OUT_PK, sk(session_id), b"{}".to_vec()).expiring_at(expires);
    store.put(item, Condition::Always).await
}

/// Was the session `session_id` signed out of?
pub async fn ended(store: &dyn ItemStore, session_id: &str) -> Result<bool, StoreError> {
    Ok(store.get(SIGNED_OUT_PK, &sk(session_id)).await?.is_some())
}

#[cfg(all(test, feature = "embedded"))]
mod tests {
    use super::*;
    use crate::sqlite::SqliteStore;

    #[tokio::test]
    async fn an_ended_session_is_kept_hashed_until_its_expiry() {
        let store = SqliteStore::in_memory().unwrap();
        let id = "0123456789abcdef0123456789abcdef";
        assert!(!ended(&store, id).await.unwrap());
        end(&store, id, 500).await.unwrap();
        end(&store, id, 500).await.unwrap();
        assert!(ended(&store, id).await.unwrap());
        assert!(!ended(&store, &id.replace('0', "1")).await.unwrap());
        let item = store.get(SIGNED_OUT_PK, &sk(id)).await.unwrap().unwrap();
        assert_eq!(item.expires_at, Some(500));
        assert!(!item.sk.contains(id), "the id itself is not stored");
    }
}
