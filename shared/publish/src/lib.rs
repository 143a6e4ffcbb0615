//! Publishing: `begin` announces the files and hands out one write-once upload
//! slot per file; the client uploads each; `complete` takes the uploads out of
//! the client's reach, verifies exactly those bytes, keeps exactly those bytes
//! under keys of their own, and only then makes the version visible with one
//! conditional write. Nothing is visible before that write, and a refused or
//! losing publish removes what it kept, so it leaves no trace.

mod mirror;
mod module;
mod provider;
mod staging;

use async_trait::async_trait;
use http::{HeaderMap, StatusCode};
use tfreg_http::Call;
use tfreg_verify::release_files::ReleaseError;

use tfreg_http::body::{Body, Response, json, read_body};
use tfreg_http::error::Error;
use tfreg_http::registry::Registry;
use tfreg_model::blob_key::{BlobKey, FileName, UploadId};
use tfreg_model::protocol::{
    BeginStatus, FileDecl, PublishBegin, PublishRequest, PublishResult, PublishStatus, UploadTarget,
};
use tfreg_model::router::{PublishRoute, PublishStep, PublishTarget};
use tfreg_model::token::Principal;
use tfreg_store::catalog::PutOutcome;
use tfreg_store::catalog::uploads::{self, UploadSession};
use tfreg_store::{Digest, UploadVia};

use staging::Staging;

/// Largest publish request body (file list and signing key).
pub const MAX_BODY: usize = 1024 * 1024;
/// Largest SHA256SUMS, signature or manifest file.
const MAX_SMALL_FILE: u64 = 1024 * 1024;

/// The publish API.
pub struct Publish;

#[async_trait]
impl tfreg_http::Handler<PublishRoute> for Publish {
    async fn handle(
        &self,
        registry: &Registry,
        route: PublishRoute,
        call: Call<'_>,
        body: Body,
    ) -> Result<Response, Error> {
        handle(registry, route, call.principal, call.headers, body).await
    }
}

/// A publish's files refused: 400 with what is wrong, or 413 when it is
/// about size.
pub(crate) fn refused(e: ReleaseError) -> Error {
    Error::Refused {
        too_large: e.is_too_large(),
        message: e.to_string(),
    }
}

/// `POST /v1/publish/{providers,modules,mirror}/.../{begin,complete}`, for a
/// caller the pipeline already authorised: nothing of the body is read for
/// a client that may not publish.
async fn handle(
    registry: &Registry,
    route: PublishRoute,
    principal: &Principal,
    headers: &HeaderMap,
    body: Body,
) -> Result<Response, Error> {
    let body = read_body(headers, body, MAX_BODY).await?;
    let req: PublishRequest = serde_json::from_slice(&body)
        .map_err(|e| Error::bad(format!("invalid publish request: {e}")))?;
    match route.step {
        PublishStep::Begin => {
            // Publishes in progress count against the token that began them.
            let token = match principal {
                Principal::Token(record) => Some(record.id.as_str()),
                _ => None,
            };
            begin_step(registry, &route.target, &req, token).await
        }
        PublishStep::Complete => {
            // Run to the end even if the client goes away: what complete keeps
            // is either recorded or deleted, never abandoned half-way.
            let (registry, target) = (registry.clone(), route.target);
            tokio::spawn(async move {
                let done = complete_step(&registry, &target, &req).await;
                record_publish(&registry, &target, &done);
                done
            })
            .await?
        }
    }
}

/// A `complete`'s outcome as a metric (issue 38): published (or
/// unchanged), refused (the client's mistake, 4xx) or failed (5xx).
fn record_publish(registry: &Registry, target: &PublishTarget, done: &Result<Response, Error>) {
    use tfreg_http::metrics::{PackageKind, PublishOutcome, PublishRecord};
    let kind = match target {
        PublishTarget::Module { .. } => PackageKind::Module,
        PublishTarget::Provider { .. } | PublishTarget::Mirror { .. } => PackageKind::Provider,
    };
    let outcome = match done {
        Ok(_) => PublishOutcome::Published,
        Err(e) if e.status().is_client_error() => PublishOutcome::Refused,
        Err(_) => PublishOutcome::Failed,
    };
    registry.metrics.publish(&PublishRecord { kind, outcome });
}

async fn begin_step(
    registry: &Registry,
    target: &PublishTarget,
    req: &PublishRequest,
    token: Option<&str>,
) -> Result<Response, Error> {
    let max = registry.config.max_archive_bytes;
    let same = match target {
        PublishTarget::Provider { provider, version } => {
            provider::declared(provider, version, &req.files, max)?;
            // Refused before any upload when the namespace cannot take it.
            provider::signing_keys(registry, provider, req).await?;
            provider::same_as_published(registry, provider, version, &req.files).await?
        }
        PublishTarget::Module { module, version } => {
            let archive = module::declared(&req.files, max)?;
            module::same_as_published(registry, module, version, archive).await?
        }
        PublishTarget::Mirror {
            hostname,
            provider,
            version,
        } => {
            mirror::declared(registry, hostname, provider, version, &req.files, max)?;
            mirror::not_an_upstream(registry, hostname).await?;
            mirror::same_as_published(registry, hostname, provider, version, &req.files).await?
        }
    };
    begin(registry, target, &req.files, same, token).await
}

async fn complete_step(
    registry: &Registry,
    target: &PublishTarget,
    req: &PublishRequest,
) -> Result<Response, Error> {
    let max = registry.config.max_archive_bytes;
    match target {
        PublishTarget::Provider { provider, version } => {
            let files = provider::declared(provider, version, &req.files, max)?;
            complete(registry, target, req, async |staging| {
                provider::complete(registry, staging, provider, version, &files, req).await
            })
            .await
        }
        PublishTarget::Module { module, version } => {
            let archive = module::declared(&req.files, max)?;
            complete(registry, target, req, async |staging| {
                module::complete(registry, staging, module, version, archive).await
            })
            .await
        }
        PublishTarget::Mirror {
            hostname,
            provider,
            version,
        } => {
            let files = mirror::declared(registry, hostname, provider, version, &req.files, max)?;
            complete(registry, target, req, async |staging| {
                mirror::complete(registry, staging, hostname, provider, version, &files).await
            })
            .await
        }
    }
}

/// Answer `begin`: "unchanged", 409, 429 when the token or the namespace
/// has as many publishes in progress as it may, or a write-once upload slot
/// per file.
async fn begin(
    registry: &Registry,
    target: &PublishTarget,
    files: &[FileDecl],
    same_as_published: Option<bool>,
    token: Option<&str>,
) -> Result<Response, Error> {
    match same_as_published {
        Some(true) => {
            // Perhaps the retry of a publish that stopped between writing the
            // release and its index: the index is brought up to date.
            tfreg_store::catalog::sync_index(registry.items.as_ref(), target).await?;
            return Ok(json(
                StatusCode::OK,
                &PublishBegin {
                    status: BeginStatus::Unchanged,
                    upload_id: None,
                    uploads: vec![],
                },
            ));
        }
        Some(false) => {
            return Err(Error::Conflict(
                "this version is already published with different content; versions are immutable, publish a new version".into(),
            ));
        }
        None => {}
    }
    let id = UploadId::random();
    let now = registry.now();
    let session = UploadSession {
        target: target.clone(),
        files: files.to_vec(),
        created_at: now,
        expires_at: now + registry.config.url_ttl_secs + uploads::GRACE_SECS,
        places: vec![],
    };
    uploads::begin(registry.items.as_ref(), &id, session, token, now).await?;
    let mut uploads = Vec::with_capacity(files.len());
    for f in files {
        let name = FileName::parse(&f.name).map_err(|e| Error::bad(e.to_string()))?;
        let key = BlobKey::upload(&id, &name);
        let expected = Digest {
            size: f.size,
            sha256: f.sha256.clone(),
        };
        let (url, headers) = match registry.blobs.upload_via(&key, &expected).await? {
            UploadVia::Registry => (registry.upload_url(&key, &expected).await?, vec![]),
            UploadVia::Presigned { url, headers } => (url, headers),
        };
        uploads.push(UploadTarget {
            name: f.name.clone(),
            url,
            headers,
        });
    }
    Ok(json(
        StatusCode::OK,
        &PublishBegin {
            status: BeginStatus::Upload,
            upload_id: Some(id),
            uploads,
        },
    ))
}

/// What a kind's completion recorded.
struct Recorded {
    outcome: PutOutcome,
    /// The address users write (`host/ns/type`, `host/ns/name/system`).
    address: String,
    warnings: Vec<String>,
    /// The key id that verified a provider release.
    signed_by: Option<String>,
}

/// Run `f` on the publish `req.upload_id` names, after checking it is this
/// target's with these files, and taking it. Afterwards the files `f` kept are
/// deleted unless a stored release refers to them, and the upload slots are
/// closed, except after a store failure (503): then the publish is restored,
/// so that the retry the client is asked for can complete it.
async fn complete<F>(
    registry: &Registry,
    target: &PublishTarget,
    req: &PublishRequest,
    f: F,
) -> Result<Response, Error>
where
    F: AsyncFnOnce(&mut Staging<'_>) -> Result<Recorded, Error>,
{
    let items = registry.items.as_ref();
    let id = req
        .upload_id
        .clone()
        .ok_or_else(|| Error::bad("upload_id is missing: call begin first"))?;
    let unknown = || {
        Error::bad(format!(
            "upload {id} is unknown or already completed: call begin again"
        ))
    };
    // Checked before it is taken: a complete for another target spoils nothing.
    let session = uploads::get(items, &id).await?.ok_or_else(unknown)?;
    session.check(target, &req.files, registry.now())?;
    uploads::take(items, &id).await?.ok_or_else(unknown)?;
    let mut staging = Staging::new(registry, id.clone(), &session.files);
    let result = f(&mut staging).await;
    let unused = match &result {
        Ok(Recorded {
            outcome: PutOutcome::Created,
            ..
        }) => vec![],
        // Refused, lost, or an error after a write that may have landed: delete
        // only what no stored release refers to.
        _ => match tfreg_store::catalog::release_keys(items, target).await {
            Ok(referenced) => staging
                .kept()
                .iter()
                .filter(|k| !referenced.contains(k))
                .cloned()
                .collect(),
            Err(e) => {
                tracing::warn!(upload = %id, error = %e, "cannot tell which kept files a release refers to: keeping them");
                vec![]
            }
        },
    };
    if matches!(result, Err(Error::Unavailable(_))) {
        // A store failed half-way: the client is told to retry (503), so the
        // publish must stay completable. Its uploads stay where they are
        // (write-once: nobody can change them) and its record comes back.
        staging.delete(&unused).await;
        if let Err(e) = uploads::open(items, &id, &session).await {
            tracing::warn!(upload = %id, error = %e, "cannot restore the publish after a store failure: it must begin again");
        }
    } else {
        staging.finish(&unused).await;
        // Done: its places among the publishes in progress are free.
        if let Err(e) = uploads::release(items, &id, &session, registry.now()).await {
            tracing::warn!(upload = %id, error = %e, "cannot free the places of a finished publish: they free up when it expires");
        }
    }
    let recorded = result?;
    let (code, status) = match recorded.outcome {
        PutOutcome::Created => (StatusCode::CREATED, PublishStatus::Published),
        PutOutcome::Unchanged => (StatusCode::OK, PublishStatus::Unchanged),
    };
    let mut note = match (&recorded.outcome, &recorded.signed_by) {
        (PutOutcome::Created, Some(key)) => format!("published, signed by key {key}"),
        (PutOutcome::Created, None) => "published".to_string(),
        (PutOutcome::Unchanged, _) => "unchanged: the same content was already published".into(),
    };
    for warning in &recorded.warnings {
        note += &format!("; warning: {warning}");
    }
    let mut resp = json(
        code,
        &PublishResult {
            status,
            address: recorded.address,
            version: target.version().to_string(),
            warnings: recorded.warnings,
        },
    );
    resp.extensions_mut().insert(tfreg_http::Note(note));
    Ok(resp)
}
