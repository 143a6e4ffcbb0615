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
use aws_runtime::user_agent::ApiMetadata;
use aws_smithy_http::label::{EncodingStrategy, fmt_string};
use aws_smithy_runtime::client::orchestrator::operation::Operation;
use aws_smithy_runtime_api::client::interceptors::SharedInterceptor;
use aws_smithy_runtime_api::client::orchestrator::{HttpRequest, HttpResponse, OrchestratorError};
use aws_smithy_types::body::SdkBody;
use aws_smithy_types::error::display::DisplayErrorContext;
use tfreg_http::fill::Filler;
use tfreg_model::cache::lease::Fill;
use tfreg_store::aws::{SdkConfig, endpoint_url};

use super::endpoint::{EndpointError, lambda_endpoint};
pub use crate::sdk_call::Refused;
use crate::sdk_call::{Service, refusal};

/// How long a request waits for Lambda to accept the event. Lambda
/// queues an `Event` invocation in milliseconds; `cargo lambda watch`
/// runs it before answering, so locally the caller stops waiting here
/// and looks in the store, as it would in AWS.
const ACCEPT_WAIT: Duration = Duration::from_secs(1);

/// Lambda as aws-sdk-lambda names it; the user agent's `api/` part is
/// this crate's version where aws-sdk-lambda puts its own.
const LAMBDA: Service = Service {
    name: "Lambda",
    signing_name: "lambda",
    api: ApiMetadata::new("lambda", env!("CARGO_PKG_VERSION")),
};

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

/// Lambda's answer: accepted (2xx), or why not.
fn deserialize(response: &HttpResponse) -> Result<(), OrchestratorError<Refused>> {
    if response.status().is_success() {
        return Ok(());
    }
    Err(refusal(response))
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
        let path = format!(
            "/2015-03-31/functions/{}/invocations",
            fmt_string(function, EncodingStrategy::Default)
        );
        let operation = crate::sdk_call::operation(sdk, &LAMBDA, "Invoke", &endpoint, extra)
            .map_err(|m| InvokeSetupError::Missing(m.0))?;
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
