//! Archives behind the registry's signed URLs: GET/HEAD download, PUT upload.

use http::{HeaderValue, Method, StatusCode, header};

use crate::error::Error;
use crate::registry::Registry;
use crate::service::{Body, Response, json};
use crate::signed_url::Access;
use crate::storage::Download;

/// Prefix of staging keys, the only keys a PUT may write.
pub const UPLOADS_PREFIX: &str = "uploads/";

fn content_type(key: &str) -> &'static str {
    if key.ends_with(".zip") {
        "application/zip"
    } else if key.ends_with(".tar.gz") || key.ends_with(".tgz") {
        "application/gzip"
    } else if key.ends_with("_SHA256SUMS") || key.ends_with(".json") {
        "text/plain; charset=utf-8"
    } else {
        "application/octet-stream"
    }
}

/// Serve or receive an archive after checking its URL's signature.
pub async fn handle(
    registry: &Registry,
    method: &Method,
    key: &str,
    query: Option<&str>,
    body: Body,
) -> Result<Response, Error> {
    let now = registry.now();
    // No secret yet means no URL was ever issued: nothing can verify.
    let signer = registry.signer_if_ready().await?.ok_or_else(|| {
        Error::Forbidden("archive URL refused: this registry has issued no archive URLs yet".into())
    })?;
    if method == Method::PUT {
        signer.verify(Access::Write, key, query, now)?;
        if !key.starts_with(UPLOADS_PREFIX) {
            return Err(Error::Forbidden(
                "uploads may only write staging keys".into(),
            ));
        }
        let size = registry
            .blobs
            .write(key, body.into_stream(), registry.config.max_archive_bytes)
            .await
            .map_err(|e| match e {
                crate::storage::StoreError::TooLarge { max, .. } => {
                    Error::PayloadTooLarge(format!("archive larger than {max} bytes"))
                }
                other => other.into(),
            })?;
        return Ok(json(StatusCode::OK, &serde_json::json!({ "size": size })));
    }
    signer.verify(Access::Read, key, query, now)?;
    match registry.blobs.download(key, method == Method::HEAD).await? {
        Download::Stream { len, body } => {
            let mut resp = http::Response::new(Body::Stream(body));
            let headers = resp.headers_mut();
            headers.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static(content_type(key)),
            );
            headers.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
            headers.insert(
                header::CACHE_CONTROL,
                HeaderValue::from_static("private, max-age=300, immutable"),
            );
            Ok(resp)
        }
        Download::Redirect(url) => {
            let mut resp = http::Response::new(Body::Empty);
            *resp.status_mut() = StatusCode::TEMPORARY_REDIRECT;
            let location =
                HeaderValue::from_str(&url).map_err(|e| Error::Storage(e.to_string()))?;
            resp.headers_mut().insert(header::LOCATION, location);
            Ok(resp)
        }
    }
}
