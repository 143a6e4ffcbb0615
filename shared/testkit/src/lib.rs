//! For tests and benchmarks only (a dev-dependency, never linked into a
//! function or the CLI): the registry in-process over a real store, answered
//! by the same pipeline every entry point runs, with no spawned process and
//! no gpg. Most handler and bad-input tests need nothing more; the
//! end-to-end suite keeps the real server, Terraform and gpg.
//!
//! - [`TestRegistry::embedded`]: SQLite and a directory in a temp dir.
//! - [`TestRegistry::aws`]: DynamoDB and S3 on the emulators named by the
//!   standard `AWS_ENDPOINT_URL_*` variables, a fresh table and bucket.
//!   [`TestRegistry::aws_at`]: the same on emulators at given URLs (a test's own).
//! - [`TestSigner`]: throwaway OpenPGP keys (committed fixtures) that sign
//!   SHA256SUMS in-process.
//! - [`provider_release`], [`provider_zip`], [`module_archive`]: files to publish.
//! - [`scale`]: catalogs of thousands of versions, written in bulk.
//! - [`counting::CountingStore`]: what a request costs in store requests.
//! - [`alloc`] (a counting global allocator: bounded memory, measured) and
//!   [`panics`] (was a panic raised, even one a guard caught?).

pub mod alloc;
pub mod counting;
mod files;
pub mod oidc;
pub mod panics;
mod registry;
pub mod scale;
mod signer;

pub use files::*;
pub use registry::*;
pub use signer::TestSigner;

#[cfg(test)]
#[global_allocator]
static ALLOC: alloc::Counting = alloc::Counting;

/// A Lambda function binary started without its configuration stops at
/// init, at once, naming what is missing (the error the operator reads), and
/// never reaches for the network.
pub fn function_stops_without_settings(binary: &str) {
    let out = std::process::Command::new(binary)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .output()
        .expect("the function binary runs");
    assert!(
        !out.status.success(),
        "{binary}: init must fail without its settings"
    );
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("init failed") && text.contains("is not set (it is required)"),
        "{binary}: {text}"
    );
}
