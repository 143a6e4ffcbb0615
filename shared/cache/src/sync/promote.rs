//! One version made this registry's own: fetched and verified into the
//! scratch store by the cache's fills, then its files copied (each through
//! an upload slot, hashed again) to keys of its own, a module's docs read
//! from exactly those bytes, and the release written create-only.

use tfreg_model::address::{ModuleName, ProviderName};
use tfreg_model::blob_key::{BlobKey, FileName, UploadId};
use tfreg_model::cache::lease::FillWhat;
use tfreg_model::cache::module::ModuleArchiveFormat;
use tfreg_model::release::{
    ModuleRelease, Origin as ReleaseOrigin, ProviderPackage, ProviderRelease, SigningKey,
    StoredFile,
};
use tfreg_model::upstream::KeyChange;
use tfreg_model::version::Version;
use tfreg_store::catalog::cache::CachedProvider;
use tfreg_store::catalog::cached_module::CachedModule;
use tfreg_store::catalog::{self, keys};
use tfreg_store::{Digest, Kept, keep_as};

use super::{SyncOutcome, Syncer};
use crate::fill::FillError;

/// Most bytes of SHA256SUMS or its signature read into memory.
const MAX_SMALL_FILE: u64 = 1 << 20;

impl Syncer {
    /// Fetch and verify `version` of `provider` with every platform, and
    /// keep it as this registry's own.
    pub(super) async fn provider_version(
        &self,
        provider: &ProviderName,
        version: &Version,
    ) -> Result<SyncOutcome, FillError> {
        let (ns, ty) = (&provider.namespace, &provider.r#type);
        let v = version.to_string();
        self.fill(ns, ty, FillWhat::ProviderVersion { version: v.clone() })
            .await?;
        let place = CachedProvider::new(&self.host(), ns, ty);
        let scratch = self.scratch.items.as_ref();
        let Some(mut cached) = place.release(scratch, &v).await? else {
            return Err(FillError::Store(format!("{provider} {v}: not kept")));
        };
        for platform in cached.platforms.clone().keys() {
            let what = FillWhat::ProviderArchive {
                version: v.clone(),
                platform: platform.clone(),
            };
            self.fill(ns, ty, what).await?;
        }
        if let Some(again) = place.release(scratch, &v).await? {
            cached = again;
        }
        let refused = |why: String| Ok(SyncOutcome::Refused(format!("{}: {why}", self.host())));
        let (Some(signature_sha256), Some(signed_by)) =
            (&cached.signature_sha256, &cached.signed_by)
        else {
            return refused(format!(
                "{provider} {v} is not signed: this registry's own providers are"
            ));
        };
        let cached_key = |sha256: &str, name: &str| {
            let name = FileName::parse(name).map_err(|e| FillError::Store(e.to_string()))?;
            BlobKey::cached(&self.host(), ns, ty, sha256, &name)
                .map_err(|e| FillError::Store(e.to_string()))
        };
        let sums_key = cached_key(&cached.shasums_sha256, "SHA256SUMS")?;
        let sig_key = cached_key(signature_sha256, "SHA256SUMS.sig")?;
        let sums = self.read_small(&sums_key).await?;
        let sig = self.read_small(&sig_key).await?;
        let Some(key) = origin_key(&cached.signing_keys, signed_by) else {
            return refused(format!("{provider} {v}: the key {signed_by} is not listed"));
        };
        if let Some(why) = self.namespace_refuses(provider, &sums, &sig).await? {
            return refused(why);
        }
        if let Some(why) = self.key_changed(provider, &v, &key.key_id).await? {
            if self.origin.settings.on_key_change == KeyChange::Refuse {
                return refused(why);
            }
            let target = format!("provider {provider} {v}");
            let ok = (tfreg_model::audit::Outcome::Ok, 200);
            self.record("sync.key-changed", &target, ok, Some(why))
                .await;
        }
        let id = UploadId::random();
        let mut packages = Vec::new();
        for (platform, archive) in &cached.platforms {
            let (Some(stored), Some((os, arch))) = (&archive.stored, platform.split_once('_'))
            else {
                return Err(FillError::Store(format!("{platform}: not stored")));
            };
            let Some(h1) = &stored.h1 else {
                return refused(format!(
                    "{}: Terraform cannot hash its contents (no h1:)",
                    archive.filename
                ));
            };
            let digest = Digest {
                size: stored.size,
                sha256: archive.sha256.clone(),
            };
            let from = cached_key(&archive.sha256, &archive.filename)?;
            packages.push(ProviderPackage {
                os: os.to_string(),
                arch: arch.to_string(),
                file: self.copy(&from, &id, &archive.filename, digest).await?,
                h1: h1.clone(),
            });
        }
        let small = |bytes: &[u8], sha256: &str| Digest {
            size: bytes.len() as u64,
            sha256: sha256.to_string(),
        };
        let base = format!("terraform-provider-{ty}_{v}_SHA256SUMS");
        let shasums = self
            .copy(&sums_key, &id, &base, small(&sums, &cached.shasums_sha256))
            .await?;
        let signature = self
            .copy(
                &sig_key,
                &id,
                &format!("{base}.sig"),
                small(&sig, signature_sha256),
            )
            .await?;
        let release = ProviderRelease {
            version: v.clone(),
            protocols: cached.protocols.clone(),
            packages,
            shasums: Some(shasums),
            shasums_signature: Some(signature),
            signing_key: Some(key),
            published_at: (self.clock)(),
            lifecycle: Default::default(),
        };
        catalog::put_provider_release(
            self.target.items.as_ref(),
            &ReleaseOrigin::Registry,
            provider,
            version,
            &release,
        )
        .await?;
        Ok(SyncOutcome::Stored)
    }

    /// Fetch `version` of `module` (its source resolved and checked by the
    /// cache), read its docs, and keep it as this registry's own.
    pub(super) async fn module_version(
        &self,
        module: &ModuleName,
        version: &Version,
    ) -> Result<SyncOutcome, FillError> {
        let v = version.to_string();
        let what = FillWhat::ModuleVersion {
            system: module.system.clone(),
            version: v.clone(),
        };
        self.fill(&module.namespace, &module.name, what).await?;
        let place = CachedModule::new(
            &self.host(),
            &module.namespace,
            &module.name,
            &module.system,
        );
        let Some(cached) = place.release(self.scratch.items.as_ref(), &v).await? else {
            return Err(FillError::Store(format!("{module} {v}: not kept")));
        };
        let shown = tfreg_model::cache::module::shown_source(&cached.origin_source);
        let (Some(stored), Some(format)) = (&cached.stored, cached.format()) else {
            return Ok(SyncOutcome::Skipped(format!(
                "its source {shown} is not fetched here, so it cannot be this registry's own"
            )));
        };
        if format == ModuleArchiveFormat::Zip {
            return Ok(SyncOutcome::Skipped(format!(
                "its source {shown} is a .zip; this registry's modules are .tar.gz"
            )));
        }
        if let Some(sub) = cached.subdir() {
            return Ok(SyncOutcome::Skipped(format!(
                "its source {shown} names a subdirectory (//{sub}); this registry's modules are a whole archive"
            )));
        }
        let name = FileName::parse(&format.file_name(&stored.sha256))
            .map_err(|e| FillError::Store(e.to_string()))?;
        let from = BlobKey::cached_module(
            &self.host(),
            &module.namespace,
            &module.name,
            &module.system,
            &v,
            &name,
        )
        .map_err(|e| FillError::Store(e.to_string()))?;
        let digest = Digest {
            size: stored.size,
            sha256: stored.sha256.clone(),
        };
        let claimed = self.scratch.blobs.claim(&from, stored.size).await?;
        let reader = claimed
            .file
            .try_clone()
            .map_err(|e| FillError::Store(e.to_string()))?;
        let docs = tokio::task::spawn_blocking(move || {
            tfreg_verify::archives::module::checked_docs(std::io::BufReader::new(reader))
        })
        .await
        .map_err(|e| FillError::Store(e.to_string()))?;
        let docs = match docs {
            Ok(d) => d.docs,
            Err(e) => {
                return Ok(SyncOutcome::Refused(format!(
                    "{}: {module} {v}: {e}",
                    self.host()
                )));
            }
        };
        drop(claimed);
        let items = self.target.items.as_ref();
        catalog::put_module_docs(items, module, version, &stored.sha256, &docs).await?;
        let file_name = format!("{}-{}-{v}.tar.gz", module.name, module.system);
        let file = self
            .copy(&from, &UploadId::random(), &file_name, digest)
            .await?;
        let release = ModuleRelease {
            version: v,
            file,
            published_at: (self.clock)(),
            lifecycle: Default::default(),
        };
        let outcome = catalog::put_module_release(items, module, version, &release).await?;
        // The zip the OCI view serves, as a publish makes it: once the
        // version is here (`tfreg reindex` makes it should this fail).
        if outcome == catalog::PutOutcome::Created {
            let blobs = self.target.blobs.as_ref();
            let zipped = match blobs.claim(&release.file.key, release.file.size).await {
                Ok(kept) => {
                    tfreg_store::keep_module_zip(
                        items,
                        blobs,
                        module,
                        version,
                        &stored.sha256,
                        &kept.file,
                        tfreg_verify::archives::module_zip::zip_file,
                    )
                    .await
                }
                Err(e) => Err(e),
            };
            if let Err(e) = zipped {
                tracing::error!(module = %module, %version, "no OCI zip made: {e}");
            }
        }
        Ok(SyncOutcome::Stored)
    }

    /// A small verified file of the scratch store, whole.
    async fn read_small(&self, key: &BlobKey) -> Result<Vec<u8>, FillError> {
        Ok(self
            .scratch
            .blobs
            .claim(key, MAX_SMALL_FILE)
            .await?
            .read_all()?)
    }

    /// Copy the verified `from` of the scratch store to `name` of the
    /// release's own keys here, hashed again on the way in.
    async fn copy(
        &self,
        from: &BlobKey,
        id: &UploadId,
        name: &str,
        digest: Digest,
    ) -> Result<StoredFile, FillError> {
        let claimed = self.scratch.blobs.claim(from, digest.size).await?;
        if claimed.digest != digest {
            return Err(FillError::Store(format!(
                "{from}: the scratch copy is not what was verified"
            )));
        }
        let file = claimed
            .file
            .try_clone()
            .map_err(|e| FillError::Store(e.to_string()))?;
        let file_name = FileName::parse(name).map_err(|e| FillError::Store(e.to_string()))?;
        let key = BlobKey::archive(id, &file_name);
        match keep_as(
            self.target.blobs.as_ref(),
            tokio::fs::File::from_std(file),
            &digest,
            &key,
        )
        .await?
        {
            Kept::Written | Kept::Present => Ok(StoredFile {
                filename: name.to_string(),
                sha256: digest.sha256,
                size: digest.size,
                key,
            }),
            Kept::Other(_) => Err(FillError::Store(format!("{key}: other bytes are there"))),
        }
    }

    /// A namespace with registered keys takes only releases one of them
    /// signed, as a publish does: why not, if not.
    async fn namespace_refuses(
        &self,
        provider: &ProviderName,
        sums: &[u8],
        sig: &[u8],
    ) -> Result<Option<String>, FillError> {
        let ns = &provider.namespace;
        let registered = keys::list(self.target.items.as_ref(), ns).await?;
        if registered.is_empty() {
            return Ok(None);
        }
        let parsed: Vec<_> = registered
            .iter()
            .filter_map(|k| tfreg_verify::signing::registered_key(k).ok())
            .collect();
        let now = (self.clock)();
        if tfreg_verify::release_check::select_key(&parsed, sums, sig, now).is_some() {
            return Ok(None);
        }
        let ids: Vec<&str> = registered.iter().map(|k| k.key_id.as_str()).collect();
        Ok(Some(format!(
            "{provider}: its SHA256SUMS signature does not verify with any key registered for namespace {ns} ({})",
            ids.join(", ")
        )))
    }

    /// A version signed by another key than this registry's newest release
    /// of the provider (refused where the origin's settings say so, as the
    /// cache's `--on-key-change refuse`; else audited): why, if so.
    async fn key_changed(
        &self,
        provider: &ProviderName,
        version: &str,
        key_id: &str,
    ) -> Result<Option<String>, FillError> {
        let releases = catalog::provider_releases(
            self.target.items.as_ref(),
            &ReleaseOrigin::Registry,
            provider,
        )
        .await?;
        let before = releases
            .iter()
            .filter(|r| r.version != version)
            .max_by_key(|r| r.published_at)
            .and_then(|r| r.signing_key.as_ref().map(|k| k.key_id.clone()));
        Ok(before
            .filter(|b| !b.eq_ignore_ascii_case(key_id))
            .map(|b| {
                format!("{provider} {version} is signed by {key_id}, this registry's earlier versions by {b}")
            }))
    }
}

/// The key `signed_by` among the origin's `signing_keys` object.
fn origin_key(signing_keys: &str, signed_by: &str) -> Option<SigningKey> {
    let keys = crate::origin::answers::origin_keys(signing_keys).ok()?;
    let matching = |k: &&crate::origin::answers::OriginKey| {
        k.key_id
            .as_deref()
            .is_some_and(|id| id.eq_ignore_ascii_case(signed_by))
    };
    let key = match keys.iter().find(matching) {
        Some(k) => k,
        // One key without an id: the one that verified.
        None if keys.len() == 1 => &keys[0],
        None => return None,
    };
    Some(SigningKey {
        key_id: signed_by.to_string(),
        ascii_armor: key.ascii_armor.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::origin_key;

    #[test]
    fn the_key_that_signed_is_picked_from_the_origins_list() {
        let keys = r#"{"gpg_public_keys":[{"key_id":"AAAA","ascii_armor":"a"},{"key_id":"bbbb","ascii_armor":"b"}]}"#;
        assert_eq!(origin_key(keys, "BBBB").unwrap().ascii_armor, "b");
        assert!(origin_key(keys, "CCCC").is_none());
        let one = r#"{"gpg_public_keys":[{"ascii_armor":"only"}]}"#;
        assert_eq!(origin_key(one, "DDDD").unwrap().ascii_armor, "only");
        assert!(origin_key("not json", "AAAA").is_none());
    }
}
