//! Bounded sets of places: at most `max` holders at a time in one partition,
//! each holding its place until it lets go or its time runs out. A publish
//! in progress holds one place of its token's and one of its namespace's
//! ([`crate::catalog::uploads`]), so that `begin` alone cannot grow the
//! store without bound.
//!
//! A place is one item of its partition, sort key `PLACE#<n>` for `n` below
//! the bound ([`crate::catalog::schema`]): taking one is a query of at most
//! `max` small items and one conditional write, on every backend (no scan,
//! no counter to drift). Of two takers of one free place one write wins; the
//! other looks again. A place whose time ran out is free, taken over with a
//! compare-and-swap; the store deletes its item by itself some time later.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use tfreg_model::blob_key::UploadId;

use super::schema::{PLACE_PREFIX, place_sk};
use crate::{Condition, Item, ItemStore, StoreError, query_all};

/// How often a taker looks again after losing races for a place, besides
/// once per place (every lost race is a place another taker got).
const ATTEMPTS: usize = 8;

/// A place held: the keys of its item.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Place {
    pub pk: String,
    pub sk: String,
}

/// What a place's item holds: who holds it (a publish's id, a CI token
/// exchange's `jti` key), until when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Holding {
    holder: String,
    /// Unix seconds; the place is free once `now` is past it.
    until: u64,
}

/// One bounded set: partition `pk`, sort keys `<prefix>PLACE#<n>` for `n`
/// below `max` (a prefix keeps several sets in one partition).
#[derive(Debug, Clone, Copy)]
pub struct Places<'a> {
    pub pk: &'a str,
    pub prefix: &'a str,
    pub max: usize,
}

/// Take a free place of partition `pk` (at most `max` places) for `holder`
/// until `until`. When all are held: [`StoreError::Full`] saying `full`,
/// with the seconds until the first of them frees up.
pub async fn take(
    store: &dyn ItemStore,
    pk: &str,
    max: usize,
    holder: &UploadId,
    until: u64,
    now: u64,
    full: impl Fn() -> String,
) -> Result<Place, StoreError> {
    let places = Places {
        pk,
        prefix: "",
        max,
    };
    take_in(store, places, holder.as_str(), until, now, full).await
}

/// [`take`], of any set of [`Places`].
pub async fn take_in(
    store: &dyn ItemStore,
    places: Places<'_>,
    holder: &str,
    until: u64,
    now: u64,
    full: impl Fn() -> String,
) -> Result<Place, StoreError> {
    let Places { pk, prefix, max } = places;
    let data = super::encode(&Holding {
        holder: holder.to_string(),
        until,
    })?;
    let prefixed = format!("{prefix}{PLACE_PREFIX}");
    for _ in 0..max + ATTEMPTS {
        let mut held = Vec::new();
        let mut lapsed = HashMap::new();
        for item in query_all(store, pk, &prefixed).await? {
            let holding: Holding = super::decode(&item)?;
            if now > holding.until {
                lapsed.insert(item.sk, item.data);
            } else {
                held.push((item.sk, holding.until));
            }
        }
        let mut free: Vec<(String, Condition)> = (0..max)
            .map(|n| format!("{prefix}{}", place_sk(n)))
            .filter(|sk| held.iter().all(|(h, _)| h != sk))
            .map(|sk| match lapsed.remove(&sk) {
                Some(data) => (sk, Condition::IfUnchanged(data)),
                None => (sk, Condition::IfAbsent),
            })
            .collect();
        if free.is_empty() {
            let first_free = held.iter().map(|(_, until)| *until).min().unwrap_or(now);
            return Err(StoreError::Full {
                message: full(),
                retry_after_secs: first_free.saturating_sub(now) + 1,
            });
        }
        // Takers at the same time spread over the free places.
        let (sk, condition) = free.swap_remove(rand::random_range(0..free.len()));
        let item = Item::new(pk, sk.as_str(), data.clone()).expiring_at(until);
        match store.put(item, condition).await {
            Ok(()) => {
                return Ok(Place {
                    pk: pk.to_string(),
                    sk,
                });
            }
            Err(StoreError::ConditionFailed) => continue,
            Err(e) => return Err(e),
        }
    }
    Err(StoreError::Full {
        message: "too many publishes are starting at once: retry in a second".into(),
        retry_after_secs: 1,
    })
}

/// Let go of `place` if `holder` still holds it (until `until`): a place
/// taken over since is left to its new holder.
pub async fn release(
    store: &dyn ItemStore,
    place: &Place,
    holder: &UploadId,
    until: u64,
    now: u64,
) -> Result<(), StoreError> {
    release_as(store, place, holder.as_str(), until, now).await
}

/// [`release`], for any holder.
pub async fn release_as(
    store: &dyn ItemStore,
    place: &Place,
    holder: &str,
    until: u64,
    now: u64,
) -> Result<(), StoreError> {
    let holding = |until| {
        super::encode(&Holding {
            holder: holder.to_string(),
            until,
        })
    };
    let freed = Item::new(place.pk.as_str(), place.sk.as_str(), holding(0)?).expiring_at(now);
    match store
        .put(freed, Condition::IfUnchanged(holding(until)?))
        .await
    {
        Ok(()) | Err(StoreError::ConditionFailed) => Ok(()),
        Err(e) => Err(e),
    }
}
