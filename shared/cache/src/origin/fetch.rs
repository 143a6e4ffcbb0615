//! One GET to an origin, as every operation makes it: the URL and every
//! redirect hop checked by the policy before sending (an IP literal is
//! connected to without a lookup), each hop resolved afresh through the
//! guarded resolver, credentials only on the first hop of an API request to
//! the upstream's own host, and bodies read under a cap.

use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use sha2::{Digest, Sha256};
use tfreg_model::upstream::UpstreamHost;
use tfreg_outbound::{GuardedResolver, Lookup, Pinned, Policy, ResolverStats, Roots};
use tokio::io::AsyncWriteExt;
use tokio::time::Instant;

use super::error::OriginError;
use super::settings::{Bearer, Caps, OriginSettings};

/// A small file of a release, fetched whole without credentials.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SmallFile {
    /// `SHA256SUMS` (cap: 1 MiB).
    Shasums,
    /// `SHA256SUMS.sig` (cap: 64 KiB).
    Signature,
}

impl From<SmallFile> for Kind {
    fn from(file: SmallFile) -> Kind {
        match file {
            SmallFile::Shasums => Kind::Shasums,
            SmallFile::Signature => Kind::Signature,
        }
    }
}

/// What is being fetched: decides the redirect limit, the cap and whether
/// credentials may go with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Discovery,
    Versions,
    DownloadAnswer,
    ModuleAnswer,
    Shasums,
    Signature,
    Archive,
    /// A git server's advertisement or `ls-refs` answer.
    GitRefs,
    /// A git fetch answer.
    GitPack,
}

impl Kind {
    /// terraform-svchost allows 3 redirects for discovery; Go's client 10
    /// for the rest, of which we follow 5.
    fn max_redirects(self) -> usize {
        match self {
            Kind::Discovery => 3,
            _ => 5,
        }
    }

    /// Terraform sends the host's credentials on discovery and registry
    /// API calls only; `getFile` (SHA256SUMS, signature) and archive
    /// downloads carry none.
    pub fn with_credentials(self) -> bool {
        matches!(
            self,
            Kind::Discovery | Kind::Versions | Kind::DownloadAnswer | Kind::ModuleAnswer
        )
    }

    pub fn cap(self, caps: &Caps) -> u64 {
        match self {
            Kind::Discovery => caps.discovery,
            Kind::Versions => caps.versions,
            Kind::DownloadAnswer | Kind::ModuleAnswer => caps.answer,
            Kind::Shasums => caps.shasums,
            Kind::Signature => caps.signature,
            Kind::Archive => caps.archive,
            Kind::GitRefs => caps.git_refs,
            Kind::GitPack => caps.git_pack,
        }
    }
}

/// Why no client could be made.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error(transparent)]
    Tls(#[from] tfreg_outbound::TlsError),
    #[error("cannot make an HTTP client: {0}")]
    Client(String),
}

/// Our `User-Agent` at every origin.
pub const USER_AGENT: &str = concat!("tfreg/", env!("CARGO_PKG_VERSION"), " (pull-through cache)");

/// The HTTP client of one upstream.
pub(crate) struct Fetcher {
    http: reqwest::Client,
    policy: Policy,
    resolver: GuardedResolver,
    hostname: UpstreamHost,
    credentials: Option<Bearer>,
}

/// What a request carries besides its URL: a POST's body and its media
/// type, and headers of the protocol's own (never credentials).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Outgoing<'a> {
    pub post: Option<(&'static str, &'a [u8])>,
    pub headers: &'a [(&'static str, &'static str)],
}

/// The answer to the last hop, and that hop's URL (relative URLs in the
/// answer resolve against it).
pub(crate) struct Answer {
    pub url: url::Url,
    pub response: reqwest::Response,
}

impl Fetcher {
    pub fn new(settings: &OriginSettings, lookup: Arc<dyn Lookup>) -> Result<Self, SetupError> {
        let policy = settings.policy();
        let connect = settings.connect.clone().unwrap_or_default();
        let lookup: Arc<dyn Lookup> = Arc::new(Pinned::new(connect.to, lookup));
        let resolver = GuardedResolver::new(policy.clone(), lookup);
        let roots = if settings.system_roots {
            Roots::System
        } else {
            Roots::ExtraOnly
        };
        let mut tls = tfreg_outbound::tls::client_config(roots, connect.ca_pem.as_deref())?;
        tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let http = reqwest::Client::builder()
            .use_preconfigured_tls(tls)
            // A proxy would resolve names for us, out of the guard's sight.
            .no_proxy()
            // Followed by hand, each hop checked (`get`).
            .redirect(reqwest::redirect::Policy::none())
            .https_only(true)
            .referer(false)
            .connect_timeout(settings.timeouts.connect)
            .read_timeout(settings.timeouts.read)
            .user_agent(USER_AGENT)
            .dns_resolver(Arc::new(resolver.clone()))
            .build()
            .map_err(|e| SetupError::Client(e.to_string()))?;
        Ok(Self {
            http,
            policy,
            resolver,
            hostname: settings.hostname.clone(),
            credentials: settings.credentials.clone(),
        })
    }

    pub fn stats(&self) -> ResolverStats {
        self.resolver.stats()
    }

    /// Is `url` on the upstream's own host and port?
    fn is_own_host(&self, url: &url::Url) -> bool {
        let host = url.host_str().unwrap_or_default();
        match url.port() {
            Some(port) => format!("{host}:{port}") == self.hostname.as_str(),
            None => host == self.hostname.as_str(),
        }
    }

    /// GET `url` for `kind`, following redirects by hand. Any status is
    /// returned; the caller decides what it means.
    pub async fn get(&self, url: url::Url, kind: Kind) -> Result<Answer, OriginError> {
        self.send(url, kind, Outgoing::default()).await
    }

    /// GET, or POST when `out` has a body, `url` for `kind`, following
    /// redirects by hand: every hop checked and resolved afresh. A POST
    /// follows 307 and 308 with its body; a 301, 302 or 303 to a POST (a
    /// GET elsewhere) is refused.
    pub async fn send(
        &self,
        url: url::Url,
        kind: Kind,
        out: Outgoing<'_>,
    ) -> Result<Answer, OriginError> {
        let mut url = url;
        let mut redirects = 0;
        loop {
            self.policy
                .check_url(&url)
                .map_err(|why| OriginError::refused(&url, why))?;
            // Built from scratch every hop: nothing of a caller's request,
            // and credentials on the first hop only.
            let mut request = match out.post {
                Some((media_type, body)) => self
                    .http
                    .post(url.clone())
                    .header(http::header::CONTENT_TYPE, media_type)
                    .body(body.to_vec()),
                None => self.http.get(url.clone()),
            };
            for (name, value) in out.headers {
                request = request.header(*name, *value);
            }
            if kind.with_credentials() {
                request = request.header(http::header::ACCEPT, "application/json");
                if redirects == 0
                    && self.is_own_host(&url)
                    && let Some(token) = &self.credentials
                {
                    request = request.bearer_auth(token.expose());
                }
            }
            let response = request
                .send()
                .await
                .map_err(|e| OriginError::from_reqwest(&url, &e))?;
            let Some(location) = redirect_location(&response) else {
                return Ok(Answer { url, response });
            };
            if out.post.is_some() && !matches!(response.status().as_u16(), 307 | 308) {
                return Err(OriginError::protocol(
                    &url,
                    format!("a POST answered {}", response.status()),
                ));
            }
            redirects += 1;
            if redirects > kind.max_redirects() {
                return Err(OriginError::protocol(
                    &url,
                    format!("more than {} redirects", kind.max_redirects()),
                ));
            }
            url = location
                .and_then(|l| url.join(&l).map_err(|e| e.to_string()))
                .map_err(|why| OriginError::protocol(&url, format!("a bad redirect: {why}")))?;
        }
    }
}

/// A redirect's target as written (`Err` when it cannot be read), or `None`
/// when the answer is no redirect to follow.
fn redirect_location(response: &reqwest::Response) -> Option<Result<String, String>> {
    if !matches!(response.status().as_u16(), 301 | 302 | 303 | 307 | 308) {
        return None;
    }
    let location = response.headers().get(http::header::LOCATION)?;
    Some(
        location
            .to_str()
            .map(str::to_string)
            .map_err(|_| "its Location is not text".to_string()),
    )
}

type ChunkStream = Pin<Box<dyn Stream<Item = reqwest::Result<Bytes>> + Send>>;

/// A body read under a cap: a `Content-Length` over it is refused before
/// any byte is read, and a longer stream is cut where it passes it.
pub(crate) struct Capped {
    chunks: ChunkStream,
    url: url::Url,
    cap: u64,
    seen: u64,
}

impl Capped {
    pub fn new(answer: Answer, cap: u64) -> Result<Self, OriginError> {
        if answer
            .response
            .content_length()
            .is_some_and(|len| len > cap)
        {
            return Err(OriginError::too_large(&answer.url, cap));
        }
        Ok(Self {
            chunks: Box::pin(answer.response.bytes_stream()),
            url: answer.url,
            cap,
            seen: 0,
        })
    }

    pub async fn next(&mut self) -> Result<Option<Bytes>, OriginError> {
        let Some(chunk) = self.chunks.next().await else {
            return Ok(None);
        };
        let chunk = chunk.map_err(|e| OriginError::from_reqwest(&self.url, &e))?;
        self.seen += chunk.len() as u64;
        if self.seen > self.cap {
            return Err(OriginError::too_large(&self.url, self.cap));
        }
        Ok(Some(chunk))
    }

    /// The whole body, for small documents.
    pub async fn read_all(mut self) -> Result<Vec<u8>, OriginError> {
        let mut body = Vec::new();
        while let Some(chunk) = self.next().await? {
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }
}

/// An archive written to a file: its sha256 and length, computed on the way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fetched {
    pub sha256: [u8; 32],
    pub len: u64,
}

/// A file being written, removed unless finished: on an error, and when the
/// fetch is dropped (its deadline passed).
struct PartialFile {
    path: PathBuf,
    file: tokio::fs::File,
    done: bool,
}

impl Drop for PartialFile {
    fn drop(&mut self) {
        if !self.done {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Stream `body` into a new file at `path` (never an existing one).
pub(crate) async fn write_file(mut body: Capped, path: &Path) -> Result<Fetched, OriginError> {
    let local = |source| OriginError::Local {
        path: path.display().to_string(),
        source,
    };
    let file = tokio::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .await
        .map_err(local)?;
    let mut partial = PartialFile {
        path: path.to_path_buf(),
        file,
        done: false,
    };
    let mut hasher = Sha256::new();
    let mut len = 0u64;
    while let Some(chunk) = body.next().await? {
        hasher.update(&chunk);
        len += chunk.len() as u64;
        partial.file.write_all(&chunk).await.map_err(local)?;
    }
    partial.file.flush().await.map_err(local)?;
    partial.file.sync_all().await.map_err(local)?;
    partial.done = true;
    Ok(Fetched {
        sha256: hasher.finalize().into(),
        len,
    })
}

/// `fut` under `deadline`: past it, a transient failure (the fill goes on
/// being asked for; a client meanwhile gets its 503).
pub(crate) async fn within<T, E: From<OriginError>>(
    deadline: Instant,
    url: &url::Url,
    fut: impl Future<Output = Result<T, E>>,
) -> Result<T, E> {
    match tokio::time::timeout_at(deadline, fut).await {
        Ok(result) => result,
        Err(_) => Err(OriginError::transient(url, "no complete answer before the deadline").into()),
    }
}
