//! The `Invoke` sent without aws-sdk-lambda, compared with aws-sdk-lambda's
//! own for the same `SdkConfig`: the request on the wire (signature
//! included), and the filler's outcome and log lines for each way Lambda
//! can answer, against `reference`, the filler of 9afd880 (on the SDK)
//! kept verbatim.

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

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
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::config_bag::ConfigBag;
use aws_smithy_types::retry::RetryConfig;
use aws_types::region::Region;
use tfreg_model::cache::lease::{Fill, FillWhat};
use tfreg_model::upstream::UpstreamHost;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::*;

fn fill() -> Fill {
    Fill {
        host: UpstreamHost::parse("registry.example.test").unwrap(),
        namespace: "hashicorp".into(),
        name: "null".into(),
        what: FillWhat::ProviderArchive {
            version: "3.2.1".into(),
            platform: "linux_arm64".into(),
        },
    }
}

fn sdk_config(
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

/// The filler of 9afd880, on aws-sdk-lambda: what `InvokeFiller` replaces.
async fn reference(
    sdk: &SdkConfig,
    function: &str,
    endpoint: Option<&str>,
    fill: Fill,
) -> Result<(), tfreg_http::Error> {
    use aws_sdk_lambda::primitives::Blob;
    use aws_sdk_lambda::types::InvocationType;
    let mut config = aws_sdk_lambda::config::Builder::from(sdk);
    if let Some(url) = endpoint {
        config.set_endpoint_url(Some(url.to_string()));
    }
    let client = aws_sdk_lambda::Client::from_conf(config.build());
    let what = fill.key();
    let payload = serde_json::to_vec(&fill)
        .map_err(|e| tfreg_http::Error::internal(format!("a fill's event: {e}")))?;
    let invoked = client
        .invoke()
        .function_name(function)
        .invocation_type(InvocationType::Event)
        .payload(Blob::new(payload))
        .send();
    match tokio::time::timeout(ACCEPT_WAIT, invoked).await {
        Ok(Ok(_)) => {
            tracing::info!(fill = %what, "fill started");
            Ok(())
        }
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

/// Records each request and answers 202, as Lambda accepts an event.
#[derive(Clone, Debug, Default)]
struct Capture(Arc<Mutex<Vec<HttpRequest>>>);

impl HttpConnector for Capture {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        self.0.lock().unwrap().push(request);
        HttpConnectorFuture::ready(Ok(HttpResponse::new(
            202.try_into().unwrap(),
            SdkBody::empty(),
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

/// A request as sent: method, URI, headers sorted, body.
type Sent = (String, String, Vec<(String, String)>, Vec<u8>);

impl Capture {
    fn take(&self) -> Sent {
        let mut requests = self.0.lock().unwrap();
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

/// Removes the user agent before signing: aws-sdk-lambda's names itself
/// and its features, ours names this crate. Everything else is compared.
#[derive(Debug)]
struct NoUserAgent;

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

/// The invocation id is random for each request (and not signed).
fn without_invocation_id(mut sent: Sent) -> Sent {
    let id = sent
        .2
        .iter()
        .position(|(n, _)| n == "amz-sdk-invocation-id")
        .expect("an invocation id");
    let (_, value) = sent.2.remove(id);
    assert_eq!(value.len(), 36, "a UUID: {value}");
    sent
}

#[tokio::test]
async fn the_request_is_the_sdks_signature_included() {
    let functions = [
        "tfreg-fill",
        "arn:aws:lambda:eu-west-1:123456789012:function:tfreg-fill",
    ];
    for token in [None, Some("IQoJb3JpZ2luX2VjEXAMPLE/token+=")] {
        for (region, endpoint) in [
            ("us-east-1", None),
            ("eu-west-1", None),
            ("cn-north-1", None),
            ("us-gov-west-1", None),
            ("eu-west-1", Some("http://127.0.0.1:9001")),
        ] {
            for function in functions {
                let case = format!("{token:?} {region} {endpoint:?} {function}");
                let ours = Capture::default();
                let sdk = sdk_config(ours.clone(), region, token, RetryConfig::standard());
                let get = |name: &str| {
                    (name == "AWS_ENDPOINT_URL_LAMBDA")
                        .then(|| endpoint.map(str::to_string))
                        .flatten()
                };
                let filler = InvokeFiller::with_interceptors(
                    &sdk,
                    function,
                    get,
                    vec![SharedInterceptor::new(NoUserAgent)],
                )
                .unwrap();
                filler.start(fill()).await.unwrap();
                let ours = without_invocation_id(ours.take());

                let theirs = Capture::default();
                let sdk = sdk_config(theirs.clone(), region, token, RetryConfig::standard());
                let mut config = aws_sdk_lambda::config::Builder::from(&sdk);
                if let Some(url) = endpoint {
                    config.set_endpoint_url(Some(url.to_string()));
                }
                aws_sdk_lambda::Client::from_conf(config.build())
                    .invoke()
                    .function_name(function)
                    .invocation_type(aws_sdk_lambda::types::InvocationType::Event)
                    .payload(aws_sdk_lambda::primitives::Blob::new(
                        serde_json::to_vec(&fill()).unwrap(),
                    ))
                    .customize()
                    .interceptor(NoUserAgent)
                    .send()
                    .await
                    .unwrap();
                let theirs = without_invocation_id(theirs.take());
                assert_eq!(ours, theirs, "{case}");

                let header = |name: &str| {
                    ours.2
                        .iter()
                        .find(|(n, _)| n == name)
                        .map(|(_, v)| v.as_str())
                };
                assert_eq!(ours.0, "POST");
                assert!(
                    ours.1.ends_with(&format!(
                        "/2015-03-31/functions/{}/invocations",
                        function.replace(':', "%3A")
                    )),
                    "{case}: {}",
                    ours.1
                );
                assert_eq!(header("x-amz-invocation-type"), Some("Event"));
                assert_eq!(header("x-amz-security-token"), token, "{case}");
                assert_eq!(header("x-amz-date"), Some("20260101T000000Z"));
                let authorization = header("authorization").unwrap();
                assert!(
                    authorization.starts_with(&format!(
                        "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20260101/{region}/lambda/aws4_request, SignedHeaders="
                    )),
                    "{case}: {authorization}"
                );
                assert_eq!(ours.3, serde_json::to_vec(&fill()).unwrap());
            }
        }
    }
}

/// Ours carries the SDK's user agent, naming this crate's version where
/// aws-sdk-lambda names its own.
#[tokio::test]
async fn the_user_agent_is_the_sdks() {
    let capture = Capture::default();
    let sdk = sdk_config(capture.clone(), "eu-west-1", None, RetryConfig::standard());
    InvokeFiller::new(&sdk, "tfreg-fill", |_| None)
        .unwrap()
        .start(fill())
        .await
        .unwrap();
    let (_, uri, headers, _) = capture.take();
    assert_eq!(
        uri,
        "https://lambda.eu-west-1.amazonaws.com/2015-03-31/functions/tfreg-fill/invocations"
    );
    let agent = &headers
        .iter()
        .find(|(n, _)| n == "x-amz-user-agent")
        .unwrap()
        .1;
    assert!(agent.starts_with("aws-sdk-rust/"), "{agent}");
    let api = format!("api/lambda/{}", env!("CARGO_PKG_VERSION"));
    assert!(agent.contains(&api), "{agent}");
    assert!(headers.iter().any(|(n, _)| n == "user-agent"));
}

#[test]
fn what_cannot_be_invoked_is_refused_at_init() {
    let sdk = |fips: bool| {
        let sdk = sdk_config(
            Capture::default(),
            "eu-west-1",
            None,
            RetryConfig::standard(),
        );
        sdk.into_builder().use_fips(fips).build()
    };
    let get = |name: &str| (name == "AWS_ENDPOINT_URL").then(|| "http://127.0.0.1:9".to_string());
    let err = InvokeFiller::new(&sdk(true), "tfreg-fill", get)
        .err()
        .unwrap();
    assert_eq!(
        err.to_string(),
        "Lambda's endpoint: Invalid Configuration: FIPS and custom endpoint are not supported"
    );
    assert!(InvokeFiller::new(&sdk(false), "tfreg-fill", get).is_ok());
    assert!(matches!(
        InvokeFiller::new(&sdk(false), "", get),
        Err(InvokeSetupError::NoFunction)
    ));
    let no_region = sdk(false).into_builder().region(None).build();
    assert!(matches!(
        InvokeFiller::new(&no_region, "tfreg-fill", |_| None),
        Err(InvokeSetupError::Missing("region"))
    ));
    // FIPS without an override: Lambda's FIPS endpoint, as the SDK's.
    let capture = Capture::default();
    let fips = sdk_config(
        capture.clone(),
        "us-gov-west-1",
        None,
        RetryConfig::standard(),
    )
    .into_builder()
    .use_fips(true)
    .build();
    let filler = InvokeFiller::new(&fips, "tfreg-fill", |_| None).unwrap();
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(filler.start(fill()))
        .unwrap();
    assert!(
        capture
            .take()
            .1
            .starts_with("https://lambda-fips.us-gov-west-1.amazonaws.com/")
    );
}

/// How a test server answers every request.
#[derive(Clone, Copy)]
enum Answer {
    /// Status, `x-amzn-ErrorType`, body.
    With(u16, &'static str, &'static str),
    /// Reads the request and never answers.
    Silence,
}

/// A Lambda API on loopback: its URL and the count of requests it read.
async fn lambda_api(answer: Answer) -> (String, Arc<Mutex<usize>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let count = Arc::new(Mutex::new(0));
    let counted = count.clone();
    tokio::spawn(async move {
        loop {
            let (mut socket, _) = listener.accept().await.unwrap();
            let counted = counted.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                loop {
                    // One request: its head, then its content-length body.
                    let head_end = loop {
                        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                            break i + 4;
                        }
                        let mut chunk = [0; 4096];
                        match socket.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    };
                    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
                    let length: usize = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .map_or(0, |v| v.trim().parse().unwrap());
                    while buf.len() < head_end + length {
                        let mut chunk = [0; 4096];
                        match socket.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                    buf.drain(..head_end + length);
                    *counted.lock().unwrap() += 1;
                    match answer {
                        Answer::With(status, code, body) => {
                            let code = if code.is_empty() {
                                String::new()
                            } else {
                                format!("x-amzn-errortype: {code}\r\n")
                            };
                            let response = format!(
                                "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\n{code}x-amzn-requestid: 9f3b1c2e-0000-4000-8000-000000000000\r\ncontent-length: {}\r\n\r\n{body}",
                                body.len()
                            );
                            if socket.write_all(response.as_bytes()).await.is_err() {
                                return;
                            }
                        }
                        Answer::Silence => {
                            let _ = socket.read(&mut [0; 1]).await;
                            return;
                        }
                    }
                }
            });
        }
    });
    (url, count)
}

/// A log writer into a shared buffer.
#[derive(Clone, Default)]
struct Lines(Arc<Mutex<Vec<u8>>>);

impl Write for Lines {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// tracing caches each callsite's interest once, process-wide, from the
/// thread that first hits it; with only a thread-local subscriber
/// registered, a sibling test calling `start` with no subscriber caches
/// "never" and this test's capture sees nothing (CI, stop 32). A global
/// `Registry` with no layers makes every thread's first hit "interested";
/// the event then goes to whichever subscriber the emitting thread has.
fn anchor_log_interest() {
    static ANCHOR: std::sync::Once = std::sync::Once::new();
    ANCHOR.call_once(|| {
        let _ = tracing::subscriber::set_global_default(tracing_subscriber::registry());
    });
}

/// What a start did: its outcome, its log lines (without the error's
/// detail, which names each client's own error type), the requests the
/// API read, and the detail.
#[derive(Debug, PartialEq)]
struct Outcome {
    result: Result<(), String>,
    lines: Vec<serde_json::Value>,
    requests: usize,
}

async fn run(answer: Option<Answer>, ours: bool) -> (Outcome, Vec<String>) {
    let (url, count) = match answer {
        Some(answer) => lambda_api(answer).await,
        None => {
            // A port nothing listens on: the connection is refused.
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let url = format!("http://{}", listener.local_addr().unwrap());
            drop(listener);
            (url, Arc::new(Mutex::new(0)))
        }
    };
    // The standard retries (3 attempts), backing off 1 ms instead of up to
    // 1 s so that every attempt fits in the 1 s wait, for both clients.
    let retry = RetryConfig::standard().with_initial_backoff(Duration::from_millis(1));
    let http = tfreg_store::aws::https_client(tfreg_store::aws::Roots::Aws);
    let mut sdk = sdk_config(http, "us-east-1", Some("token"), retry);
    sdk = sdk
        .into_builder()
        .time_source(SharedTimeSource::default())
        .build();
    anchor_log_interest();
    let lines = Lines::default();
    let writer = lines.clone();
    let subscriber = crate::log_subscriber(
        tracing_subscriber::filter::Targets::new()
            .with_target("tfreg_lambda", tracing::Level::INFO),
        move || writer.clone(),
    );
    let _guard = tracing::subscriber::set_default(subscriber);
    let result = if ours {
        let get = |name: &str| (name == "AWS_ENDPOINT_URL_LAMBDA").then(|| url.clone());
        let filler = InvokeFiller::new(&sdk, "tfreg-fill", get).unwrap();
        filler.start(fill()).await
    } else {
        reference(&sdk, "tfreg-fill", Some(&url), fill()).await
    };
    let mut details = Vec::new();
    let lines = String::from_utf8(lines.0.lock().unwrap().clone())
        .unwrap()
        .lines()
        .map(|l| {
            let mut line: serde_json::Value = serde_json::from_str(l).unwrap();
            if let Some(detail) = line.as_object_mut().unwrap().remove("error") {
                details.push(detail.as_str().unwrap().to_string());
            }
            line
        })
        .collect();
    let requests = *count.lock().unwrap();
    let outcome = Outcome {
        result: result.map_err(|e| format!("{e:?}")),
        lines,
        requests,
    };
    (outcome, details)
}

/// Each answer, silence and refusal: the same outcome, log lines and
/// number of attempts as the SDK's client gave.
#[tokio::test]
async fn each_answer_is_taken_as_the_sdk_took_it() {
    let cases = [
        ("accepted", Some(Answer::With(202, "", "")), 1),
        (
            "no such function",
            Some(Answer::With(
                404,
                "ResourceNotFoundException",
                r#"{"Type":"User","message":"Function not found: arn:aws:lambda:us-east-1:123456789012:function:tfreg-fill"}"#,
            )),
            1,
        ),
        (
            "denied",
            Some(Answer::With(
                403,
                "AccessDeniedException:http://internal.amazon.com/coral/com.amazon.coral.service/",
                r#"{"Message":"User is not authorized to perform: lambda:InvokeFunction"}"#,
            )),
            1,
        ),
        (
            "throttled",
            Some(Answer::With(
                429,
                "TooManyRequestsException",
                r#"{"Type":"User","message":"Rate Exceeded.","Reason":"CallerRateLimitExceeded"}"#,
            )),
            3,
        ),
        (
            "service error",
            Some(Answer::With(
                500,
                "ServiceException",
                r#"{"Type":"Service","message":"internal"}"#,
            )),
            3,
        ),
        (
            "gateway error",
            Some(Answer::With(502, "", "bad gateway")),
            3,
        ),
        ("no answer within 1 s", Some(Answer::Silence), 1),
        ("connection refused", None, 0),
    ];
    for (case, answer, attempts) in cases {
        let (ours, our_details) = run(answer, true).await;
        let (theirs, their_details) = run(answer, false).await;
        assert_eq!(
            ours, theirs,
            "{case}: ours {our_details:?}, the SDK's {their_details:?}"
        );
        assert_eq!(ours.requests, attempts, "{case}");
        assert_eq!(our_details.len(), their_details.len(), "{case}");
        let expected = match case {
            "accepted" => "fill started",
            "no answer within 1 s" => "fill invoked, not yet accepted: waiting on the store",
            _ => "cannot invoke the fill function",
        };
        assert_eq!(ours.lines.len(), 1, "{case}: {:?}", ours.lines);
        assert_eq!(ours.lines[0]["message"], expected, "{case}");
        assert_eq!(ours.lines[0]["fill"], fill().key(), "{case}");
        if let Some(Answer::With(status, code, _)) = answer
            && status >= 300
        {
            let detail = &our_details[0];
            let code = code.split(':').next().unwrap();
            assert!(
                detail.contains(code) && detail.contains(&format!("HTTP {status}")),
                "{case}: {detail}"
            );
        }
    }
}
