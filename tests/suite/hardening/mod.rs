//! Issue 9's hardening, proven by breaking things on purpose against real
//! processes: hostile and slow clients against `tfreg serve` ([`limits`]);
//! a database made read-only, locked or out of space, a killed server, a stop
//! during start-up ([`faults`]). (DynamoDB and S3 going away and coming
//! back: `crate::aws_outage`.)
//!
//! The helpers here speak raw HTTP/1.1 over TLS, so a test decides exactly
//! what a client sends and when.

mod bodies;
mod faults;
mod idle;
mod limits;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tfreg_model::protocol::{FileDecl, PublishBegin, PublishRequest};

use crate::support::Server;

/// A TLS client trusting only `ca`, speaking `alpn` (`http/1.1` for raw requests).
pub fn tls_config(ca: &Path, alpn: &[u8]) -> Arc<rustls::ClientConfig> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca).unwrap() {
        roots.add(cert.unwrap()).unwrap();
    }
    let mut config = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![alpn.to_vec()];
    Arc::new(config)
}

pub type Tls = rustls::StreamOwned<rustls::ClientConnection, TcpStream>;

/// A finished TLS handshake with the server, over HTTP/1.1.
pub fn connect(server: &Server) -> Tls {
    let tcp = TcpStream::connect(&server.host).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let ip = server.host.rsplit_once(':').unwrap().0.to_string();
    let name = rustls::pki_types::ServerName::try_from(ip).unwrap();
    let conn = rustls::ClientConnection::new(tls_config(&server.ca, b"http/1.1"), name).unwrap();
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    while tls.conn.is_handshaking() {
        tls.conn.complete_io(&mut tls.sock).unwrap();
    }
    tls
}

/// Everything the server sends until it closes the connection (or the read
/// times out): status line, headers and body as text.
pub fn read_all(tls: &mut Tls) -> String {
    let mut out = Vec::new();
    let mut buf = [0u8; 16384];
    loop {
        match tls.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(_) => break,
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Send raw bytes; errors (the server closed first) are ignored.
pub fn send(tls: &mut Tls, bytes: &[u8]) {
    let _ = tls.write_all(bytes).and_then(|()| tls.flush());
}

/// The status of a raw HTTP/1.1 response (0 when there was none).
pub fn status_of(response: &str) -> u16 {
    response
        .lines()
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

/// Peak and current resident memory of a process, in KiB (`VmHWM`, `VmRSS`).
pub fn memory_kib(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |name: &str| -> u64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in /proc/{pid}/status"))
    };
    (field("VmHWM:"), field("VmRSS:"))
}

/// One step (`begin`, `complete`) of a module publish over HTTPS.
pub fn publish_step(
    server: &Server,
    token: &str,
    module: &str,
    version: &str,
    step: &str,
    request: &PublishRequest,
) -> reqwest::blocking::Response {
    server
        .http
        .post(server.url(&format!("/v1/publish/modules/{module}/{version}/{step}")))
        .bearer_auth(token)
        .json(request)
        .send()
        .unwrap()
}

/// A publish request declaring one file.
pub fn declaring(name: &str, size: u64, sha256: String) -> PublishRequest {
    PublishRequest {
        files: vec![FileDecl {
            name: name.into(),
            size,
            sha256,
        }],
        ..Default::default()
    }
}

/// A publish request declaring `archive` as `module.tar.gz`.
pub fn declaring_archive(archive: &[u8]) -> PublishRequest {
    declaring(
        "module.tar.gz",
        archive.len() as u64,
        tfreg_model::hashing::sha256_hex(archive),
    )
}

/// Publish a module archive's bytes through the HTTP API (begin, PUT, complete),
/// as a client that skips the CLI's own checks would; returns complete's
/// status and body.
pub fn publish_module_bytes(
    server: &Server,
    token: &str,
    module: &str,
    version: &str,
    archive: &[u8],
) -> (u16, String) {
    let mut request = declaring_archive(archive);
    let begin = publish_step(server, token, module, version, "begin", &request);
    assert_eq!(begin.status(), 200, "begin");
    let begin: PublishBegin = begin.json().unwrap();
    for upload in &begin.uploads {
        let put = server
            .http
            .put(&upload.url)
            .body(archive.to_vec())
            .send()
            .unwrap();
        assert_eq!(
            put.status(),
            200,
            "upload: {}",
            put.text().unwrap_or_default()
        );
    }
    request.upload_id = begin.upload_id;
    let done = publish_step(server, token, module, version, "complete", &request);
    let status = done.status().as_u16();
    (status, done.text().unwrap_or_default())
}
