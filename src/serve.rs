//! `tfreg serve`: every endpoint in one HTTPS server on the embedded store.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;
use tfreg::address::Hostname;
use tfreg::registry::{DEFAULT_URL_TTL_SECS, MAX_URL_TTL_SECS};
use tfreg::{Config, Registry};

use crate::cli_error::Result;
use crate::data_dir::{self, DataDir};
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
    /// Require a token (read or publish scope) for every read endpoint.
    #[arg(long)]
    require_read_token: bool,
}

fn print_welcome(
    hostname: &Hostname,
    listen: SocketAddr,
    ca: Option<&std::path::Path>,
    data_dir: &std::path::Path,
) {
    let host = hostname.as_str();
    let env_host = host.replace('-', "__").replace(['.', ':'], "_");
    let mut out = format!("\ntfreg is serving https://{host}/ (listening on {listen})\n");
    out += &format!("  discovery:  https://{host}/.well-known/terraform.json\n");
    if let Some(ca) = ca {
        out += &format!(
            "\nThe certificate is tfreg's development CA. Trust it in the shell that runs terraform/tofu:\n  export SSL_CERT_FILE={}\n",
            ca.display()
        );
    }
    out += &format!(
        r#"
Create a token (printed once) and publish:
  export TFREG_TOKEN=$(tfreg token create --data-dir {dir} --scope publish)
  tfreg publish provider ./dist --registry https://{host} --namespace NS --signing-key key.asc
  tfreg publish module ./my-module --registry https://{host} --namespace NS --name NAME --system SYSTEM --version 1.0.0

CLI configuration (~/.terraformrc or TF_CLI_CONFIG_FILE), ready to paste:
  credentials "{host}" {{
    token = "<a token from tfreg token create>"
  }}
  # or: export TF_TOKEN_{env_host}=<token>

  # Optional: fetch providers of any origin through this registry's network mirror
  provider_installation {{
    network_mirror {{
      url = "https://{host}/v1/mirror/"
    }}
  }}

Use it in configurations as source = "{host}/NS/NAME" (providers) and "{host}/NS/NAME/SYSTEM" (modules).
"#,
        dir = data_dir.display()
    );
    eprintln!("{out}");
}

pub async fn run(args: ServeArgs) -> Result<()> {
    let dir = DataDir::open(&args.data_dir)?;
    let hostname = Hostname::parse(
        &args
            .hostname
            .clone()
            .unwrap_or_else(|| format!("127.0.0.1:{}", args.listen.port())),
    )?;
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
    config.require_read_token = args.require_read_token;
    let items = Arc::new(dir.item_store()?);
    let signer = tfreg::signed_url::load_signer(items.as_ref()).await?;
    let blobs = dir.blob_store()?;
    sweep_uploads_hourly(blobs.clone());
    let registry = Arc::new(Registry::new(items, Arc::new(blobs), signer, config));

    let tls_files = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => tls::TlsFiles {
            cert: cert.clone(),
            key: key.clone(),
            ca: None,
        },
        _ => {
            let host_only = hostname
                .as_str()
                .rsplit_once(':')
                .map_or(hostname.as_str(), |(h, _)| h);
            tls::dev_certificate(&dir.root, host_only)?
        }
    };
    let rustls_config =
        axum_server::tls_rustls::RustlsConfig::from_pem_file(&tls_files.cert, &tls_files.key)
            .await
            .map_err(|e| format!("loading TLS certificate {}: {e}", tls_files.cert.display()))?;

    let app = tfreg::app::app(registry, None);

    let handle = axum_server::Handle::new();
    let shutdown = handle.clone();
    tokio::spawn(async move {
        shutdown_signal().await;
        shutdown.graceful_shutdown(Some(std::time::Duration::from_secs(10)));
    });

    let server = axum_server::bind_rustls(args.listen, rustls_config).handle(handle.clone());
    let serving = tokio::spawn(server.serve(app.into_make_service()));
    if let Some(addr) = handle.listening().await {
        print_welcome(&hostname, addr, tls_files.ca.as_deref(), &dir.root);
    }
    serving
        .await
        .map_err(|e| format!("server task failed: {e}"))?
        .map_err(|e| format!("cannot serve on {}: {e}", args.listen))?;
    Ok(())
}

/// Remove upload slots (and their tombstones) that no URL can write any more:
/// at start, then every hour.
fn sweep_uploads_hourly(blobs: tfreg::storage::fs::FsBlobStore) {
    let max_age =
        std::time::Duration::from_secs(MAX_URL_TTL_SECS + tfreg::upload_session::GRACE_SECS);
    tokio::spawn(async move {
        let mut every = tokio::time::interval(std::time::Duration::from_secs(3600));
        loop {
            every.tick().await;
            let blobs = blobs.clone();
            match tokio::task::spawn_blocking(move || blobs.sweep_uploads(max_age)).await {
                Ok(Ok(0)) => {}
                Ok(Ok(n)) => tracing::info!(removed = n, "swept expired upload slots"),
                Ok(Err(e)) => tracing::warn!(error = %e, "sweeping upload slots failed"),
                Err(e) => tracing::warn!(error = %e, "sweeping upload slots failed"),
            }
        }
    });
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => return ctrl_c.await.unwrap_or(()),
            };
        tokio::select! {
            _ = ctrl_c => {},
            _ = term.recv() => {},
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}
