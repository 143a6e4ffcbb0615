//! Archives behind the registry's signed URLs: GET/HEAD download, PUT upload.

use http::{HeaderMap, HeaderValue, Method, StatusCode, header};

use tfreg_http::answer_cache::Answer;
use tfreg_http::body::{self, Body, Response, empty, header_value, json};
use tfreg_http::error::Error;
use tfreg_http::registry::Registry;
use tfreg_http::signed_url::UrlSigner;
use tfreg_model::blob_key::BlobKey;
use tfreg_model::upstream::UpstreamHost;
use tfreg_store::catalog::upstreams;
use tfreg_store::{Download, StoreError};

/// The headers of every answer to an archive URL: a download, never a page
/// or a script. A publisher's zip may also be valid JavaScript or HTML;
/// served as an attachment that no browser sniffs, it cannot run under the
/// UI's `script-src 'self'`.
fn as_download(key: &BlobKey, headers: &mut HeaderMap) -> Result<(), Error> {
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::CONTENT_DISPOSITION,
        header_value(&key.content_disposition())?,
    );
    Ok(())
}

/// Serve or receive an archive after checking its URL's signature.
pub async fn handle(
    registry: &Registry,
    method: &Method,
    key: &BlobKey,
    query: Option<&str>,
    headers: &HeaderMap,
    body: Body,
) -> Result<Response, Error> {
    // No secret yet means no URL was ever issued: nothing can verify.
    let signer = registry.signer_if_ready().await?.ok_or_else(|| {
        Error::Forbidden("archive URL refused: this registry has issued no archive URLs yet".into())
    })?;
    if method == Method::PUT {
        return upload(registry, signer, key, query, headers, body).await;
    }
    signer.verify_read(key, query, registry.now())?;
    // A small archive's answer is kept as a route's is (crate::read): while
    // the store's change counter and the second are those it was read under.
    // So a deleted version's archive is answered at most until the second
    // ends; its URL was good for longer.
    let keeping = registry.keeping(|| format!("blob {key}"));
    if let Some(kept) = registry.kept_answer(keeping.as_ref()) {
        return Ok(kept.response());
    }
    let download = match registry.blobs.download(key, method == Method::HEAD).await {
        Err(StoreError::NotFound(_)) if key.is_cached() => {
            return fill_then_again(registry, key).await;
        }
        other => other?,
    };
    match download {
        Download::Whole(bytes) => {
            let answer = Answer {
                status: StatusCode::OK,
                headers: archive_headers(registry, key, bytes.len() as u64)?,
                body: bytes,
            };
            registry.keep_answer(keeping.as_ref(), &answer);
            Ok(answer.response())
        }
        Download::Stream { len, body } => {
            let mut resp = http::Response::new(Body::from_stream(body));
            *resp.headers_mut() = archive_headers(registry, key, len)?;
            Ok(resp)
        }
        Download::Redirect(url) => {
            let mut resp = empty(StatusCode::TEMPORARY_REDIRECT);
            resp.headers_mut()
                .insert(header::LOCATION, header_value(&url)?);
            as_download(key, resp.headers_mut())?;
            Ok(resp)
        }
    }
}

/// A cached archive whose URL was handed out before it was fetched: fetch
/// it now (within [`crate::wait::ARCHIVE_WAIT`]), then send the client to a
/// freshly signed URL of itself, which finds it stored (Terraform follows
/// up to 10 redirects; a slow fetch gets another wait per redirect). A
/// HEAD (Terraform 1.11.0-1.12.0 sends one first) starts the fetch too.
async fn fill_then_again(registry: &Registry, key: &BlobKey) -> Result<Response, Error> {
    let not_cached = || Error::not_found(format!("{} is not cached here", key.file_name()));
    let parts = key.cached_parts().ok_or_else(not_cached)?;
    let host = UpstreamHost::parse(&parts.host).map_err(|_| not_cached())?;
    let upstream = upstreams::upstream(registry.items.as_ref(), &host)
        .await?
        .ok_or_else(not_cached)?;
    let stored = crate::source::cached::fill_archive(registry, &upstream, key).await?;
    if !stored {
        tracing::info!(%key, "archive still being fetched: redirecting the client to wait again");
    }
    let mut resp = empty(StatusCode::TEMPORARY_REDIRECT);
    resp.headers_mut().insert(
        header::LOCATION,
        header_value(&registry.read_url(key).await?)?,
    );
    as_download(key, resp.headers_mut())?;
    Ok(resp)
}

/// The headers of an archive's bytes (or a HEAD's length) answered by the
/// registry itself.
fn archive_headers(registry: &Registry, key: &BlobKey, len: u64) -> Result<HeaderMap, Error> {
    let mut headers = HeaderMap::with_capacity(6);
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(key.content_type()),
    );
    as_download(key, &mut headers)?;
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
    // Cached no longer than the URL lives.
    headers.insert(
        header::CACHE_CONTROL,
        header_value(&format!(
            "private, max-age={}, immutable",
            registry.config.url_ttl_secs
        ))?,
    );
    Ok(headers)
}

/// One PUT into an upload slot: exactly the bytes the URL was signed for, once.
async fn upload(
    registry: &Registry,
    signer: &UrlSigner,
    key: &BlobKey,
    query: Option<&str>,
    headers: &HeaderMap,
    body: Body,
) -> Result<Response, Error> {
    let expected = signer.verify_write(key, query, registry.now())?;
    if !key.is_upload() {
        return Err(Error::Forbidden(
            "uploads may only write upload slots".into(),
        ));
    }
    let name = key.file_name();
    if body::content_length(headers).is_some_and(|n| n > expected.size) {
        return Err(too_large(name, expected.size));
    }
    registry
        .blobs
        .receive(key, body::into_stream(body), &expected)
        .await
        .map_err(|e| match e {
            StoreError::AlreadyExists(_) => Error::Conflict(format!(
                "{name} was already uploaded or its publish has ended: upload URLs are single-use; call begin again"
            )),
            StoreError::TooLarge { .. } => too_large(name, expected.size),
            StoreError::Mismatch { reason, .. } => Error::bad(format!("{name}: {reason}")),
            other => other.into(),
        })?;
    Ok(json(
        StatusCode::OK,
        &serde_json::json!({ "size": expected.size }),
    ))
}

fn too_large(name: &str, declared: u64) -> Error {
    Error::PayloadTooLarge(format!(
        "{name}: more than the {declared} bytes declared at begin"
    ))
}
