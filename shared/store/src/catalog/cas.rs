//! The one compare-and-swap loop every read-modify-write of the catalog
//! uses (a release's lifecycle, a versions index, a listing entry): read the
//! item, decide its new body from what was read, write it only if the item
//! is still what was read (or still absent), and when another writer won,
//! read again after a short jittered pause. A change never undoes another,
//! and a deleted item is never brought back.

use std::future::Future;
use std::time::Duration;

use crate::{Condition, Item, ItemStore, StoreError};

/// What to do with the item as read.
pub enum Step<T> {
    /// Nothing to write: the answer is `T`.
    Keep(T),
    /// Write this body, then answer `T`.
    Write(Vec<u8>, T),
}

/// Read `pk`/`sk` and let `decide` say what to write, at most `attempts`
/// times; `gave_up` is the answer when every attempt lost a race.
pub async fn update<T, F, Fut>(
    store: &dyn ItemStore,
    pk: &str,
    sk: &str,
    attempts: u32,
    mut decide: F,
    gave_up: impl FnOnce() -> StoreError,
) -> Result<T, StoreError>
where
    F: FnMut(Option<Item>) -> Fut,
    Fut: Future<Output = Result<Step<T>, StoreError>>,
{
    for attempt in 0..attempts {
        if attempt > 0 {
            // Jittered, growing pauses: racing writers spread out.
            let ms = rand::random_range(0..=(u64::from(attempt) * 16).min(250));
            tokio::time::sleep(Duration::from_millis(ms)).await;
        }
        let current = store.get(pk, sk).await?;
        let condition = match &current {
            Some(item) => Condition::IfUnchanged(item.data.clone()),
            None => Condition::IfAbsent,
        };
        match decide(current.clone()).await? {
            Step::Keep(answer) => return Ok(answer),
            Step::Write(data, answer) => {
                // Whatever else the item holds (an expiry, a last use) stays.
                let item = match current {
                    Some(item) => Item { data, ..item },
                    None => Item::new(pk, sk, data),
                };
                match store.put(item, condition).await {
                    Ok(()) => return Ok(answer),
                    Err(StoreError::ConditionFailed) => continue,
                    Err(e) => return Err(e),
                }
            }
        }
    }
    Err(gave_up())
}
