//! What a response that issued a token tells the pipeline's audit line:
//! which token (id, grants), to whom (the provider's `sub` and `iss`) and
//! why (groups, trust policies); never the token itself.

use tfreg_http::body::Response;
use tfreg_http::{Identified, Note};
use tfreg_model::token::{Actor, Subject, TokenRecord};

/// Mark `resp` as having issued `record` to `who`, for `why`: the audit
/// line's note, and the token named as the actor.
pub fn mark_issued(resp: &mut Response, record: &TokenRecord, who: &Subject, why: &str) {
    let note = format!(
        "token {} ({}) issued to sub {:?} of {} {why}",
        record.id,
        record.describe_grants(),
        who.sub,
        who.iss,
    );
    resp.extensions_mut().insert(Note(note));
    resp.extensions_mut().insert(Identified(Actor {
        kind: "token".into(),
        token_id: Some(record.id.clone()),
        token_name: Some(record.name.clone()),
    }));
}
