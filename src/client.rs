//! The publish API client used by `tfreg publish` and `tfreg mirror import`:
//! begin → upload each file (streamed, with a progress bar) → complete.

use std::path::{Path, PathBuf};

use futures_util::TryStreamExt;
use indicatif::{ProgressBar, ProgressStyle};
use sha2::{Digest, Sha256};
use tfreg_model::protocol::{
    BeginStatus, ErrorBody, FileDecl, PublishBegin, PublishRequest, PublishResult, PublishStatus,
    UploadTarget,
};
use tfreg_model::router::{PublishRoute, PublishStep, PublishTarget};

use crate::cli_error::Result;
use crate::net_error::NetError;

/// A file on disk to upload under `name`.
pub struct LocalFile {
    pub name: String,
    pub path: PathBuf,
    pub size: u64,
    pub sha256: String,
}

impl LocalFile {
    /// Hash a file (streaming) to declare it.
    pub fn hash(name: String, path: &Path) -> Result<Self> {
        let mut f =
            std::fs::File::open(path).map_err(|e| format!("opening {}: {e}", path.display()))?;
        let mut h = Sha256::new();
        let size = std::io::copy(&mut f, &mut h)
            .map_err(|e| format!("reading {}: {e}", path.display()))?;
        Ok(Self {
            name,
            path: path.to_path_buf(),
            size,
            sha256: hex::encode(h.finalize()),
        })
    }

    fn decl(&self) -> FileDecl {
        FileDecl {
            name: self.name.clone(),
            size: self.size,
            sha256: self.sha256.clone(),
        }
    }
}

/// Talks to one registry's publish API.
pub struct PublishClient {
    http: reqwest::Client,
    base: url::Url,
    token: String,
}

impl PublishClient {
    /// `registry` is the registry's base URL (`https://registry.example.com`);
    /// `ca_cert` a certificate to trust besides the system's (see [`crate::trust`]).
    pub fn new(registry: &str, token: Option<String>, ca_cert: Option<&Path>) -> Result<Self> {
        let token = match token.filter(|t| !t.is_empty()) {
            Some(token) => token,
            None => crate::credentials::comparison_host(registry)
                .map(|host| crate::credentials::lookup(&host))
                .transpose()?
                .flatten()
                .ok_or(
                    "no token: pass --token, set TFREG_TOKEN or TF_TOKEN_<host>, or sign in with `tfreg login HOST` (or `terraform login HOST`); an admin makes one with `tfreg token create`",
                )?,
        };
        let mut base = url::Url::parse(registry)
            .map_err(|e| format!("invalid --registry URL {registry:?}: {e}"))?;
        if base.scheme() != "https" && base.scheme() != "http" {
            return Err(format!("invalid --registry URL {registry:?}: use https://HOST").into());
        }
        if !base.path().ends_with('/') {
            base.set_path(&format!("{}/", base.path()));
        }
        let http = reqwest::Client::builder()
            .user_agent(concat!("tfreg/", env!("CARGO_PKG_VERSION")))
            .use_preconfigured_tls(crate::trust::client_config(ca_cert)?)
            .connect_timeout(std::time::Duration::from_secs(30))
            .build()
            .map_err(|e| format!("building HTTP client: {e}"))?;
        Ok(Self { http, base, token })
    }

    async fn check(resp: reqwest::Response, what: &str) -> Result<reqwest::Response> {
        let status = resp.status();
        if status.is_success() {
            return Ok(resp);
        }
        let text = resp.text().await.unwrap_or_default();
        let detail = serde_json::from_str::<ErrorBody>(&text)
            .map(|b| b.errors.join("; "))
            .unwrap_or(text);
        Err(format!("{what}: the registry answered {status}: {detail}").into())
    }

    /// One request to `path` (a route's path) with an optional JSON body:
    /// the answer's status and body, whatever the status.
    pub async fn call(
        &self,
        method: http::Method,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> Result<(http::StatusCode, bytes::Bytes)> {
        let url = self
            .base
            .join(path.trim_start_matches('/'))
            .map_err(|e| e.to_string())?;
        let mut req = self
            .http
            .request(method, url.clone())
            .bearer_auth(&self.token);
        if let Some(body) = body {
            req = req
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(body);
        }
        let resp = req
            .send()
            .await
            .map_err(|e| NetError::new(format!("cannot reach {url}"), e))?;
        let status = resp.status();
        let body = resp
            .bytes()
            .await
            .map_err(|e| NetError::new(format!("reading the answer from {url}"), e))?;
        Ok((status, body))
    }

    /// HEAD an absolute URL the registry handed out (a signed archive URL:
    /// no token sent), redirects followed: the final status.
    pub async fn head(&self, url: &str) -> Result<http::StatusCode> {
        let resp = self
            .http
            .head(url)
            .send()
            .await
            .map_err(|e| NetError::new(format!("cannot reach {url}"), e))?;
        Ok(resp.status())
    }

    async fn post(&self, route: &PublishRoute, body: &PublishRequest) -> Result<reqwest::Response> {
        let path = route.path();
        // The registry's base URL may have a path of its own: join relative to it.
        let url = self
            .base
            .join(path.trim_start_matches('/'))
            .map_err(|e| e.to_string())?;
        let resp = self
            .http
            .post(url.clone())
            .bearer_auth(&self.token)
            .json(body)
            .send()
            .await
            .map_err(|e| NetError::new(format!("cannot reach {url}"), e))?;
        Self::check(resp, &path).await
    }

    async fn upload(
        &self,
        target: &UploadTarget,
        file: &LocalFile,
        bar: &ProgressBar,
    ) -> Result<()> {
        let f = tokio::fs::File::open(&file.path)
            .await
            .map_err(|e| format!("opening {}: {e}", file.path.display()))?;
        let bar = bar.clone();
        let stream = tokio_util::io::ReaderStream::new(f)
            .inspect_ok(move |chunk| bar.inc(chunk.len() as u64));
        let mut put = self
            .http
            .put(&target.url)
            .header(reqwest::header::CONTENT_LENGTH, file.size);
        // A presigned URL signs these (checksum, create-only, and the length,
        // which is already set): send them as given.
        for (name, value) in &target.headers {
            if !name.eq_ignore_ascii_case("content-length") {
                put = put.header(name, value);
            }
        }
        let resp = put
            .body(reqwest::Body::wrap_stream(stream))
            .send()
            .await
            .map_err(|e| NetError::new(format!("uploading {}", file.name), e))?;
        Self::check(resp, &format!("uploading {}", file.name)).await?;
        Ok(())
    }

    /// Publish `files` as `target`: begin, upload each file, complete.
    pub async fn publish(
        &self,
        target: &PublishTarget,
        files: &[LocalFile],
        mut request: PublishRequest,
    ) -> Result<PublishResult> {
        let step = |step| PublishRoute {
            target: target.clone(),
            step,
        };
        request.files = files.iter().map(LocalFile::decl).collect();
        let begin: PublishBegin = self
            .post(&step(PublishStep::Begin), &request)
            .await?
            .json()
            .await
            .map_err(|e| NetError::new("unexpected answer from the registry", e))?;
        if begin.status == BeginStatus::Unchanged {
            return Ok(PublishResult {
                status: PublishStatus::Unchanged,
                address: target.to_string(),
                version: target.version().to_string(),
                warnings: vec![],
            });
        }
        let total: u64 = files.iter().map(|f| f.size).sum();
        let bar = ProgressBar::new(total).with_style(
            ProgressStyle::with_template(
                "{msg:40!} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
        );
        for target in &begin.uploads {
            let file = files
                .iter()
                .find(|f| f.name == target.name)
                .ok_or_else(|| format!("the registry asked for an unknown file {}", target.name))?;
            bar.set_message(file.name.clone());
            self.upload(target, file, &bar).await?;
        }
        bar.finish_and_clear();
        request.upload_id = begin.upload_id;
        self.post(&step(PublishStep::Complete), &request)
            .await?
            .json()
            .await
            .map_err(|e| NetError::new("unexpected answer from the registry", e).into())
    }
}
