//! The real OpenID Provider of the sign-in tests (`tests/oidc/provider.mjs`,
//! npm `oidc-provider`) as a child process, and a cookie-jar "browser" that
//! follows a sign-in's redirects over HTTP, filling in the provider's login
//! and consent forms as a person would.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::Value;

/// The repository's root (this crate is `shared/testkit`).
fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `TFREG_OIDC_PROVIDER` from the environment or `.tools/env`.
fn provider_package() -> PathBuf {
    if let Ok(p) = std::env::var("TFREG_OIDC_PROVIDER") {
        return PathBuf::from(p);
    }
    let env = std::fs::read_to_string(repo_root().join(".tools/env")).unwrap_or_default();
    env.lines()
        .find_map(|l| l.strip_prefix("export TFREG_OIDC_PROVIDER="))
        .map(|v| PathBuf::from(v.trim_matches('"')))
        .expect("TFREG_OIDC_PROVIDER is not set: run .ci/install-tools")
}

/// A running provider; killed when dropped (and it exits when our end of
/// its stdin closes, should this process die first).
/// How long the provider may take to say it is ready.
const READY: std::time::Duration = std::time::Duration::from_secs(30);

pub struct Provider {
    child: Child,
    /// Its stdout, kept open: a closed pipe would kill it at its next write.
    _stdout: BufReader<std::process::ChildStdout>,
    pub issuer: String,
    pub ready: Value,
    http: reqwest::Client,
}

impl Provider {
    /// Start the provider with `config` (see the header of `provider.mjs`);
    /// `exit_on_stdin_close` is added.
    pub fn start(mut config: Value) -> Provider {
        config["exit_on_stdin_close"] = Value::Bool(true);
        // node has been seen (twice, on a machine busy with three builds)
        // to hang at start, before listening, in a futex wait: so a start
        // that says nothing within READY is killed and tried once more,
        // rather than the test waiting forever.
        for attempt in 1..=2 {
            let mut child = Command::new("node")
                .arg(repo_root().join("tests/oidc/provider.mjs"))
                .env("TFREG_OIDC_PROVIDER", provider_package())
                .env("OIDC_CONFIG", config.to_string())
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .expect("node runs tests/oidc/provider.mjs");
            let stdout = child.stdout.take().unwrap();
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                let mut stdout = BufReader::new(stdout);
                let mut line = String::new();
                let read = stdout.read_line(&mut line);
                let _ = tx.send((read, line, stdout));
            });
            match rx.recv_timeout(READY) {
                Ok((read, line, stdout)) => {
                    read.expect("the provider's ready line");
                    let ready: Value = serde_json::from_str(&line)
                        .unwrap_or_else(|e| panic!("the provider's ready line {line:?}: {e}"));
                    return Provider {
                        issuer: ready["issuer"].as_str().unwrap().to_string(),
                        ready,
                        child,
                        _stdout: stdout,
                        http: reqwest::Client::new(),
                    };
                }
                Err(_) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    eprintln!(
                        "the OpenID Provider said nothing in {READY:?} (attempt {attempt}): started again"
                    );
                }
            }
        }
        panic!("the OpenID Provider (node tests/oidc/provider.mjs) did not start twice in a row");
    }

    /// New keys sign from now on (`retire`: the old ones are no longer published).
    pub async fn rotate(&self, retire: bool) -> Value {
        self.rotate_with(&self.http, retire).await
    }

    /// [`Provider::rotate`] through `http` (a client trusting its HTTPS).
    pub async fn rotate_with(&self, http: &reqwest::Client, retire: bool) -> Value {
        let q = if retire { "?retire=1" } else { "" };
        let resp = http
            .post(format!("{}/_test/rotate{q}", self.issuer))
            .send()
            .await
            .unwrap();
        assert!(resp.status().is_success(), "rotate: {}", resp.status());
        resp.json().await.unwrap()
    }

    /// A JWT the provider signs with `claims` (see `/_test/sign`).
    pub async fn sign(&self, body: Value) -> String {
        self.sign_with(&self.http, body).await
    }

    /// [`Provider::sign`] through `http` (a client trusting its HTTPS).
    pub async fn sign_with(&self, http: &reqwest::Client, body: Value) -> String {
        let resp = http
            .post(format!("{}/_test/sign", self.issuer))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert!(resp.status().is_success(), "sign: {}", resp.status());
        resp.text().await.unwrap()
    }
}

impl Drop for Provider {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One answer of a [`Browser`] hop: status, absolute `Location`, body.
#[derive(Debug, Clone)]
pub struct Hop {
    pub status: u16,
    pub location: Option<String>,
    pub body: String,
}

/// A cookie jar over a client that never follows redirects: cookies are
/// kept per host:port by name (enough for the provider's and the registry's).
pub struct Browser {
    client: reqwest::Client,
    jar: HashMap<String, HashMap<String, String>>,
}

impl Browser {
    /// A browser with `client` (which must not follow redirects).
    pub fn new(client: reqwest::Client) -> Browser {
        Browser {
            client,
            jar: HashMap::new(),
        }
    }

    fn host_key(url: &url::Url) -> String {
        format!(
            "{}:{}",
            url.host_str().unwrap_or(""),
            url.port_or_known_default().unwrap_or(0)
        )
    }

    /// Forget the cookies of `url`'s host.
    pub fn forget(&mut self, url: &str) {
        let url = url::Url::parse(url).unwrap();
        self.jar.remove(&Self::host_key(&url));
    }

    /// The value of cookie `name` held for `url`'s host.
    pub fn cookie(&self, url: &str, name: &str) -> Option<String> {
        let url = url::Url::parse(url).unwrap();
        self.jar.get(&Self::host_key(&url))?.get(name).cloned()
    }

    /// Set cookie `name` for `url`'s host.
    pub fn set_cookie(&mut self, url: &str, name: &str, value: &str) {
        let url = url::Url::parse(url).unwrap();
        self.jar
            .entry(Self::host_key(&url))
            .or_default()
            .insert(name.into(), value.into());
    }

    /// GET (or POST `form`) `url` with this host's cookies, keeping the ones set.
    pub async fn hop(&mut self, url: &str, form: Option<&[(&str, &str)]>) -> Hop {
        let parsed = url::Url::parse(url).unwrap_or_else(|e| panic!("{url}: {e}"));
        let key = Self::host_key(&parsed);
        let mut req = match form {
            Some(form) => self.client.post(parsed.clone()).form(form),
            None => self.client.get(parsed.clone()),
        };
        if let Some(cookies) = self.jar.get(&key).filter(|c| !c.is_empty()) {
            let header: Vec<String> = cookies.iter().map(|(k, v)| format!("{k}={v}")).collect();
            req = req.header("cookie", header.join("; "));
        }
        let resp = req.send().await.unwrap_or_else(|e| panic!("{url}: {e:?}"));
        let status = resp.status().as_u16();
        for set in resp.headers().get_all("set-cookie") {
            let set = set.to_str().unwrap();
            let (pair, attrs) = set.split_once(';').unwrap_or((set, ""));
            let (name, value) = pair.split_once('=').unwrap();
            let attrs = attrs.to_ascii_lowercase();
            let gone = attrs.contains("max-age=0") || attrs.contains("expires=thu, 01 jan 1970");
            let cookies = self.jar.entry(key.clone()).or_default();
            if gone {
                cookies.remove(name.trim());
            } else {
                cookies.insert(name.trim().into(), value.trim().into());
            }
        }
        let location = resp
            .headers()
            .get("location")
            .map(|l| parsed.join(l.to_str().unwrap()).unwrap().to_string());
        let body = resp.text().await.unwrap_or_default();
        Hop {
            status,
            location,
            body,
        }
    }

    /// Follow redirects from `url` as a person signing in as `login` would
    /// (filling the provider's login form, and its consent form if asked),
    /// until a redirect leaves for a URL starting with one of `stop_at`, or
    /// an answer is not a redirect. Every hop is returned, the last one last.
    pub async fn sign_in(&mut self, url: &str, login: &str, stop_at: &[&str]) -> Vec<Hop> {
        let mut hops = Vec::new();
        let mut next = url.to_string();
        let mut form: Option<Vec<(&str, &str)>> = None;
        for _ in 0..20 {
            let hop = self.hop(&next, form.as_deref()).await;
            form = None;
            let Some(location) = hop.location.clone() else {
                hops.push(hop);
                return hops;
            };
            hops.push(hop);
            if stop_at.iter().any(|s| location.starts_with(s)) {
                return hops;
            }
            if location.contains("/interaction/") {
                let page = self.hop(&location, None).await;
                form = Some(if page.body.contains(r#"name="prompt" value="login""#) {
                    vec![("prompt", "login"), ("login", login), ("password", "x")]
                } else {
                    vec![("prompt", "consent")]
                });
            }
            next = location;
        }
        panic!("more than 20 redirects from {url}: {hops:?}");
    }
}

/// The value of query parameter `name` in `url`.
pub fn query_param(url: &str, name: &str) -> Option<String> {
    url::Url::parse(url)
        .ok()?
        .query_pairs()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
}
