//! A real headless Chromium (Debian's `chromium`), driven over WebDriver
//! (Debian's `chromedriver`) with fantoccini: the browser the UI tests use.
//!
//! It trusts the registry's certificate by its public key only
//! (`--ignore-certificate-errors-spki-list`, the keys of the chain the server
//! presents, read with openssl): no other certificate error is ignored.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;

use super::server::{Server, free_port};
use super::tools::Tools;

/// chromedriver, stopped on drop, and a browser session in it.
pub struct Browser {
    pub client: Client,
    driver: Child,
    _profile: tempfile::TempDir,
    pub runtime: tokio::runtime::Runtime,
}

impl Drop for Browser {
    fn drop(&mut self) {
        let client = self.client.clone();
        let _ = self.runtime.block_on(async move {
            tokio::time::timeout(Duration::from_secs(10), client.close()).await
        });
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// The base64 sha256 of the SubjectPublicKeyInfo of every certificate `host`
/// presents: what `--ignore-certificate-errors-spki-list` takes.
fn spki_hashes(host: &str) -> Vec<String> {
    let shown = Command::new("openssl")
        .args(["s_client", "-connect", host, "-showcerts"])
        .stdin(Stdio::null())
        .output()
        .expect("openssl s_client");
    let text = String::from_utf8_lossy(&shown.stdout);
    let mut hashes = Vec::new();
    for pem in text.split("-----BEGIN CERTIFICATE-----").skip(1) {
        let pem = format!(
            "-----BEGIN CERTIFICATE-----{}-----END CERTIFICATE-----\n",
            pem.split("-----END CERTIFICATE-----").next().unwrap()
        );
        let script = "openssl x509 -pubkey -noout | openssl pkey -pubin -outform der | openssl dgst -sha256 -binary | openssl base64 -A";
        let mut child = Command::new("sh")
            .args(["-c", script])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(pem.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "hashing a certificate's key");
        hashes.push(String::from_utf8(out.stdout).unwrap().trim().to_string());
    }
    assert!(
        !hashes.is_empty(),
        "{host} presented no certificate: {text}"
    );
    hashes
}

impl Browser {
    /// A fresh browser profile trusting `server`'s certificate, `width`
    /// pixels wide, in `scheme` (`light` or `dark`).
    pub fn open(server: &Server, width: u32, height: u32, scheme: &str) -> Browser {
        Self::open_with(server, width, height, scheme, &[])
    }

    /// [`Browser::open`] speaking HTTP/1.1 only. For the Lambda functions
    /// behind `cargo lambda watch`: over HTTP/2 Chromium sends each cookie
    /// as its own `cookie` field (RFC 9113 8.2.3 allows it), and that front
    /// end passes only the first on to the function, so a session cookie
    /// behind another cookie of the host is lost (seen: the web UI's
    /// single sign-on passes over HTTP/1.1 and fails over HTTP/2 there,
    /// while `tfreg serve` joins the fields). API Gateway gets one Cookie
    /// header from CloudFront, which speaks HTTP/1.1 to its origins.
    pub fn open_http1(server: &Server, width: u32, height: u32, scheme: &str) -> Browser {
        Self::open_with(server, width, height, scheme, &["--disable-http2"])
    }

    fn open_with(
        server: &Server,
        width: u32,
        height: u32,
        scheme: &str,
        extra: &[&str],
    ) -> Browser {
        let tools = Tools::get();
        let chromium = tools.path("TFREG_CHROMIUM");
        let chromedriver = tools.path("TFREG_CHROMEDRIVER");
        let port = free_port();
        let driver = Command::new(&chromedriver)
            .args([format!("--port={port}"), "--allowed-ips=127.0.0.1".into()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        let profile = tempfile::tempdir().unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let spki = spki_hashes(&server.host).join(",");
        let args = vec![
            "--headless=new".to_string(),
            "--no-sandbox".into(),
            "--disable-gpu".into(),
            "--disable-dev-shm-usage".into(),
            "--disable-background-networking".into(),
            "--disable-component-update".into(),
            "--disable-sync".into(),
            "--no-first-run".into(),
            "--hide-scrollbars".into(),
            format!("--window-size={width},{height}"),
            format!("--user-data-dir={}", profile.path().display()),
            format!("--ignore-certificate-errors-spki-list={spki}"),
            // 0: dark, 1: light (blink's PreferredColorScheme).
            format!(
                "--blink-settings=preferredColorScheme={}",
                if scheme == "dark" { 0 } else { 1 }
            ),
        ];
        let args: Vec<String> = args
            .into_iter()
            .chain(extra.iter().map(|a| a.to_string()))
            .collect();
        let mut caps = serde_json::Map::new();
        caps.insert(
            "goog:chromeOptions".into(),
            serde_json::json!({ "binary": chromium, "args": args }),
        );
        let url = format!("http://127.0.0.1:{port}");
        let client = runtime.block_on(async {
            let deadline = Instant::now() + Duration::from_secs(30);
            loop {
                match ClientBuilder::new(HttpConnector::new())
                    .capabilities(caps.clone())
                    .connect(&url)
                    .await
                {
                    Ok(c) => break c,
                    Err(e) if Instant::now() < deadline => {
                        let _ = e;
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                    Err(e) => panic!("no WebDriver session from {}: {e}", chromedriver.display()),
                }
            }
        });
        Browser {
            client,
            driver,
            _profile: profile,
            runtime,
        }
    }

    pub fn run<T>(&self, f: impl std::future::Future<Output = T>) -> T {
        self.runtime.block_on(f)
    }

    /// Go to `url` and wait for the page to load.
    pub fn goto(&self, url: &str) {
        self.run(self.client.goto(url))
            .unwrap_or_else(|e| panic!("{url}: {e}"));
    }

    pub fn path(&self) -> String {
        let url = self.run(self.client.current_url()).unwrap();
        match url.query() {
            Some(q) => format!("{}?{q}", url.path()),
            None => url.path().to_string(),
        }
    }

    /// The text of the first element matching `css` (waiting up to 10 s for one).
    pub fn text(&self, css: &str) -> String {
        self.run(async {
            let e = self
                .client
                .wait()
                .at_most(Duration::from_secs(10))
                .for_element(Locator::Css(css))
                .await?;
            e.text().await
        })
        .unwrap_or_else(|e| panic!("{css}: {e}"))
    }

    /// Click what navigates (a link, a form's button) and wait until the
    /// next page has loaded: a click returns before a form's POST is answered.
    pub fn click_to_page(&self, css: &str) {
        self.js("window.__tfreg_old_page = true; return 0");
        self.click(css);
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let loaded = self.js(
                "return typeof window.__tfreg_old_page === 'undefined' && document.readyState === 'complete'",
            );
            if loaded == serde_json::Value::Bool(true) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "clicking {css} led to no new page"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The texts of every element matching `css`.
    pub fn texts(&self, css: &str) -> Vec<String> {
        self.run(async {
            let mut out = Vec::new();
            for e in self.client.find_all(Locator::Css(css)).await? {
                out.push(e.text().await?);
            }
            Ok::<_, fantoccini::error::CmdError>(out)
        })
        .unwrap_or_else(|e| panic!("{css}: {e}"))
    }

    pub fn click(&self, css: &str) {
        self.run(async {
            let e = self.client.find(Locator::Css(css)).await?;
            e.click().await
        })
        .unwrap_or_else(|e| panic!("click {css}: {e}"));
    }

    pub fn type_into(&self, css: &str, text: &str) {
        self.run(async {
            let e = self.client.find(Locator::Css(css)).await?;
            e.clear().await?;
            e.send_keys(text).await
        })
        .unwrap_or_else(|e| panic!("type into {css}: {e}"));
    }

    /// Run `script` in the page and return its value.
    pub fn js(&self, script: &str) -> serde_json::Value {
        self.run(self.client.execute(script, vec![]))
            .unwrap_or_else(|e| panic!("{script}: {e}"))
    }

    /// Send `Authorization: Bearer <token>` with every request of this
    /// browser (Chrome DevTools' `Network.setExtraHTTPHeaders`, through
    /// chromedriver): how the UI is browsed where no session cookie can be
    /// set (see tests/suite/browser.rs).
    pub fn send_token(&self, token: &str) {
        let headers = serde_json::json!({ "Authorization": format!("Bearer {token}") });
        for (cmd, params) in [
            ("Network.enable", serde_json::json!({})),
            (
                "Network.setExtraHTTPHeaders",
                serde_json::json!({ "headers": headers }),
            ),
        ] {
            self.run(self.client.issue_cmd(Cdp { cmd, params }))
                .unwrap_or_else(|e| panic!("{cmd}: {e}"));
        }
    }

    /// Save a screenshot of the viewport as `dir/name.png`.
    pub fn screenshot(&self, dir: &Path, name: &str) -> PathBuf {
        let png = self.run(self.client.screenshot()).unwrap();
        std::fs::create_dir_all(dir).unwrap();
        let path = dir.join(format!("{name}.png"));
        std::fs::write(&path, png).unwrap();
        path
    }
}

/// A Chrome DevTools Protocol command, through chromedriver's
/// `goog/cdp/execute` extension.
#[derive(Debug)]
struct Cdp {
    cmd: &'static str,
    params: serde_json::Value,
}

impl fantoccini::wd::WebDriverCompatibleCommand for Cdp {
    fn endpoint(
        &self,
        base_url: &url::Url,
        session_id: Option<&str>,
    ) -> Result<url::Url, url::ParseError> {
        base_url.join(&format!(
            "session/{}/goog/cdp/execute",
            session_id.unwrap_or_default()
        ))
    }

    fn method_and_body(&self, _: &url::Url) -> (http::Method, Option<String>) {
        let body = serde_json::json!({ "cmd": self.cmd, "params": self.params });
        (http::Method::POST, Some(body.to_string()))
    }
}
