//! `tfreg token|key|deprecate|yank|delete|audit|sso|trust|upstream` (and
//! `tfreg usage`, [`crate::usage`]): the admin API, spoken two
//! ways with the same requests and answers:
//! - to a registry's URL with an admin token (`--registry`, `--token`), as
//!   any client would;
//! - in-process on the stores themselves, as the operator: a local data
//!   directory (`--data-dir`, the default) or a stack's DynamoDB table and
//!   S3 bucket (`--table`, `--bucket`, with AWS credentials; how the first
//!   admin token of a new stack is made). The request goes through the
//!   registry's own router, handlers and audit trail ([`tfreg_http::App::handle_as`]).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

mod releases;
mod sso;
pub(crate) mod upstream;
mod warm;

use clap::{Args, Subcommand, ValueEnum};
use http::{Method, StatusCode};
use serde::de::DeserializeOwned;
use tfreg_http::{Config, Registry};
use tfreg_model::address::Hostname;
use tfreg_model::grants::TokenGrant;
use tfreg_model::protocol::{
    AddKeys, AuditList, CreatedToken, ErrorBody, KeyList, RemovedKey, RevokedToken, TokenList,
};
use tfreg_model::router::{AdminRoute, Route};
use tfreg_model::text::escaped;
use tfreg_model::token::{NewToken, Scope, TokenInfo, TokenRecord};

use crate::cli_error::Result;
use crate::client::PublishClient;
use crate::data_dir::{self, DataDir};

pub use releases::{DeleteArgs, DeprecateArgs, YankArgs, delete, deprecate, yank};
pub use sso::{SsoCommand, TrustCommand, sso, trust};
pub use upstream::{CacheCommand, UpstreamCommand, cache, upstream};

/// Which registry an admin command works on.
#[derive(Args, Clone)]
pub(crate) struct Where {
    /// A registry's base URL (e.g. https://registry.example.com); needs an
    /// admin token (--token or TFREG_TOKEN).
    #[arg(long, conflicts_with_all = ["data_dir", "table"])]
    registry: Option<String>,
    /// An admin token for --registry.
    #[arg(long, env = "TFREG_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// A PEM certificate to trust for --registry besides the system's.
    #[arg(long, env = "TFREG_CA_CERT")]
    ca_cert: Option<PathBuf>,
    /// A local registry's data directory (the default: ./tfreg-data).
    #[arg(long, conflicts_with = "table")]
    data_dir: Option<PathBuf>,
    /// A deployed stack's DynamoDB table (its TableName output), worked on
    /// directly with this machine's AWS credentials (AWS_REGION, profile...).
    #[arg(long, requires = "bucket")]
    table: Option<String>,
    /// The stack's S3 bucket (its BucketName output), with --table.
    #[arg(long, requires = "table")]
    bucket: Option<String>,
    /// Path-style S3 URLs (S3 emulators), with --table.
    #[arg(long, env = "TFREG_S3_FORCE_PATH_STYLE")]
    s3_force_path_style: bool,
    /// The registry's hostname as its addresses spell it (`tfreg serve
    /// --hostname`, a stack's TFREG_HOSTNAME), for the commands on the
    /// stores that find its packages' downloads by it: `tfreg usage`, the
    /// delete guard, export and import (its download counts). Not needed with --registry, nor on a data directory
    /// `tfreg serve` has run on (it records its hostname there).
    #[arg(long, env = "TFREG_HOSTNAME")]
    hostname: Option<String>,
    /// Print the answer as JSON.
    #[arg(long)]
    json: bool,
}

pub(crate) enum Transport {
    Remote(PublishClient),
    Local(Arc<Registry>),
}

impl Where {
    /// On the stores directly (not a registry's URL) without --hostname:
    /// the registry's own packages' downloads cannot be found.
    pub(crate) fn hostname_unknown(&self) -> bool {
        self.registry.is_none() && self.hostname().is_none()
    }

    /// The registry's hostname: --hostname, else on a local data directory
    /// the one its `tfreg serve` last answered as.
    pub(crate) fn hostname(&self) -> Option<String> {
        self.hostname.clone().or_else(|| {
            (self.table.is_none())
                .then(|| DataDir::served_hostname(&self.local_root()))
                .flatten()
        })
    }

    fn local_root(&self) -> PathBuf {
        self.data_dir
            .clone()
            .unwrap_or_else(|| PathBuf::from(data_dir::DEFAULT))
    }

    /// The stores themselves (`tfreg gc`, `tfreg verify`): never a
    /// registry's URL, whose API has no such routes.
    pub(crate) async fn stores(&self, verb: &str) -> Result<Arc<Registry>> {
        if self.registry.is_some() {
            return Err(format!(
                "tfreg {verb} works on the stores themselves, not through a registry's URL: pass --data-dir (a local registry) or --table and --bucket (a stack, with this machine's AWS credentials)"
            )
            .into());
        }
        match self.connect().await? {
            Transport::Local(registry) => Ok(registry),
            Transport::Remote(_) => Err("not the stores".into()),
        }
    }

    pub(crate) async fn connect(&self) -> Result<Transport> {
        if let Some(url) = &self.registry {
            let client = PublishClient::new(url, self.token.clone(), self.ca_cert.as_deref())?;
            return Ok(Transport::Remote(client));
        }
        // Admin commands never build download URLs: the hostname names the
        // registry's packages' downloads (a placeholder where not given).
        let hostname = self.hostname().unwrap_or_else(|| "localhost".to_string());
        let mut config = Config::new(Hostname::parse(&hostname).map_err(|e| e.to_string())?);
        // As the operator: the allow-list of the server's own variables
        // (`tfreg serve` reads the same, and checks again at each fill).
        config.upstream_policy = upstream::operator_policy_from_env()?;
        let registry = if let (Some(table), Some(bucket)) = (&self.table, &self.bucket) {
            let (dynamodb, s3) = tfreg_store::aws::clients(self.s3_force_path_style).await?;
            let items = Arc::new(tfreg_store::dynamodb::DynamoStore::new(dynamodb, table));
            let ttl = Duration::from_secs(tfreg_http::registry::DEFAULT_URL_TTL_SECS);
            let blobs = Arc::new(tfreg_store::s3::S3BlobStore::new(s3, bucket, ttl));
            Registry::with_stored_signer(items, blobs, config)
        } else {
            let root = self.local_root();
            if !root.join("registry.db").exists() {
                return Err(format!(
                    "{} holds no registry (no registry.db): pass --data-dir as given to `tfreg serve`, or --registry URL",
                    root.display()
                )
                .into());
            }
            let dir = DataDir::open(&root)?;
            let items = Arc::new(dir.item_store()?);
            let blobs = Arc::new(dir.blob_store()?);
            Registry::with_stored_signer(items, blobs, config)
        };
        Ok(Transport::Local(Arc::new(registry)))
    }
}

impl Transport {
    /// Send `route` with `body`; the answer decoded, or the registry's error.
    async fn send<T: DeserializeOwned>(
        &self,
        route: AdminRoute,
        body: Option<&impl serde::Serialize>,
    ) -> Result<T> {
        let route = Route::Admin(route);
        let method = route.methods()[0].clone();
        let path = route.path();
        let body = body
            .map(serde_json::to_vec)
            .transpose()
            .map_err(|e| e.to_string())?;
        self.call(method, &path, body).await
    }

    pub(crate) async fn call<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> Result<T> {
        let (status, bytes) = match self {
            Transport::Remote(client) => client.call(method, path, body).await?,
            Transport::Local(registry) => {
                let req = http::Request::builder()
                    .method(method)
                    .uri(path)
                    .header(http::header::CONTENT_TYPE, "application/json")
                    .body(tfreg_http::body::Body::from(body.unwrap_or_default()))
                    .map_err(|e| e.to_string())?;
                let resp = crate::every_group(registry.clone())
                    .handle_as(req, tfreg_http::Caller::Operator)
                    .await;
                let status = resp.status();
                let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
                    .await
                    .map_err(|e| e.to_string())?;
                (status, bytes)
            }
        };
        if !status.is_success() {
            let detail = serde_json::from_slice::<ErrorBody>(&bytes)
                .map(|b| b.errors.join("; "))
                .unwrap_or_else(|_| String::from_utf8_lossy(&bytes).into_owned());
            return Err(match status {
                StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => {
                    format!("the registry answered {status}: {detail} (admin commands need a token with the admin scope)")
                }
                _ => format!("the registry answered {status}: {detail}"),
            }
            .into());
        }
        serde_json::from_slice(&bytes)
            .map_err(|e| format!("unexpected answer from the registry: {e}").into())
    }
}

impl Where {
    /// Show an answer: as JSON with `--json`, else as `human` prints it.
    /// Was --json given?
    pub(crate) fn json_wanted(&self) -> bool {
        self.json
    }

    pub(crate) fn show<T: serde::Serialize>(
        &self,
        value: &T,
        human: impl FnOnce(&T),
    ) -> Result<()> {
        if self.json {
            let text = serde_json::to_string_pretty(value).map_err(|e| e.to_string())?;
            println!("{text}");
        } else {
            human(value);
        }
        Ok(())
    }
}

/// `2026-11-23 01:02:03Z`, or `-`.
pub(crate) fn when(at: Option<u64>) -> String {
    at.map(|t| {
        humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_secs(t))
            .to_string()
            .replace('T', " ")
    })
    .unwrap_or_else(|| "-".into())
}

/// When (unix seconds) a token made at `now` (since the epoch) to last
/// `lasting` expires: rounded up, so that it lives at least that long (the
/// registry counts whole seconds and refuses a token from its expiry on).
fn expires_at(now: Duration, lasting: Duration) -> u64 {
    let at = now.saturating_add(lasting);
    at.as_secs()
        .saturating_add(u64::from(at.subsec_nanos() > 0))
}

// ------------------------------------------------------------------ tokens

#[derive(Subcommand)]
pub enum TokenCommand {
    /// Create a token; prints only the token (shown this once), details on stderr.
    Create(TokenCreateArgs),
    /// List tokens: id, name, grants (scope:namespaces), created, expires,
    /// last used; expired ones only with --all.
    List(TokenListArgs),
    /// Revoke a token by its id (as `tfreg token list` shows it).
    Revoke(TokenRevokeArgs),
}

#[derive(Args)]
pub struct WhereArgs {
    #[command(flatten)]
    r#where: Where,
}

#[derive(Args)]
pub struct TokenListArgs {
    /// Expired tokens too (kept a day after they expire, then deleted).
    #[arg(long)]
    all: bool,
    #[command(flatten)]
    r#where: Where,
}

#[derive(Args)]
pub struct TokenCreateArgs {
    /// A name to recognise the token by (in lists and the audit trail).
    #[arg(long)]
    name: String,
    /// read (download), publish (and download) or admin (everything); repeatable.
    #[arg(
        long,
        value_enum,
        required_unless_present = "grant",
        conflicts_with = "grant"
    )]
    scope: Vec<ScopeArg>,
    /// Limit the token to this namespace (repeatable); default: every namespace.
    #[arg(long, conflicts_with = "grant")]
    namespace: Vec<String>,
    /// A scope over namespaces, instead of --scope/--namespace; repeatable:
    /// `--grant read --grant publish:acme,infra` reads every namespace and
    /// publishes to acme and infra only. `SCOPE` alone (or `SCOPE:*`): every
    /// namespace.
    #[arg(long, value_parser = parse_grant)]
    grant: Vec<TokenGrant>,
    /// Expire after this long, e.g. 90d, 12h, 1y; default: never.
    #[arg(long, value_parser = humantime::parse_duration)]
    expires_in: Option<Duration>,
    /// Its requests may make the pull-through cache fetch what it has not
    /// cached from an upstream (`tfreg upstream set`); admin tokens may anyway.
    #[arg(long)]
    fill: bool,
    #[command(flatten)]
    r#where: Where,
}

#[derive(Clone, Copy, ValueEnum)]
enum ScopeArg {
    Read,
    Publish,
    Admin,
}

impl From<ScopeArg> for Scope {
    fn from(s: ScopeArg) -> Scope {
        match s {
            ScopeArg::Read => Scope::Read,
            ScopeArg::Publish => Scope::Publish,
            ScopeArg::Admin => Scope::Admin,
        }
    }
}

#[derive(Args)]
pub struct TokenRevokeArgs {
    /// The token's id.
    id: String,
    #[command(flatten)]
    r#where: Where,
}

fn parse_grant(text: &str) -> std::result::Result<TokenGrant, String> {
    TokenGrant::parse(text).map_err(|e| e.0)
}

pub async fn token(cmd: TokenCommand) -> Result<()> {
    match cmd {
        TokenCommand::Create(args) => {
            let new = NewToken {
                name: args.name,
                scopes: args.scope.into_iter().map(Scope::from).collect(),
                namespaces: args.namespace,
                grants: args.grant,
                expires_at: args.expires_in.map(|d| {
                    expires_at(
                        SystemTime::now()
                            .duration_since(UNIX_EPOCH)
                            .unwrap_or_default(),
                        d,
                    )
                }),
                fill: args.fill,
            };
            let api = args.r#where.connect().await?;
            let created: CreatedToken = api.send(AdminRoute::CreateToken, Some(&new)).await?;
            let r = &created.record;
            eprintln!(
                "created token {} (id {}): grants {}, expires {}",
                escaped(&r.name),
                r.id,
                grants_of(r),
                when(r.expires_at)
            );
            println!("{}", created.token);
            Ok(())
        }
        TokenCommand::List(args) => {
            let api = args.r#where.connect().await?;
            let mut path = Route::Admin(AdminRoute::ListTokens).path();
            if args.all {
                path.push_str("?all=true");
            }
            let list: TokenList = api.call(Method::GET, &path, None).await?;
            args.r#where.show(&list, |l| {
                print_tokens(&l.tokens);
                if l.expired_hidden > 0 {
                    eprintln!(
                        "({} expired token{} not shown: --all lists them)",
                        l.expired_hidden,
                        if l.expired_hidden == 1 { "" } else { "s" }
                    );
                }
            })
        }
        TokenCommand::Revoke(args) => {
            let api = args.r#where.connect().await?;
            let revoked: RevokedToken = api
                .send(AdminRoute::RevokeToken { id: args.id }, None::<&()>)
                .await?;
            eprintln!(
                "revoked token {} (id {})",
                escaped(&revoked.revoked.name),
                revoked.revoked.id
            );
            Ok(())
        }
    }
}

/// A token's grants, and `+fill` when it may make the cache fetch.
fn grants_of(r: &TokenRecord) -> String {
    let fill = if r.fill { " +fill" } else { "" };
    format!("{}{fill}", r.describe_grants())
}

fn print_tokens(tokens: &[TokenInfo]) {
    println!(
        "{:<12}  {:<20}  {:<30}  {:<20}  {:<20}  LAST USED",
        "ID", "NAME", "GRANTS", "CREATED", "EXPIRES"
    );
    for t in tokens {
        let r = &t.record;
        println!(
            "{:<12}  {:<20}  {:<30}  {:<20}  {:<20}  {}",
            r.id,
            escaped(&r.name),
            grants_of(r),
            when(Some(r.created_at)),
            when(r.expires_at),
            when(t.last_used_at)
        );
    }
}

// ------------------------------------------------------------------ keys

#[derive(Subcommand)]
pub enum KeyCommand {
    /// Register ASCII-armored OpenPGP public keys for a namespace (several at
    /// once for rotation); from then on its provider releases must be signed
    /// by one of its keys.
    Add(KeyAddArgs),
    /// List a namespace's registered keys.
    List(KeyListArgs),
    /// Remove a key (releases it verified stay installable).
    Remove(KeyRemoveArgs),
}

#[derive(Args)]
pub struct KeyAddArgs {
    namespace: String,
    /// Files holding one ASCII-armored public key each.
    #[arg(required = true)]
    key_files: Vec<PathBuf>,
    #[command(flatten)]
    r#where: Where,
}

#[derive(Args)]
pub struct KeyListArgs {
    namespace: String,
    #[command(flatten)]
    r#where: Where,
}

#[derive(Args)]
pub struct KeyRemoveArgs {
    namespace: String,
    /// The key's id (16 hex digits, as `tfreg key list` shows it).
    key_id: String,
    #[command(flatten)]
    r#where: Where,
}

fn namespace(ns: &str) -> Result<String> {
    Ok(tfreg_model::address::namespace(ns)?)
}

fn print_keys(list: &KeyList) {
    if list.keys.is_empty() {
        eprintln!("namespace {} has no registered keys", list.namespace);
        return;
    }
    println!(
        "{:<16}  {:<30}  {:<20}  ADDED BY",
        "KEY ID", "ALGORITHMS", "ADDED"
    );
    for k in &list.keys {
        println!(
            "{:<16}  {:<30}  {:<20}  {}",
            k.key_id,
            k.algorithms.join(", "),
            when(Some(k.added_at)),
            escaped(&k.added_by)
        );
    }
}

pub async fn key(cmd: KeyCommand) -> Result<()> {
    match cmd {
        KeyCommand::Add(args) => {
            let keys = args
                .key_files
                .iter()
                .map(|p| {
                    std::fs::read_to_string(p).map_err(|e| format!("reading {}: {e}", p.display()))
                })
                .collect::<std::result::Result<Vec<_>, _>>()?;
            let api = args.r#where.connect().await?;
            let namespace = namespace(&args.namespace)?;
            let list: KeyList = api
                .send(AdminRoute::AddKeys { namespace }, Some(&AddKeys { keys }))
                .await?;
            args.r#where.show(&list, |list| {
                print_keys(list);
                for warning in &list.warnings {
                    eprintln!("warning: {}", escaped(warning));
                }
            })
        }
        KeyCommand::List(args) => {
            let api = args.r#where.connect().await?;
            let namespace = namespace(&args.namespace)?;
            let list: KeyList = api
                .send(AdminRoute::ListKeys { namespace }, None::<&()>)
                .await?;
            args.r#where.show(&list, print_keys)
        }
        KeyCommand::Remove(args) => {
            let api = args.r#where.connect().await?;
            let namespace = namespace(&args.namespace)?;
            let removed: RemovedKey = api
                .send(
                    AdminRoute::RemoveKey {
                        namespace,
                        key_id: args.key_id.to_ascii_uppercase(),
                    },
                    None::<&()>,
                )
                .await?;
            eprintln!(
                "removed key {} from namespace {}",
                removed.removed.key_id, removed.namespace
            );
            Ok(())
        }
    }
}

// ------------------------------------------------------------------ audit

#[derive(Args)]
pub struct AuditArgs {
    /// How many of the newest events to show.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..=tfreg_store::catalog::audit::MAX_LIST as u64))]
    limit: u64,
    #[command(flatten)]
    r#where: Where,
}

pub async fn audit(args: AuditArgs) -> Result<()> {
    let api = args.r#where.connect().await?;
    let path = format!(
        "{}?limit={}",
        Route::Admin(AdminRoute::Audit).path(),
        args.limit
    );
    let list: AuditList = api.call(Method::GET, &path, None).await?;
    args.r#where.show(&list, print_audit)
}

fn print_audit(list: &AuditList) {
    println!(
        "{:<20}  {:<30}  {:<19}  {:<40}  {:<8}  DETAIL",
        "WHEN", "WHO", "ACTION", "TARGET", "OUTCOME"
    );
    for e in &list.events {
        println!(
            "{:<20}  {:<30}  {:<19}  {:<40}  {:<8}  {}",
            when(Some(e.at)),
            escaped(&e.actor.describe()),
            e.action,
            escaped(&e.target),
            format!("{:?}", e.outcome).to_lowercase(),
            escaped(e.detail.as_deref().unwrap_or(""))
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_lives_at_least_as_long_as_asked() {
        let secs = Duration::from_secs;
        let at = |s: f64| Duration::from_secs_f64(s);
        // 100.9 s + 2 s: 102 would leave it 1.1 s.
        assert_eq!(expires_at(at(100.9), secs(2)), 103);
        assert_eq!(expires_at(at(100.0), secs(2)), 102);
        assert_eq!(expires_at(at(100.2), Duration::from_millis(1500)), 102);
        assert_eq!(expires_at(at(100.0), Duration::MAX), u64::MAX);
        for now in [100.0, 100.001, 100.5, 100.999] {
            let at_secs = expires_at(at(now), secs(2)) as f64;
            assert!(at_secs >= now + 2.0 && at_secs < now + 3.0, "{now}");
        }
    }
}
