//! The uploads of one publish, from claiming them to keeping them.

use tfreg_http::error::Error;
use tfreg_http::registry::Registry;
use tfreg_model::address::Platform;
use tfreg_model::blob_key::{BlobKey, FileName, UploadId};
use tfreg_model::protocol::FileDecl;
use tfreg_store::catalog::{ProviderPackage, StoredFile};
use tfreg_store::{Claimed, StoreError};
use tfreg_verify::release_check::{StagedPackage, VerifiedPackage};

/// One publish's upload slots and the files it kept so far.
pub(super) struct Staging<'r> {
    registry: &'r Registry,
    upload_id: UploadId,
    slots: Vec<BlobKey>,
    kept: Vec<BlobKey>,
}

impl<'r> Staging<'r> {
    pub(super) fn new(registry: &'r Registry, upload_id: UploadId, files: &[FileDecl]) -> Self {
        let slots = files
            .iter()
            .filter_map(|f| FileName::parse(&f.name).ok())
            .map(|name| BlobKey::upload(&upload_id, &name))
            .collect();
        Self {
            registry,
            upload_id,
            slots,
            kept: Vec::new(),
        }
    }

    fn slot(&self, decl: &FileDecl) -> Result<BlobKey, Error> {
        let name = FileName::parse(&decl.name).map_err(|e| Error::bad(e.to_string()))?;
        Ok(BlobKey::upload(&self.upload_id, &name))
    }

    /// Take the upload of `decl` out of the client's reach and check that it is
    /// exactly what was declared.
    pub(super) async fn claim(&self, decl: &FileDecl, max: u64) -> Result<Claimed, Error> {
        let key = self.slot(decl)?;
        let claimed = self
            .registry
            .blobs
            .claim(&key, max)
            .await
            .map_err(|e| match e {
                StoreError::NotFound(_) => Error::bad(format!("{} was not uploaded", decl.name)),
                StoreError::TooLarge { max, .. } => {
                    Error::PayloadTooLarge(format!("{} is larger than {max} bytes", decl.name))
                }
                other => other.into(),
            })?;
        let expected = tfreg_store::Digest {
            size: decl.size,
            sha256: decl.sha256.clone(),
        };
        tfreg_store::check_digest(&key, &claimed.digest, &expected).map_err(|e| match e {
            StoreError::Mismatch { reason, .. } => Error::bad(format!("{}: {reason}", decl.name)),
            other => other.into(),
        })?;
        Ok(claimed)
    }

    /// Claim every zip of a provider release: the claims (to keep later) and
    /// what verification reads.
    pub(super) async fn claim_zips(
        &self,
        zips: &[(Platform, FileDecl)],
    ) -> Result<(Vec<Claimed>, Vec<StagedPackage<std::fs::File>>), Error> {
        let max = self.registry.config.max_archive_bytes;
        let (mut claims, mut staged) = (Vec::new(), Vec::new());
        for (platform, decl) in zips {
            let claimed = self.claim(decl, max).await?;
            staged.push(StagedPackage {
                platform: platform.clone(),
                decl: decl.clone(),
                reader: claimed.file.try_clone().map_err(Error::internal)?,
            });
            claims.push(claimed);
        }
        Ok((claims, staged))
    }

    /// Keep the verified zips (in the order they were claimed) as a release's packages.
    pub(super) async fn keep_packages(
        &mut self,
        verified: &[VerifiedPackage],
        claims: &[Claimed],
    ) -> Result<Vec<ProviderPackage>, Error> {
        let mut kept = Vec::with_capacity(claims.len());
        for (package, claimed) in verified.iter().zip(claims) {
            kept.push(ProviderPackage {
                os: package.platform.os.clone(),
                arch: package.platform.arch.clone(),
                file: self.keep(claimed, &package.decl.name).await?,
                h1: package.h1.clone(),
            });
        }
        Ok(kept)
    }

    /// Keep exactly the claimed bytes as `filename` under a key of this publish's own.
    pub(super) async fn keep(
        &mut self,
        claimed: &Claimed,
        filename: &str,
    ) -> Result<StoredFile, Error> {
        let name = FileName::parse(filename).map_err(Error::internal)?;
        let key = BlobKey::archive(&self.upload_id, &name);
        // Recorded first: a keep that fails half-way is cleaned up too.
        self.kept.push(key.clone());
        self.registry.blobs.keep(claimed, &key).await?;
        Ok(StoredFile {
            filename: filename.to_string(),
            sha256: claimed.digest.sha256.clone(),
            size: claimed.digest.size,
            key,
        })
    }

    /// What this publish kept so far.
    pub(super) fn kept(&self) -> &[BlobKey] {
        &self.kept
    }

    /// Close every upload slot (a late upload is refused) and delete `unused`
    /// (kept files no release refers to). Failures are logged: the publish's
    /// answer is already decided.
    pub(super) async fn finish(self, unused: &[BlobKey]) {
        let blobs = &self.registry.blobs;
        for slot in &self.slots {
            if let Err(e) = blobs.close_upload(slot).await {
                tracing::warn!(key = %slot, error = %e, "could not close an upload slot");
            }
        }
        self.delete(unused).await;
    }

    /// Delete `unused` kept files, leaving the upload slots as they are.
    pub(super) async fn delete(&self, unused: &[BlobKey]) {
        let blobs = &self.registry.blobs;
        for key in unused {
            if let Err(e) = blobs.delete(key).await {
                tracing::warn!(key = %key, error = %e, "could not delete an unused archive");
            }
        }
    }
}
