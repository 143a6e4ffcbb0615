//! `tfreg`: run a private Terraform / OpenTofu registry locally, publish
//! providers and modules to any tfreg registry, and manage tokens.

mod aws;
mod client;
mod data_dir;
mod net_error;
mod publish;
mod serve;
mod tls;
mod trust;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "tfreg",
    version,
    about = "A private registry for Terraform and OpenTofu"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the registry on this machine (embedded store, HTTPS).
    Serve(serve::ServeArgs),
    /// Publish a provider or a module to a registry.
    #[command(subcommand)]
    Publish(PublishCommand),
    /// Network mirror commands.
    #[command(subcommand)]
    Mirror(MirrorCommand),
    /// API tokens.
    #[command(subcommand)]
    Token(TokenCommand),
    /// AWS mode helpers (DynamoDB table and S3 bucket).
    #[command(subcommand)]
    Aws(aws::AwsCommand),
    /// Write a development CA and server certificate (for `cargo lambda watch --tls-*`).
    DevCert(DevCertArgs),
}

#[derive(Args)]
struct DevCertArgs {
    /// Directory to write `tls/ca.pem`, `tls/server.pem` and `tls/server.key` into.
    #[arg(long, default_value = data_dir::DEFAULT)]
    dir: PathBuf,
    /// The hostname the certificate is for, besides localhost and 127.0.0.1.
    #[arg(long, default_value = "localhost")]
    hostname: String,
}

#[derive(Subcommand)]
enum PublishCommand {
    /// Publish a signed provider release from goreleaser's dist directory.
    Provider(publish::ProviderArgs),
    /// Publish a module from a directory or a .tar.gz.
    Module(publish::ModuleArgs),
}

#[derive(Subcommand)]
enum MirrorCommand {
    /// Import a directory written by `terraform providers mirror` (packed layout).
    Import(publish::MirrorImportArgs),
}

#[derive(Subcommand)]
enum TokenCommand {
    /// Create a token in a local data directory; prints only the token.
    Create(TokenCreateArgs),
}

#[derive(Args)]
struct TokenCreateArgs {
    /// The registry's data directory (as given to `tfreg serve`).
    #[arg(long, default_value = data_dir::DEFAULT)]
    data_dir: PathBuf,
    /// Store the token in this DynamoDB table instead (AWS mode; AWS_REGION,
    /// credentials and AWS_ENDPOINT_URL_DYNAMODB from the environment).
    #[arg(long)]
    table: Option<String>,
    /// `read` (download only) or `publish` (download and publish).
    #[arg(long, value_parser = ["read", "publish"])]
    scope: String,
    /// Limit publishing to this namespace.
    #[arg(long)]
    namespace: Option<String>,
    /// A note to remember the token by.
    #[arg(long)]
    description: Option<String>,
}

fn init_logging() {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_env("TFREG_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .compact()
        .init();
}

async fn token_create(args: TokenCreateArgs) -> cli_error::Result<()> {
    let scope = tfreg::auth::Scope::parse(&args.scope)?;
    let namespace = args
        .namespace
        .as_deref()
        .map(tfreg::address::module_namespace)
        .transpose()?;
    let store: Box<dyn tfreg::storage::ItemStore> = match &args.table {
        Some(table) => Box::new(aws::table(table).await?),
        None => Box::new(data_dir::DataDir::open(&args.data_dir)?.item_store()?),
    };
    let new = tfreg::auth::NewToken {
        name: args.description.unwrap_or_else(|| format!("{scope}")),
        scopes: vec![scope],
        namespaces: namespace.into_iter().collect(),
        expires_at: None,
    };
    let (token, _) = tfreg::auth::create_token(
        store.as_ref(),
        new,
        tfreg::registry::unix_now(),
        &tfreg::auth::Principal::Operator.actor(),
    )
    .await?;
    println!("{token}");
    Ok(())
}

fn dev_cert(args: DevCertArgs) -> cli_error::Result<()> {
    std::fs::create_dir_all(&args.dir)
        .map_err(|e| format!("creating {}: {e}", args.dir.display()))?;
    let files = tls::dev_certificate(&args.dir, &args.hostname)?;
    println!("certificate: {}", files.cert.display());
    println!("key:         {}", files.key.display());
    if let Some(ca) = files.ca {
        println!("trust it:    export SSL_CERT_FILE={}", ca.display());
    }
    Ok(())
}

mod cli_error {
    /// The CLI's error: a message for the user.
    #[derive(Debug)]
    pub struct CliError(pub String);

    impl<E: std::fmt::Display> From<E> for CliError {
        fn from(e: E) -> Self {
            CliError(e.to_string())
        }
    }

    pub type Result<T> = std::result::Result<T, CliError>;
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let _ = rustls::crypto::ring::default_provider().install_default();
    init_logging();
    let result = match cli.command {
        Command::Serve(args) => serve::run(args).await,
        Command::Publish(PublishCommand::Provider(args)) => publish::provider(args).await,
        Command::Publish(PublishCommand::Module(args)) => publish::module(args).await,
        Command::Mirror(MirrorCommand::Import(args)) => publish::mirror_import(args).await,
        Command::Token(TokenCommand::Create(args)) => token_create(args).await,
        Command::Aws(cmd) => aws::run(cmd).await,
        Command::DevCert(args) => dev_cert(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(cli_error::CliError(msg)) => {
            eprintln!("error: {msg}");
            ExitCode::FAILURE
        }
    }
}
