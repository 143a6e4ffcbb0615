//! The admin API (`/v1/admin/...`): tokens, namespace signing keys, release
//! lifecycle (deprecate, yank, delete), the audit trail, sign-in data
//! ([`sso`]: group mappings, CI trust policies) and the registries the
//! cache reads from ([`upstreams`]), who downloads what ([`usage`]). The pipeline
//! has already checked the caller holds an admin token covering the
//! route's realm (or is the operator, for the CLI on a local data dir);
//! every change is audited there too, with the [`Note`] left here.

use async_trait::async_trait;
use http::{HeaderMap, StatusCode};
use serde::de::DeserializeOwned;
use tfreg_http::body::{Body, Response, json, read_body};
use tfreg_http::{Call, Error, Handler, Note, Registry};
use tfreg_model::keys::RegisteredKey;
use tfreg_model::protocol::{
    AddKeys, AuditList, CreatedToken, DeleteResult, KeyList, LifecycleRequest, LifecycleResult,
    RemovedKey, RevokedToken, TokenList,
};
use tfreg_model::release::Mark;
use tfreg_model::router::{AdminRoute, LifecycleAction};
use tfreg_model::text::{MAX_MESSAGE_CHARS, readable};
use tfreg_model::token::{NewToken, Principal};
use tfreg_store::catalog::{self, audit, keys, tokens};
use tfreg_verify::signing::PublicKey;

mod sso;
mod upstreams;
pub mod usage;

/// The admin API.
pub struct Admin;

#[async_trait]
impl Handler<AdminRoute> for Admin {
    async fn handle(
        &self,
        registry: &Registry,
        route: AdminRoute,
        call: Call<'_>,
        body: Body,
    ) -> Result<Response, Error> {
        handle(
            registry,
            call.principal,
            route,
            call.query,
            call.headers,
            body,
        )
        .await
    }
}

/// Largest admin request body (a few armored keys).
pub const MAX_BODY: usize = 256 * 1024;
/// Events `GET /v1/admin/audit` returns without `?limit=`.
pub const DEFAULT_AUDIT_LIMIT: usize = 100;

pub(crate) async fn body<T: DeserializeOwned>(headers: &HeaderMap, body: Body) -> Result<T, Error> {
    let bytes = read_body(headers, body, MAX_BODY).await?;
    serde_json::from_slice(&bytes).map_err(|e| Error::bad(format!("invalid request body: {e}")))
}

/// A response that leaves `note` for the audit trail.
pub(crate) fn noted<T: serde::Serialize>(status: StatusCode, value: &T, note: String) -> Response {
    let mut resp = json(status, value);
    resp.extensions_mut().insert(Note(note));
    resp
}

/// Answer an admin route for `principal`.
async fn handle(
    registry: &Registry,
    principal: &Principal,
    route: AdminRoute,
    query: Option<&str>,
    headers: &HeaderMap,
    req_body: Body,
) -> Result<Response, Error> {
    let items = registry.items.as_ref();
    let by = principal.actor().describe();
    match route {
        AdminRoute::ListTokens => {
            let all = all_of(query)?;
            let (tokens, expired_hidden) =
                tokens::live(tokens::list(items).await?, registry.now(), all);
            Ok(json(
                StatusCode::OK,
                &TokenList {
                    tokens,
                    expired_hidden,
                },
            ))
        }
        AdminRoute::CreateToken => {
            let new: NewToken = body(headers, req_body).await?;
            let (token, record) =
                tokens::create(items, new, registry.now(), &principal.actor()).await?;
            let note = format!(
                "token {} ({}) with grants {}{}",
                record.name,
                record.id,
                record.describe_grants(),
                if record.fill {
                    ", and may fill the cache"
                } else {
                    ""
                }
            );
            Ok(noted(
                StatusCode::CREATED,
                &CreatedToken { token, record },
                note,
            ))
        }
        AdminRoute::RevokeToken { id } => {
            let (hash, revoked) = tokens::revoke(items, &id)
                .await?
                .ok_or_else(|| Error::not_found(format!("no token has id {id}")))?;
            // Refused at once by this process; by others within their token cache.
            registry.tokens.forget(&hash);
            let note = format!("revoked token {} ({})", revoked.name, revoked.id);
            Ok(noted(StatusCode::OK, &RevokedToken { revoked }, note))
        }
        AdminRoute::ListKeys { namespace } => Ok(json(
            StatusCode::OK,
            &KeyList {
                keys: keys::list(items, &namespace).await?,
                namespace,
                warnings: vec![],
            },
        )),
        AdminRoute::AddKeys { namespace } => {
            let req: AddKeys = body(headers, req_body).await?;
            let (parsed, warnings) = registrable(&req.keys, registry.now(), &by)?;
            let keys = keys::add(items, &namespace, parsed).await?;
            let note = format!(
                "namespace {namespace} now has keys {}",
                keys.iter()
                    .map(|k| k.key_id.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            Ok(noted(
                StatusCode::CREATED,
                &KeyList {
                    namespace,
                    keys,
                    warnings,
                },
                note,
            ))
        }
        AdminRoute::RemoveKey { namespace, key_id } => {
            let removed = keys::remove(items, &namespace, &key_id)
                .await?
                .ok_or_else(|| {
                    Error::not_found(format!("namespace {namespace} has no key {key_id}"))
                })?;
            let note = format!("removed key {key_id} from namespace {namespace}");
            Ok(noted(
                StatusCode::OK,
                &RemovedKey { namespace, removed },
                note,
            ))
        }
        AdminRoute::Lifecycle { release, action } => {
            let req: LifecycleRequest = body(headers, req_body).await?;
            // Terraform prints a deprecation message on every `init`: plain
            // text only, no terminal escapes, no invisible characters.
            let message = req
                .message
                .filter(|m| !m.trim().is_empty())
                .map(|m| readable("the message", &m, MAX_MESSAGE_CHARS))
                .transpose()?;
            let message = match (action, message) {
                (LifecycleAction::Deprecate, None) => {
                    return Err(Error::bad(
                        "deprecating needs a message telling users what to do instead",
                    ));
                }
                (_, Some(m)) => m,
                (_, None) => String::new(),
            };
            let mark = Mark {
                message: message.clone(),
                at: registry.now(),
                by,
            };
            let (lifecycle, changed) =
                catalog::change_lifecycle(items, &release, action, mark).await?;
            let note = match (changed, message.is_empty()) {
                (false, _) => format!("already {}: nothing changed", action.done()),
                (true, true) => action.done().to_string(),
                (true, false) => format!("{}: {message}", action.done()),
            };
            Ok(noted(
                StatusCode::OK,
                &LifecycleResult {
                    release: release.to_string(),
                    lifecycle,
                    changed,
                },
                note,
            ))
        }
        AdminRoute::Delete { release } => {
            // A version in use is deleted only when asked to be anyway.
            usage::guard_delete(registry, &release, usage::force_of(query)?).await?;
            let keys = catalog::delete_release(items, &release).await?;
            let mut left = Vec::new();
            for key in &keys {
                if let Err(e) = registry.blobs.delete(key).await {
                    tracing::warn!(%key, error = %e, "cannot remove a deleted release's archive");
                    left.push(key.to_string());
                }
            }
            let removed = keys.len() - left.len();
            let note = if left.is_empty() {
                format!("deleted with its {removed} archive files")
            } else {
                format!(
                    "deleted; {removed} archive files removed, {} left: {}",
                    left.len(),
                    left.join(", ")
                )
            };
            Ok(noted(
                StatusCode::OK,
                &DeleteResult {
                    deleted: release.to_string(),
                    archives_removed: removed,
                    archives_left: left,
                },
                note,
            ))
        }
        AdminRoute::ListMappings
        | AdminRoute::MapGroup
        | AdminRoute::UnmapGroup
        | AdminRoute::ListTrust { .. }
        | AdminRoute::AddTrust { .. }
        | AdminRoute::RemoveTrust { .. } => {
            sso::handle(registry, &by, route, headers, req_body).await
        }
        AdminRoute::ListUpstreams
        | AdminRoute::ShowUpstream { .. }
        | AdminRoute::SetUpstream { .. }
        | AdminRoute::RemoveUpstream { .. }
        | AdminRoute::ListCached { .. } => {
            upstreams::handle(registry, &by, route, headers, req_body).await
        }
        AdminRoute::ProviderUsage { .. } | AdminRoute::ModuleUsage { .. } => {
            usage::handle(registry, principal, route, query).await
        }
        AdminRoute::Audit => {
            let limit = audit_limit(query)?;
            Ok(json(
                StatusCode::OK,
                &AuditList {
                    events: audit::recent(items, limit).await?,
                },
            ))
        }
    }
}

/// Every armored key parsed and checked (one bad key adds none), as the
/// records to register, and what the admin should know about them. A key
/// that cannot sign any more (revoked, expired, no signing (sub)key) is
/// refused: every publish it signs would be. One Terraform 1.5 and older
/// cannot read is registered, with a warning.
fn registrable(
    armors: &[String],
    now: u64,
    by: &str,
) -> Result<(Vec<RegisteredKey>, Vec<String>), Error> {
    let mut keys = Vec::with_capacity(armors.len());
    let mut warnings = Vec::new();
    for (i, armor) in armors.iter().enumerate() {
        let refused = |e: tfreg_verify::signing::SignatureError| Error::Refused {
            too_large: false,
            message: format!("key {} of {}: {e}", i + 1, armors.len()),
        };
        let key = PublicKey::parse(armor).map_err(refused)?;
        key.check_usable(now).map_err(refused)?;
        let info = key.info();
        if let Some(problem) = key.legacy_problem() {
            warnings.push(format!(
                "key {} uses {problem}, which Terraform 1.5 and older cannot read: releases it signs install only with Terraform 1.6 or later, and publish only with --allow-modern-keys",
                info.key_id
            ));
        }
        keys.push(RegisteredKey {
            key_id: info.key_id.clone(),
            ascii_armor: info.ascii_armor.clone(),
            algorithms: info.algorithms.clone(),
            added_at: now,
            added_by: by.to_string(),
        });
    }
    Ok((keys, warnings))
}

/// `?all=true` (expired tokens too) or `?all=false` (the default).
fn all_of(query: Option<&str>) -> Result<bool, Error> {
    let query = query.unwrap_or("");
    for (key, value) in url::form_urlencoded::parse(query.as_bytes()) {
        if key == "all" {
            return match &*value {
                "true" => Ok(true),
                "false" => Ok(false),
                _ => Err(Error::bad("all must be true or false")),
            };
        }
    }
    Ok(false)
}

/// `?limit=N` (1 to [`audit::MAX_LIST`]).
fn audit_limit(query: Option<&str>) -> Result<usize, Error> {
    let Some(query) = query else {
        return Ok(DEFAULT_AUDIT_LIMIT);
    };
    for (key, value) in url::form_urlencoded::parse(query.as_bytes()) {
        if key == "limit" {
            return value
                .parse::<usize>()
                .ok()
                .filter(|n| (1..=audit::MAX_LIST).contains(n))
                .ok_or_else(|| {
                    Error::bad(format!(
                        "limit must be a number from 1 to {}",
                        audit::MAX_LIST
                    ))
                });
        }
    }
    Ok(DEFAULT_AUDIT_LIMIT)
}
