//! The URL signing secret: 32 random bytes kept as one item, so every
//! process (the local server, each Lambda function) signs and checks the
//! same archive URLs with no configuration. The HTTP pipeline signs with it.

use base64::Engine as _;

use super::schema::{SECRET_PK, SECRET_SK};
use crate::{Condition, Item, ItemStore, StoreError};

fn decode(item: &Item) -> Result<Vec<u8>, StoreError> {
    let secret = base64::engine::general_purpose::STANDARD
        .decode(&item.data)
        .map_err(|e| StoreError::Internal(format!("corrupt URL signing secret: {e}")))?;
    if secret.len() < 32 {
        return Err(StoreError::Internal("URL signing secret too short".into()));
    }
    Ok(secret)
}

/// The secret if it exists yet (one `GetItem`); never writes, so functions
/// that may only read the table can call it.
pub async fn read(items: &dyn ItemStore) -> Result<Option<Vec<u8>>, StoreError> {
    match items.get(SECRET_PK, SECRET_SK).await? {
        Some(item) => decode(&item).map(Some),
        None => Ok(None),
    }
}

/// The secret, made by the first caller; a race is settled by the
/// conditional put. Only writers (the local server, the publish function)
/// call this.
pub async fn read_or_create(items: &dyn ItemStore) -> Result<Vec<u8>, StoreError> {
    if let Some(secret) = read(items).await? {
        return Ok(secret);
    }
    let secret: [u8; 32] = rand::random();
    let item = Item::new(
        SECRET_PK,
        SECRET_SK,
        base64::engine::general_purpose::STANDARD
            .encode(secret)
            .into_bytes(),
    );
    match items.put(item.clone(), Condition::IfAbsent).await {
        Ok(()) => decode(&item),
        Err(StoreError::ConditionFailed) => read(items)
            .await?
            .ok_or_else(|| StoreError::Internal("URL signing secret vanished".into())),
        Err(e) => Err(e),
    }
}
