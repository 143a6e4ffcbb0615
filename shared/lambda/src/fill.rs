//! The pull-through cache in AWS (plan §5). A read or blob function that
//! misses the cache invokes the `fill` function asynchronously
//! ([`InvokeFiller`], feature `invoke`) and waits on the table for the
//! result, as `tfreg serve` waits for its own task. The fill function
//! ([`run_fill`], feature `fill`) is the only one that reaches origins:
//! each event is one [`Fill`], carried out by `tfreg_cache`'s engine, which
//! takes the fill's lease first, so a duplicate event (Lambda retries an
//! asynchronous event once) finds the result and stops.

#[cfg(feature = "invoke")]
pub use invoke::InvokeFiller;

#[cfg(feature = "invoke")]
mod invoke {
    use std::time::Duration;

    use async_trait::async_trait;
    use aws_sdk_lambda::primitives::Blob;
    use aws_sdk_lambda::types::InvocationType;
    use tfreg_http::fill::Filler;
    use tfreg_model::cache::lease::Fill;
    use tfreg_store::aws::{SdkConfig, endpoint_url};

    /// How long a request waits for Lambda to accept the event. Lambda
    /// queues an `Event` invocation in milliseconds; `cargo lambda watch`
    /// runs it before answering, so locally the caller stops waiting here
    /// and looks in the store, as it would in AWS.
    const ACCEPT_WAIT: Duration = Duration::from_secs(1);

    /// Starts a fill by invoking the fill function with `InvocationType`
    /// `Event`: queued by Lambda, run outside the client's request.
    pub struct InvokeFiller {
        client: aws_sdk_lambda::Client,
        function: String,
    }

    impl InvokeFiller {
        /// A filler invoking `function` (name or ARN) through `sdk`'s HTTPS
        /// client; `get` reads the environment (`AWS_ENDPOINT_URL_LAMBDA`
        /// sends the invocation elsewhere, as for the store).
        pub fn new(
            sdk: &SdkConfig,
            function: String,
            get: impl Fn(&str) -> Option<String>,
        ) -> Self {
            let mut config = aws_sdk_lambda::config::Builder::from(sdk);
            if let Some(url) = endpoint_url(&get, "LAMBDA") {
                config.set_endpoint_url(Some(url));
            }
            InvokeFiller {
                client: aws_sdk_lambda::Client::from_conf(config.build()),
                function,
            }
        }
    }

    #[async_trait]
    impl Filler for InvokeFiller {
        async fn start(&self, fill: Fill) -> Result<(), tfreg_http::Error> {
            let what = fill.key();
            let payload = serde_json::to_vec(&fill)
                .map_err(|e| tfreg_http::Error::internal(format!("a fill's event: {e}")))?;
            let invoked = self
                .client
                .invoke()
                .function_name(&self.function)
                .invocation_type(InvocationType::Event)
                .payload(Blob::new(payload))
                .send();
            match tokio::time::timeout(ACCEPT_WAIT, invoked).await {
                Ok(Ok(_)) => {
                    tracing::info!(fill = %what, "fill started");
                    Ok(())
                }
                // Still being sent or run (cargo lambda watch): the waiter
                // looks in the store; if it never started, the client's
                // retry invokes again.
                Err(_) => {
                    tracing::info!(fill = %what, "fill invoked, not yet accepted: waiting on the store");
                    Ok(())
                }
                Ok(Err(e)) => {
                    let detail = aws_sdk_lambda::error::DisplayErrorContext(&e).to_string();
                    tracing::error!(fill = %what, error = %detail, "cannot invoke the fill function");
                    Err(tfreg_http::Error::Unavailable(format!(
                        "the cache cannot start fetching {what} now"
                    )))
                }
            }
        }
    }
}

#[cfg(feature = "fill")]
pub use function::run_fill;

#[cfg(feature = "fill")]
mod function {
    use std::sync::Arc;

    use lambda_runtime::{LambdaEvent, service_fn};
    use tfreg_cache::fill::Cache;
    use tfreg_model::cache::lease::Fill;
    use tfreg_outbound::Deployment;
    use tfreg_store::aws::{Roots, function_sdk_config};

    use crate::config::Settings;
    use crate::{InitError, archives, init_tracing, items};

    /// Where archives are streamed before they are verified: the function's
    /// ephemeral storage (template.yaml `FillTmpSize`).
    const TEMP_DIR: &str = "/tmp/tfreg-fill";

    /// The fill function's life: init once (the stores, the URL signing
    /// secret created if this registry has none yet: a registry that only
    /// caches never publishes), then one [`Fill`] per event.
    pub async fn run_fill() -> Result<(), lambda_runtime::Error> {
        init_tracing();
        let cache = match cache().await {
            Ok(c) => Arc::new(c),
            Err(e) => {
                tracing::error!(error = %e, "init failed");
                return Err(e.into());
            }
        };
        lambda_runtime::run(service_fn(move |event: LambdaEvent<Fill>| {
            let cache = cache.clone();
            async move {
                cache.run(&event.payload).await;
                Ok::<(), lambda_runtime::Error>(())
            }
        }))
        .await
    }

    async fn cache() -> Result<Cache, InitError> {
        let settings = Settings::from_env()?;
        let env = |name: &str| std::env::var(name).ok();
        let sdk = function_sdk_config(Roots::for_function(env), env)?;
        let items = items(&sdk, &settings);
        tfreg_http::signed_url::load_signer(items.as_ref()).await?;
        let blobs = archives(&sdk, &settings);
        // Left by an earlier run of this sandbox that was stopped mid-fill.
        let _ = std::fs::remove_dir_all(TEMP_DIR);
        let deployment = if settings.origin_allow_loopback {
            Deployment::Serve
        } else {
            Deployment::Aws
        };
        let max_archive_bytes = settings.registry_config().max_archive_bytes;
        Ok(Cache::new(
            items,
            blobs,
            TEMP_DIR.into(),
            deployment,
            max_archive_bytes,
        ))
    }
}
