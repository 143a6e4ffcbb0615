//! Starting a fill from the read and blob functions: Lambda's `Invoke`
//! (`POST /2015-03-31/functions/<name>/invocations`, `X-Amz-Invocation-Type:
//! Event`, the fill as the JSON payload) sent without aws-sdk-lambda. The
//! SDK client would link a second copy of the SDK's generated code and
//! endpoint rules (about 190 KB of each function's binary) for this one
//! request. The request is instead one operation of the SDK's own runtime,
//! which the DynamoDB client already links: the same orchestrator, retry
//! strategy (the store's `SdkConfig`: standard, 3 attempts), timeouts, SigV4
//! signer (`aws-sigv4`, the credentials of the `SdkConfig`'s provider), and
//! HTTPS client (the store's one, rustls with *ring*), and the interceptors
//! aws-sdk-lambda registers (user agent, invocation id and attempt headers,
//! clock skew, connection poisoning, the X-Ray trace header in Lambda). The
//! endpoint is resolved as aws-sdk-lambda's rules resolve it ([`endpoint`]).
//!
//! The tests send the same `Invoke` through aws-sdk-lambda (a
//! dev-dependency): the same method, URI, headers and signature, and the
//! same outcome for each answer, silence and refusal.
//!
//! [`endpoint`]: super::endpoint

use std::time::Duration;

use async_trait::async_trait;
use aws_runtime::auth::sigv4::{SCHEME_ID as SIGV4, SigV4AuthScheme};
use aws_runtime::auth::{SigV4OperationSigningConfig, SigningOptions};
use aws_runtime::invocation_id::InvocationIdInterceptor;
use aws_runtime::recursion_detection::RecursionDetectionInterceptor;
use aws_runtime::request_info::RequestInfoInterceptor;
use aws_runtime::retries::classifiers::AwsErrorCodeClassifier;
use aws_runtime::service_clock_skew::ServiceClockSkewInterceptor;
use aws_runtime::user_agent::{ApiMetadata, UserAgentInterceptor};
use aws_smithy_http::label::{EncodingStrategy, fmt_string};
use aws_smithy_runtime::client::orchestrator::operation::Operation;
use aws_smithy_runtime::client::retries::classifiers::{
    HttpStatusCodeClassifier, TransientErrorClassifier,
};
use aws_smithy_runtime_api::client::auth::AuthSchemeOptionResolverParams;
use aws_smithy_runtime_api::client::auth::static_resolver::{
    StaticAuthSchemeOptionResolver, StaticAuthSchemeOptionResolverParams,
};
use aws_smithy_runtime_api::client::interceptors::SharedInterceptor;
use aws_smithy_runtime_api::client::orchestrator::{HttpRequest, HttpResponse, OrchestratorError};
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponentsBuilder;
use aws_smithy_runtime_api::client::runtime_plugin::StaticRuntimePlugin;
use aws_smithy_types::body::SdkBody;
use aws_smithy_types::config_bag::Layer;
use aws_smithy_types::error::ErrorMetadata;
use aws_smithy_types::error::display::DisplayErrorContext;
use aws_smithy_types::error::metadata::ProvideErrorMetadata;
use aws_smithy_types::retry::RetryConfig;
use aws_types::SigningName;
use aws_types::region::SigningRegion;
use tfreg_http::fill::Filler;
use tfreg_model::cache::lease::Fill;
use tfreg_store::aws::{SdkConfig, endpoint_url};

use super::endpoint::{EndpointError, lambda_endpoint};

/// How long a request waits for Lambda to accept the event. Lambda
/// queues an `Event` invocation in milliseconds; `cargo lambda watch`
/// runs it before answering, so locally the caller stops waiting here
/// and looks in the store, as it would in AWS.
const ACCEPT_WAIT: Duration = Duration::from_secs(1);

/// The user agent's `api/` part: the service, and this crate's version
/// where aws-sdk-lambda puts its own.
const API_METADATA: ApiMetadata = ApiMetadata::new("lambda", env!("CARGO_PKG_VERSION"));

/// Why a function cannot invoke its fill function: found at init.
#[derive(Debug, thiserror::Error)]
pub enum InvokeSetupError {
    #[error(transparent)]
    Endpoint(#[from] EndpointError),
    #[error("the fill function's name is empty")]
    NoFunction,
    #[error("the SDK configuration has no {0}")]
    Missing(&'static str),
}

/// Lambda's answer when it did not accept the event: its status, and the
/// error code and message of its JSON body (`x-amzn-ErrorType`, `message`).
#[derive(Debug)]
pub struct Refused {
    status: u16,
    meta: ErrorMetadata,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.meta.code().unwrap_or("unknown error"))?;
        if let Some(message) = self.meta.message() {
            write!(f, ": {message}")?;
        }
        write!(f, " (HTTP {})", self.status)
    }
}

impl std::error::Error for Refused {}

/// The code drives retries as for the SDK's clients (throttling codes:
/// `AwsErrorCodeClassifier`).
impl ProvideErrorMetadata for Refused {
    fn meta(&self) -> &ErrorMetadata {
        &self.meta
    }
}

/// A REST-JSON error body's code and message, as the SDK reads them.
#[derive(Default, serde::Deserialize)]
struct ErrorBody {
    #[serde(rename = "__type", alias = "code")]
    code: Option<String>,
    #[serde(alias = "Message", alias = "errorMessage")]
    message: Option<String>,
}

/// Lambda's answer: accepted (2xx), or why not.
fn deserialize(response: &HttpResponse) -> Result<(), OrchestratorError<Refused>> {
    if response.status().is_success() {
        return Ok(());
    }
    let body: ErrorBody = response
        .body()
        .bytes()
        .and_then(|b| serde_json::from_slice(b).ok())
        .unwrap_or_default();
    let code = response
        .headers()
        .get("x-amzn-errortype")
        .map(str::to_string)
        .or(body.code);
    let mut meta = ErrorMetadata::builder();
    if let Some(code) = code {
        // As aws-smithy-json's `sanitize_error_code`: no `:<URL>` suffix,
        // no `<namespace>#` prefix.
        let code = code.split(':').next().unwrap_or_default();
        meta = meta.code(code.rsplit_once('#').map_or(code, |(_, c)| c));
    }
    if let Some(message) = body.message {
        meta = meta.message(message);
    }
    Err(OrchestratorError::operation(Refused {
        status: response.status().as_u16(),
        meta: meta.build(),
    }))
}

/// Starts a fill by invoking the fill function with `InvocationType`
/// `Event`: queued by Lambda, run outside the client's request.
pub struct InvokeFiller {
    operation: Operation<Vec<u8>, (), Refused>,
}

impl InvokeFiller {
    /// A filler invoking `function` (name or ARN) through `sdk`'s HTTPS
    /// client; `get` reads the environment (`AWS_ENDPOINT_URL_LAMBDA`
    /// sends the invocation elsewhere, as for the store).
    pub fn new(
        sdk: &SdkConfig,
        function: &str,
        get: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, InvokeSetupError> {
        Self::with_interceptors(sdk, function, get, Vec::new())
    }

    /// [`new`](Self::new), with `extra` interceptors after the SDK's (the
    /// tests leave out the user agent, which names different clients).
    fn with_interceptors(
        sdk: &SdkConfig,
        function: &str,
        get: impl Fn(&str) -> Option<String>,
        extra: Vec<SharedInterceptor>,
    ) -> Result<Self, InvokeSetupError> {
        if function.is_empty() {
            return Err(InvokeSetupError::NoFunction);
        }
        let region = sdk.region().ok_or(InvokeSetupError::Missing("region"))?;
        let overridden = endpoint_url(get, "LAMBDA").or(sdk.endpoint_url().map(str::to_string));
        let endpoint = lambda_endpoint(
            Some(region.as_ref()),
            sdk.use_fips().unwrap_or(false),
            sdk.use_dual_stack().unwrap_or(false),
            overridden.as_deref(),
        )?;
        let http = sdk
            .http_client()
            .ok_or(InvokeSetupError::Missing("HTTP client"))?;
        let credentials = sdk
            .credentials_provider()
            .ok_or(InvokeSetupError::Missing("credentials provider"))?;

        // What aws-sdk-lambda's configuration and its `Invoke` operation
        // put in the config bag for signing and the user agent.
        let mut config = Layer::new("tfreg-invoke");
        config.store_put(AuthSchemeOptionResolverParams::new(
            StaticAuthSchemeOptionResolverParams::new(),
        ));
        let mut signing_options = SigningOptions::default();
        signing_options.double_uri_encode = true;
        signing_options.content_sha256_header = false;
        signing_options.normalize_uri_path = true;
        signing_options.payload_override = None;
        config.store_put(SigV4OperationSigningConfig {
            signing_options,
            ..SigV4OperationSigningConfig::default()
        });
        config.store_put(SigningName::from_static("lambda"));
        config.store_put(SigningRegion::from(region.clone()));
        config.store_put(region.clone());
        config.store_put(API_METADATA);
        if let Some(app) = sdk.app_name() {
            config.store_put(app.clone());
        }
        let mut components = RuntimeComponentsBuilder::new("tfreg-invoke")
            .with_auth_scheme_option_resolver(Some(StaticAuthSchemeOptionResolver::new(vec![
                SIGV4,
            ])))
            .with_auth_scheme(SigV4AuthScheme::new())
            .with_identity_resolver(SIGV4, credentials)
            .with_retry_classifier(HttpStatusCodeClassifier::default())
            .with_retry_classifier(TransientErrorClassifier::<Refused>::new())
            .with_retry_classifier(AwsErrorCodeClassifier::<Refused>::new())
            .with_interceptor(ServiceClockSkewInterceptor::new())
            .with_interceptor(RequestInfoInterceptor::new())
            .with_interceptor(UserAgentInterceptor::new())
            .with_interceptor(InvocationIdInterceptor::new())
            .with_interceptor(RecursionDetectionInterceptor::new())
            .with_identity_cache(sdk.identity_cache())
            .with_sleep_impl(sdk.sleep_impl())
            .with_time_source(sdk.time_source());
        // Recorded like every other SDK call (TFREG_RECORD_AWS_CALLS).
        for interceptor in tfreg_store::aws::record::recorder()
            .into_iter()
            .chain(extra)
        {
            components.push_interceptor(interceptor);
        }

        let path = format!(
            "/2015-03-31/functions/{}/invocations",
            fmt_string(function, EncodingStrategy::Default)
        );
        let retry = sdk
            .retry_config()
            .cloned()
            .unwrap_or_else(RetryConfig::standard);
        let mut operation = Operation::builder()
            .service_name("Lambda")
            .operation_name("Invoke")
            .http_client(http)
            .endpoint_url(&endpoint)
            .standard_retry(&retry)
            .with_connection_poisoning()
            .runtime_plugin(
                StaticRuntimePlugin::new()
                    .with_config(config.freeze())
                    .with_runtime_components(components),
            );
        if let Some(timeouts) = sdk.timeout_config() {
            operation = operation.timeout_config(timeouts.clone());
        }
        if let Some(stalled) = sdk.stalled_stream_protection() {
            operation = operation.stalled_stream_protection(stalled);
        }
        let operation = operation
            .serializer(move |payload: Vec<u8>| {
                let length = payload.len();
                let request = http::Request::builder()
                    .method("POST")
                    .uri(path.as_str())
                    .header("x-amz-invocation-type", "Event")
                    .header("content-type", "application/octet-stream")
                    .header("content-length", length)
                    .body(SdkBody::from(payload))?;
                Ok(HttpRequest::try_from(request)?)
            })
            .deserializer(deserialize)
            .build();
        Ok(InvokeFiller { operation })
    }
}

#[async_trait]
impl Filler for InvokeFiller {
    async fn start(&self, fill: Fill) -> Result<(), tfreg_http::Error> {
        let what = fill.key();
        let payload = serde_json::to_vec(&fill)
            .map_err(|e| tfreg_http::Error::internal(format!("a fill's event: {e}")))?;
        match tokio::time::timeout(ACCEPT_WAIT, self.operation.invoke(payload)).await {
            Ok(Ok(())) => {
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
                let detail = DisplayErrorContext(&e).to_string();
                tracing::error!(fill = %what, error = %detail, "cannot invoke the fill function");
                Err(tfreg_http::Error::Unavailable(format!(
                    "the cache cannot start fetching {what} now"
                )))
            }
        }
    }
}

#[cfg(test)]
mod tests;
