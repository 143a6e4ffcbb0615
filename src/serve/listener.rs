//! The HTTPS listener of `tfreg serve`, with every resource a client can hold
//! bounded: connections (a limit; past it new connections wait in the kernel's
//! backlog), the TLS handshake (its time; a quarter of the connection slots,
//! at least 64, for all handshakes in progress; and [`super::per_address`] per
//! client address, so idle connections from one client cannot starve the
//! others), connections per client address ([`super::per_address`] too), the
//! wait from the handshake to the first request byte ([`super::first_byte`]),
//! a connection with no request in flight ([`super::idle`]), the request head
//! (time and size) and each wait for request body data.
//! TCP_NODELAY is set: a small response on a reused connection must not
//! wait for Nagle and a delayed ACK. A closing connection lingers
//! ([`super::linger`]) so that a refusal reaches a client still sending.
//!
//! Sizes a request may use *before* anything checks its token: hyper's read
//! buffer ([`MAX_HEAD_BYTES`]) per connection, times [`Limits::max_connections`].
//! Handlers read no body before authorising it.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use tfreg_http::body::with_idle_timeout;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tower::ServiceExt as _;

use super::first_byte::FirstByte;
use super::idle::Activity;
use super::linger::Lingering;
use super::per_address::PerAddress;

/// The hard bound of a request head, in bytes: hyper's HTTP/1 read buffer and
/// the HTTP/2 header list. The registry's own limit
/// ([`tfreg_http::app::MAX_HEADER_BYTES`], answered with a JSON 431) is below it; a
/// head over this bound gets hyper's bare 431 (HTTP/1) or h2's (HTTP/2).
pub const MAX_HEAD_BYTES: usize = 128 * 1024;

/// Header lines hyper parses before answering 431 itself (above the
/// registry's own [`tfreg_http::app::MAX_HEADERS`], so that limit answers first).
const MAX_HEADER_LINES: usize = 2 * tfreg_http::app::MAX_HEADERS;

/// How long a connection closed for idling may take to close (HTTP/2:
/// the client's answer to the PING after GOAWAY) before it is dropped.
const CLOSE_GRACE: Duration = Duration::from_secs(5);

/// HTTP/2 streams one connection may have open at once.
const MAX_STREAMS_PER_CONNECTION: u32 = 128;

/// Connections served at once by default (`tfreg serve --max-connections`).
pub const DEFAULT_MAX_CONNECTIONS: std::num::NonZeroUsize =
    std::num::NonZeroUsize::new(1024).expect("not zero");

/// What one client may hold, and for how long.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Connections served at once; more wait in the listen backlog.
    pub max_connections: usize,
    /// From TCP accept to a finished TLS handshake.
    pub handshake_timeout: Duration,
    /// TLS handshakes one client address may have in progress; past it a
    /// new connection from that address is closed at once.
    pub max_handshakes_per_address: usize,
    /// Connections one client address may have open (handshake to close);
    /// past it a new connection from that address is closed at once.
    pub max_connections_per_address: usize,
    /// From the end of the TLS handshake to the first request byte (or the
    /// HTTP/2 preface).
    pub first_byte_timeout: Duration,
    /// A connection with no request in flight this long is closed
    /// gracefully (an HTTP/2 client answering pings held one for ever).
    pub idle_timeout: Duration,
    /// From a connection's start (or its previous response) to a whole request head.
    pub header_read_timeout: Duration,
    /// Longest wait for the next piece of a request body.
    pub body_idle_timeout: Duration,
    /// How long a stop waits for requests in flight.
    pub drain_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_connections: DEFAULT_MAX_CONNECTIONS.get(),
            handshake_timeout: Duration::from_secs(10),
            max_handshakes_per_address: super::per_address::DEFAULT_HANDSHAKES,
            max_connections_per_address: super::per_address::DEFAULT_CONNECTIONS,
            first_byte_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            header_read_timeout: Duration::from_secs(10),
            body_idle_timeout: Duration::from_secs(30),
            drain_timeout: Duration::from_secs(10),
        }
    }
}

/// TLS handshakes in progress at once, of `max_connections` slots: a quarter,
/// at least 64 (or every slot, when there are fewer).
fn handshake_budget(max_connections: usize) -> usize {
    (max_connections / 4).max(64).min(max_connections).max(1)
}

fn http_builder(limits: &Limits) -> auto::Builder<TokioExecutor> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .max_buf_size(MAX_HEAD_BYTES)
        .max_headers(MAX_HEADER_LINES);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_header_list_size(MAX_HEAD_BYTES as u32)
        .max_concurrent_streams(MAX_STREAMS_PER_CONNECTION)
        .keep_alive_interval(Duration::from_secs(30))
        .keep_alive_timeout(Duration::from_secs(20));
    builder
}

/// Serve `app` on `listener` over TLS until `stop` resolves; then stop
/// accepting, let requests in flight finish for up to `drain_timeout`, and return.
pub async fn serve(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    app: axum::Router,
    limits: Limits,
    stop: impl Future<Output = ()>,
) {
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    let builder = http_builder(&limits);
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    // Handshakes in progress hold at most a quarter of the connection slots
    // (at least 64, or all of them when there are fewer).
    let handshake_slots = Arc::new(Semaphore::new(handshake_budget(limits.max_connections)));
    let handshakes = PerAddress::new(limits.max_handshakes_per_address);
    let connections = PerAddress::new(limits.max_connections_per_address);
    // Told to every connection at the stop: each closes gracefully, and the
    // stop waits until every connection slot is free again.
    let (stopping, _) = tokio::sync::watch::channel(false);
    let mut warned_full = false;
    tokio::pin!(stop);
    loop {
        let permit = tokio::select! {
            biased;
            () = &mut stop => break,
            permit = permits.clone().acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break, // never closed
            },
        };
        let handshake_slot = tokio::select! {
            biased;
            () = &mut stop => break,
            slot = handshake_slots.clone().acquire_owned() => match slot {
                Ok(slot) => slot,
                Err(_) => break, // never closed
            },
        };
        let (tcp, peer) = tokio::select! {
            biased;
            () = &mut stop => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of file descriptors and the like: back off, keep serving.
                    tracing::warn!(error = %e, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let connection = match connections.begin(peer.ip()) {
            Ok(connection) => connection,
            Err(refused) => {
                if refused.first {
                    tracing::warn!(
                        client = %refused.client,
                        "connection refused: this address has {} connections open \
                         (--max-connections-per-address); closing its new connections until one ends",
                        refused.in_progress
                    );
                }
                drop(tcp);
                continue;
            }
        };
        let handshake = match handshakes.begin(peer.ip()) {
            Ok(handshake) => handshake,
            Err(refused) => {
                if refused.first {
                    tracing::warn!(
                        client = %refused.client,
                        "connection refused: this address has {} TLS handshakes in progress \
                         (--max-handshakes-per-address); closing its new connections until one ends",
                        refused.in_progress
                    );
                }
                drop(tcp);
                continue;
            }
        };
        if permits.available_permits() == 0 {
            if !warned_full {
                tracing::warn!(
                    max_connections = limits.max_connections,
                    "connection limit reached: new connections wait until one closes"
                );
            }
            warned_full = true;
        } else {
            warned_full = false;
        }
        let _ = tcp.set_nodelay(true);
        let acceptor = acceptor.clone();
        let builder = builder.clone();
        let idle = limits.body_idle_timeout;
        let activity = Activity::new();
        let requests = activity.clone();
        let service = TowerToHyperService::new(
            app.clone()
                .map_request(move |req: http::Request<hyper::body::Incoming>| {
                    req.map(|body| with_idle_timeout(axum::body::Body::new(body), idle))
                })
                .map_future(move |response| {
                    let busy = requests.begin();
                    async move {
                        // In flight until the response body is sent (or dropped).
                        response.await.map(|response| {
                            response.map(|body| {
                                use http_body_util::BodyExt as _;
                                axum::body::Body::new(body.map_frame(move |frame| {
                                    let _in_flight = &busy;
                                    frame
                                }))
                            })
                        })
                    }
                }),
        );
        let mut stop_seen = stopping.subscribe();
        let handshake_timeout = limits.handshake_timeout;
        let first_byte_timeout = limits.first_byte_timeout;
        let idle_timeout = limits.idle_timeout;
        tokio::spawn(async move {
            let _held = (permit, connection);
            let tls = tokio::select! {
                tls = tokio::time::timeout(handshake_timeout, acceptor.accept(tcp)) => tls,
                _ = stop_seen.wait_for(|stop| *stop) => return,
            };
            drop((handshake, handshake_slot));
            let tls = match tls {
                Ok(Ok(tls)) => tls,
                Ok(Err(e)) => {
                    tracing::debug!(%peer, error = %e, "TLS handshake failed");
                    return;
                }
                Err(_) => {
                    tracing::debug!(%peer, "TLS handshake timed out");
                    return;
                }
            };
            let conn = builder
                .serve_connection_with_upgrades(
                    TokioIo::new(Lingering::new(FirstByte::new(tls, first_byte_timeout))),
                    service,
                )
                .into_owned();
            tokio::pin!(conn);
            let mut closing = false;
            let ended = loop {
                tokio::select! {
                    ended = conn.as_mut() => break ended,
                    _ = stop_seen.wait_for(|stop| *stop), if !closing => {
                        conn.as_mut().graceful_shutdown();
                        closing = true;
                    }
                    () = activity.idle_for(idle_timeout), if !closing => {
                        tracing::debug!(%peer, "closing a connection idle for {idle_timeout:?}");
                        conn.as_mut().graceful_shutdown();
                        closing = true;
                    }
                    // HTTP/2's graceful close waits for the client to answer
                    // a PING: one that never does is dropped once still
                    // idle a while later.
                    () = activity.idle_for(idle_timeout + CLOSE_GRACE), if closing => {
                        tracing::debug!(%peer, "dropping a connection that did not close");
                        break Ok(());
                    }
                }
            };
            if let Err(e) = ended {
                tracing::debug!(%peer, error = %e, "connection ended with an error");
            }
        });
    }
    drop(listener);
    stopping.send_replace(true);
    let all = u32::try_from(limits.max_connections).unwrap_or(u32::MAX);
    if tokio::time::timeout(limits.drain_timeout, permits.acquire_many(all))
        .await
        .is_err()
    {
        tracing::warn!(
            "requests still in flight after {:?}: stopping anyway",
            limits.drain_timeout
        );
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn handshakes_get_a_quarter_of_the_slots_and_at_least_64() {
        assert_eq!(super::handshake_budget(1024), 256);
        assert_eq!(super::handshake_budget(100), 64);
        assert_eq!(super::handshake_budget(8), 8);
        assert_eq!(super::handshake_budget(1), 1);
    }
}
