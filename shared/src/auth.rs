//! Who may do what: API tokens (created once, shown once, stored only as a
//! sha256 hash) and the one authorisation step every request goes through
//! ([`authorize`], called by [`crate::app`] for HTTP requests, local CLI
//! commands included).
//!
//! A token has a name, scopes (`read` ⊂ `publish` ⊂ `admin`: each includes the
//! ones before it), the namespaces it covers (none listed: all), a creation
//! time, an optional expiry and a last-used time. Every token is one item of
//! the partition [`TOKENS_PK`], its sort key the token's sha256: a request's
//! token is one `GetItem`, the list one `Query`, and the public id (the hash's
//! first [`TOKEN_ID_LEN`] hex digits) finds the item by prefix.
//!
//! Costs and bounds:
//! - A verified token is cached in the process for [`TokenCache::ttl`]
//!   (default [`DEFAULT_TOKEN_CACHE_SECS`]): a revoked token keeps working at
//!   most that long in another process (a Lambda function, a second `tfreg
//!   serve`), not at all in the process that revoked it. Expiry is checked on
//!   every request, cached or not.
//! - The last-used time is written at most once per [`TOUCH_INTERVAL_SECS`]
//!   per token (a conditional `UpdateItem` of that one attribute): a read stays
//!   one token `GetItem` (none while cached) plus its own catalog read.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::hashing::sha256_hex;
use crate::registry::Registry;
use crate::storage::{Condition, Item, ItemStore, query_all};

/// Prefix of every token, so a leaked one is easy to recognise and scan for.
pub const TOKEN_PREFIX: &str = "tfreg_";
/// The partition holding every token.
pub const TOKENS_PK: &str = "TOKENS";
/// Hex digits of a token's hash that make its public id.
pub const TOKEN_ID_LEN: usize = 12;
/// A token's last use is recorded at most this often.
pub const TOUCH_INTERVAL_SECS: u64 = 3600;
/// How long a process trusts a token it verified, by default.
pub const DEFAULT_TOKEN_CACHE_SECS: u64 = 10;
/// Longest token cache an operator may configure.
pub const MAX_TOKEN_CACHE_SECS: u64 = 300;
/// Longest token name.
pub const MAX_NAME_LEN: usize = 64;

/// What a token may do. Each scope includes the ones before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// Read providers, modules and the mirror.
    Read,
    /// Read, and publish.
    Publish,
    /// Read, publish, and manage: tokens, signing keys, deprecate, yank,
    /// delete, the audit trail.
    Admin,
}

impl Scope {
    /// Parse `read` / `publish` / `admin`.
    pub fn parse(s: &str) -> Result<Self, Error> {
        match s {
            "read" => Ok(Scope::Read),
            "publish" => Ok(Scope::Publish),
            "admin" => Ok(Scope::Admin),
            _ => Err(Error::bad(format!(
                "unknown scope {s:?}: use read, publish or admin"
            ))),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Read => "read",
            Scope::Publish => "publish",
            Scope::Admin => "admin",
        }
    }
}

impl std::fmt::Display for Scope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where an action applies: in one namespace, or across the registry
/// (mirrored providers of other registries, token management, the audit
/// trail), which only a token without a namespace limit covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Realm<'a> {
    Namespace(&'a str),
    Registry,
    /// Whatever namespaces the token covers: a list (the web UI's home and
    /// search) that then shows only what [`TokenRecord::covers`] lets it.
    AnyNamespace,
}

impl std::fmt::Display for Realm<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Realm::Namespace(ns) => write!(f, "namespace {ns}"),
            Realm::Registry => f.write_str("the whole registry"),
            Realm::AnyNamespace => f.write_str("any namespace"),
        }
    }
}

/// What a route needs ([`crate::router::Route::access`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access<'a> {
    /// Anyone: discovery, and archives behind the registry's signed URLs.
    Public,
    /// A token with `scope` covering `realm` (reads: none while anonymous
    /// reads are on).
    Token { scope: Scope, realm: Realm<'a> },
}

/// What the store keeps about a token (never the token itself).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenRecord {
    /// Public id: the first hex digits of the token's sha256.
    pub id: String,
    pub name: String,
    pub scopes: Vec<Scope>,
    /// Namespaces the token covers; empty: every namespace.
    #[serde(default)]
    pub namespaces: Vec<String>,
    pub created_at: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<u64>,
    /// Who made it ([`Actor::describe`]).
    pub created_by: String,
}

impl TokenRecord {
    /// Does any of its scopes include `scope`?
    pub fn has(&self, scope: Scope) -> bool {
        self.scopes.iter().any(|s| *s >= scope)
    }

    /// Does it cover `realm`?
    pub fn covers(&self, realm: Realm<'_>) -> bool {
        match realm {
            Realm::Namespace(ns) => {
                self.namespaces.is_empty() || self.namespaces.iter().any(|n| n == ns)
            }
            Realm::Registry => self.namespaces.is_empty(),
            Realm::AnyNamespace => true,
        }
    }

    /// Expired at `now`?
    pub fn expired(&self, now: u64) -> bool {
        self.expires_at.is_some_and(|at| at <= now)
    }
}

/// A token as listed: its record and when it was last used.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenInfo {
    #[serde(flatten)]
    pub record: TokenRecord,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_used_at: Option<u64>,
}

/// What a new token should be (validated by [`NewToken::check`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewToken {
    pub name: String,
    pub scopes: Vec<Scope>,
    #[serde(default)]
    pub namespaces: Vec<String>,
    /// Unix seconds; none: never expires.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<u64>,
}

impl NewToken {
    /// Normalise and validate: a name of 1..=64 printable characters, at least
    /// one scope, valid namespaces (lowercased, deduplicated), an expiry in
    /// the future.
    pub fn check(mut self, now: u64) -> Result<Self, Error> {
        self.name = self.name.trim().to_string();
        if self.name.is_empty()
            || self.name.chars().count() > MAX_NAME_LEN
            || self.name.chars().any(char::is_control)
        {
            return Err(Error::bad(format!(
                "a token needs a name of 1 to {MAX_NAME_LEN} printable characters"
            )));
        }
        self.scopes.sort();
        self.scopes.dedup();
        if self.scopes.is_empty() {
            return Err(Error::bad("a token needs a scope: read, publish or admin"));
        }
        self.namespaces = self
            .namespaces
            .iter()
            .map(|ns| crate::address::module_namespace(ns))
            .collect::<Result<_, _>>()?;
        self.namespaces.sort();
        self.namespaces.dedup();
        if let Some(at) = self.expires_at
            && at <= now
        {
            return Err(Error::bad("the token's expiry is in the past"));
        }
        Ok(self)
    }
}

/// Who made a request.
#[derive(Debug, Clone)]
pub enum Principal {
    /// Nobody identified (discovery, archives, anonymous reads).
    Anonymous,
    /// A holder of this token.
    Token(Arc<TokenRecord>),
    /// Someone with the data directory or the AWS account: the `tfreg` CLI
    /// working on the stores directly (`--data-dir`, `--table`). May do anything.
    Operator,
}

/// Who, as the audit trail names them: never a secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Actor {
    /// `token`, `operator` or `anonymous`.
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_name: Option<String>,
}

impl Actor {
    /// `token ci (3f2a…)`, `operator`, `anonymous`.
    pub fn describe(&self) -> String {
        match (&self.token_name, &self.token_id) {
            (Some(name), Some(id)) => format!("token {name} ({id})"),
            _ => self.kind.clone(),
        }
    }
}

impl Principal {
    pub fn actor(&self) -> Actor {
        match self {
            Principal::Anonymous => Actor {
                kind: "anonymous".into(),
                token_id: None,
                token_name: None,
            },
            Principal::Operator => Actor {
                kind: "operator".into(),
                token_id: None,
                token_name: None,
            },
            Principal::Token(t) => Actor {
                kind: "token".into(),
                token_id: Some(t.id.clone()),
                token_name: Some(t.name.clone()),
            },
        }
    }

    /// Is this someone the registry knows (worth an audit record in the store)?
    pub fn identified(&self) -> bool {
        !matches!(self, Principal::Anonymous)
    }
}

fn token_hash(token: &str) -> String {
    sha256_hex(token.as_bytes())
}

fn id_of(hash: &str) -> String {
    hash[..TOKEN_ID_LEN].to_string()
}

/// Create a token, store its hash and return the token (the only time it is
/// seen) with its record.
pub async fn create_token(
    store: &dyn ItemStore,
    new: NewToken,
    now: u64,
    created_by: &Actor,
) -> Result<(String, TokenRecord), Error> {
    let new = new.check(now)?;
    let bytes: [u8; 32] = rand::random();
    let token = format!(
        "{TOKEN_PREFIX}{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    );
    let hash = token_hash(&token);
    let record = TokenRecord {
        id: id_of(&hash),
        name: new.name,
        scopes: new.scopes,
        namespaces: new.namespaces,
        created_at: now,
        expires_at: new.expires_at,
        created_by: created_by.describe(),
    };
    let data = serde_json::to_vec(&record).map_err(Error::internal)?;
    store
        .put(Item::new(TOKENS_PK, hash, data), Condition::IfAbsent)
        .await?;
    Ok((token, record))
}

/// Every token, oldest first.
pub async fn list_tokens(store: &dyn ItemStore) -> Result<Vec<TokenInfo>, Error> {
    let mut tokens = query_all(store, TOKENS_PK, "")
        .await?
        .iter()
        .map(|item| {
            Ok(TokenInfo {
                record: crate::catalog::decode(item)?,
                last_used_at: item.touched_at,
            })
        })
        .collect::<Result<Vec<_>, Error>>()?;
    tokens.sort_by(|a, b| {
        (a.record.created_at, &a.record.id).cmp(&(b.record.created_at, &b.record.id))
    });
    Ok(tokens)
}

/// Revoke (delete) the token with public id `id`; its record, or none if no
/// token has that id. `cache` forgets it at once (this process).
pub async fn revoke_token(
    store: &dyn ItemStore,
    cache: &TokenCache,
    id: &str,
) -> Result<Option<TokenRecord>, Error> {
    if id.len() != TOKEN_ID_LEN || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(Error::bad(format!(
            "invalid token id {id:?}: {TOKEN_ID_LEN} hex digits, as `tfreg token list` shows"
        )));
    }
    let id = id.to_ascii_lowercase();
    let page = store.query_page(TOKENS_PK, &id, None).await?;
    let mut revoked = None;
    for item in page.items {
        if let Some(taken) = store.take(&item.pk, &item.sk).await? {
            cache.forget(&taken.sk);
            revoked = Some(crate::catalog::decode(&taken)?);
        }
    }
    Ok(revoked)
}

/// What a request presents to be authorised.
#[derive(Debug, Clone, Copy)]
pub enum Credential<'a> {
    /// Its `Authorization` header, if any: the API's way.
    Authorization(Option<&'a str>),
    /// The hash of the token a web UI session was opened with (its cookie
    /// checked already), if any: the token is verified again on every request,
    /// so a revoked or expired token ends its sessions.
    Session(Option<&'a str>),
}

/// The bearer token of an `Authorization` header value: `None` without a
/// header, `Err` for a header that is not `Bearer <token>`.
pub fn bearer(header: Option<&str>) -> Result<Option<&str>, Error> {
    let Some(value) = header else {
        return Ok(None);
    };
    let malformed = || {
        Error::Unauthorized(
            "malformed Authorization header: send `Authorization: Bearer <token>`".into(),
        )
    };
    let (scheme, token) = value.trim().split_once(' ').ok_or_else(malformed)?;
    let token = token.trim();
    if !scheme.eq_ignore_ascii_case("bearer") || token.is_empty() {
        return Err(malformed());
    }
    Ok(Some(token))
}

/// A verified token and when it was last used, as the cache holds it.
#[derive(Debug, Clone)]
struct Verified {
    hash: String,
    record: Arc<TokenRecord>,
    touched_at: Option<u64>,
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

    fn get(&self, hash: &str) -> Option<Verified> {
        let entries = self.entries.lock().ok()?;
        let (at, verified) = entries.get(hash)?;
        (at.elapsed() < self.ttl).then(|| verified.clone())
    }

    fn put(&self, verified: Verified) {
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

fn unknown_token() -> Error {
    Error::Unauthorized("the token is not valid for this registry (unknown or revoked)".into())
}

/// The sha256 (hex) a token is stored under, if it looks like one of ours.
pub fn presented_hash(token: &str) -> Option<String> {
    (token.starts_with(TOKEN_PREFIX) && token.len() <= 200).then(|| token_hash(token))
}

/// Look up a token by its hash: the cache, else one `GetItem`; then record
/// its use if the last record is older than [`TOUCH_INTERVAL_SECS`].
async fn verify(registry: &Registry, hash: String) -> Result<Arc<TokenRecord>, Error> {
    let now = registry.now();
    let verified = match registry.tokens.get(&hash) {
        Some(v) => v,
        None => {
            let item = registry
                .items
                .get(TOKENS_PK, &hash)
                .await?
                .ok_or_else(unknown_token)?;
            let v = Verified {
                record: Arc::new(crate::catalog::decode(&item)?),
                touched_at: item.touched_at,
                hash,
            };
            registry.tokens.put(v.clone());
            v
        }
    };
    if let Some(at) = verified.record.expires_at
        && at <= now
    {
        return Err(Error::Unauthorized(format!(
            "the token {} expired at {} (unix time); ask an admin for a new one",
            verified.record.name, at
        )));
    }
    let due = now.saturating_sub(TOUCH_INTERVAL_SECS);
    if verified.touched_at.is_none_or(|t| t < due) {
        // Best effort: a missed stamp must not refuse a valid request.
        match registry
            .items
            .touch(TOKENS_PK, &verified.hash, now, due)
            .await
        {
            Ok(_) => registry.tokens.put(Verified {
                touched_at: Some(now),
                ..verified.clone()
            }),
            Err(e) => {
                tracing::warn!(token_id = %verified.record.id, error = %e, "cannot record the token's last use")
            }
        }
    }
    Ok(verified.record)
}

/// The one authorisation step: who is asking, and may they do what the route
/// needs? 401 (with `WWW-Authenticate`) for a missing, malformed, unknown,
/// revoked or expired token; 403 for a valid token without the right.
///
/// The caller is named even when refused: a valid token without the right
/// (403) is still who asked, for the audit trail (a missing, malformed or
/// unknown token names nobody: [`Principal::Anonymous`]).
///
/// A presented token is always checked, even where none is needed for
/// reading (anonymous reads): a client with a bad token hears about it.
pub async fn authorize(
    registry: &Registry,
    credential: Credential<'_>,
    access: Access<'_>,
) -> (Principal, Result<(), Error>) {
    match check(registry, credential, access).await {
        Ok(principal) => (principal, Ok(())),
        Err((Some(record), e)) => (Principal::Token(record), Err(e)),
        Err((None, e)) => (Principal::Anonymous, Err(e)),
    }
}

async fn check(
    registry: &Registry,
    credential: Credential<'_>,
    access: Access<'_>,
) -> Result<Principal, (Option<Arc<TokenRecord>>, Error)> {
    let nobody = |e| (None, e);
    let Access::Token { scope, realm } = access else {
        return Ok(Principal::Anonymous);
    };
    let anonymous_read = scope == Scope::Read && registry.config.anonymous_reads;
    let hash = match credential {
        Credential::Authorization(header) => bearer(header)
            .map_err(nobody)?
            .map(|token| presented_hash(token).ok_or_else(unknown_token))
            .transpose()
            .map_err(nobody)?,
        Credential::Session(hash) => hash.map(str::to_string),
    };
    let Some(hash) = hash else {
        if anonymous_read {
            return Ok(Principal::Anonymous);
        }
        return Err(nobody(Error::Unauthorized(match scope {
            Scope::Read => "this registry requires a token to read: set TF_TOKEN_<host> or a credentials \"<host>\" block (see `tfreg token create`)".into(),
            Scope::Publish => "publishing needs a token: pass --token or set TFREG_TOKEN".into(),
            Scope::Admin => "this needs an admin token: pass --token or set TFREG_TOKEN".into(),
        })));
    };
    let record = verify(registry, hash).await.map_err(nobody)?;
    if anonymous_read {
        return Ok(Principal::Token(record));
    }
    if !record.has(scope) {
        let e = Error::Forbidden(format!(
            "the token {} may not {}",
            record.name,
            match scope {
                Scope::Read => "read",
                Scope::Publish => "publish (it needs the publish scope)",
                Scope::Admin => "do this (it needs the admin scope)",
            }
        ));
        return Err((Some(record), e));
    }
    if !record.covers(realm) {
        let e = Error::Forbidden(format!(
            "the token {} does not cover {realm} (it covers namespace{} {})",
            record.name,
            if record.namespaces.len() == 1 {
                ""
            } else {
                "s"
            },
            record.namespaces.join(", ")
        ));
        return Err((Some(record), e));
    }
    Ok(Principal::Token(record))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::sqlite::SqliteStore;

    fn new(scopes: &[Scope], namespaces: &[&str]) -> NewToken {
        NewToken {
            name: "ci".into(),
            scopes: scopes.to_vec(),
            namespaces: namespaces.iter().map(|s| s.to_string()).collect(),
            expires_at: None,
        }
    }

    #[tokio::test]
    async fn tokens_are_stored_hashed_listed_and_revoked_by_id() {
        let store = SqliteStore::in_memory().unwrap();
        let operator = Principal::Operator.actor();
        let (token, record) =
            create_token(&store, new(&[Scope::Publish], &["Team"]), 10, &operator)
                .await
                .unwrap();
        assert!(token.starts_with(TOKEN_PREFIX));
        assert_eq!(record.namespaces, ["team"]);
        assert_eq!(record.created_by, "operator");
        let items = query_all(&store, TOKENS_PK, "").await.unwrap();
        assert_eq!(items.len(), 1);
        assert_eq!(items[0].sk, token_hash(&token));
        assert!(!String::from_utf8_lossy(&items[0].data).contains(&token));
        let listed = list_tokens(&store).await.unwrap();
        assert_eq!(listed[0].record, record);
        let cache = TokenCache::default();
        assert!(matches!(
            revoke_token(&store, &cache, "xyz").await,
            Err(Error::BadRequest(_))
        ));
        assert_eq!(
            revoke_token(&store, &cache, &record.id).await.unwrap(),
            Some(record.clone())
        );
        assert_eq!(
            revoke_token(&store, &cache, &record.id).await.unwrap(),
            None
        );
        assert!(list_tokens(&store).await.unwrap().is_empty());
    }

    #[test]
    fn scopes_include_the_lesser_ones_and_namespaces_limit_them() {
        let record = |scopes: &[Scope], namespaces: &[&str]| TokenRecord {
            id: "0".repeat(TOKEN_ID_LEN),
            name: "t".into(),
            scopes: scopes.to_vec(),
            namespaces: namespaces.iter().map(|s| s.to_string()).collect(),
            created_at: 0,
            expires_at: Some(100),
            created_by: "operator".into(),
        };
        let admin = record(&[Scope::Admin], &[]);
        assert!(admin.has(Scope::Read) && admin.has(Scope::Publish) && admin.has(Scope::Admin));
        let reader = record(&[Scope::Read], &["a"]);
        assert!(reader.has(Scope::Read) && !reader.has(Scope::Publish));
        assert!(reader.covers(Realm::Namespace("a")));
        assert!(!reader.covers(Realm::Namespace("b")));
        assert!(!reader.covers(Realm::Registry));
        assert!(admin.covers(Realm::Registry));
        assert!(reader.covers(Realm::AnyNamespace) && admin.covers(Realm::AnyNamespace));
        assert!(!admin.expired(99) && admin.expired(100));
    }

    #[test]
    fn new_tokens_are_checked() {
        let ok = new(&[Scope::Read, Scope::Read], &["b", "A", "a"])
            .check(5)
            .unwrap();
        assert_eq!(ok.scopes, [Scope::Read]);
        assert_eq!(ok.namespaces, ["a", "b"]);
        for bad in [
            NewToken {
                name: " ".into(),
                ..new(&[Scope::Read], &[])
            },
            new(&[], &[]),
            new(&[Scope::Read], &["bad/ns"]),
            NewToken {
                expires_at: Some(5),
                ..new(&[Scope::Read], &[])
            },
        ] {
            assert!(matches!(bad.check(5), Err(Error::BadRequest(_))));
        }
    }

    #[test]
    fn bearer_header_parsing() {
        assert_eq!(bearer(Some("Bearer abc")).unwrap(), Some("abc"));
        assert_eq!(bearer(Some("bearer  abc ")).unwrap(), Some("abc"));
        assert_eq!(bearer(None).unwrap(), None);
        for bad in ["Basic abc", "Bearer", "Bearer  ", "abc"] {
            assert!(
                matches!(bearer(Some(bad)), Err(Error::Unauthorized(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn the_cache_forgets_after_its_ttl_and_on_demand() {
        let verified = Verified {
            hash: "h".into(),
            record: Arc::new(TokenRecord {
                id: "0".repeat(TOKEN_ID_LEN),
                name: "t".into(),
                scopes: vec![Scope::Read],
                namespaces: vec![],
                created_at: 0,
                expires_at: None,
                created_by: "operator".into(),
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
