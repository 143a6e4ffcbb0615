//! Download counts and consumers (issue 38): per (version, day, platform)
//! and per (version, consumer), each counter one item written with an
//! atomic add, never a read-modify-write. `schema` names the keys.
//!
//! Interface written first (the usage-core helper fills it in); the
//! surfaces (admin API, CLI, UI) read [`report`].

use tfreg_model::usage::{Download, UsageReport};

use crate::{ItemStore, StoreError};

/// Add `downloads` (a batch: a serve flush, one Lambda invocation's), one
/// atomic add per distinct counter they touch.
pub async fn add(store: &dyn ItemStore, downloads: &[Download]) -> Result<(), StoreError> {
    let _ = (store, downloads);
    todo!("issue 38: usage-core")
}

/// The usage of `package`: every version with counts, or only `version`;
/// with its consumers only when `consumers` (the caller decided the reader
/// may see them). Day counts of the last [`DAYS_KEPT`] days.
pub async fn report(
    store: &dyn ItemStore,
    package: &tfreg_model::usage::Package,
    version: Option<&str>,
    consumers: bool,
) -> Result<UsageReport, StoreError> {
    let _ = (store, package, version, consumers);
    todo!("issue 38: usage-core")
}

/// How long a day's counts are kept (their items expire after that).
pub const DAYS_KEPT: u64 = 400;
