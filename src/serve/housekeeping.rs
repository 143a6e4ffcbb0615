//! What `tfreg serve` cleans up by itself: at start and then every hour,
//! upload slots no URL can write any more, records of publishes nobody can
//! complete any more, and temporary files no request is writing (an upload or
//! copy cut off by a crash; a cancelled one removes its own at once).

use std::time::Duration;

use tfreg_store::fs::FsBlobStore;
use tfreg_store::sqlite::SqliteStore;

/// A temporary file untouched this long belongs to no request: a request
/// writing one gets data at least every body idle timeout, and a publish
/// holds its claimed files for seconds.
const TEMP_MAX_AGE: Duration = Duration::from_secs(3600);

const EVERY: Duration = Duration::from_secs(3600);

/// Sweep now and then every hour, in the background.
pub fn spawn(blobs: FsBlobStore, items: SqliteStore, url_ttl_secs: u64) {
    let uploads_max_age =
        Duration::from_secs(url_ttl_secs + tfreg_store::catalog::uploads::GRACE_SECS);
    tokio::spawn(async move {
        let mut every = tokio::time::interval(EVERY);
        loop {
            every.tick().await;
            sweep_uploads(&blobs, uploads_max_age).await;
            sweep_temp(&blobs, TEMP_MAX_AGE).await;
            match items.sweep_expired(tfreg_http::registry::unix_now()).await {
                Ok(0) => {}
                Ok(n) => tracing::info!(removed = n, "swept expired publish records"),
                Err(e) => tracing::warn!(error = %e, "sweeping expired publish records failed"),
            }
        }
    });
}

async fn sweep_uploads(blobs: &FsBlobStore, max_age: Duration) {
    let blobs = blobs.clone();
    let swept = tokio::task::spawn_blocking(move || blobs.sweep_uploads(max_age)).await;
    report("expired upload slots", swept);
}

/// Remove temporary files older than `max_age` (all of them with zero).
pub async fn sweep_temp(blobs: &FsBlobStore, max_age: Duration) {
    let blobs = blobs.clone();
    let swept = tokio::task::spawn_blocking(move || blobs.sweep_temp(max_age)).await;
    report("temporary files left by an interrupted write", swept);
}

fn report(
    what: &str,
    swept: Result<Result<tfreg_store::fs::Swept, tfreg_store::StoreError>, tokio::task::JoinError>,
) {
    match swept {
        Ok(Ok(s)) if s.entries == 0 => {}
        Ok(Ok(s)) => tracing::info!(removed = s.entries, bytes = s.bytes, "swept {what}"),
        Ok(Err(e)) => tracing::warn!(error = %e, "sweeping {what} failed"),
        Err(e) => tracing::warn!(error = %e, "sweeping {what} failed"),
    }
}
