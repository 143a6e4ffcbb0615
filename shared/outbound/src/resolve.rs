//! Names resolved for reqwest's connector, keeping only the addresses the
//! [`Policy`] allows. reqwest's `Resolve` is asked each time a connection
//! is opened and the connector uses exactly the addresses it returns, so the
//! decision is made on the addresses actually connected to: a DNS answer
//! that changes between two lookups (first public, then 127.0.0.1) meets
//! the same check again, and there is no separate lookup to race.
//!
//! Not used here on purpose: `ClientBuilder::resolve_to_addrs`, whose
//! overrides bypass the resolver (reqwest's `DnsResolverWithOverrides`).
//! Pinned names ([`Pinned`]) are an inner [`Lookup`] instead, so their
//! addresses meet the policy too.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::policy::{Policy, Refused};

/// What a [`Lookup`] returns.
pub type LookupFuture = Pin<Box<dyn Future<Output = io::Result<Vec<SocketAddr>>> + Send>>;

/// Where names are looked up before the policy sees the answers. A port of
/// 0 means "the URL's"; another port is kept when the URL names none
/// (hyper-util's rule), which is how a pinned address moves a test origin
/// off 443.
pub trait Lookup: Send + Sync {
    fn lookup(&self, host: &str) -> LookupFuture;
}

/// The system's resolver (`getaddrinfo`, as reqwest's own `GaiResolver`).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemLookup;

impl Lookup for SystemLookup {
    fn lookup(&self, host: &str) -> LookupFuture {
        let host = host.to_string();
        Box::pin(async move { Ok(tokio::net::lookup_host((host.as_str(), 0)).await?.collect()) })
    }
}

/// Some names answered from a fixed table (a cache upstream's
/// `connect.to`), every other one by `inner`.
pub struct Pinned {
    to: HashMap<String, Vec<SocketAddr>>,
    inner: Arc<dyn Lookup>,
}

impl Pinned {
    pub fn new(
        to: impl IntoIterator<Item = (String, Vec<SocketAddr>)>,
        inner: Arc<dyn Lookup>,
    ) -> Self {
        let to = to
            .into_iter()
            .map(|(host, addrs)| (host.to_ascii_lowercase(), addrs))
            .collect();
        Self { to, inner }
    }
}

impl Lookup for Pinned {
    fn lookup(&self, host: &str) -> LookupFuture {
        match self.to.get(&host.to_ascii_lowercase()) {
            Some(addrs) => {
                let addrs = addrs.clone();
                Box::pin(async move { Ok(addrs) })
            }
            None => self.inner.lookup(host),
        }
    }
}

/// A DNS server the tests control: each name answers its scripted answers
/// in turn, the last one again and again, and counts the questions. An
/// unscripted name does not exist.
#[derive(Debug, Default)]
pub struct ScriptedLookup {
    answers: Mutex<HashMap<String, VecDeque<Vec<SocketAddr>>>>,
    asked: Mutex<HashMap<String, usize>>,
}

impl ScriptedLookup {
    pub fn new() -> Self {
        Self::default()
    }

    /// Add the next answer for `host`.
    pub fn answer(&self, host: &str, addrs: impl IntoIterator<Item = SocketAddr>) -> &Self {
        self.answers
            .lock()
            .expect("scripted lookup lock")
            .entry(host.to_ascii_lowercase())
            .or_default()
            .push_back(addrs.into_iter().collect());
        self
    }

    /// How often `host` was looked up.
    pub fn asked(&self, host: &str) -> usize {
        let asked = self.asked.lock().expect("scripted lookup lock");
        asked.get(&host.to_ascii_lowercase()).copied().unwrap_or(0)
    }
}

impl Lookup for ScriptedLookup {
    fn lookup(&self, host: &str) -> LookupFuture {
        let host = host.to_ascii_lowercase();
        *self
            .asked
            .lock()
            .expect("scripted lookup lock")
            .entry(host.clone())
            .or_default() += 1;
        let mut answers = self.answers.lock().expect("scripted lookup lock");
        let answer = answers.get_mut(&host).and_then(|queue| {
            if queue.len() > 1 {
                queue.pop_front()
            } else {
                queue.front().cloned()
            }
        });
        Box::pin(async move {
            answer.ok_or_else(|| {
                io::Error::new(io::ErrorKind::NotFound, format!("{host}: no such host"))
            })
        })
    }
}

/// Why a name gave the connector nothing to connect to.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    /// Every address it resolves to is refused (the first one named).
    #[error(transparent)]
    Refused(Refused),
    #[error("{0} resolves to no address")]
    NoAddress(String),
    #[error("looking up {host}: {source}")]
    Lookup { host: String, source: io::Error },
}

/// Counts since the resolver was made, for tests that prove no connection
/// was attempted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ResolverStats {
    /// Names looked up.
    pub lookups: u64,
    /// Addresses withheld from the connector.
    pub refused: u64,
}

#[derive(Debug, Default)]
struct Counters {
    lookups: AtomicU64,
    refused: AtomicU64,
}

/// A [`reqwest::dns::Resolve`] handing the connector only the addresses
/// its [`Policy`] allows. None left is an error naming the first refused
/// address and its range, and no connection is attempted.
#[derive(Clone)]
pub struct GuardedResolver {
    policy: Arc<Policy>,
    lookup: Arc<dyn Lookup>,
    counters: Arc<Counters>,
}

impl GuardedResolver {
    pub fn new(policy: Policy, lookup: Arc<dyn Lookup>) -> Self {
        Self {
            policy: Arc::new(policy),
            lookup,
            counters: Arc::default(),
        }
    }

    /// Names looked up by the system.
    pub fn system(policy: Policy) -> Self {
        Self::new(policy, Arc::new(SystemLookup))
    }

    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    pub fn stats(&self) -> ResolverStats {
        ResolverStats {
            lookups: self.counters.lookups.load(Ordering::Relaxed),
            refused: self.counters.refused.load(Ordering::Relaxed),
        }
    }

    /// `host`'s allowed addresses: what the connector is handed.
    pub async fn allowed(&self, host: &str) -> Result<Vec<SocketAddr>, ResolveError> {
        self.counters.lookups.fetch_add(1, Ordering::Relaxed);
        let found = self
            .lookup
            .lookup(host)
            .await
            .map_err(|source| ResolveError::Lookup {
                host: host.to_string(),
                source,
            })?;
        let mut allowed = Vec::with_capacity(found.len());
        let mut first_refused = None;
        let mut refused = 0u64;
        for addr in found {
            match self.policy.allows(host, addr.ip()) {
                Ok(()) => allowed.push(addr),
                Err(r) => {
                    refused += 1;
                    first_refused.get_or_insert(r);
                }
            }
        }
        self.counters.refused.fetch_add(refused, Ordering::Relaxed);
        if allowed.is_empty() {
            return Err(match first_refused {
                Some(r) => ResolveError::Refused(r),
                None => ResolveError::NoAddress(host.to_string()),
            });
        }
        if refused > 0 {
            tracing::warn!(
                host,
                refused,
                "the name also resolves to special-purpose addresses: not used"
            );
        }
        Ok(allowed)
    }
}

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let this = self.clone();
        Box::pin(async move {
            let addrs = this.allowed(name.as_str()).await?;
            let addrs: reqwest::dns::Addrs = Box::new(addrs.into_iter());
            Ok(addrs)
        })
    }
}

/// The refusal behind a failed request, if the resolver refused: reqwest
/// and hyper-util wrap it, and their `source` chain leads to it.
pub fn refusal_in<'a>(err: &'a (dyn std::error::Error + 'static)) -> Option<&'a Refused> {
    let mut next = Some(err);
    while let Some(e) = next {
        if let Some(ResolveError::Refused(r)) = e.downcast_ref::<ResolveError>() {
            return Some(r);
        }
        if let Some(r) = e.downcast_ref::<Refused>() {
            return Some(r);
        }
        next = e.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Exception;
    use tfreg_model::upstream::UpstreamHost;

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    /// A name re-pointed between two lookups is judged on each answer.
    #[tokio::test]
    async fn every_answer_meets_the_policy() {
        let dns = Arc::new(ScriptedLookup::new());
        dns.answer("origin.example.com", [addr("1.1.1.1:0")])
            .answer("origin.example.com", [addr("127.0.0.1:0")])
            .answer(
                "origin.example.com",
                [addr("127.0.0.1:0"), addr("8.8.8.8:0")],
            );
        let resolver = GuardedResolver::new(Policy::public(), dns.clone());
        assert_eq!(
            resolver.allowed("origin.example.com").await.unwrap(),
            [addr("1.1.1.1:0")]
        );
        match resolver.allowed("origin.example.com").await {
            Err(ResolveError::Refused(r)) => {
                assert_eq!(
                    r.to_string(),
                    "origin.example.com resolves to 127.0.0.1 (loopback): refused"
                )
            }
            other => panic!("{other:?}"),
        }
        // Mixed answers: only the public address reaches the connector.
        assert_eq!(
            resolver.allowed("origin.example.com").await.unwrap(),
            [addr("8.8.8.8:0")]
        );
        assert_eq!(dns.asked("origin.example.com"), 3);
        assert_eq!(
            resolver.stats(),
            ResolverStats {
                lookups: 3,
                refused: 2
            }
        );
        assert!(matches!(
            resolver.allowed("nowhere.example.com").await,
            Err(ResolveError::Lookup { .. })
        ));
    }

    /// Pinned addresses are no way around the policy: only the upstream's
    /// own name may use its exception.
    #[tokio::test]
    async fn pinned_names_meet_the_policy_too() {
        let host = UpstreamHost::parse("registry.example.test").unwrap();
        let policy = Policy::public()
            .with_exception(Exception::for_upstream(&host).addrs(["127.0.0.50".parse().unwrap()]));
        let pinned = Pinned::new(
            [
                (
                    "Registry.Example.Test".to_string(),
                    vec![addr("127.0.0.50:8443")],
                ),
                (
                    "files.example.test".to_string(),
                    vec![addr("127.0.0.50:8443")],
                ),
            ],
            Arc::new(ScriptedLookup::new()),
        );
        let resolver = GuardedResolver::new(policy, Arc::new(pinned));
        assert_eq!(
            resolver.allowed("registry.example.test").await.unwrap(),
            [addr("127.0.0.50:8443")]
        );
        assert!(matches!(
            resolver.allowed("files.example.test").await,
            Err(ResolveError::Refused(_))
        ));
    }

    /// Through reqwest: the refusal is found in the request's error chain,
    /// and nothing reached the listener.
    #[tokio::test]
    async fn reqwest_reports_the_refusal() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let dns = Arc::new(ScriptedLookup::new());
        dns.answer("evil.example.com", [addr("127.0.0.1:0")]);
        let tls = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_no_client_auth();
        let client = reqwest::Client::builder()
            .use_preconfigured_tls(tls)
            .no_proxy()
            .dns_resolver(Arc::new(GuardedResolver::new(Policy::public(), dns)))
            .build()
            .unwrap();
        let err = client
            .get(format!("http://evil.example.com:{port}/"))
            .send()
            .await
            .unwrap_err();
        let refused = refusal_in(&err).expect("the refusal in the chain");
        assert_eq!(refused.range, "loopback");
        let accepted =
            tokio::time::timeout(std::time::Duration::from_millis(200), listener.accept()).await;
        assert!(accepted.is_err(), "a connection reached loopback");
    }
}
