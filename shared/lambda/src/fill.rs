//! The pull-through cache in AWS (plan §5). A read or blob function that
//! misses the cache invokes the `fill` function asynchronously
//! ([`InvokeFiller`], feature `invoke`) and waits on the table for the
//! result, as `tfreg serve` waits for its own task. The fill function
//! ([`run_fill`], feature `fill`) is the only one that reaches origins:
//! each event is one [`Fill`], carried out by `tfreg_cache`'s engine, which
//! takes the fill's lease first, so a duplicate event (Lambda retries an
//! asynchronous event once) finds the result and stops.

#[cfg(any(feature = "invoke", feature = "cloudfront"))]
pub mod endpoint;
#[cfg(feature = "invoke")]
mod invoke;
#[cfg(feature = "invoke")]
pub use invoke::{InvokeFiller, InvokeSetupError, Refused};

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
    use crate::{InitError, archives, init_tracing, items, writable};

    /// Where archives are streamed before they are verified: the function's
    /// ephemeral storage (template.yaml `FillTmpSize`), under the sandbox's
    /// temporary directory (`TMPDIR`, else `/tmp`). A Lambda sandbox has a
    /// `/tmp` of its own, so whatever is there at init is a leftover of this
    /// sandbox; several fill functions on one machine (the tests,
    /// `scripts/lambda-local`) must each be given their own `TMPDIR`, or one
    /// starting would remove what another is filling (seen: a concurrent
    /// test's fill answered 503 "No such file or directory").
    fn temp_dir() -> std::path::PathBuf {
        std::env::temp_dir().join("tfreg-fill")
    }

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
        let items = items(&sdk, &settings, writable);
        tfreg_http::signed_url::load_signer(items.as_ref()).await?;
        let blobs = archives(&sdk, &settings);
        // Left by an earlier run of this sandbox that was stopped mid-fill.
        let temp_dir = temp_dir();
        let _ = std::fs::remove_dir_all(&temp_dir);
        let deployment = if settings.origin_allow_loopback {
            Deployment::Serve
        } else {
            Deployment::Aws
        };
        let config = settings.registry_config();
        Ok(
            Cache::new(items, blobs, temp_dir, deployment, config.max_archive_bytes)
                .with_policy(config.upstream_policy)
                .with_metrics(crate::emf::recorder()),
        )
    }
}
