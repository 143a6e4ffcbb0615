//! tfreg's verification layer: every check of what a publisher uploads,
//! before anything is stored or visible. Pure functions over bytes; the
//! heavy parsers live here and only here, so a function that serves reads
//! links none of them.
//!
//! - [`signing`]: OpenPGP keys and detached signatures, as Terraform checks
//!   them (rPGP).
//! - [`archives`]: a provider's `.zip` (zip) and a module's `.tar.gz` (tar,
//!   flate2): paths, entries, sizes, compression, `h1:` hashes.
//! - [`release_files`]: goreleaser's file names, SHA256SUMS and the manifest;
//!   [`release_check`]: a provider release as one chain of those checks.
//! - [`module_docs`]: a module's page, read from its files (HCL parser,
//!   Markdown rendered and sanitised).
//! - [`git`]: git's smart-HTTP v2 answers and packs, read by hand, and a
//!   commit's tree walked (the cache's modules from git).
//! - [`origin`]: what another registry serves, checked before the
//!   pull-through cache stores it (SHA256SUMS, its signature, the archives).

pub mod archives;
pub mod git;
pub mod module_docs;
pub mod origin;
pub mod release_check;
pub mod release_files;
pub mod signing;

#[cfg(test)]
#[global_allocator]
static ALLOC: tfreg_testkit::alloc::Counting = tfreg_testkit::alloc::Counting;
