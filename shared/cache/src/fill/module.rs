//! Filling a module (plan §4): its version list; one version, whose source
//! the origin names: a git repository over https (the ref resolved to a
//! commit, that commit's tree fetched and packed with publish's archive
//! rules) or an https archive (fetched and kept byte for byte after the
//! same checks a publish makes), stored before its record is made. A source
//! the cache does not fetch is recorded as passed through (counted in the
//! audit trail as `cache.passthrough`).

use std::time::Duration;

use tfreg_model::address::ModuleName;
use tfreg_model::blob_key::{BlobKey, FileName};
use tfreg_model::cache::lease::Fill;
use tfreg_model::cache::module::{
    CachedModuleRelease, ModuleArchiveFormat, ModuleOrigin, StoredModule,
};
use tfreg_model::cache::{OriginList, OriginVersion};
use tfreg_model::upstream::UpstreamRecord;
use tfreg_model::version::Version;
use tfreg_store::Digest;
use tfreg_store::catalog::cached_module::CachedModule;

use super::{Cache, FillError, METADATA_DEADLINE, Origin, TempFile, deadline};
use crate::origin::git::{self, GitError};
use crate::origin::{ArchiveFormat, ModuleSource, getter};

pub(super) struct Filling<'a> {
    origin: Origin<'a>,
    module: ModuleName,
    place: CachedModule,
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
        system: &str,
    ) -> Result<Self, FillError> {
        let host = upstream.hostname.to_string();
        let module = ModuleName::parse(&fill.namespace, &fill.name, system)
            .map_err(|e| FillError::NotFound(e.0))?;
        Ok(Filling {
            origin: Origin::new(cache, upstream)?,
            place: CachedModule::new(&host, &module.namespace, &module.name, &module.system),
            module,
        })
    }

    fn name(&self) -> String {
        format!("{}/{}", self.host, self.module)
    }

    /// Fetch the version list and keep it; a transient failure marks the
    /// cached list as failing (answered degraded).
    pub(super) async fn list(&self) -> Result<OriginList, FillError> {
        let fetched = self
            .ask(
                deadline(METADATA_DEADLINE),
                async |client, services, until| {
                    client.module_versions(services, &self.module, until).await
                },
            )
            .await;
        let items = self.cache.items.as_ref();
        let versions = self.list_fetched(&self.place, fetched).await?;
        let list = OriginList {
            versions: versions
                .iter()
                .map(|v| OriginVersion {
                    version: v.to_string(),
                    protocols: Vec::new(),
                    platforms: Vec::new(),
                })
                .collect(),
            warnings: Vec::new(),
            fetched_at: self.cache.now(),
            failed_at: None,
        };
        self.place.put_origin_list(items, &list).await?;
        Ok(list)
    }

    /// Resolve, fetch and store one version (once: a stored version is kept).
    pub(super) async fn version(&self, version: &str) -> Result<CachedModuleRelease, FillError> {
        let items = self.cache.items.as_ref();
        if let Some(release) = self.place.release(items, version).await? {
            return Ok(release);
        }
        let parsed = Version::parse(version).map_err(|e| FillError::NotFound(e.0))?;
        let location = self
            .ask(
                deadline(METADATA_DEADLINE),
                async |client, services, until| {
                    client
                        .module_location(services, &self.module, &parsed, until)
                        .await
                },
            )
            .await;
        let location = match location {
            Ok(l) => l,
            Err(e) => return Err(self.missing_in(&self.place, version, e).await),
        };
        let hosts: Vec<&str> = self
            .upstream
            .settings
            .module_hosts
            .iter()
            .map(|h| h.as_str())
            .collect();
        let source = getter::parse(&location.source, &hosts);
        let (origin, stored) = match source {
            ModuleSource::PassThrough { why, .. } => (pass_through(why), None),
            ModuleSource::Git {
                repo_url,
                reference,
                subdir,
            } => match self
                .fetch_git(version, &repo_url, reference.as_deref())
                .await
            {
                Ok((commit, stored)) => (
                    ModuleOrigin::Git {
                        repo: repo_url.to_string(),
                        reference,
                        commit,
                        subdir,
                    },
                    Some(stored),
                ),
                Err(Fetch::PassThrough(why)) => (pass_through(&why), None),
                Err(Fetch::Failed(e)) => return Err(e),
            },
            ModuleSource::Archive {
                url,
                format,
                subdir,
            } => {
                let format = match format {
                    ArchiveFormat::TarGz => ModuleArchiveFormat::TarGz,
                    ArchiveFormat::Zip => ModuleArchiveFormat::Zip,
                };
                let stored = self.fetch_archive(version, &url, format).await?;
                (
                    ModuleOrigin::Archive {
                        url: url.to_string(),
                        format,
                        subdir,
                    },
                    Some(stored),
                )
            }
        };
        if let ModuleOrigin::PassThrough { why } = &origin {
            self.cache
                .audit(
                    "cache.passthrough",
                    &format!("{} {version}", self.name()),
                    200,
                    &format!("{}: {why}", location.source),
                )
                .await;
        }
        let release = CachedModuleRelease {
            version: version.to_string(),
            origin_source: location.source,
            source: origin,
            resolved_at: self.cache.now(),
            stored,
        };
        Ok(self.place.keep_release(items, &release).await?)
    }

    /// Where the cache keeps `version`'s archive of content `sha256`.
    fn key(
        &self,
        version: &str,
        format: ModuleArchiveFormat,
        sha256: &str,
    ) -> Result<BlobKey, FillError> {
        let file = FileName::parse(&format.file_name(sha256))
            .map_err(|e| FillError::Store(e.to_string()))?;
        BlobKey::cached_module(
            &self.host,
            &self.module.namespace,
            &self.module.name,
            &self.module.system,
            version,
            &file,
        )
        .map_err(|e| FillError::refused(&self.host, e))
    }

    fn fill_deadline(&self) -> tokio::time::Instant {
        deadline(Duration::from_secs(u64::from(
            self.upstream.settings.fill_timeout_secs,
        )))
    }

    /// The ref's commit, and that commit's tree packed and stored.
    async fn fetch_git(
        &self,
        version: &str,
        repo: &url::Url,
        reference: Option<&str>,
    ) -> Result<(String, StoredModule), Fetch> {
        let until = self.fill_deadline();
        let commit = git::resolve(&self.client, repo, reference, until)
            .await
            .map_err(|e| self.git_error(e))?;
        let entries = git::fetch_tree(&self.client, repo, &commit, None, until)
            .await
            .map_err(|e| self.git_error(e))?;
        let packed = tokio::task::spawn_blocking(move || {
            tfreg_verify::archives::module::pack_entries(&entries)
        })
        .await
        .map_err(|e| Fetch::Failed(FillError::Store(e.to_string())))?
        .map_err(|e| Fetch::PassThrough(format!("its tree cannot be packed: {e}")))?;
        let temp = TempFile::new(&self.cache.temp_dir).map_err(Fetch::Failed)?;
        std::fs::write(&temp.0, &packed)
            .map_err(|e| Fetch::Failed(FillError::Store(e.to_string())))?;
        let digest = Digest {
            size: packed.len() as u64,
            sha256: hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&packed)),
        };
        let stored = self
            .store(version, ModuleArchiveFormat::TarGz, &temp, digest)
            .await
            .map_err(Fetch::Failed)?;
        Ok((commit.to_hex(), stored))
    }

    fn git_error(&self, e: GitError) -> Fetch {
        if e.is_pass_through() {
            return Fetch::PassThrough(e.to_string());
        }
        Fetch::Failed(match e {
            GitError::Origin(e) => FillError::origin(&self.host, e),
            e => FillError::refused(&self.host, e),
        })
    }

    /// An https archive, checked as a publish checks one, kept byte for byte.
    async fn fetch_archive(
        &self,
        version: &str,
        url: &url::Url,
        format: ModuleArchiveFormat,
    ) -> Result<StoredModule, FillError> {
        let temp = TempFile::new(&self.cache.temp_dir)?;
        let fetched = self
            .client
            .fetch_archive(
                url,
                &temp.0,
                self.client.settings().caps.archive,
                self.fill_deadline(),
            )
            .await
            .map_err(|e| FillError::origin(&self.host, e))?;
        let path = temp.0.clone();
        let checked = tokio::task::spawn_blocking(move || -> Result<(), String> {
            let file = std::fs::File::open(&path).map_err(|e| e.to_string())?;
            let reader = std::io::BufReader::new(file);
            match format {
                ModuleArchiveFormat::TarGz => tfreg_verify::archives::module::check_tar_gz(reader)
                    .map(|_| ())
                    .map_err(|e| e.to_string()),
                ModuleArchiveFormat::Zip => tfreg_verify::archives::provider_zip::hash_any(reader)
                    .map(|_| ())
                    .map_err(|e| e.to_string()),
            }
        })
        .await
        .map_err(|e| FillError::Store(e.to_string()))?;
        checked.map_err(|why| FillError::refused(&self.host, format!("{url}: {why}")))?;
        let digest = Digest {
            size: fetched.len,
            sha256: hex::encode(fetched.sha256),
        };
        self.store(version, format, &temp, digest).await
    }

    async fn store(
        &self,
        version: &str,
        format: ModuleArchiveFormat,
        temp: &TempFile,
        digest: Digest,
    ) -> Result<StoredModule, FillError> {
        let key = self.key(version, format, &digest.sha256)?;
        super::keep_file(self.cache.blobs.as_ref(), &key, &temp.0, &digest).await?;
        Ok(StoredModule {
            sha256: digest.sha256,
            size: digest.size,
            stored_at: self.cache.now(),
        })
    }
}

/// How fetching a git source ended short of storing it.
enum Fetch {
    /// Not something the cache fetches (a missing ref, a submodule, a
    /// symlink): the origin's source is passed through.
    PassThrough(String),
    Failed(FillError),
}

fn pass_through(why: impl Into<String>) -> ModuleOrigin {
    ModuleOrigin::PassThrough { why: why.into() }
}
