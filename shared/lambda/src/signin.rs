//! The sign-in settings of the Lambda functions (issue 21), read from the
//! environment like the rest of the functions' settings, and pure: `terraform
//! login` (login.v1) brokered to one OpenID Provider.
//!
//! Every function that answers discovery reads [`OIDC_ISSUER`] and
//! [`LOGIN_PORTS`] (login.v1 is advertised only with an issuer); the `auth`
//! function also needs [`OIDC_CLIENT_ID`] and [`OIDC_CLIENT_SECRET`], a
//! *reference* to the client secret in SSM Parameter Store or Secrets
//! Manager, which it reads once at init (never from the environment
//! itself, never logged).

use tfreg_model::login::{CLI_CLIENT_ID, PortRange};
use tfreg_model::protocol::LoginV1;
use tfreg_model::signin::DEFAULT_LOGIN_TOKEN_TTL_SECS;
use tfreg_model::upstream::check_origin_url;

use crate::env::ConfigError;

/// The provider's issuer URL, exactly as its ID tokens' `iss`; unset or
/// empty: no sign-in (no login.v1, the auth function answers 404).
pub const OIDC_ISSUER: &str = "TFREG_OIDC_ISSUER";
/// The registry's client id at the provider (auth function).
pub const OIDC_CLIENT_ID: &str = "TFREG_OIDC_CLIENT_ID";
/// Where the client secret is (auth function): an SSM parameter's name
/// (`/tfreg/oidc-client-secret`) or ARN (a SecureString), or a Secrets
/// Manager secret's ARN (its SecretString).
pub const OIDC_CLIENT_SECRET: &str = "TFREG_OIDC_CLIENT_SECRET";
/// The loopback ports Terraform may listen on, `MIN-MAX`; default
/// [`DEFAULT_LOGIN_PORTS`].
pub const LOGIN_PORTS: &str = "TFREG_LOGIN_PORTS";
/// Lifetime in seconds of a token a sign-in issues; default 12 h, from
/// [`MIN_LOGIN_TOKEN_TTL_SECS`] to [`MAX_LOGIN_TOKEN_TTL_SECS`].
pub const LOGIN_TOKEN_TTL: &str = "TFREG_LOGIN_TOKEN_TTL";
/// The identity provider's name on the UI's sign-in page ("Sign in with
/// NAME"); default: the issuer's host.
pub const OIDC_DISPLAY_NAME: &str = "TFREG_OIDC_DISPLAY_NAME";
/// Tests only: `true` lets the provider's URLs lead to loopback (the
/// emulated tests run the provider on this machine). Everything else
/// special-purpose stays refused. Never set by the template.
pub const OIDC_ALLOW_LOOPBACK: &str = "TFREG_OIDC_ALLOW_LOOPBACK";

/// The CI token exchange's allow-listed issuers (comma-separated; unset: no
/// exchange), its audience, issued token lifetime and CI token lifetime cap:
/// read by `tfreg_auth::CiSettings::from_lookup` (the auth function's test
/// checks the names are the same).
pub const CI_ISSUERS: &str = "TFREG_CI_ISSUERS";
pub const CI_AUDIENCE: &str = "TFREG_CI_AUDIENCE";
pub const CI_TOKEN_TTL: &str = "TFREG_CI_TOKEN_TTL";
pub const CI_MAX_TOKEN_LIFETIME: &str = "TFREG_CI_MAX_TOKEN_LIFETIME";
pub const DEFAULT_LOGIN_PORTS: &str = "10000-10010";
pub const MIN_LOGIN_TOKEN_TTL_SECS: u64 = 300;
pub const MAX_LOGIN_TOKEN_TTL_SECS: u64 = 30 * 86_400;

/// Where the client secret is kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretRef {
    /// An SSM Parameter Store parameter (name or ARN), read with decryption.
    Parameter(String),
    /// A Secrets Manager secret (ARN), its `SecretString`.
    SecretsManager(String),
}

impl SecretRef {
    /// `arn:<partition>:secretsmanager:...:secret:...`, or an SSM
    /// parameter: `arn:<partition>:ssm:...:parameter/...` or a name
    /// (`/a/b` or `name`, SSM's characters only).
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        if let Some(rest) = text.strip_prefix("arn:") {
            let parts: Vec<&str> = rest.splitn(5, ':').collect();
            let [partition, service, region, account, resource] = parts[..] else {
                return Err(format!("{text:?} is not an ARN"));
            };
            let ok_partition = partition == "aws" || partition.starts_with("aws-");
            let ok_account = account.len() == 12 && account.bytes().all(|b| b.is_ascii_digit());
            if !ok_partition || region.is_empty() || !ok_account {
                return Err(format!("{text:?} is not an ARN"));
            }
            return match service {
                "secretsmanager" if resource.starts_with("secret:") && resource.len() > 7 => {
                    Ok(SecretRef::SecretsManager(text.to_string()))
                }
                "ssm" if resource.starts_with("parameter/") && resource.len() > 10 => {
                    Ok(SecretRef::Parameter(text.to_string()))
                }
                _ => Err(format!(
                    "{text:?}: an SSM parameter or a Secrets Manager secret, not {service}:{resource}"
                )),
            };
        }
        let ssm_chars = |c: char| c.is_ascii_alphanumeric() || "_.-/".contains(c);
        if text.is_empty() || text.len() > 2048 || !text.chars().all(ssm_chars) {
            return Err(format!(
                "{text:?} is neither an ARN nor an SSM parameter name"
            ));
        }
        Ok(SecretRef::Parameter(text.to_string()))
    }
}

/// The functions' sign-in settings, present when an issuer is configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignIn {
    pub issuer: String,
    pub ports: PortRange,
    pub client_id: Option<String>,
    pub client_secret: Option<SecretRef>,
    pub token_ttl_secs: u64,
    /// [`OIDC_ALLOW_LOOPBACK`].
    pub allow_loopback: bool,
    /// [`OIDC_DISPLAY_NAME`], or the issuer's host.
    pub display_name: String,
}

fn invalid(name: &'static str, reason: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        name,
        reason: reason.into(),
    }
}

fn non_empty(get: &impl Fn(&str) -> Option<String>, name: &str) -> Option<String> {
    get(name)
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

/// `MIN-MAX`, both ends Terraform accepts.
pub fn parse_ports(text: &str) -> Result<PortRange, String> {
    let (min, max) = text
        .split_once('-')
        .ok_or_else(|| format!("{text:?}: MIN-MAX, e.g. {DEFAULT_LOGIN_PORTS}"))?;
    let port = |p: &str| p.trim().parse::<u16>().map_err(|e| format!("{p:?}: {e}"));
    PortRange::new(port(min)?, port(max)?).map_err(|e| e.to_string())
}

/// The issuer: an `https://` URL to a public host (a name, or a public IP
/// address), or with `allow_loopback` an `http(s)://` URL to loopback.
fn check_issuer(text: &str, allow_loopback: bool) -> Result<(), String> {
    let url = url::Url::parse(text).map_err(|e| format!("{text:?}: {e}"))?;
    if url.query().is_some() || url.fragment().is_some() {
        return Err(format!("{text:?}: an issuer has no query or fragment"));
    }
    let loopback = match url.host() {
        Some(url::Host::Domain(d)) => d == "localhost",
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    };
    if allow_loopback && loopback && matches!(url.scheme(), "http" | "https") {
        return Ok(());
    }
    check_origin_url(&url).map_err(|e| e.to_string())
}

impl SignIn {
    /// The settings through `get`; `None` without an issuer.
    pub fn from_lookup(get: &impl Fn(&str) -> Option<String>) -> Result<Option<Self>, ConfigError> {
        let allow_loopback = crate::env::flag(get, OIDC_ALLOW_LOOPBACK)?;
        let Some(issuer) = non_empty(get, OIDC_ISSUER) else {
            return Ok(None);
        };
        check_issuer(&issuer, allow_loopback).map_err(|e| invalid(OIDC_ISSUER, e))?;
        let ports = non_empty(get, LOGIN_PORTS).unwrap_or_else(|| DEFAULT_LOGIN_PORTS.into());
        let ports = parse_ports(&ports).map_err(|e| invalid(LOGIN_PORTS, e))?;
        let client_secret = non_empty(get, OIDC_CLIENT_SECRET)
            .map(|r| SecretRef::parse(&r))
            .transpose()
            .map_err(|e| invalid(OIDC_CLIENT_SECRET, e))?;
        let token_ttl_secs = match non_empty(get, LOGIN_TOKEN_TTL) {
            None => DEFAULT_LOGIN_TOKEN_TTL_SECS,
            Some(v) => v
                .parse::<u64>()
                .ok()
                .filter(|s| (MIN_LOGIN_TOKEN_TTL_SECS..=MAX_LOGIN_TOKEN_TTL_SECS).contains(s))
                .ok_or_else(|| {
                    invalid(
                        LOGIN_TOKEN_TTL,
                        format!(
                            "{v:?} is not a number of seconds from {MIN_LOGIN_TOKEN_TTL_SECS} to {MAX_LOGIN_TOKEN_TTL_SECS}"
                        ),
                    )
                })?,
        };
        let display_name =
            tfreg_model::sso::display_name(&issuer, non_empty(get, OIDC_DISPLAY_NAME).as_deref())
                .map_err(|e| invalid(OIDC_DISPLAY_NAME, e.to_string()))?;
        Ok(Some(SignIn {
            display_name,
            issuer,
            ports,
            client_id: non_empty(get, OIDC_CLIENT_ID),
            client_secret,
            token_ttl_secs,
            allow_loopback,
        }))
    }

    /// What discovery advertises.
    pub fn login_v1(&self) -> LoginV1 {
        LoginV1::new(CLI_CLIENT_ID, self.ports)
    }

    /// The client id and secret reference the auth function needs.
    pub fn client(&self) -> Result<(&str, &SecretRef), ConfigError> {
        let id = self
            .client_id
            .as_deref()
            .ok_or(ConfigError::Missing(OIDC_CLIENT_ID))?;
        let secret = self
            .client_secret
            .as_ref()
            .ok_or(ConfigError::Missing(OIDC_CLIENT_SECRET))?;
        Ok((id, secret))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn signin(vars: &[(&str, &str)]) -> Result<Option<SignIn>, ConfigError> {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        SignIn::from_lookup(&|k: &str| map.get(k).cloned())
    }

    #[test]
    fn no_issuer_no_sign_in_and_defaults_otherwise() {
        assert_eq!(signin(&[]).unwrap(), None);
        assert_eq!(signin(&[(OIDC_ISSUER, " ")]).unwrap(), None);
        let s = signin(&[(OIDC_ISSUER, "https://idp.example.com/")])
            .unwrap()
            .unwrap();
        assert_eq!(s.issuer, "https://idp.example.com/", "kept byte for byte");
        assert_eq!(s.display_name, "idp.example.com");
        let named = signin(&[
            (OIDC_ISSUER, "https://idp.example.com/"),
            (OIDC_DISPLAY_NAME, "Acme Okta"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(named.display_name, "Acme Okta");
        let err = signin(&[
            (OIDC_ISSUER, "https://idp.example.com/"),
            (OIDC_DISPLAY_NAME, &"n".repeat(65)),
        ])
        .unwrap_err()
        .to_string();
        assert!(
            err.contains(OIDC_DISPLAY_NAME) && err.contains("1 to 64"),
            "{err}"
        );
        assert_eq!(s.ports.advertised(), [10000, 10010]);
        assert_eq!(s.token_ttl_secs, 12 * 3600);
        assert!(!s.allow_loopback);
        assert_eq!(s.login_v1().client, "terraform-cli");
        let err = s.client().unwrap_err().to_string();
        assert!(err.contains(OIDC_CLIENT_ID), "{err}");
    }

    #[test]
    fn the_secret_is_a_reference_to_ssm_or_secrets_manager() {
        for (text, expected) in [
            (
                "/tfreg/oidc-client-secret",
                SecretRef::Parameter("/tfreg/oidc-client-secret".into()),
            ),
            ("tfreg_secret", SecretRef::Parameter("tfreg_secret".into())),
            (
                "arn:aws:ssm:eu-west-1:123456789012:parameter/tfreg/oidc",
                SecretRef::Parameter(
                    "arn:aws:ssm:eu-west-1:123456789012:parameter/tfreg/oidc".into(),
                ),
            ),
            (
                "arn:aws-us-gov:secretsmanager:us-gov-west-1:123456789012:secret:tfreg-AbCdEf",
                SecretRef::SecretsManager(
                    "arn:aws-us-gov:secretsmanager:us-gov-west-1:123456789012:secret:tfreg-AbCdEf"
                        .into(),
                ),
            ),
        ] {
            assert_eq!(SecretRef::parse(text).unwrap(), expected, "{text}");
        }
        for bad in [
            "",
            "the secret itself, pasted here",
            "arn:aws:s3:::bucket/key",
            "arn:aws:ssm:eu-west-1:123:parameter/x",
            "arn:aws:secretsmanager:eu-west-1:123456789012:secret:",
            "arn:aws:iam::123456789012:role/x",
        ] {
            assert!(SecretRef::parse(bad).is_err(), "{bad:?}");
        }
        let s = signin(&[
            (OIDC_ISSUER, "https://idp.example.com"),
            (OIDC_CLIENT_ID, "tfreg"),
            (OIDC_CLIENT_SECRET, "/tfreg/oidc"),
            (LOGIN_PORTS, "20000-20002"),
            (LOGIN_TOKEN_TTL, "3600"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(
            s.client().unwrap(),
            ("tfreg", &SecretRef::Parameter("/tfreg/oidc".into()))
        );
        assert_eq!(s.ports.advertised(), [20000, 20002]);
        assert_eq!(s.token_ttl_secs, 3600);
    }

    #[test]
    fn an_issuer_on_a_special_address_is_refused_unless_tests_allow_loopback() {
        for (issuer, allowed_in_tests) in [
            ("http://127.0.0.1:4000", true),
            ("http://localhost:4000", true),
            ("https://127.0.0.1", true),
            ("https://169.254.169.254", false),
            ("http://169.254.169.254", false),
            ("https://10.1.2.3", false),
            ("http://idp.example.com", false),
            ("https://idp.example.com?x=1", false),
        ] {
            let err = signin(&[(OIDC_ISSUER, issuer)]).unwrap_err().to_string();
            assert!(err.contains(OIDC_ISSUER), "{err}");
            let tests = signin(&[(OIDC_ISSUER, issuer), (OIDC_ALLOW_LOOPBACK, "true")]);
            assert_eq!(tests.is_ok(), allowed_in_tests, "{issuer}: {tests:?}");
        }
    }

    #[test]
    fn malformed_values_name_the_variable() {
        for (name, value) in [
            (LOGIN_PORTS, "10000"),
            (LOGIN_PORTS, "80-90"),
            (LOGIN_PORTS, "10010-10000"),
            (LOGIN_TOKEN_TTL, "12h"),
            (LOGIN_TOKEN_TTL, "60"),
            (LOGIN_TOKEN_TTL, "2592001"),
            (OIDC_CLIENT_SECRET, "s3cret pasted"),
            (OIDC_ALLOW_LOOPBACK, "yes"),
        ] {
            let err = signin(&[(OIDC_ISSUER, "https://idp.example.com"), (name, value)])
                .unwrap_err()
                .to_string();
            assert!(err.contains(name), "{err}");
        }
    }
}
