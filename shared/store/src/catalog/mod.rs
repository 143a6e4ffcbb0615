//! Everything the registry keeps, as items of the [`ItemStore`](crate::ItemStore),
//! written once against the traits so every backend holds the same thing.
//! [`schema`] names every key.
//!
//! - [`releases`]: provider and module releases, their lifecycle, their docs;
//!   [`index`]: the versions index of each provider and module; [`listing`]:
//!   one entry per provider and module for the UI's lists.
//! - [`tokens`], [`keys`] (namespace signing keys), [`uploads`] (publishes
//!   in progress, bounded with [`places`]), [`audit`] (the trail),
//!   [`secret`] (the URL signing secret), [`login`] (sign-ins between
//!   their steps: pending logins, codes, used nonces), [`sso`] (group mappings),
//!   [`upstreams`] (the registries the cache reads from), [`cache`] (what it
//!   keeps of them), [`lease`] (one fetch per miss), [`usage`] (download
//!   counts and consumers).
//! - [`releases`], [`docs`], [`indexing`], [`import`]: releases, module docs,
//!   keeping indexes in step, bulk writes; [`cas`]: the one compare-and-swap
//!   loop; [`codec`]: item bodies as JSON.

pub mod audit;
pub mod cache;
pub mod cache_listing;
pub mod cache_place;
pub mod cached_module;
pub mod cas;
pub mod codec;
pub mod docs;
pub mod import;
pub mod index;
pub mod indexing;
mod items;
pub mod keys;
pub mod lease;
pub mod listing;
pub mod login;
pub mod places;
pub mod releases;
pub mod schema;
pub mod secret;
pub mod sessions;
pub mod sso;
pub mod tokens;
pub mod uploads;
pub mod upstreams;
pub mod usage;

pub use codec::{decode, encode};
pub use docs::{module_docs, module_zip, put_module_docs, put_module_zip};
pub use import::{import_module_releases, import_provider_releases};
pub use indexing::{module_index, provider_index, reindex_module, reindex_provider, sync_index};
pub use releases::*;
