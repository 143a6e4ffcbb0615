//! [`BlobStore`] on an S3 bucket. Clients never see the bucket directly: they
//! download through the registry's own signed `/v1/blobs/...` URLs (HEAD is
//! answered from `HeadObject`, GET redirected to a fresh presigned GET), and
//! upload with presigned PUT URLs, so large archives never pass through Lambda.

use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_s3::Client;
use aws_sdk_s3::presigning::PresigningConfig;
use aws_sdk_s3::primitives::ByteStream as S3Body;

use super::sdk_error as backend;
use crate::storage::{BlobStore, ByteStream, Download, StoreError, UploadVia};

/// The S3 blob store.
#[derive(Clone, Debug)]
pub struct S3BlobStore {
    client: Client,
    bucket: String,
    presign_ttl: Duration,
}

type HttpResponse = aws_sdk_s3::config::http::HttpResponse;

fn is_not_found<E>(e: &aws_sdk_s3::error::SdkError<E, HttpResponse>) -> bool {
    e.raw_response().is_some_and(|r| r.status().as_u16() == 404)
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
        PresigningConfig::expires_in(self.presign_ttl).map_err(StoreError::backend)
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

    async fn head(&self, key: &str) -> Result<Option<u64>, StoreError> {
        match self
            .client
            .head_object()
            .bucket(&self.bucket)
            .key(key)
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
    async fn size(&self, key: &str) -> Result<Option<u64>, StoreError> {
        self.head(key).await
    }

    async fn fetch(&self, key: &str, max: u64) -> Result<std::fs::File, StoreError> {
        let out = match self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
        {
            Ok(out) => out,
            Err(e) if is_not_found(&e) => return Err(StoreError::NotFound(key.to_string())),
            Err(e) => return Err(backend(e)),
        };
        if out.content_length.unwrap_or(0) as u64 > max {
            return Err(StoreError::TooLarge {
                key: key.to_string(),
                max,
            });
        }
        let file = tempfile::tempfile().map_err(StoreError::backend)?;
        let mut writer = tokio::fs::File::from_std(file.try_clone().map_err(StoreError::backend)?);
        let body = tokio_util::io::ReaderStream::new(out.body.into_async_read());
        crate::storage::write_limited(body, &mut writer, key, max).await?;
        drop(writer);
        // The clone shares the file offset: rewind so the caller reads from the start.
        let mut file = file;
        std::io::Seek::rewind(&mut file).map_err(StoreError::backend)?;
        Ok(file)
    }

    async fn write(&self, key: &str, body: ByteStream, max: u64) -> Result<u64, StoreError> {
        // Buffer to a temporary file so the upload has a known length.
        let tmp = tempfile::NamedTempFile::new().map_err(StoreError::backend)?;
        let mut writer = tokio::fs::File::from_std(tmp.reopen().map_err(StoreError::backend)?);
        let written = crate::storage::write_limited(body, &mut writer, key, max).await?;
        let body = S3Body::from_path(tmp.path())
            .await
            .map_err(StoreError::backend)?;
        self.client
            .put_object()
            .bucket(&self.bucket)
            .key(key)
            .body(body)
            .send()
            .await
            .map_err(backend)?;
        Ok(written)
    }

    async fn copy(&self, from: &str, to: &str) -> Result<(), StoreError> {
        match self
            .client
            .copy_object()
            .bucket(&self.bucket)
            .key(to)
            .copy_source(format!("{}/{from}", self.bucket))
            .send()
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if is_not_found(&e) => Err(StoreError::NotFound(from.to_string())),
            Err(e) => Err(backend(e)),
        }
    }

    async fn delete(&self, key: &str) -> Result<(), StoreError> {
        self.client
            .delete_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
            .map_err(backend)?;
        Ok(())
    }

    async fn download(&self, key: &str, head: bool) -> Result<Download, StoreError> {
        if head {
            // Answer HEAD here: a URL presigned for GET answers HEAD with 403 on S3.
            let len = self
                .head(key)
                .await?
                .ok_or_else(|| StoreError::NotFound(key.to_string()))?;
            return Ok(Download::Stream {
                len,
                body: Box::pin(futures_util::stream::empty()),
            });
        }
        let presigned = self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(key)
            .presigned(self.presigning()?)
            .await
            .map_err(backend)?;
        Ok(Download::Redirect(presigned.uri().to_string()))
    }

    async fn upload_via(&self, key: &str) -> Result<UploadVia, StoreError> {
        let presigned = self
            .client
            .put_object()
            .bucket(&self.bucket)
            .key(key)
            .presigned(self.presigning()?)
            .await
            .map_err(backend)?;
        Ok(UploadVia::Url(presigned.uri().to_string()))
    }
}
