//! tfreg on AWS Lambda: what every function's `main` calls. At init, the
//! settings from the environment ([`config`]), the DynamoDB client (and the
//! S3 client, for the functions that reach archives), the registry; then
//! `lambda_http` turns each API Gateway event into a request for the
//! pipeline, serving exactly the handler groups the function was given.
//!
//! ```no_run
//! # async fn f() -> Result<(), lambda_http::Error> {
//! use tfreg_http::Served;
//! tfreg_lambda::run_reader(Served::new() /* .read(tfreg_read::Read) */).await
//! # }
//! ```

#[cfg(feature = "signin")]
pub mod auth;
pub mod config;
#[cfg(feature = "cloudfront")]
pub mod edge;
pub mod emf;
pub mod env;
pub mod fill;
mod response;
#[cfg(any(feature = "invoke", feature = "cloudfront"))]
mod sdk_call;
pub mod signin;
mod usage;

use std::sync::Arc;

use tracing_subscriber::layer::SubscriberExt;

use tfreg_http::{App, ArchiveDelivery, Registry, Served};
use tfreg_store::aws::{Roots, SdkConfig, dynamodb_client, endpoint_url, function_sdk_config};
use tfreg_store::dynamodb::DynamoStore;
use tfreg_store::read_only::ReadOnly;
use tfreg_store::{BlobStore, ItemStore, NoBlobs};

use config::{ConfigError, Settings};

/// What can stop a function from starting.
#[derive(Debug, thiserror::Error)]
pub enum InitError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Aws(#[from] tfreg_store::aws::MissingSetting),
    #[error("loading the URL signing secret from DynamoDB: {0}")]
    Store(#[from] tfreg_store::StoreError),
    #[cfg(feature = "signin")]
    #[error(transparent)]
    SignIn(#[from] auth::SignInError),
    #[cfg(feature = "invoke")]
    #[error("the fill function cannot be invoked: {0}")]
    Invoke(#[from] fill::InvokeSetupError),
    #[cfg(feature = "cloudfront")]
    #[error(transparent)]
    ArchiveKey(#[from] edge::ArchiveKeyError),
}

/// Who makes the URL signing secret.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Secret {
    /// Read it from the table when first needed; never write it (the read
    /// functions' roles may not).
    ReadWhenNeeded,
    /// Make sure it exists at init, creating it at the first cold start
    /// (publish: of the two functions whose roles may write the table, the
    /// one whose releases need signed URLs).
    CreateAtInit,
}

/// The whole life of a function that reaches no archives and writes the
/// table (the UI): init once, then serve invocations.
pub async fn run(served: Served) -> Result<(), lambda_http::Error> {
    init_tracing();
    serve(served, None, Secret::ReadWhenNeeded, writable).await
}

/// [`run`] for the read functions, whose roles may only read the table
/// (and touch a token's last use, and add to download counters): their
/// store is [`ReadOnly`], so they link no DynamoDB write path. Downloads
/// are counted (issue 38): tallied during the invocation, written after
/// its response ([`usage`]).
pub async fn run_reader(served: Served) -> Result<(), lambda_http::Error> {
    init_tracing();
    let registry = match registry_from_env(None, Secret::ReadWhenNeeded, read_only).await {
        Ok(r) => r,
        Err(e) => {
            tracing::error!(error = %e, "init failed");
            return Err(e.into());
        }
    };
    // Validated by registry_from_env already.
    if !Settings::from_env().is_ok_and(|s| s.download_counts) {
        return response::run_counting(App::new(Arc::new(registry), served), None).await;
    }
    let sink = Arc::new(tfreg_http::usage::Tallied::new());
    let registry = registry.with_usage(sink.clone());
    // Registered at init: before the runtime asks for its first event.
    let counting = usage::Counting::start(sink, registry.items.clone()).await;
    response::run_counting(App::new(Arc::new(registry), served), Some(counting)).await
}

/// [`run`] for a function that reaches the archives in S3 (blob, publish,
/// admin).
#[cfg(feature = "s3")]
pub async fn run_with_archives(served: Served, secret: Secret) -> Result<(), lambda_http::Error> {
    init_tracing();
    serve(served, Some(archives), secret, writable).await
}

/// The `auth` function's life (feature `signin`): `terraform login` and
/// the UI's single sign-on brokered to the identity provider the settings
/// name ([`signin`]), its client secret read at init, and the CI token
/// exchange for the CI issuers they list; either without the other. With
/// neither it serves nothing: every sign-in route answers 404, as `tfreg
/// serve` does without `--oidc-issuer` and `--ci-issuer` (the template
/// creates the function only with one of them).
#[cfg(feature = "signin")]
pub async fn run_signin() -> Result<(), lambda_http::Error> {
    init_tracing();
    let started = async {
        let settings = Settings::from_env()?;
        let env = |name: &str| std::env::var(name).ok();
        let sdk = function_sdk_config(Roots::for_function(env), env)?;
        let served = match auth::auth(settings.signin.as_ref(), &sdk, env).await? {
            Some(auth) => Served::new().auth(auth),
            None => {
                tracing::warn!(
                    "neither an identity provider ({}) nor CI issuers ({}) are set: every sign-in route answers 404",
                    signin::OIDC_ISSUER,
                    signin::CI_ISSUERS
                );
                Served::new()
            }
        };
        let registry = registry_with(settings, &sdk, None, writable, ArchiveDelivery::Presigned)?;
        Ok::<_, InitError>((registry, served))
    };
    let (registry, served) = match started.await {
        Ok(r) => r,
        Err(e) => {
            tracing::error!(error = %e, "init failed");
            return Err(e.into());
        }
    };
    response::run(App::new(Arc::new(registry), served)).await
}

/// The archive store of a function that reaches archives.
type Archives = fn(&SdkConfig, &Settings) -> Arc<dyn BlobStore>;

#[cfg(feature = "s3")]
fn archives(sdk: &SdkConfig, settings: &Settings) -> Arc<dyn BlobStore> {
    let endpoint = endpoint_url(|name| std::env::var(name).ok(), "S3");
    let s3 = tfreg_store::aws::s3_client(sdk, endpoint.as_deref(), settings.s3_force_path_style);
    Arc::new(tfreg_store::s3::S3BlobStore::new(
        s3,
        &settings.bucket,
        settings.url_ttl,
    ))
}

/// The table as a function's role may use it: [`writable`] or
/// [`read_only`]. A function pointer chosen by the entry point, so a
/// function links only the one it was given.
pub type Items = fn(DynamoStore) -> Arc<dyn ItemStore>;

/// Reads and writes.
pub fn writable(store: DynamoStore) -> Arc<dyn ItemStore> {
    Arc::new(store)
}

/// Reads only ([`ReadOnly`]).
pub fn read_only(store: DynamoStore) -> Arc<dyn ItemStore> {
    Arc::new(ReadOnly(store))
}

/// The function's registry, from the environment.
pub async fn registry_from_env(
    archives: Option<Archives>,
    secret: Secret,
    store: Items,
) -> Result<Registry, InitError> {
    let settings = Settings::from_env()?;
    let env = |name: &str| std::env::var(name).ok();
    let sdk = function_sdk_config(Roots::for_function(env), env)?;
    let delivery = delivery(&settings, &sdk).await?;
    let registry = match secret {
        Secret::CreateAtInit => {
            let items = items(&sdk, &settings, store);
            let signer = tfreg_http::signed_url::load_signer(items.as_ref()).await?;
            let blobs = blobs(&sdk, &settings, archives, &delivery);
            let mut config = settings.registry_config();
            config.archive_delivery = delivery;
            let registry =
                Registry::new(items, blobs, signer, config).with_metrics(emf::recorder());
            with_filler(registry, &settings, &sdk)?
        }
        Secret::ReadWhenNeeded => registry_with(settings, &sdk, archives, store, delivery)?,
    };
    Ok(registry)
}

/// How this function hands out archive URLs: in the `cloudfront` mode,
/// the functions built to sign (feature `cloudfront`: read and blob) read
/// the key pair's private key now, once; a key that cannot be read or
/// decoded stops init, naming its reference. Every other function hands
/// out no archive URLs and reads no key.
#[cfg(feature = "cloudfront")]
async fn delivery(settings: &Settings, sdk: &SdkConfig) -> Result<ArchiveDelivery, InitError> {
    let config::Delivery::CloudFront(edge) = &settings.delivery else {
        return Ok(ArchiveDelivery::Presigned);
    };
    let signer = edge::signer(sdk, edge, |name| std::env::var(name).ok()).await?;
    tracing::info!(
        archive_url = signer.base_url(),
        key_pair_id = signer.key_pair_id(),
        "archive URLs are CloudFront signed URLs"
    );
    Ok(ArchiveDelivery::CloudFront(Arc::new(signer)))
}

#[cfg(not(feature = "cloudfront"))]
async fn delivery(_: &Settings, _: &SdkConfig) -> Result<ArchiveDelivery, InitError> {
    Ok(ArchiveDelivery::Presigned)
}

fn items(sdk: &SdkConfig, settings: &Settings, store: Items) -> Arc<dyn ItemStore> {
    let env = |name: &str| std::env::var(name).ok();
    store(DynamoStore::new(
        dynamodb_client(sdk, endpoint_url(env, "DYNAMODB").as_deref()),
        &settings.table,
    ))
}

/// The function's archive store; in the `cloudfront` mode the blob
/// function's GETs redirect to CloudFront signed URLs rather than
/// presigned S3 ones (`tfreg_http::edge_url::EdgeRedirects`).
fn blobs(
    sdk: &SdkConfig,
    settings: &Settings,
    archives: Option<Archives>,
    delivery: &ArchiveDelivery,
) -> Arc<dyn BlobStore> {
    let Some(make) = archives else {
        return Arc::new(NoBlobs);
    };
    let store = make(sdk, settings);
    match delivery {
        #[cfg(feature = "cloudfront")]
        ArchiveDelivery::CloudFront(signer) => Arc::new(tfreg_http::edge_url::EdgeRedirects::new(
            store,
            signer.clone(),
            settings.url_ttl.as_secs(),
        )),
        ArchiveDelivery::Presigned => store,
    }
}

/// The registry, fetching cache misses through the fill function when the
/// function was built with `invoke` and given one ([`config::FILL_FUNCTION`]);
/// else a miss is "not cached". A configuration the fill function cannot
/// be invoked with (say FIPS with an endpoint override) stops the function
/// at init ([`fill::InvokeSetupError`]).
#[cfg(feature = "invoke")]
fn with_filler(
    registry: Registry,
    settings: &Settings,
    sdk: &SdkConfig,
) -> Result<Registry, InitError> {
    Ok(match &settings.fill_function {
        Some(function) => {
            let env = |name: &str| std::env::var(name).ok();
            let filler = fill::InvokeFiller::new(sdk, function, env)?;
            registry.with_filler(Arc::new(filler))
        }
        None => registry,
    })
}

/// A function that never starts fills (built without `invoke`).
#[cfg(not(feature = "invoke"))]
fn with_filler(registry: Registry, _: &Settings, _: &SdkConfig) -> Result<Registry, InitError> {
    Ok(registry)
}

/// A registry that reads the URL signing secret when it first needs it.
fn registry_with(
    settings: Settings,
    sdk: &SdkConfig,
    archives: Option<Archives>,
    store: Items,
    delivery: ArchiveDelivery,
) -> Result<Registry, InitError> {
    let mut config = settings.registry_config();
    let blobs = blobs(sdk, &settings, archives, &delivery);
    config.archive_delivery = delivery;
    let registry = Registry::with_stored_signer(items(sdk, &settings, store), blobs, config)
        .with_metrics(emf::recorder());
    let registry = with_filler(registry, &settings, sdk)?;
    if settings.connect_at_init {
        // Read the URL signing secret (those that sign URLs need it on their
        // first request anyway) beside init, not in it: the connection to
        // DynamoDB, TLS handshake included, opens while the runtime asks
        // Lambda for the first event, and a first request that needs the
        // secret waits for this read rather than making its own. A failure
        // is not fatal: the request that needs the store reports it.
        let warm = registry.clone();
        tokio::spawn(async move {
            if let Err(e) = warm.signer_if_ready().await {
                tracing::warn!(error = %e, "warming up the DynamoDB connection at init failed");
            }
        });
    }
    Ok(registry)
}

async fn serve(
    served: Served,
    archives: Option<Archives>,
    secret: Secret,
    store: Items,
) -> Result<(), lambda_http::Error> {
    let registry = match registry_from_env(archives, secret, store).await {
        Ok(r) => r,
        Err(e) => {
            tracing::error!(error = %e, "init failed");
            return Err(e.into());
        }
    };
    response::run(App::new(Arc::new(registry), served)).await
}

/// The functions' log format, written to `writer`: one JSON object a line,
/// the event's fields at its top level; no time (CloudWatch stamps every
/// line), no target and no spans (the runtime's invoke span would repeat the
/// Lambda request id and X-Ray trace id on every line, and CloudWatch bills
/// every byte).
///
/// The filter is a [`Targets`](tracing_subscriber::filter::Targets): the
/// `TFREG_LOG` / `RUST_LOG` forms `info`, `off` and `tfreg_http=debug,warn`
/// (target prefixes and levels). `EnvFilter`'s span and field directives are
/// not understood (they fall back to `info`): they would link a regular
/// expression engine into every function for a debugging aid.
pub fn log_subscriber<W>(
    filter: tracing_subscriber::filter::Targets,
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
        .with_writer(writer)
        .finish()
        .with(filter)
}

fn init_tracing() {
    use tracing_subscriber::util::SubscriberInitExt;
    let _ = log_subscriber(log_filter(|name| std::env::var(name).ok()), std::io::stdout).try_init();
}

/// The functions' log filter from `TFREG_LOG`, else `RUST_LOG`, else `info`;
/// `info` when what is set does not parse.
pub fn log_filter(get: impl Fn(&str) -> Option<String>) -> tracing_subscriber::filter::Targets {
    let directives = tfreg_http::log_directives(get, "info");
    directives.parse().unwrap_or_else(|_| {
        tracing_subscriber::filter::Targets::new()
            .with_default(tracing_subscriber::filter::LevelFilter::INFO)
    })
}

#[cfg(any(feature = "signin", feature = "cloudfront"))]
/// An error and its sources, each by its `Display`: not the SDK's
/// `DisplayErrorContext`, which ends with the error's `Debug`, the raw
/// answer included (an answer that holds the key but does not parse
/// would be printed).
pub(crate) fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        text.push_str(": ");
        text.push_str(&e.to_string());
        source = e.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use tracing::Level;
    use tracing_subscriber::filter::Targets;

    fn filter(value: &'static str) -> Targets {
        super::log_filter(move |name| (name == "RUST_LOG").then(|| value.to_string()))
    }

    #[test]
    fn the_log_filter_reads_levels_and_target_prefixes() {
        assert!(filter("info").would_enable("tfreg_http", &Level::INFO));
        assert!(!filter("info").would_enable("tfreg_http", &Level::DEBUG));
        let off = filter("off");
        assert!(!off.would_enable("tfreg_http", &Level::ERROR));
        let mixed = filter("tfreg_http=debug,warn");
        assert!(mixed.would_enable("tfreg_http::pipeline", &Level::DEBUG));
        assert!(!mixed.would_enable("aws_smithy_runtime", &Level::INFO));
        assert!(mixed.would_enable("aws_smithy_runtime", &Level::WARN));
    }

    #[test]
    fn a_filter_that_does_not_parse_is_info() {
        let f = filter("tfreg_http=loud");
        assert!(f.would_enable("tfreg_http", &Level::INFO));
        assert!(!f.would_enable("tfreg_http", &Level::DEBUG));
    }
}
