//! The Lambda entry point: build clients and configuration once at init, then
//! answer API Gateway (HTTP API) requests with the registry's one service
//! ([`crate::app`]); `lambda_http` adapts the events.

use std::sync::Arc;
use std::time::Duration;

use aws_config::BehaviorVersion;

use super::config::{ConfigError, Settings};
use super::dynamodb::DynamoStore;
use super::s3::S3BlobStore;
use super::tls::{Roots, https_client};
use crate::registry::Registry;
use crate::router::Endpoint;

/// What can stop a function from starting.
#[derive(Debug, thiserror::Error)]
pub enum InitError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("loading the URL signing secret from DynamoDB: {0}")]
    Store(#[from] crate::storage::StoreError),
}

/// One initialised function.
pub struct Function {
    registry: Arc<Registry>,
    endpoint: Endpoint,
}

/// DynamoDB answers in milliseconds. After connecting, the SDK waits for an
/// answer without limit: a store that accepts connections but does not answer
/// would hold a request until Lambda ends the function (a gateway error, no
/// `Retry-After`). Bounded here, retries included, well within the read
/// functions' 10 s, so the client gets a 503 with `Retry-After` instead.
const DYNAMODB_ATTEMPT_TIMEOUT: Duration = Duration::from_secs(3);
const DYNAMODB_OPERATION_TIMEOUT: Duration = Duration::from_secs(7);
/// Longest silence from S3 within a response (its first byte included): large
/// archives stream for as long as they need, a hung S3 is given up on.
const S3_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Where the AWS SDK clients send their requests: `None` is the standard
/// resolution (`AWS_ENDPOINT_URL_DYNAMODB`, `AWS_ENDPOINT_URL_S3`, else AWS).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Endpoints {
    pub dynamodb: Option<String>,
    pub s3: Option<String>,
}

/// AWS SDK clients built from the standard environment (`AWS_REGION`,
/// `AWS_ENDPOINT_URL_DYNAMODB`, `AWS_ENDPOINT_URL_S3`, credentials chain);
/// path-style S3 addressing for emulators.
pub async fn clients(
    s3_force_path_style: bool,
) -> Result<(aws_sdk_dynamodb::Client, aws_sdk_s3::Client), ConfigError> {
    clients_at(&Endpoints::default(), s3_force_path_style).await
}

/// [`clients`], sending to `endpoints` where they name a URL (tests run
/// emulators of their own); region and credentials from the environment.
pub async fn clients_at(
    endpoints: &Endpoints,
    s3_force_path_style: bool,
) -> Result<(aws_sdk_dynamodb::Client, aws_sdk_s3::Client), ConfigError> {
    clients_trusting(endpoints, s3_force_path_style, Roots::System).await
}

/// [`clients_at`], their TLS trusting `roots`.
pub async fn clients_trusting(
    endpoints: &Endpoints,
    s3_force_path_style: bool,
    roots: Roots,
) -> Result<(aws_sdk_dynamodb::Client, aws_sdk_s3::Client), ConfigError> {
    let sdk = aws_config::defaults(BehaviorVersion::latest())
        .http_client(https_client(roots))
        .load()
        .await;
    if sdk.region().is_none() {
        return Err(ConfigError::Missing("AWS_REGION"));
    }
    let mut dynamodb_config = aws_sdk_dynamodb::config::Builder::from(&sdk).timeout_config(
        aws_config::timeout::TimeoutConfig::builder()
            .operation_attempt_timeout(DYNAMODB_ATTEMPT_TIMEOUT)
            .operation_timeout(DYNAMODB_OPERATION_TIMEOUT)
            .build(),
    );
    // Set only when given: `from(&sdk)` holds the environment's URL already.
    if let Some(url) = &endpoints.dynamodb {
        dynamodb_config.set_endpoint_url(Some(url.clone()));
    }
    let mut s3_config = aws_sdk_s3::config::Builder::from(&sdk)
        .force_path_style(s3_force_path_style)
        // Presigned PUTs must not demand checksum headers the uploader does not send.
        .request_checksum_calculation(aws_sdk_s3::config::RequestChecksumCalculation::WhenRequired)
        .timeout_config(
            aws_config::timeout::TimeoutConfig::builder()
                .read_timeout(S3_READ_TIMEOUT)
                .build(),
        );
    if let Some(url) = &endpoints.s3 {
        s3_config.set_endpoint_url(Some(url.clone()));
    }
    Ok((
        aws_sdk_dynamodb::Client::from_conf(dynamodb_config.build()),
        aws_sdk_s3::Client::from_conf(s3_config.build()),
    ))
}

impl Function {
    /// Initialise from the environment: settings and clients. The publish
    /// function also makes sure the URL signing secret exists, creating it at
    /// its first cold start (of the two functions whose roles may write the
    /// table, publish and admin, only publish signs URLs); the others read it
    /// when first needed, and admin never needs it.
    pub async fn from_env(endpoint: Endpoint) -> Result<Self, InitError> {
        let settings = Settings::from_env()?;
        let roots = Roots::for_function(|name| std::env::var(name).ok());
        let (dynamodb, s3) =
            clients_trusting(&Endpoints::default(), settings.s3_force_path_style, roots).await?;
        let items = Arc::new(DynamoStore::new(dynamodb, &settings.table));
        let blobs = Arc::new(S3BlobStore::new(s3, &settings.bucket, settings.url_ttl));
        let config = settings.registry_config();
        let registry = match endpoint {
            Endpoint::Publish => {
                let signer = crate::signed_url::load_signer(items.as_ref()).await?;
                Registry::new(items, blobs, signer, config)
            }
            Endpoint::Discovery
            | Endpoint::ProviderVersions
            | Endpoint::ProviderDownload
            | Endpoint::ModuleVersions
            | Endpoint::ModuleDownload
            | Endpoint::MirrorIndex
            | Endpoint::MirrorVersion
            | Endpoint::Blob
            | Endpoint::Admin
            | Endpoint::Ui => Registry::with_stored_signer(items, blobs, config),
        };
        if endpoint != Endpoint::Discovery && settings.connect_at_init {
            // Read the URL signing secret now (those that sign URLs need it
            // on their first request anyway): this opens the connection to
            // DynamoDB, TLS handshake included, during init rather than in
            // the first request. A failure here is not fatal: the request
            // that needs the store reports it.
            if let Err(e) = registry.signer_if_ready().await {
                tracing::warn!(error = %e, "warming up the DynamoDB connection at init failed");
            }
        }
        Ok(Self {
            registry: Arc::new(registry),
            endpoint,
        })
    }

    /// The service this function runs: the registry's, for its endpoint only.
    pub fn service(&self) -> axum::Router {
        crate::app::app(self.registry.clone(), Some(self.endpoint))
    }
}

/// The functions' log format, written to `writer`: one JSON object a line,
/// the event's fields at its top level; no time (CloudWatch stamps every
/// line), no target and no spans (the runtime's invoke span would repeat the
/// Lambda request id and X-Ray trace id on every line, and CloudWatch bills
/// every byte).
pub(crate) fn log_subscriber<W>(
    filter: tracing_subscriber::EnvFilter,
    writer: W,
) -> impl tracing::Subscriber + Send + Sync + 'static
where
    W: for<'w> tracing_subscriber::fmt::MakeWriter<'w> + Send + Sync + 'static,
{
    tracing_subscriber::fmt()
        .json()
        .flatten_event(true)
        .with_current_span(false)
        .with_span_list(false)
        .with_target(false)
        .without_time()
        .with_env_filter(filter)
        .with_writer(writer)
        .finish()
}

fn init_tracing() {
    use tracing_subscriber::util::SubscriberInitExt;
    let filter = tracing_subscriber::EnvFilter::try_from_env(super::config::LOG)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = log_subscriber(filter, std::io::stdout).try_init();
}

/// The whole life of a function whose endpoint is named by `TFREG_ENDPOINT`
/// (the `lambda` binary, which every function of template.yaml runs).
pub async fn run_configured() -> Result<(), lambda_http::Error> {
    init_tracing();
    match super::config::endpoint_from_lookup(|name| std::env::var(name).ok()) {
        Ok(endpoint) => serve(endpoint).await,
        Err(e) => {
            tracing::error!(error = %e, "init failed");
            Err(e.into())
        }
    }
}

/// The whole life of one function: init once, then serve invocations.
pub async fn run(endpoint: Endpoint) -> Result<(), lambda_http::Error> {
    init_tracing();
    serve(endpoint).await
}

async fn serve(endpoint: Endpoint) -> Result<(), lambda_http::Error> {
    let function = match Function::from_env(endpoint).await {
        Ok(f) => f,
        Err(e) => {
            tracing::error!(function = endpoint.name(), error = %e, "init failed");
            return Err(e.into());
        }
    };
    lambda_http::run(function.service()).await
}
