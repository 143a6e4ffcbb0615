//! The audit trail: one structured log line (`audit`) for every change of
//! state — publish, deprecate, yank, delete, token and key changes — naming
//! who (token name and id, never the secret), what, and the outcome; and,
//! when the actor is known, the same event kept in the item store for
//! `tfreg audit` / `GET /v1/admin/audit`.
//!
//! Events are items of one partition, [`AUDIT_PK`], whose sort key starts
//! with the inverted time: a query in ascending order lists the newest first.

use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::auth::Actor;
use crate::error::Error;
use crate::storage::{Condition, Item, ItemStore};

/// The partition of audit events.
pub const AUDIT_PK: &str = "AUDIT";
/// How long events are kept (the store deletes them after that).
pub const RETENTION_SECS: u64 = 400 * 86_400;
/// Most events one listing returns.
pub const MAX_LIST: usize = 1000;

/// How a change ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// Done (2xx).
    Ok,
    /// Refused: the client's mistake or missing right (4xx).
    Refused,
    /// Failed on our side or the store's (5xx).
    Failed,
}

impl Outcome {
    pub fn of_status(status: u16) -> Self {
        match status {
            200..=399 => Outcome::Ok,
            400..=499 => Outcome::Refused,
            _ => Outcome::Failed,
        }
    }
}

/// One change of state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    /// Unix seconds.
    pub at: u64,
    pub actor: Actor,
    /// `publish`, `release.yank`, `token.create`, ... ([`crate::router::Route::audit_action`]).
    pub action: String,
    /// What it was done to (`providers/ns/type/1.0.0`, `token 3f2a…`).
    pub target: String,
    pub outcome: Outcome,
    pub status: u16,
    /// What happened, or why it was refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    pub request_id: String,
}

/// What a handler tells the audit trail about a change it made (carried in
/// the response's extensions, read by [`crate::app`]).
#[derive(Debug, Clone)]
pub struct Note(pub String);

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
    let sk = format!("{:020}#{:016x}", u64::MAX - millis, rand::random::<u64>());
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
pub async fn recent(store: &dyn ItemStore, limit: usize) -> Result<Vec<Event>, Error> {
    let limit = limit.clamp(1, MAX_LIST);
    let mut events = Vec::with_capacity(limit.min(100));
    let mut after: Option<String> = None;
    while events.len() < limit {
        let page = store.query_page(AUDIT_PK, "", after.as_deref()).await?;
        for item in &page.items {
            events.push(crate::catalog::decode(item)?);
        }
        match page.next {
            Some(next) if after.as_deref() != Some(next.as_str()) => after = Some(next),
            _ => break,
        }
    }
    events.truncate(limit);
    Ok(events)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::Principal;
    use crate::storage::sqlite::SqliteStore;

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
