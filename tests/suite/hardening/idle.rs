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

/// The frames of HTTP/2 read off `tls` until the server closes it: their
/// types, and when the first GOAWAY (type 7) came after `since`. PINGs
/// (type 6, no ACK flag) are sent every 300 ms meanwhile, and the server's
/// SETTINGS acknowledged: a client as lively as can be, with no request;
/// with `ack_pings`, the server's PINGs are answered too, as a real client's
/// are.
fn h2_frames_until_closed(
    tls: &mut Tls,
    since: Instant,
    ack_pings: bool,
) -> (Vec<u8>, Option<Duration>, Duration) {
    tls.sock
        .set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let mut pending = Vec::new();
    let mut types = Vec::new();
    let mut goaway = None;
    let mut last_ping = Instant::now() - Duration::from_secs(1);
    let mut buf = [0u8; 16384];
    loop {
        assert!(since.elapsed() < Duration::from_secs(20), "never closed");
        if last_ping.elapsed() >= Duration::from_millis(300) && goaway.is_none() {
            let mut ping = vec![0, 0, 8, 6, 0, 0, 0, 0, 0];
            ping.extend_from_slice(b"tfregpng");
            if tls.write_all(&ping).and_then(|()| tls.flush()).is_err() {
                return (types, goaway, since.elapsed());
            }
            last_ping = Instant::now();
        }
        match tls.read(&mut buf) {
            Ok(0) => return (types, goaway, since.elapsed()),
            Ok(n) => pending.extend_from_slice(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return (types, goaway, since.elapsed()),
        }
        while pending.len() >= 9 {
            let len = usize::from(pending[0]) << 16
                | usize::from(pending[1]) << 8
                | usize::from(pending[2]);
            if pending.len() < 9 + len {
                break;
            }
            let (kind, flags) = (pending[3], pending[4]);
            types.push(kind);
            if kind == 4 && flags & 1 == 0 {
                // Acknowledge the server's SETTINGS, as a client must.
                let _ = tls.write_all(&[0, 0, 0, 4, 1, 0, 0, 0, 0]);
            }
            if kind == 6 && flags & 1 == 0 && ack_pings {
                let mut ack = vec![0, 0, 8, 6, 1, 0, 0, 0, 0];
                ack.extend_from_slice(&pending[9..17]);
                let _ = tls.write_all(&ack);
            }
            if kind == 7 && goaway.is_none() {
                goaway = Some(since.elapsed());
            }
            pending.drain(..9 + len);
        }
    }
}

/// Found from outside (stop 35's gap): an HTTP/2 client that sends its
/// preface and then only PINGs (or answers the server's) opens no stream
/// and held its connection for as long as it liked. Now a connection with
/// no request in flight for `--idle-timeout` is sent GOAWAY and closed,
/// however much it talks; so is an HTTP/1.1 connection kept alive after its
/// last response (here before hyper's 10 s header timer); one that keeps
/// asking is served on the same connection all along.
#[test]
fn a_connection_without_requests_is_closed_at_the_idle_deadline_whatever_it_sends() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("data"), &["--idle-timeout", "2"]);
    let from: IpAddr = LOOPBACK.parse().unwrap();
    let mut preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    preface.extend_from_slice(&[0, 0, 0, 4, 0, 0, 0, 0, 0]);
    // A client that answers the server's PINGs is closed right after the
    // GOAWAY; one that does not (the close waits for that answer) is
    // dropped 5 s later.
    for (ack_pings, close_within) in [(true, 1000), (false, 5800)] {
        let mut h2 = handshake_from(&server, from, b"h2").unwrap();
        let since = Instant::now();
        send(&mut h2, &preface);
        let (types, goaway, closed) = h2_frames_until_closed(&mut h2, since, ack_pings);
        let goaway = goaway.unwrap_or_else(|| panic!("no GOAWAY; frames {types:?}"));
        assert!(
            types.iter().filter(|&&t| t == 6).count() >= 4,
            "the PINGs were answered meanwhile: {types:?}"
        );
        assert!(
            (Duration::from_millis(1800)..Duration::from_millis(3500)).contains(&goaway),
            "GOAWAY {goaway:?} after the preface (idle deadline 2 s)"
        );
        assert!(
            closed < goaway + Duration::from_millis(close_within),
            "acks pings {ack_pings}: GOAWAY {goaway:?}, closed {closed:?}"
        );
        eprintln!(
            "FIGURE an HTTP/2 connection sending only PINGs (answering the server's: {ack_pings}): GOAWAY after {:.2} s, closed after {:.2} s (--idle-timeout 2)",
            goaway.as_secs_f64(),
            closed.as_secs_f64()
        );
    }

    // HTTP/1.1: five requests a second apart on one connection, each
    // answered; then silence, and the close 2 s after the last answer.
    let mut h1 = handshake_from(&server, from, b"http/1.1").unwrap();
    h1.sock
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let kept = format!(
        "GET /.well-known/terraform.json HTTP/1.1\r\nHost: {}\r\n\r\n",
        server.host
    );
    let mut answered = Instant::now();
    for i in 0..5 {
        if i > 0 {
            std::thread::sleep(Duration::from_millis(1000));
        }
        send(&mut h1, kept.as_bytes());
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            assert_eq!(h1.read(&mut byte).unwrap(), 1, "request {i}: closed");
            head.push(byte[0]);
        }
        let head = String::from_utf8_lossy(&head).to_ascii_lowercase();
        assert!(head.starts_with("http/1.1 200"), "request {i}: {head}");
        let len: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let mut body = vec![0u8; len];
        h1.read_exact(&mut body).unwrap();
        answered = Instant::now();
    }
    let (after, sent) = closed_after(&mut h1, answered);
    assert_eq!(sent, "");
    assert!(
        (Duration::from_millis(1800)..Duration::from_millis(3500)).contains(&after),
        "the kept-alive HTTP/1.1 connection closed {after:?} after its last answer (idle deadline 2 s)"
    );
}
