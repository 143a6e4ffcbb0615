//! `tfreg login HOST`: `terraform login`'s flow (login.v1, authorization
//! code with PKCE S256 and a random state, the browser sent back to
//! `http://localhost:PORT/login`), storing the token where Terraform and
//! OpenTofu read it (`~/.terraform.d/credentials.tfrc.json`).

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use serde::Deserialize;
use tfreg_model::login::{pkce_challenge, random_value};
use tokio::sync::mpsc;

use crate::cli_error::Result;
use crate::credentials;
use crate::net_error::NetError;

/// How long the browser has to come back.
const WAIT: Duration = Duration::from_secs(600);

#[derive(Args)]
pub struct LoginArgs {
    /// The registry's hostname (`registry.example.com`, `127.0.0.1:8443`) or URL.
    host: String,
    /// A PEM certificate to trust for the registry besides the system's.
    #[arg(long, env = "TFREG_CA_CERT")]
    ca_cert: Option<PathBuf>,
    /// Print the sign-in URL only; do not start a browser.
    #[arg(long)]
    no_browser: bool,
}

/// `login.v1` as Terraform reads it, with its defaults.
#[derive(Debug, Deserialize)]
struct LoginV1 {
    client: String,
    #[serde(default = "authz_code")]
    grant_types: Vec<String>,
    authz: String,
    token: String,
    #[serde(default = "all_ports")]
    ports: [u16; 2],
    #[serde(default)]
    scopes: Vec<String>,
}

fn authz_code() -> Vec<String> {
    vec![tfreg_model::login::GRANT_AUTHZ_CODE.to_string()]
}

fn all_ports() -> [u16; 2] {
    [1024, 65535]
}

/// What the browser brought back to `/login`.
#[derive(Debug, Default, Deserialize)]
struct Callback {
    code: Option<String>,
    state: Option<String>,
    error: Option<String>,
    error_description: Option<String>,
}

pub async fn run(args: LoginArgs) -> Result<()> {
    let host = credentials::comparison_host(&args.host)
        .ok_or_else(|| format!("{:?} is not a hostname or URL", args.host))?;
    let base = url::Url::parse(&format!("https://{host}/"))?;
    let http = reqwest::Client::builder()
        .user_agent(concat!("tfreg/", env!("CARGO_PKG_VERSION")))
        .use_preconfigured_tls(crate::trust::client_config(args.ca_cert.as_deref())?)
        .redirect(reqwest::redirect::Policy::limited(5))
        .timeout(Duration::from_secs(30))
        .build()?;
    let discovery_url = base.join(tfreg_model::protocol::DISCOVERY_PATH)?;
    let login = discover(&http, &discovery_url).await?;

    let (listener, port) = listen(login.ports).await?;
    let redirect_uri = format!(
        "http://localhost:{port}{}",
        tfreg_model::login::REDIRECT_PATH
    );
    let state = random_value();
    let verifier = random_value();
    let mut authorize = discovery_url.join(&login.authz)?;
    {
        let mut q = authorize.query_pairs_mut();
        q.append_pair("client_id", &login.client)
            .append_pair("code_challenge", &pkce_challenge(&verifier))
            .append_pair("code_challenge_method", "S256")
            .append_pair("redirect_uri", &redirect_uri)
            .append_pair("response_type", "code")
            .append_pair("state", &state);
        if !login.scopes.is_empty() {
            q.append_pair("scope", &login.scopes.join(" "));
        }
    }
    eprintln!("Open this URL in a browser to sign in to {host}:\n\n    {authorize}\n");
    if !args.no_browser {
        open_browser(authorize.as_str());
    }
    let back = wait_for_browser(listener).await?;
    if back.state.as_deref() != Some(state.as_str()) {
        return Err(
            "the browser came back with another sign-in's state: run `tfreg login` again".into(),
        );
    }
    if let Some(error) = back.error {
        let why = back.error_description.unwrap_or_default();
        return Err(format!("the registry refused the sign-in ({error}): {why}").into());
    }
    let code = back
        .code
        .filter(|c| !c.is_empty())
        .ok_or("the browser came back without a code")?;
    let token_url = discovery_url.join(&login.token)?;
    let token = redeem(
        &http,
        &token_url,
        &login.client,
        &code,
        &verifier,
        &redirect_uri,
    )
    .await?;
    let path = credentials::store(&host, &token)?;
    eprintln!(
        "Signed in to {host}. The token is in {} (Terraform, OpenTofu and tfreg read it).",
        path.display()
    );
    Ok(())
}

/// The registry's login.v1, or why it has none.
async fn discover(http: &reqwest::Client, url: &url::Url) -> Result<LoginV1> {
    let resp = http
        .get(url.clone())
        .send()
        .await
        .map_err(|e| NetError::new(format!("cannot reach {url}"), e))?;
    if !resp.status().is_success() {
        return Err(format!("discovery at {url} answered {}", resp.status()).into());
    }
    let services: serde_json::Value = resp
        .json()
        .await
        .map_err(|e| format!("discovery at {url} is not JSON: {e}"))?;
    let login = services.get("login.v1").ok_or_else(|| {
        format!("{url} offers no login.v1: the registry has no identity provider configured; ask its admin for a token (`tfreg token create`)")
    })?;
    let login: LoginV1 = serde_json::from_value(login.clone())
        .map_err(|e| format!("{url}: login.v1 is malformed: {e}"))?;
    if !login
        .grant_types
        .iter()
        .any(|g| g == tfreg_model::login::GRANT_AUTHZ_CODE)
    {
        return Err(format!("{url}: login.v1 offers no authz_code grant").into());
    }
    Ok(login)
}

/// A listener on 127.0.0.1 at a port of `[min, max)`, as Terraform picks it
/// (`max` itself is never used); a few tries past ports in use.
async fn listen(ports: [u16; 2]) -> Result<(tokio::net::TcpListener, u16)> {
    let [min, max] = ports;
    if max <= min {
        return Err(format!("login.v1 ports {min}-{max} leave no port to listen on").into());
    }
    for _ in 0..20 {
        let port = min + rand::random_range(0..max - min);
        if let Ok(listener) = tokio::net::TcpListener::bind(("127.0.0.1", port)).await {
            return Ok((listener, port));
        }
    }
    Err(format!("no free port between {min} and {max} on 127.0.0.1").into())
}

/// Start a browser at `url`: `$BROWSER` (as OpenTofu does), else the first
/// of the openers Terraform tries. Nothing found is fine: the URL is printed.
fn open_browser(url: &str) {
    let browser = std::env::var("BROWSER")
        .ok()
        .filter(|b| !b.trim().is_empty());
    let candidates: Vec<String> = match browser {
        Some(b) => vec![b],
        None => ["xdg-open", "x-www-browser", "www-browser", "wslview"]
            .map(String::from)
            .to_vec(),
    };
    for program in candidates {
        if let Ok(mut child) = std::process::Command::new(&program)
            .arg(url)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .spawn()
        {
            // Reaped in the background; the sign-in does not wait for it.
            std::thread::spawn(move || child.wait());
            return;
        }
    }
}

/// Serve `/login` on `listener` until the browser arrives there (other
/// paths, a favicon say, get a 404), within [`WAIT`].
async fn wait_for_browser(listener: tokio::net::TcpListener) -> Result<Callback> {
    let (tx, mut rx) = mpsc::channel::<Callback>(1);
    let app = axum::Router::new().route(
        tfreg_model::login::REDIRECT_PATH,
        axum::routing::get(move |query: axum::extract::RawQuery| {
            let tx = tx.clone();
            async move {
                let back = callback_of(query.0.as_deref().unwrap_or(""));
                let page = if back.error.is_some() {
                    "The sign-in was refused; the terminal says why. You can close this tab."
                } else {
                    "Signed in. You can close this tab and return to the terminal."
                };
                let _ = tx.send(back).await;
                axum::response::Html(format!(
                    "<!doctype html><title>tfreg login</title><p>{page}</p>"
                ))
            }
        }),
    );
    let serving = tokio::spawn(async move { axum::serve(listener, app).await });
    let back = tokio::time::timeout(WAIT, rx.recv()).await;
    serving.abort();
    match back {
        Ok(Some(back)) => Ok(back),
        _ => Err(format!(
            "the browser did not come back within {} minutes",
            WAIT.as_secs() / 60
        )
        .into()),
    }
}

/// A query string's fields (the last of a repeated one).
fn callback_of(q: &str) -> Callback {
    let mut back = Callback::default();
    for (k, v) in url::form_urlencoded::parse(q.as_bytes()) {
        let v = Some(v.into_owned());
        match &*k {
            "code" => back.code = v,
            "state" => back.state = v,
            "error" => back.error = v,
            "error_description" => back.error_description = v,
            _ => {}
        }
    }
    back
}

/// The code for a token at login.v1's token endpoint.
async fn redeem(
    http: &reqwest::Client,
    url: &url::Url,
    client: &str,
    code: &str,
    verifier: &str,
    redirect_uri: &str,
) -> Result<String> {
    let resp = http
        .post(url.clone())
        .form(&[
            ("client_id", client),
            ("code", code),
            ("code_verifier", verifier),
            ("grant_type", "authorization_code"),
            ("redirect_uri", redirect_uri),
        ])
        .send()
        .await
        .map_err(|e| NetError::new(format!("cannot reach {url}"), e))?;
    let status = resp.status();
    let body: serde_json::Value = resp.json().await.unwrap_or_default();
    let text = |k: &str| body.get(k).and_then(|v| v.as_str()).map(str::to_string);
    if !status.is_success() {
        return Err(format!(
            "the registry refused the code ({status}): {} {}",
            text("error").unwrap_or_default(),
            text("error_description").unwrap_or_default()
        )
        .into());
    }
    text("access_token")
        .filter(|t| !t.is_empty())
        .ok_or_else(|| format!("{url} answered without an access_token").into())
}
