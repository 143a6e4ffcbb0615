//! `tfreg publish --oidc`: publish from CI with no stored secret (issue 21).
//! The job's OIDC ID token is fetched ([`Source`]: GitHub Actions' token
//! request URL, or a variable GitLab's `id_tokens:` sets) and exchanged at
//! the registry's `POST /v1/auth/exchange` for a short-lived publish token,
//! which the publish then uses. Neither token is ever printed.
//!
//! Chosen by a flag, not detected: a job that forgot `TFREG_TOKEN` should
//! fail saying so, not quietly try another way in; and the order of the
//! ways a token is found stays obvious.

use std::path::Path;

use clap::Args;
use tfreg_model::exchange::{ExchangeAnswer, ExchangeRequest};
use tfreg_model::protocol::ErrorBody;
use tfreg_model::router::EXCHANGE_PATH;

use crate::net_error::NetError;

/// The variable a GitLab job names in `id_tokens:` by default.
pub const DEFAULT_TOKEN_ENV: &str = "TFREG_ID_TOKEN";
/// GitHub Actions' variables, set when the job has `permissions: id-token: write`.
pub const GITHUB_REQUEST_URL: &str = "ACTIONS_ID_TOKEN_REQUEST_URL";
pub const GITHUB_REQUEST_TOKEN: &str = "ACTIONS_ID_TOKEN_REQUEST_TOKEN";
/// Largest answer read from GitHub's token request URL or the exchange.
const MAX_ANSWER: usize = 64 * 1024;

#[derive(Args, Debug, Clone)]
pub struct OidcArgs {
    /// Without --token/TFREG_TOKEN: exchange this CI job's OIDC ID token
    /// (GitHub Actions: fetched with ACTIONS_ID_TOKEN_REQUEST_URL; GitLab CI:
    /// the variable --oidc-token-env names) for a short-lived publish token.
    #[arg(long)]
    pub oidc: bool,
    /// The audience to ask GitHub for (the registry's --ci-audience);
    /// default: the --registry URL.
    #[arg(long, requires = "oidc")]
    pub oidc_audience: Option<String>,
    /// The variable holding the ID token (GitLab's `id_tokens: NAME:`); read
    /// before GitHub's token request.
    #[arg(long, default_value = DEFAULT_TOKEN_ENV, requires = "oidc")]
    pub oidc_token_env: String,
}

/// Why no publish token came of the job's OIDC token.
#[derive(Debug, thiserror::Error)]
pub enum CiTokenError {
    #[error(
        "--oidc: no OIDC token in this job: on GitHub Actions give it `permissions: id-token: write` (ACTIONS_ID_TOKEN_REQUEST_URL is not set); on GitLab CI add `id_tokens: {0}: aud: <the registry's URL>` (or name another variable with --oidc-token-env)"
    )]
    NoSource(String),
    #[error("--oidc: {0} must be an https:// URL (http:// only on loopback)")]
    BadRequestUrl(&'static str),
    #[error("--oidc: GitHub's ID token request answered {status}: {detail}")]
    GitHub { status: u16, detail: String },
    #[error("--oidc: the registry refused the OIDC token ({status}): {detail}")]
    Refused { status: u16, detail: String },
    #[error("--oidc: {0}")]
    Net(#[from] NetError),
    #[error("--oidc: {0}")]
    Other(String),
}

/// Where the job's ID token comes from.
#[derive(Debug, PartialEq, Eq)]
pub enum Source {
    /// A variable holding it (GitLab's `id_tokens:`, or any CI's).
    Env(String),
    /// GitHub Actions' request URL (its query kept, `audience` added) and
    /// the bearer token for it.
    GitHub { url: url::Url, bearer: String },
}

/// The job's ID token's source: the named variable when set, else GitHub
/// Actions' request variables when both are set. Pure: `get` reads the
/// environment.
pub fn source(
    token_env: &str,
    audience: &str,
    get: impl Fn(&str) -> Option<String>,
) -> Result<Source, CiTokenError> {
    let get = |name| get(name).filter(|v| !v.trim().is_empty());
    if let Some(token) = get(token_env) {
        return Ok(Source::Env(token.trim().to_string()));
    }
    match (get(GITHUB_REQUEST_URL), get(GITHUB_REQUEST_TOKEN)) {
        (Some(url), Some(bearer)) => {
            let mut url = url::Url::parse(&url)
                .map_err(|_| CiTokenError::BadRequestUrl(GITHUB_REQUEST_URL))?;
            if !secure(&url) {
                return Err(CiTokenError::BadRequestUrl(GITHUB_REQUEST_URL));
            }
            // As actions/core's getIDToken: `${url}&audience=${encoded}`.
            url.query_pairs_mut().append_pair("audience", audience);
            Ok(Source::GitHub { url, bearer })
        }
        _ => Err(CiTokenError::NoSource(token_env.to_string())),
    }
}

/// https, or http to loopback (a stand-in in tests): the request carries a
/// bearer token.
fn secure(url: &url::Url) -> bool {
    let loopback = match url.host() {
        Some(url::Host::Domain(d)) => d == "localhost",
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    };
    url.scheme() == "https" || (url.scheme() == "http" && loopback)
}

/// The audience asked for by default: the registry's URL as given, without
/// a trailing `/` (the registry's default is its `https://HOSTNAME`).
pub fn default_audience(registry: &str) -> String {
    registry.trim_end_matches('/').to_string()
}

/// A response's body, at most [`MAX_ANSWER`] bytes.
async fn capped(mut resp: reqwest::Response, what: &str) -> Result<Vec<u8>, CiTokenError> {
    let mut body = Vec::new();
    while let Some(chunk) = resp
        .chunk()
        .await
        .map_err(|e| NetError::new(format!("reading {what}"), e))?
    {
        if body.len() + chunk.len() > MAX_ANSWER {
            return Err(CiTokenError::Other(format!(
                "{what} is larger than {MAX_ANSWER} bytes"
            )));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// The `errors` of a registry's error body, or a short text of it.
fn detail(body: &[u8]) -> String {
    serde_json::from_slice::<ErrorBody>(body)
        .map(|b| b.errors.join("; "))
        .unwrap_or_else(|_| {
            String::from_utf8_lossy(body)
                .chars()
                .filter(|c| !c.is_control())
                .take(200)
                .collect()
        })
}

/// GitHub Actions' ID token for `url`: `GET` with the bearer, answer
/// `{"value": "<JWT>"}`.
async fn from_github(
    http: &reqwest::Client,
    url: &url::Url,
    bearer: &str,
) -> Result<String, CiTokenError> {
    #[derive(serde::Deserialize)]
    struct Answer {
        value: String,
    }
    let resp = http
        .get(url.clone())
        .bearer_auth(bearer)
        .header(reqwest::header::ACCEPT, "application/json")
        .send()
        .await
        .map_err(|e| NetError::new("requesting the job's ID token from GitHub", e))?;
    let status = resp.status();
    let body = capped(resp, "GitHub's ID token answer").await?;
    if !status.is_success() {
        return Err(CiTokenError::GitHub {
            status: status.as_u16(),
            detail: detail(&body),
        });
    }
    serde_json::from_slice::<Answer>(&body)
        .map(|a| a.value)
        .map_err(|_| CiTokenError::GitHub {
            status: status.as_u16(),
            detail: "the answer is not {\"value\": \"<token>\"}".into(),
        })
}

/// Exchange this job's OIDC token at `registry` for a publish token: the
/// token (never printed); what it covers goes to stderr.
pub async fn exchange(
    registry: &str,
    ca_cert: Option<&Path>,
    args: &OidcArgs,
) -> Result<String, CiTokenError> {
    let http = reqwest::Client::builder()
        .user_agent(concat!("tfreg/", env!("CARGO_PKG_VERSION")))
        .use_preconfigured_tls(
            crate::trust::client_config(ca_cert).map_err(|e| CiTokenError::Other(e.to_string()))?,
        )
        .redirect(reqwest::redirect::Policy::none())
        .timeout(std::time::Duration::from_secs(30))
        .build()
        .map_err(|e| CiTokenError::Other(format!("building an HTTP client: {e}")))?;
    let audience = args
        .oidc_audience
        .clone()
        .unwrap_or_else(|| default_audience(registry));
    let id_token = match source(&args.oidc_token_env, &audience, |n| std::env::var(n).ok())? {
        Source::Env(token) => token,
        Source::GitHub { url, bearer } => from_github(&http, &url, &bearer).await?,
    };
    let url = url::Url::parse(&format!("{}{EXCHANGE_PATH}", default_audience(registry)))
        .map_err(|e| CiTokenError::Other(format!("invalid --registry URL {registry:?}: {e}")))?;
    let request = ExchangeRequest {
        token: id_token,
        namespaces: None,
    };
    let resp = http
        .post(url.clone())
        .json(&request)
        .send()
        .await
        .map_err(|e| NetError::new(format!("cannot reach {url}"), e))?;
    let status = resp.status();
    let body = capped(resp, "the exchange's answer").await?;
    if !status.is_success() {
        return Err(CiTokenError::Refused {
            status: status.as_u16(),
            detail: detail(&body),
        });
    }
    let answer: ExchangeAnswer = serde_json::from_slice(&body)
        .map_err(|e| CiTokenError::Other(format!("the exchange's answer: {e}")))?;
    eprintln!(
        "exchanged the job's OIDC token for token {}: publish on {} until {}",
        answer.token_id,
        answer.namespaces.join(", "),
        humantime::format_rfc3339_seconds(
            std::time::UNIX_EPOCH + std::time::Duration::from_secs(answer.expires_at)
        )
    );
    Ok(answer.token)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |n| map.get(n).cloned()
    }

    #[test]
    fn github_s_request_url_gets_the_audience_added_to_its_query() {
        let got = source(
            DEFAULT_TOKEN_ENV,
            "https://registry.example.com",
            env(&[
                (
                    GITHUB_REQUEST_URL,
                    "https://pipelines.actions.githubusercontent.com/abc/idtoken?api-version=2.0",
                ),
                (GITHUB_REQUEST_TOKEN, "req-token"),
            ]),
        )
        .unwrap();
        let Source::GitHub { url, bearer } = got else {
            panic!("{got:?}")
        };
        assert_eq!(
            url.as_str(),
            "https://pipelines.actions.githubusercontent.com/abc/idtoken?api-version=2.0&audience=https%3A%2F%2Fregistry.example.com"
        );
        assert_eq!(bearer, "req-token");
    }

    #[test]
    fn a_named_variable_comes_first_and_nothing_is_an_error_that_says_what_to_do() {
        let both = env(&[
            ("MY_ID_TOKEN", " eyJ.x.y\n"),
            (GITHUB_REQUEST_URL, "https://gh.test/t?x=1"),
            (GITHUB_REQUEST_TOKEN, "r"),
        ]);
        assert_eq!(
            source("MY_ID_TOKEN", "aud", &both).unwrap(),
            Source::Env("eyJ.x.y".into())
        );
        let e = source(DEFAULT_TOKEN_ENV, "aud", env(&[])).unwrap_err();
        assert!(e.to_string().contains("id-token: write"), "{e}");
        assert!(e.to_string().contains("id_tokens: TFREG_ID_TOKEN"), "{e}");
        // Half of GitHub's pair, or an empty variable, is none.
        let half = env(&[
            (GITHUB_REQUEST_URL, "https://gh.test/t"),
            (DEFAULT_TOKEN_ENV, ""),
        ]);
        assert!(matches!(
            source(DEFAULT_TOKEN_ENV, "aud", half),
            Err(CiTokenError::NoSource(_))
        ));
    }

    #[test]
    fn the_bearer_is_never_sent_in_the_clear_off_this_machine() {
        for (url, ok) in [
            ("http://gh.example.com/t?x=1", false),
            ("ftp://gh.example.com/t", false),
            ("http://127.0.0.1:9/t?x=1", true),
            ("http://localhost:9/t", true),
            ("https://gh.example.com/t", true),
        ] {
            let got = source(
                DEFAULT_TOKEN_ENV,
                "aud",
                env(&[(GITHUB_REQUEST_URL, url), (GITHUB_REQUEST_TOKEN, "r")]),
            );
            assert_eq!(got.is_ok(), ok, "{url}: {got:?}");
        }
        assert_eq!(
            default_audience("https://registry.example.com/"),
            "https://registry.example.com"
        );
    }
}
