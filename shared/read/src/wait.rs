//! Waiting for a fill (plan §5): start it with the registry's
//! [`Filler`](tfreg_http::fill::Filler), then look in the store until the
//! result is there, the fill's lease says it failed, or the deadline
//! passes (503 with `Retry-After`: the fill goes on, and Terraform retries
//! once). The same loop in `tfreg serve` and in the Lambda functions: the
//! store is where the result appears, whoever fetched it.

use std::future::Future;
use std::time::Duration;

use tfreg_http::error::Error;
use tfreg_http::registry::Registry;
use tfreg_model::cache::lease::{Fill, Next, next};
use tfreg_store::catalog::lease;

/// How long a metadata request waits for its fill: inside Terraform's 10 s.
pub const METADATA_WAIT: Duration = Duration::from_secs(8);
/// How long an archive request waits before answering a redirect to itself.
pub const ARCHIVE_WAIT: Duration = Duration::from_secs(20);
/// What a 503 asks the client to wait.
const RETRY_AFTER_SECS: u64 = 2;

/// Start `fill` and wait up to `deadline` for `ready` to find its result.
/// `Ok(None)` when the deadline passed with the fill still going on.
pub async fn fill_and_wait<T, F, Fut>(
    registry: &Registry,
    fill: Fill,
    deadline: Duration,
    mut ready: F,
) -> Result<Option<T>, Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<T>, Error>>,
{
    let filler = registry
        .filler
        .as_ref()
        .ok_or_else(|| Error::internal("a fill was asked of a registry that has no filler"))?;
    let what = fill.key();
    filler.start(fill).await?;
    let until = tokio::time::Instant::now() + deadline;
    // A fill of metadata takes milliseconds in `tfreg serve` (measured in
    // BENCHMARKS.md, cache): look soon, then back off.
    let mut pause = Duration::from_millis(20);
    loop {
        if let Some(found) = ready().await? {
            return Ok(Some(found));
        }
        // A failure held by the lease (this fill's, or one a moment ago
        // that stopped this fill from starting) is the answer.
        if let Some(l) = lease::lease(registry.items.as_ref(), &what).await?
            && let Next::Failed { status, message } = next(&l, registry.now())
        {
            return Err(failed(status, message));
        }
        if tokio::time::Instant::now() >= until {
            return Ok(None);
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(400));
    }
}

/// A fill that failed, as its lease recorded it.
pub fn failed(status: u16, message: String) -> Error {
    match status {
        404 => Error::NotFound(message),
        503 => still_filling(message),
        _ => Error::OriginRefused(message),
    }
}

/// 503: try again in a moment.
pub fn still_filling(message: impl Into<String>) -> Error {
    Error::OriginUnavailable {
        message: message.into(),
        retry_after_secs: RETRY_AFTER_SECS,
    }
}
