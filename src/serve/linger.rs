//! A lingering close: after the server has sent its last bytes and shut down
//! its side, it reads and discards what the client is still sending, for a
//! bounded time and amount, before the socket is closed.
//!
//! Closing a TCP socket with unread data makes the kernel send a reset, and a
//! reset can destroy the answer just sent before the client reads it (the
//! client sees "connection reset" instead of, say, a 431 or 413 refusing the
//! request it was still sending). nginx's `lingering_close` is the same idea.

use std::future::Future as _;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// How long a closing connection keeps reading what the client still sends.
pub const LINGER_TIME: Duration = Duration::from_secs(2);

/// How much a closing connection reads at most before it closes anyway.
/// A refused body is answered at once (a client that sent `Expect:
/// 100-continue` then sends nothing more) and read here, after the answer:
/// found from outside, a 5 MB form body past this bound's old 1 MiB got a
/// connection reset instead of its 413. 16 MiB is read in milliseconds
/// over a LAN, and discarded as it comes (no memory kept).
pub const LINGER_BYTES: usize = 16 * 1024 * 1024;

/// An I/O stream whose shutdown lingers (see the module documentation).
pub struct Lingering<IO> {
    inner: IO,
    state: State,
}

enum State {
    Open,
    Draining {
        deadline: Pin<Box<tokio::time::Sleep>>,
        read: usize,
    },
    Closed,
}

impl<IO> Lingering<IO> {
    pub fn new(inner: IO) -> Self {
        Self {
            inner,
            state: State::Open,
        }
    }
}

impl<IO: AsyncRead + AsyncWrite + Unpin> AsyncRead for Lingering<IO> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<IO: AsyncRead + AsyncWrite + Unpin> AsyncWrite for Lingering<IO> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        loop {
            match &mut this.state {
                State::Open => {
                    ready!(Pin::new(&mut this.inner).poll_shutdown(cx))?;
                    this.state = State::Draining {
                        deadline: Box::pin(tokio::time::sleep(LINGER_TIME)),
                        read: 0,
                    };
                }
                State::Draining { deadline, read } => {
                    if deadline.as_mut().poll(cx).is_ready() || *read >= LINGER_BYTES {
                        this.state = State::Closed;
                        continue;
                    }
                    let mut scratch = [0u8; 16 * 1024];
                    let mut buf = ReadBuf::new(&mut scratch);
                    match ready!(Pin::new(&mut this.inner).poll_read(cx, &mut buf)) {
                        Ok(()) if !buf.filled().is_empty() => *read += buf.filled().len(),
                        // The client closed too (or broke the stream): done.
                        Ok(()) | Err(_) => this.state = State::Closed,
                    }
                }
                State::Closed => return Poll::Ready(Ok(())),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn shutdown_reads_what_the_peer_still_sends_until_it_closes() {
        let (server, mut client) = tokio::io::duplex(64);
        let mut server = Lingering::new(server);
        let writer = tokio::spawn(async move {
            client.write_all(&[7u8; 1000]).await.unwrap();
            client.shutdown().await.unwrap();
            let mut rest = Vec::new();
            client.read_to_end(&mut rest).await.unwrap();
            rest
        });
        // The duplex holds 64 bytes: the peer's 1000 only fit if shutdown reads them.
        server.shutdown().await.unwrap();
        assert!(writer.await.unwrap().is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn shutdown_stops_lingering_after_the_time_bound() {
        let (server, _client) = tokio::io::duplex(64);
        let mut server = Lingering::new(server);
        let started = tokio::time::Instant::now();
        server.shutdown().await.unwrap();
        assert_eq!(started.elapsed(), LINGER_TIME);
    }

    #[tokio::test]
    async fn shutdown_stops_lingering_after_the_byte_bound() {
        let (server, mut client) = tokio::io::duplex(64 * 1024);
        let mut server = Lingering::new(server);
        let writer = tokio::spawn(async move {
            let chunk = vec![1u8; 64 * 1024];
            let mut sent = 0;
            while client.write_all(&chunk).await.is_ok() {
                sent += chunk.len();
            }
            sent
        });
        server.shutdown().await.unwrap();
        drop(server);
        let sent = writer.await.unwrap();
        assert!(
            (LINGER_BYTES..LINGER_BYTES + 256 * 1024).contains(&sent),
            "{sent}"
        );
    }
}
