//! `tfreg sync --from HOST NAME...` (issue 39): another registry's providers
//! and modules made this registry's own ([`tfreg_cache::sync`]), on the
//! stores themselves like the other maintenance verbs: a data directory, or
//! a stack's table and bucket with the operator's AWS credentials. Not a
//! function: a large sync outlasts a Lambda's 15 minutes, and fetching from
//! anywhere the operator names belongs in no function's role.
//!
//! The origin is reached as an upstream would be, with the same settings
//! (credentials from `TFREG_UPSTREAM_CREDENTIAL_<HOST>`, `--connect-to`,
//! `--ca-file`, module hosts), fetched into a scratch store in a
//! temporary directory that is removed afterwards.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;
use tfreg_cache::sync::{Plan, Stores, SyncOutcome, Synced, Syncer, Wanted};
use tfreg_model::constraint::Constraints;
use tfreg_model::upstream::{
    Connect, CredentialRef, Net, Serves, UpstreamHost, UpstreamRecord, UpstreamSettings,
};

use crate::admin::Where;
use crate::cli_error::Result;

#[derive(Args)]
#[command(
    after_help = "Each NAME keeps its name here; run again, it fetches only the versions this \
registry does not hold yet. The README's \"Mirroring another registry\" shows whole commands \
(a private origin's token, a constraint, a dry run)."
)]
pub struct SyncArgs {
    /// The registry to copy from: its hostname as its packages' addresses
    /// name it (https:// may be written before it).
    #[arg(long, value_name = "HOST")]
    from: String,
    /// What to copy: providers as NAMESPACE/TYPE, modules as
    /// NAMESPACE/NAME/SYSTEM (the registry protocol lists no namespace's
    /// contents, so each is named). Each keeps its name here.
    #[arg(required = true, value_name = "NAME")]
    names: Vec<String>,
    /// Only the versions meeting this Terraform version constraint
    /// (`>= 1.2, < 2.0`, `~> 1.4`); without it, every version the origin lists.
    #[arg(long)]
    constraint: Option<String>,
    /// Say what would be fetched; fetch and store nothing.
    #[arg(long)]
    dry_run: bool,
    /// A bearer token for the origin (another tfreg's read token), read
    /// from this variable: TFREG_UPSTREAM_CREDENTIAL_ and the host in
    /// capitals with `.` as `_` and `-` as `__`, as for an upstream.
    #[arg(long, value_name = "NAME")]
    credentials_env: Option<String>,
    /// A host module sources may be fetched from besides the origin itself
    /// (repeatable; default github.com).
    #[arg(long = "module-host", value_name = "HOST")]
    module_hosts: Vec<String>,
    /// A version signed by another key than this registry's earlier
    /// versions of the provider (default audit).
    #[arg(long, value_enum)]
    on_key_change: Option<crate::admin::upstream::KeyChangeArg>,
    /// Connect to HOST at ADDR instead of asking DNS (HOST=ADDR:PORT;
    /// repeatable): a registry inside your network.
    #[arg(long = "connect-to", value_name = "HOST=ADDR", value_parser = crate::admin::upstream::connect_to)]
    connect_to: Vec<(String, SocketAddr)>,
    /// PEM certificates to trust for the origin besides the system's.
    #[arg(long, value_name = "PEM")]
    ca_file: Option<PathBuf>,
    #[command(flatten)]
    r#where: Where,
}

impl SyncArgs {
    /// The origin as an upstream record (never stored here), and the
    /// operator's allow-list: this command's own `--connect-to` addresses.
    fn origin(&self) -> Result<(UpstreamRecord, tfreg_model::upstream::OperatorPolicy)> {
        let host = self
            .from
            .trim_start_matches("https://")
            .trim_end_matches('/');
        let host = UpstreamHost::parse(host)?;
        let mut s = UpstreamSettings::new(Serves {
            providers: true,
            modules: true,
        });
        s.credentials = self.credentials_env.clone().map(CredentialRef::Env);
        // Another registry's module archives are its own download URLs.
        s.module_hosts.push(host.clone());
        for h in &self.module_hosts {
            s.module_hosts.push(UpstreamHost::parse(h)?);
        }
        if let Some(k) = self.on_key_change {
            s.on_key_change = k.into();
        }
        let mut policy = crate::admin::upstream::operator_policy_from_env()?;
        if !self.connect_to.is_empty() || self.ca_file.is_some() {
            let mut connect = Connect::default();
            crate::admin::upstream::add_connect_to(&mut connect, &self.connect_to)?;
            for (_, addr) in &self.connect_to {
                let bits = if addr.is_ipv4() { 32 } else { 128 };
                policy
                    .connect_allow
                    .push(Net::parse(&format!("{}/{bits}", addr.ip()))?);
            }
            if let Some(path) = &self.ca_file {
                let pem = std::fs::read_to_string(path)
                    .map_err(|e| format!("reading {}: {e}", path.display()))?;
                connect.ca_pem = Some(pem);
            }
            s.connect = Some(connect);
        }
        s.validate(&host)?;
        let now = tfreg_model::unix_now();
        let record = UpstreamRecord {
            hostname: host,
            settings: s,
            created_at: now,
            created_by: "sync".into(),
            updated_at: now,
            updated_by: "sync".into(),
        };
        Ok((record, policy))
    }
}

fn line(s: &Synced) -> String {
    let what = [s.kind, &s.name, &s.version]
        .into_iter()
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    match &s.outcome {
        SyncOutcome::Stored => format!("stored   {what}"),
        SyncOutcome::Present => format!("present  {what}"),
        SyncOutcome::WouldStore => format!("would store {what}"),
        SyncOutcome::Skipped(why) => format!("skipped  {what}: {why}"),
        SyncOutcome::Refused(why) => format!("REFUSED  {what}: {why}"),
        SyncOutcome::Failed(why) => format!("FAILED   {what}: {why}"),
    }
}

pub async fn run(args: SyncArgs) -> Result<()> {
    let wanted = args
        .names
        .iter()
        .map(|n| Wanted::parse(n))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    let constraint = args
        .constraint
        .as_deref()
        .map(Constraints::parse)
        .transpose()?;
    let (origin, policy) = args.origin()?;
    let registry = args.r#where.stores("sync").await?;
    let scratch_dir = tempfile::Builder::new()
        .prefix("tfreg-sync-")
        .tempdir()
        .map_err(|e| format!("cannot make a scratch directory: {e}"))?;
    let scratch = Stores {
        items: Arc::new(tfreg_store::sqlite::SqliteStore::open(
            &scratch_dir.path().join("registry.db"),
        )?),
        blobs: Arc::new(tfreg_store::fs::FsBlobStore::open(
            &scratch_dir.path().join("blobs"),
        )?),
    };
    let target = Stores {
        items: registry.items.clone(),
        blobs: registry.blobs.clone(),
    };
    let syncer = Syncer::new(
        target,
        scratch,
        scratch_dir.path().join("tmp"),
        origin,
        policy,
        registry.config.max_archive_bytes,
    )
    .await
    .map_err(|e| e.to_string())?;
    let plan = Plan {
        wanted,
        constraint,
        dry_run: args.dry_run,
    };
    let json = args.r#where.json_wanted();
    let report = syncer
        .run(&plan, &|s| {
            if !json {
                println!("{}", line(s));
            }
        })
        .await;
    let count = |f: fn(&SyncOutcome) -> bool| report.iter().filter(|s| f(&s.outcome)).count();
    let stored = count(|o| matches!(o, SyncOutcome::Stored | SyncOutcome::WouldStore));
    let present = count(|o| matches!(o, SyncOutcome::Present));
    let skipped = count(|o| matches!(o, SyncOutcome::Skipped(_)));
    let bad = count(|o| matches!(o, SyncOutcome::Refused(_) | SyncOutcome::Failed(_)));
    args.r#where.show(&report, |_| {
        println!(
            "{stored} {}, {present} already here, {skipped} skipped, {bad} refused or failed",
            if args.dry_run {
                "to fetch (dry run)"
            } else {
                "stored"
            }
        );
    })?;
    if bad > 0 {
        return Err(format!(
            "{bad} versions were refused or failed (audited as sync); nothing of them is served, and a run again retries them"
        )
        .into());
    }
    Ok(())
}
