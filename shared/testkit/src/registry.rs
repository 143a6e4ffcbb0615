//! [`TestRegistry`]: the registry in-process, over a real store.

use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderMap, Method, StatusCode};

use tfreg_http::registry::{Config, Registry};
use tfreg_http::{App, Served};
use tfreg_model::address::Hostname;
use tfreg_model::protocol::{PublishBegin, PublishRequest};
use tfreg_model::router::{PublishRoute, PublishStep, PublishTarget};
use tfreg_model::token::{NewToken, Principal, Scope};
use tfreg_store::aws::{Roots, dynamodb_client, s3_client, sdk_config};
use tfreg_store::dynamodb::DynamoStore;
use tfreg_store::s3::S3BlobStore;
use tfreg_store::{BlobStore, ItemStore};

use crate::counting::CountingStore;

/// Every handler group: what `tfreg serve` serves.
pub fn every_group() -> Served {
    Served::new()
        .read(tfreg_read::Read)
        .blob(tfreg_read::Blob)
        .publish(tfreg_publish::Publish)
        .admin(tfreg_admin::Admin)
        .ui(tfreg_ui::Ui)
}

/// Where the AWS SDK clients send their requests: `None` is the standard
/// resolution (`AWS_ENDPOINT_URL_DYNAMODB`, `AWS_ENDPOINT_URL_S3`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Endpoints {
    pub dynamodb: Option<String>,
    pub s3: Option<String>,
}

/// A DynamoDB and an S3 client at `endpoints` (path-style S3 addressing, as
/// emulators need), region and credentials from the environment.
pub async fn aws_clients(endpoints: &Endpoints) -> (aws_sdk_dynamodb::Client, aws_sdk_s3::Client) {
    let sdk = sdk_config(Roots::System).await.expect("AWS_REGION is set");
    (
        dynamodb_client(&sdk, endpoints.dynamodb.as_deref()),
        s3_client(&sdk, endpoints.s3.as_deref(), true),
    )
}

/// The hostname and base URL of every test registry.
pub const HOST: &str = "registry.test";
pub const PUBLIC_URL: &str = "https://registry.test";

/// An answer, whole.
#[derive(Debug, Clone)]
pub struct TestResponse {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl TestResponse {
    /// The body as JSON (panics with the body when it is not).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&self.body)))
    }

    /// The one message of an error body; panics unless the body is `{"errors": [msg]}`
    /// served as JSON.
    pub fn error(&self) -> String {
        assert_eq!(
            self.headers
                .get(http::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok()),
            Some("application/json"),
            "error bodies are JSON"
        );
        let body = self.json();
        let errors = body["errors"].as_array().expect("an errors array");
        assert_eq!(errors.len(), 1, "{body}");
        errors[0].as_str().expect("a message").to_string()
    }

    /// Fail unless the status is `status`, showing `context` and the body.
    pub fn expect(&self, status: StatusCode, context: &str) -> &Self {
        assert_eq!(self.status, status, "{context}: {}", self.text());
        self
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// A registry with its stores, answering in-process.
pub struct TestRegistry {
    /// `embedded` or `aws`, for messages.
    pub name: &'static str,
    pub registry: Arc<Registry>,
    /// Shared with [`TestRegistry::reconfigure`]'s views: the stores live
    /// in it until the last of them is dropped.
    dir: Arc<tempfile::TempDir>,
    /// Where an `aws` registry's stores are (for [`TestRegistry::fresh_items`]).
    endpoints: Endpoints,
    /// An `aws` registry's table and bucket (one name).
    stack: Option<String>,
}

/// The configuration every test registry starts with.
pub fn test_config() -> Config {
    let mut config = Config::new(Hostname::parse(HOST).expect("valid hostname"));
    config.public_url = PUBLIC_URL.into();
    // Most tests read without a token; the access tests close it.
    config.anonymous_reads = true;
    config
}

impl TestRegistry {
    /// SQLite and a blob directory in a fresh temp dir.
    pub async fn embedded() -> TestRegistry {
        let dir = tempfile::tempdir().expect("temp dir");
        let items = Arc::new(
            tfreg_store::sqlite::SqliteStore::open(&dir.path().join("registry.db"))
                .expect("sqlite"),
        );
        let blobs = Arc::new(
            tfreg_store::fs::FsBlobStore::open(&dir.path().join("blobs")).expect("blob dir"),
        );
        Self::with_stores("embedded", items, blobs, dir).await
    }

    /// DynamoDB and S3 on the emulators (`AWS_ENDPOINT_URL_DYNAMODB`,
    /// `AWS_ENDPOINT_URL_S3`, `AWS_REGION`), with a fresh table and bucket.
    /// Panics (failing the test, never skipping it) when they are not configured.
    pub async fn aws() -> TestRegistry {
        Self::aws_on(Default::default()).await
    }

    /// DynamoDB and S3 at these URLs (emulators a test runs itself, with the
    /// region and credentials of the environment's), with a fresh table and
    /// bucket.
    pub async fn aws_at(dynamodb_endpoint: &str, s3_endpoint: &str) -> TestRegistry {
        Self::aws_on(Endpoints {
            dynamodb: Some(dynamodb_endpoint.into()),
            s3: Some(s3_endpoint.into()),
        })
        .await
    }

    /// The table and bucket `name` that already exist (those of a running
    /// Lambda stack), on the emulators of the environment: to publish and
    /// make tokens in-process for a registry served elsewhere.
    pub async fn aws_existing(name: &str) -> TestRegistry {
        require_emulators();
        let (dynamodb, s3) = aws_clients(&Endpoints::default()).await;
        let items = DynamoStore::new(dynamodb, name);
        let ttl = std::time::Duration::from_secs(tfreg_http::registry::DEFAULT_URL_TTL_SECS);
        let blobs = S3BlobStore::new(s3, name, ttl);
        let dir = tempfile::tempdir().expect("temp dir");
        let mut registry = Self::with_stores("aws", Arc::new(items), Arc::new(blobs), dir).await;
        registry.stack = Some(name.to_string());
        registry
    }

    async fn aws_on(endpoints: Endpoints) -> TestRegistry {
        require_emulators();
        let id = format!("tfreg-test-{:016x}", rand::random::<u64>());
        let (dynamodb, s3) = aws_clients(&endpoints).await;
        let items = DynamoStore::new(dynamodb, &id);
        items.create_table().await.expect("create table");
        let ttl = std::time::Duration::from_secs(tfreg_http::registry::DEFAULT_URL_TTL_SECS);
        let blobs = S3BlobStore::new(s3, &id, ttl);
        blobs.create_bucket().await.expect("create bucket");
        let dir = tempfile::tempdir().expect("temp dir");
        let mut registry = Self::with_stores("aws", Arc::new(items), Arc::new(blobs), dir).await;
        registry.endpoints = endpoints;
        registry.stack = Some(id);
        registry
    }

    async fn with_stores(
        name: &'static str,
        items: Arc<dyn ItemStore>,
        blobs: Arc<dyn BlobStore>,
        dir: tempfile::TempDir,
    ) -> TestRegistry {
        // The registry's log lines go to the test's output (shown when it fails).
        // TFREG_LOG or RUST_LOG (`off`) quiets them.
        let directives = tfreg_http::log_directives(|name| std::env::var(name).ok(), "info");
        let _ = tracing_subscriber::fmt()
            .with_test_writer()
            .with_target(false)
            .with_env_filter(
                tracing_subscriber::EnvFilter::try_new(&directives)
                    .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
            )
            .try_init();
        let signer = tfreg_http::signed_url::load_signer(items.as_ref())
            .await
            .expect("URL signer");
        let registry = Registry::new(items, blobs, signer, test_config());
        TestRegistry {
            name,
            registry: Arc::new(registry),
            dir: Arc::new(dir),
            endpoints: Default::default(),
            stack: None,
        }
    }

    /// Make every stored object `by` older (its file's modification time:
    /// the blob directory's, or s3s-fs's, whose bucket is a directory named
    /// by `TFREG_EMULATOR_S3_DATA`): what `tfreg gc`'s grace is measured
    /// against, for a test that cannot wait a day.
    pub fn age_objects(&self, by: std::time::Duration) {
        let root = match &self.stack {
            Some(bucket) => std::path::PathBuf::from(
                std::env::var("TFREG_EMULATOR_S3_DATA")
                    .expect("TFREG_EMULATOR_S3_DATA (from .ci/emulators' env file)"),
            )
            .join(bucket),
            None => self.dir.path().join("blobs"),
        };
        fn walk(dir: &std::path::Path, at: std::time::SystemTime) {
            for entry in std::fs::read_dir(dir).expect("the objects' directory") {
                let path = entry.expect("an entry").path();
                if path.is_dir() {
                    walk(&path, at);
                } else {
                    std::fs::File::options()
                        .write(true)
                        .open(&path)
                        .and_then(|f| f.set_modified(at))
                        .expect("age an object");
                }
            }
        }
        walk(&root, std::time::SystemTime::now() - by);
    }

    /// The `tfreg` CLI's arguments naming these stores, for the commands
    /// that work on them (`gc`, `import`, `sync`): the data directory, or
    /// the table and bucket on the environment's emulators.
    pub fn store_args(&self) -> Vec<String> {
        match &self.stack {
            Some(name) => ["--table", name, "--bucket", name, "--s3-force-path-style"]
                .map(String::from)
                .to_vec(),
            None => vec!["--data-dir".into(), self.dir.path().display().to_string()],
        }
    }

    /// A new, empty item store of the same backend (no URL secret in it yet).
    pub async fn fresh_items(&self) -> Arc<dyn ItemStore> {
        let name = format!("tfreg-test-{:016x}", rand::random::<u64>());
        match self.name {
            "aws" => {
                let (dynamodb, _) = aws_clients(&self.endpoints).await;
                let items = DynamoStore::new(dynamodb, &name);
                items.create_table().await.expect("create table");
                Arc::new(items)
            }
            _ => Arc::new(
                tfreg_store::sqlite::SqliteStore::open(&self.dir.path().join(name))
                    .expect("sqlite"),
            ),
        }
    }

    /// The same stores with another configuration or clock.
    pub fn reconfigure(&self, f: impl FnOnce(Registry) -> Registry) -> TestRegistry {
        TestRegistry {
            name: self.name,
            registry: Arc::new(f((*self.registry).clone())),
            dir: self.dir.clone(),
            endpoints: self.endpoints.clone(),
            stack: self.stack.clone(),
        }
    }

    /// This registry with its item store behind a [`CountingStore`], and the
    /// counter: what its requests cost, counted.
    pub fn counted(&self) -> (CountingStore, TestRegistry) {
        let counting = CountingStore::new(self.registry.items.clone());
        let inner = counting.clone();
        let view = self.reconfigure(move |mut reg: Registry| {
            reg.items = Arc::new(inner);
            reg
        });
        (counting, view)
    }

    /// The registry with every handler group, as `tfreg serve` runs it.
    pub fn app(&self) -> App {
        App::new(self.registry.clone(), every_group())
    }

    /// A token for this registry.
    pub async fn token(&self, scope: Scope, namespace: Option<&str>) -> String {
        self.token_with(NewToken {
            name: format!("test-{scope}"),
            scopes: vec![scope],
            namespaces: namespace.map(str::to_string).into_iter().collect(),
            grants: vec![],
            expires_at: None,
            fill: false,
        })
        .await
    }

    /// A token as described.
    pub async fn token_with(&self, new: NewToken) -> String {
        tfreg_store::catalog::tokens::create(
            self.registry.items.as_ref(),
            new,
            self.registry.now(),
            &Principal::Operator.actor(),
        )
        .await
        .expect("create token")
        .0
    }

    /// One request to the registry (`path` may carry a query string).
    pub async fn request(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        headers: &[(&str, &str)],
        body: impl Into<Bytes>,
    ) -> TestResponse {
        let mut req = http::Request::builder().method(method).uri(path);
        if let Some(t) = token {
            req = req.header(http::header::AUTHORIZATION, format!("Bearer {t}"));
        }
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let req = req
            .body(tfreg_http::body::Body::from(body.into()))
            .expect("a valid request");
        let resp = self.app().handle(req).await;
        let (parts, body) = resp.into_parts();
        let body = axum::body::to_bytes(body, usize::MAX)
            .await
            .expect("a readable body");
        TestResponse {
            status: parts.status,
            headers: parts.headers,
            body,
        }
    }

    pub async fn get(&self, path: &str) -> TestResponse {
        self.request(Method::GET, path, None, &[], Bytes::new())
            .await
    }

    pub async fn get_with(&self, path: &str, token: &str) -> TestResponse {
        self.request(Method::GET, path, Some(token), &[], Bytes::new())
            .await
    }

    /// Send to a URL the registry handed out: its own (`https://registry.test/...`)
    /// in-process, anything else (a presigned S3 URL) over HTTP.
    pub async fn send_url(
        &self,
        method: Method,
        url: &str,
        headers: &[(String, String)],
        body: impl Into<Bytes>,
    ) -> TestResponse {
        let headers: Vec<(&str, &str)> = headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        if let Some(path) = url.strip_prefix(PUBLIC_URL) {
            return self.request(method, path, None, &headers, body).await;
        }
        remote(method, url, &headers, body.into()).await
    }

    /// GET a URL the registry handed out, following one redirect (S3).
    pub async fn download(&self, url: &str) -> TestResponse {
        let resp = self.send_url(Method::GET, url, &[], Bytes::new()).await;
        if resp.status == StatusCode::TEMPORARY_REDIRECT {
            let location = resp.headers[http::header::LOCATION]
                .to_str()
                .expect("a text Location")
                .to_string();
            return self
                .send_url(Method::GET, &location, &[], Bytes::new())
                .await;
        }
        resp
    }

    /// `POST` one publish step with a JSON body.
    pub async fn publish_step(
        &self,
        target: &PublishTarget,
        step: PublishStep,
        token: &str,
        request: &PublishRequest,
    ) -> TestResponse {
        let path = PublishRoute {
            target: target.clone(),
            step,
        }
        .path();
        let body = serde_json::to_vec(request).expect("JSON");
        self.request(Method::POST, &path, Some(token), &[], body)
            .await
    }

    /// begin → upload every file to its URL → complete. Returns the first
    /// answer that is not a success, or complete's; begin's when it says
    /// "unchanged".
    pub async fn publish(
        &self,
        target: &PublishTarget,
        token: &str,
        files: &[(String, Vec<u8>)],
        mut request: PublishRequest,
    ) -> TestResponse {
        request.files = files.iter().map(|(n, b)| crate::decl(n, b)).collect();
        let begin = self
            .publish_step(target, PublishStep::Begin, token, &request)
            .await;
        if !begin.status.is_success() {
            return begin;
        }
        let answer: PublishBegin = serde_json::from_slice(&begin.body).expect("begin answer");
        if answer.status == tfreg_model::protocol::BeginStatus::Unchanged {
            return begin;
        }
        for upload in &answer.uploads {
            let (_, bytes) = files
                .iter()
                .find(|(n, _)| *n == upload.name)
                .expect("the registry asks for a declared file");
            let put = self
                .send_url(Method::PUT, &upload.url, &upload.headers, bytes.clone())
                .await;
            if !put.status.is_success() {
                return put;
            }
        }
        request.upload_id = answer.upload_id;
        self.publish_step(target, PublishStep::Complete, token, &request)
            .await
    }
}

/// Fail (never skip) when the DynamoDB and S3 emulators are not configured.
pub fn require_emulators() {
    for var in [
        "AWS_ENDPOINT_URL_DYNAMODB",
        "AWS_ENDPOINT_URL_S3",
        "AWS_REGION",
    ] {
        assert!(
            std::env::var(var).is_ok(),
            "{var} is not set: run scripts/test, which starts the DynamoDB and S3 emulators (.ci/emulators start) and exports them"
        );
    }
}

/// A request to a URL outside the registry (a presigned S3 URL).
async fn remote(method: Method, url: &str, headers: &[(&str, &str)], body: Bytes) -> TestResponse {
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("HTTP client");
    let mut req = client.request(method, url).body(body);
    // The length goes with the body, as any HTTP client sends it (a presigned
    // URL signs the declared one: a body of another length is refused).
    for (k, v) in headers
        .iter()
        .filter(|(k, _)| !k.eq_ignore_ascii_case("content-length"))
    {
        req = req.header(*k, *v);
    }
    let resp = req.send().await.unwrap_or_else(|e| panic!("{url}: {e}"));
    TestResponse {
        status: resp.status(),
        headers: resp.headers().clone(),
        body: resp.bytes().await.expect("a readable body"),
    }
}
