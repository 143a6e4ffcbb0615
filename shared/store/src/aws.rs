//! The AWS stores' common ground: the SDK's one HTTPS client and the
//! certificate authorities it trusts, the clients of DynamoDB and S3 built
//! from the standard environment with the registry's timeouts, and what an
//! SDK failure means for a request (retry later, or an operator's problem).
//!
//! The SDK's default features would link a second HTTPS stack (hyper 0.14
//! and rustls 0.21) and aws-lc: one client instead, hyper 1 and rustls with
//! *ring*.

use std::time::Duration;

use aws_config::BehaviorVersion;
pub use aws_config::SdkConfig;
use aws_smithy_http_client::tls::rustls_provider::CryptoMode;
use aws_smithy_http_client::tls::{Provider, TlsContext, TrustStore};
use aws_smithy_runtime_api::client::http::SharedHttpClient;
use aws_smithy_runtime_api::client::result::SdkError;
use aws_smithy_types::error::display::DisplayErrorContext;
use aws_smithy_types::error::metadata::ProvideErrorMetadata;

use crate::StoreError;

pub mod record;

/// The roots AWS's endpoints chain to (Amazon Trust Services, the Starfield
/// root that cross-signs them, DigiCert's global roots), compiled in.
pub const AWS_ROOTS_PEM: &str = include_str!("aws-roots.pem");

/// Which certificate authorities the SDK's TLS client trusts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Roots {
    /// The system's bundle, as `rustls-native-certs` finds it: every
    /// certificate of it read and parsed at the first connection (a few
    /// milliseconds of a Lambda cold start).
    System,
    /// [`AWS_ROOTS_PEM`]: seven certificates, nothing read from disk.
    Aws,
}

/// Environment variables that send the SDK's requests somewhere other than
/// AWS's own endpoints, or name the certificates to trust: with any of them
/// set, a function trusts the system's roots.
const ELSEWHERE: [&str; 5] = [
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_DYNAMODB",
    "AWS_ENDPOINT_URL_S3",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
];

impl Roots {
    /// A Lambda function's roots, from its environment read through `get`:
    /// AWS's when its requests go to AWS, else the system's. An endpoint
    /// over plain `http://` (an emulator) uses no TLS, so it alone does not
    /// make a function read and parse the system's bundle at init.
    pub fn for_function(get: impl Fn(&str) -> Option<String>) -> Roots {
        let elsewhere = ELSEWHERE.iter().any(|name| {
            get(name).is_some_and(|v| {
                let v = v.trim();
                let plain_http = name.starts_with("AWS_ENDPOINT_URL") && v.starts_with("http://");
                !v.is_empty() && !plain_http
            })
        });
        if elsewhere { Roots::System } else { Roots::Aws }
    }
}

/// The HTTPS client every SDK client of tfreg uses.
pub fn https_client(roots: Roots) -> SharedHttpClient {
    let trust = match roots {
        Roots::System => TrustStore::default(),
        Roots::Aws => TrustStore::empty().with_pem_certificate(AWS_ROOTS_PEM.as_bytes()),
    };
    let context = TlsContext::builder()
        .with_trust_store(trust)
        .build()
        .expect("a TLS context is built from any trust store");
    aws_smithy_http_client::Builder::new()
        .tls_provider(Provider::Rustls(CryptoMode::Ring))
        .tls_context(context)
        .build_https()
}

/// DynamoDB answers in milliseconds. After connecting, the SDK waits for an
/// answer without limit: a store that accepts connections but does not answer
/// would hold a request until Lambda ends the function (a gateway error, no
/// `Retry-After`). Bounded here, retries included, well within the read
/// functions' 10 s, so the client gets a 503 with `Retry-After` instead.
#[cfg(feature = "dynamodb")]
const DYNAMODB_ATTEMPT_TIMEOUT: Duration = Duration::from_secs(3);
#[cfg(feature = "dynamodb")]
const DYNAMODB_OPERATION_TIMEOUT: Duration = Duration::from_secs(7);
/// Longest silence from S3 within a response (its first byte included): large
/// archives stream for as long as they need, a hung S3 is given up on.
#[cfg(feature = "s3")]
const S3_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// The SDK's configuration is missing something it needs.
#[derive(Debug, thiserror::Error)]
#[error("{0} is not set (the AWS SDK's standard variable)")]
pub struct MissingSetting(pub &'static str);

/// A Lambda function's SDK configuration, from what Lambda puts in its
/// environment and nothing searched for elsewhere: `AWS_REGION`, and the
/// credentials of the function's role from `AWS_ACCESS_KEY_ID`,
/// `AWS_SECRET_ACCESS_KEY` and `AWS_SESSION_TOKEN` (read at each signing, as
/// the SDK's environment provider does). No profile files, instance metadata,
/// web identity or SSO: [`sdk_config`]'s search through them is never called
/// from a function, so its code (an STS client among it) is not linked into
/// one. `AWS_ENDPOINT_URL*` are applied per client ([`endpoint_url`]).
pub fn function_sdk_config(
    roots: Roots,
    get: impl Fn(&str) -> Option<String>,
) -> Result<SdkConfig, MissingSetting> {
    use aws_credential_types::provider::SharedCredentialsProvider;
    let region = ["AWS_REGION", "AWS_DEFAULT_REGION"]
        .into_iter()
        .find_map(|name| get(name).filter(|v| !v.trim().is_empty()))
        .ok_or(MissingSetting("AWS_REGION"))?;
    let sleep = aws_smithy_async::rt::sleep::default_async_sleep()
        .expect("the SDK's tokio sleep is compiled in (feature rt-tokio)");
    Ok(SdkConfig::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(aws_config::Region::new(region))
        .credentials_provider(SharedCredentialsProvider::new(
            aws_config::environment::EnvironmentVariableCredentialsProvider::new(),
        ))
        .http_client(https_client(roots))
        .sleep_impl(sleep)
        .time_source(aws_smithy_async::time::SharedTimeSource::default())
        .retry_config(aws_config::retry::RetryConfig::standard())
        .build())
}

/// The endpoint a function's client of `service` (`DYNAMODB`, `S3`) is sent
/// to: `AWS_ENDPOINT_URL_<SERVICE>`, else `AWS_ENDPOINT_URL`, else AWS's own.
pub fn endpoint_url(get: impl Fn(&str) -> Option<String>, service: &str) -> Option<String> {
    [
        format!("AWS_ENDPOINT_URL_{service}"),
        "AWS_ENDPOINT_URL".to_string(),
    ]
    .iter()
    .find_map(|name| get(name).filter(|v| !v.trim().is_empty()))
}

/// The SDK's shared configuration from the standard environment
/// (`AWS_REGION`, the credentials chain, `AWS_ENDPOINT_URL*`), its TLS
/// trusting `roots`.
pub async fn sdk_config(roots: Roots) -> Result<SdkConfig, MissingSetting> {
    let sdk = aws_config::defaults(BehaviorVersion::latest())
        .http_client(https_client(roots))
        .load()
        .await;
    if sdk.region().is_none() {
        return Err(MissingSetting("AWS_REGION"));
    }
    Ok(sdk)
}

/// A DynamoDB client with the registry's timeouts; `endpoint` overrides the
/// environment's (tests run emulators of their own).
#[cfg(feature = "dynamodb")]
pub fn dynamodb_client(sdk: &SdkConfig, endpoint: Option<&str>) -> aws_sdk_dynamodb::Client {
    let mut config = aws_sdk_dynamodb::config::Builder::from(sdk).timeout_config(
        aws_config::timeout::TimeoutConfig::builder()
            .operation_attempt_timeout(DYNAMODB_ATTEMPT_TIMEOUT)
            .operation_timeout(DYNAMODB_OPERATION_TIMEOUT)
            .build(),
    );
    // Set only when given: `from(sdk)` holds the environment's URL already.
    if let Some(url) = endpoint {
        config.set_endpoint_url(Some(url.to_string()));
    }
    if let Some(recorder) = record::recorder() {
        config.push_interceptor(recorder);
    }
    aws_sdk_dynamodb::Client::from_conf(config.build())
}

/// An S3 client with the registry's timeouts; path-style addressing for
/// emulators; `endpoint` overrides the environment's.
#[cfg(feature = "s3")]
pub fn s3_client(
    sdk: &SdkConfig,
    endpoint: Option<&str>,
    force_path_style: bool,
) -> aws_sdk_s3::Client {
    let mut config = aws_sdk_s3::config::Builder::from(sdk)
        .force_path_style(force_path_style)
        // Presigned PUTs must not demand checksum headers the uploader does not send.
        .request_checksum_calculation(aws_sdk_s3::config::RequestChecksumCalculation::WhenRequired)
        .timeout_config(
            aws_config::timeout::TimeoutConfig::builder()
                .read_timeout(S3_READ_TIMEOUT)
                .build(),
        );
    if let Some(url) = endpoint {
        config.set_endpoint_url(Some(url.to_string()));
    }
    if let Some(recorder) = record::recorder() {
        config.push_interceptor(recorder);
    }
    aws_sdk_s3::Client::from_conf(config.build())
}

/// The raw HTTP response of every AWS SDK client (DynamoDB and S3 share it).
pub(crate) type HttpResponse = aws_smithy_runtime_api::client::orchestrator::HttpResponse;

/// Error codes of DynamoDB and S3 that mean "slow down" or "try again".
const TRANSIENT_CODES: [&str; 10] = [
    "ThrottlingException",
    "ProvisionedThroughputExceededException",
    "RequestLimitExceeded",
    "TooManyRequestsException",
    "SlowDown",
    "ServiceUnavailable",
    "InternalServerError",
    "InternalError",
    "RequestTimeout",
    "TransactionInProgressException",
];

/// A DynamoDB and an S3 client from the standard environment, trusting the
/// system's roots (the `tfreg` CLI working on a stack's stores directly).
#[cfg(all(feature = "dynamodb", feature = "s3"))]
pub async fn clients(
    s3_force_path_style: bool,
) -> Result<(aws_sdk_dynamodb::Client, aws_sdk_s3::Client), MissingSetting> {
    let sdk = sdk_config(Roots::System).await?;
    Ok((
        dynamodb_client(&sdk, None),
        s3_client(&sdk, None, s3_force_path_style),
    ))
}

/// A failed AWS SDK call (DynamoDB or S3: both use the same error types) as a
/// short [`StoreError`]: "Code: message" for service errors, the whole chain
/// for transport errors. Transport failures, timeouts, throttling and 5xx
/// answers are [`StoreError::Unavailable`]; anything else (a missing table or
/// bucket, access denied, a request we built wrong) is [`StoreError::Internal`]:
/// retrying will not fix it, an operator must.
pub(crate) fn sdk_error<E>(e: SdkError<E, HttpResponse>) -> StoreError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    let transient = match &e {
        SdkError::TimeoutError(_) | SdkError::DispatchFailure(_) | SdkError::ResponseError(_) => {
            true
        }
        SdkError::ConstructionFailure(_) => false,
        SdkError::ServiceError(s) => {
            let status = s.raw().status().as_u16();
            status >= 500 || status == 429 || e.code().is_some_and(|c| TRANSIENT_CODES.contains(&c))
        }
        _ => false,
    };
    let detail = match (e.code(), e.message()) {
        (Some(code), Some(message)) => format!("{code}: {message}"),
        (Some(code), None) => code.to_string(),
        _ => DisplayErrorContext(&e).to_string(),
    };
    if transient {
        StoreError::Unavailable(detail)
    } else {
        StoreError::Internal(detail)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls_pki_types::CertificateDer;
    use rustls_pki_types::pem::PemObject;

    fn env(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| {
            pairs
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn a_functions_endpoint_is_its_services_then_the_global_one() {
        let both = env(&[
            ("AWS_ENDPOINT_URL", "http://all"),
            ("AWS_ENDPOINT_URL_DYNAMODB", "http://dynamo"),
        ]);
        assert_eq!(
            endpoint_url(&both, "DYNAMODB").as_deref(),
            Some("http://dynamo")
        );
        assert_eq!(endpoint_url(&both, "S3").as_deref(), Some("http://all"));
        assert_eq!(
            endpoint_url(env(&[("AWS_ENDPOINT_URL_S3", " ")]), "S3"),
            None
        );
    }

    #[tokio::test]
    async fn a_functions_sdk_config_is_lambdas_environment() {
        let err = function_sdk_config(Roots::Aws, env(&[])).unwrap_err();
        assert_eq!(err.0, "AWS_REGION");
        let sdk =
            function_sdk_config(Roots::Aws, env(&[("AWS_DEFAULT_REGION", "eu-west-1")])).unwrap();
        assert_eq!(sdk.region().map(|r| r.as_ref()), Some("eu-west-1"));
        let sdk = function_sdk_config(
            Roots::Aws,
            env(&[
                ("AWS_REGION", "us-east-2"),
                ("AWS_DEFAULT_REGION", "eu-west-1"),
            ]),
        )
        .unwrap();
        assert_eq!(sdk.region().map(|r| r.as_ref()), Some("us-east-2"));
        assert!(sdk.credentials_provider().is_some());
        assert!(sdk.sleep_impl().is_some());
        assert!(sdk.http_client().is_some());
    }

    /// Amazon Root CA 1-4, Starfield Services Root G2 (which cross-signs
    /// them), DigiCert Global Root CA and G2: each a trust anchor.
    #[test]
    fn the_compiled_in_roots_are_seven_parsable_certificates() {
        let certs: Vec<CertificateDer> = CertificateDer::pem_slice_iter(AWS_ROOTS_PEM.as_bytes())
            .collect::<Result<_, _>>()
            .expect("valid PEM");
        assert!(!certs.is_empty(), "no certificate in aws-roots.pem");
        assert_eq!(certs.len(), 7);
        for cert in &certs {
            webpki::anchor_from_trusted_cert(cert).expect("a trust anchor");
        }
    }

    /// The emulators are plain HTTP: the client reaches them whichever roots
    /// it trusts (a function sent to them trusts the system's, see below).
    /// The SDK reads the roots when it makes its connector, at the first
    /// request (aws-smithy-http-client's `rustls_root_certs`: each PEM item
    /// added as an anchor, a panic on one that does not parse), so with
    /// `Roots::Aws` this also runs the SDK's own parse of aws-roots.pem.
    #[cfg(all(feature = "dynamodb", feature = "s3"))]
    #[tokio::test]
    async fn the_emulators_answer_over_plain_http_with_either_roots() {
        for var in [
            "AWS_ENDPOINT_URL_DYNAMODB",
            "AWS_ENDPOINT_URL_S3",
            "AWS_REGION",
        ] {
            assert!(
                std::env::var(var).is_ok(),
                "{var} is not set: run scripts/test, which starts the emulators (.ci/emulators start)"
            );
        }
        for roots in [Roots::Aws, Roots::System] {
            let sdk = sdk_config(roots).await.expect("AWS_REGION");
            let dynamodb = dynamodb_client(&sdk, None);
            let s3 = s3_client(&sdk, None, true);
            dynamodb
                .list_tables()
                .send()
                .await
                .unwrap_or_else(|e| panic!("{roots:?}: DynamoDB ListTables: {e:?}"));
            s3.list_buckets()
                .send()
                .await
                .unwrap_or_else(|e| panic!("{roots:?}: S3 ListBuckets: {e:?}"));
        }
    }

    #[test]
    fn a_function_trusts_aws_roots_unless_sent_elsewhere() {
        assert_eq!(Roots::for_function(|_| None), Roots::Aws);
        assert_eq!(
            Roots::for_function(|n| (n == "AWS_REGION").then(|| "eu-west-1".into())),
            Roots::Aws
        );
        for name in ELSEWHERE {
            let get = |n: &str| (n == name).then(|| "https://127.0.0.1:8000".to_string());
            assert_eq!(Roots::for_function(get), Roots::System, "{name}");
            // Plain HTTP to an emulator uses no TLS: only a file or
            // directory of certificates still asks for the system's roots.
            let plain = |n: &str| (n == name).then(|| "http://127.0.0.1:8000".to_string());
            let expected = if name.starts_with("AWS_ENDPOINT_URL") {
                Roots::Aws
            } else {
                Roots::System
            };
            assert_eq!(Roots::for_function(plain), expected, "{name}");
            assert_eq!(
                Roots::for_function(|n| (n == name).then(String::new)),
                Roots::Aws
            );
        }
    }
}
