//! `tfreg usage NAMESPACE/NAME[/SYSTEM]`: who downloads which version of
//! a provider (two parts) or a module (three), through the admin API's
//! usage route (a registry's URL with an admin token of the namespace, or
//! the stores as the operator: [`crate::admin::Where`]). A table per
//! version (its state, downloads, last download, the last days' counts as
//! a sparkline, per platform for providers, and its consumers), or the
//! answer as JSON (`--json`). Answers: who still installs a deprecated or
//! yanked version (its state and consumers); which versions nobody has
//! installed for N days (`--unused-for N`).

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use clap::Args;
use http::Method;
use tfreg_admin::usage::{UsageAnswer, VersionState};
use tfreg_model::address::{ModuleName, ProviderName};
use tfreg_model::router::{AdminRoute, Route};
use tfreg_model::text::escaped;
use tfreg_model::usage::VersionUsage;
use tfreg_model::version::Version;

use crate::admin::{Where, when};
use crate::cli_error::Result;

const DAY: u64 = 86_400;

#[derive(Args)]
#[command(after_help = "Examples:
  tfreg usage acme/vpc/aws                                      # a module's versions and consumers, on ./tfreg-data; --registry URL for another registry
  tfreg usage acme/null --version 1.0.0                         # one provider version, on ./tfreg-data
  tfreg usage acme/vpc/aws --unused-for 90                      # versions nobody installed for 90 days
  tfreg usage acme/vpc/aws --json                               # the usage report")]
pub struct UsageArgs {
    /// NAMESPACE/TYPE (a provider) or NAMESPACE/NAME/SYSTEM (a module).
    address: String,
    /// Only this version.
    #[arg(long)]
    version: Option<String>,
    /// The origin registry of a mirror-imported or cached package (default:
    /// this registry's own), e.g. `--host registry.terraform.io`.
    #[arg(long)]
    host: Option<String>,
    /// How many days the table's per-day column shows.
    #[arg(long, default_value_t = 14, value_parser = clap::value_parser!(u64).range(1..=90))]
    days: u64,
    /// List only the versions nobody downloaded in the last N days
    /// (never downloaded included).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=3650))]
    unused_for: Option<u64>,
    #[command(flatten)]
    r#where: Where,
}

/// The usage route of an address: two parts a provider, three a module.
fn route_of(address: &str) -> Result<AdminRoute> {
    let parts: Vec<&str> = address.split('/').collect();
    Ok(match parts.as_slice() {
        [ns, ty] => AdminRoute::ProviderUsage {
            provider: ProviderName::parse(ns, ty)?,
        },
        [ns, name, system] => AdminRoute::ModuleUsage {
            module: ModuleName::parse(ns, name, system)?,
        },
        _ => {
            return Err(format!(
                "{:?}: use NAMESPACE/TYPE for a provider or NAMESPACE/NAME/SYSTEM for a module",
                escaped(address)
            )
            .into());
        }
    })
}

pub async fn run(args: UsageArgs) -> Result<()> {
    let route = route_of(&args.address)?;
    let version = args.version.as_deref().map(Version::parse).transpose()?;
    if args.host.is_none() && args.r#where.hostname_unknown() {
        return Err("on the stores directly, pass --hostname: the registry's hostname as its addresses spell it (`tfreg serve --hostname`, the stack's TFREG_HOSTNAME), which its downloads are counted under".into());
    }
    let mut query = url::form_urlencoded::Serializer::new(String::new());
    if let Some(v) = &version {
        query.append_pair("version", &v.to_string());
    }
    if let Some(h) = &args.host {
        query.append_pair("host", h);
    }
    let query = query.finish();
    let mut path = Route::Admin(route).path();
    if !query.is_empty() {
        path = format!("{path}?{query}");
    }
    let api = args.r#where.connect().await?;
    let mut answer: UsageAnswer = api.call(Method::GET, &path, None).await?;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    if let Some(n) = args.unused_for {
        let since = now.saturating_sub(n * DAY);
        answer
            .report
            .versions
            .retain(|v| v.last_download.is_none_or(|at| at < since));
    }
    args.r#where.show(&answer, |a| {
        print!("{}", table(a, now, args.days, args.unused_for))
    })
}

/// The last `days` days (oldest first) of `now`, as the report names them.
fn day_names(now: u64, days: u64) -> Vec<String> {
    (0..days)
        .rev()
        .map(|i| tfreg_model::date::ymd(now.saturating_sub(i * DAY)))
        .collect()
}

/// Counts as a sparkline, one character a day: ` ` none, `▁`..`█` scaled
/// to the busiest day.
pub fn sparkline(counts: &[u64]) -> String {
    const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    let top = counts.iter().copied().max().unwrap_or(0);
    counts
        .iter()
        .map(|&n| match n {
            0 => '·',
            n => BARS[((n * 8).div_ceil(top.max(1)) as usize).clamp(1, 8) - 1],
        })
        .collect()
}

/// A version's downloads on each of `days` (all platforms).
fn per_day(v: &VersionUsage, days: &[String]) -> Vec<u64> {
    let mut by_day: BTreeMap<&str, u64> = BTreeMap::new();
    for d in &v.days {
        *by_day.entry(d.day.as_str()).or_default() += d.downloads;
    }
    days.iter()
        .map(|d| by_day.get(d.as_str()).copied().unwrap_or(0))
        .collect()
}

/// A version's downloads per platform over the days kept, most first.
fn per_platform(v: &VersionUsage) -> Vec<(String, u64)> {
    let mut by: BTreeMap<String, u64> = BTreeMap::new();
    for d in &v.days {
        if let Some(p) = &d.platform {
            *by.entry(p.clone()).or_default() += d.downloads;
        }
    }
    let mut by: Vec<_> = by.into_iter().collect();
    by.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    by
}

/// The table `tfreg usage` prints.
pub fn table(answer: &UsageAnswer, now: u64, days: u64, unused_for: Option<u64>) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let days = day_names(now, days);
    let _ = writeln!(out, "{}", escaped(&answer.report.package.address()));
    if answer.report.versions.is_empty() {
        let _ = match unused_for {
            Some(n) => writeln!(out, "every version was downloaded in the last {n} days"),
            None => writeln!(out, "no version"),
        };
        return out;
    }
    let spark_title = format!("LAST {} DAYS", days.len());
    let _ = writeln!(
        out,
        "{:<20}  {:<18}  {:>9}  {:<20}  {spark_title}",
        "VERSION", "STATE", "DOWNLOADS", "LAST DOWNLOAD"
    );
    for v in &answer.report.versions {
        let state = answer
            .lifecycle
            .get(&v.version)
            .map_or("-", VersionState::describe);
        let _ = writeln!(
            out,
            "{:<20}  {:<18}  {:>9}  {:<20}  {}",
            escaped(&v.version),
            state,
            v.downloads,
            when(v.last_download),
            sparkline(&per_day(v, &days))
        );
        let platforms = per_platform(v);
        if !platforms.is_empty() {
            let shown: Vec<String> = platforms
                .iter()
                .map(|(p, n)| format!("{} {n}", escaped(p)))
                .collect();
            let _ = writeln!(out, "    platforms: {}", shown.join(", "));
        }
        if let Some(message) = answer
            .lifecycle
            .get(&v.version)
            .and_then(|s| s.deprecated.as_deref())
        {
            let _ = writeln!(out, "    deprecated: {}", escaped(message));
        }
        if !v.consumers.is_empty() {
            let _ = writeln!(
                out,
                "    {:<44}  {:<6}  {:>9}  {:<20}  LAST SEEN",
                "CONSUMER", "KIND", "DOWNLOADS", "FIRST SEEN"
            );
            for c in &v.consumers {
                let kind = serde_json::to_value(c.consumer.kind)
                    .ok()
                    .and_then(|k| k.as_str().map(str::to_string))
                    .unwrap_or_default();
                let _ = writeln!(
                    out,
                    "    {:<44}  {:<6}  {:>9}  {:<20}  {}",
                    escaped(&c.consumer.label),
                    kind,
                    c.downloads,
                    when(Some(c.first_seen)),
                    when(Some(c.last_seen))
                );
            }
        }
    }
    out
}

#[cfg(test)]
mod tests;
