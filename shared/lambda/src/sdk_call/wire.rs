//! For the tests that compare a request sent through [`super`] with the
//! same request sent by an AWS SDK client (the fill `Invoke`, the archive
//! key's read): a connector that records what is sent, an interceptor
//! taking out the user agent, and one `SdkConfig` for both sides.

use std::sync::{Arc, Mutex};

use aws_credential_types::Credentials;
use aws_credential_types::provider::SharedCredentialsProvider;
use aws_smithy_async::rt::sleep::default_async_sleep;
use aws_smithy_async::time::{SharedTimeSource, StaticTimeSource};
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::behavior_version::BehaviorVersion;
use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpConnector,
};
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::interceptors::context::BeforeTransmitInterceptorContextMut;
use aws_smithy_runtime_api::client::orchestrator::{HttpRequest, HttpResponse};
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::body::SdkBody;
use aws_smithy_types::config_bag::ConfigBag;
use aws_smithy_types::retry::RetryConfig;
use aws_types::region::Region;
use tfreg_store::aws::SdkConfig;

/// A request as sent: method, URI, headers sorted, body.
pub type Sent = (String, String, Vec<(String, String)>, Vec<u8>);

/// Records each request and answers `status` with `body`.
#[derive(Clone, Debug)]
pub struct Capture {
    sent: Arc<Mutex<Vec<HttpRequest>>>,
    status: u16,
    body: String,
}

impl Capture {
    pub fn answering(status: u16, body: &str) -> Self {
        Capture {
            sent: Arc::default(),
            status,
            body: body.to_string(),
        }
    }

    /// The one request sent (no retry).
    pub fn take(&self) -> Sent {
        let mut requests = self.sent.lock().unwrap();
        assert_eq!(requests.len(), 1, "one request, no retry");
        let request = requests.remove(0);
        let mut headers: Vec<(String, String)> = request
            .headers()
            .iter()
            .map(|(n, v)| (n.to_ascii_lowercase(), v.to_string()))
            .collect();
        headers.sort();
        (
            request.method().to_string(),
            request.uri().to_string(),
            headers,
            request.body().bytes().unwrap().to_vec(),
        )
    }
}

impl HttpConnector for Capture {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        self.sent.lock().unwrap().push(request);
        HttpConnectorFuture::ready(Ok(HttpResponse::new(
            self.status.try_into().unwrap(),
            SdkBody::from(self.body.clone()),
        )))
    }
}

impl HttpClient for Capture {
    fn http_connector(
        &self,
        _: &HttpConnectorSettings,
        _: &RuntimeComponents,
    ) -> SharedHttpConnector {
        SharedHttpConnector::new(self.clone())
    }
}

/// The invocation id is random for each request (and not signed).
pub fn without_invocation_id(mut sent: Sent) -> Sent {
    let id = sent
        .2
        .iter()
        .position(|(n, _)| n == "amz-sdk-invocation-id")
        .expect("an invocation id");
    let (_, value) = sent.2.remove(id);
    assert_eq!(value.len(), 36, "a UUID: {value}");
    sent
}

/// Removes the user agent before signing: an SDK client's names itself and
/// its features, ours names this crate. Everything else is compared.
#[derive(Debug)]
pub struct NoUserAgent;

impl Intercept for NoUserAgent {
    fn name(&self) -> &'static str {
        "NoUserAgent"
    }

    fn modify_before_signing(
        &self,
        context: &mut BeforeTransmitInterceptorContextMut<'_>,
        _: &RuntimeComponents,
        _: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let headers = context.request_mut().headers_mut();
        headers.remove("user-agent");
        headers.remove("x-amz-user-agent");
        Ok(())
    }
}

/// Both sides' configuration: fixed credentials (with `token`, a session
/// token), a fixed clock, `http` as the client.
pub fn sdk_config(
    http: impl HttpClient + 'static,
    region: &str,
    token: Option<&str>,
    retry: RetryConfig,
) -> SdkConfig {
    SdkConfig::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new(region.to_string()))
        .credentials_provider(SharedCredentialsProvider::new(Credentials::new(
            "AKIDEXAMPLE",
            "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
            token.map(str::to_string),
            None,
            "test",
        )))
        .http_client(http)
        .sleep_impl(default_async_sleep().unwrap())
        .time_source(SharedTimeSource::new(StaticTimeSource::from_secs(
            1_767_225_600,
        )))
        .retry_config(retry)
        .build()
}
