//! One fetch per miss, across processes (plan §5): a [`Lease`] item per
//! fill in the `FILLING` partition, keyed by the sha256 of its
//! [`Fill::key`](tfreg_model::cache::lease::Fill::key), written only with
//! conditions (created if absent, replaced if unchanged), so exactly one
//! process holds it; what each process does on finding one is
//! [`tfreg_model::cache::lease::next`]'s decision.

use tfreg_model::cache::lease::{Lease, Next, Outcome, next};
use tfreg_model::hashing::sha256_hex;

use super::codec::{decode, encode};
use super::schema::FILLING_PK;
use crate::{Condition, Item, ItemStore, StoreError};

/// Leases and outcomes are kept an hour past their time, then the store
/// may drop them.
const KEPT_SECS: u64 = 3600;

/// What trying to take a lease gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Taken {
    /// This process holds it (until it renews or releases it).
    Held(Lease),
    /// Another holds it: wait for the result.
    Wait,
    /// The last fetch failed a moment ago: answer this.
    Failed { status: u16, message: String },
}

fn sk(what: &str) -> String {
    sha256_hex(what.as_bytes())
}

fn item(lease: &Lease) -> Result<Item, StoreError> {
    Ok(Item::new(FILLING_PK, sk(&lease.what), encode(lease)?)
        .expiring_at(lease.until.saturating_add(KEPT_SECS)))
}

/// The lease of `what`, if any.
pub async fn lease(store: &dyn ItemStore, what: &str) -> Result<Option<Lease>, StoreError> {
    store
        .get(FILLING_PK, &sk(what))
        .await?
        .map(|i| decode(&i))
        .transpose()
}

/// Try to take the lease of `what` as `holder` at `now`.
pub async fn take(
    store: &dyn ItemStore,
    what: &str,
    holder: &str,
    now: u64,
) -> Result<Taken, StoreError> {
    let mine = Lease::taken(what, holder, now);
    for _ in 0..4 {
        let found = store.get(FILLING_PK, &sk(what)).await?;
        let condition = match &found {
            None => Condition::IfAbsent,
            Some(item) => {
                let lease: Lease = decode(item)?;
                match next(&lease, now) {
                    Next::Wait => return Ok(Taken::Wait),
                    Next::Failed { status, message } => {
                        return Ok(Taken::Failed { status, message });
                    }
                    Next::TakeOver => Condition::IfUnchanged(item.data.clone()),
                }
            }
        };
        match store.put(item(&mine)?, condition).await {
            Ok(()) => return Ok(Taken::Held(mine)),
            // Another process took or changed it meanwhile: look again.
            Err(StoreError::ConditionFailed) => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(Taken::Wait)
}

/// Renew `held` at `now` (a long fetch); the lease as renewed, or
/// [`StoreError::ConditionFailed`] when it was taken over meanwhile.
pub async fn renew(store: &dyn ItemStore, held: &Lease, now: u64) -> Result<Lease, StoreError> {
    let renewed = held.renewed(now);
    store
        .put(item(&renewed)?, Condition::IfUnchanged(encode(held)?))
        .await?;
    Ok(renewed)
}

/// Release `held` at `now` with how the fetch ended. A lease taken over
/// meanwhile is left to its new holder.
pub async fn release(
    store: &dyn ItemStore,
    held: &Lease,
    outcome: Outcome,
    now: u64,
) -> Result<(), StoreError> {
    let released = held.released(outcome, now);
    match store
        .put(item(&released)?, Condition::IfUnchanged(encode(held)?))
        .await
    {
        Ok(()) | Err(StoreError::ConditionFailed) => Ok(()),
        Err(e) => Err(e),
    }
}
