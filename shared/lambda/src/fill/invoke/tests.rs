//! The `Invoke` sent without aws-sdk-lambda, compared with aws-sdk-lambda's
//! own for the same `SdkConfig`: the request on the wire (signature
//! included), and the filler's outcome and log lines for each way Lambda
//! can answer, against `reference`, the filler of 9afd880 (on the SDK)
//! kept verbatim.

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_smithy_async::time::SharedTimeSource;
use aws_smithy_types::retry::RetryConfig;
use tfreg_model::cache::lease::{Fill, FillWhat};
use tfreg_model::upstream::UpstreamHost;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::*;
use crate::sdk_call::wire::{Capture, NoUserAgent, sdk_config, without_invocation_id};

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
                let ours = Capture::answering(202, "");
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

                let theirs = Capture::answering(202, "");
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
    let capture = Capture::answering(202, "");
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
            Capture::answering(202, ""),
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
    let capture = Capture::answering(202, "");
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
