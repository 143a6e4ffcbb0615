//! `tfreg serve`: every endpoint in one HTTPS server on the embedded store.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use axum::body::Body as AxumBody;
use clap::Args;
use futures_util::TryStreamExt;
use tfreg::address::Hostname;
use tfreg::service::{self, Body, Request};
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
    /// Lifetime of archive download URLs, in seconds.
    #[arg(long, default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..=86400))]
    url_ttl: u64,
    /// Require a token (read or publish scope) for every read endpoint.
    #[arg(long)]
    require_read_token: bool,
}

fn to_request(req: axum::extract::Request) -> Request {
    let (parts, body) = req.into_parts();
    let stream = body.into_data_stream().map_err(std::io::Error::other);
    Request {
        method: parts.method,
        path: parts.uri.path().to_string(),
        query: parts.uri.query().map(str::to_string),
        authorization: service::authorization(&parts.headers),
        body: Body::Stream(Box::pin(stream)),
    }
}

fn to_axum(resp: service::Response) -> axum::response::Response {
    let (parts, body) = resp.into_parts();
    let body = match body {
        Body::Empty => AxumBody::empty(),
        Body::Bytes(b) => AxumBody::from(b),
        Body::Stream(s) => AxumBody::from_stream(s),
    };
    axum::response::Response::from_parts(parts, body)
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
    let registry = Arc::new(Registry::new(
        items,
        Arc::new(dir.blob_store()?),
        signer,
        config,
    ));

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

    let app = axum::Router::new().fallback(move |req: axum::extract::Request| {
        let registry = registry.clone();
        async move { to_axum(service::handle(&registry, to_request(req)).await) }
    });

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
