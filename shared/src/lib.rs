//! tfreg's protocol crate: everything the registry does, shared by the local
//! server (`tfreg serve`), the Lambda functions and the tests.
//!
//! - [`address`], [`version`]: what names and versions are valid.
//! - [`protocol`]: the wire types of the four protocols and the publish API.
//! - [`router`]: raw path → [`router::Route`].
//! - [`service`], [`handlers`]: request → response, errors mapped in one place ([`error`]).
//! - [`catalog`], [`storage`]: the item model and its backends.
//! - [`hashing`], [`signing`], [`signed_url`], [`auth`], [`release_files`], [`module_archive`]: pure checks.

pub mod address;
pub mod auth;
#[cfg(feature = "aws")]
pub mod aws;
pub mod catalog;
pub mod error;
pub mod handlers;
pub mod hashing;
pub mod module_archive;
pub mod protocol;
pub mod registry;
pub mod release_files;
pub mod router;
pub mod service;
pub mod signed_url;
pub mod signing;
pub mod storage;
pub mod version;

pub use error::Error;
pub use registry::{Config, Registry};
