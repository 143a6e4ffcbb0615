//! `tfreg upstream set|show|list|remove` and `tfreg cache list|warm`: the registries the pull-through
//! cache reads from, through the admin API (a registry's URL, or the stores
//! as the operator: [`super::Where`]). `set` sends the upstream's settings
//! whole (a PUT): a flag not given is its default, not the earlier value.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgGroup, Args, Subcommand, ValueEnum};
use tfreg_model::cache::CachedList;
use tfreg_model::router::AdminRoute;
use tfreg_model::upstream::{
    Connect, CredentialRef, FillBy, KeyChange, Mode, Net, RemovedUpstream, Serves, SetUpstream,
    Unsigned, UpstreamHost, UpstreamList, UpstreamRecord, UpstreamSettings,
};

use super::{Where, WhereArgs, when};
use crate::cli_error::Result;

#[derive(Subcommand)]
pub enum UpstreamCommand {
    /// Configure a registry the cache reads from (replaces its settings).
    Set(Box<SetArgs>),
    /// One upstream's settings.
    Show(HostArgs),
    /// Every upstream: hostname, what it serves, mode, list lifetime.
    List(WhereArgs),
    /// Stop reading from an upstream (what was cached from it stays).
    Remove(HostArgs),
}

#[derive(Clone, Copy, ValueEnum)]
enum ModeArg {
    Online,
    Sealed,
}

#[derive(Clone, Copy, ValueEnum)]
enum FillByArg {
    /// Tokens made with `tfreg token create --fill`, and admin tokens.
    Marked,
    /// Any token that may read.
    Any,
}

#[derive(Clone, Copy, ValueEnum)]
enum KeyChangeArg {
    Audit,
    Refuse,
}

#[derive(Clone, Copy, ValueEnum)]
enum UnsignedArg {
    Refuse,
    ChecksumsOnly,
}

#[derive(Args)]
#[command(group(ArgGroup::new("serves").required(true).multiple(true).args(["providers", "modules"])))]
#[command(group(ArgGroup::new("credentials").args(["credentials_env", "credentials_file", "credentials_ssm"])))]
pub struct SetArgs {
    /// Its hostname as clients write it (registry.terraform.io).
    host: String,
    /// Cache its providers.
    #[arg(long)]
    providers: bool,
    /// Cache its modules.
    #[arg(long)]
    modules: bool,
    /// online fetches on a miss; sealed answers only from the cache.
    #[arg(long, value_enum, default_value = "online")]
    mode: ModeArg,
    /// How long a fetched version list is answered without asking again (1m to 7d).
    #[arg(long, default_value = "1h", value_parser = seconds)]
    metadata_ttl: u32,
    /// How long the origin's 404 is remembered (at most 10m).
    #[arg(long, default_value = "1m", value_parser = seconds)]
    negative_ttl: u32,
    /// A bearer token for its API, read by `tfreg serve` from this variable.
    #[arg(long, value_name = "NAME")]
    credentials_env: Option<String>,
    /// ... or from this file (an absolute path).
    #[arg(long, value_name = "PATH")]
    credentials_file: Option<String>,
    /// ... or, on AWS, from this SSM SecureString parameter.
    #[arg(long, value_name = "NAME")]
    credentials_ssm: Option<String>,
    /// Who may make the cache fetch from it.
    #[arg(long, value_enum, default_value = "marked")]
    fill_by: FillByArg,
    /// A release signed by a key not seen before for its provider.
    #[arg(long, value_enum, default_value = "audit")]
    on_key_change: KeyChangeArg,
    /// A release with no signing keys (checksums-only: OpenTofu's registry).
    #[arg(long, value_enum, default_value = "refuse")]
    unsigned: UnsignedArg,
    /// A host module sources may be fetched from (repeatable; default github.com).
    #[arg(long = "module-host", value_name = "HOST")]
    module_hosts: Vec<String>,
    /// Largest archive fetched, in bytes (default: the registry's limit).
    #[arg(long)]
    max_archive_bytes: Option<u64>,
    /// How long one archive or module fill may take (10s to 15m).
    #[arg(long, default_value = "10m", value_parser = seconds)]
    fill_timeout: u32,
    /// Connect to HOST at ADDR instead of asking DNS (HOST=ADDR:PORT;
    /// repeatable; a registry inside the VPC, tests).
    #[arg(long = "connect-to", value_name = "HOST=ADDR", value_parser = connect_to)]
    connect_to: Vec<(String, SocketAddr)>,
    /// A network its names may resolve into though special-purpose (repeatable).
    #[arg(long = "allow-net", value_name = "CIDR")]
    allow_nets: Vec<String>,
    /// PEM certificates to trust for it besides the system's.
    #[arg(long, value_name = "PEM")]
    ca_file: Option<PathBuf>,
    #[command(flatten)]
    r#where: Where,
}

#[derive(Args)]
pub struct HostArgs {
    host: String,
    #[command(flatten)]
    r#where: Where,
}

fn seconds(text: &str) -> std::result::Result<u32, String> {
    let d: Duration = humantime::parse_duration(text).map_err(|e| e.to_string())?;
    u32::try_from(d.as_secs()).map_err(|_| format!("{text}: too long"))
}

fn connect_to(text: &str) -> std::result::Result<(String, SocketAddr), String> {
    let (host, addr) = text
        .split_once('=')
        .ok_or_else(|| format!("{text:?} is not HOST=ADDR:PORT"))?;
    let addr = addr
        .parse()
        .map_err(|e| format!("{addr:?} is not an address and port: {e}"))?;
    Ok((host.to_string(), addr))
}

impl SetArgs {
    fn settings(&self) -> Result<UpstreamSettings> {
        let mut s = UpstreamSettings::new(Serves {
            providers: self.providers,
            modules: self.modules,
        });
        s.mode = match self.mode {
            ModeArg::Online => Mode::Online,
            ModeArg::Sealed => Mode::Sealed,
        };
        s.metadata_ttl_secs = self.metadata_ttl;
        s.negative_ttl_secs = self.negative_ttl;
        s.credentials = match (
            &self.credentials_env,
            &self.credentials_file,
            &self.credentials_ssm,
        ) {
            (Some(name), _, _) => Some(CredentialRef::Env(name.clone())),
            (_, Some(path), _) => Some(CredentialRef::File(path.clone())),
            (_, _, Some(name)) => Some(CredentialRef::Ssm(name.clone())),
            _ => None,
        };
        s.fill_by = match self.fill_by {
            FillByArg::Marked => FillBy::MarkedTokens,
            FillByArg::Any => FillBy::AnyToken,
        };
        s.on_key_change = match self.on_key_change {
            KeyChangeArg::Audit => KeyChange::Audit,
            KeyChangeArg::Refuse => KeyChange::Refuse,
        };
        s.unsigned = match self.unsigned {
            UnsignedArg::Refuse => Unsigned::Refuse,
            UnsignedArg::ChecksumsOnly => Unsigned::ChecksumsOnly,
        };
        if !self.module_hosts.is_empty() {
            s.module_hosts = self
                .module_hosts
                .iter()
                .map(|h| UpstreamHost::parse(h))
                .collect::<std::result::Result<_, _>>()?;
        }
        s.max_archive_bytes = self.max_archive_bytes;
        s.fill_timeout_secs = self.fill_timeout;
        if !self.connect_to.is_empty() || !self.allow_nets.is_empty() || self.ca_file.is_some() {
            let mut connect = Connect::default();
            for (host, addr) in &self.connect_to {
                connect
                    .to
                    .entry(UpstreamHost::parse(host)?)
                    .or_default()
                    .push(*addr);
            }
            connect.allow_nets = self
                .allow_nets
                .iter()
                .map(|n| Net::parse(n))
                .collect::<std::result::Result<_, _>>()?;
            if let Some(path) = &self.ca_file {
                let pem = std::fs::read_to_string(path)
                    .map_err(|e| format!("reading {}: {e}", path.display()))?;
                connect.ca_pem = Some(pem);
            }
            s.connect = Some(connect);
        }
        Ok(s)
    }
}

fn serves(s: &UpstreamSettings) -> &'static str {
    match (s.serves.providers, s.serves.modules) {
        (true, true) => "providers,modules",
        (true, false) => "providers",
        _ => "modules",
    }
}

fn mode(s: &UpstreamSettings) -> &'static str {
    match s.mode {
        Mode::Online => "online",
        Mode::Sealed => "sealed",
    }
}

fn print_one(u: &UpstreamRecord) {
    let s = &u.settings;
    println!("{}", u.hostname);
    println!("  serves           {}", serves(s));
    println!("  mode             {}", mode(s));
    println!("  lists fresh for  {} s", s.metadata_ttl_secs);
    println!("  404 remembered   {} s", s.negative_ttl_secs);
    let credentials = match &s.credentials {
        None => "none".to_string(),
        Some(CredentialRef::Env(n)) => format!("env {n}"),
        Some(CredentialRef::File(p)) => format!("file {p}"),
        Some(CredentialRef::Ssm(n)) => format!("ssm {n}"),
    };
    println!("  credentials      {credentials}");
    let module_hosts: Vec<&str> = s.module_hosts.iter().map(UpstreamHost::as_str).collect();
    println!("  module hosts     {}", module_hosts.join(","));
    if let Some(c) = &s.connect {
        for (host, addrs) in &c.to {
            let addrs: Vec<String> = addrs.iter().map(ToString::to_string).collect();
            println!("  connect {host} to {}", addrs.join(","));
        }
    }
    println!(
        "  changed          {} by {}",
        when(Some(u.updated_at)),
        u.updated_by
    );
}

fn print_list(list: &UpstreamList) {
    if list.upstreams.is_empty() {
        eprintln!("no upstreams: the cache reads from no other registry");
        return;
    }
    println!(
        "{:<40}  {:<18}  {:<7}  {:>9}  CHANGED",
        "HOSTNAME", "SERVES", "MODE", "LISTS (s)"
    );
    for u in &list.upstreams {
        println!(
            "{:<40}  {:<18}  {:<7}  {:>9}  {}",
            u.hostname.as_str(),
            serves(&u.settings),
            mode(&u.settings),
            u.settings.metadata_ttl_secs,
            when(Some(u.updated_at))
        );
    }
}

pub async fn upstream(cmd: UpstreamCommand) -> Result<()> {
    match cmd {
        UpstreamCommand::Set(args) => {
            let host = UpstreamHost::parse(&args.host)?;
            let settings = args.settings()?;
            settings.validate(&host)?;
            let api = args.r#where.connect().await?;
            let set: SetUpstream = api
                .send(AdminRoute::SetUpstream { host }, Some(&settings))
                .await?;
            args.r#where.show(&set, |s| {
                let verb = if s.replaced.is_some() {
                    "changed"
                } else {
                    "added"
                };
                eprintln!(
                    "upstream {} {verb}: {}, {}",
                    s.upstream.hostname,
                    serves(&s.upstream.settings),
                    mode(&s.upstream.settings)
                );
            })
        }
        UpstreamCommand::Show(args) => {
            let host = UpstreamHost::parse(&args.host)?;
            let api = args.r#where.connect().await?;
            let record: UpstreamRecord = api
                .send(AdminRoute::ShowUpstream { host }, None::<&()>)
                .await?;
            args.r#where.show(&record, print_one)
        }
        UpstreamCommand::List(args) => {
            let api = args.r#where.connect().await?;
            let list: UpstreamList = api.send(AdminRoute::ListUpstreams, None::<&()>).await?;
            args.r#where.show(&list, print_list)
        }
        UpstreamCommand::Remove(args) => {
            let host = UpstreamHost::parse(&args.host)?;
            let api = args.r#where.connect().await?;
            let gone: RemovedUpstream = api
                .send(AdminRoute::RemoveUpstream { host }, None::<&()>)
                .await?;
            args.r#where.show(&gone, |g| {
                eprintln!(
                    "upstream {} removed; what was cached from it stays",
                    g.removed.hostname
                );
            })
        }
    }
}

#[derive(Subcommand)]
pub enum CacheCommand {
    /// What the cache holds: each provider and module, where it comes
    /// from, its cached versions (a provider's stored platforms and signer,
    /// a module's source and pinned commit).
    List(CacheListArgs),
    /// Fill the cache ahead of use (then seal the upstream for air-gapped
    /// use): the provider versions and platforms a lock file pins, or those
    /// named, and module versions, through a registry with a fill token.
    Warm(Box<super::warm::WarmArgs>),
}

#[derive(Args)]
pub struct CacheListArgs {
    /// Only what comes from this upstream.
    host: Option<String>,
    #[command(flatten)]
    r#where: Where,
}

fn print_cached(list: &CachedList) {
    if list.providers.is_empty() && list.modules.is_empty() {
        eprintln!("the cache holds nothing yet");
        return;
    }
    if !list.providers.is_empty() {
        println!(
            "{:<60}  {:<12}  {:<20}  STORED",
            "PROVIDER", "VERSION", "SIGNED BY"
        );
    }
    for p in &list.providers {
        let name = format!("{}/{}/{}", p.host, p.namespace, p.name);
        if p.versions.is_empty() {
            println!("{name:<60}  {:<12}", "(list only)");
        }
        for v in &p.versions {
            println!(
                "{name:<60}  {:<12}  {:<20}  {}",
                v.version,
                v.signed_by.as_deref().unwrap_or("unsigned"),
                v.stored.join(",")
            );
        }
    }
    if !list.modules.is_empty() {
        println!("{:<60}  {:<12}  FROM", "MODULE", "VERSION");
    }
    for m in &list.modules {
        let name = format!("{}/{}/{}/{}", m.host, m.namespace, m.name, m.system);
        if m.versions.is_empty() {
            println!("{name:<60}  {:<12}", "(list only)");
        }
        for v in &m.versions {
            let from = match (&v.commit, &v.passed_through) {
                (_, Some(why)) => format!("passed through ({why}): {}", v.source),
                (Some(commit), None) => format!("{} at {commit}", v.source),
                (None, None) => v.source.clone(),
            };
            println!("{name:<60}  {:<12}  {from}", v.version);
        }
    }
}

pub async fn cache(cmd: CacheCommand) -> Result<()> {
    match cmd {
        CacheCommand::List(args) => {
            let host = args.host.as_deref().map(UpstreamHost::parse).transpose()?;
            let api = args.r#where.connect().await?;
            let list: CachedList = api
                .send(AdminRoute::ListCached { host }, None::<&()>)
                .await?;
            args.r#where.show(&list, print_cached)
        }
        CacheCommand::Warm(args) => super::warm::warm(*args).await,
    }
}
