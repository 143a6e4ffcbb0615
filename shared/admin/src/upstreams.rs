//! The upstream registries the pull-through cache reads from (issue 22):
//! `/v1/admin/upstreams[/<host>]`, and what the cache holds of them
//! (`/v1/admin/cache[/<host>]`). A body is the upstream's settings,
//! checked whole (unknown fields and out-of-range values: 400); each change
//! leaves a [`crate::Note`] naming what changed for the audit trail. Its
//! credentials and `connect` settings must be inside the operator's
//! allow-list (`Config::upstream_policy`): one 400 for any other. The
//! settings hold no secret (credentials are a reference), so they are
//! answered as stored.

use http::{HeaderMap, StatusCode};
use tfreg_http::body::{Body, Response, json};
use tfreg_http::{Error, Registry};
use tfreg_model::router::AdminRoute;
use tfreg_model::upstream::{Mode, RemovedUpstream, SetUpstream, UpstreamList, UpstreamSettings};
use tfreg_store::catalog::{cache_listing, upstreams};

use crate::{body, noted};

/// What an upstream is, as a note says it.
fn describe(s: &UpstreamSettings) -> String {
    let serves = match (s.serves.providers, s.serves.modules) {
        (true, true) => "providers and modules",
        (true, false) => "providers",
        _ => "modules",
    };
    let mode = match s.mode {
        Mode::Online => "online",
        Mode::Sealed => "sealed",
    };
    format!(
        "{serves}, {mode}, lists fresh for {} s{}",
        s.metadata_ttl_secs,
        if s.connect.is_some() {
            ", with connect settings"
        } else {
            ""
        }
    )
}

/// Answer an upstream route, as `by`.
pub(crate) async fn handle(
    registry: &Registry,
    by: &str,
    route: AdminRoute,
    headers: &HeaderMap,
    req_body: Body,
) -> Result<Response, Error> {
    let items = registry.items.as_ref();
    let unknown = |host| Error::not_found(format!("{host} is not a configured upstream"));
    match route {
        AdminRoute::ListUpstreams => Ok(json(
            StatusCode::OK,
            &UpstreamList {
                upstreams: upstreams::upstreams(items).await?,
            },
        )),
        AdminRoute::ShowUpstream { host } => {
            let record = upstreams::upstream(items, &host)
                .await?
                .ok_or_else(|| unknown(host))?;
            Ok(json(StatusCode::OK, &record))
        }
        AdminRoute::SetUpstream { host } => {
            let settings: UpstreamSettings = body(headers, req_body).await?;
            settings.validate(&host).map_err(|e| Error::bad(e.0))?;
            registry
                .config
                .upstream_policy
                .admits(&host, &settings)
                .map_err(|e| Error::bad(e.to_string()))?;
            let (upstream, replaced) =
                upstreams::put_upstream(items, &host, settings, by, registry.now()).await?;
            let note = match &replaced {
                None => format!("{host} added: {}", describe(&upstream.settings)),
                Some(old) => format!(
                    "{host} changed: {} (was {})",
                    describe(&upstream.settings),
                    describe(old)
                ),
            };
            let status = if replaced.is_some() {
                StatusCode::OK
            } else {
                StatusCode::CREATED
            };
            Ok(noted(status, &SetUpstream { upstream, replaced }, note))
        }
        AdminRoute::RemoveUpstream { host } => {
            let removed = upstreams::remove_upstream(items, &host)
                .await?
                .ok_or_else(|| unknown(host.clone()))?;
            let note = format!(
                "{host} removed (was {}); what was cached from it stays",
                describe(&removed.settings)
            );
            Ok(noted(StatusCode::OK, &RemovedUpstream { removed }, note))
        }
        AdminRoute::ListCached { host } => Ok(json(
            StatusCode::OK,
            &cache_listing::cached(items, host.as_ref().map(|h| h.as_str())).await?,
        )),
        other => Err(Error::Internal(format!("not an upstream route: {other:?}"))),
    }
}
