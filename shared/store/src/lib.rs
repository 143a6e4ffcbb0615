//! tfreg's store, the layer above the model: where metadata and archives
//! live, and the one item schema every backend holds.
//!
//! - [`traits`]: [`ItemStore`] (DynamoDB's item model: partition key, sort
//!   key, an opaque JSON body, conditional writes) and [`BlobStore`]
//!   (archives), and [`StoreError`].
//! - [`catalog`]: everything the registry keeps, as items of the item store,
//!   written once against the traits; [`catalog::schema`] is the item
//!   schema, every key of every item, in one place.
//! - Backends, each behind its feature: `embedded` ([`sqlite`] and [`fs`],
//!   for `tfreg serve`), `dynamodb` and `s3` ([`dynamodb`], [`s3`], with the
//!   SDK's one HTTPS client in [`aws`]).
//!
//! Nothing here knows HTTP: a store that is down is
//! [`StoreError::Unavailable`], and the HTTP pipeline decides what a client
//! is told.

pub mod catalog;
mod keep;
pub mod maintenance;
pub mod read_only;
pub mod traits;

#[cfg(feature = "aws")]
pub mod aws;
#[cfg(feature = "dynamodb")]
pub mod dynamodb;
#[cfg(feature = "embedded")]
pub mod fs;
#[cfg(feature = "s3")]
pub mod s3;
#[cfg(feature = "embedded")]
pub mod sqlite;

pub use keep::{Kept, MakeZip, keep_as, keep_module_zip};
pub use traits::*;
