//! The web UI: server-rendered HTML pages of what the registry holds, in
//! both modes (`tfreg serve`, and the `ui` Lambda function), through the same
//! router and authorisation as the API ([`tfreg_http::app`]): a page of a
//! namespace needs a read token covering it, the home page and search show
//! only what the token covers. A browser presents its token through a
//! session cookie ([`tfreg_http::session`]) opened by the sign-in page.
//!
//! Pages are askama templates (`shared/ui/templates/ui/`), escaped by default;
//! every response carries a strict Content-Security-Policy (no inline
//! script or style, nothing from elsewhere), so even a README that got past
//! the sanitiser could not run anything. JavaScript only adds copy buttons:
//! every page works without it.

pub mod assets;
pub mod cached;
pub mod pages;
mod sign;
pub mod snippets;
pub mod usage;

use askama::Template;
use async_trait::async_trait;
use http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use tfreg_http::body::{Body, Response, redirect};
use tfreg_http::{Call, Error, Handler, Pages, Registry, session};
use tfreg_model::address::{ModuleName, ProviderName};
use tfreg_model::router::{AdminRoute, UiRoute};
use tfreg_model::token::{Principal, Realm};
use tfreg_model::usage::Package as UsagePackage;
use tfreg_model::version::Version;
use tfreg_store::catalog::index::VersionIndex;
use tfreg_store::catalog::listing::{self, Entry, Kind};
use tfreg_store::catalog::{self, Origin};

use assets::Asset;
use pages::{Layout, Marks, Row, VersionLink};

/// The Content-Security-Policy of every UI response: the page's own CSS and
/// script files only; no inline script, no frames, no form posts elsewhere.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// Longest search query used (longer ones are cut).
const MAX_QUERY_CHARS: usize = 200;
/// How many recent changes the home page lists.
const RECENT: usize = 10;

/// Answer a UI route (already authorised for its realm).
async fn handle(
    registry: &Registry,
    route: UiRoute,
    req: Call<'_>,
    body: Body,
) -> Result<Response, Error> {
    let layout = |title: String| Layout {
        title,
        hostname: registry.config.hostname.to_string(),
        css: Asset::Css.file_name(),
        js: Asset::Js.file_name(),
        signed_in: req.signed_in(),
        signed_in_as: signed_in_as(req.signed_in(), req.principal),
        cache_link: cached::may_see(req.principal),
        query: String::new(),
    };
    match route {
        // The pipeline answers the root itself; here for completeness.
        UiRoute::Root => Ok(redirect(&UiRoute::Home.path())),
        UiRoute::Asset(name) => Asset::from_file_name(&name)
            .map(asset_response)
            .ok_or_else(|| Error::not_found(format!("no such file: {name}"))),
        UiRoute::Home => {
            let entries = visible(registry, req.principal).await?;
            let mut by_namespace = std::collections::BTreeMap::<String, usize>::new();
            for e in &entries {
                *by_namespace.entry(e.namespace.clone()).or_default() += 1;
            }
            let namespaces: Vec<(String, usize)> = by_namespace.into_iter().collect();
            let modules = entries.iter().filter(|e| e.kind == Kind::Module).count();
            let mut recent = entries.clone();
            recent.sort_by_key(|e| std::cmp::Reverse(e.updated_at));
            recent.truncate(RECENT);
            page(&pages::Home {
                layout: layout("Home".into()),
                recent: recent.iter().map(Row::of).collect(),
                namespaces,
                modules,
                providers: entries.len() - modules,
            })
        }
        UiRoute::Search => {
            let (q, kind) = search_params(req.query);
            let entries = visible(registry, req.principal).await?;
            let total = entries.len();
            let results: Vec<Row> = entries
                .iter()
                .filter(|e| match kind.as_str() {
                    "module" => e.kind == Kind::Module,
                    "provider" => e.kind == Kind::Provider,
                    _ => true,
                })
                .filter(|e| e.matches(&q))
                .map(Row::of)
                .collect();
            let mut layout = layout(format!("Search {q}"));
            layout.query = q;
            page(&pages::Search {
                layout,
                results,
                kind,
                total,
            })
        }
        UiRoute::Namespace { namespace } => {
            let rows: Vec<Row> = listing::all(registry.items.as_ref())
                .await?
                .iter()
                .filter(|e| e.namespace == namespace)
                .map(Row::of)
                .collect();
            if rows.is_empty() {
                return Err(Error::not_found(format!(
                    "nothing is published in the namespace {namespace}"
                )));
            }
            page(&pages::Namespace {
                layout: layout(namespace.clone()),
                namespace,
                rows,
            })
        }
        UiRoute::Module { module, version } => {
            let layout = layout(module.to_string());
            module_page(registry, req.principal, &module, version, layout).await
        }
        UiRoute::Provider { provider, version } => {
            let layout = layout(provider.to_string());
            provider_page(registry, req.principal, &provider, version, layout).await
        }
        UiRoute::Cache => {
            cached::page(registry, layout("Cached from other registries".into())).await
        }
        UiRoute::SignIn if req.method == Method::POST => {
            sign::sign_in(registry, req.headers, body, layout("Sign in".into())).await
        }
        UiRoute::SignIn => {
            let params = params(req.query);
            let next = sign::safe_next(params.get("next").map(String::as_str));
            page(&pages::SignIn {
                layout: layout("Sign in".into()),
                sso_href: sign::sso_href(registry, &next),
                sso_name: sign::sso_name(registry),
                next,
                error: String::new(),
                signed_out: params.contains_key("signed-out"),
            })
        }
        UiRoute::SignOut => sign::sign_out(registry, &req).await,
    }
}

/// The page's "signed in as": the session's token name and its grants.
fn signed_in_as(signed_in: bool, principal: &Principal) -> String {
    match principal {
        Principal::Token(record) if signed_in => {
            format!("{} · {}", record.name, record.describe_grants())
        }
        _ => String::new(),
    }
}

/// Every listed entry the principal may read.
async fn visible(registry: &Registry, principal: &Principal) -> Result<Vec<Entry>, Error> {
    let entries = listing::all(registry.items.as_ref()).await?;
    Ok(match principal {
        Principal::Token(record) => entries
            .into_iter()
            .filter(|e| record.covers(Realm::Namespace(&e.namespace)))
            .collect(),
        Principal::Anonymous | Principal::Operator => entries,
    })
}

/// The version a page shows: the one asked for, else the highest one not
/// yanked (a release before a prerelease), else the highest.
fn pick_version(index: &VersionIndex, asked: Option<Version>) -> Option<Version> {
    if asked.is_some() {
        return asked;
    }
    let parsed: Vec<(Version, bool)> = index
        .versions()
        .filter_map(|v| Some((Version::parse(v.version).ok()?, v.yanked)))
        .collect();
    let best = |ok: &dyn Fn(&(Version, bool)) -> bool| {
        parsed.iter().filter(|v| ok(v)).map(|v| v.0.clone()).max()
    };
    best(&|v| !v.1 && !v.0.is_prerelease())
        .or_else(|| best(&|v| !v.1))
        .or_else(|| best(&|_| true))
}

/// The version list of a page, newest first.
fn version_links(index: &VersionIndex, base: &str, current: &Version) -> Vec<VersionLink> {
    let mut links: Vec<(Option<Version>, VersionLink)> = index
        .versions()
        .map(|v| {
            (
                Version::parse(v.version).ok(),
                VersionLink {
                    version: v.version.to_string(),
                    href: format!("{base}/{}", v.version),
                    current: v.version == current.to_string(),
                    deprecated: v.deprecated.map(str::to_string),
                    yanked: v.yanked,
                },
            )
        })
        .collect();
    links.sort_by(|a, b| b.0.cmp(&a.0));
    links.into_iter().map(|(_, l)| l).collect()
}

fn marks(lifecycle: &catalog::Lifecycle) -> Marks {
    Marks {
        deprecated: lifecycle.deprecated.as_ref().map(|m| m.message.clone()),
        yanked: lifecycle.yanked.as_ref().map(|m| m.message.clone()),
    }
}

async fn module_page(
    registry: &Registry,
    principal: &Principal,
    module: &ModuleName,
    version: Option<Version>,
    layout: Layout,
) -> Result<Response, Error> {
    let store = registry.items.as_ref();
    let index = catalog::module_index(store, module).await?;
    let missing = || Error::not_found(format!("the module {module} has no such version"));
    let version = pick_version(&index, version).ok_or_else(missing)?;
    let release = catalog::module_release(store, module, &version)
        .await?
        .ok_or_else(missing)?;
    let docs = catalog::module_docs(store, module, &release).await?;
    let address = format!("{}/{module}", registry.config.hostname);
    let required: Vec<(&str, &str)> = docs
        .as_ref()
        .map(|d| {
            d.root
                .inputs
                .iter()
                .filter(|i| i.required)
                .map(|i| (i.name.as_str(), i.r#type.as_deref().unwrap_or("any")))
                .collect()
        })
        .unwrap_or_default();
    let usage = snippets::module_usage(&module.name, &address, &version, &required);
    let oci_source = catalog::module_zip(store, module, &release)
        .await?
        .map(|_| {
            snippets::module_oci_source(
                &module.name,
                registry.config.hostname.as_str(),
                &module.to_string(),
                &version,
            )
        });
    let base = format!("/ui/modules/{module}");
    let consumers = crate::usage::may_see_consumers(
        registry,
        principal,
        AdminRoute::ModuleUsage {
            module: module.clone(),
        },
    );
    let package = UsagePackage::Module {
        hostname: registry.config.hostname.to_string(),
        namespace: module.namespace.clone(),
        name: module.name.clone(),
        system: module.system.clone(),
    };
    let downloads = crate::usage::view(registry, &package, &version.to_string(), consumers).await;
    page(&pages::Module {
        downloads,
        versions: version_links(&index, &base, &version),
        layout,
        address,
        namespace: module.namespace.clone(),
        version: version.to_string(),
        published: pages::date(release.published_at),
        marks: marks(&release.lifecycle),
        usage,
        oci_source,
        docs: docs.map(pages::DocsView::of),
    })
}

async fn provider_page(
    registry: &Registry,
    principal: &Principal,
    provider: &ProviderName,
    version: Option<Version>,
    layout: Layout,
) -> Result<Response, Error> {
    let store = registry.items.as_ref();
    let index = catalog::provider_index(store, &Origin::Registry, provider).await?;
    let missing = || Error::not_found(format!("the provider {provider} has no such version"));
    let version = pick_version(&index, version).ok_or_else(missing)?;
    let release = catalog::provider_release(store, &Origin::Registry, provider, &version)
        .await?
        .ok_or_else(missing)?;
    let source = format!("{}/{provider}", registry.config.hostname);
    let base = format!("/ui/providers/{provider}");
    let mut platforms: Vec<pages::PlatformView> = release
        .packages
        .iter()
        .map(|p| pages::PlatformView {
            os: p.os.clone(),
            arch: p.arch.clone(),
            filename: p.file.filename.clone(),
            size: pages::size(p.file.size),
            hashes: p.hashes(),
        })
        .collect();
    platforms.sort_by(|a, b| (&a.os, &a.arch).cmp(&(&b.os, &b.arch)));
    let consumers = crate::usage::may_see_consumers(
        registry,
        principal,
        AdminRoute::ProviderUsage {
            provider: provider.clone(),
        },
    );
    let package = UsagePackage::Provider {
        hostname: registry.config.hostname.to_string(),
        namespace: provider.namespace.clone(),
        r#type: provider.r#type.clone(),
    };
    let downloads = crate::usage::view(registry, &package, &version.to_string(), consumers).await;
    page(&pages::Provider {
        downloads,
        versions: version_links(&index, &base, &version),
        layout,
        required_providers: snippets::required_providers(&provider.r#type, &source, &version),
        oci_mirror: snippets::oci_mirror(
            registry.config.hostname.as_str(),
            &provider.namespace,
            &provider.r#type,
        ),
        lock_entry: snippets::lock_entry(&source, &release, &version),
        address: source,
        namespace: provider.namespace.clone(),
        version: version.to_string(),
        published: pages::date(release.published_at),
        marks: marks(&release.lifecycle),
        protocols: release.protocols.join(", "),
        key_id: release
            .signing_key
            .as_ref()
            .map(|k| k.key_id.clone())
            .unwrap_or_default(),
        platforms,
    })
}

fn params(query: Option<&str>) -> std::collections::HashMap<String, String> {
    url::form_urlencoded::parse(query.unwrap_or_default().as_bytes())
        .into_owned()
        .collect()
}

/// The search's query (trimmed, at most [`MAX_QUERY_CHARS`]) and kind filter.
fn search_params(query: Option<&str>) -> (String, String) {
    let params = params(query);
    let q: String = params
        .get("q")
        .map(|q| q.trim().chars().take(MAX_QUERY_CHARS).collect())
        .unwrap_or_default();
    let kind = match params.get("kind").map(String::as_str) {
        Some(k @ ("module" | "provider")) => k.to_string(),
        _ => String::new(),
    };
    (q, kind)
}

/// A rendered page, `no-store` (it shows what a token may read).
pub(crate) fn page<T: Template>(template: &T) -> Result<Response, Error> {
    let html = template
        .render()
        .map_err(|e| Error::internal(format!("rendering a page: {e}")))?;
    let mut resp = http::Response::new(Body::from(html));
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(resp)
}

fn asset_response(asset: Asset) -> Response {
    let mut resp = http::Response::new(Body::from(asset.body()));
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(asset.content_type()),
    );
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=31536000, immutable"),
    );
    resp
}

/// The security headers of every UI response, error pages included.
pub fn secure(headers: &mut HeaderMap) {
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        "cross-origin-opener-policy",
        HeaderValue::from_static("same-origin"),
    );
    headers.insert(
        "permissions-policy",
        HeaderValue::from_static("camera=(), microphone=(), geolocation=(), interest-cohort=()"),
    );
}

/// A UI request's error as a page: a GET without a (valid) session goes to
/// the sign-in page and comes back after it; anything else is an HTML page
/// with the status and the same message the API would give.
pub fn error_page(
    err: &Error,
    request_id: &str,
    call: &Call<'_>,
    path: &str,
    hostname: &str,
) -> Response {
    let (method, signed_in) = (call.method, call.signed_in());
    if matches!(err, Error::Unauthorized(_)) && (method == Method::GET || method == Method::HEAD) {
        let back = match call.query {
            Some(q) => format!("{path}?{q}"),
            None => path.to_string(),
        };
        let next: String =
            url::form_urlencoded::byte_serialize(sign::safe_next(Some(&back)).as_bytes()).collect();
        let mut resp = redirect(&format!("{}?next={next}", UiRoute::SignIn.path()));
        if signed_in {
            // A session whose token no longer works: forget it.
            if let Ok(v) = HeaderValue::from_str(&session::clear_cookie()) {
                resp.headers_mut().insert(header::SET_COOKIE, v);
            }
        }
        return resp;
    }
    let status = err.status();
    let heading = match status {
        StatusCode::NOT_FOUND => "Not found".to_string(),
        StatusCode::FORBIDDEN => "Not allowed".to_string(),
        StatusCode::UNAUTHORIZED => "Sign in needed".to_string(),
        StatusCode::SERVICE_UNAVAILABLE => "Try again shortly".to_string(),
        s if s.is_client_error() => "That request cannot be answered".to_string(),
        _ => "Something went wrong".to_string(),
    };
    let template = pages::ErrorPage {
        layout: Layout {
            title: heading.clone(),
            hostname: hostname.to_string(),
            css: Asset::Css.file_name(),
            js: Asset::Js.file_name(),
            signed_in,
            signed_in_as: signed_in_as(signed_in, call.principal),
            cache_link: cached::may_see(call.principal),
            query: String::new(),
        },
        status: status.as_u16(),
        heading,
        message: err.public_message(request_id),
    };
    let mut resp = match page(&template) {
        Ok(resp) => resp,
        Err(_) => http::Response::new(Body::from(err.public_message(request_id))),
    };
    *resp.status_mut() = status;
    tfreg_http::body::error_headers(err, resp.headers_mut());
    resp
}

/// The web UI's pages.
pub struct Ui;

#[async_trait]
impl Handler<UiRoute> for Ui {
    async fn handle(
        &self,
        registry: &Registry,
        route: UiRoute,
        call: Call<'_>,
        body: Body,
    ) -> Result<Response, Error> {
        handle(registry, route, call, body).await
    }
}

impl Pages for Ui {
    fn error_page(
        &self,
        registry: &Registry,
        err: &Error,
        request_id: &str,
        call: &Call<'_>,
        path: &str,
    ) -> Response {
        error_page(
            err,
            request_id,
            call,
            path,
            registry.config.hostname.as_str(),
        )
    }

    fn secure(&self, headers: &mut HeaderMap) {
        secure(headers);
    }
}
