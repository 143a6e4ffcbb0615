//! Sign-in data an admin manages (issue 21): identity-provider group
//! mappings (`/v1/admin/sso`) and namespaces' CI trust policies
//! (`/v1/admin/trust`). Bodies are validated as they are read (the model's
//! types refuse what they cannot hold: 400); each change leaves a [`Note`]
//! naming what changed for the audit trail.

use http::{HeaderMap, StatusCode};
use tfreg_http::body::{Body, Response, json};
use tfreg_http::{Error, Registry};
use tfreg_model::protocol::{
    AddedTrust, MappedGroup, MappingList, RemovedTrust, TrustList, UnmappedGroup,
};
use tfreg_model::router::AdminRoute;
use tfreg_model::sso::{GroupMapping, Namespaces, Unmap};
use tfreg_model::trust::{TrustPolicy, TrustRecord, check_allow_listed};
use tfreg_store::catalog::sso;

use crate::{body, noted};

/// `scope on namespaces`, as a note says it.
fn grants(m: &GroupMapping) -> String {
    let on = match m.namespaces() {
        Namespaces::All => "every namespace".to_string(),
        Namespaces::Only(names) => format!("namespaces {}", names.join(",")),
    };
    format!("{} on {on}", m.scope().as_str())
}

/// Answer a group-mapping or trust-policy route, as `by`.
pub(crate) async fn handle(
    registry: &Registry,
    by: &str,
    route: AdminRoute,
    headers: &HeaderMap,
    req_body: Body,
) -> Result<Response, Error> {
    let items = registry.items.as_ref();
    match route {
        AdminRoute::ListMappings => Ok(json(
            StatusCode::OK,
            &MappingList {
                mappings: sso::mappings(items).await?,
            },
        )),
        AdminRoute::MapGroup => {
            let mapping: GroupMapping = body(headers, req_body).await?;
            let replaced = sso::put_mapping(items, &mapping).await?;
            let mut note = format!("group {} gives {}", mapping.group(), grants(&mapping));
            if let Some(old) = &replaced {
                note.push_str(&format!(" (was {})", grants(old)));
            }
            Ok(noted(
                StatusCode::OK,
                &MappedGroup { mapping, replaced },
                note,
            ))
        }
        AdminRoute::UnmapGroup => {
            let Unmap { group } = body(headers, req_body).await?;
            let removed = sso::remove_mapping(items, &group)
                .await?
                .ok_or_else(|| Error::not_found(format!("group {group} has no mapping")))?;
            let note = format!("group {} no longer gives {}", group, grants(&removed));
            Ok(noted(StatusCode::OK, &UnmappedGroup { removed }, note))
        }
        AdminRoute::ListTrust { namespace } => Ok(json(
            StatusCode::OK,
            &TrustList {
                policies: sso::policies(items, namespace.as_deref()).await?,
            },
        )),
        AdminRoute::AddTrust { namespace } => {
            let policy: TrustPolicy = body(headers, req_body).await?;
            if let Some(allowed) = &registry.config.ci_issuers {
                check_allow_listed(policy.issuer(), allowed)
                    .map_err(|e| Error::bad(e.to_string()))?;
            }
            let record = TrustRecord {
                id: policy.id(),
                namespace,
                policy,
                added_at: registry.now(),
                added_by: by.to_string(),
            };
            let (policy, added) = sso::add_policy(items, &record).await?;
            let note = if added {
                format!("{} trusts {}", policy.namespace, describe(&policy))
            } else {
                format!("already trusted: {}: nothing changed", policy.id)
            };
            let status = if added {
                StatusCode::CREATED
            } else {
                StatusCode::OK
            };
            Ok(noted(status, &AddedTrust { policy, added }, note))
        }
        AdminRoute::RemoveTrust { namespace, id } => {
            let removed = sso::remove_policy(items, &namespace, &id)
                .await?
                .ok_or_else(|| {
                    Error::not_found(format!("namespace {namespace} has no trust policy {id}"))
                })?;
            let note = format!("{namespace} no longer trusts {}", describe(&removed));
            Ok(noted(StatusCode::OK, &RemovedTrust { removed }, note))
        }
        other => Err(Error::Internal(format!("not a sign-in route: {other:?}"))),
    }
}

/// A policy as a note names it: id, issuer and required claims (the
/// audit trail escapes notes itself).
fn describe(record: &TrustRecord) -> String {
    let p = &record.policy;
    let claims: Vec<String> = p
        .claims()
        .iter()
        .map(|(k, v)| format!("{k}={}", v.as_str()))
        .collect();
    format!(
        "policy {}: {} with {}",
        record.id,
        p.issuer(),
        claims.join(" ")
    )
}
