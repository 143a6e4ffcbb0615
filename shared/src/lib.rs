//! tfreg's protocol crate: everything the registry does, shared by the local
//! server (`tfreg serve`), the Lambda functions and the tests.
//!
//! Where to look, from the wire inwards:
//! - Protocol names: [`protocol`] (wire types), [`router`] (path ⇄ [`router::Route`]),
//!   [`blob_key`] (archive object keys), [`release_files`] (goreleaser file names).
//! - The request path: [`app`] (route → authorise → dispatch → log) over
//!   [`http_types`], [`handlers`] (read, blob, publish), errors mapped to HTTP in
//!   one place ([`error`]).
//! - Pure checks: [`address`], [`version`], [`release_check`] (a provider release,
//!   as one chain), [`signing`], [`archives`], [`hashing`], [`signed_url`], [`auth`].
//! - State: [`registry`] (stores, URL signer, clock, settings), [`catalog`] and
//!   [`upload_session`] (the item model), [`storage`] (traits and the embedded
//!   backends), [`aws`] (DynamoDB, S3, the Lambda entry point).
//!
//! A new endpoint is a new [`router::Route`] variant: the compiler then points
//! at its handler arm in [`app`], its [`router::Endpoint`] and its path builder.

pub mod address;
pub mod app;
pub mod archives;
pub mod audit;
pub mod auth;
#[cfg(feature = "aws")]
pub mod aws;
pub mod blob_key;
pub mod catalog;
pub mod error;
pub mod handlers;
pub mod hashing;
pub mod http_types;
pub mod listing;
pub mod module_docs;
pub mod namespace_keys;
#[cfg(test)]
mod properties;
pub mod protocol;
pub mod registry;
pub mod release_check;
pub mod release_files;
pub mod router;
pub mod signed_url;
pub mod signing;
pub mod storage;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod ui;
pub mod upload_session;
pub mod version;
pub mod version_index;

pub use error::Error;
pub use registry::{Config, Registry};
