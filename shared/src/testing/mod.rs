//! An in-process registry for tests: the real handlers over a real store,
//! answered by the same [`crate::app::handle`] every entry point runs, with no
//! spawned process and no gpg. Most handler and bad-input tests need nothing
//! more; the end-to-end suite keeps the real server, Terraform and gpg.
//!
//! - [`TestRegistry::embedded`]: SQLite and a directory in a temp dir.
//! - [`TestRegistry::aws`] (feature `aws`): DynamoDB and S3 on the emulators
//!   named by the standard `AWS_ENDPOINT_URL_*` variables, a fresh table and bucket.
//!   [`TestRegistry::aws_at`]: the same on emulators at given URLs (a test's own).
//! - [`TestSigner`]: throwaway OpenPGP keys (committed fixtures) that sign
//!   SHA256SUMS in-process.
//! - [`provider_release`], [`provider_zip`], [`module_archive`]: files to publish.
//! - [`scale`]: catalogs of thousands of versions, written in bulk.

mod files;
mod registry;
pub mod scale;
mod signer;

pub use files::*;
pub use registry::*;
pub use signer::TestSigner;
