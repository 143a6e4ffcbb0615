//! Importing provider packages of another registry for the network mirror.

use tfreg_http::error::Error;
use tfreg_http::registry::Registry;
use tfreg_model::address::{Hostname, ProviderName};
use tfreg_model::protocol::FileDecl;
use tfreg_model::version::Version;
use tfreg_store::catalog::{self, Origin, ProviderRelease};
use tfreg_verify::release_check;
use tfreg_verify::release_files::{self, ProviderFiles};

use super::Recorded;
use super::staging::Staging;

/// The declared zips (mirror imports carry no SHA256SUMS or signature).
pub(super) fn declared(
    registry: &Registry,
    hostname: &Hostname,
    provider: &ProviderName,
    version: &Version,
    files: &[FileDecl],
    max: u64,
) -> Result<ProviderFiles, Error> {
    if *hostname == registry.config.hostname {
        return Err(Error::bad(format!(
            "{hostname} is this registry: publish its providers with `tfreg publish provider` instead"
        )));
    }
    release_files::provider_files(&provider.r#type, version, files, false, max)
        .map_err(crate::refused)
}

/// A configured upstream's providers come from the pull-through cache
/// (`CACHE#`), never from an import: the two never hold the same host.
pub(super) async fn not_an_upstream(registry: &Registry, hostname: &Hostname) -> Result<(), Error> {
    let Ok(host) = tfreg_model::upstream::UpstreamHost::parse(hostname.as_str()) else {
        return Ok(());
    };
    if catalog::upstreams::upstream(registry.items.as_ref(), &host)
        .await?
        .is_some()
    {
        return Err(Error::Conflict(format!(
            "{hostname} is an upstream registry here: its providers come through the cache, not an import (`tfreg upstream remove {hostname}` first)"
        )));
    }
    Ok(())
}

/// `Some(same content?)` when the version exists.
pub(super) async fn same_as_published(
    registry: &Registry,
    hostname: &Hostname,
    provider: &ProviderName,
    version: &Version,
    files: &[FileDecl],
) -> Result<Option<bool>, Error> {
    let origin = Origin::Mirror(hostname.clone());
    let existing =
        catalog::provider_release(registry.items.as_ref(), &origin, provider, version).await?;
    Ok(existing.map(|e| super::provider::same_files(&e, files)))
}

/// Claim the zips, check exactly those bytes (step 4 of the provider chain),
/// keep them and record the release.
pub(super) async fn complete(
    registry: &Registry,
    staging: &mut Staging<'_>,
    hostname: &Hostname,
    provider: &ProviderName,
    version: &Version,
    files: &ProviderFiles,
) -> Result<Recorded, Error> {
    let (claims, packages) = staging.claim_zips(&files.zips).await?;
    let provider_type = provider.r#type.clone();
    let verified = tokio::task::spawn_blocking(move || {
        release_check::verify_packages(&provider_type, packages)
    })
    .await?
    .map_err(crate::refused)?;
    let packages = staging.keep_packages(&verified, &claims).await?;
    let release = ProviderRelease {
        version: version.to_string(),
        protocols: vec!["5.0".into()],
        packages,
        shasums: None,
        shasums_signature: None,
        signing_key: None,
        published_at: registry.now(),
        lifecycle: Default::default(),
    };
    let origin = Origin::Mirror(hostname.clone());
    let outcome = catalog::put_provider_release(
        registry.items.as_ref(),
        &origin,
        provider,
        version,
        &release,
    )
    .await?;
    Ok(Recorded {
        outcome,
        address: format!("{hostname}/{provider}"),
        signed_by: None,
        warnings: vec![],
    })
}
