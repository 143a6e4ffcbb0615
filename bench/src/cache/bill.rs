//! What a cache hit and a miss would cost on AWS, from what they were
//! counted asking ([`super::count`]), and the section's Markdown.
//!
//! In AWS a hit is one invocation of the read (or blob) function; a miss is
//! that invocation, which starts the fill with an asynchronous `Invoke` of
//! the fill function and polls the store until the result is there, and the
//! fill function's invocation, which fetches from the origin, writes the
//! items (lease, release, list) and PUTs archives to S3.

use std::collections::BTreeMap;

/// template.yaml's default `FillMemorySize` (a test keeps them equal).
const FILL_MEMORY_MB: f64 = 1024.0;

use super::count::{Counted, Row};
use crate::cost::{self, Usage};
use crate::e2e::{COUNT, Fixture, LAMBDA_PLATFORM_LINE_BYTES};

/// The stated inputs besides the counts.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct Inputs {
    /// Memory of the read and blob functions (template.yaml
    /// `ReadMemorySize`).
    pub(crate) memory_mb: f64,
    /// Memory of the fill function (template.yaml `FillMemorySize`).
    pub(crate) fill_memory_mb: f64,
    /// Added to the measured time per DynamoDB request (a round trip in the region).
    pub(crate) ms_per_store_request: f64,
    /// Added per S3 PUT, and its bytes at `put_mb_per_s`.
    pub(crate) ms_per_put: f64,
    pub(crate) put_mb_per_s: f64,
    /// Log bytes per read invocation: this run's request lines and Lambda's own.
    pub(crate) read_log_bytes: f64,
    /// Log bytes per fill invocation: this run's fill lines and Lambda's own.
    pub(crate) fill_log_bytes: f64,
}

impl Inputs {
    pub(crate) fn new(counted: &Counted, warm: &crate::e2e::Counted, fill_lines: u64) -> Inputs {
        let lines: u64 = warm.0.values().sum();
        let fills: u64 = counted.misses.values().map(|r| r.fills).sum();
        Inputs {
            memory_mb: 256.0,
            fill_memory_mb: FILL_MEMORY_MB,
            ms_per_store_request: 5.0,
            ms_per_put: 20.0,
            put_mb_per_s: 100.0,
            read_log_bytes: (warm.1 as f64 / lines.max(1) as f64 + LAMBDA_PLATFORM_LINE_BYTES)
                .round(),
            fill_log_bytes: (fill_lines as f64 / fills.max(1) as f64 + LAMBDA_PLATFORM_LINE_BYTES)
                .round(),
        }
    }

    fn gb_seconds(&self, ms: f64) -> f64 {
        ms / 1000.0 * self.memory_mb / 1024.0
    }

    fn fill_gb_seconds(&self, ms: f64) -> f64 {
        ms / 1000.0 * self.fill_memory_mb / 1024.0
    }

    /// What storing in S3 adds to a fill, ms.
    fn put_ms(&self, row: &Row) -> f64 {
        row.blob_puts as f64 * self.ms_per_put
            + row.blob_put_bytes as f64 / (self.put_mb_per_s * 1e6) * 1000.0
    }

    /// A hit: the function's invocations, billed for the measured time and
    /// a round trip per store request, rounded up to the millisecond.
    pub(crate) fn hit(&self, row: &Row) -> Usage {
        let n = row.requests.max(1) as f64;
        let billed =
            (row.wall_ms / n + self.ms_per_store_request * row.read.requests() as f64 / n).ceil();
        Usage {
            api_requests: n,
            invocations: n,
            gb_seconds: n * self.gb_seconds(billed),
            read_units: row.read.read_units,
            write_units: row.read.write_units as f64,
            s3_gets: if row.blobs > 0 { row.steps as f64 } else { 0.0 },
            s3_puts: 0.0,
            log_bytes: n * self.read_log_bytes,
        }
    }

    /// A miss: the hit's lines, the waiting function billed for the fill
    /// too, and the fill function's invocations, store requests and PUTs.
    pub(crate) fn miss(&self, row: &Row) -> Usage {
        let n = row.requests.max(1) as f64;
        let fill_extra = self.ms_per_store_request * row.fill.requests() as f64 + self.put_ms(row);
        let read_billed = ((row.wall_ms + fill_extra) / n
            + self.ms_per_store_request * row.read.requests() as f64 / n)
            .ceil();
        let fills = row.fills as f64;
        let fill_billed = if row.fills > 0 {
            ((row.fill_ms + fill_extra) / fills).ceil() * fills
        } else {
            0.0
        };
        Usage {
            api_requests: n,
            invocations: n + fills,
            gb_seconds: n * self.gb_seconds(read_billed) + self.fill_gb_seconds(fill_billed),
            read_units: row.read.read_units + row.fill.read_units,
            write_units: (row.read.write_units + row.fill.write_units) as f64,
            s3_gets: if row.blobs > 0 { row.steps as f64 } else { 0.0 },
            s3_puts: row.blob_puts as f64,
            log_bytes: n * self.read_log_bytes + fills * self.fill_log_bytes,
        }
    }
}

/// USD per 1,000 of each kind of request, hit and miss; per 1,000 inits.
#[derive(Debug, serde::Serialize)]
pub(crate) struct Costs {
    /// Kind → (per 1,000 hits, per 1,000 misses).
    pub(crate) per_request: BTreeMap<String, (f64, f64)>,
    /// The mean request of an init: per 1,000 hits, per 1,000 misses.
    pub(crate) mean_request: (f64, f64),
    pub(crate) warm_init: Vec<cost::Line>,
    pub(crate) cold_init: Vec<cost::Line>,
}

fn sum(usages: impl Iterator<Item = Usage>) -> Usage {
    usages.fold(Usage::default(), |a, u| Usage {
        api_requests: a.api_requests + u.api_requests,
        invocations: a.invocations + u.invocations,
        gb_seconds: a.gb_seconds + u.gb_seconds,
        read_units: a.read_units + u.read_units,
        write_units: a.write_units + u.write_units,
        s3_gets: a.s3_gets + u.s3_gets,
        s3_puts: a.s3_puts + u.s3_puts,
        log_bytes: a.log_bytes + u.log_bytes,
    })
}

impl Costs {
    pub(crate) fn of(counted: &Counted, inputs: &Inputs) -> Costs {
        let per_1000 = |usage: &Usage, steps: u64| {
            cost::total(&cost::bill(usage, 1000.0 / steps.max(1) as f64))
        };
        let per_request = counted
            .hits
            .iter()
            .filter_map(|(kind, hit)| {
                let miss = counted.misses.get(kind)?;
                Some((
                    kind.clone(),
                    (
                        per_1000(&inputs.hit(hit), hit.steps),
                        per_1000(&inputs.miss(miss), miss.steps),
                    ),
                ))
            })
            .collect();
        let warm = sum(counted.hits.values().map(|r| inputs.hit(r)));
        let cold = sum(counted.misses.values().map(|r| inputs.miss(r)));
        let steps: u64 = counted.hits.values().map(|r| r.steps).sum();
        Costs {
            per_request,
            mean_request: (per_1000(&warm, steps), per_1000(&cold, steps)),
            warm_init: cost::bill(&warm, 1000.0),
            cold_init: cost::bill(&cold, 1000.0),
        }
    }
}

/// Everything the section shows.
pub(crate) struct Report<'a> {
    pub(crate) terraform_version: &'a str,
    pub(crate) rounds: usize,
    pub(crate) times: &'a BTreeMap<&'a str, Vec<f64>>,
    pub(crate) medians: &'a BTreeMap<&'a str, f64>,
    pub(crate) lines: &'a BTreeMap<&'a str, crate::e2e::Counted>,
    pub(crate) origin_during: &'a BTreeMap<&'a str, BTreeMap<String, u64>>,
    pub(crate) counted: &'a Counted,
    pub(crate) inputs: &'a Inputs,
    pub(crate) costs: &'a Costs,
    pub(crate) fixture: &'a Fixture,
}

fn seconds(values: &[f64]) -> String {
    values
        .iter()
        .map(|s| format!("{s:.2}"))
        .collect::<Vec<_>>()
        .join(", ")
}

pub(crate) fn markdown(r: &Report) -> String {
    let (direct, warm, cold) = (r.medians["direct"], r.medians["warm"], r.medians["cold"]);
    let mut md = format!(
        "`terraform init` (Terraform {}) of the e2e configuration ({COUNT} providers of {:.1} MB zipped, {COUNT} modules), from nothing each time (no `.terraform`, no lock file), its sources as users write them (`{}/bench/...`). The origin is a `tfreg serve` of its own (public, SQLite) publishing them under that foreign name on 443 of its own loopback address; the cache is a second `tfreg serve` (private) with it as its upstream (`tfreg upstream set --providers --modules`, `--connect-to`, `--ca-file`), reached through a `host` block pointing `providers.v1` and `modules.v1` at `/v1/cache/{}/...`, with a read token made with `--fill`. {} rounds: each starts a fresh cache and times its first init (every request a miss, filled from the origin), then the same init through it again (every request a hit) and straight from the origin, alternating which of those two goes first; medians.\n\n\
         | init | median | ratio to the origin | each round |\n|---|---:|---:|---|\n\
         | straight from the origin | {direct:.2} s | 1.00 | {} |\n\
         | through the cache, warm (all hits) | {warm:.2} s | {:.2} | {} |\n\
         | through the cache, cold (all misses, a fresh cache each round) | {cold:.2} s | {:.2} | {} |\n\n",
        r.terraform_version,
        r.fixture.provider_zip_bytes as f64 / 1e6,
        super::rig::ORIGIN_HOST,
        super::rig::ORIGIN_HOST,
        r.rounds,
        seconds(&r.times["direct"]),
        warm / direct,
        seconds(&r.times["warm"]),
        cold / direct,
        seconds(&r.times["cold"]),
    );
    md += "### What one init asks\n\nRequest lines of the first round's inits, by endpoint: of the registry Terraform talks to, and of the origin meanwhile (a warm init must not reach it).\n\n| endpoint | straight from the origin | through the cache, warm | cold: the cache | cold: the origin, for the fills |\n|---|---:|---:|---:|---:|\n";
    let mut endpoints: Vec<&String> = r.lines.values().flat_map(|c| c.0.keys()).collect();
    endpoints.extend(r.origin_during["cold"].keys());
    endpoints.sort();
    endpoints.dedup();
    let n = |name: &str, e: &String| r.lines[name].0.get(e).copied().unwrap_or(0);
    for e in endpoints {
        md += &format!(
            "| {e} | {} | {} | {} | {} |\n",
            n("direct", e),
            n("warm", e),
            n("cold", e),
            r.origin_during["cold"].get(e).copied().unwrap_or(0),
        );
    }
    let origin_in_warm: u64 = r.origin_during["warm"].values().sum();
    md += &format!("\nThe origin answered {origin_in_warm} requests during the warm init.\n\n");
    md += &hit_and_miss(r);
    md
}

fn hit_and_miss(r: &Report) -> String {
    let i = r.inputs;
    let blob_steps: u64 = r
        .counted
        .hits
        .values()
        .filter(|h| h.blobs > 0)
        .map(|h| h.steps)
        .sum();
    let api_steps = r.counted.hits.values().map(|h| h.steps).sum::<u64>() - blob_steps;
    let blob_lines = |name: &str| r.lines[name].0.get("blob").copied().unwrap_or(0);
    let mut md = format!(
        "### A hit and a miss, counted\n\nThe init's requests as the protocol makes them ({api_steps} API requests and {blob_steps} blob requests; the real init above made {} blob requests warm and {} cold: those it made more, not replayed here, are each one blob function invocation reading no store, as a blob hit below), made in-process (`app::handle`, as the handlers section does) against a registry caching the same origin: once from an empty cache (all misses), once more (all hits). Its item store is behind a counter twice over, one for the request's own function (read or blob) and one for the fills, as `CountingStore` counts (`GetItem` strongly consistent, 1 read unit per 4 KB; `Query` half that; a write 1 unit per KB of the item written or deleted); objects stored are counted at the blob store; fills run as `tfreg serve` runs them, each timed; the origin's requests are its request lines. Per request of each kind (the init asks each kind {COUNT} times):\n\n\
         | request | hit: store requests (read units) | miss: function's store requests (read units), polls included | fills | fill: reads / writes (write units) | objects stored | origin requests | miss: wall time | USD per 1,000 hits | USD per 1,000 misses |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        blob_lines("warm"),
        blob_lines("cold"),
    );
    let per = |v: f64, row: &Row| v / row.steps.max(1) as f64;
    for (kind, hit) in &r.counted.hits {
        let Some(miss) = r.counted.misses.get(kind) else {
            continue;
        };
        let (hit_usd, miss_usd) = r.costs.per_request[kind];
        md += &format!(
            "| {kind} | {:.1} ({:.1}) | {:.1} ({:.1}) | {:.1} | {:.1} / {:.1} ({:.1}) | {:.1} | {:.1} | {:.0} ms | {hit_usd:.5} | {miss_usd:.5} |\n",
            per(hit.read.requests() as f64, hit),
            per(hit.read.read_units, hit),
            per(miss.read.requests() as f64, miss),
            per(miss.read.read_units, miss),
            per(miss.fills as f64, miss),
            per((miss.fill.gets + miss.fill.queries) as f64, miss),
            per(miss.fill.writes as f64, miss),
            per(miss.fill.write_units as f64, miss),
            per(miss.blob_puts as f64, miss),
            per(miss.origin_requests as f64, miss),
            per(miss.wall_ms, miss),
        );
    }
    let (hit_mean, miss_mean) = r.costs.mean_request;
    md += &format!(
        "| **mean request of the init** | | | | | | | | **{hit_mean:.5}** | **{miss_mean:.5}** |\n\n"
    );
    let fills: Vec<String> = r
        .counted
        .fill_kinds
        .iter()
        .map(|(k, (n, ms))| format!("{k} {n}x, median {ms:.1} ms"))
        .collect();
    md += &format!(
        "Fills run: {}. The origin answered, during the misses: {}.\n\n",
        fills.join("; "),
        r.counted
            .origin_endpoints
            .iter()
            .map(|(e, n)| format!("{e} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    md += &format!(
        "### Cost of a hit and of a miss on AWS\n\nDeployed as template.yaml deploys the reads, with its fill function: a hit is one invocation of the read or blob function behind the HTTP API (a blob one redirects to a presigned S3 URL: one S3 GET); a miss is that invocation, which `Invoke`s the fill function asynchronously (one Lambda request, no API request) and polls the store until the result is there, plus the fill function's run: origin requests, store reads and writes, S3 PUTs. **Measured** here: every count above (requests, store requests and their units, polls, fills, objects stored, origin requests), the wall time of each request and of each fill in-process, the log bytes. **Assumed**: {} MB for the read and blob functions (template.yaml `ReadMemorySize`) and {} MB for the fill function (`FillMemorySize`); {} ms more per DynamoDB request (a round trip in the region; the count runs on SQLite); {} ms more per S3 PUT plus its bytes at {} MB/s; the origin as near as loopback (a real origin's network time adds to both the fill's and the waiting read's billed duration: a miss's duration lines grow with it, a hit's do not); the waiting read function billed for the whole fill; {} B of logs per read invocation and {} B per fill invocation (this run's lines plus Lambda's START/END/REPORT). Data transfer is left out: a hit and a miss send the client the same bytes (the archives' transfer out, USD {:.5} per 1,000 inits of this configuration, as in the e2e section), and what a fill fetches comes into AWS, which is free. Prices as the e2e section's, plus DynamoDB writes USD 0.625 per million units and S3 PUTs USD 0.005 per 1,000.\n\n",
        i.memory_mb,
        i.fill_memory_mb,
        i.ms_per_store_request,
        i.ms_per_put,
        i.put_mb_per_s,
        i.read_log_bytes,
        i.fill_log_bytes,
        r.fixture.archive_bytes() as f64 / (1024.0 * 1024.0 * 1024.0)
            * cost::price::TRANSFER_OUT_GB
            * 1000.0,
    );
    md += &format!(
        "Per 1,000 warm inits through the cache (all hits):\n\n{}\nPer 1,000 cold inits (all misses):\n\n{}\n",
        cost::table(&r.costs.warm_init, "USD per 1,000 inits"),
        cost::table(&r.costs.cold_init, "USD per 1,000 inits"),
    );
    let (warm, cold) = (
        cost::total(&r.costs.warm_init),
        cost::total(&r.costs.cold_init),
    );
    md += &format!(
        "A cold init costs {:.1}x a warm one, data transfer aside; it happens once per version and platform per cache (and a list again after `--metadata-ttl`), so at any reuse the bill is the hits'.\n",
        cold / warm.max(f64::MIN_POSITIVE)
    );
    md
}

#[cfg(test)]
mod tests {
    /// The fill function's memory is the template's default.
    #[test]
    fn fill_memory_is_the_template_default() {
        let template =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../template.yaml"))
                .unwrap();
        let block = template.split("\n  FillMemorySize:\n").nth(1).unwrap();
        let default = block
            .lines()
            .find_map(|l| l.trim().strip_prefix("Default: "))
            .unwrap();
        assert_eq!(default.parse::<f64>().unwrap(), super::FILL_MEMORY_MB);
    }
}
