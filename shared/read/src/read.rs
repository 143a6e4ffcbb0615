//! The read side of the protocols: which source a route reads
//! ([`crate::source`]) and which view it answers with ([`crate::views`]).
//!
//! A route names what it reads in one of three ways ([`ProviderFrom`], with the source it picks in [`crate::source::multi`]): the
//! registry's own packages; a host in the network mirror's path (this
//! registry's own, one with imported providers, or a configured upstream);
//! a configured upstream in the cache's routes. [`split`] reads that off a
//! route once, exhaustively; the answer is the view over the source.

use async_trait::async_trait;
use tfreg_http::Call;
use tfreg_http::answer_cache::Answer;
use tfreg_http::body::Response;
use tfreg_http::error::Error;
use tfreg_http::registry::Registry;
use tfreg_model::address::{ModuleName, ProviderName};
use tfreg_model::router::{OciRoute, ReadRoute};
use tfreg_model::upstream::UpstreamHost;

use crate::source::ProviderSource;
use crate::source::cached_module::Module as CachedModule;
use crate::source::multi::{ProviderFrom, UseProvider, upstream, with_provider};
use crate::source::own::Modules;
use crate::views::{self, ModuleView, ProviderView};

/// What a route asks for.
enum Split<'r> {
    Provider {
        from: ProviderFrom<'r>,
        provider: &'r ProviderName,
        view: ProviderView<'r>,
    },
    /// Modules are this registry's own, or a configured upstream's.
    Module {
        upstream: Option<&'r UpstreamHost>,
        module: &'r ModuleName,
        view: ModuleView<'r>,
    },
    /// The OCI view ([`crate::oci`]), over the same sources.
    Oci(&'r OciRoute),
}

fn split(route: &ReadRoute) -> Split<'_> {
    use ReadRoute as R;
    let provider = |from, provider, view| Split::Provider {
        from,
        provider,
        view,
    };
    let module = |upstream, module, view| Split::Module {
        upstream,
        module,
        view,
    };
    match route {
        R::ProviderVersions { provider: p } => {
            provider(ProviderFrom::Here, p, ProviderView::Versions)
        }
        R::ProviderDownload {
            provider: p,
            version,
            platform,
        } => provider(
            ProviderFrom::Here,
            p,
            ProviderView::Download { version, platform },
        ),
        R::ModuleVersions { module: m } => module(None, m, ModuleView::Versions),
        R::ModuleDownload { module: m, version } => {
            module(None, m, ModuleView::Download { version })
        }
        R::MirrorIndex {
            hostname,
            provider: p,
        } => provider(
            ProviderFrom::Mirrored(hostname),
            p,
            ProviderView::MirrorIndex,
        ),
        R::MirrorVersion {
            hostname,
            provider: p,
            version,
        } => provider(
            ProviderFrom::Mirrored(hostname),
            p,
            ProviderView::MirrorVersion { version },
        ),
        R::CacheProviderVersions { host, provider: p } => {
            provider(ProviderFrom::Upstream(host), p, ProviderView::Versions)
        }
        R::CacheProviderDownload {
            host,
            provider: p,
            version,
            platform,
        } => provider(
            ProviderFrom::Upstream(host),
            p,
            ProviderView::Download { version, platform },
        ),
        R::CacheModuleVersions { host, module: m } => module(Some(host), m, ModuleView::Versions),
        R::CacheModuleDownload {
            host,
            module: m,
            version,
        } => module(Some(host), m, ModuleView::Download { version }),
        R::Oci(oci) => Split::Oci(oci),
    }
}

/// Answer a read route, from the source [`with_provider`] picks (or a
/// module's).
///
/// A successful download is counted ([`crate::counted`]), however it was
/// answered.
pub async fn handle(
    registry: &Registry,
    route: ReadRoute,
    call: &Call<'_>,
) -> Result<Response, Error> {
    let principal = call.principal;
    let download = crate::counted::download_of(registry, &route, principal);
    let answered = answer_route(registry, &route, call).await;
    if let (Some(download), Ok(response)) = (download, &answered)
        && response.status().is_success()
    {
        registry.usage.count(download);
    }
    answered
}

async fn answer_route(
    registry: &Registry,
    route: &ReadRoute,
    call: &Call<'_>,
) -> Result<Response, Error> {
    let principal = call.principal;
    match split(route) {
        Split::Provider {
            from,
            provider,
            view,
        } => {
            let viewed = Viewed {
                registry,
                route,
                view,
            };
            with_provider(registry, from, provider, principal, &viewed).await
        }
        Split::Module {
            upstream: here_or_there,
            module,
            view,
        } => match here_or_there {
            None => {
                let source = Modules::new(registry, module);
                kept_or_made(registry, route, views::module(&source, view)).await
            }
            Some(host) => {
                let upstream = upstream(registry, host).await?;
                let source = CachedModule::new(registry, &upstream, module, principal)?;
                Ok(views::module(&source, view).await?.response())
            }
        },
        Split::Oci(oci) => crate::oci::answer(registry, oci, call).await,
    }
}

/// A registry protocol's view of a provider.
struct Viewed<'r> {
    registry: &'r Registry,
    route: &'r ReadRoute,
    view: ProviderView<'r>,
}

#[async_trait]
impl UseProvider for Viewed<'_> {
    type Out = Response;
    async fn with(&self, source: &dyn ProviderSource) -> Result<Response, Error> {
        let made = views::provider(self.registry, source, self.view);
        if source.keepable() {
            kept_or_made(self.registry, self.route, made).await
        } else {
            Ok(made.await?.response())
        }
    }
}

/// The answer kept from an earlier request while the store and the second
/// are unchanged (the caller was authorised already: every caller allowed
/// to read a route gets the same answer), else `made`.
async fn kept_or_made(
    registry: &Registry,
    route: &ReadRoute,
    made: impl std::future::Future<Output = Result<Answer, Error>>,
) -> Result<Response, Error> {
    Ok(crate::kept::kept(registry, || route.path(), made)
        .await?
        .response())
}
