//! A provider's source, picked as terraform's `MultiSource` picks one by
//! host (internal/getproviders/multi_source.go): this registry's own, the
//! providers imported from a mirror's host, else a configured upstream's
//! through the cache. Every reader of providers (the registry protocols'
//! views, the OCI view) goes through [`with_provider`].

use async_trait::async_trait;
use tfreg_http::error::Error;
use tfreg_http::registry::Registry;
use tfreg_model::address::{Hostname, ProviderName};
use tfreg_model::token::Principal;
use tfreg_model::upstream::{UpstreamHost, UpstreamRecord};
use tfreg_store::catalog::{Origin, upstreams};

use crate::source::ProviderSource;
use crate::source::cached::Cached;
use crate::source::own::Releases;

/// Where a route's provider comes from.
#[derive(Debug, Clone, Copy)]
pub(crate) enum ProviderFrom<'r> {
    /// This registry's own (`providers.v1`).
    Here,
    /// The network mirror's host: this registry's, an imported one's, or
    /// a configured upstream's.
    Mirrored(&'r Hostname),
    /// The cache's routes: a configured upstream (404 when it is not one).
    Upstream(&'r UpstreamHost),
}

/// What is done with a provider's source, whichever it turns out to be.
#[async_trait]
pub(crate) trait UseProvider: Sync {
    type Out: Send;
    async fn with(&self, source: &dyn ProviderSource) -> Result<Self::Out, Error>;
}

/// Use the source a provider is read from, as a `MultiSource` picks one:
/// this registry's own; for a mirror's host, the providers imported from
/// it, else (nothing imported) a configured upstream's through the cache.
/// A configured upstream's packages are answered by who asks (who may make
/// the cache fetch): never kept as everyone's answer. A mirror read of an
/// imported host costs one read as before; the upstream is looked up only
/// when that finds nothing (`tfreg mirror import` refuses a configured
/// upstream's hostname, so the two never overlap).
pub(crate) async fn with_provider<U: UseProvider>(
    registry: &Registry,
    from: ProviderFrom<'_>,
    provider: &ProviderName,
    principal: &Principal,
    user: &U,
) -> Result<U::Out, Error> {
    let own = |origin, what| Releases::new(registry, origin, provider, what);
    let cached = |upstream: UpstreamRecord| async move {
        let source = Cached::new(registry, &upstream, provider, principal)?;
        user.with(&source).await
    };
    match from {
        ProviderFrom::Here => {
            let source = own(Origin::Registry, format!("provider {provider}"));
            user.with(&source).await
        }
        ProviderFrom::Mirrored(hostname) if *hostname == registry.config.hostname => {
            let source = own(Origin::Registry, format!("provider {hostname}/{provider}"));
            user.with(&source).await
        }
        ProviderFrom::Mirrored(hostname) => {
            let origin = Origin::Mirror(hostname.clone());
            let source = own(origin, format!("provider {hostname}/{provider}"));
            match user.with(&source).await {
                Err(Error::NotFound(why)) => match upstream_named(registry, hostname).await? {
                    Some(upstream) => cached(upstream).await,
                    None => Err(Error::NotFound(why)),
                },
                other => other,
            }
        }
        ProviderFrom::Upstream(host) => cached(upstream(registry, host).await?).await,
    }
}

/// The configured upstream `host` (404 when it is not one).
pub(crate) async fn upstream(
    registry: &Registry,
    host: &UpstreamHost,
) -> Result<UpstreamRecord, Error> {
    upstreams::upstream(registry.items.as_ref(), host)
        .await?
        .ok_or_else(|| Error::not_found(format!("{host} is not an upstream registry here")))
}

/// The configured upstream a mirror path's hostname names, if it is one.
async fn upstream_named(
    registry: &Registry,
    hostname: &Hostname,
) -> Result<Option<UpstreamRecord>, Error> {
    let Ok(host) = UpstreamHost::parse(hostname.as_str()) else {
        return Ok(None);
    };
    Ok(upstreams::upstream(registry.items.as_ref(), &host).await?)
}
