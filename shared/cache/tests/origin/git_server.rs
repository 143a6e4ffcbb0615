//! A real git server for the tests: `git http-backend` (smart HTTP, v0 and
//! v2) behind HTTPS, as a CGI. hyper's HTTP/1 server over tokio-rustls with
//! the tests' CA ([`Pki`]); each request runs the backend once with the CGI
//! variables it reads (`GIT_PROJECT_ROOT`, `PATH_INFO`, `QUERY_STRING`,
//! `REQUEST_METHOD`, `CONTENT_TYPE`, `CONTENT_LENGTH`, `HTTP_GIT_PROTOCOL`
//! from `Git-Protocol`, …) and its `Status:` header becomes the status.
//!
//! Here rather than in `tfreg-testkit`: testkit has no TLS server stack,
//! and adding hyper's server, tokio-rustls and rcgen to it would build them
//! for every crate whose tests use testkit. Move it there (with [`Pki`])
//! when tests/suite needs it.

use std::convert::Infallible;
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};

use crate::support::Pki;

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub struct GitHit {
    pub method: String,
    /// Path and query.
    pub target: String,
    pub git_protocol: Option<String>,
    pub authorization: Option<String>,
}

pub struct GitServer {
    pub addr: SocketAddr,
    hits: Arc<Mutex<Vec<GitHit>>>,
    accepts: Arc<AtomicUsize>,
}

/// `git --exec-path`'s `git-http-backend`.
fn backend() -> PathBuf {
    let out = Command::new("git")
        .arg("--exec-path")
        .output()
        .expect("git runs");
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim()).join("git-http-backend")
}

impl GitServer {
    /// Serve the repositories under `root` (`/<name>.git/...`) on `ip`.
    pub async fn start(ip: &str, pki: &Pki, root: &Path) -> Self {
        let listener = tokio::net::TcpListener::bind((ip, 0)).await.unwrap();
        let server = Self {
            addr: listener.local_addr().unwrap(),
            hits: Arc::default(),
            accepts: Arc::default(),
        };
        let (hits, accepts) = (server.hits.clone(), server.accepts.clone());
        let tls = tokio_rustls::TlsAcceptor::from(pki.server.clone());
        let (root, backend) = (Arc::new(root.to_path_buf()), Arc::new(backend()));
        tokio::spawn(async move {
            while let Ok((tcp, peer)) = listener.accept().await {
                accepts.fetch_add(1, Ordering::SeqCst);
                let (tls, hits, root, backend) =
                    (tls.clone(), hits.clone(), root.clone(), backend.clone());
                tokio::spawn(async move {
                    let Ok(stream) = tls.accept(tcp).await else {
                        return;
                    };
                    let service = hyper::service::service_fn(move |req| {
                        let (hits, root, backend) = (hits.clone(), root.clone(), backend.clone());
                        async move { Ok::<_, Infallible>(cgi(req, &hits, &root, &backend, peer).await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        server
    }

    pub fn hits(&self) -> Vec<GitHit> {
        self.hits.lock().unwrap().clone()
    }

    /// TCP connections accepted, whatever followed.
    pub fn accepts(&self) -> usize {
        self.accepts.load(Ordering::SeqCst)
    }
}

async fn cgi(
    req: hyper::Request<hyper::body::Incoming>,
    hits: &Mutex<Vec<GitHit>>,
    root: &Path,
    backend: &Path,
    peer: SocketAddr,
) -> hyper::Response<Full<Bytes>> {
    let header = |name: &str| {
        req.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let hit = GitHit {
        method: req.method().to_string(),
        target: req
            .uri()
            .path_and_query()
            .map(|p| p.to_string())
            .unwrap_or_default(),
        git_protocol: header("git-protocol"),
        authorization: header("authorization"),
    };
    hits.lock().unwrap().push(hit.clone());
    let content_type = header("content-type").unwrap_or_default();
    let path = req.uri().path().to_string();
    let query = req.uri().query().unwrap_or_default().to_string();
    let body = req
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let (root, backend) = (root.to_path_buf(), backend.to_path_buf());
    let output = tokio::task::spawn_blocking(move || {
        let mut child = Command::new(backend)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("GIT_PROJECT_ROOT", &root)
            .env("GIT_HTTP_EXPORT_ALL", "1")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", &root)
            .env("PATH_INFO", &path)
            .env("QUERY_STRING", &query)
            .env("REQUEST_METHOD", &hit.method)
            .env("CONTENT_TYPE", &content_type)
            .env("CONTENT_LENGTH", body.len().to_string())
            .env("HTTP_GIT_PROTOCOL", hit.git_protocol.unwrap_or_default())
            .env("REMOTE_ADDR", peer.ip().to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("git http-backend runs");
        let mut stdin = child.stdin.take().unwrap();
        // The backend reads its input before it answers.
        let _ = stdin.write_all(&body);
        drop(stdin);
        child.wait_with_output().unwrap()
    })
    .await
    .unwrap();
    parse_cgi(&output.stdout)
}

/// CGI output: headers, a blank line, the body; `Status:` sets the status.
fn parse_cgi(out: &[u8]) -> hyper::Response<Full<Bytes>> {
    let (head, body) = match out.windows(4).position(|w| w == b"\r\n\r\n") {
        Some(i) => (&out[..i], &out[i + 4..]),
        None => match out.windows(2).position(|w| w == b"\n\n") {
            Some(i) => (&out[..i], &out[i + 2..]),
            None => (&b""[..], out),
        },
    };
    let mut reply = hyper::Response::builder().status(200);
    for line in String::from_utf8_lossy(head).lines() {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("status") {
            let code: u16 = value
                .split(' ')
                .next()
                .unwrap_or("500")
                .parse()
                .unwrap_or(500);
            reply = reply.status(code);
        } else {
            reply = reply.header(name.trim(), value);
        }
    }
    reply.body(Full::new(Bytes::copy_from_slice(body))).unwrap()
}
