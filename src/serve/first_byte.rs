//! A deadline from the end of the TLS handshake to the first byte of a
//! request (or of the HTTP/2 preface).
//!
//! hyper's header timer starts only once the HTTP version is known, which
//! takes the connection's first bytes: a client that finished its handshake
//! and then sent nothing kept its connection (and its slot) for as long as
//! it liked. Found from outside: one address held all 1,024 slots for 67 s
//! and everyone else timed out at 10 s. Reading from a [`FirstByte`] stream
//! fails with [`NoRequest`] (as `TimedOut`) when nothing arrived in time, and
//! the connection ends. After the first byte the stream is passed through:
//! from there hyper's own timers (the request head, kept-alive idling, body
//! data, HTTP/2 pings) bound it.

use std::future::Future as _;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Nothing was sent within the deadline after the handshake.
#[derive(Debug, thiserror::Error)]
#[error("no request within {0:?} of the TLS handshake")]
pub struct NoRequest(pub Duration);

/// An I/O stream whose reads fail when its first byte is late.
pub struct FirstByte<IO> {
    inner: IO,
    /// Until the first byte arrives.
    deadline: Option<Pin<Box<tokio::time::Sleep>>>,
    timeout: Duration,
}

impl<IO> FirstByte<IO> {
    /// `inner`, whose first byte must arrive within `timeout` from now.
    pub fn new(inner: IO, timeout: Duration) -> Self {
        Self {
            inner,
            deadline: Some(Box::pin(tokio::time::sleep(timeout))),
            timeout,
        }
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for FirstByte<IO> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let before = buf.filled().len();
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if buf.filled().len() > before {
                    this.deadline = None;
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => {
                let late = this
                    .deadline
                    .as_mut()
                    .is_some_and(|deadline| deadline.as_mut().poll(cx).is_ready());
                if late {
                    Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        NoRequest(this.timeout),
                    )))
                } else {
                    Poll::Pending
                }
            }
        }
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for FirstByte<IO> {
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
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test(start_paused = true)]
    async fn a_silent_peer_is_cut_off_at_the_deadline() {
        let (server, _client) = tokio::io::duplex(64);
        let mut server = FirstByte::new(server, Duration::from_secs(3));
        let started = tokio::time::Instant::now();
        let e = server.read(&mut [0u8; 8]).await.unwrap_err();
        assert_eq!(started.elapsed(), Duration::from_secs(3));
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        assert_eq!(
            e.into_inner().unwrap().to_string(),
            "no request within 3s of the TLS handshake"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn after_the_first_byte_the_stream_has_no_deadline() {
        let (server, mut client) = tokio::io::duplex(64);
        let mut server = FirstByte::new(server, Duration::from_secs(3));
        client.write_all(b"G").await.unwrap();
        let mut buf = [0u8; 8];
        assert_eq!(server.read(&mut buf).await.unwrap(), 1);
        tokio::time::sleep(Duration::from_secs(60)).await;
        client.write_all(b"ET").await.unwrap();
        assert_eq!(server.read(&mut buf).await.unwrap(), 2);
    }
}
