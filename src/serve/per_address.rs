//! What one client address holds, bounded: its connections still in their
//! TLS handshake, and its open connections.
//!
//! A client that opens TCP connections and never starts TLS holds each for
//! the whole handshake timeout. Unbounded, one such client with no token took
//! every connection slot and everyone else waited past Terraform's 10 s.
//! Each client address may now have at most a budget of handshakes in
//! progress, and another of open connections (handshake to close): a
//! connection past either is closed at once, and the slot it would have held
//! stays free for others. All handshakes together are bounded by the listener
//! (a semaphore held until the handshake ends), so handshakes never hold more
//! than a part of the connection slots.
//!
//! An IPv6 client is counted by its /64: one host usually holds a whole /64.

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

/// Handshakes one client address may have in progress by default
/// (`tfreg serve --max-handshakes-per-address`).
pub const DEFAULT_HANDSHAKES: usize = 64;

/// Connections one client address may have open by default
/// (`tfreg serve --max-connections-per-address`): an eighth of the default
/// connection limit, so one address alone never holds them all.
pub const DEFAULT_CONNECTIONS: usize = 128;

/// What each client address holds (handshakes or connections), by address.
#[derive(Debug, Clone)]
pub struct PerAddress {
    state: Arc<Mutex<State>>,
    per_address: usize,
}

#[derive(Debug, Default)]
struct State {
    by_client: HashMap<Client, usize>,
    /// Clients refused since their count was last zero: one warning each.
    warned: HashSet<Client>,
}

/// A client as counted: an IPv4 address, or an IPv6 /64.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Client(IpAddr);

impl Client {
    pub fn of(ip: IpAddr) -> Self {
        match ip {
            IpAddr::V4(v4) => Client(IpAddr::V4(v4)),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => Client(IpAddr::V4(v4)),
                None => {
                    let prefix = u128::from(v6) & !((1u128 << 64) - 1);
                    Client(IpAddr::V6(prefix.into()))
                }
            },
        }
    }
}

impl std::fmt::Display for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            IpAddr::V4(v4) => write!(f, "{v4}"),
            IpAddr::V6(v6) => write!(f, "{v6}/64"),
        }
    }
}

/// A connection refused: its client already holds this many;
/// `first` is true for the first refusal since its count was zero.
#[derive(Debug, PartialEq, Eq)]
pub struct Refused {
    pub client: Client,
    pub in_progress: usize,
    pub first: bool,
}

/// One thing held (a handshake, a connection); released when this is dropped.
#[derive(Debug)]
pub struct Held {
    state: Arc<Mutex<State>>,
    client: Client,
}

impl PerAddress {
    pub fn new(per_address: usize) -> Self {
        Self {
            state: Arc::default(),
            per_address: per_address.max(1),
        }
    }

    /// Count one more for the client of `ip`, or refuse it.
    pub fn begin(&self, ip: IpAddr) -> Result<Held, Refused> {
        let client = Client::of(ip);
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let count = state.by_client.entry(client).or_default();
        if *count >= self.per_address {
            let in_progress = *count;
            let first = state.warned.insert(client);
            return Err(Refused {
                client,
                in_progress,
                first,
            });
        }
        *count += 1;
        Ok(Held {
            state: self.state.clone(),
            client,
        })
    }

    /// What `ip`'s client holds.
    #[cfg(test)]
    pub fn in_progress(&self, ip: IpAddr) -> usize {
        let state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        state.by_client.get(&Client::of(ip)).copied().unwrap_or(0)
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(count) = state.by_client.get_mut(&self.client) {
            *count -= 1;
            if *count == 0 {
                state.by_client.remove(&self.client);
                state.warned.remove(&self.client);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn an_address_past_its_budget_is_refused_and_others_are_not() {
        let handshakes = PerAddress::new(2);
        let a = [
            handshakes.begin(ip("10.0.0.1")).unwrap(),
            handshakes.begin(ip("10.0.0.1")).unwrap(),
        ];
        let refused = handshakes.begin(ip("10.0.0.1")).unwrap_err();
        assert_eq!(refused.in_progress, 2);
        assert!(refused.first);
        assert!(
            !handshakes.begin(ip("10.0.0.1")).unwrap_err().first,
            "warned once"
        );
        let _b = handshakes.begin(ip("10.0.0.2")).unwrap();
        drop(a);
        assert_eq!(handshakes.in_progress(ip("10.0.0.1")), 0);
        let _again = [
            handshakes.begin(ip("10.0.0.1")).unwrap(),
            handshakes.begin(ip("10.0.0.1")).unwrap(),
        ];
        assert!(
            handshakes.begin(ip("10.0.0.1")).unwrap_err().first,
            "a new episode warns again"
        );
    }

    #[test]
    fn an_ipv6_host_is_counted_by_its_64_and_a_mapped_ipv4_as_itself() {
        let handshakes = PerAddress::new(1);
        let _a = handshakes.begin(ip("2001:db8:1:2::1")).unwrap();
        let refused = handshakes.begin(ip("2001:db8:1:2:ffff::9")).unwrap_err();
        assert_eq!(refused.client.to_string(), "2001:db8:1:2::/64");
        let _other = handshakes.begin(ip("2001:db8:1:3::1")).unwrap();
        let _v4 = handshakes.begin(ip("192.0.2.7")).unwrap();
        assert!(handshakes.begin(ip("::ffff:192.0.2.7")).is_err());
    }

    #[test]
    fn a_budget_of_zero_still_lets_one_through() {
        let handshakes = PerAddress::new(0);
        let _one = handshakes.begin(ip("127.0.0.1")).unwrap();
        assert!(handshakes.begin(ip("127.0.0.1")).is_err());
    }
}
