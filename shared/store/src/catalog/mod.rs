//! Everything the registry keeps, as items of the [`ItemStore`](crate::ItemStore),
//! written once against the traits so every backend holds the same thing.
//! [`schema`] names every key.
//!
//! - [`releases`]: provider and module releases, their lifecycle, their docs;
//!   [`index`]: the versions index of each provider and module; [`listing`]:
//!   one entry per provider and module for the UI's lists.
//! - [`tokens`], [`keys`] (namespace signing keys), [`uploads`] (publishes
//!   in progress, bounded with [`places`]), [`audit`] (the trail),
//!   [`secret`] (the URL signing secret).

pub mod audit;
pub mod index;
pub mod keys;
pub mod listing;
pub mod places;
pub mod releases;
pub mod schema;
pub mod secret;
pub mod tokens;
pub mod uploads;

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
pub use releases::*;
