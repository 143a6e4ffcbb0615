//! What the cache's answers for a provider and for a module share: one
//! upstream's provider or module as one request sees it ([`Asked`]): may
//! it make the cache fetch, what an origin 404 still remembered answers,
//! how its version list is answered (fresh, stale and refreshed, fetched,
//! or degraded: [`tfreg_model::cache::fresh::decide`]), and a version
//! fetched when missing and this request may fill.

use std::future::Future;
use std::ops::Deref;

use tfreg_http::error::Error;
use tfreg_http::registry::Registry;
use tfreg_model::cache::OriginList;
use tfreg_model::cache::fresh::{Answer as Plan, decide, still_missing};
use tfreg_model::cache::lease::{Fill, FillWhat};
use tfreg_model::cache::may_fill;
use tfreg_model::token::Principal;
use tfreg_model::upstream::UpstreamRecord;
use tfreg_store::catalog::cache_place::CachePlace;

use crate::wait::{METADATA_WAIT, fill_and_wait, still_filling};

/// One upstream provider or module (`place`), as one request sees it.
pub(crate) struct Asked<'a, P> {
    pub registry: &'a Registry,
    pub upstream: &'a UpstreamRecord,
    pub place: P,
    /// May this request make the cache fetch?
    pub may_fill: bool,
    /// `<host>/<address>`, for messages.
    pub name: String,
    /// Its namespace and (provider type or module) name, for fills.
    namespace: String,
    item: String,
}

impl<'a, P: Deref<Target = CachePlace>> Asked<'a, P> {
    /// `kind` is "providers" or "modules"; `serves` whether the upstream
    /// is cached for that kind.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        registry: &'a Registry,
        upstream: &'a UpstreamRecord,
        principal: &Principal,
        (kind, serves): (&str, bool),
        (namespace, item): (&str, &str),
        address: impl std::fmt::Display,
        place: P,
    ) -> Result<Self, Error> {
        if !serves {
            return Err(Error::not_found(format!(
                "{} is not cached for {kind} here",
                upstream.hostname
            )));
        }
        Ok(Asked {
            registry,
            upstream,
            place,
            may_fill: registry.filler.is_some() && may_fill(principal, upstream),
            name: format!("{}/{address}", upstream.hostname),
            namespace: namespace.to_string(),
            item: item.to_string(),
        })
    }

    pub fn fill(&self, what: FillWhat) -> Fill {
        Fill {
            host: self.upstream.hostname.clone(),
            namespace: self.namespace.clone(),
            name: self.item.clone(),
            what,
        }
    }

    /// `what` is not cached and this request will not fetch it, and why
    /// not: the upstream is sealed, this registry fetches nothing, or the
    /// request may not (issue 35: one message had said all three).
    pub fn not_cached(&self, what: &str) -> Error {
        let why = if self.upstream.settings.mode == tfreg_model::upstream::Mode::Sealed {
            format!(
                "{} is sealed: the cache answers only what it holds",
                self.upstream.hostname
            )
        } else if self.registry.filler.is_none() {
            "this registry fetches nothing from upstreams".to_string()
        } else {
            "this request may not fetch it (a token made with `tfreg token create --fill` may)"
                .to_string()
        };
        Error::not_found(format!(
            "{what} of {} is not cached here, and {why}",
            self.name
        ))
    }

    /// An origin 404 still remembered for `what`.
    async fn remembered_missing(&self, what: &str) -> Result<Option<Error>, Error> {
        let at = self
            .place
            .missing(self.registry.items.as_ref(), what)
            .await?;
        let remembered = at.is_some_and(|at| {
            still_missing(
                at,
                self.upstream.settings.negative_ttl_secs,
                self.registry.now(),
            )
        });
        Ok(remembered.then(|| Error::not_found(format!("{} has no {what}", self.name))))
    }

    /// The origin's list as cached, fetched first with `what` if need be;
    /// and whether it is to be answered degraded.
    pub async fn list(&self, what: FillWhat) -> Result<(OriginList, bool), Error> {
        if let Some(e) = self.remembered_missing("versions").await? {
            return Err(e);
        }
        let items = self.registry.items.as_ref();
        let read = || async { Ok(self.place.origin_list(items).await?) };
        let cached = read().await?;
        let settings = &self.upstream.settings;
        match decide(
            cached.as_ref(),
            settings,
            self.may_fill,
            self.registry.now(),
        ) {
            Plan::Cached { refresh, degraded } => {
                if refresh && let Some(filler) = &self.registry.filler {
                    // Stale-while-revalidate: answered now, fetched meanwhile.
                    if let Err(e) = filler.start(self.fill(what)).await {
                        tracing::warn!(list = %self.name, error = %e, "cannot refresh a cached list");
                    }
                }
                let list = cached.expect("decide answers Cached only for a cached list");
                Ok((list, degraded))
            }
            Plan::NotCached => Err(self.not_cached("the version list")),
            Plan::Fill => {
                let found = fill_and_wait(self.registry, self.fill(what), METADATA_WAIT, read)
                    .await?
                    .ok_or_else(|| {
                        still_filling(format!("fetching {}'s versions; retry", self.name))
                    })?;
                let degraded = matches!(
                    decide(Some(&found), settings, false, self.registry.now()),
                    Plan::Cached { degraded: true, .. }
                );
                Ok((found, degraded))
            }
        }
    }

    /// `version` as `read` finds it, fetched first with `what` if it is
    /// missing and this request may fill.
    pub async fn version<T, F, Fut>(
        &self,
        version: &str,
        what: FillWhat,
        read: F,
    ) -> Result<T, Error>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<Option<T>, Error>>,
    {
        if let Some(found) = read().await? {
            return Ok(found);
        }
        if let Some(e) = self.remembered_missing(version).await? {
            return Err(e);
        }
        if !self.may_fill {
            return Err(self.not_cached(&format!("version {version}")));
        }
        fill_and_wait(self.registry, self.fill(what), METADATA_WAIT, read)
            .await?
            .ok_or_else(|| still_filling(format!("fetching {} {version}; retry", self.name)))
    }
}
