//! OpenPGP public keys registered for a namespace by an admin. Once a
//! namespace has keys, its provider releases are published only if one of
//! them verifies the SHA256SUMS signature (every namespace needs keys when
//! [`crate::Config::require_namespace_keys`] is on). Several keys at once
//! allow rotation: add the new key, publish with it, remove the old one.
//! Releases already published keep the key they were verified with.
//!
//! Items: pk `KEYS#<namespace>`, sk `KEY#<key id>`: a namespace's keys are one query.

use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::release_files::ReleaseError;
use crate::signing::PublicKey;
use crate::storage::{Condition, Item, ItemStore, StoreError, query_all};

/// Most keys one namespace may have.
pub const MAX_KEYS: usize = 20;

/// A registered key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegisteredKey {
    /// Primary key id, 16 uppercase hex digits.
    pub key_id: String,
    pub ascii_armor: String,
    /// The primary key's and each subkey's algorithm.
    pub algorithms: Vec<String>,
    pub added_at: u64,
    /// [`crate::auth::Actor::describe`].
    pub added_by: String,
}

impl RegisteredKey {
    /// The key, parsed for verifying.
    pub fn public_key(&self) -> Result<PublicKey, Error> {
        PublicKey::parse(&self.ascii_armor).map_err(|e| {
            Error::internal(format!(
                "registered key {} no longer parses: {e}",
                self.key_id
            ))
        })
    }
}

fn pk(namespace: &str) -> String {
    format!("KEYS#{namespace}")
}

const SK_PREFIX: &str = "KEY#";

/// A namespace's keys, by key id.
pub async fn list(store: &dyn ItemStore, namespace: &str) -> Result<Vec<RegisteredKey>, Error> {
    query_all(store, &pk(namespace), SK_PREFIX)
        .await?
        .iter()
        .map(crate::catalog::decode)
        .collect()
}

/// Register keys for `namespace`: every armor is parsed and checked first
/// (one bad key adds none); keys already registered stay as they are. The
/// namespace's keys afterwards.
pub async fn add(
    store: &dyn ItemStore,
    namespace: &str,
    armors: &[String],
    now: u64,
    added_by: &str,
) -> Result<Vec<RegisteredKey>, Error> {
    if armors.is_empty() {
        return Err(Error::bad("no keys given"));
    }
    let parsed = armors
        .iter()
        .enumerate()
        .map(|(i, armor)| {
            PublicKey::parse(armor).map_err(|e| {
                Error::Release(ReleaseError::invalid(format!(
                    "key {} of {}: {e}",
                    i + 1,
                    armors.len()
                )))
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let existing = list(store, namespace).await?;
    let mut ids: Vec<&str> = existing.iter().map(|k| k.key_id.as_str()).collect();
    for key in &parsed {
        if !ids.contains(&key.info().key_id.as_str()) {
            ids.push(&key.info().key_id);
        }
    }
    if ids.len() > MAX_KEYS {
        return Err(Error::bad(format!(
            "a namespace may have at most {MAX_KEYS} keys; remove old ones first"
        )));
    }
    for key in parsed {
        let info = key.info();
        let record = RegisteredKey {
            key_id: info.key_id.clone(),
            ascii_armor: info.ascii_armor.clone(),
            algorithms: info.algorithms.clone(),
            added_at: now,
            added_by: added_by.to_string(),
        };
        let item = Item::new(
            pk(namespace),
            format!("{SK_PREFIX}{}", record.key_id),
            serde_json::to_vec(&record).map_err(Error::internal)?,
        );
        match store.put(item, Condition::IfAbsent).await {
            Ok(()) | Err(StoreError::ConditionFailed) => {}
            Err(e) => return Err(e.into()),
        }
    }
    list(store, namespace).await
}

/// Remove a key; what it was, or none if the namespace has no such key.
pub async fn remove(
    store: &dyn ItemStore,
    namespace: &str,
    key_id: &str,
) -> Result<Option<RegisteredKey>, Error> {
    store
        .take(&pk(namespace), &format!("{SK_PREFIX}{key_id}"))
        .await?
        .map(|item| crate::catalog::decode(&item))
        .transpose()
}
