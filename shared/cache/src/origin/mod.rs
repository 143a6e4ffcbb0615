//! The client of one origin registry (tests/cache/plan.md §2): discovery,
//! a provider's versions and download answers, SHA256SUMS and its
//! signature, archives streamed to a file, and module download locations.
//! Every call runs under its caller's deadline; every URL and redirect hop
//! is checked, and every name resolved, by `tfreg-outbound`'s policy.
//!
//! - [`settings`]: what the client is told about the upstream.
//! - [`fetch`] (I/O): one GET with redirects followed by hand, bodies
//!   under caps, a file written and hashed.
//! - [`answers`] (pure): the origin's JSON read as Terraform reads it.
//! - [`getter`] (pure): a module source as go-getter reads it.
//! - [`git`] (I/O): a commit resolved and its tree fetched from a git server.
//! - [`error`]: the classes the fill engine maps to answers.

pub mod answers;
pub mod error;
pub mod fetch;
pub mod getter;
pub mod git;
pub mod settings;

use std::path::Path;
use std::sync::Arc;

use tfreg_model::address::{ModuleName, Platform, ProviderName};
use tfreg_model::version::Version;
use tfreg_outbound::{Lookup, ResolverStats, SystemLookup};
use tokio::time::Instant;

pub use answers::{
    DownloadAnswer, ModuleLocation, OriginKey, OriginVersion, ProviderVersions, Services,
};
pub use error::OriginError;
pub use fetch::{Fetched, SetupError, SmallFile, USER_AGENT};
pub use getter::{ArchiveFormat, ModuleSource};
pub use settings::{Bearer, Caps, Connect, OriginSettings, Timeouts};

use fetch::{Capped, Fetcher, Kind, within};

/// The client of one upstream; keeps its connections (share it behind an `Arc`).
pub struct OriginClient {
    fetcher: Fetcher,
    settings: OriginSettings,
}

impl OriginClient {
    /// A client resolving names with the system's resolver.
    pub fn new(settings: OriginSettings) -> Result<Self, SetupError> {
        Self::with_lookup(settings, Arc::new(SystemLookup))
    }

    /// A client resolving names through `lookup` (tests script it). Names
    /// in `connect.to` never reach it.
    pub fn with_lookup(
        settings: OriginSettings,
        lookup: Arc<dyn Lookup>,
    ) -> Result<Self, SetupError> {
        Ok(Self {
            fetcher: Fetcher::new(&settings, lookup)?,
            settings,
        })
    }

    pub fn settings(&self) -> &OriginSettings {
        &self.settings
    }

    /// Lookups made and addresses withheld since the client was made.
    pub fn stats(&self) -> ResolverStats {
        self.fetcher.stats()
    }

    /// `GET https://<host>/.well-known/terraform.json`, with credentials.
    /// 404 is a host with no services.
    pub async fn discover(&self, deadline: Instant) -> Result<Services, OriginError> {
        let url = url::Url::parse(&format!(
            "https://{}/.well-known/terraform.json",
            self.settings.hostname
        ))
        .map_err(|e| OriginError::Protocol {
            url: self.settings.hostname.to_string(),
            reason: e.to_string(),
        })?;
        let doc = self
            .document(url, Kind::Discovery, &[200, 404], deadline)
            .await?;
        if doc.status == 404 {
            return Ok(Services {
                discovery_url: doc.at,
                providers_v1: None,
                modules_v1: None,
            });
        }
        let content_type = doc.header(http::header::CONTENT_TYPE.as_str());
        answers::discovery(&doc.at, content_type, &doc.body).map_err(|why| doc.protocol(why))
    }

    /// `GET <providers.v1><ns>/<type>/versions`, with credentials.
    pub async fn provider_versions(
        &self,
        services: &Services,
        provider: &ProviderName,
        deadline: Instant,
    ) -> Result<ProviderVersions, OriginError> {
        let path = format!("{}/{}/versions", provider.namespace, provider.r#type);
        let url = service_url(services, Service::Providers, &path)?;
        let doc = self.document(url, Kind::Versions, &[200], deadline).await?;
        answers::provider_versions(&doc.body).map_err(|why| doc.protocol(why))
    }

    /// `GET <modules.v1><ns>/<name>/<system>/versions`, with credentials:
    /// the versions it can name.
    pub async fn module_versions(
        &self,
        services: &Services,
        module: &ModuleName,
        deadline: Instant,
    ) -> Result<Vec<Version>, OriginError> {
        let path = format!(
            "{}/{}/{}/versions",
            module.namespace, module.name, module.system
        );
        let url = service_url(services, Service::Modules, &path)?;
        let doc = self.document(url, Kind::Versions, &[200], deadline).await?;
        answers::module_versions(&doc.body)
            .map(|(versions, _)| versions)
            .map_err(|why| doc.protocol(why))
    }

    /// `GET …/<v>/download/<os>/<arch>`, with credentials, checked as
    /// Terraform checks it. Its URLs expire at some origins: reuse them only
    /// shortly after the answer.
    pub async fn provider_download(
        &self,
        services: &Services,
        provider: &ProviderName,
        version: &Version,
        platform: &Platform,
        deadline: Instant,
    ) -> Result<DownloadAnswer, OriginError> {
        let path = format!(
            "{}/{}/{version}/download/{}/{}",
            provider.namespace, provider.r#type, platform.os, platform.arch
        );
        let url = service_url(services, Service::Providers, &path)?;
        let doc = self
            .document(url, Kind::DownloadAnswer, &[200], deadline)
            .await?;
        answers::download_answer(&doc.at, platform, &doc.body).map_err(|why| doc.protocol(why))
    }

    /// SHA256SUMS or its signature, without credentials, whole.
    pub async fn fetch_small(
        &self,
        url: &url::Url,
        file: SmallFile,
        deadline: Instant,
    ) -> Result<Vec<u8>, OriginError> {
        let doc = self.document(url.clone(), file.into(), &[200], deadline);
        Ok(doc.await?.body)
    }

    /// An archive (provider zip or module archive), without credentials,
    /// streamed into a new file at `dest` with its sha256 computed on the
    /// way, under `cap` bytes (at most the settings' archive cap) and the
    /// deadline. On any failure, and if the call is dropped, the partial
    /// file is removed.
    pub async fn fetch_archive(
        &self,
        url: &url::Url,
        dest: &Path,
        cap: u64,
        deadline: Instant,
    ) -> Result<Fetched, OriginError> {
        let cap = cap.min(self.settings.caps.archive);
        within(deadline, url, async {
            let answer = self.fetcher.get(url.clone(), Kind::Archive).await?;
            let body = ok_body(answer, Kind::Archive, &[200], cap)?;
            fetch::write_file(body, dest).await
        })
        .await
    }

    /// `GET <modules.v1><ns>/<name>/<system>/<v>/download`, with
    /// credentials: where the version's source is. Parse it with
    /// [`getter::parse`] and the upstream's module hosts.
    pub async fn module_location(
        &self,
        services: &Services,
        module: &ModuleName,
        version: &Version,
        deadline: Instant,
    ) -> Result<ModuleLocation, OriginError> {
        let path = format!(
            "{}/{}/{}/{version}/download",
            module.namespace, module.name, module.system
        );
        let url = service_url(services, Service::Modules, &path)?;
        let doc = self
            .document(url.clone(), Kind::ModuleAnswer, &[200, 204], deadline)
            .await?;
        let header = match doc.response_headers.get("x-terraform-get") {
            None => None,
            Some(v) => Some(
                v.to_str()
                    .map_err(|_| doc.protocol("X-Terraform-Get is not text"))?,
            ),
        };
        // Relative locations resolve against the URL asked, as both CLIs do.
        answers::module_location(&url, header, &doc.body).map_err(|why| doc.protocol(why))
    }

    /// GET `url` for `kind` under `deadline`: the whole body of an answer
    /// whose status is one of `ok`, under `kind`'s cap.
    async fn document(
        &self,
        url: url::Url,
        kind: Kind,
        ok: &[u16],
        deadline: Instant,
    ) -> Result<Document, OriginError> {
        let asked = url.clone();
        within(deadline, &asked, async {
            let answer = self.fetcher.get(url, kind).await?;
            let (at, status) = (answer.url.clone(), answer.response.status().as_u16());
            let response_headers = answer.response.headers().clone();
            let body = ok_body(answer, kind, ok, kind.cap(&self.settings.caps))?;
            Ok(Document {
                at,
                status,
                response_headers,
                body: body.read_all().await?,
            })
        })
        .await
    }
}

/// A small answer, read whole.
struct Document {
    /// The last hop's URL: relative URLs in the answer resolve against it.
    at: url::Url,
    status: u16,
    response_headers: http::HeaderMap,
    body: Vec<u8>,
}

impl Document {
    fn header(&self, name: &str) -> Option<&str> {
        self.response_headers
            .get(name)
            .and_then(|v| v.to_str().ok())
    }

    fn protocol(&self, why: impl Into<String>) -> OriginError {
        OriginError::protocol(&self.at, why)
    }
}

/// The body of `answer` if its status is one of `ok`, under `cap`.
fn ok_body(answer: fetch::Answer, kind: Kind, ok: &[u16], cap: u64) -> Result<Capped, OriginError> {
    let status = answer.response.status();
    if !ok.contains(&status.as_u16()) {
        // A 401/403 to an API request: our credentials (or their absence)
        // refused. To a file: a signed URL expired, say.
        return Err(OriginError::from_status(
            &answer.url,
            status,
            answer.response.headers(),
            kind.with_credentials(),
        ));
    }
    Capped::new(answer, cap)
}

#[derive(Debug, Clone, Copy)]
enum Service {
    Providers,
    Modules,
}

/// `path` (validated names, so no `..` or `/` of their own) resolved
/// against the service's URL, as Terraform's `ResolveReference` does: a
/// service URL without a trailing slash loses its last segment.
fn service_url(services: &Services, service: Service, path: &str) -> Result<url::Url, OriginError> {
    let (base, id) = match service {
        Service::Providers => (&services.providers_v1, "providers.v1"),
        Service::Modules => (&services.modules_v1, "modules.v1"),
    };
    let base = base.as_ref().ok_or_else(|| {
        OriginError::protocol(
            &services.discovery_url,
            format!("the origin offers no {id}"),
        )
    })?;
    base.join(path)
        .map_err(|e| OriginError::protocol(base, format!("{id} + {path}: {e}")))
}
