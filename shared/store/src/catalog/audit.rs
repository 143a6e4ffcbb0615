//! The audit trail: one structured log line (`audit`) for every change of
//! state — publish, deprecate, yank, delete, token and key changes — naming
//! who (token name and id, never the secret), what, and the outcome; and,
//! when the actor is known, the same event kept in the item store for
//! `tfreg audit` / `GET /v1/admin/audit`.
//!
//! Events are items of one partition, [`AUDIT_PK`], whose sort key starts
//! with the inverted time: a query in ascending order lists the newest first.

use std::time::{SystemTime, UNIX_EPOCH};

pub use tfreg_model::audit::{Event, Outcome};

use super::codec::decode;
use super::schema::{AUDIT_PK, audit_sk};
use crate::{Condition, Item, ItemStore, StoreError};

/// How long events are kept (the store deletes them after that).
pub const RETENTION_SECS: u64 = 400 * 86_400;
/// Most events one listing returns.
pub const MAX_LIST: usize = 1000;

/// Log `event` and, if its actor is known, keep it. A failure to keep it is
/// logged, never turned into the request's failure: the change is done.
pub async fn record(store: &dyn ItemStore, event: &Event, keep: bool) {
    tracing::info!(
        action = %event.action,
        target = %event.target,
        actor = %event.actor.describe(),
        token_id = event.actor.token_id.as_deref().unwrap_or(""),
        outcome = ?event.outcome,
        status = event.status,
        detail = event.detail.as_deref().unwrap_or(""),
        request_id = %event.request_id,
        "audit"
    );
    if !keep {
        return;
    }
    let millis = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    let sk = audit_sk(millis, rand::random::<u64>());
    let item = match serde_json::to_vec(event) {
        Ok(data) => Item::new(AUDIT_PK, sk, data).expiring_at(event.at + RETENTION_SECS),
        Err(e) => {
            tracing::error!(error = %e, "cannot encode an audit event");
            return;
        }
    };
    if let Err(e) = store.put(item, Condition::IfAbsent).await {
        tracing::error!(error = %e, request_id = %event.request_id, "cannot keep an audit event");
    }
}

/// The newest `limit` events, newest first.
pub async fn recent(store: &dyn ItemStore, limit: usize) -> Result<Vec<Event>, StoreError> {
    let limit = limit.clamp(1, MAX_LIST);
    let mut events = Vec::with_capacity(limit.min(100));
    let mut after: Option<String> = None;
    while events.len() < limit {
        let page = store.query_page(AUDIT_PK, "", after.as_deref()).await?;
        for item in &page.items {
            events.push(decode(item)?);
        }
        match page.next {
            Some(next) if after.as_deref() != Some(next.as_str()) => after = Some(next),
            _ => break,
        }
    }
    events.truncate(limit);
    Ok(events)
}

#[cfg(all(test, feature = "embedded"))]
mod tests {
    use super::*;
    use crate::sqlite::SqliteStore;
    use tfreg_model::token::Principal;

    #[tokio::test]
    async fn events_are_listed_newest_first_and_only_known_actors_kept() {
        let store = SqliteStore::in_memory().unwrap();
        let event = |n: u64| Event {
            at: n,
            actor: Principal::Operator.actor(),
            action: "token.create".into(),
            target: format!("t{n}"),
            outcome: Outcome::Ok,
            status: 201,
            detail: None,
            request_id: "r".into(),
        };
        for n in 0..3 {
            record(&store, &event(n), true).await;
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        record(&store, &event(9), false).await;
        let listed = recent(&store, 10).await.unwrap();
        let targets: Vec<&str> = listed.iter().map(|e| e.target.as_str()).collect();
        assert_eq!(targets, ["t2", "t1", "t0"]);
        assert_eq!(recent(&store, 2).await.unwrap().len(), 2);
        assert_eq!(Outcome::of_status(403), Outcome::Refused);
        assert_eq!(Outcome::of_status(503), Outcome::Failed);
    }
}
