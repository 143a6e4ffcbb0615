//! The second baseline of `tfreg-bench lambda`: the smallest `lambda_http`
//! function that does what tfreg's store-reading functions must do on every
//! request, one strongly consistent DynamoDB `GetItem`, and nothing of tfreg.
//!
//! The hello-world (`bench/lambda-hello`) reads nothing, so no function that
//! reads the table can come near its first response: the round trip to
//! DynamoDB (a new connection, the request signed, the answer parsed) is
//! longer than the hello-world's whole cold start. This function is that
//! unavoidable work alone, built with the same crates and choices as the
//! functions (shared/store/src/aws.rs): `aws-sdk-dynamodb` without default
//! features, aws-smithy-http-client with rustls and *ring* trusting AWS's
//! roots, an `SdkConfig` of the region and the environment's credentials
//! (no search through profiles or instance metadata), the same timeouts.
//! What tfreg takes beyond it is tfreg's own.
//!
//! It reads the versions index of the provider `acme/widget` (the item the
//! provider-versions route reads: pk `PROVIDER#acme/widget`, sk `INDEX`) from
//! the table `TFREG_TABLE`, and answers 200 when the item exists, else 404.

use std::time::Duration;

use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_credential_types::provider::SharedCredentialsProvider;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::AttributeValue;
use aws_smithy_http_client::tls::rustls_provider::CryptoMode;
use aws_smithy_http_client::tls::{Provider, TlsContext, TrustStore};
use lambda_http::{Body, Error, Request, Response, service_fn};

/// The roots AWS's endpoints chain to: the functions' own list (a file, not a crate).
const AWS_ROOTS_PEM: &str = include_str!("../../../shared/store/src/aws-roots.pem");

/// The item read: the versions index of `acme/widget`.
const PK: &str = "PROVIDER#acme/widget";
const SK: &str = "INDEX";

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// A DynamoDB client from Lambda's environment, as the functions build theirs.
fn client() -> Result<Client, Error> {
    let region = env("AWS_REGION")
        .or_else(|| env("AWS_DEFAULT_REGION"))
        .ok_or("AWS_REGION is not set")?;
    let tls = TlsContext::builder()
        .with_trust_store(TrustStore::empty().with_pem_certificate(AWS_ROOTS_PEM.as_bytes()))
        .build()?;
    let https = aws_smithy_http_client::Builder::new()
        .tls_provider(Provider::Rustls(CryptoMode::Ring))
        .tls_context(tls)
        .build_https();
    let sdk = SdkConfig::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new(region))
        .credentials_provider(SharedCredentialsProvider::new(
            aws_config::environment::EnvironmentVariableCredentialsProvider::new(),
        ))
        .http_client(https)
        .sleep_impl(aws_smithy_async::rt::sleep::default_async_sleep().ok_or("no tokio sleep")?)
        .time_source(aws_smithy_async::time::SharedTimeSource::default())
        .retry_config(RetryConfig::standard())
        .build();
    let mut config = aws_sdk_dynamodb::config::Builder::from(&sdk).timeout_config(
        TimeoutConfig::builder()
            .operation_attempt_timeout(Duration::from_secs(3))
            .operation_timeout(Duration::from_secs(7))
            .build(),
    );
    config.set_endpoint_url(env("AWS_ENDPOINT_URL_DYNAMODB").or_else(|| env("AWS_ENDPOINT_URL")));
    Ok(Client::from_conf(config.build()))
}

async fn handle(client: &Client, table: &str) -> Result<Response<Body>, Error> {
    let item = client
        .get_item()
        .table_name(table)
        .key("pk", AttributeValue::S(PK.into()))
        .key("sk", AttributeValue::S(SK.into()))
        .consistent_read(true)
        .send()
        .await?
        .item;
    let (status, body) = match item {
        Some(_) => (200, "{\"found\":true}"),
        None => (404, "{\"errors\":[\"Not Found\"]}"),
    };
    Ok(Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Body::from(body))?)
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let client = client()?;
    let table = env("TFREG_TABLE").ok_or("TFREG_TABLE is not set")?;
    let (client, table) = (&client, table.as_str());
    lambda_http::run(service_fn(move |_request: Request| handle(client, table))).await
}
