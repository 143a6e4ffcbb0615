//! `tfreg serve`: every endpoint in one HTTPS server on the embedded store.
//!
//! Start-up either serves or fails with one line and a non-zero exit; SIGTERM
//! or Ctrl-C stops it at any moment, start-up included. One `tfreg serve` per
//! data directory (a lock file says which process has it).

mod first_byte;
mod housekeeping;
mod idle;
mod linger;
pub mod listener;
pub mod metrics;
mod per_address;
mod signals;
mod signin;
mod upstream;
mod welcome;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;
use tfreg_http::registry::{DEFAULT_URL_TTL_SECS, MAX_URL_TTL_SECS};
use tfreg_http::{Config, Registry};
use tfreg_model::address::Hostname;

use crate::cli_error::Result;
use crate::data_dir::{self, DataDir, ServeLock};
use crate::tls;

#[derive(Args)]
pub struct ServeArgs {
    /// Where the database, archives, URL-signing secret and dev certificate live.
    #[arg(long, default_value = data_dir::DEFAULT)]
    data_dir: PathBuf,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8443")]
    listen: SocketAddr,
    /// The hostname users write in addresses (HOST[:PORT]); default 127.0.0.1:<listen port> (module addresses need a hostname with a dot).
    #[arg(long)]
    hostname: Option<String>,
    /// PEM certificate chain (with --tls-key); default: a development certificate in the data dir.
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// PEM private key for --tls-cert.
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Lifetime of archive download and upload URLs, in seconds.
    #[arg(long, default_value_t = DEFAULT_URL_TTL_SECS, value_parser = clap::value_parser!(u64).range(1..=MAX_URL_TTL_SECS))]
    url_ttl: u64,
    /// Require a token for every read (versions, downloads, mirror). Without
    /// it, anyone who reaches the port may read (a laptop default; a deployed
    /// stack is private unless its AnonymousReads parameter says otherwise).
    #[arg(long)]
    private: bool,
    /// Publish provider releases only when a key registered for their
    /// namespace (`tfreg key add`) verifies them, in every namespace.
    #[arg(long)]
    require_namespace_keys: bool,
    /// Count no downloads (who installs what: `tfreg usage`, the version
    /// pages, the delete guard); by default each is counted, in memory,
    /// and written every few seconds.
    #[arg(long)]
    no_download_counts: bool,
    /// Seconds a verified token is trusted without looking it up again: how
    /// long a token revoked by another process (`tfreg token revoke
    /// --data-dir`) may keep working here. Revoking through this server's
    /// admin API takes effect at once.
    #[arg(long, default_value_t = tfreg_http::auth::DEFAULT_TOKEN_CACHE_SECS, value_parser = clap::value_parser!(u64).range(0..=tfreg_http::auth::MAX_TOKEN_CACHE_SECS))]
    token_cache_secs: u64,
    /// Connections served at once; more wait until one closes.
    #[arg(long, default_value_t = listener::DEFAULT_MAX_CONNECTIONS)]
    max_connections: std::num::NonZeroUsize,
    /// TLS handshakes one client address (an IPv6 /64) may have in progress;
    /// its further connections are closed at once until one ends.
    #[arg(long, default_value_t = std::num::NonZeroUsize::new(per_address::DEFAULT_HANDSHAKES).expect("not zero"))]
    max_handshakes_per_address: std::num::NonZeroUsize,
    /// Connections one client address (an IPv6 /64) may have open at once,
    /// handshake to close; its further connections are closed at once until
    /// one ends.
    #[arg(long, default_value_t = std::num::NonZeroUsize::new(per_address::DEFAULT_CONNECTIONS).expect("not zero"))]
    max_connections_per_address: std::num::NonZeroUsize,
    /// Seconds a client has from the end of its TLS handshake to the first
    /// byte of a request (or of the HTTP/2 preface); then it is closed.
    #[arg(long, default_value_t = listener::Limits::default().first_byte_timeout.as_secs(), value_parser = clap::value_parser!(u64).range(1..=3600))]
    first_byte_timeout: u64,
    /// Seconds a connection may stay open with no request in flight (an
    /// HTTP/2 connection is sent GOAWAY, then closed; HTTP/1 is closed).
    #[arg(long, default_value_t = listener::Limits::default().idle_timeout.as_secs(), value_parser = clap::value_parser!(u64).range(1..=3600))]
    idle_timeout: u64,
    /// Seconds a client has to send a whole request head (also after the
    /// previous response on a kept-alive connection).
    #[arg(long, default_value_t = listener::Limits::default().header_read_timeout.as_secs(), value_parser = clap::value_parser!(u64).range(1..=3600))]
    header_read_timeout: u64,
    /// Seconds a request body may go without sending data.
    #[arg(long, default_value_t = listener::Limits::default().body_idle_timeout.as_secs(), value_parser = clap::value_parser!(u64).range(1..=3600))]
    body_idle_timeout: u64,
    /// `terraform login` through an identity provider, and CI jobs'
    /// OIDC tokens exchanged for publish tokens.
    #[command(flatten)]
    signin: signin::SignInArgs,
    /// What upstreams of the pull-through cache may name (issue 35).
    #[command(flatten)]
    upstream: upstream::UpstreamArgs,
    /// Prometheus metrics on a listener of their own (issue 38).
    #[command(flatten)]
    metrics: metrics::MetricsArgs,
}

/// Everything start-up prepared: ready to serve.
struct Ready {
    listener: tokio::net::TcpListener,
    tls: Arc<rustls::ServerConfig>,
    registry: Arc<Registry>,
    blobs: tfreg_store::fs::FsBlobStore,
    items: tfreg_store::sqlite::SqliteStore,
    hostname: Hostname,
    ca: Option<PathBuf>,
    dir: DataDir,
    /// Sign-in, where an identity provider or CI issuers are configured.
    auth: Option<tfreg_auth::Auth>,
    /// Download counts, written every [`USAGE_INTERVAL`] and at stop.
    usage: Arc<tfreg_http::usage::Tallied>,
    _lock: ServeLock,
}

/// How often counted downloads are written (issue 38): a `kill -9` loses
/// at most this much; each interval writes one add per distinct counter
/// (a busy registry's thousands of downloads a second are still a few
/// hundred adds), so longer saves little and shorter costs writes that
/// contend with publishes for the database's one write lock.
const USAGE_INTERVAL: std::time::Duration = std::time::Duration::from_secs(5);

/// Where archives the cache fetches are written until verified.
const FILL_TMP: &str = "fill-tmp";

pub async fn run(args: ServeArgs) -> Result<()> {
    // Signals first: a stop during start-up (a locked database, a slow disk) is honoured.
    let mut stop = signals::Stop::install()?;
    tracing::info!(data_dir = %args.data_dir.display(), listen = %args.listen, "starting");
    let limits = listener::Limits {
        max_connections: args.max_connections.get(),
        max_handshakes_per_address: args.max_handshakes_per_address.get(),
        max_connections_per_address: args.max_connections_per_address.get(),
        first_byte_timeout: std::time::Duration::from_secs(args.first_byte_timeout),
        idle_timeout: std::time::Duration::from_secs(args.idle_timeout),
        header_read_timeout: std::time::Duration::from_secs(args.header_read_timeout),
        body_idle_timeout: std::time::Duration::from_secs(args.body_idle_timeout),
        ..listener::Limits::default()
    };
    let ready = tokio::select! {
        ready = start(&args) => ready?,
        () = stop.wait() => {
            tracing::info!("stopped during start-up");
            return Ok(());
        }
    };
    let addr = ready
        .listener
        .local_addr()
        .map_err(|e| format!("cannot listen on {}: {e}", args.listen))?;
    let bin_dir = welcome::bin_dir_unless_on_path();
    let text = welcome::Welcome {
        host: ready.hostname.as_str(),
        listen: addr,
        ca: ready.ca.as_deref(),
        data_dir: &ready.dir.root,
        anonymous_reads: ready.registry.config.anonymous_reads,
        bin_dir: bin_dir.as_deref(),
    }
    .render();
    eprintln!("{text}");
    housekeeping::spawn(ready.blobs.clone(), ready.items.clone(), args.url_ttl);
    let mut app = crate::every_group(ready.registry.clone());
    if let Some(auth) = ready.auth {
        app.served = app.served.auth(auth);
    }
    let app = app.router();
    let (stopped, stop_counting) = tokio::sync::oneshot::channel::<()>();
    let counting = tokio::spawn(tfreg_http::usage::write_every(
        ready.usage.clone(),
        Arc::new(ready.items.clone()),
        USAGE_INTERVAL,
        async move {
            let _ = stop_counting.await;
        },
    ));
    listener::serve(ready.listener, ready.tls, app, limits, stop.wait()).await;
    // Every request has been answered: what they counted is written now.
    let _ = stopped.send(());
    match counting.await {
        Ok(Ok(f)) => tracing::info!(downloads = f.downloads, "download counts written"),
        Ok(Err(e)) => tracing::error!(error = %e, "download counts of the last seconds are lost"),
        Err(e) => tracing::error!(error = %e, "the download counter stopped"),
    }
    tracing::info!("stopped");
    Ok(())
}

async fn start(args: &ServeArgs) -> Result<Ready> {
    let sso_name = signin::display_name(&args.signin)?;
    let dir = DataDir::open(&args.data_dir)?;
    let lock = dir.lock_for_serving()?;
    let hostname = Hostname::parse(
        &args
            .hostname
            .clone()
            .unwrap_or_else(|| format!("127.0.0.1:{}", args.listen.port())),
    )?;
    dir.remember_hostname(hostname.as_str())?;
    if !hostname
        .as_str()
        .split(':')
        .next()
        .unwrap_or("")
        .contains('.')
    {
        tracing::warn!(
            hostname = hostname.as_str(),
            "Terraform accepts module addresses only on hostnames with a dot; use e.g. --hostname 127.0.0.1:{} for modules",
            args.listen.port()
        );
    }
    let mut config = Config::new(hostname.clone());
    config.url_ttl_secs = args.url_ttl;
    config.anonymous_reads = !args.private;
    config.require_namespace_keys = args.require_namespace_keys;
    config.token_cache_secs = args.token_cache_secs;
    // Known here: a trust policy for another issuer is refused at write.
    config.ci_issuers = Some(args.signin.ci_issuers.clone());
    config.upstream_policy = args.upstream.policy();
    let auth = signin::auth(&args.signin).await?;
    config.login_v1 = auth
        .as_ref()
        .and_then(|a| a.login_settings())
        .map(|s| s.login_v1());
    config.sso_name = sso_name;
    if config.anonymous_reads {
        tracing::warn!(
            "reads are open to anyone who reaches this port (no token needed); start with --private to require one"
        );
    } else {
        tracing::info!("private: every read needs a token");
    }
    // Opening waits for a lock another process holds: off the async threads,
    // so that a stop signal is still heard meanwhile.
    let opening = dir.clone();
    let items = Arc::new(
        tokio::task::spawn_blocking(move || opening.item_store())
            .await
            .map_err(|e| format!("opening the database: {e}"))??,
    );
    let signer = tfreg_http::signed_url::load_signer(items.as_ref())
        .await
        .map_err(|e| {
            format!(
                "reading the URL-signing secret from {}: {e}",
                dir.db_path().display()
            )
        })?;
    let blobs = dir.blob_store()?;
    // This process holds the data directory: whatever is in the temp area
    // was left by one that died (kill -9, power loss).
    housekeeping::sweep_temp(&blobs, std::time::Duration::ZERO).await;
    // The pull-through cache fetches misses in this process; archives are
    // streamed into the data directory until verified (left-overs of a
    // process that died go now).
    let fill_dir = dir.root.join(FILL_TMP);
    let _ = std::fs::remove_dir_all(&fill_dir);
    let max_archive_bytes = config.max_archive_bytes;
    let recorder = metrics::start(&args.metrics).await?;
    let cache = tfreg_cache::fill::Cache::new(
        items.clone(),
        Arc::new(blobs.clone()),
        fill_dir,
        tfreg_outbound::Deployment::Serve,
        max_archive_bytes,
    )
    .with_policy(config.upstream_policy.clone())
    .with_metrics(recorder.clone());
    let usage = Arc::new(tfreg_http::usage::Tallied::new());
    let mut registry = Registry::new(items.clone(), Arc::new(blobs.clone()), signer, config)
        .with_filler(Arc::new(tfreg_cache::fill::InProcess::new(cache)))
        .with_metrics(recorder);
    if !args.no_download_counts {
        registry = registry.with_usage(usage.clone());
    }
    let registry = Arc::new(registry);

    let (tls, ca) = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => (tls::server_config(cert, key)?, None),
        _ => {
            let host_only = hostname
                .as_str()
                .rsplit_once(':')
                .map_or(hostname.as_str(), |(h, _)| h);
            let files = tls::dev_certificate(&dir.root, host_only)?;
            (tls::server_config(&files.cert, &files.key)?, files.ca)
        }
    };
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", args.listen))?;
    Ok(Ready {
        listener,
        tls,
        registry,
        blobs,
        items: items.as_ref().clone(),
        hostname,
        ca,
        dir,
        auth,
        usage,
        _lock: lock,
    })
}
