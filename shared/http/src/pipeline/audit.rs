//! The audit trail's record of a request that changes state: one typed
//! [`AuditRecord`], folded from what the layers inside and the handler
//! left on the response, written once the answer (error pages included) is
//! final.

use std::sync::Arc;

use http::Extensions;
use tfreg_model::audit::{Event, Outcome};
use tfreg_model::token::{Actor, Principal};
use tfreg_store::catalog::audit;

use super::Shared;
use super::facts::{Failed, RequestId, Routed};
use super::layer::{Inner, Job, Next};
use crate::body::{Request, Response};
use crate::groups::{AuditAs, Identified, Note};

/// Writes the audit record.
#[derive(Clone)]
pub(super) struct Audit(pub(super) Arc<Shared>);

impl Job for Audit {
    async fn run<S: Inner>(self, req: Request, next: Next<S>) -> Response {
        let shared = self.0;
        let request_id = RequestId::of(req.extensions());
        let resp = next.run(req).await;
        if let Some(record) = AuditRecord::of(resp.status().as_u16(), resp.extensions(), request_id)
        {
            let keep = record.keep;
            let event = record.event(shared.registry.now());
            audit::record(shared.registry.items.as_ref(), &event, keep).await;
        }
        resp
    }
}

/// One request's entry in the audit trail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditRecord {
    /// The route's action ([`Routed::audit_action`]), else the handler's
    /// ([`AuditAs`]).
    pub action: &'static str,
    /// The route's object ([`Routed::audit_target`]).
    pub target: String,
    /// Who: the one the handler identified ([`Identified`]), else the
    /// principal the authorisation found (refused or not), else anonymous.
    pub actor: Actor,
    /// Kept in the store, not only logged: the actor is known.
    pub keep: bool,
    /// The final status (a UI error page's redirect included).
    pub status: u16,
    /// The error's public message, else the handler's [`Note`]; escaped (a
    /// refusal may quote the request, and others read the trail).
    pub detail: Option<String>,
    pub request_id: RequestId,
}

impl AuditRecord {
    /// The record of a request answered with `status` and `facts` (its
    /// response's extensions); `None` for a request that changes nothing
    /// the trail names (a read, a refused path, a step that issued nothing).
    pub fn of(status: u16, facts: &Extensions, request_id: RequestId) -> Option<Self> {
        let routed = facts.get::<Routed>()?;
        let action = routed
            .audit_action
            .or(facts.get::<AuditAs>().map(|a| a.0))?;
        let detail = match facts.get::<Failed>() {
            Some(Failed(e)) => Some(e.public_message(&request_id.to_string())),
            None => facts.get::<Note>().map(|n| n.0.clone()),
        }
        .map(|d| tfreg_model::text::escaped(&d).into_owned());
        let principal = facts.get::<Principal>().unwrap_or(&Principal::Anonymous);
        let identified = facts.get::<Identified>().map(|i| i.0.clone());
        Some(AuditRecord {
            action,
            target: routed.audit_target.clone(),
            keep: principal.identified() || identified.is_some(),
            actor: identified.unwrap_or_else(|| principal.actor()),
            status,
            detail,
            request_id,
        })
    }

    /// The event the store keeps, at `at` (Unix seconds).
    pub fn event(self, at: u64) -> Event {
        Event {
            at,
            actor: self.actor,
            action: self.action.to_string(),
            target: self.target,
            outcome: Outcome::of_status(self.status),
            status: self.status,
            detail: self.detail,
            request_id: self.request_id.to_string(),
        }
    }
}
