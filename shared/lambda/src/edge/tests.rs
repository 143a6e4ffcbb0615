//! The key's read, sent without the SDK clients, compared with
//! aws-sdk-ssm's `GetParameter` and aws-sdk-secretsmanager's
//! `GetSecretValue` (dev-dependencies) for the same `SdkConfig`: the same
//! request on the wire, signature included; and what each answer gives.
//! Reading a real parameter and secret (on moto) is in
//! tests/suite/cloudfront_signer.rs.

use aws_smithy_types::retry::RetryConfig;

use super::*;
use crate::sdk_call::wire::{Capture, NoUserAgent, sdk_config, without_invocation_id};

const PEM: &str = "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n";

#[tokio::test]
async fn the_requests_are_the_sdks_signature_included() {
    let parameter = serde_json::json!({"Parameter": {"Name": "/k", "Type": "SecureString", "Value": PEM, "Version": 1}}).to_string();
    let secret = serde_json::json!({"ARN": "arn", "Name": "k", "SecretString": PEM}).to_string();
    for token in [None, Some("IQoJb3JpZ2luX2VjEXAMPLE/token+=")] {
        for (region, endpoint) in [
            ("us-east-1", None),
            ("cn-north-1", None),
            ("us-gov-west-1", None),
            ("eu-west-1", Some("http://127.0.0.1:9001")),
        ] {
            for reference in [
                SecretRef::Parameter("/tfreg/archive-signing-key-a".into()),
                SecretRef::Parameter(
                    "arn:aws:ssm:eu-west-1:123456789012:parameter/tfreg/archive-signing-key-b"
                        .into(),
                ),
                SecretRef::SecretsManager(
                    "arn:aws:secretsmanager:eu-west-1:123456789012:secret:tfreg-key-AbCdEf".into(),
                ),
            ] {
                let case = format!("{token:?} {region} {endpoint:?} {reference:?}");
                let answer = match reference {
                    SecretRef::Parameter(_) => &parameter,
                    SecretRef::SecretsManager(_) => &secret,
                };
                let get = |name: &str| {
                    matches!(
                        name,
                        "AWS_ENDPOINT_URL_SSM" | "AWS_ENDPOINT_URL_SECRETS_MANAGER"
                    )
                    .then(|| endpoint.map(str::to_string))
                    .flatten()
                };
                let ours = Capture::answering(200, answer);
                let sdk = sdk_config(ours.clone(), region, token, RetryConfig::standard());
                let value = read_key_with(
                    &sdk,
                    &reference,
                    get,
                    vec![SharedInterceptor::new(NoUserAgent)],
                )
                .await
                .unwrap();
                assert_eq!(value.as_str(), PEM, "{case}");
                let ours = without_invocation_id(ours.take());

                let theirs = Capture::answering(200, answer);
                let sdk = sdk_config(theirs.clone(), region, token, RetryConfig::standard());
                match &reference {
                    SecretRef::Parameter(name) => {
                        let mut config = aws_sdk_ssm::config::Builder::from(&sdk);
                        config.set_endpoint_url(endpoint.map(str::to_string));
                        let out = aws_sdk_ssm::Client::from_conf(config.build())
                            .get_parameter()
                            .name(name)
                            .with_decryption(true)
                            .customize()
                            .interceptor(NoUserAgent)
                            .send()
                            .await
                            .unwrap();
                        assert_eq!(out.parameter.unwrap().value.unwrap(), PEM);
                    }
                    SecretRef::SecretsManager(arn) => {
                        let mut config = aws_sdk_secretsmanager::config::Builder::from(&sdk);
                        config.set_endpoint_url(endpoint.map(str::to_string));
                        let out = aws_sdk_secretsmanager::Client::from_conf(config.build())
                            .get_secret_value()
                            .secret_id(arn)
                            .customize()
                            .interceptor(NoUserAgent)
                            .send()
                            .await
                            .unwrap();
                        assert_eq!(out.secret_string.unwrap(), PEM);
                    }
                }
                assert_eq!(ours, without_invocation_id(theirs.take()), "{case}");
            }
        }
    }
}

#[tokio::test]
async fn a_refusal_or_an_empty_answer_names_the_reference_and_never_a_value() {
    let reference = SecretRef::Parameter("/tfreg/none".into());
    for (status, body, expected) in [
        (
            400,
            r#"{"__type":"ParameterNotFound","message":"Parameter /tfreg/none not found."}"#,
            "ParameterNotFound: Parameter /tfreg/none not found. (HTTP 400)",
        ),
        (
            400,
            r#"{"__type":"com.amazonaws.kms#AccessDeniedException","message":"no"}"#,
            "AccessDeniedException: no (HTTP 400)",
        ),
        (
            200,
            r#"{"Parameter":{"Name":"/tfreg/none"}}"#,
            "the answer holds no value",
        ),
        (
            200,
            r#"{"Parameter":{"Value":"  \n"}}"#,
            "the value is empty",
        ),
        (
            200,
            r#"{"Parameter":{"Value":"-----BEGIN"#,
            "not the JSON expected",
        ),
    ] {
        let sdk = sdk_config(
            Capture::answering(status, body),
            "eu-west-1",
            None,
            RetryConfig::standard(),
        );
        let err = read_key(&sdk, &reference, |_| None).await.unwrap_err();
        let text = err.to_string();
        assert!(
            text.starts_with("reading the archive signing key (SSM parameter /tfreg/none): ")
                && text.contains(expected),
            "{text}"
        );
        assert!(!text.contains("BEGIN"), "{text}");
    }
}
