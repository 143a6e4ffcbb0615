//! How a read that misses the pull-through cache gets what it asked for
//! fetched: the [`Filler`] the entry point gave the registry. `tfreg serve`
//! fills in its own process; in AWS the read functions invoke the fill
//! function. A registry without one never fetches (sealed, or not
//! configured): a miss is then a 404 "not cached".

use async_trait::async_trait;
use tfreg_model::cache::lease::Fill;

use crate::error::Error;

/// Starts fetching one [`Fill`]; the caller then waits on the store for
/// its result (the fill's outcome is recorded in its lease).
#[async_trait]
pub trait Filler: Send + Sync {
    /// Start fetching `fill`, returning once it is under way (or queued).
    async fn start(&self, fill: Fill) -> Result<(), Error>;
}
