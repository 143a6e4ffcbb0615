//! Filling a provider (plan §3): its version list; one version (the
//! origin's SHA256SUMS and signature verified with the keys of its download
//! answer, every listed platform's hash taken from SHA256SUMS); one
//! platform's archive (streamed to a file, its sha256 the SHA256SUMS line,
//! stored byte for byte).

use std::collections::BTreeMap;
use std::time::Duration;

use tfreg_model::address::{Platform, ProviderName};
use tfreg_model::blob_key::{BlobKey, FileName};
use tfreg_model::cache::lease::Fill;
use tfreg_model::cache::{CachedArchive, CachedRelease, OriginList, OriginVersion, StoredArchive};
use tfreg_model::upstream::{KeyChange, UpstreamRecord};
use tfreg_model::version::Version;
use tfreg_store::Digest;
use tfreg_store::catalog::cache::CachedProvider;
use tfreg_verify::origin::{OriginAnswer, OriginKey, check_answer, origin_h1, verify_sums};

use super::{Cache, FillError, METADATA_DEADLINE, Origin, TempFile, deadline};
use crate::origin::SmallFile;

pub(super) struct Filling<'a> {
    origin: Origin<'a>,
    provider: ProviderName,
    place: CachedProvider,
}

impl<'a> std::ops::Deref for Filling<'a> {
    type Target = Origin<'a>;
    fn deref(&self) -> &Origin<'a> {
        &self.origin
    }
}

impl<'a> Filling<'a> {
    pub(super) fn new(
        cache: &'a Cache,
        upstream: &'a UpstreamRecord,
        fill: &Fill,
    ) -> Result<Self, FillError> {
        let host = upstream.hostname.to_string();
        let provider = ProviderName::parse(&fill.namespace, &fill.name)
            .map_err(|e| FillError::NotFound(e.0))?;
        Ok(Filling {
            origin: Origin::new(cache, upstream)?,
            place: CachedProvider::new(&host, &provider.namespace, &provider.r#type),
            provider,
        })
    }

    fn name(&self) -> String {
        format!("{}/{}", self.host, self.provider)
    }

    /// Fetch the version list and keep it. A transient failure marks the
    /// cached list as failing (answered degraded).
    pub(super) async fn list(&self) -> Result<OriginList, FillError> {
        let fetched = self
            .ask(
                deadline(METADATA_DEADLINE),
                async |client, services, until| {
                    client
                        .provider_versions(services, &self.provider, until)
                        .await
                },
            )
            .await;
        let items = self.cache.items.as_ref();
        let versions = self.list_fetched(&self.place, fetched).await?;
        let list = OriginList {
            versions: versions
                .versions
                .iter()
                .map(|v| OriginVersion {
                    version: v.version.to_string(),
                    protocols: v.protocols.clone(),
                    platforms: v.platforms.iter().map(ToString::to_string).collect(),
                })
                .collect(),
            warnings: versions.warnings,
            fetched_at: self.cache.now(),
            failed_at: None,
        };
        self.place.put_origin_list(items, &list).await?;
        Ok(list)
    }

    /// Verify `version` and keep it (every platform's hash from its
    /// verified SHA256SUMS).
    pub(super) async fn version(&self, version: &str) -> Result<CachedRelease, FillError> {
        let items = self.cache.items.as_ref();
        if let Some(release) = self.place.release(items, version).await? {
            return Ok(release);
        }
        let list = match self.place.origin_list(items).await? {
            Some(list) => list,
            None => self.list().await?,
        };
        let Some(entry) = list.versions.iter().find(|v| v.version == version) else {
            let e = FillError::NotFound(format!(
                "{}: the origin lists no version {version}",
                self.name()
            ));
            return Err(self.missing_in(&self.place, version, e).await);
        };
        let parsed = Version::parse(version).map_err(|e| FillError::NotFound(e.0))?;
        // Any platform's download answer names the release's SHA256SUMS,
        // signature and keys; linux_amd64 when there is one.
        let asked = entry
            .platforms
            .iter()
            .find(|p| p.as_str() == "linux_amd64")
            .or(entry.platforms.first())
            .ok_or_else(|| {
                FillError::Refused(format!("{}: {version} lists no platform", self.name()))
            })?;
        let asked = platform(asked)?;
        let meta = deadline(METADATA_DEADLINE);
        let answer = self.download_answer(&parsed, &asked).await?;
        let sums = self
            .client
            .fetch_small(&answer.shasums_url, SmallFile::Shasums, meta)
            .await
            .map_err(|e| FillError::origin(&self.host, e))?;
        let signature = match &answer.shasums_signature_url {
            Some(url) => Some(
                self.client
                    .fetch_small(url, SmallFile::Signature, meta)
                    .await
                    .map_err(|e| FillError::origin(&self.host, e))?,
            ),
            None => None,
        };
        let keys: Vec<OriginKey> = answer
            .keys
            .iter()
            .map(|k| OriginKey {
                key_id: k.key_id.clone().unwrap_or_default(),
                ascii_armor: k.ascii_armor.clone(),
            })
            .collect();
        let verified = verify_sums(
            &sums,
            signature.as_deref(),
            &keys,
            self.upstream.settings.unsigned,
            self.cache.now(),
        )
        .map_err(|r| FillError::refused(&self.host, r))?;
        check_answer(
            &verified,
            &asked,
            &OriginAnswer {
                os: answer.platform.os.clone(),
                arch: answer.platform.arch.clone(),
                filename: answer.filename.clone(),
                shasum: answer.shasum.clone(),
            },
        )
        .map_err(|r| FillError::refused(&self.host, r))?;
        let signed_by = verified.signed_by.as_ref().map(|s| s.key_id.clone());
        self.key_continuity(version, signed_by.as_deref()).await?;
        let mut platforms = BTreeMap::new();
        for p in &entry.platforms {
            let filename = if *p == asked.to_string() {
                answer.filename.clone()
            } else {
                format!(
                    "terraform-provider-{}_{version}_{p}.zip",
                    self.provider.r#type
                )
            };
            // A platform SHA256SUMS does not vouch for (or whose file name
            // is no plain name) is not offered.
            if let Some(sha256) = verified.sums.get(&filename)
                && FileName::parse(&filename).is_ok()
            {
                platforms.insert(
                    p.clone(),
                    CachedArchive {
                        filename,
                        sha256: sha256.clone(),
                        stored: None,
                    },
                );
            }
        }
        // Kept as the origin served them, for the registry protocol's
        // answer (Terraform verifies them itself): never re-signed.
        let shasums_sha256 = self.store_file("SHA256SUMS", &sums).await?;
        let signature_sha256 = match &signature {
            Some(sig) => Some(self.store_file("SHA256SUMS.sig", sig).await?),
            None => None,
        };
        let release = CachedRelease {
            version: version.to_string(),
            protocols: answer.protocols.clone(),
            shasums_sha256,
            signature_sha256,
            signed_by,
            key_expired: verified
                .signed_by
                .as_ref()
                .is_some_and(|s| s.key_expired.is_some()),
            signing_keys: answer.signing_keys.get().to_string(),
            platforms,
            verified_at: self.cache.now(),
        };
        Ok(self.place.keep_release(items, &release).await?)
    }

    /// Store a small verified file (SHA256SUMS, its signature) under its
    /// content's key; its sha256.
    async fn store_file(&self, name: &str, bytes: &[u8]) -> Result<String, FillError> {
        let sha256 = tfreg_model::hashing::sha256_hex(bytes);
        let key = self.key(&sha256, name)?;
        let temp = TempFile::new(&self.cache.temp_dir)?;
        tokio::fs::write(&temp.0, bytes)
            .await
            .map_err(|e| FillError::Store(e.to_string()))?;
        let digest = Digest {
            size: bytes.len() as u64,
            sha256: sha256.clone(),
        };
        super::keep_file(self.cache.blobs.as_ref(), &key, &temp.0, &digest).await?;
        Ok(sha256)
    }

    /// Where the cache keeps this provider's file `name` of content `sha256`.
    fn key(&self, sha256: &str, name: &str) -> Result<BlobKey, FillError> {
        let name = FileName::parse(name).map_err(|e| FillError::refused(&self.host, e))?;
        BlobKey::cached(
            &self.host,
            &self.provider.namespace,
            &self.provider.r#type,
            sha256,
            &name,
        )
        .map_err(|e| FillError::Store(e.to_string()))
    }

    /// A release signed by another key than the provider's last cached one:
    /// audited, and refused where the upstream says so.
    async fn key_continuity(
        &self,
        version: &str,
        signed_by: Option<&str>,
    ) -> Result<(), FillError> {
        let releases = self.place.releases(self.cache.items.as_ref()).await?;
        let Some(before) = releases
            .values()
            .filter(|r| r.version != version)
            .max_by_key(|r| r.verified_at)
            .and_then(|r| r.signed_by.clone())
        else {
            return Ok(());
        };
        if signed_by == Some(before.as_str()) {
            return Ok(());
        }
        let detail = format!(
            "{} {version} is signed by {}, earlier versions by {before}",
            self.name(),
            signed_by.unwrap_or("no key")
        );
        let refuse = self.upstream.settings.on_key_change == KeyChange::Refuse;
        self.cache
            .audit(
                "cache.key-changed",
                &self.name(),
                if refuse { 502 } else { 200 },
                &detail,
            )
            .await;
        if refuse {
            return Err(FillError::refused(&self.host, detail));
        }
        Ok(())
    }

    /// The origin's download answer for `version` on `platform`: one
    /// fetched a moment ago (by this version's fill) if there is one, else
    /// asked now and kept a moment for the archive fill that follows.
    async fn download_answer(
        &self,
        version: &Version,
        platform: &Platform,
    ) -> Result<crate::origin::DownloadAnswer, FillError> {
        let clients = &self.cache.clients;
        let key = super::clients::Clients::answer_key(
            self.upstream,
            &format!("{}/{version}/{platform}", self.provider),
        );
        if let Some(answer) = clients.kept_answer(&key) {
            return Ok(answer);
        }
        let answer = self
            .ask(
                deadline(METADATA_DEADLINE),
                async |client, services, until| {
                    client
                        .provider_download(services, &self.provider, version, platform, until)
                        .await
                },
            )
            .await?;
        clients.keep_answer(key, &answer);
        Ok(answer)
    }

    /// Fetch `platform`'s archive of `version`, check it against its
    /// SHA256SUMS line, store it byte for byte.
    pub(super) async fn archive(
        &self,
        version: &str,
        platform_text: &str,
    ) -> Result<(), FillError> {
        let items = self.cache.items.as_ref();
        let release = self.version(version).await?;
        let Some(archive) = release.platforms.get(platform_text) else {
            return Err(FillError::NotFound(format!(
                "{}: {version} has no {platform_text} archive",
                self.name()
            )));
        };
        if archive.stored.is_some() {
            return Ok(());
        }
        let asked = platform(platform_text)?;
        let parsed = Version::parse(version).map_err(|e| FillError::NotFound(e.0))?;
        let answer = self.download_answer(&parsed, &asked).await?;
        if answer.shasum != archive.sha256 || answer.filename != archive.filename {
            return Err(FillError::refused(
                &self.host,
                format!(
                    "the download answer for {platform_text} names {} with sha256 {}, SHA256SUMS has {} with {}",
                    answer.filename, answer.shasum, archive.filename, archive.sha256
                ),
            ));
        }
        let temp = TempFile::new(&self.cache.temp_dir)?;
        let fetched = self
            .client
            .fetch_archive(
                &answer.download_url,
                &temp.0,
                self.client.settings().caps.archive,
                deadline(Duration::from_secs(u64::from(
                    self.upstream.settings.fill_timeout_secs,
                ))),
            )
            .await
            .map_err(|e| FillError::origin(&self.host, e))?;
        let sha256 = hex::encode(fetched.sha256);
        if sha256 != archive.sha256 {
            return Err(FillError::refused(
                &self.host,
                format!(
                    "{} has sha256 {sha256}, not {} as its SHA256SUMS says",
                    archive.filename, archive.sha256
                ),
            ));
        }
        let key = self.key(&sha256, &archive.filename)?;
        let digest = Digest {
            size: fetched.len,
            sha256,
        };
        super::keep_file(self.cache.blobs.as_ref(), &key, &temp.0, &digest).await?;
        let path = temp.0.clone();
        let h1 = tokio::task::spawn_blocking(move || {
            std::fs::File::open(&path)
                .map_err(|e| e.to_string())
                .and_then(|f| origin_h1(std::io::BufReader::new(f)).map_err(|e| e.to_string()))
        })
        .await
        .map_err(|e| FillError::Store(e.to_string()))?;
        let h1 = match h1 {
            Ok(h1) => Some(h1),
            Err(why) => {
                tracing::info!(archive = %archive.filename, %why, "stored with zh: only");
                None
            }
        };
        self.place
            .archive_stored(
                items,
                version,
                platform_text,
                StoredArchive {
                    size: fetched.len,
                    h1,
                    stored_at: self.cache.now(),
                },
            )
            .await?;
        Ok(())
    }
}

fn platform(text: &str) -> Result<Platform, FillError> {
    Platform::parse_joined(text).map_err(|e| FillError::NotFound(e.0))
}
