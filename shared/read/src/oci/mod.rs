//! The OCI view (issue 40): what this registry answers for, as OpenTofu
//! 1.10+ reads it from an OCI registry, from the same sources as the
//! registry protocols: providers ([`provider`]: `oci_mirror`) and modules
//! ([`module`]: `oci://` sources), and the token endpoint its `401`s name
//! ([`token`]).
//!
//! Nothing is stored for a provider: its manifests are written the one way
//! [`tfreg_model::oci::Manifest`] writes them from the release (the tests
//! pin the bytes), so a digest always names the same bytes. A module's
//! layer is the zip made of its archive once, at publish or by `tfreg
//! reindex`. A request by digest is answered by looking through the
//! repository's versions, newest first (each a read or two), starting from
//! the version this process last saw the digest in.
//!
//! Tag lists and manifests are kept in the answer cache as the registry
//! protocol's answers are ([`crate::kept`]: while the store is
//! unchanged, where the source allows), so a repeated request is not made
//! again from the release. A blob's answer is not: it is a download, counted
//! by version and platform.

mod module;
mod provider;
mod token;

use std::collections::HashMap;
use std::sync::Mutex;

use http::{HeaderName, HeaderValue, StatusCode, header};
use tfreg_http::Call;
use tfreg_http::answer_cache::Answer;
use tfreg_http::body::{Response, header_value};
use tfreg_http::error::Error;
use tfreg_http::registry::Registry;
use tfreg_http::usage::consumer_of;
use tfreg_model::oci::{self, Digest, EMPTY_CONFIG, Manifest, Repository, TagList};
use tfreg_model::router::OciRoute;
use tfreg_model::usage::Download;
use tfreg_model::version::Version;

use crate::kept::kept;

const DOCKER_CONTENT_DIGEST: HeaderName = HeaderName::from_static("docker-content-digest");
const API_VERSION: HeaderName = HeaderName::from_static("docker-distribution-api-version");

/// Answer an OCI route.
pub(crate) async fn answer(
    registry: &Registry,
    route: &OciRoute,
    call: &Call<'_>,
) -> Result<Response, Error> {
    let (principal, query) = (call.principal, call.query);
    let answer = match route {
        OciRoute::Base => Answer::json(StatusCode::OK, &serde_json::json!({})),
        OciRoute::Token => token::token(registry, query, call.headers).await?,
        OciRoute::Tags { repository } => {
            // A page is its route and its query (`n`, `last`).
            let key = format!("{}?{}", route.path(), query.unwrap_or_default());
            let page = |tags| tag_page(repository, tags, query);
            match repository {
                Repository::Module(m) => {
                    let made = async { page(module::tags(registry, m).await?) };
                    kept(registry, || key, made).await?
                }
                _ => {
                    let (user, answer) = (provider::Tags, &page);
                    provider::answered(registry, repository, principal, &key, user, answer).await?
                }
            }
        }
        OciRoute::Manifest {
            repository,
            reference,
        } => {
            let key = route.path();
            match repository {
                Repository::Module(m) => {
                    let made =
                        async { manifest_answer(&module::manifest(registry, m, reference).await?) };
                    kept(registry, || key, made).await?
                }
                _ => {
                    let user = provider::ByReference {
                        repository,
                        reference,
                    };
                    let answer = |m: Manifest| manifest_answer(&m);
                    provider::answered(registry, repository, principal, &key, user, &answer).await?
                }
            }
        }
        OciRoute::Blob { digest, .. } if *digest == Digest::of(EMPTY_CONFIG) => {
            config_answer(digest)?
        }
        OciRoute::Blob { repository, digest } => {
            let (found, package) = match repository {
                Repository::Module(m) => (
                    module::blob(registry, m, digest).await?,
                    crate::counted::module(registry.config.hostname.as_str(), m),
                ),
                Repository::Mirrored {
                    hostname,
                    provider: p,
                } => (
                    provider::blob(registry, repository, digest, principal).await?,
                    crate::counted::provider(hostname.as_str(), p),
                ),
                Repository::Provider(p) => (
                    provider::blob(registry, repository, digest, principal).await?,
                    crate::counted::provider(registry.config.hostname.as_str(), p),
                ),
            };
            if let Some(consumer) = consumer_of(principal) {
                registry.usage.count(Download {
                    package,
                    version: found.version,
                    platform: found.platform,
                    consumer,
                    at: registry.now(),
                });
            }
            let url = registry.read_url(&found.key).await?;
            Answer::empty(StatusCode::TEMPORARY_REDIRECT)
                .with_header(header::LOCATION, header_value(&url)?)
                .with_header(DOCKER_CONTENT_DIGEST, header_value(digest.as_str())?)
        }
    };
    Ok(answer
        .with_header(API_VERSION, HeaderValue::from_static("registry/2.0"))
        .response())
}

/// A zip a blob request found: a download of its version.
pub(super) struct Found {
    pub version: String,
    /// A provider's platform (`linux_amd64`).
    pub platform: Option<String>,
    pub key: tfreg_model::blob_key::BlobKey,
}

/// The values of a query's parameter `name`.
fn params(query: Option<&str>, name: &str) -> Vec<String> {
    url::form_urlencoded::parse(query.unwrap_or_default().as_bytes())
        .filter(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
        .collect()
}

/// A page of `tags` as `GET /v2/<name>/tags/list?n=&last=` asks, with a
/// `Link` to the next one.
fn tag_page(
    repository: &Repository,
    tags: Vec<String>,
    query: Option<&str>,
) -> Result<Answer, Error> {
    let n = match params(query, "n").first() {
        Some(n) => Some(
            n.parse::<usize>()
                .map_err(|_| Error::bad(format!("n={n:?}: the number of tags to list")))?,
        ),
        None => None,
    };
    let last = params(query, "last").into_iter().next();
    let page = oci::page_of_tags(tags, n, last.as_deref());
    let name = repository.name();
    let mut answer = Answer::json(
        StatusCode::OK,
        &TagList {
            name: name.clone(),
            tags: page.tags.clone(),
        },
    );
    if page.more
        && let Some(last) = page.tags.last()
    {
        let n = n.unwrap_or(oci::DEFAULT_PAGE);
        let link = format!("</v2/{name}/tags/list?n={n}&last={last}>; rel=\"next\"");
        answer = answer.with_header(header::LINK, header_value(&link)?);
    }
    Ok(answer)
}

/// The answer of a manifest.
fn manifest_answer(manifest: &Manifest) -> Result<Answer, Error> {
    let mut answer = Answer::empty(StatusCode::OK);
    answer.body = manifest.bytes.clone().into();
    answer.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(manifest.media_type),
    );
    answer.headers.insert(
        DOCKER_CONTENT_DIGEST,
        header_value(manifest.digest().as_str())?,
    );
    answer.headers.insert(
        header::CONTENT_LENGTH,
        HeaderValue::from(manifest.bytes.len()),
    );
    Ok(answer)
}

/// The empty config every manifest names (OpenTofu does not fetch it;
/// other clients do).
fn config_answer(digest: &Digest) -> Result<Answer, Error> {
    let mut answer = Answer::empty(StatusCode::OK);
    answer.body = EMPTY_CONFIG.into();
    answer.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(oci::EMPTY_CONFIG_MEDIA_TYPE),
    );
    answer
        .headers
        .insert(DOCKER_CONTENT_DIGEST, header_value(digest.as_str())?);
    Ok(answer)
}

fn unknown(repository: &Repository, digest: &Digest, what: &str) -> Error {
    Error::not_found(format!("{repository} has no {what} {digest}"))
}

/// The digests this process has seen, by repository: which version holds
/// them (where a search by digest starts). Bounded: cleared when full.
static SEEN: Mutex<Option<HashMap<String, String>>> = Mutex::new(None);
const MAX_SEEN: usize = 4096;

fn seen_key(repository: &Repository, digest: &Digest) -> String {
    format!("{repository}@{digest}")
}

/// `digests` are in `version` of `repository`.
fn remember<'d>(
    repository: &Repository,
    digests: impl IntoIterator<Item = &'d Digest>,
    version: &str,
) {
    let Ok(mut seen) = SEEN.lock() else { return };
    let seen = seen.get_or_insert_with(HashMap::new);
    if seen.len() > MAX_SEEN {
        seen.clear();
    }
    for digest in digests {
        seen.insert(seen_key(repository, digest), version.into());
    }
}

/// `versions` newest first, the one this process saw `digest` in (if any)
/// before all.
fn search_order(repository: &Repository, digest: &Digest, versions: Vec<String>) -> Vec<Version> {
    let mut versions: Vec<Version> = versions
        .iter()
        .filter_map(|v| Version::parse(v).ok())
        .collect();
    versions.sort_by(|a, b| b.cmp(a));
    let hint = SEEN
        .lock()
        .ok()
        .and_then(|seen| seen.as_ref()?.get(&seen_key(repository, digest)).cloned())
        .and_then(|v| Version::parse(&v).ok());
    if let Some(hint) = hint
        && let Some(at) = versions.iter().position(|v| *v == hint)
    {
        let hint = versions.remove(at);
        versions.insert(0, hint);
    }
    versions
}
