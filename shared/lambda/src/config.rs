//! Configuration of the Lambda functions, only from the environment: the AWS
//! SDK's standard variables (`AWS_REGION`, `AWS_ENDPOINT_URL`,
//! `AWS_ENDPOINT_URL_DYNAMODB`, `AWS_ENDPOINT_URL_S3`, and the role's
//! credentials Lambda sets: `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
//! `AWS_SESSION_TOKEN`; no profile files or metadata services are searched)
//! plus a few of tfreg's own.

use std::time::Duration;

use tfreg_http::auth::{DEFAULT_TOKEN_CACHE_SECS, MAX_TOKEN_CACHE_SECS};
use tfreg_http::registry::{DEFAULT_URL_TTL_SECS, MAX_URL_TTL_SECS};
use tfreg_model::address::Hostname;

/// DynamoDB table name (required).
pub const TABLE: &str = "TFREG_TABLE";
/// S3 bucket name (required).
pub const BUCKET: &str = "TFREG_BUCKET";
/// The registry's public hostname, as users write it in addresses (required).
pub const HOSTNAME: &str = "TFREG_HOSTNAME";
/// Base URL for archive links; default `https://<TFREG_HOSTNAME>`.
pub const PUBLIC_URL: &str = "TFREG_PUBLIC_URL";
/// Lifetime of download and upload URLs in seconds; default
/// [`DEFAULT_URL_TTL_SECS`](tfreg_http::registry::DEFAULT_URL_TTL_SECS), at most
/// [`MAX_URL_TTL_SECS`](tfreg_http::registry::MAX_URL_TTL_SECS).
pub const URL_TTL: &str = "TFREG_URL_TTL";
/// `true` to let anyone read without a token; default `false` (private).
pub const ANONYMOUS_READS: &str = "TFREG_ANONYMOUS_READS";
/// `true` to publish provider releases only when a key registered for their
/// namespace verifies them, in every namespace; default `false`.
pub const REQUIRE_NAMESPACE_KEYS: &str = "TFREG_REQUIRE_NAMESPACE_KEYS";
/// Seconds a function trusts a token it verified (0 to 300; default
/// [`DEFAULT_TOKEN_CACHE_SECS`](tfreg_http::auth::DEFAULT_TOKEN_CACHE_SECS)): how
/// long a revoked token may keep working.
pub const TOKEN_CACHE_SECS: &str = "TFREG_TOKEN_CACHE_SECS";
/// `true` for path-style S3 URLs (S3 emulators); default `false`.
pub const S3_FORCE_PATH_STYLE: &str = "TFREG_S3_FORCE_PATH_STYLE";
/// `true` to open the DynamoDB connection at init: the function starts
/// reading the URL signing secret beside init (init does not wait), TLS
/// handshake included, while the runtime fetches the first event. Default
/// `false`: the connection opens when the first request needs it. Measured
/// in BENCHMARKS.md (lambda): on a cold start the event is waiting when init
/// ends, so the read at init only competes with the request (and adds a
/// `GetItem` the request may not need); it pays only where Lambda
/// initialises a function well before its first request (provisioned
/// concurrency).
pub const CONNECT_AT_INIT: &str = "TFREG_CONNECT_AT_INIT";
/// `tracing` filter of the functions' JSON logs; default `info`.
pub const LOG: &str = "TFREG_LOG";
/// The read and blob functions: the fill function (name or ARN) a cache
/// miss invokes asynchronously. Unset: cache misses are never fetched (a
/// miss is 404 "not cached"; hits are answered).
pub const FILL_FUNCTION: &str = "TFREG_FILL_FUNCTION";
/// Tests only: `true` lets an upstream's `connect` hook name loopback
/// addresses in the fill function (the emulated tests run the origin on
/// this machine), as `tfreg serve` allows. In AWS loopback holds the
/// Runtime API and link-local the credentials: never set by the template.
pub const ORIGIN_ALLOW_LOOPBACK: &str = "TFREG_ORIGIN_ALLOW_LOOPBACK";
/// The admin and fill functions: the networks (comma-separated CIDRs) an
/// upstream's `connect` settings may name; default none (template.yaml
/// `UpstreamConnectAllow`). Credentials are `TFREG_UPSTREAM_CREDENTIAL_*`
/// variables of the fill function only; no files.
pub const UPSTREAM_CONNECT_ALLOW: &str = tfreg_model::upstream::CONNECT_ALLOW_ENV;
/// How archive URLs are handed out (issue 37): `presigned` (the default:
/// the registry's own `/v1/blobs/...` URLs, the blob function redirecting
/// to a presigned S3 URL) or `cloudfront` (CloudFront signed URLs, canned
/// policy, the [`URL_TTL`] lifetime; needs the three settings below).
pub const ARCHIVE_DELIVERY: &str = "TFREG_ARCHIVE_DELIVERY";
/// `cloudfront`: the base URL (no trailing slash) signed archive URLs are
/// built on: the distribution that serves `/archives/*` and `/cache/*`
/// from the bucket.
pub const ARCHIVE_URL: &str = "TFREG_ARCHIVE_URL";
/// `cloudfront`: the id of the CloudFront public key that signs
/// (`Key-Pair-Id=`).
pub const CLOUDFRONT_KEY_PAIR_ID: &str = "TFREG_CLOUDFRONT_KEY_PAIR_ID";
/// `cloudfront`: where its RSA private key (PEM, PKCS#1 or PKCS#8) is, as
/// for [`OIDC_CLIENT_SECRET`]: an SSM SecureString's name or ARN, or a
/// Secrets Manager secret's ARN. Read once at init by the functions that
/// sign (read and blob), never logged.
pub const ARCHIVE_SIGNING_KEY: &str = "TFREG_ARCHIVE_SIGNING_KEY";
/// The CloudWatch namespace of the functions' embedded-metric-format lines
/// ([`crate::emf`]); default `tfreg` (the template: `tfreg/<stack name>`).
pub const METRICS_NAMESPACE: &str = "TFREG_METRICS_NAMESPACE";
/// `false` to count no downloads (issue 38): the read functions then keep
/// no usage items (no write, no extension) and the usage views show none;
/// default `true`.
pub const DOWNLOAD_COUNTS: &str = "TFREG_DOWNLOAD_COUNTS";

pub use crate::signin::{
    CI_AUDIENCE, CI_ISSUERS, CI_MAX_TOKEN_LIFETIME, CI_TOKEN_TTL, LOGIN_PORTS, LOGIN_TOKEN_TTL,
    OIDC_ALLOW_LOOPBACK, OIDC_CLIENT_ID, OIDC_CLIENT_SECRET, OIDC_DISPLAY_NAME, OIDC_ISSUER,
};

/// Every variable above, and sign-in's ([`crate::signin`]): what a
/// deployment may set.
pub const ALL: [&str; 31] = [
    TABLE,
    BUCKET,
    HOSTNAME,
    PUBLIC_URL,
    URL_TTL,
    ANONYMOUS_READS,
    REQUIRE_NAMESPACE_KEYS,
    TOKEN_CACHE_SECS,
    S3_FORCE_PATH_STYLE,
    CONNECT_AT_INIT,
    LOG,
    FILL_FUNCTION,
    ORIGIN_ALLOW_LOOPBACK,
    UPSTREAM_CONNECT_ALLOW,
    ARCHIVE_DELIVERY,
    ARCHIVE_URL,
    CLOUDFRONT_KEY_PAIR_ID,
    ARCHIVE_SIGNING_KEY,
    METRICS_NAMESPACE,
    DOWNLOAD_COUNTS,
    OIDC_ISSUER,
    OIDC_CLIENT_ID,
    OIDC_CLIENT_SECRET,
    OIDC_DISPLAY_NAME,
    LOGIN_PORTS,
    LOGIN_TOKEN_TTL,
    OIDC_ALLOW_LOOPBACK,
    CI_ISSUERS,
    CI_AUDIENCE,
    CI_TOKEN_TTL,
    CI_MAX_TOKEN_LIFETIME,
];

pub use crate::env::ConfigError;

/// How archive URLs are handed out ([`ARCHIVE_DELIVERY`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Delivery {
    /// The registry's own URLs, presigned S3 redirects behind them.
    #[default]
    Presigned,
    /// CloudFront signed URLs.
    CloudFront(EdgeSettings),
}

/// The `cloudfront` mode's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EdgeSettings {
    /// [`ARCHIVE_URL`], without a trailing slash.
    pub archive_url: String,
    /// [`CLOUDFRONT_KEY_PAIR_ID`].
    pub key_pair_id: String,
    /// [`ARCHIVE_SIGNING_KEY`]: where the private key is, not the key.
    pub signing_key: crate::signin::SecretRef,
}

impl Delivery {
    /// The mode and its settings through `get`: each setting `cloudfront`
    /// needs is required, and checked, here (at init); in the `presigned`
    /// mode they are not read.
    pub fn from_lookup(get: &impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let value = |name: &'static str| {
            get(name)
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        let invalid = |name: &'static str, reason: String| ConfigError::Invalid { name, reason };
        match value(ARCHIVE_DELIVERY).as_deref() {
            None | Some("presigned") => return Ok(Delivery::Presigned),
            Some("cloudfront") => {}
            Some(other) => {
                return Err(invalid(
                    ARCHIVE_DELIVERY,
                    format!("{other:?} is neither `presigned` nor `cloudfront`"),
                ));
            }
        }
        let required = |name: &'static str| value(name).ok_or(ConfigError::Missing(name));
        let archive_url = required(ARCHIVE_URL)?;
        let parsed =
            url::Url::parse(&archive_url).map_err(|e| invalid(ARCHIVE_URL, e.to_string()))?;
        if !matches!(parsed.scheme(), "https" | "http")
            || parsed.host().is_none()
            || parsed.query().is_some()
            || parsed.fragment().is_some()
            || !parsed.username().is_empty()
            || parsed.password().is_some()
        {
            return Err(invalid(
                ARCHIVE_URL,
                format!(
                    "{archive_url:?} must be an https:// URL with no user, query or fragment (the distribution's address)"
                ),
            ));
        }
        let key_pair_id = required(CLOUDFRONT_KEY_PAIR_ID)?;
        if key_pair_id.len() > 64 || !key_pair_id.bytes().all(|b| b.is_ascii_alphanumeric()) {
            return Err(invalid(
                CLOUDFRONT_KEY_PAIR_ID,
                format!(
                    "{key_pair_id:?} is not a CloudFront public key id (letters and digits, e.g. K2JCJMDEHXQW5F)"
                ),
            ));
        }
        let reference = required(ARCHIVE_SIGNING_KEY)?;
        let signing_key = crate::signin::SecretRef::parse(&reference).map_err(|e| {
            // A key pasted in place of its reference is not repeated.
            let pasted = reference.contains("-----") || reference.chars().any(char::is_whitespace);
            invalid(
                ARCHIVE_SIGNING_KEY,
                if pasted {
                    "must name an SSM parameter or a Secrets Manager secret that holds the key, not hold the key (its value is not shown)".into()
                } else {
                    e
                },
            )
        })?;
        Ok(Delivery::CloudFront(EdgeSettings {
            archive_url: archive_url.trim_end_matches('/').to_string(),
            key_pair_id,
            signing_key,
        }))
    }
}

/// tfreg's own settings.
#[derive(Debug, Clone)]
pub struct Settings {
    pub table: String,
    pub bucket: String,
    pub hostname: Hostname,
    pub public_url: String,
    pub url_ttl: Duration,
    pub anonymous_reads: bool,
    pub require_namespace_keys: bool,
    pub token_cache: Duration,
    pub s3_force_path_style: bool,
    pub connect_at_init: bool,
    /// The fill function cache misses invoke ([`FILL_FUNCTION`]).
    pub fill_function: Option<String>,
    /// [`ORIGIN_ALLOW_LOOPBACK`].
    pub origin_allow_loopback: bool,
    /// [`UPSTREAM_CONNECT_ALLOW`].
    pub upstream_connect_allow: Vec<tfreg_model::upstream::Net>,
    /// `terraform login` through an identity provider, when one is configured.
    pub signin: Option<crate::signin::SignIn>,
    /// [`CI_ISSUERS`] where it is set (even empty: the exchange is off), so
    /// the admin function refuses a trust policy no token could match;
    /// unset: not known to this function.
    pub ci_issuers: Option<Vec<String>>,
    /// [`ARCHIVE_DELIVERY`] and its settings. Only the functions built to
    /// sign (tfreg-lambda's feature `cloudfront`: read and blob) act on
    /// `cloudfront`; the others never hand out archive URLs.
    pub delivery: Delivery,
    /// [`DOWNLOAD_COUNTS`].
    pub download_counts: bool,
}

pub(crate) use crate::env::flag;

impl Settings {
    /// Read the settings from the process environment.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// Read the settings through `get` (tests pass a map).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let required = |name: &'static str| {
            get(name)
                .filter(|v| !v.trim().is_empty())
                .ok_or(ConfigError::Missing(name))
        };
        let hostname = Hostname::parse(&required(HOSTNAME)?).map_err(|e| ConfigError::Invalid {
            name: HOSTNAME,
            reason: e.to_string(),
        })?;
        let public_url = match get(PUBLIC_URL).filter(|v| !v.is_empty()) {
            Some(url) => {
                let parsed = url::Url::parse(&url).map_err(|e| ConfigError::Invalid {
                    name: PUBLIC_URL,
                    reason: e.to_string(),
                })?;
                if !matches!(parsed.scheme(), "https" | "http") {
                    return Err(ConfigError::Invalid {
                        name: PUBLIC_URL,
                        reason: "must be an https:// URL".into(),
                    });
                }
                url.trim_end_matches('/').to_string()
            }
            None => format!("https://{hostname}"),
        };
        let url_ttl = match get(URL_TTL).filter(|v| !v.is_empty()) {
            Some(v) => {
                let secs: u64 = v.trim().parse().map_err(|_| ConfigError::Invalid {
                    name: URL_TTL,
                    reason: format!("{v:?} is not a number of seconds"),
                })?;
                if !(1..=MAX_URL_TTL_SECS).contains(&secs) {
                    return Err(ConfigError::Invalid {
                        name: URL_TTL,
                        reason: format!("must be between 1 and {MAX_URL_TTL_SECS} seconds"),
                    });
                }
                Duration::from_secs(secs)
            }
            None => Duration::from_secs(DEFAULT_URL_TTL_SECS),
        };
        let token_cache = match get(TOKEN_CACHE_SECS).filter(|v| !v.trim().is_empty()) {
            Some(v) => {
                let secs: u64 = v
                    .trim()
                    .parse()
                    .ok()
                    .filter(|s| *s <= MAX_TOKEN_CACHE_SECS)
                    .ok_or_else(|| ConfigError::Invalid {
                        name: TOKEN_CACHE_SECS,
                        reason: format!(
                            "{v:?} is not a number of seconds from 0 to {}",
                            MAX_TOKEN_CACHE_SECS
                        ),
                    })?;
                Duration::from_secs(secs)
            }
            None => Duration::from_secs(DEFAULT_TOKEN_CACHE_SECS),
        };
        Ok(Settings {
            table: required(TABLE)?,
            bucket: required(BUCKET)?,
            hostname,
            public_url,
            url_ttl,
            anonymous_reads: flag(&get, ANONYMOUS_READS)?,
            require_namespace_keys: flag(&get, REQUIRE_NAMESPACE_KEYS)?,
            token_cache,
            s3_force_path_style: flag(&get, S3_FORCE_PATH_STYLE)?,
            connect_at_init: flag(&get, CONNECT_AT_INIT)?,
            download_counts: crate::env::flag_or(&get, DOWNLOAD_COUNTS, true)?,
            fill_function: get(FILL_FUNCTION)
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty()),
            origin_allow_loopback: flag(&get, ORIGIN_ALLOW_LOOPBACK)?,
            upstream_connect_allow: tfreg_model::upstream::OperatorPolicy::parse_nets(
                &get(UPSTREAM_CONNECT_ALLOW).unwrap_or_default(),
            )
            .map_err(|e| ConfigError::Invalid {
                name: UPSTREAM_CONNECT_ALLOW,
                reason: e.0,
            })?,
            signin: crate::signin::SignIn::from_lookup(&get)?,
            ci_issuers: get(CI_ISSUERS).map(|list| {
                list.split(|c: char| c == ',' || c.is_whitespace())
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .collect()
            }),
            delivery: Delivery::from_lookup(&get)?,
        })
    }

    /// The registry configuration these settings describe.
    pub fn registry_config(&self) -> tfreg_http::Config {
        let mut config = tfreg_http::Config::new(self.hostname.clone());
        config.public_url = self.public_url.clone();
        config.url_ttl_secs = self.url_ttl.as_secs();
        config.anonymous_reads = self.anonymous_reads;
        config.require_namespace_keys = self.require_namespace_keys;
        config.token_cache_secs = self.token_cache.as_secs();
        config.login_v1 = self.signin.as_ref().map(|s| s.login_v1());
        config.ci_issuers = self.ci_issuers.clone();
        config.upstream_policy = tfreg_model::upstream::OperatorPolicy {
            connect_allow: self.upstream_connect_allow.clone(),
            credentials_dir: None,
        };
        config.sso_name = self.signin.as_ref().map(|s| s.display_name.clone());
        config
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn settings(vars: &[(&str, &str)]) -> Result<Settings, ConfigError> {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Settings::from_lookup(|k| map.get(k).cloned())
    }

    const BASE: [(&str, &str); 3] = [
        (TABLE, "t"),
        (BUCKET, "b"),
        (HOSTNAME, "Registry.Example.com"),
    ];

    #[test]
    fn defaults_and_required_variables() {
        let s = settings(&BASE).unwrap();
        assert_eq!(s.public_url, "https://registry.example.com");
        assert_eq!(s.url_ttl, Duration::from_secs(DEFAULT_URL_TTL_SECS));
        assert!(!s.anonymous_reads && !s.require_namespace_keys && !s.s3_force_path_style);
        assert!(!s.connect_at_init, "off unless turned on");
        let mut on = BASE.to_vec();
        on.push((CONNECT_AT_INIT, "true"));
        assert!(settings(&on).unwrap().connect_at_init);
        assert_eq!(s.token_cache.as_secs(), DEFAULT_TOKEN_CACHE_SECS);
        for missing in [TABLE, BUCKET, HOSTNAME] {
            let vars: Vec<_> = BASE
                .iter()
                .copied()
                .filter(|(k, _)| *k != missing)
                .collect();
            let err = settings(&vars).unwrap_err().to_string();
            assert!(err.contains(missing), "{err}");
        }
    }

    #[test]
    fn malformed_values_name_the_variable() {
        for (name, value) in [
            (URL_TTL, "soon"),
            (URL_TTL, "0"),
            (URL_TTL, "86401"),
            (ANONYMOUS_READS, "yes"),
            (CONNECT_AT_INIT, "no"),
            (TOKEN_CACHE_SECS, "301"),
            (TOKEN_CACHE_SECS, "-1"),
            (PUBLIC_URL, "ftp://x"),
            (HOSTNAME, "a/b"),
        ] {
            let mut vars = BASE.to_vec();
            vars.retain(|(k, _)| *k != name);
            vars.push((name, value));
            let err = settings(&vars).unwrap_err().to_string();
            assert!(err.contains(name), "{err}");
        }
    }

    const EDGE: [(&str, &str); 4] = [
        (ARCHIVE_DELIVERY, "cloudfront"),
        (ARCHIVE_URL, "https://registry.example.com/"),
        (CLOUDFRONT_KEY_PAIR_ID, "K2JCJMDEHXQW5F"),
        (ARCHIVE_SIGNING_KEY, "/tfreg/archive-signing-key-a"),
    ];

    #[test]
    fn downloads_are_counted_unless_turned_off() {
        assert!(settings(&BASE).unwrap().download_counts);
        for (value, counted) in [("", true), ("true", true), ("false", false), ("0", false)] {
            let mut vars = BASE.to_vec();
            vars.push((DOWNLOAD_COUNTS, value));
            assert_eq!(
                settings(&vars).unwrap().download_counts,
                counted,
                "{value:?}"
            );
        }
        let mut vars = BASE.to_vec();
        vars.push((DOWNLOAD_COUNTS, "off"));
        assert!(
            settings(&vars)
                .unwrap_err()
                .to_string()
                .contains(DOWNLOAD_COUNTS)
        );
    }

    #[test]
    fn archives_are_presigned_unless_cloudfront_is_asked_for() {
        assert_eq!(settings(&BASE).unwrap().delivery, Delivery::Presigned);
        let mut vars = BASE.to_vec();
        vars.push((ARCHIVE_DELIVERY, "presigned"));
        // The other settings are not read in this mode.
        vars.push((ARCHIVE_URL, "not a url"));
        assert_eq!(settings(&vars).unwrap().delivery, Delivery::Presigned);
        let mut vars = BASE.to_vec();
        vars.extend(EDGE);
        assert_eq!(
            settings(&vars).unwrap().delivery,
            Delivery::CloudFront(EdgeSettings {
                archive_url: "https://registry.example.com".into(),
                key_pair_id: "K2JCJMDEHXQW5F".into(),
                signing_key: crate::signin::SecretRef::Parameter(
                    "/tfreg/archive-signing-key-a".into()
                ),
            })
        );
    }

    #[test]
    fn cloudfront_needs_its_settings_and_names_the_one_that_is_wrong() {
        for missing in [ARCHIVE_URL, CLOUDFRONT_KEY_PAIR_ID, ARCHIVE_SIGNING_KEY] {
            let mut vars = BASE.to_vec();
            vars.extend(EDGE.iter().copied().filter(|(k, _)| *k != missing));
            let err = settings(&vars).unwrap_err().to_string();
            assert!(err.contains(missing) && err.contains("is not set"), "{err}");
        }
        for (name, value) in [
            (ARCHIVE_DELIVERY, "edge"),
            (ARCHIVE_DELIVERY, "CloudFront"),
            (ARCHIVE_URL, "registry.example.com"),
            (ARCHIVE_URL, "ftp://registry.example.com"),
            (ARCHIVE_URL, "https://registry.example.com/?a=1"),
            (ARCHIVE_URL, "https://user@registry.example.com"),
            (CLOUDFRONT_KEY_PAIR_ID, "K2J&x=1"),
            (CLOUDFRONT_KEY_PAIR_ID, &"K".repeat(65)),
            (ARCHIVE_SIGNING_KEY, "-----BEGIN RSA PRIVATE KEY-----"),
        ] {
            let mut vars = BASE.to_vec();
            vars.extend(EDGE.iter().copied().filter(|(k, _)| *k != name));
            vars.push((name, value));
            let err = settings(&vars).unwrap_err().to_string();
            assert!(err.contains(name), "{name}={value}: {err}");
            if name == ARCHIVE_SIGNING_KEY {
                assert!(!err.contains("BEGIN"), "{err}");
            }
        }
    }
}
