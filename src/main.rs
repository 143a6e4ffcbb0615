//! `tfreg`: run a private Terraform / OpenTofu registry locally, publish
//! providers and modules to any tfreg registry, and manage tokens.

mod admin;
mod aws;
mod ci_token;
mod client;
mod credentials;
mod data_dir;
mod log_writer;
mod login;
mod maintenance;
mod net_error;
mod publish;
mod serve;
mod sync;
mod tls;
mod trust;
mod usage;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "tfreg",
    version,
    about = "A private registry for Terraform and OpenTofu",
    after_help = "Examples:
  tfreg serve --private         # https://127.0.0.1:8443, state in ./tfreg-data, reads need a token
  tfreg token create --name ci --scope publish --namespace acme --expires-in 90d
  tfreg publish module ./vpc --registry https://127.0.0.1:8443 --namespace acme --name vpc --system aws --version 1.0.0
  tfreg token list              # on ./tfreg-data; --registry URL for another registry"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the registry on this machine (embedded store, HTTPS).
    Serve(Box<serve::ServeArgs>),
    /// Sign in to a registry with its identity provider (as `terraform
    /// login` does) and store the token where Terraform, OpenTofu and tfreg
    /// read it.
    Login(login::LoginArgs),
    /// Publish a provider or a module to a registry.
    #[command(subcommand)]
    Publish(PublishCommand),
    /// Network mirror commands.
    #[command(subcommand)]
    Mirror(MirrorCommand),
    /// API tokens: create, list, revoke.
    #[command(subcommand)]
    Token(admin::TokenCommand),
    /// Namespace signing keys: add, list, remove.
    #[command(subcommand)]
    Key(admin::KeyCommand),
    /// Sign-in: which identity-provider groups get which scope on which
    /// namespaces: map, unmap, list.
    #[command(subcommand)]
    Sso(admin::SsoCommand),
    /// CI trust policies: which CI jobs (by their OIDC token's issuer and
    /// claims) may publish to a namespace: add, list, remove.
    #[command(subcommand)]
    Trust(admin::TrustCommand),
    /// The registries the pull-through cache reads from: set, show, list, remove.
    #[command(subcommand)]
    Upstream(admin::UpstreamCommand),
    /// What the pull-through cache holds: list, warm.
    #[command(subcommand)]
    Cache(admin::CacheCommand),
    /// Mark a provider or module version deprecated (still installable;
    /// `terraform init` warns), or undo it with --undo.
    Deprecate(admin::DeprecateArgs),
    /// Leave a version out of versions lists (exact downloads keep working),
    /// or list it again with --undo.
    Yank(admin::YankArgs),
    /// Delete a version from every response and remove its archives (for
    /// mistakes and takedowns; cannot be undone).
    Delete(admin::DeleteArgs),
    /// The newest changes: publishes, deprecations, yanks, deletes, token
    /// and key changes; who made them and how they ended.
    ///
    /// The pull-through cache's actions: upstream.set and upstream.remove
    /// (an admin changed an upstream), cache.refused (a fill refused: a
    /// signature, checksum, address, or settings the server does not allow;
    /// the detail says which), cache.key-changed (a provider's releases
    /// signed by a new key), cache.passthrough (a module source handed to
    /// clients unfetched).
    Audit(admin::AuditArgs),
    /// Who downloads which version of a provider (NAMESPACE/TYPE) or module
    /// (NAMESPACE/NAME/SYSTEM): counts per version, day and platform, the
    /// consumers (tokens, SSO users, CI jobs) with first and last seen.
    Usage(usage::UsageArgs),
    /// Delete what no record refers to: files of publishes that failed or
    /// lost a race, of deletes cut short, and uploads of no publish in
    /// progress (a dry run unless --apply).
    Gc(maintenance::GcArgs),
    /// Re-hash every stored file against what its record promises (bit rot,
    /// an edited bucket); report and audit each mismatch, change nothing.
    Verify(maintenance::VerifyArgs),
    /// Write the whole registry (releases and their archives, signing keys,
    /// token hashes, trust policies, group mappings, upstreams, download
    /// counts, audit) to a directory, with a manifest of every file's sha256.
    Export(maintenance::ExportArgs),
    /// Rebuild every versions index and listing entry from the releases
    /// (after a crash left one behind, or an older tfreg made it).
    Reindex(maintenance::ReindexArgs),
    /// Bring in what `tfreg export` wrote: every file checked first, the
    /// same items merged, a different version of the same name refused;
    /// run again after an interruption, it goes on where it stopped.
    Import(maintenance::ImportArgs),
    /// Copy another registry's providers and modules (another tfreg, or any
    /// registry-protocol host) into this one as its own, each verified as the
    /// pull-through cache verifies it; run again, only what is new is fetched.
    Sync(Box<sync::SyncArgs>),
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
    #[command(after_help = "Examples:
  tfreg publish provider ./dist --registry https://127.0.0.1:8443 --namespace acme --signing-key key.asc")]
    Provider(publish::ProviderArgs),
    /// Publish a module from a directory or a .tar.gz.
    Module(publish::ModuleArgs),
}

#[derive(Subcommand)]
enum MirrorCommand {
    /// Import a directory written by `terraform providers mirror` (packed layout).
    Import(publish::MirrorImportArgs),
}

/// Logs go to stderr: `info` for the server, `warn` for the other commands
/// (whose local admin requests would otherwise log a line each); TFREG_LOG,
/// else RUST_LOG, overrides (`off`: nothing).
///
/// The server's lines are formatted on the request's thread and written by
/// one logging thread ([`log_writer`]), which gathers them for a few
/// milliseconds and writes them with one `write`: under load a request
/// neither waits for a `write(2)` nor wakes a thread of its own. Not lossy. The
/// returned guard writes what is left when `main` returns. The other commands
/// write directly, so their warnings come before their error message.
fn init_logging(server: bool) -> Option<log_writer::Guard> {
    use tracing_subscriber::EnvFilter;
    let default = if server { "info" } else { "warn" };
    let directives = tfreg_http::log_directives(|name| std::env::var(name).ok(), default);
    let filter = EnvFilter::try_new(&directives).unwrap_or_else(|_| EnvFilter::new(default));
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .compact();
    let batched = server
        .then(|| log_writer::start(std::io::stderr(), log_writer::MOST_BYTES).ok())
        .flatten();
    match batched {
        Some((writer, guard)) => {
            logs.with_writer(writer).init();
            Some(guard)
        }
        None => {
            logs.with_writer(std::io::stderr).init();
            None
        }
    }
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

/// The registry with every handler group: `tfreg serve`, and the admin
/// commands run in-process on a data dir or a stack's stores.
fn every_group(registry: std::sync::Arc<tfreg_http::Registry>) -> tfreg_http::App {
    let served = tfreg_http::Served::new()
        .read(tfreg_read::Read)
        .blob(tfreg_read::Blob)
        .publish(tfreg_publish::Publish)
        .admin(tfreg_admin::Admin)
        .ui(tfreg_ui::Ui);
    tfreg_http::App::new(registry, served)
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
    let log = init_logging(matches!(cli.command, Command::Serve(_)));
    let result = match cli.command {
        Command::Serve(args) => serve::run(*args).await,
        Command::Login(args) => login::run(args).await,
        Command::Publish(PublishCommand::Provider(args)) => publish::provider(args).await,
        Command::Publish(PublishCommand::Module(args)) => publish::module(args).await,
        Command::Mirror(MirrorCommand::Import(args)) => publish::mirror_import(args).await,
        Command::Token(cmd) => admin::token(cmd).await,
        Command::Key(cmd) => admin::key(cmd).await,
        Command::Sso(cmd) => admin::sso(cmd).await,
        Command::Trust(cmd) => admin::trust(cmd).await,
        Command::Upstream(cmd) => admin::upstream(cmd).await,
        Command::Cache(cmd) => admin::cache(cmd).await,
        Command::Deprecate(args) => admin::deprecate(args).await,
        Command::Yank(args) => admin::yank(args).await,
        Command::Delete(args) => admin::delete(args).await,
        Command::Audit(args) => admin::audit(args).await,
        Command::Usage(args) => usage::run(args).await,
        Command::Gc(args) => maintenance::gc(args).await,
        Command::Verify(args) => maintenance::verify(args).await,
        Command::Export(args) => maintenance::export(args).await,
        Command::Reindex(args) => maintenance::reindex(args).await,
        Command::Import(args) => maintenance::import(args).await,
        Command::Sync(args) => sync::run(*args).await,
        Command::Aws(cmd) => aws::run(cmd).await,
        Command::DevCert(args) => dev_cert(args),
    };
    // The log lines still gathered are written first, so the error is the
    // last thing on stderr (the writer thread batches for a few ms).
    drop(log);
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(cli_error::CliError(msg)) => {
            eprintln!("error: {msg}");
            ExitCode::FAILURE
        }
    }
}
