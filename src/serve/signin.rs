//! `tfreg serve`'s sign-in settings (issue 21): the identity provider it
//! brokers `terraform login` to (none given: no login.v1), and the CI
//! issuers whose jobs' OIDC tokens it exchanges for publish tokens (none
//! given: no exchange). Either works without the other.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use tfreg_auth::ci::{CiSettings, parse_max_lifetime, parse_token_ttl};
use tfreg_auth::{Auth, AuthError, Exchange, LoginSettings, OidcConfig, Secret, Upstream};
use tfreg_model::login::PortRange;

use crate::cli_error::Result;

/// Shortest and longest lifetime of a token a sign-in issues.
const MIN_TTL: Duration = Duration::from_secs(300);
const MAX_TTL: Duration = Duration::from_secs(30 * 86_400);

#[derive(Args, Debug)]
pub struct SignInArgs {
    /// The OpenID Provider `terraform login` signs people in with (its
    /// issuer URL, exactly as its ID tokens' `iss`). Without it, no login.v1.
    #[arg(long, requires_all = ["oidc_client_id", "oidc_client_secret_file"])]
    pub oidc_issuer: Option<String>,
    /// The registry's client id at the provider (its redirect URI:
    /// https://HOSTNAME/oauth/callback).
    #[arg(long, requires = "oidc_issuer")]
    pub oidc_client_id: Option<String>,
    /// A file holding the client's secret (read once at start, never logged).
    #[arg(long, requires = "oidc_issuer")]
    pub oidc_client_secret_file: Option<PathBuf>,
    /// The scopes asked of the provider, space-separated. Add `groups` where
    /// the provider puts the groups claim behind that scope (an Okta custom
    /// authorization server); Entra ID, Google and Keycloak refuse or ignore
    /// scopes they do not know.
    #[arg(long, default_value = tfreg_auth::oidc::DEFAULT_SCOPES, requires = "oidc_issuer")]
    pub oidc_scopes: String,
    /// The ID token claim that lists the person's groups (a list of strings,
    /// or one string).
    #[arg(long, default_value = tfreg_auth::oidc::DEFAULT_GROUPS_CLAIM, requires = "oidc_issuer")]
    pub oidc_groups_claim: String,
    /// The identity provider's name on the web UI's sign-in page ("Sign in
    /// with NAME"); default: the issuer's host.
    #[arg(long, requires = "oidc_issuer")]
    pub oidc_display_name: Option<String>,
    /// The loopback ports Terraform may listen on during `terraform login`, MIN-MAX.
    #[arg(long, default_value = "10000-10010", value_parser = parse_ports)]
    pub login_ports: PortRange,
    /// How long a token issued by a sign-in lasts (5m to 30d).
    #[arg(long, default_value = "12h", value_parser = parse_ttl)]
    pub login_token_ttl: Duration,
    /// A CI system's OIDC issuer whose jobs may exchange their ID token for
    /// a short-lived publish token (POST /v1/auth/exchange), exactly as its
    /// tokens' iss, e.g. https://token.actions.githubusercontent.com;
    /// repeatable. Which jobs may publish where: `tfreg trust add`.
    #[arg(long = "ci-issuer", value_name = "URL")]
    pub ci_issuers: Vec<String>,
    /// The audience (aud) CI tokens must carry, exactly; default: the
    /// registry's URL (https://HOSTNAME).
    #[arg(long, requires = "ci_issuers")]
    pub ci_audience: Option<String>,
    /// How long an exchanged token lasts (1m to 1h).
    #[arg(long, default_value = "15m", value_parser = parse_token_ttl)]
    pub ci_token_ttl: u64,
    /// The longest lifetime (exp - iat) of a CI OIDC token accepted (GitLab's
    /// last as long as the job's timeout); 1m to 24h.
    #[arg(long, default_value = "1h", value_parser = parse_max_lifetime)]
    pub ci_max_token_lifetime: u64,
    /// A PEM file of CA certificates (or the issuer's own certificate) to
    /// trust for the identity provider and the CI issuers, besides the
    /// system's store (which honours SSL_CERT_FILE): for an issuer whose
    /// certificate a private CA signed.
    #[arg(long, value_name = "FILE", env = "TFREG_ISSUER_CA_CERT")]
    pub issuer_ca_cert: Option<PathBuf>,
}

fn parse_ports(text: &str) -> std::result::Result<PortRange, String> {
    let (min, max) = text
        .split_once('-')
        .ok_or_else(|| format!("{text:?}: MIN-MAX, e.g. 10000-10010"))?;
    let port = |p: &str| p.trim().parse::<u16>().map_err(|e| format!("{p:?}: {e}"));
    PortRange::new(port(min)?, port(max)?).map_err(|e| e.to_string())
}

fn parse_ttl(text: &str) -> std::result::Result<Duration, String> {
    let ttl = humantime::parse_duration(text).map_err(|e| e.to_string())?;
    if !(MIN_TTL..=MAX_TTL).contains(&ttl) {
        return Err(format!("{text}: between 5m and 30d"));
    }
    Ok(ttl)
}

/// What the sign-in page calls the identity provider, when one is given.
pub fn display_name(args: &SignInArgs) -> Result<Option<String>> {
    let Some(issuer) = &args.oidc_issuer else {
        return Ok(None);
    };
    let name = tfreg_model::sso::display_name(issuer, args.oidc_display_name.as_deref())
        .map_err(|e| format!("--oidc-display-name: {e}"))?;
    Ok(Some(name))
}

/// The sign-in group, when a provider or CI issuers are configured.
pub async fn auth(args: &SignInArgs) -> Result<Option<Auth>> {
    let mut auth = Auth::new();
    if let Some((upstream, settings)) = login(args).await? {
        auth = auth.with_login(upstream, settings);
    }
    if let Some(exchange) = exchange(args)? {
        auth = auth.with_exchange(exchange);
    }
    Ok((!auth.is_empty()).then_some(auth))
}

/// The CI token exchange, when CI issuers are given: their discovery
/// documents and keys are read when a token first names one (an issuer
/// down at start does not stop the registry).
fn exchange(args: &SignInArgs) -> Result<Option<Exchange>> {
    if args.ci_issuers.is_empty() {
        return Ok(None);
    }
    let mut settings = CiSettings::new(&args.ci_issuers)?;
    if let Some(aud) = &args.ci_audience {
        settings = settings.with_audience(aud)?;
    }
    settings.token_ttl_secs = args.ci_token_ttl;
    settings.max_token_lifetime_secs = args.ci_max_token_lifetime;
    let http = issuer_client(args)?;
    tracing::info!(
        issuers = ?settings.issuers,
        audience = settings.audience.as_deref().unwrap_or("the registry's URL"),
        token_ttl_secs = settings.token_ttl_secs,
        "CI jobs of these issuers may exchange their OIDC tokens for publish tokens"
    );
    Ok(Some(Exchange::new(settings, http)))
}

/// The HTTP client for issuers: the system's roots (SSL_CERT_FILE
/// included) and `--issuer-ca-cert`.
fn issuer_client(args: &SignInArgs) -> Result<reqwest::Client> {
    let tls =
        crate::trust::client_config_named("--issuer-ca-cert", args.issuer_ca_cert.as_deref())?;
    Ok(tfreg_auth::oidc::http_client(tls)?)
}

/// Why reading an issuer failed, as `flag: ...`; a request that got no
/// answer with every cause and a hint (as the CLI's network errors).
fn issuer_error(flag: &str, e: AuthError) -> String {
    match e {
        AuthError::Unreachable { what, source } => crate::net_error::NetError::issuer(
            format!("{flag}: the identity provider: {what}"),
            source,
        )
        .to_string(),
        e => format!("{flag}: {e}"),
    }
}

/// The identity provider, when one is configured: its discovery document
/// and keys are read now (a provider that cannot be reached fails the
/// start, with its reason).
async fn login(args: &SignInArgs) -> Result<Option<(Upstream, LoginSettings)>> {
    let (Some(issuer), Some(client_id), Some(secret_file)) = (
        &args.oidc_issuer,
        &args.oidc_client_id,
        &args.oidc_client_secret_file,
    ) else {
        return Ok(None);
    };
    let secret = std::fs::read_to_string(secret_file)
        .map_err(|e| format!("--oidc-client-secret-file {}: {e}", secret_file.display()))?;
    let secret = secret.trim_end_matches(['\r', '\n']);
    if secret.is_empty() {
        return Err(format!(
            "--oidc-client-secret-file {} is empty",
            secret_file.display()
        )
        .into());
    }
    let config = OidcConfig::new(issuer, client_id, Secret::new(secret))
        .with_scopes(&args.oidc_scopes)
        .with_groups_claim(&args.oidc_groups_claim);
    let http = issuer_client(args)?;
    let upstream = Upstream::discover(config, http)
        .await
        .map_err(|e| issuer_error(&format!("--oidc-issuer {issuer}"), e))?;
    tracing::info!(
        issuer,
        client_id,
        "terraform login signs in with this identity provider"
    );
    Ok(Some((
        upstream,
        LoginSettings {
            ports: args.login_ports,
            token_ttl_secs: args.login_token_ttl.as_secs(),
            ..LoginSettings::default()
        },
    )))
}
