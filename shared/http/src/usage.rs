//! Counting downloads (issue 38): the read side reports each download to
//! the registry's [`UsageSink`]; the sink keeps it off the path the client
//! waits for. `tfreg serve`: tallied in memory and written in batches (and
//! at stop); a Lambda function: tallied during the invocation and written
//! after its response is sent, before the sandbox is frozen. Counting never
//! fails a download: a sink that cannot write logs it.

use tfreg_model::token::Principal;
use tfreg_model::usage::{Consumer, ConsumerKind, Download};

/// Where downloads are reported.
pub trait UsageSink: Send + Sync {
    /// Count one download; returns at once (never waits on the store).
    fn count(&self, download: Download);
}

/// Counts nothing: the default (and the CLI's local commands).
pub struct NoUsage;

impl UsageSink for NoUsage {
    fn count(&self, _: Download) {}
}

/// Who a principal is, as usage counts them; `None` for the operator (the
/// CLI on the stores directly), whose reads are not a consumer's.
///
/// A first form (issue 38's interface): a CI job is named by its token's
/// subject until the exchange keeps the repository and workflow.
pub fn consumer_of(principal: &Principal) -> Option<Consumer> {
    Some(match principal {
        Principal::Operator => return None,
        Principal::Anonymous => Consumer {
            kind: ConsumerKind::Anonymous,
            id: "anonymous".into(),
            label: "anonymous".into(),
        },
        Principal::Token(record) => match &record.issued_to {
            None => Consumer {
                kind: ConsumerKind::Token,
                id: format!("token:{}", record.id),
                label: format!("{} ({})", record.name, record.id),
            },
            Some(subject) if record.created_by == "ci-exchange" => Consumer {
                kind: ConsumerKind::Ci,
                id: format!("ci:{}|{}", subject.iss, subject.sub),
                label: subject.sub.clone(),
            },
            Some(subject) => Consumer {
                kind: ConsumerKind::Sso,
                id: format!("sso:{}|{}", subject.iss, subject.sub),
                label: subject.label().to_string(),
            },
        },
    })
}
