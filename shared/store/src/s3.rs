//! [`BlobStore`] on an S3 bucket. Clients never see the bucket directly: they
//! download through the registry's own signed `/v1/blobs/...` URLs (HEAD is
//! answered from `HeadObject`, GET redirected to a fresh presigned GET), and
//! upload with presigned PUT URLs, so large archives never pass through Lambda.

use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_s3::Client;
use aws_sdk_s3::presigning::PresigningConfig;
use aws_sdk_s3::primitives::ByteStream as S3Body;

use crate::aws::{HttpResponse, sdk_error as backend};
use crate::{
    BlobKey, BlobStore, ByteStream, ClaimSource, Claimed, Digest, Download, StoreError, StreamFrom,
    UploadVia,
};

/// The small S3 calls (HEAD, DELETE, the empty PUT that closes a slot) answer
/// in milliseconds; one that hangs is given up on well within a read
/// function's time, so the client gets a 503 with `Retry-After`, not a
/// gateway error. (GETs and copies of large archives are bounded by the
/// client's read timeout instead: silence, not length.)
const QUICK_ATTEMPT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);
const QUICK_OPERATION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(7);

fn quick() -> aws_sdk_s3::config::Builder {
    aws_sdk_s3::config::Builder::default().timeout_config(
        aws_config::timeout::TimeoutConfig::builder()
            .operation_attempt_timeout(QUICK_ATTEMPT_TIMEOUT)
            .operation_timeout(QUICK_OPERATION_TIMEOUT)
            .build(),
    )
}

/// The S3 blob store.
#[derive(Clone, Debug)]
pub struct S3BlobStore {
    client: Client,
    bucket: String,
    presign_ttl: Duration,
}

fn has_status<E>(e: &aws_sdk_s3::error::SdkError<E, HttpResponse>, status: u16) -> bool {
    e.raw_response()
        .is_some_and(|r| r.status().as_u16() == status)
}

fn is_not_found<E>(e: &aws_sdk_s3::error::SdkError<E, HttpResponse>) -> bool {
    has_status(e, 404)
}

/// 412: an `If-None-Match: *` found the object, or an `x-amz-copy-source-if-match` did not.
fn is_precondition_failed<E>(e: &aws_sdk_s3::error::SdkError<E, HttpResponse>) -> bool {
    has_status(e, 412)
}

/// The `x-amz-checksum-sha256` value of a hex sha256.
fn checksum_sha256(sha256_hex: &str) -> Result<String, StoreError> {
    use base64::Engine as _;
    let bytes = hex::decode(sha256_hex).map_err(StoreError::internal)?;
    Ok(base64::engine::general_purpose::STANDARD.encode(bytes))
}

impl S3BlobStore {
    /// `presign_ttl`: lifetime of the presigned URLs handed out (a few minutes).
    pub fn new(client: Client, bucket: impl Into<String>, presign_ttl: Duration) -> Self {
        Self {
            client,
            bucket: bucket.into(),
            presign_ttl,
        }
    }

    fn presigning(&self) -> Result<PresigningConfig, StoreError> {
        PresigningConfig::expires_in(self.presign_ttl).map_err(StoreError::internal)
    }

    /// Create the bucket; used by tests. The deployed stack creates it from `template.yaml`.
    pub async fn create_bucket(&self) -> Result<(), StoreError> {
        self.client
            .create_bucket()
            .bucket(&self.bucket)
            .send()
            .await
            .map_err(backend)?;
        Ok(())
    }

    async fn head(&self, key: &BlobKey) -> Result<Option<u64>, StoreError> {
        match self
            .client
            .head_object()
            .bucket(&self.bucket)
            .key(key.as_str())
            .customize()
            .config_override(quick())
            .send()
            .await
        {
            Ok(out) => Ok(Some(out.content_length.unwrap_or(0).max(0) as u64)),
            Err(e) if is_not_found(&e) => Ok(None),
            Err(e) => Err(backend(e)),
        }
    }
}

#[async_trait]
impl BlobStore for S3BlobStore {
    async fn receive(
        &self,
        key: &BlobKey,
        body: ByteStream,
        expected: &Digest,
    ) -> Result<(), StoreError> {
        // Buffer to a temporary file: the bytes are checked before S3 sees them.
        let tmp = tempfile::NamedTempFile::new().map_err(StoreError::unavailable)?;
        let mut writer = tokio::fs::File::from_std(tmp.reopen().map_err(StoreError::unavailable)?);
        let got = crate::write_hashed(
            body,
            StreamFrom::Client,
            &mut writer,
            key.as_str(),
            expected.size,
        )
        .await?;
        crate::check_digest(key, &got, expected)?;
        let body = S3Body::from_path(tmp.path())
            .await
            .map_err(StoreError::unavailable)?;
        match self
            .client
            .put_object()
            .bucket(&self.bucket)
            .key(key.as_str())
            .if_none_match("*")
            .checksum_sha256(checksum_sha256(&expected.sha256)?)
            .body(body)
            .send()
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if is_precondition_failed(&e) => Err(StoreError::AlreadyExists(key.to_string())),
            Err(e) => Err(backend(e)),
        }
    }

    async fn claim(&self, key: &BlobKey, max: u64) -> Result<Claimed, StoreError> {
        let out = match self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(key.as_str())
            .send()
            .await
        {
            Ok(out) => out,
            Err(e) if is_not_found(&e) => {
                return Err(StoreError::NotFound(format!("{key} not found")));
            }
            Err(e) => return Err(backend(e)),
        };
        if out.content_length.unwrap_or(0).max(0) as u64 > max {
            return Err(StoreError::TooLarge {
                key: key.to_string(),
                max,
            });
        }
        let etag = out
            .e_tag
            .clone()
            .ok_or_else(|| StoreError::internal(format!("S3 sent no ETag for {key}")))?;
        let file = tempfile::tempfile().map_err(StoreError::unavailable)?;
        let mut writer =
            tokio::fs::File::from_std(file.try_clone().map_err(StoreError::unavailable)?);
        let body = tokio_util::io::ReaderStream::new(out.body.into_async_read());
        let digest =
            crate::write_hashed(body, StreamFrom::Backend, &mut writer, key.as_str(), max).await?;
        drop(writer);
        // The clone shares the file offset: rewind so the caller reads from the start.
        let mut file = file;
        std::io::Seek::rewind(&mut file).map_err(StoreError::unavailable)?;
        Ok(Claimed {
            file,
            digest,
            source: ClaimSource::Object {
                key: key.clone(),
                etag,
            },
        })
    }

    async fn keep(&self, claimed: &Claimed, dest: &BlobKey) -> Result<(), StoreError> {
        let ClaimSource::Object { key, etag } = &claimed.source else {
            return Err(StoreError::internal(
                "an upload claimed by another store cannot be kept in S3",
            ));
        };
        // Never over an existing object: If-None-Match on the copy (S3's
        // conditional write), and a HEAD first for stores that ignore it.
        if self.head(dest).await?.is_some() {
            return Err(StoreError::AlreadyExists(dest.to_string()));
        }
        // Copy only the version that was read and hashed (its ETag).
        match self
            .client
            .copy_object()
            .bucket(&self.bucket)
            .key(dest.as_str())
            .copy_source(format!("{}/{key}", self.bucket))
            .copy_source_if_match(etag)
            .if_none_match("*")
            .send()
            .await
        {
            Ok(_) => Ok(()),
            // The destination is this publish's own key and was absent above:
            // if it exists now, a retry of this very copy found it (the first
            // attempt landed, with the ETag checked). Else the source changed.
            Err(e) if is_precondition_failed(&e) => match self.head(dest).await? {
                Some(_) => Ok(()),
                None => Err(StoreError::Mismatch {
                    key: key.to_string(),
                    reason: "the upload changed after it was verified; publish again".into(),
                }),
            },
            Err(e) if is_not_found(&e) => Err(StoreError::NotFound(format!("{key} not found"))),
            Err(e) => Err(backend(e)),
        }
    }

    async fn close_upload(&self, key: &BlobKey) -> Result<(), StoreError> {
        // An empty object stays in the slot (the bucket's lifecycle rule expires
        // uploads/): a late PUT to the slot's presigned URL carries
        // If-None-Match: * and is refused.
        self.client
            .put_object()
            .bucket(&self.bucket)
            .key(key.as_str())
            .body(S3Body::from_static(b""))
            .customize()
            .config_override(quick())
            .send()
            .await
            .map_err(backend)?;
        Ok(())
    }

    async fn delete(&self, key: &BlobKey) -> Result<(), StoreError> {
        self.client
            .delete_object()
            .bucket(&self.bucket)
            .key(key.as_str())
            .customize()
            .config_override(quick())
            .send()
            .await
            .map_err(backend)?;
        Ok(())
    }

    async fn list_dated(&self, prefix: &str) -> Result<Vec<(BlobKey, u64)>, StoreError> {
        let mut keys = Vec::new();
        let mut pages = self
            .client
            .list_objects_v2()
            .bucket(&self.bucket)
            .prefix(prefix)
            .into_paginator()
            .send();
        while let Some(page) = pages.next().await {
            let page = page.map_err(backend)?;
            for object in page.contents.unwrap_or_default() {
                if let Some(key) = object.key.as_deref().and_then(|k| BlobKey::parse(k).ok()) {
                    let modified = object.last_modified.map_or(0, |t| t.secs().max(0) as u64);
                    keys.push((key, modified));
                }
            }
        }
        Ok(keys)
    }

    async fn download(&self, key: &BlobKey, head: bool) -> Result<Download, StoreError> {
        if head {
            // Answer HEAD here: a URL presigned for GET answers HEAD with 403 on S3.
            let len = self
                .head(key)
                .await?
                .ok_or_else(|| StoreError::NotFound(format!("{key} not found")))?;
            return Ok(Download::Stream {
                len,
                body: Box::pin(futures_util::stream::empty()),
            });
        }
        // A file the cache keeps may not be fetched yet: the registry
        // fetches it on this miss rather than send the client to S3's 404.
        if key.is_cached() && self.head(key).await?.is_none() {
            return Err(StoreError::NotFound(format!("{key} not found")));
        }
        // S3 answers the presigned GET as the registry would: an attachment
        // of the file's media type (it cannot add `nosniff`; the URL is S3's
        // origin, not the UI's, so the UI's CSP never admits it as a script).
        let presigned = self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(key.as_str())
            .response_content_disposition(key.content_disposition())
            .response_content_type(key.content_type())
            .presigned(self.presigning()?)
            .await
            .map_err(backend)?;
        Ok(Download::Redirect(presigned.uri().to_string()))
    }

    async fn upload_via(&self, key: &BlobKey, expected: &Digest) -> Result<UploadVia, StoreError> {
        // Signed into the URL: the declared length and sha256 (S3 refuses other
        // bytes) and "create only" (a second PUT to the slot is refused).
        let size = i64::try_from(expected.size).map_err(StoreError::internal)?;
        let presigned = self
            .client
            .put_object()
            .bucket(&self.bucket)
            .key(key.as_str())
            .content_length(size)
            .checksum_sha256(checksum_sha256(&expected.sha256)?)
            .if_none_match("*")
            .presigned(self.presigning()?)
            .await
            .map_err(backend)?;
        let headers = presigned
            .headers()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Ok(UploadVia::Presigned {
            url: presigned.uri().to_string(),
            headers,
        })
    }
}
