//! `tfreg upstream set|show|list|remove` and `tfreg cache list|warm`: the registries the pull-through
//! cache reads from, through the admin API (a registry's URL, or the stores
//! as the operator: [`super::Where`]). `set` changes the settings its flags
//! name and keeps the others (`--reset`: the defaults for the others), and
//! says what changed.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgGroup, Args, Subcommand, ValueEnum};
use tfreg_model::cache::CachedList;
use tfreg_model::router::AdminRoute;
use tfreg_model::upstream::{
    CredentialRef, FillBy, KeyChange, Mode, Net, RemovedUpstream, Serves, SetUpstream, Unsigned,
    UpstreamHost, UpstreamList, UpstreamRecord, UpstreamSettings,
};

use super::{Where, WhereArgs, when};
use crate::cli_error::Result;

#[derive(Subcommand)]
pub enum UpstreamCommand {
    /// Configure a registry the cache reads from: add it, or change the
    /// settings given (the others stay; --reset for the defaults).
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
pub(crate) enum KeyChangeArg {
    Audit,
    Refuse,
}

#[derive(Clone, Copy, ValueEnum)]
enum UnsignedArg {
    Refuse,
    ChecksumsOnly,
}

/// `upstream set`: the flags given change those settings only; an upstream
/// that exists keeps the others (issue 35: the README's seal example had
/// dropped its connect settings and credentials). `--reset` starts from the
/// defaults instead.
#[derive(Args)]
#[command(group(ArgGroup::new("credentials").args(["credentials_env", "credentials_file", "no_credentials"])))]
pub struct SetArgs {
    /// Its hostname as clients write it (registry.terraform.io).
    host: String,
    /// Cache its providers (with --modules: both). Needed for a new
    /// upstream; given, it replaces what the upstream serves.
    #[arg(long)]
    providers: bool,
    /// Cache its modules.
    #[arg(long)]
    modules: bool,
    /// Start from the defaults: every setting not given here is reset.
    #[arg(long)]
    reset: bool,
    /// online fetches on a miss; sealed answers only from the cache
    /// (default online).
    #[arg(long, value_enum)]
    mode: Option<ModeArg>,
    /// How long a fetched version list is answered without asking again
    /// (1m to 7d; default 1h).
    #[arg(long, value_parser = seconds)]
    metadata_ttl: Option<u32>,
    /// How long the origin's 404 is remembered (at most 10m; default 1m).
    #[arg(long, value_parser = seconds)]
    negative_ttl: Option<u32>,
    /// A bearer token for its API, read by `tfreg serve` (or the fill
    /// function) from this variable: only the upstream's own is accepted,
    /// TFREG_UPSTREAM_CREDENTIAL_ and the host in capitals with `.` as `_`
    /// and `-` as `__` (TFREG_UPSTREAM_CREDENTIAL_APP_TERRAFORM_IO), so no
    /// other secret of the server, and no other upstream's, can be sent to it.
    #[arg(long, value_name = "NAME")]
    credentials_env: Option<String>,
    /// ... or from the upstream's own file (named as the host,
    /// `app.terraform.io`) of the directory `tfreg serve
    /// --upstream-credentials-dir` names.
    #[arg(long, value_name = "NAME")]
    credentials_file: Option<String>,
    /// Send no credentials any more.
    #[arg(long)]
    no_credentials: bool,
    /// Who may make the cache fetch from it (default marked).
    #[arg(long, value_enum)]
    fill_by: Option<FillByArg>,
    /// A release signed by a key not seen before for its provider (default audit).
    #[arg(long, value_enum)]
    on_key_change: Option<KeyChangeArg>,
    /// A release with no signing keys (checksums-only: OpenTofu's registry;
    /// default refuse).
    #[arg(long, value_enum)]
    unsigned: Option<UnsignedArg>,
    /// A host module sources may be fetched from (repeatable; replaces the
    /// list; default github.com).
    #[arg(long = "module-host", value_name = "HOST")]
    module_hosts: Vec<String>,
    /// Largest archive fetched, in bytes (default: the registry's limit).
    #[arg(long)]
    max_archive_bytes: Option<u64>,
    /// How long one archive or module fill may take (10s to 15m; default 10m).
    #[arg(long, value_parser = seconds)]
    fill_timeout: Option<u32>,
    /// Connect to HOST at ADDR instead of asking DNS (HOST=ADDR:PORT;
    /// repeatable; replaces the earlier ones): HOST is the upstream itself
    /// or one of its --module-host names, and may use ADDR though it is
    /// private or loopback. ADDR must be in a network the server allows
    /// (`tfreg serve --upstream-connect-allow`, the stack's
    /// UpstreamConnectAllow); for a registry inside your network, tests.
    #[arg(long = "connect-to", value_name = "HOST=ADDR", value_parser = connect_to)]
    connect_to: Vec<(String, SocketAddr)>,
    /// A network the upstream's own name may resolve into though it is
    /// special-purpose (private, loopback; repeatable; replaces the earlier
    /// ones); it must lie inside the networks the server allows, as for
    /// --connect-to. Module hosts are reached at public addresses or at
    /// their --connect-to addresses only.
    #[arg(long = "allow-net", value_name = "CIDR")]
    allow_nets: Vec<String>,
    /// PEM certificates to trust for it besides the system's.
    #[arg(long, value_name = "PEM")]
    ca_file: Option<PathBuf>,
    /// Drop every connect setting (--connect-to, --allow-net, --ca-file).
    #[arg(long, conflicts_with_all = ["connect_to", "allow_nets", "ca_file"])]
    no_connect: bool,
    #[command(flatten)]
    r#where: Where,
}

#[derive(Args)]
pub struct HostArgs {
    host: String,
    #[command(flatten)]
    r#where: Where,
}

/// The operator's allow-list from `tfreg serve`'s variables
/// (`TFREG_UPSTREAM_CONNECT_ALLOW`, `TFREG_UPSTREAM_CREDENTIALS_DIR`), for
/// the admin commands that work on the stores directly.
pub(crate) fn operator_policy_from_env() -> Result<tfreg_model::upstream::OperatorPolicy> {
    let nets = std::env::var(tfreg_model::upstream::CONNECT_ALLOW_ENV).unwrap_or_default();
    Ok(tfreg_model::upstream::OperatorPolicy {
        connect_allow: tfreg_model::upstream::OperatorPolicy::parse_nets(&nets)?,
        credentials_dir: std::env::var_os("TFREG_UPSTREAM_CREDENTIALS_DIR").map(PathBuf::from),
    })
}

fn seconds(text: &str) -> std::result::Result<u32, String> {
    let d: Duration = humantime::parse_duration(text).map_err(|e| e.to_string())?;
    u32::try_from(d.as_secs()).map_err(|_| format!("{text}: too long"))
}

/// `--connect-to HOST=ADDR` flags into `connect`.
pub(crate) fn add_connect_to(
    connect: &mut tfreg_model::upstream::Connect,
    given: &[(String, SocketAddr)],
) -> Result<()> {
    for (host, addr) in given {
        connect
            .to
            .entry(UpstreamHost::parse(host)?)
            .or_default()
            .push(*addr);
    }
    Ok(())
}

impl From<KeyChangeArg> for KeyChange {
    fn from(k: KeyChangeArg) -> Self {
        match k {
            KeyChangeArg::Audit => KeyChange::Audit,
            KeyChangeArg::Refuse => KeyChange::Refuse,
        }
    }
}

pub(crate) fn connect_to(text: &str) -> std::result::Result<(String, SocketAddr), String> {
    let (host, addr) = text
        .split_once('=')
        .ok_or_else(|| format!("{text:?} is not HOST=ADDR:PORT"))?;
    let addr = addr
        .parse()
        .map_err(|e| format!("{addr:?} is not an address and port: {e}"))?;
    Ok((host.to_string(), addr))
}

impl SetArgs {
    /// The settings to send: `current` (none for a new upstream, or with
    /// `--reset`) changed by the flags given.
    fn settings(&self, current: Option<UpstreamSettings>) -> Result<UpstreamSettings> {
        let given_serves = (self.providers || self.modules).then_some(Serves {
            providers: self.providers,
            modules: self.modules,
        });
        let current = if self.reset { None } else { current };
        let mut s = match (current, given_serves) {
            (Some(mut s), serves) => {
                if let Some(serves) = serves {
                    s.serves = serves;
                }
                s
            }
            (None, Some(serves)) => UpstreamSettings::new(serves),
            (None, None) => {
                return Err(
                    "a new upstream (or --reset) needs --providers and/or --modules".into(),
                );
            }
        };
        if let Some(mode) = self.mode {
            s.mode = match mode {
                ModeArg::Online => Mode::Online,
                ModeArg::Sealed => Mode::Sealed,
            };
        }
        if let Some(ttl) = self.metadata_ttl {
            s.metadata_ttl_secs = ttl;
        }
        if let Some(ttl) = self.negative_ttl {
            s.negative_ttl_secs = ttl;
        }
        if let Some(name) = &self.credentials_env {
            s.credentials = Some(CredentialRef::Env(name.clone()));
        }
        if let Some(name) = &self.credentials_file {
            s.credentials = Some(CredentialRef::File(name.clone()));
        }
        if self.no_credentials {
            s.credentials = None;
        }
        if let Some(fill_by) = self.fill_by {
            s.fill_by = match fill_by {
                FillByArg::Marked => FillBy::MarkedTokens,
                FillByArg::Any => FillBy::AnyToken,
            };
        }
        if let Some(k) = self.on_key_change {
            s.on_key_change = k.into();
        }
        if let Some(u) = self.unsigned {
            s.unsigned = match u {
                UnsignedArg::Refuse => Unsigned::Refuse,
                UnsignedArg::ChecksumsOnly => Unsigned::ChecksumsOnly,
            };
        }
        if !self.module_hosts.is_empty() {
            s.module_hosts = self
                .module_hosts
                .iter()
                .map(|h| UpstreamHost::parse(h))
                .collect::<std::result::Result<_, _>>()?;
        }
        if self.max_archive_bytes.is_some() {
            s.max_archive_bytes = self.max_archive_bytes;
        }
        if let Some(t) = self.fill_timeout {
            s.fill_timeout_secs = t;
        }
        if self.no_connect {
            s.connect = None;
        }
        if !self.connect_to.is_empty() || !self.allow_nets.is_empty() || self.ca_file.is_some() {
            let mut connect = s.connect.take().unwrap_or_default();
            if !self.connect_to.is_empty() {
                connect.to.clear();
                add_connect_to(&mut connect, &self.connect_to)?;
            }
            if !self.allow_nets.is_empty() {
                connect.allow_nets = self
                    .allow_nets
                    .iter()
                    .map(|n| Net::parse(n))
                    .collect::<std::result::Result<_, _>>()?;
            }
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

/// What differs between `old` and `new`, one `setting: was -> now` line
/// each (a CA bundle only as changed).
pub(crate) fn changes(old: &UpstreamSettings, new: &UpstreamSettings) -> Vec<String> {
    let as_map = |s: &UpstreamSettings| match serde_json::to_value(s) {
        Ok(serde_json::Value::Object(map)) => map,
        _ => serde_json::Map::new(),
    };
    let flat = |map: serde_json::Map<String, serde_json::Value>| {
        let mut out = std::collections::BTreeMap::new();
        for (k, v) in map {
            match (k.as_str(), v) {
                ("connect", serde_json::Value::Object(c)) => {
                    for (ck, cv) in c {
                        out.insert(format!("connect.{ck}"), cv);
                    }
                }
                (_, v) => {
                    out.insert(k, v);
                }
            }
        }
        out
    };
    let (old, new) = (flat(as_map(old)), flat(as_map(new)));
    let shown = |k: &str, v: Option<&serde_json::Value>| match v {
        None => "(none)".to_string(),
        Some(_) if k == "connect.ca_pem" => "(a CA bundle)".to_string(),
        Some(v) => v.to_string(),
    };
    let keys: std::collections::BTreeSet<&String> = old.keys().chain(new.keys()).collect();
    keys.into_iter()
        .filter(|k| old.get(*k) != new.get(*k))
        .map(|k| {
            let (was, now) = (old.get(k), new.get(k));
            if k == "connect.ca_pem" && was.is_some() && now.is_some() {
                return format!("{k}: another CA bundle");
            }
            format!("{k}: {} -> {}", shown(k, was), shown(k, now))
        })
        .collect()
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
            let api = args.r#where.connect().await?;
            let list: UpstreamList = api.send(AdminRoute::ListUpstreams, None::<&()>).await?;
            let current = list
                .upstreams
                .into_iter()
                .find(|u| u.hostname == host)
                .map(|u| u.settings);
            let settings = args.settings(current)?;
            settings.validate(&host)?;
            let set: SetUpstream = api
                .send(AdminRoute::SetUpstream { host }, Some(&settings))
                .await?;
            args.r#where.show(&set, |s| match &s.replaced {
                None => eprintln!(
                    "upstream {} added: {}, {}",
                    s.upstream.hostname,
                    serves(&s.upstream.settings),
                    mode(&s.upstream.settings)
                ),
                Some(old) => {
                    let changed = changes(old, &s.upstream.settings);
                    if changed.is_empty() {
                        eprintln!("upstream {}: nothing changed", s.upstream.hostname);
                    } else {
                        eprintln!("upstream {} changed:", s.upstream.hostname);
                        for line in changed {
                            eprintln!("  {line}");
                        }
                    }
                }
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

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        set: SetArgs,
    }

    fn args(argv: &[&str]) -> SetArgs {
        let mut all = vec!["tfreg", "registry.example.test"];
        all.extend(argv);
        Cli::try_parse_from(all).unwrap().set
    }

    fn configured() -> UpstreamSettings {
        args(&[
            "--providers",
            "--modules",
            "--credentials-env",
            "TFREG_UPSTREAM_CREDENTIAL_REGISTRY_EXAMPLE_TEST",
            "--module-host",
            "git.example.test",
            "--connect-to",
            "registry.example.test=127.0.0.78:443",
            "--allow-net",
            "10.1.0.0/16",
        ])
        .settings(None)
        .unwrap()
    }

    /// Issue 35: sealing with the README's command dropped every other
    /// setting; a flag given now changes that setting alone.
    #[test]
    fn set_changes_only_what_it_is_given_and_says_so() {
        let before = configured();
        let sealed = args(&["--mode", "sealed"])
            .settings(Some(before.clone()))
            .unwrap();
        let mut expected = before.clone();
        expected.mode = Mode::Sealed;
        assert_eq!(sealed, expected);
        assert_eq!(
            changes(&before, &sealed),
            ["mode: \"online\" -> \"sealed\""]
        );
        // The README's old form still works, and keeps the rest too.
        let again = args(&["--providers", "--modules", "--mode", "sealed"])
            .settings(Some(before.clone()))
            .unwrap();
        assert_eq!(again, expected);
        // Replacing one connect part keeps the others.
        let moved = args(&["--connect-to", "registry.example.test=127.0.0.79:443"])
            .settings(Some(before.clone()))
            .unwrap();
        let connect = moved.connect.as_ref().unwrap();
        assert_eq!(
            connect.allow_nets,
            before.connect.as_ref().unwrap().allow_nets
        );
        assert_eq!(
            changes(&before, &moved),
            [
                "connect.to: {\"registry.example.test\":[\"127.0.0.78:443\"]} -> {\"registry.example.test\":[\"127.0.0.79:443\"]}"
            ]
        );
        // Dropping and resetting.
        let dropped = args(&["--no-connect", "--no-credentials"])
            .settings(Some(before.clone()))
            .unwrap();
        assert_eq!((dropped.connect, dropped.credentials), (None, None));
        let reset = args(&["--reset", "--providers"])
            .settings(Some(before.clone()))
            .unwrap();
        assert_eq!(
            reset,
            UpstreamSettings::new(Serves {
                providers: true,
                modules: false
            })
        );
        assert!(
            args(&[]).settings(None).is_err(),
            "a new one says what it serves"
        );
    }
}
