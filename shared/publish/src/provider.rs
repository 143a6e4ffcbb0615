//! Publishing a signed provider release of this registry.

use tfreg_http::error::Error;
use tfreg_http::registry::Registry;
use tfreg_model::address::ProviderName;
use tfreg_model::protocol::{FileDecl, PublishRequest};
use tfreg_model::version::Version;
use tfreg_store::catalog::keys;
use tfreg_store::catalog::{self, Origin, ProviderRelease, SigningKey};
use tfreg_verify::release_check::{self, StagedProviderRelease};
use tfreg_verify::release_files::{
    self, ProviderFiles, ReleaseError, ReleaseFile, ReleaseFileName,
};
use tfreg_verify::signing::PublicKey;

use super::staging::Staging;
use super::{MAX_SMALL_FILE, Recorded};

/// The declared files, sorted into their roles (checked at begin and complete).
pub(super) fn declared(
    provider: &ProviderName,
    version: &Version,
    files: &[FileDecl],
    max: u64,
) -> Result<ProviderFiles, Error> {
    release_files::provider_files(&provider.r#type, version, files, true, max)
        .map_err(crate::refused)
}

/// What makes two publishes "the same content": every file's name and sha256
/// (the manifest only feeds the protocols, so it is not kept).
pub(super) fn same_files(existing: &ProviderRelease, files: &[FileDecl]) -> bool {
    let mut declared: Vec<(String, String)> = files
        .iter()
        .filter(|f| {
            !matches!(
                ReleaseFileName::parse(&f.name).map(|n| n.file),
                Some(ReleaseFile::Manifest)
            )
        })
        .map(|f| (f.name.clone(), f.sha256.clone()))
        .collect();
    declared.sort();
    existing.content() == declared
}

/// `Some(same content?)` when the version exists.
pub(super) async fn same_as_published(
    registry: &Registry,
    provider: &ProviderName,
    version: &Version,
    files: &[FileDecl],
) -> Result<Option<bool>, Error> {
    let existing = catalog::provider_release(
        registry.items.as_ref(),
        &Origin::Registry,
        provider,
        version,
    )
    .await?;
    Ok(existing.map(|e| same_files(&e, files)))
}

/// The keys a release of `provider` may be signed with: the keys registered
/// for its namespace when it has any (the request's key is then not needed),
/// else the request's key — unless the registry requires registered keys.
pub(super) async fn signing_keys(
    registry: &Registry,
    provider: &ProviderName,
    req: &PublishRequest,
) -> Result<AllowedKeys, Error> {
    let ns = &provider.namespace;
    let registered = keys::list(registry.items.as_ref(), ns).await?;
    if !registered.is_empty() {
        return registered
            .iter()
            .map(|k| tfreg_verify::signing::registered_key(k).map_err(Error::internal))
            .collect::<Result<_, _>>()
            .map(AllowedKeys::Registered);
    }
    if registry.config.require_namespace_keys {
        return Err(Error::Forbidden(format!(
            "namespace {ns} has no registered signing keys and this registry requires them: an admin adds one with `tfreg key add {ns} KEY.asc`"
        )));
    }
    let armor = req.signing_key.as_deref().ok_or_else(|| {
        Error::bad(
            "signing_key is missing: give the ASCII-armored public key that signed SHA256SUMS",
        )
    })?;
    Ok(AllowedKeys::Publishers(
        PublicKey::parse(armor).map_err(|e| crate::refused(e.into()))?,
    ))
}

/// Which keys may sign a release.
pub(super) enum AllowedKeys {
    /// The namespace's registered keys: one of them must have signed.
    Registered(Vec<PublicKey>),
    /// The namespace has none: the publisher's own key.
    Publishers(PublicKey),
}

/// Claim the staged files, run [`release_check::verify_provider_release`] on
/// exactly those bytes with the one of the allowed keys that made the
/// signature, keep them and record the release.
pub(super) async fn complete(
    registry: &Registry,
    staging: &mut Staging<'_>,
    provider: &ProviderName,
    version: &Version,
    files: &ProviderFiles,
    req: &PublishRequest,
) -> Result<Recorded, Error> {
    let keys = signing_keys(registry, provider, req).await?;
    let (Some(sums_decl), Some(sig_decl)) = (&files.shasums, &files.signature) else {
        return Err(crate::refused(ReleaseError::invalid(
            "SHA256SUMS and its signature are required",
        )));
    };
    let mut sums = staging.claim(sums_decl, MAX_SMALL_FILE).await?;
    let mut sig = staging.claim(sig_decl, MAX_SMALL_FILE).await?;
    let manifest = match &files.manifest {
        Some(decl) => Some(staging.claim(decl, MAX_SMALL_FILE).await?.read_all()?),
        None => None,
    };
    let (claims, packages) = staging.claim_zips(&files.zips).await?;
    let staged = StagedProviderRelease {
        provider_type: provider.r#type.clone(),
        version: version.clone(),
        packages,
        shasums: sums.read_all()?,
        signature: sig.read_all()?,
        manifest,
        protocols: req.protocols.clone(),
    };
    let (allow_modern, now) = (req.allow_modern_keys, registry.now());
    let namespace = provider.namespace.clone();
    let (verified, key) = tokio::task::spawn_blocking(move || {
        let key = match keys {
            AllowedKeys::Publishers(key) => key,
            AllowedKeys::Registered(keys) => {
                release_check::select_key(&keys, &staged.shasums, &staged.signature, now)
                    .ok_or_else(|| {
                        let ids: Vec<&str> =
                            keys.iter().map(|k| k.info().key_id.as_str()).collect();
                        ReleaseError::invalid(format!(
                            "the SHA256SUMS signature does not verify with any key registered for namespace {namespace} ({})",
                            ids.join(", ")
                        ))
                    })?
            }
        };
        release_check::verify_provider_release(staged, &key, allow_modern, now).map(|v| (v, key))
    })
    .await?
    .map_err(crate::refused)?;

    let packages = staging.keep_packages(&verified.packages, &claims).await?;
    let release = ProviderRelease {
        version: version.to_string(),
        protocols: verified.protocols,
        packages,
        shasums: Some(staging.keep(&sums, &sums_decl.name).await?),
        shasums_signature: Some(staging.keep(&sig, &sig_decl.name).await?),
        signing_key: Some(SigningKey {
            key_id: key.info().key_id.clone(),
            ascii_armor: key.info().ascii_armor.clone(),
        }),
        published_at: registry.now(),
        lifecycle: Default::default(),
    };
    let outcome = catalog::put_provider_release(
        registry.items.as_ref(),
        &Origin::Registry,
        provider,
        version,
        &release,
    )
    .await?;
    Ok(Recorded {
        outcome,
        address: format!("{}/{provider}", registry.config.hostname),
        signed_by: Some(key.info().key_id.clone()),
        warnings: verified.warnings,
    })
}
