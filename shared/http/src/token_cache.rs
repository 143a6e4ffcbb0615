//! Tokens this process verified lately, so a burst of requests (one
//! `terraform init`) looks its token up once: the bound on how long a token
//! revoked by another process keeps working here.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tfreg_model::token::TokenRecord;

/// How long a process trusts a token it verified, by default.
pub const DEFAULT_TOKEN_CACHE_SECS: u64 = 10;
/// Longest token cache an operator may configure.
pub const MAX_TOKEN_CACHE_SECS: u64 = 300;

/// A verified token and when it was last used, as the cache holds it.
#[derive(Debug, Clone)]
pub(crate) struct Verified {
    pub(crate) hash: String,
    pub(crate) record: Arc<TokenRecord>,
    pub(crate) touched_at: Option<u64>,
}

/// Tokens this process verified lately, so a burst of requests (one
/// `terraform init`) looks its token up once.
#[derive(Debug)]
pub struct TokenCache {
    ttl: Duration,
    entries: Mutex<HashMap<String, (Instant, Verified)>>,
}

/// Most tokens cached at once (the cache is emptied when it is full).
const CACHE_CAPACITY: usize = 1024;

impl TokenCache {
    pub fn new(ttl: Duration) -> Self {
        Self {
            ttl,
            entries: Mutex::default(),
        }
    }

    /// How long a verified token is trusted without looking again: the bound
    /// on how long a token revoked elsewhere keeps working here.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    pub(crate) fn get(&self, hash: &str) -> Option<Verified> {
        let entries = self.entries.lock().ok()?;
        let (at, verified) = entries.get(hash)?;
        (at.elapsed() < self.ttl).then(|| verified.clone())
    }

    pub(crate) fn put(&self, verified: Verified) {
        if self.ttl.is_zero() {
            return;
        }
        if let Ok(mut entries) = self.entries.lock() {
            if entries.len() >= CACHE_CAPACITY {
                entries.clear();
            }
            entries.insert(verified.hash.clone(), (Instant::now(), verified));
        }
    }

    /// Forget a token (by hash): revoked here.
    pub fn forget(&self, hash: &str) {
        if let Ok(mut entries) = self.entries.lock() {
            entries.remove(hash);
        }
    }
}

impl Default for TokenCache {
    fn default() -> Self {
        Self::new(Duration::from_secs(DEFAULT_TOKEN_CACHE_SECS))
    }
}

#[cfg(test)]
mod tests {
    use tfreg_model::token::{Scope, TOKEN_ID_LEN};

    use super::*;

    #[test]
    fn the_cache_forgets_after_its_ttl_and_on_demand() {
        let verified = Verified {
            hash: "h".into(),
            record: Arc::new(TokenRecord {
                id: "0".repeat(TOKEN_ID_LEN),
                name: "t".into(),
                grants: vec![tfreg_model::grants::TokenGrant::new(
                    Scope::Read,
                    tfreg_model::sso::Namespaces::All,
                )],
                created_at: 0,
                expires_at: None,
                created_by: "operator".into(),
                issued_to: None,
                fill: false,
            }),
            touched_at: None,
        };
        let cache = TokenCache::new(Duration::from_millis(50));
        cache.put(verified.clone());
        assert!(cache.get("h").is_some());
        std::thread::sleep(Duration::from_millis(60));
        assert!(cache.get("h").is_none());
        cache.put(verified.clone());
        cache.forget("h");
        assert!(cache.get("h").is_none());
        let off = TokenCache::new(Duration::ZERO);
        off.put(verified);
        assert!(off.get("h").is_none());
    }
}
