//! A connection with no request in flight for [`super::listener::Limits::idle_timeout`]
//! is closed gracefully (HTTP/2: GOAWAY, then close; HTTP/1: closed).
//!
//! Found from outside (issue 35): after its preface, an HTTP/2 client that
//! opens no stream and answers the server's pings (or sends its own) kept
//! its connection for as long as it liked: every byte it sent reset any
//! timer that watches the socket, and hyper has no idle timer for HTTP/2.
//! So the deadline watches requests, not bytes: [`Activity`] counts the
//! connection's requests in flight (from the request until its response's
//! body is sent) and when the last one ended. HTTP/2's graceful close waits
//! for the client's answer to a PING: a client that never answers is
//! dropped once still idle a few seconds later. HTTP/1's wait for the next request is
//! bounded by hyper's header timer already; this bounds it too.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

/// One connection's requests in flight, and when it was last busy.
#[derive(Clone)]
pub struct Activity(Arc<Inner>);

struct Inner {
    busy: AtomicUsize,
    last: Mutex<Instant>,
    changed: Notify,
}

/// A request in flight on the connection, until dropped.
pub struct Busy(Activity);

impl Activity {
    /// A connection idle from now.
    pub fn new() -> Self {
        Self(Arc::new(Inner {
            busy: AtomicUsize::new(0),
            last: Mutex::new(Instant::now()),
            changed: Notify::new(),
        }))
    }

    /// A request starts.
    pub fn begin(&self) -> Busy {
        self.0.busy.fetch_add(1, Ordering::SeqCst);
        self.0.changed.notify_waiters();
        Busy(self.clone())
    }

    /// Resolves once no request has been in flight for `timeout`.
    pub async fn idle_for(&self, timeout: Duration) {
        loop {
            let changed = self.0.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if self.0.busy.load(Ordering::SeqCst) > 0 {
                changed.await;
                continue;
            }
            let since = self.0.last.lock().expect("activity lock").elapsed();
            let Some(left) = timeout.checked_sub(since).filter(|l| !l.is_zero()) else {
                return;
            };
            tokio::select! {
                () = tokio::time::sleep(left) => {}
                () = changed => {}
            }
        }
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        *self.0.0.last.lock().expect("activity lock") = Instant::now();
        self.0.0.busy.fetch_sub(1, Ordering::SeqCst);
        self.0.0.changed.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn idle_from_the_start_and_from_the_last_request() {
        let a = Activity::new();
        let started = Instant::now();
        a.idle_for(Duration::from_secs(5)).await;
        assert_eq!(started.elapsed(), Duration::from_secs(5));
        // A request in flight for 20 s: not idle meanwhile, idle 5 s after.
        let busy = a.begin();
        let held = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(20)).await;
            drop(busy);
        });
        let started = Instant::now();
        a.idle_for(Duration::from_secs(5)).await;
        assert_eq!(started.elapsed(), Duration::from_secs(25));
        held.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_during_the_wait_starts_it_again() {
        let a = Activity::new();
        let b = a.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(3)).await;
            let busy = b.begin();
            tokio::time::sleep(Duration::from_secs(1)).await;
            drop(busy);
        });
        let started = Instant::now();
        a.idle_for(Duration::from_secs(5)).await;
        // Busy from 3 s to 4 s: idle 5 s after that.
        assert_eq!(started.elapsed(), Duration::from_secs(9));
    }
}
