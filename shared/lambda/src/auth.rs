//! The `auth` function's init (feature `signin`): the client secret read
//! once from SSM Parameter Store or Secrets Manager (through the SDK
//! configuration, and so the HTTPS client, of the store's own clients),
//! then the identity provider's discovery document and keys, fetched only
//! from public addresses ([`Reach::Public`]; loopback too only under the
//! tests' [`OIDC_ALLOW_LOOPBACK`](crate::signin::OIDC_ALLOW_LOOPBACK)).
//! The secret never reaches a log line: it is held in [`Secret`], whose
//! `Debug` prints `Secret(..)`, and errors name the reference, not the value.

use tfreg_auth::reach::{Reach, guarded_client, system_tls};
use tfreg_auth::{
    Auth, AuthError, CiSettings, Exchange, LoginSettings, OidcConfig, Secret, Upstream,
};
use tfreg_store::aws::record::recorder;
use tfreg_store::aws::{SdkConfig, endpoint_url};

use crate::signin::{SecretRef, SignIn};

/// What can stop the auth function from starting.
#[derive(Debug, thiserror::Error)]
pub enum SignInError {
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error("reading the client secret {reference}: {reason}")]
    Secret { reference: String, reason: String },
    #[error("the client secret {0} is empty")]
    EmptySecret(String),
    #[error("the identity provider {issuer}: {source}")]
    Provider { issuer: String, source: AuthError },
    #[error("the CI token exchange's settings: {0}")]
    Ci(String),
}

/// The client secret `reference` names, read now. `get` reads the
/// environment (`AWS_ENDPOINT_URL_SSM`, `AWS_ENDPOINT_URL_SECRETS_MANAGER`
/// or `AWS_ENDPOINT_URL` send the request elsewhere, as for the store).
pub async fn read_secret(
    sdk: &SdkConfig,
    reference: &SecretRef,
    get: impl Fn(&str) -> Option<String>,
) -> Result<Secret, SignInError> {
    let failed = |reason: String| SignInError::Secret {
        reference: describe(reference),
        reason,
    };
    let value = match reference {
        SecretRef::Parameter(name) => {
            let mut config = aws_sdk_ssm::config::Builder::from(sdk);
            if let Some(url) = endpoint_url(&get, "SSM") {
                config.set_endpoint_url(Some(url));
            }
            if let Some(recorder) = recorder() {
                config.push_interceptor(recorder);
            }
            let out = aws_sdk_ssm::Client::from_conf(config.build())
                .get_parameter()
                .name(name)
                .with_decryption(true)
                .send()
                .await
                .map_err(|e| failed(crate::error_chain(&e)))?;
            out.parameter
                .and_then(|p| p.value)
                .ok_or_else(|| failed("the answer holds no value".into()))?
        }
        SecretRef::SecretsManager(arn) => {
            let mut config = aws_sdk_secretsmanager::config::Builder::from(sdk);
            if let Some(url) = endpoint_url(&get, "SECRETS_MANAGER") {
                config.set_endpoint_url(Some(url));
            }
            if let Some(recorder) = recorder() {
                config.push_interceptor(recorder);
            }
            let out = aws_sdk_secretsmanager::Client::from_conf(config.build())
                .get_secret_value()
                .secret_id(arn)
                .send()
                .await
                .map_err(|e| failed(crate::error_chain(&e)))?;
            out.secret_string
                .ok_or_else(|| failed("the secret holds no SecretString".into()))?
        }
    };
    let value = value.trim_end_matches(['\r', '\n']);
    if value.is_empty() {
        return Err(SignInError::EmptySecret(describe(reference)));
    }
    Ok(Secret::new(value))
}

fn describe(reference: &SecretRef) -> String {
    match reference {
        SecretRef::Parameter(name) => format!("(SSM parameter {name})"),
        SecretRef::SecretsManager(arn) => format!("(Secrets Manager secret {arn})"),
    }
}

/// Where the provider's and the CI issuers' URLs may lead: public
/// addresses, and loopback too under the tests'
/// [`OIDC_ALLOW_LOOPBACK`](crate::signin::OIDC_ALLOW_LOOPBACK).
pub fn reach(allow_loopback: bool) -> Reach {
    if allow_loopback {
        Reach::PublicAndLoopback
    } else {
        Reach::Public
    }
}

/// The sign-in handlers: `terraform login` and the UI's single sign-on
/// where an identity provider is configured (`signin`: the secret read, the
/// provider discovered), the CI token exchange where CI issuers are. Either
/// works without the other; `None` when neither is configured.
pub async fn auth(
    signin: Option<&SignIn>,
    sdk: &SdkConfig,
    get: impl Fn(&str) -> Option<String>,
) -> Result<Option<Auth>, SignInError> {
    let allow_loopback = crate::env::flag(&get, crate::signin::OIDC_ALLOW_LOOPBACK)?;
    let reach = reach(allow_loopback);
    let mut auth = Auth::new();
    if let Some(signin) = signin {
        let (client_id, reference) = signin.client()?;
        let client_secret = read_secret(sdk, reference, &get).await?;
        let provider = |source| SignInError::Provider {
            issuer: signin.issuer.clone(),
            source,
        };
        let http = guarded_client(system_tls().map_err(provider)?, reach).map_err(provider)?;
        let config = OidcConfig::new(&signin.issuer, client_id, client_secret);
        let upstream = Upstream::discover_within(config, http, reach)
            .await
            .map_err(provider)?;
        tracing::info!(
            issuer = signin.issuer,
            client_id,
            "terraform login signs in with this identity provider"
        );
        auth = auth.with_login(
            upstream,
            LoginSettings {
                ports: signin.ports,
                token_ttl_secs: signin.token_ttl_secs,
                ..LoginSettings::default()
            },
        );
    }
    // The CI token exchange, where CI issuers are allow-listed: their
    // documents and keys fetched under the same address rules, when a
    // token first names one.
    if let Some(ci) = CiSettings::from_lookup(&get).map_err(|e| SignInError::Ci(e.to_string()))? {
        let ci_error = |e: AuthError| SignInError::Ci(e.to_string());
        let http = guarded_client(system_tls().map_err(ci_error)?, reach).map_err(ci_error)?;
        tracing::info!(
            issuers = ?ci.issuers,
            "CI jobs of these issuers may exchange their tokens"
        );
        auth = auth.with_exchange(Exchange::new(ci, http));
    }
    Ok((!auth.is_empty()).then_some(auth))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_exchange_s_settings_are_the_names_the_function_documents() {
        use crate::signin::{CI_AUDIENCE, CI_ISSUERS, CI_MAX_TOKEN_LIFETIME, CI_TOKEN_TTL};
        use tfreg_auth::ci::{ENV_AUDIENCE, ENV_ISSUERS, ENV_MAX_TOKEN_LIFETIME, ENV_TOKEN_TTL};
        assert_eq!(
            [CI_ISSUERS, CI_AUDIENCE, CI_TOKEN_TTL, CI_MAX_TOKEN_LIFETIME],
            [
                ENV_ISSUERS,
                ENV_AUDIENCE,
                ENV_TOKEN_TTL,
                ENV_MAX_TOKEN_LIFETIME
            ]
        );
    }
}
