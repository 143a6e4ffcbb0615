//! Found from outside (issue 35): a client that finished its TLS handshake
//! and then sent nothing kept its connection for 300 s and more, and one
//! address held all 1,024 connection slots for 67 s while other clients
//! timed out at 10 s. Now the first request byte (or the HTTP/2 preface) has
//! a deadline from the handshake, and one address may hold only so many
//! connections; another address is served meanwhile.

use std::io::{Read, Write};
use std::net::{IpAddr, TcpStream};
use std::time::{Duration, Instant};

use super::{Tls, read_all, send, status_of, tls_config};
use crate::support::Server;

/// A TCP connection from the loopback address `from` to the server.
fn tcp_from(server: &Server, from: IpAddr) -> TcpStream {
    let to: std::net::SocketAddr = server.host.parse().unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let tcp = rt.block_on(async {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind((from, 0).into()).unwrap();
        socket.connect(to).await.unwrap()
    });
    let tcp = tcp.into_std().unwrap();
    tcp.set_nonblocking(false).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    tcp
}

/// A TLS handshake from `from`, speaking `alpn`: the stream, or why the
/// handshake failed.
fn handshake_from(server: &Server, from: IpAddr, alpn: &[u8]) -> Result<Tls, std::io::Error> {
    let tcp = tcp_from(server, from);
    let ip = server.host.rsplit_once(':').unwrap().0.to_string();
    let name = rustls::pki_types::ServerName::try_from(ip).unwrap();
    let conn = rustls::ClientConnection::new(tls_config(&server.ca, alpn), name).unwrap();
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    while tls.conn.is_handshaking() {
        tls.conn.complete_io(&mut tls.sock)?;
    }
    Ok(tls)
}

/// How long after `since` the server closed `tls` (reading until it does),
/// and what it sent.
fn closed_after(tls: &mut Tls, since: Instant) -> (Duration, String) {
    let response = read_all(tls);
    (since.elapsed(), response)
}

fn discovery(host: &str) -> String {
    format!("GET /.well-known/terraform.json HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n")
}

const LOOPBACK: &str = "127.0.0.1";
const OTHER_LOOPBACK: &str = "127.0.0.2";

#[test]
fn a_connection_silent_after_its_handshake_is_closed_at_the_deadline() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("data"), &["--first-byte-timeout", "2"]);
    let from: IpAddr = LOOPBACK.parse().unwrap();
    // HTTP/1.1 and HTTP/2 (nothing sent: not even the preface) alike.
    for alpn in [&b"http/1.1"[..], b"h2"] {
        let mut silent = handshake_from(&server, from, alpn).unwrap();
        let (after, sent) = closed_after(&mut silent, Instant::now());
        assert_eq!(sent, "", "closed without an answer");
        assert!(
            (Duration::from_millis(1800)..Duration::from_millis(3500)).contains(&after),
            "{} closed {after:?} after the handshake (deadline 2 s)",
            String::from_utf8_lossy(alpn)
        );
        eprintln!(
            "FIGURE a silent {} connection closed {:.2} s after its handshake (--first-byte-timeout 2)",
            String::from_utf8_lossy(alpn),
            after.as_secs_f64()
        );
    }
    // A client that speaks within the deadline is served...
    let mut slow = handshake_from(&server, from, b"http/1.1").unwrap();
    std::thread::sleep(Duration::from_millis(1200));
    send(&mut slow, discovery(&server.host).as_bytes());
    assert_eq!(status_of(&read_all(&mut slow)), 200);
    // ...and an HTTP/2 client that sent its preface is not cut off at the deadline.
    let mut h2 = handshake_from(&server, from, b"h2").unwrap();
    // The preface and an empty SETTINGS frame.
    let mut preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    preface.extend_from_slice(&[0, 0, 0, 4, 0, 0, 0, 0, 0]);
    h2.write_all(&preface).unwrap();
    h2.flush().unwrap();
    h2.sock
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let started = Instant::now();
    let mut buf = [0u8; 4096];
    while started.elapsed() < Duration::from_secs(3) {
        match h2.read(&mut buf) {
            Ok(0) => panic!(
                "the HTTP/2 connection was closed after {:?}",
                started.elapsed()
            ),
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => panic!("the HTTP/2 connection failed: {e}"),
        }
    }
}

#[test]
fn an_address_past_its_connection_bound_is_closed_while_another_is_served() {
    let tmp = tempfile::tempdir().unwrap();
    // A first-byte deadline long enough that the held connections stay.
    let server = Server::start(
        &tmp.path().join("data"),
        &[
            "--max-connections-per-address",
            "4",
            "--first-byte-timeout",
            "60",
        ],
    );
    let attacker: IpAddr = OTHER_LOOPBACK.parse().unwrap();
    let mut held: Vec<Tls> = (0..4)
        .map(|i| {
            handshake_from(&server, attacker, b"http/1.1").unwrap_or_else(|e| panic!("{i}: {e}"))
        })
        .collect();
    // The fifth is closed at once, before its handshake ends.
    let started = Instant::now();
    let refused = match handshake_from(&server, attacker, b"http/1.1") {
        Ok(_) => panic!("a fifth connection from {attacker} finished its handshake"),
        Err(e) => e,
    };
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "refused after {:?}",
        started.elapsed()
    );
    assert!(
        matches!(
            refused.kind(),
            std::io::ErrorKind::UnexpectedEof | std::io::ErrorKind::ConnectionReset
        ),
        "{refused:?}"
    );
    // Another address is served meanwhile, on new connections.
    for _ in 0..6 {
        let mut other = handshake_from(&server, LOOPBACK.parse().unwrap(), b"http/1.1").unwrap();
        send(&mut other, discovery(&server.host).as_bytes());
        assert_eq!(status_of(&read_all(&mut other)), 200);
    }
    // The held connections are still served.
    send(&mut held[0], discovery(&server.host).as_bytes());
    assert_eq!(status_of(&read_all(&mut held[0])), 200);
    // held[0] is closed now: the address may open one more (once the server
    // has seen the close), and no more than that.
    drop(held.remove(0));
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut again = loop {
        match handshake_from(&server, attacker, b"http/1.1") {
            Ok(tls) => break tls,
            Err(e) if Instant::now() < deadline => {
                let _ = e;
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => panic!("no connection from {attacker} after one closed: {e}"),
        }
    };
    assert!(handshake_from(&server, attacker, b"http/1.1").is_err());
    send(&mut again, discovery(&server.host).as_bytes());
    assert_eq!(status_of(&read_all(&mut again)), 200);
    let log = server.server_log();
    assert!(
        log.contains(
            "connection refused: this address has 4 connections open (--max-connections-per-address); closing its new connections until one ends"
        ),
        "{log}"
    );
    assert!(log.contains("127.0.0.2"), "the address is named: {log}");
}
