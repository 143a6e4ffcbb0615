//! The audit trail's record of one change of state: who (never a secret),
//! what, to what, and how it ended. Pure data; the HTTP pipeline writes one
//! per change, the store keeps them.

use serde::{Deserialize, Serialize};

use crate::token::Actor;

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
