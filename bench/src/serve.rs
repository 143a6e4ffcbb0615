//! `tfreg serve` beside nginx serving the very same response bytes as static
//! files over HTTPS with the same certificate: for each read endpoint and the
//! archive GET and HEAD, h2load alternates between the two for several
//! rounds; medians of req/s and p99, and their ratios. Also the CPU time per
//! request of each server (from `/proc/<pid>/stat`), tfreg's threads under
//! load, and the bytes each writes to its log per request.
//!
//! The registry is private (`--private`): every request carries a read token,
//! as in a deployed stack; nginx ignores it.

mod fixture;
mod h2load;
mod nginx;
mod process;

use std::path::PathBuf;

use serde::Serialize;

use crate::report::Section;
use crate::tools::median;
use process::Usage;

pub use crate::tools::Error;

#[derive(clap::Args, Clone)]
pub struct Opts {
    /// The `tfreg` binary (release build); default: the one beside this benchmark.
    #[arg(long)]
    pub tfreg: Option<PathBuf>,
    /// Requests per h2load run: at 40,000 a second, 2.5 s of load, so that
    /// connecting (32 TLS handshakes) and the scheduler's moods weigh little;
    /// 20,000 gave ratios that moved by 0.2 between runs.
    #[arg(long, default_value_t = 100_000)]
    pub requests: usize,
    /// Concurrent clients (HTTP/2 connections, one request in flight each).
    #[arg(long, default_value_t = 32)]
    pub clients: usize,
    /// Runs per endpoint and server, alternating between the two.
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// Only these rows (`discovery`, `archive`, ...; HEAD and GET of the
    /// archive are both `archive`), e.g. to profile one; a section measured so
    /// is not the whole table and is not saved.
    #[arg(long, value_delimiter = ',')]
    pub only: Vec<String>,
}

impl Default for Opts {
    fn default() -> Self {
        Self {
            tfreg: None,
            requests: 100_000,
            clients: 32,
            rounds: 3,
            only: Vec::new(),
        }
    }
}

/// One endpoint's figures: per server, the median over rounds.
#[derive(Debug, Serialize)]
struct Row {
    endpoint: String,
    method: String,
    tfreg: Figures,
    nginx: Figures,
}

#[derive(Debug, Serialize, Default)]
struct Figures {
    req_per_s: f64,
    p99_ms: f64,
    cpu_us_per_req: f64,
    log_bytes_per_req: f64,
    max_threads: usize,
}

impl Figures {
    fn of(runs: &[(h2load::Outcome, Usage)]) -> Self {
        let m = |f: &dyn Fn(&(h2load::Outcome, Usage)) -> f64| {
            median(&runs.iter().map(f).collect::<Vec<_>>())
        };
        Figures {
            req_per_s: m(&|(o, _)| o.req_per_s),
            p99_ms: m(&|(o, _)| o.p99_ms),
            cpu_us_per_req: m(&|(o, u)| u.cpu_us / o.requests as f64),
            log_bytes_per_req: m(&|(o, u)| u.log_bytes as f64 / o.requests as f64),
            max_threads: runs.iter().map(|(_, u)| u.max_threads).max().unwrap_or(0),
        }
    }
}

pub fn run(opts: &Opts) -> Result<Section, Error> {
    let tfreg = match &opts.tfreg {
        Some(p) => p.clone(),
        None => std::env::current_exe()?.with_file_name("tfreg"),
    };
    let tmp = tempfile::tempdir()?;
    let server = fixture::Registry::start(&tfreg, tmp.path())?;
    let published = fixture::publish(&server, tmp.path())?;
    let mut targets = fixture::targets(&server, &published)?;
    if !opts.only.is_empty() {
        targets.retain(|t| opts.only.iter().any(|name| name == t.name));
        if targets.is_empty() {
            return Err(format!("--only {:?} names no row", opts.only).into());
        }
    }
    let web = nginx::Nginx::start(tmp.path(), &server, &targets)?;
    let load = |url_of: &dyn Fn(&fixture::Target) -> String,
                target: &fixture::Target,
                requests: usize,
                watched: &process::Watched| {
        let run = h2load::Run {
            url: url_of(target),
            method: target.method,
            token: &server.read_token,
            requests,
            clients: opts.clients,
            log: tmp.path().join("h2load.log"),
        };
        watched.measure(|| run.go())
    };
    let tfreg_url = |t: &fixture::Target| server.url(&t.path_and_query);
    let nginx_url = |t: &fixture::Target| web.url(&t.path_and_query);
    let tfreg_proc = process::Watched::new(server.pid(), server.log.clone());
    let nginx_proc = process::Watched::new(web.pid(), web.access_log.clone());
    // Warm both up (connections, caches, lazy start-up) before measuring.
    for t in &targets {
        load(&tfreg_url, t, opts.requests / 10, &tfreg_proc)?;
        load(&nginx_url, t, opts.requests / 10, &nginx_proc)?;
    }
    let mut rows = Vec::new();
    for t in &targets {
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        for _ in 0..opts.rounds {
            ours.push(load(&tfreg_url, t, opts.requests, &tfreg_proc)?);
            theirs.push(load(&nginx_url, t, opts.requests, &nginx_proc)?);
        }
        let row = Row {
            endpoint: t.name.to_string(),
            method: t.method.to_string(),
            tfreg: Figures::of(&ours),
            nginx: Figures::of(&theirs),
        };
        eprintln!(
            "serve: {} {}: tfreg {:.0} req/s p99 {:.2} ms {:.1} µs CPU, nginx {:.0} req/s p99 {:.2} ms {:.1} µs CPU",
            row.method,
            row.endpoint,
            row.tfreg.req_per_s,
            row.tfreg.p99_ms,
            row.tfreg.cpu_us_per_req,
            row.nginx.req_per_s,
            row.nginx.p99_ms,
            row.nginx.cpu_us_per_req,
        );
        rows.push(row);
    }
    Ok(section(opts, &rows))
}

fn section(opts: &Opts, rows: &[Row]) -> Section {
    let mut md = format!(
        "`tfreg serve` (release build, `--private`, SQLite store) beside nginx serving the same response bytes as static files, both over HTTPS (HTTP/2) with the same certificate on 127.0.0.1. h2load: {} requests over {} connections per run, each request carrying a read token; {} rounds alternating tfreg / nginx per endpoint, medians. CPU is the server's user+system time over the run (nginx: master and workers), per request. Log is the bytes each server wrote to its log per request (tfreg: its request line on stderr at `info`; nginx: its default access log).\n\n",
        opts.requests, opts.clients, opts.rounds
    );
    md += "| endpoint | tfreg req/s | nginx req/s | ratio | tfreg p99 ms | nginx p99 ms | p99 ratio | tfreg CPU µs/req | nginx CPU µs/req | tfreg threads | tfreg log B/req | nginx log B/req |\n";
    md += "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
    for r in rows {
        md += &format!(
            "| {} {} | {:.0} | {:.0} | {:.2} | {:.2} | {:.2} | {:.2} | {:.1} | {:.1} | {} | {:.0} | {:.0} |\n",
            r.method,
            r.endpoint,
            r.tfreg.req_per_s,
            r.nginx.req_per_s,
            r.tfreg.req_per_s / r.nginx.req_per_s,
            r.tfreg.p99_ms,
            r.nginx.p99_ms,
            r.tfreg.p99_ms / r.nginx.p99_ms,
            r.tfreg.cpu_us_per_req,
            r.nginx.cpu_us_per_req,
            r.tfreg.max_threads,
            r.tfreg.log_bytes_per_req,
            r.nginx.log_bytes_per_req,
        );
    }
    md += "\nWhat each row asks of nginx: a static file, except module-download, which nginx answers from its configuration (`add_header X-Terraform-Get` and `return 204`: no file opened), so that row is nginx at its cheapest, and oci-blob, a `return 307` to the archive's URL likewise. The oci rows are OpenTofu's requests over OCI (issue 40): the provider's tag list, the newest version's image index, its linux_amd64 manifest by digest, that manifest's zip layer (tfreg redirects it to the archive, as the download does), and the module's `latest` manifest; tfreg makes each manifest from the release on every request (nothing stored but the module's zip). The archive is a zip of a few hundred bytes: nginx opens, sizes, reads and closes it for every request; tfreg reads it for the first request of each second (a HEAD reads it too) and answers the others from memory, as it does every JSON row, until the second ends or the store's change counter moves. Discovery is public and reads no store in tfreg: its row is the cost of tfreg's HTTP/2, TLS, routing and request line alone, the floor under every other row (which add the token check).\n";
    Section {
        name: "serve".into(),
        title: "tfreg serve beside nginx, same bytes".into(),
        markdown: md,
        figures: serde_json::json!({
            "requests": opts.requests,
            "clients": opts.clients,
            "rounds": opts.rounds,
            "rows": rows,
        }),
    }
}
