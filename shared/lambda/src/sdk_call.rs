//! One AWS API call sent without that service's SDK client: an operation
//! of the SDK's own runtime, which the DynamoDB client already links, with
//! everything a generated client would give it: the store's `SdkConfig`'s
//! retry strategy (standard, 3 attempts), timeouts, SigV4 signer
//! (`aws-sigv4`, the credentials of its provider), HTTPS client (rustls
//! with *ring*), and the interceptors the SDK's clients register (user
//! agent, invocation id and attempt headers, clock skew, connection
//! poisoning, the X-Ray trace header in Lambda). A client crate would link
//! its generated code and endpoint rules for the one request each of the
//! read and blob functions makes: Lambda's `Invoke` ([`crate::fill`]), and
//! SSM's `GetParameter` or Secrets Manager's `GetSecretValue` for the
//! archive signing key ([`crate::edge`]).

use aws_runtime::auth::sigv4::{SCHEME_ID as SIGV4, SigV4AuthScheme};
use aws_runtime::auth::{SigV4OperationSigningConfig, SigningOptions};
use aws_runtime::invocation_id::InvocationIdInterceptor;
use aws_runtime::recursion_detection::RecursionDetectionInterceptor;
use aws_runtime::request_info::RequestInfoInterceptor;
use aws_runtime::retries::classifiers::AwsErrorCodeClassifier;
use aws_runtime::service_clock_skew::ServiceClockSkewInterceptor;
use aws_runtime::user_agent::{ApiMetadata, UserAgentInterceptor};
use aws_smithy_runtime::client::orchestrator::operation::OperationBuilder;
use aws_smithy_runtime::client::retries::classifiers::{
    HttpStatusCodeClassifier, TransientErrorClassifier,
};
use aws_smithy_runtime_api::client::auth::AuthSchemeOptionResolverParams;
use aws_smithy_runtime_api::client::auth::static_resolver::{
    StaticAuthSchemeOptionResolver, StaticAuthSchemeOptionResolverParams,
};
use aws_smithy_runtime_api::client::interceptors::SharedInterceptor;
use aws_smithy_runtime_api::client::orchestrator::{HttpResponse, OrchestratorError};
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponentsBuilder;
use aws_smithy_runtime_api::client::runtime_plugin::StaticRuntimePlugin;
use aws_smithy_types::config_bag::Layer;
use aws_smithy_types::error::ErrorMetadata;
use aws_smithy_types::error::metadata::ProvideErrorMetadata;
use aws_smithy_types::retry::RetryConfig;
use aws_types::SigningName;
use aws_types::region::SigningRegion;
use tfreg_store::aws::SdkConfig;

/// An AWS service as its SDK client names it.
pub struct Service {
    /// The service's name in the runtime's logs and errors (`Lambda`).
    pub name: &'static str,
    /// SigV4's service name (`lambda`).
    pub signing_name: &'static str,
    /// The user agent's `api/` part: the service, and this crate's version
    /// where the SDK client puts its own.
    pub api: ApiMetadata,
}

/// What the `SdkConfig` lacks for a call (its name).
#[derive(Debug)]
pub struct Missing(pub &'static str);

/// The service's answer when it did not do what was asked: its status,
/// and the error code and message of its JSON body (`x-amzn-ErrorType` or
/// `__type`, `message`).
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

/// A JSON error body's code and message, as the SDK reads them.
#[derive(Default, serde::Deserialize)]
struct ErrorBody {
    #[serde(rename = "__type", alias = "code")]
    code: Option<String>,
    #[serde(alias = "Message", alias = "errorMessage")]
    message: Option<String>,
}

/// Why the service refused, from its answer (not a 2xx).
pub fn refusal(response: &HttpResponse) -> OrchestratorError<Refused> {
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
    OrchestratorError::operation(Refused {
        status: response.status().as_u16(),
        meta: meta.build(),
    })
}

/// The operation `operation` of `service` at `endpoint` on `sdk`'s
/// runtime, `extra` interceptors after the SDK's: ready for its
/// serializer and deserializer.
pub fn operation(
    sdk: &SdkConfig,
    service: &Service,
    operation: &'static str,
    endpoint: &str,
    extra: Vec<SharedInterceptor>,
) -> Result<OperationBuilder, Missing> {
    let region = sdk.region().ok_or(Missing("region"))?;
    let http = sdk.http_client().ok_or(Missing("HTTP client"))?;
    let credentials = sdk
        .credentials_provider()
        .ok_or(Missing("credentials provider"))?;

    // What an SDK client's configuration and its operation put in the
    // config bag for signing and the user agent.
    let mut config = Layer::new("tfreg-sdk-call");
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
    config.store_put(SigningName::from_static(service.signing_name));
    config.store_put(SigningRegion::from(region.clone()));
    config.store_put(region.clone());
    config.store_put(service.api.clone());
    if let Some(app) = sdk.app_name() {
        config.store_put(app.clone());
    }
    let mut components = RuntimeComponentsBuilder::new("tfreg-sdk-call")
        .with_auth_scheme_option_resolver(Some(StaticAuthSchemeOptionResolver::new(vec![SIGV4])))
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
    let retry = sdk
        .retry_config()
        .cloned()
        .unwrap_or_else(RetryConfig::standard);
    let mut builder = aws_smithy_runtime::client::orchestrator::operation::Operation::builder()
        .service_name(service.name)
        .operation_name(operation)
        .http_client(http)
        .endpoint_url(endpoint)
        .standard_retry(&retry)
        .with_connection_poisoning()
        .runtime_plugin(
            StaticRuntimePlugin::new()
                .with_config(config.freeze())
                .with_runtime_components(components),
        );
    if let Some(timeouts) = sdk.timeout_config() {
        builder = builder.timeout_config(timeouts.clone());
    }
    if let Some(stalled) = sdk.stalled_stream_protection() {
        builder = builder.stalled_stream_protection(stalled);
    }
    Ok(builder)
}

#[cfg(test)]
pub(crate) mod wire;
