//! The signing functions' init in the `cloudfront` mode (feature
//! `cloudfront`, the read and blob functions): the CloudFront key pair's
//! private key read once from SSM Parameter Store (a SecureString, with
//! decryption) or Secrets Manager (its `SecretString`), then the signer.
//!
//! Not through aws-sdk-ssm or aws-sdk-secretsmanager (the auth function's
//! clients): each would link its generated code and endpoint rules into
//! functions whose issue asks them to stay lean ("RSA signing only, no
//! other new crates"). Each read is one JSON request (`AmazonSSM.
//! GetParameter`, `secretsmanager.GetSecretValue`, awsJson 1.1) on the SDK
//! runtime these functions already link ([`crate::sdk_call`]); endpoints
//! as those SDKs resolve them ([`service_endpoint`]).
//!
//! The key never reaches a log line or an error: errors name the
//! reference and the service's answer, never the value, and the PEM is
//! held in a [`Zeroizing`] string (wiped when dropped) until decoded.

use aws_runtime::user_agent::ApiMetadata;
use aws_smithy_runtime_api::client::interceptors::SharedInterceptor;
use aws_smithy_runtime_api::client::orchestrator::{HttpRequest, HttpResponse, OrchestratorError};
use aws_smithy_types::body::SdkBody;
use aws_smithy_types::error::display::DisplayErrorContext;
use tfreg_http::edge_url::{CloudFrontSigner, EdgeKeyError};
use tfreg_store::aws::{SdkConfig, endpoint_url};
use zeroize::Zeroizing;

use crate::config::EdgeSettings;
use crate::fill::endpoint::{Api, service_endpoint};
use crate::sdk_call::{Refused, Service, refusal};
use crate::signin::SecretRef;

/// Why the archive signing key could not be had: found at init.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveKeyError {
    #[error("reading the archive signing key {reference}: {reason}")]
    Read { reference: String, reason: String },
    #[error("the archive signing key {reference}: {source}")]
    Key {
        reference: String,
        source: EdgeKeyError,
    },
}

const SSM: Service = Service {
    name: "SSM",
    signing_name: "ssm",
    api: ApiMetadata::new("ssm", env!("CARGO_PKG_VERSION")),
};

const SECRETS_MANAGER: Service = Service {
    name: "Secrets Manager",
    signing_name: "secretsmanager",
    api: ApiMetadata::new("secretsmanager", env!("CARGO_PKG_VERSION")),
};

/// `(SSM parameter NAME)` / `(Secrets Manager secret ARN)`.
pub fn describe(reference: &SecretRef) -> String {
    match reference {
        SecretRef::Parameter(name) => format!("(SSM parameter {name})"),
        SecretRef::SecretsManager(arn) => format!("(Secrets Manager secret {arn})"),
    }
}

/// The signer `settings` describe, its key read now through `sdk`.
pub async fn signer(
    sdk: &SdkConfig,
    settings: &EdgeSettings,
    get: impl Fn(&str) -> Option<String>,
) -> Result<CloudFrontSigner, ArchiveKeyError> {
    let pem = read_key(sdk, &settings.signing_key, get).await?;
    CloudFrontSigner::new(&settings.archive_url, &settings.key_pair_id, &pem).map_err(|source| {
        ArchiveKeyError::Key {
            reference: describe(&settings.signing_key),
            source,
        }
    })
}

/// The value `reference` names, read now. `get` reads the environment
/// (`AWS_ENDPOINT_URL_SSM`, `AWS_ENDPOINT_URL_SECRETS_MANAGER` or
/// `AWS_ENDPOINT_URL` send the request elsewhere, as for the store and the
/// auth function's client secret).
pub async fn read_key(
    sdk: &SdkConfig,
    reference: &SecretRef,
    get: impl Fn(&str) -> Option<String>,
) -> Result<Zeroizing<String>, ArchiveKeyError> {
    read_key_with(sdk, reference, get, Vec::new()).await
}

/// [`read_key`], with `extra` interceptors after the SDK's (tests).
async fn read_key_with(
    sdk: &SdkConfig,
    reference: &SecretRef,
    get: impl Fn(&str) -> Option<String>,
    extra: Vec<SharedInterceptor>,
) -> Result<Zeroizing<String>, ArchiveKeyError> {
    let failed = |reason: String| ArchiveKeyError::Read {
        reference: describe(reference),
        reason,
    };
    let (service, api, env, target, body) = match reference {
        SecretRef::Parameter(name) => (
            &SSM,
            Api::Ssm,
            "SSM",
            "AmazonSSM.GetParameter",
            serde_json::json!({ "Name": name, "WithDecryption": true }),
        ),
        SecretRef::SecretsManager(arn) => (
            &SECRETS_MANAGER,
            Api::SecretsManager,
            "SECRETS_MANAGER",
            "secretsmanager.GetSecretValue",
            serde_json::json!({ "SecretId": arn }),
        ),
    };
    let overridden = endpoint_url(&get, env).or(sdk.endpoint_url().map(str::to_string));
    let endpoint = service_endpoint(
        api,
        sdk.region().map(|r| r.as_ref()),
        sdk.use_fips().unwrap_or(false),
        sdk.use_dual_stack().unwrap_or(false),
        overridden.as_deref(),
    )
    .map_err(|e| failed(e.to_string()))?;
    let operation_name = target.split_once('.').map_or(target, |(_, op)| op);
    let operation = crate::sdk_call::operation(sdk, service, operation_name, &endpoint, extra)
        .map_err(|m| failed(format!("the SDK configuration has no {}", m.0)))?
        .serializer(move |body: Vec<u8>| {
            let request = http::Request::builder()
                .method("POST")
                .uri("/")
                .header("x-amz-target", target)
                .header("content-type", "application/x-amz-json-1.1")
                .header("content-length", body.len())
                .body(SdkBody::from(body))?;
            Ok(HttpRequest::try_from(request)?)
        })
        .deserializer(deserialize)
        .build();
    let body = serde_json::to_vec(&body).map_err(|e| failed(e.to_string()))?;
    let answer = operation
        .invoke(body)
        .await
        .map_err(|e| failed(DisplayErrorContext(&e).to_string()))?;
    let value = match reference {
        SecretRef::Parameter(_) => answer.parameter.and_then(|p| p.value),
        SecretRef::SecretsManager(_) => answer.secret_string,
    }
    .map(Zeroizing::new)
    .ok_or_else(|| failed("the answer holds no value".into()))?;
    if value.trim().is_empty() {
        return Err(failed("the value is empty".into()));
    }
    Ok(value)
}

/// What either service answers (the fields read, no others).
#[derive(serde::Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Answer {
    parameter: Option<Parameter>,
    secret_string: Option<String>,
}

/// The runtime may log an output: never this one's value.
impl std::fmt::Debug for Answer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Answer(..)")
    }
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Parameter {
    value: Option<String>,
}

fn deserialize(response: &HttpResponse) -> Result<Answer, OrchestratorError<Refused>> {
    if !response.status().is_success() {
        return Err(refusal(response));
    }
    let bytes = response.body().bytes().unwrap_or_default();
    // The error names where parsing stopped, never the text.
    serde_json::from_slice(bytes).map_err(|e| {
        OrchestratorError::other(format!(
            "the answer is not the JSON expected (line {}, column {})",
            e.line(),
            e.column()
        ))
    })
}
