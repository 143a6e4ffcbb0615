//! OpenPGP public keys registered for a namespace by an admin. Once a
//! namespace has keys, its provider releases are published only if one of
//! them verifies the SHA256SUMS signature (every namespace needs keys when
//! the registry's `require_namespace_keys` setting is on). Several keys at once
//! allow rotation: add the new key, publish with it, remove the old one.
//! Releases already published keep the key they were verified with.
//!
//! Items: pk `KEYS#<namespace>`, sk `KEY#<key id>`: a namespace's keys are one query.

use tfreg_model::keys::RegisteredKey;

use super::codec::{decode, encode};
use super::schema::{KEY_PREFIX, key_sk, keys_pk};
use crate::{Condition, Item, ItemStore, StoreError, query_all};

/// Most keys one namespace may have.
pub const MAX_KEYS: usize = 20;

/// A namespace's keys, by key id.
pub async fn list(
    store: &dyn ItemStore,
    namespace: &str,
) -> Result<Vec<RegisteredKey>, StoreError> {
    query_all(store, &keys_pk(namespace), KEY_PREFIX)
        .await?
        .iter()
        .map(decode)
        .collect()
}

/// Register `keys` for `namespace` (parsed and checked by the caller: one
/// bad key adds none); keys already registered stay as they are. Refused
/// when the namespace would hold more than [`MAX_KEYS`]. The namespace's keys
/// afterwards.
pub async fn add(
    store: &dyn ItemStore,
    namespace: &str,
    keys: Vec<RegisteredKey>,
) -> Result<Vec<RegisteredKey>, StoreError> {
    if keys.is_empty() {
        return Err(StoreError::invalid("no keys given"));
    }
    let existing = list(store, namespace).await?;
    let mut ids: Vec<&str> = existing.iter().map(|k| k.key_id.as_str()).collect();
    for key in &keys {
        if !ids.contains(&key.key_id.as_str()) {
            ids.push(&key.key_id);
        }
    }
    if ids.len() > MAX_KEYS {
        return Err(StoreError::invalid(format!(
            "a namespace may have at most {MAX_KEYS} keys; remove old ones first"
        )));
    }
    for record in keys {
        let item = Item::new(keys_pk(namespace), key_sk(&record.key_id), encode(&record)?);
        match store.put(item, Condition::IfAbsent).await {
            Ok(()) | Err(StoreError::ConditionFailed) => {}
            Err(e) => return Err(e),
        }
    }
    list(store, namespace).await
}

/// Remove a key; what it was, or none if the namespace has no such key.
pub async fn remove(
    store: &dyn ItemStore,
    namespace: &str,
    key_id: &str,
) -> Result<Option<RegisteredKey>, StoreError> {
    store
        .take(&keys_pk(namespace), &key_sk(key_id))
        .await?
        .map(|item| decode(&item))
        .transpose()
}
