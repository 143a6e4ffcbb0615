//! Publishing: `begin` announces the files and hands out upload URLs; the
//! client PUTs each file; `complete` verifies everything that landed and only
//! then makes the version visible, in one conditional write. Nothing is visible
//! before that write, so an interrupted or refused publish leaves no trace.

use std::io::{Read, Seek, SeekFrom};

use http::StatusCode;
use sha2::{Digest, Sha256};

use crate::address::{Hostname, ModuleName, ProviderName};
use crate::auth::{self, TokenRecord};
use crate::catalog::{
    self, ModuleRelease, Origin, ProviderPackage, ProviderRelease, PutOutcome, SigningKey,
    StoredFile,
};
use crate::error::Error;
use crate::hashing;
use crate::module_archive;
use crate::protocol::{FileDecl, PublishBegin, PublishRequest, PublishResult, UploadTarget};
use crate::registry::Registry;
use crate::release_files::{self, ProviderFiles};
use crate::router::PublishStep;
use crate::service::{Response, json};
use crate::signed_url::Access;
use crate::signing;
use crate::storage::{StoreError, UploadVia};
use crate::version::Version;

/// Largest publish request body (file list and signing key).
pub const MAX_BODY: usize = 1024 * 1024;
/// Largest SHA256SUMS, signature or manifest file.
const MAX_SMALL_FILE: u64 = 1024 * 1024;

async fn publisher(registry: &Registry, authorization: Option<&str>) -> Result<TokenRecord, Error> {
    let token = auth::bearer(authorization).ok_or_else(|| {
        Error::Unauthorized("publishing needs a token: pass --token or set TFREG_TOKEN".into())
    })?;
    let record = auth::authenticate(registry.items.as_ref(), token).await?;
    if record.scope != auth::Scope::Publish {
        return Err(Error::Forbidden("this token may not publish".into()));
    }
    Ok(record)
}

fn require_namespace(record: &TokenRecord, namespace: &str) -> Result<(), Error> {
    if record.may_publish(namespace) {
        Ok(())
    } else {
        Err(Error::Forbidden(format!(
            "this token may not publish into namespace {namespace}"
        )))
    }
}

fn parse_request(body: &[u8]) -> Result<PublishRequest, Error> {
    serde_json::from_slice(body).map_err(|e| Error::bad(format!("invalid publish request: {e}")))
}

fn upload_id(req: &PublishRequest) -> Result<&str, Error> {
    let id = req
        .upload_id
        .as_deref()
        .ok_or_else(|| Error::bad("upload_id is missing: call begin first"))?;
    if id.len() != 32 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(Error::bad("malformed upload_id"));
    }
    Ok(id)
}

fn staging_key(upload_id: &str, name: &str) -> String {
    format!("{}{upload_id}/{name}", super::blob::UPLOADS_PREFIX)
}

fn archive_key(sha256: &str, name: &str) -> String {
    format!("archives/{sha256}/{name}")
}

/// Answer `begin`: either "unchanged" or where to upload each file.
async fn begin(
    registry: &Registry,
    files: &[FileDecl],
    same_as_published: Option<bool>,
) -> Result<Response, Error> {
    match same_as_published {
        Some(true) => {
            return Ok(json(
                StatusCode::OK,
                &PublishBegin {
                    status: "unchanged".into(),
                    upload_id: String::new(),
                    uploads: vec![],
                },
            ));
        }
        Some(false) => return Err(Error::Conflict(
            "this version is already published with different content; versions are immutable, publish a new version".into(),
        )),
        None => {}
    }
    let id = format!("{:032x}", rand::random::<u128>());
    let mut uploads = Vec::with_capacity(files.len());
    for f in files {
        let key = staging_key(&id, &f.name);
        let url = match registry.blobs.upload_via(&key).await? {
            UploadVia::Registry => registry.blob_url(Access::Write, &key).await?,
            UploadVia::Url(url) => url,
        };
        uploads.push(UploadTarget {
            name: f.name.clone(),
            url,
        });
    }
    Ok(json(
        StatusCode::OK,
        &PublishBegin {
            status: "upload".into(),
            upload_id: id,
            uploads,
        },
    ))
}

/// Files that landed in staging, checked against what was declared.
struct Staged {
    upload_id: String,
    names: Vec<String>,
}

impl Staged {
    /// Open a staged file after checking its size and sha256 against the declaration.
    async fn open_verified(
        &self,
        registry: &Registry,
        decl: &FileDecl,
        max: u64,
    ) -> Result<std::fs::File, Error> {
        let key = staging_key(&self.upload_id, &decl.name);
        let mut file = registry.blobs.fetch(&key, max).await.map_err(|e| match e {
            StoreError::NotFound(_) => Error::bad(format!("{} was not uploaded", decl.name)),
            StoreError::TooLarge { max, .. } => {
                Error::PayloadTooLarge(format!("{} is larger than {max} bytes", decl.name))
            }
            other => other.into(),
        })?;
        let name = decl.name.clone();
        let (file, size, sha) = tokio::task::spawn_blocking(move || -> Result<_, Error> {
            let mut hasher = Sha256::new();
            let size = std::io::copy(&mut file, &mut hasher)
                .map_err(|e| Error::Storage(format!("reading {name}: {e}")))?;
            file.seek(SeekFrom::Start(0))
                .map_err(|e| Error::Storage(e.to_string()))?;
            Ok((file, size, hex::encode(hasher.finalize())))
        })
        .await
        .map_err(|e| Error::Storage(e.to_string()))??;
        if size != decl.size {
            return Err(Error::bad(format!(
                "{}: {size} bytes arrived but {} were declared",
                decl.name, decl.size
            )));
        }
        if sha != decl.sha256 {
            return Err(Error::bad(format!(
                "{}: the uploaded file's sha256 is {sha}, not the declared {}",
                decl.name, decl.sha256
            )));
        }
        Ok(file)
    }

    async fn read_small(&self, registry: &Registry, decl: &FileDecl) -> Result<Vec<u8>, Error> {
        let mut file = self.open_verified(registry, decl, MAX_SMALL_FILE).await?;
        let mut buf = Vec::new();
        file.read_to_end(&mut buf)
            .map_err(|e| Error::Storage(e.to_string()))?;
        Ok(buf)
    }

    /// Copy a verified staged file to its permanent, content-addressed key.
    async fn keep(
        &self,
        registry: &Registry,
        decl: &FileDecl,
        filename: &str,
    ) -> Result<StoredFile, Error> {
        let key = archive_key(&decl.sha256, filename);
        registry
            .blobs
            .copy(&staging_key(&self.upload_id, &decl.name), &key)
            .await?;
        Ok(StoredFile {
            filename: filename.to_string(),
            sha256: decl.sha256.clone(),
            size: decl.size,
            key,
        })
    }

    /// Remove the staged files (whatever the outcome of the publish).
    async fn discard(&self, registry: &Registry) {
        for name in &self.names {
            if let Err(e) = registry
                .blobs
                .delete(&staging_key(&self.upload_id, name))
                .await
            {
                tracing::warn!(error = %e, "could not delete staged upload");
            }
        }
    }
}

/// Run `f` on the staged upload, then discard the staging files whatever happened.
async fn with_staged<T, F>(registry: &Registry, req: &PublishRequest, f: F) -> Result<T, Error>
where
    F: AsyncFnOnce(&Staged) -> Result<T, Error>,
{
    let staged = Staged {
        upload_id: upload_id(req)?.to_string(),
        names: req.files.iter().map(|f| f.name.clone()).collect(),
    };
    let result = f(&staged).await;
    staged.discard(registry).await;
    result
}

/// Hash and sanity-check one provider zip: its `h1:` and that it holds the provider binary.
async fn hash_provider_zip(
    file: std::fs::File,
    provider_type: &str,
    name: &str,
) -> Result<String, Error> {
    let binary_prefix = format!("terraform-provider-{provider_type}");
    let name = name.to_string();
    tokio::task::spawn_blocking(move || {
        let mut file = file;
        let names =
            hashing::zip_file_names(&mut file).map_err(|e| Error::bad(format!("{name}: {e}")))?;
        if !names.iter().any(|n| n.starts_with(&binary_prefix)) {
            return Err(Error::bad(format!(
                "{name} holds no {binary_prefix}* executable"
            )));
        }
        file.seek(SeekFrom::Start(0))
            .map_err(|e| Error::Storage(e.to_string()))?;
        hashing::h1_hash_zip(&mut file).map_err(|e| Error::bad(format!("{name}: {e}")))
    })
    .await
    .map_err(|e| Error::Storage(e.to_string()))?
}

async fn verified_packages(
    registry: &Registry,
    staged: &Staged,
    provider_type: &str,
    files: &ProviderFiles,
) -> Result<Vec<ProviderPackage>, Error> {
    let mut packages = Vec::with_capacity(files.zips.len());
    for (platform, decl) in &files.zips {
        let file = staged
            .open_verified(registry, decl, registry.config.max_archive_bytes)
            .await?;
        let h1 = hash_provider_zip(file, provider_type, &decl.name).await?;
        packages.push(ProviderPackage {
            os: platform.os.clone(),
            arch: platform.arch.clone(),
            file: StoredFile {
                filename: decl.name.clone(),
                sha256: decl.sha256.clone(),
                size: decl.size,
                key: String::new(),
            },
            h1,
        });
    }
    Ok(packages)
}

async fn keep_packages(
    registry: &Registry,
    staged: &Staged,
    files: &ProviderFiles,
    packages: &mut [ProviderPackage],
) -> Result<(), Error> {
    for (pkg, (_, decl)) in packages.iter_mut().zip(&files.zips) {
        pkg.file = staged.keep(registry, decl, &decl.name).await?;
    }
    Ok(())
}

fn published(
    outcome: PutOutcome,
    address: String,
    version: &Version,
    warnings: Vec<String>,
) -> Response {
    let status = match outcome {
        PutOutcome::Created => "published",
        PutOutcome::Unchanged => "unchanged",
    };
    let code = match outcome {
        PutOutcome::Created => StatusCode::CREATED,
        PutOutcome::Unchanged => StatusCode::OK,
    };
    json(
        code,
        &PublishResult {
            status: status.into(),
            address,
            version: version.to_string(),
            warnings,
        },
    )
}

fn same_files(existing: &ProviderRelease, files: &[FileDecl]) -> bool {
    let mut declared: Vec<(String, String)> = files
        .iter()
        .filter(|f| !f.name.ends_with("_manifest.json"))
        .map(|f| (f.name.clone(), f.sha256.clone()))
        .collect();
    declared.sort();
    existing.content() == declared
}

/// `POST /v1/publish/providers/:ns/:type/:version/{begin,complete}`.
pub async fn provider(
    registry: &Registry,
    authorization: Option<&str>,
    provider: &ProviderName,
    version: &Version,
    step: PublishStep,
    body: &[u8],
) -> Result<Response, Error> {
    let token = publisher(registry, authorization).await?;
    require_namespace(&token, &provider.namespace)?;
    let req = parse_request(body)?;
    let files = release_files::provider_files(
        &provider.r#type,
        version,
        &req.files,
        true,
        registry.config.max_archive_bytes,
    )?;
    let items = registry.items.as_ref();
    let existing = catalog::provider_release(items, &Origin::Registry, provider, version).await?;
    if step == PublishStep::Begin {
        return begin(
            registry,
            &req.files,
            existing.map(|e| same_files(&e, &req.files)),
        )
        .await;
    }
    let armor = req.signing_key.as_deref().ok_or_else(|| {
        Error::bad(
            "signing_key is missing: give the ASCII-armored public key that signed SHA256SUMS",
        )
    })?;
    let (Some(sums_decl), Some(sig_decl)) = (&files.shasums, &files.signature) else {
        return Err(Error::bad("SHA256SUMS and its signature are required"));
    };
    with_staged(registry, &req, async |staged| {
        let sums_bytes = staged.read_small(registry, sums_decl).await?;
        let sig_bytes = staged.read_small(registry, sig_decl).await?;
        let verified =
            signing::verify_for_terraform(armor, &sums_bytes, &sig_bytes, req.allow_modern_keys)
                .map_err(|e| Error::bad(e.to_string()))?;
        let mut warnings = Vec::new();
        if !verified.legacy_compatible {
            warnings.push(format!(
                "signed with a {} key: Terraform 1.5 and older cannot verify it",
                verified.algorithm
            ));
        }
        let sums = release_files::parse_shasums(&sums_bytes)?;
        release_files::check_against_shasums(&sums, &files.zips, &provider.r#type, version)?;
        let manifest_protocols = match &files.manifest {
            Some(decl) => {
                release_files::manifest_protocols(&staged.read_small(registry, decl).await?)?
            }
            None => None,
        };
        let protocols = release_files::check_protocols(
            &req.protocols
                .clone()
                .or(manifest_protocols)
                .unwrap_or_else(|| vec!["5.0".into()]),
        )?;
        let mut packages = verified_packages(registry, staged, &provider.r#type, &files).await?;
        keep_packages(registry, staged, &files, &mut packages).await?;
        let shasums = staged.keep(registry, sums_decl, &sums_decl.name).await?;
        let shasums_signature = staged.keep(registry, sig_decl, &sig_decl.name).await?;
        let key = signing::parse_public_key(armor).map_err(|e| Error::bad(e.to_string()))?;
        let release = ProviderRelease {
            version: version.to_string(),
            protocols,
            packages,
            shasums: Some(shasums),
            shasums_signature: Some(shasums_signature),
            signing_key: Some(SigningKey {
                key_id: key.key_id,
                ascii_armor: key.ascii_armor,
            }),
            published_at: registry.now(),
        };
        let outcome =
            catalog::put_provider_release(items, &Origin::Registry, provider, version, &release)
                .await?;
        let address = format!("{}/{provider}", registry.config.hostname);
        tracing::info!(%address, %version, ?outcome, "provider publish");
        Ok(published(outcome, address, version, warnings))
    })
    .await
}

/// `POST /v1/publish/mirror/:hostname/:ns/:type/:version/{begin,complete}`:
/// import provider packages (zips only) for the network mirror.
pub async fn mirror(
    registry: &Registry,
    authorization: Option<&str>,
    hostname: &Hostname,
    provider: &ProviderName,
    version: &Version,
    step: PublishStep,
    body: &[u8],
) -> Result<Response, Error> {
    let token = publisher(registry, authorization).await?;
    if token.namespace.is_some() {
        return Err(Error::Forbidden(
            "mirror imports need a publish token without a namespace limit".into(),
        ));
    }
    if *hostname == registry.config.hostname {
        return Err(Error::bad(format!(
            "{hostname} is this registry: publish its providers with `tfreg publish provider` instead"
        )));
    }
    let req = parse_request(body)?;
    let files = release_files::provider_files(
        &provider.r#type,
        version,
        &req.files,
        false,
        registry.config.max_archive_bytes,
    )?;
    let origin = Origin::Mirror(hostname.clone());
    let items = registry.items.as_ref();
    let existing = catalog::provider_release(items, &origin, provider, version).await?;
    if step == PublishStep::Begin {
        return begin(
            registry,
            &req.files,
            existing.map(|e| same_files(&e, &req.files)),
        )
        .await;
    }
    with_staged(registry, &req, async |staged| {
        let mut packages = verified_packages(registry, staged, &provider.r#type, &files).await?;
        keep_packages(registry, staged, &files, &mut packages).await?;
        let release = ProviderRelease {
            version: version.to_string(),
            protocols: vec!["5.0".into()],
            packages,
            shasums: None,
            shasums_signature: None,
            signing_key: None,
            published_at: registry.now(),
        };
        let outcome =
            catalog::put_provider_release(items, &origin, provider, version, &release).await?;
        Ok(published(
            outcome,
            format!("{hostname}/{provider}"),
            version,
            vec![],
        ))
    })
    .await
}

/// `POST /v1/publish/modules/:ns/:name/:system/:version/{begin,complete}`.
pub async fn module(
    registry: &Registry,
    authorization: Option<&str>,
    module: &ModuleName,
    version: &Version,
    step: PublishStep,
    body: &[u8],
) -> Result<Response, Error> {
    let token = publisher(registry, authorization).await?;
    require_namespace(&token, &module.namespace)?;
    let req = parse_request(body)?;
    let [decl] = req.files.as_slice() else {
        return Err(Error::bad(
            "a module publish uploads exactly one .tar.gz file",
        ));
    };
    if !decl.name.ends_with(".tar.gz") {
        return Err(Error::bad(format!(
            "{}: module archives must be .tar.gz",
            decl.name
        )));
    }
    release_files::check_decl(decl, registry.config.max_archive_bytes)?;
    let items = registry.items.as_ref();
    let existing = catalog::module_release(items, module, version).await?;
    if step == PublishStep::Begin {
        return begin(
            registry,
            &req.files,
            existing.map(|e| e.file.sha256 == decl.sha256),
        )
        .await;
    }
    with_staged(registry, &req, async |staged| {
        let file = staged
            .open_verified(registry, decl, registry.config.max_archive_bytes)
            .await?;
        tokio::task::spawn_blocking(move || {
            module_archive::check_tar_gz(std::io::BufReader::new(file))
        })
        .await
        .map_err(|e| Error::Storage(e.to_string()))??;
        let filename = format!(
            "{}-{}-{}-{version}.tar.gz",
            module.namespace, module.name, module.system
        );
        let release = ModuleRelease {
            version: version.to_string(),
            file: staged.keep(registry, decl, &filename).await?,
            published_at: registry.now(),
        };
        let outcome = catalog::put_module_release(items, module, version, &release).await?;
        Ok(published(
            outcome,
            format!("{}/{module}", registry.config.hostname),
            version,
            vec![],
        ))
    })
    .await
}
