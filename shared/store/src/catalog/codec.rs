//! Item bodies as JSON.

use serde::Deserialize;

use crate::{Item, StoreError};

/// An item's JSON body as `T`; a body that does not decode is corrupt data.
pub fn decode<T: for<'de> Deserialize<'de>>(item: &Item) -> Result<T, StoreError> {
    serde_json::from_slice(&item.data)
        .map_err(|e| StoreError::Internal(format!("corrupt item {}/{}: {e}", item.pk, item.sk)))
}

/// `value` as an item's JSON body.
pub fn encode<T: serde::Serialize>(value: &T) -> Result<Vec<u8>, StoreError> {
    serde_json::to_vec(value).map_err(StoreError::internal)
}
