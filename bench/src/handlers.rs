//! Warm per-request cost of each read endpoint, in-process: the whole
//! `app::handle` (routing, the read token checked, the handler, the request
//! line formatted) with criterion, over the embedded store (SQLite and files)
//! and over the AWS stores on the emulators (DynamoDB and S3 over loopback
//! HTTP), beside discovery (the same path with no store read) as the
//! baseline measured in the same run. Before timing, each endpoint's storage
//! requests are counted through [`CountingStore`], not assumed.

use std::path::Path;
use std::time::Duration;

use criterion::Criterion;
use serde::{Deserialize, Serialize};
use tfreg_model::address::{Hostname, ModuleName, ProviderName};
use tfreg_model::token::Scope;
use tfreg_store::catalog::Origin;
use tfreg_testkit::counting::Counts;
use tfreg_testkit::{TestRegistry, TestSigner, scale};

use crate::report::Section;
use crate::tools::Error;

const NS: &str = "bench";
const MIRRORED: &str = "origin.example.com";
/// Versions of the provider and the module: a mature provider's history.
const VERSIONS: usize = 200;
/// Platforms each provider version is built for.
const PLATFORMS: usize = 12;

/// What criterion measured for one endpoint on one backend.
#[derive(Debug, Serialize, Deserialize)]
struct Row {
    backend: String,
    endpoint: String,
    path: String,
    status: u16,
    /// Criterion's median, microseconds a request.
    median_us: f64,
    /// Storage requests one request made, counted.
    gets: u64,
    queries: u64,
    writes: u64,
    read_bytes: u64,
    response_bytes: usize,
}

/// The read endpoints and their paths (names as the router's `Endpoint`s).
fn endpoints(host: &Hostname) -> Vec<(&'static str, String)> {
    vec![
        ("discovery", "/.well-known/terraform.json".to_string()),
        (
            "provider-versions",
            format!("/v1/providers/{NS}/demo/versions"),
        ),
        (
            "provider-download",
            format!("/v1/providers/{NS}/demo/1.0.0/download/linux/amd64"),
        ),
        (
            "module-versions",
            format!("/v1/modules/{NS}/app/aws/versions"),
        ),
        (
            "module-download",
            format!("/v1/modules/{NS}/app/aws/1.0.0/download"),
        ),
        (
            "mirror-index (own)",
            format!("/v1/mirror/{host}/{NS}/demo/index.json"),
        ),
        (
            "mirror-version (own)",
            format!("/v1/mirror/{host}/{NS}/demo/1.0.0.json"),
        ),
        (
            "mirror-index (mirrored)",
            format!("/v1/mirror/{MIRRORED}/{NS}/mirrored/index.json"),
        ),
    ]
}

/// A private registry on `backend` with the fixture stored, and a read token;
/// also the registry it was made from, which owns the embedded store's
/// directory and must outlive it (dropped, it deletes the database file: the
/// read pool cannot open it and every write fails to make its journal).
async fn registry(backend: &str) -> Result<(TestRegistry, TestRegistry, String), Error> {
    let base = match backend {
        "embedded" => TestRegistry::embedded().await,
        _ => TestRegistry::aws().await,
    };
    let r = base.reconfigure(|mut reg| {
        reg.config.anonymous_reads = false;
        reg
    });
    let items = r.registry.items.clone();
    let signer = TestSigner::rsa();
    let versions = scale::versions(VERSIONS);
    let platforms = scale::platforms(PLATFORMS);
    let demo = ProviderName::parse(NS, "demo")?;
    let mirrored = ProviderName::parse(NS, "mirrored")?;
    scale::seed_provider(
        items.as_ref(),
        &Origin::Registry,
        &demo,
        &versions,
        &platforms,
        signer.public_armor,
    )
    .await?;
    scale::seed_provider(
        items.as_ref(),
        &Origin::Mirror(Hostname::parse(MIRRORED)?),
        &mirrored,
        &versions,
        &platforms,
        signer.public_armor,
    )
    .await?;
    scale::seed_module(
        items.as_ref(),
        &ModuleName::parse(NS, "app", "aws")?,
        &versions,
    )
    .await?;
    let token = r.token(Scope::Read, None).await;
    Ok((base, r, token))
}

pub fn run(out: &Path) -> Result<Section, Error> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    // The request line is part of the cost: format it as `tfreg serve` does, into nothing.
    let _log = tracing::subscriber::set_default(
        tracing_subscriber::fmt()
            .with_env_filter("info")
            .with_writer(std::io::sink)
            .finish(),
    );
    let criterion_dir = out.join("criterion");
    let mut criterion = Criterion::default()
        .output_directory(&criterion_dir)
        .without_plots()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(30);
    let mut rows = Vec::new();
    for backend in ["embedded", "aws"] {
        let (_base, r, token) = runtime.block_on(registry(backend))?;
        let (counting, counted) = r.counted();
        let mut group = criterion.benchmark_group(backend);
        for (endpoint, path) in endpoints(&r.registry.config.hostname) {
            // Once counted (the token is then in the verifier's cache, as on
            // every request but a function's first).
            runtime.block_on(counted.get_with(&path, &token));
            let (before, read_before) = (counting.counts(), counting.read_volume());
            let answer = runtime.block_on(counted.get_with(&path, &token));
            let counts: Counts = counting.counts() - before;
            let read = counting.read_volume() - read_before;
            if !answer.status.is_success() && answer.status.as_u16() != 307 {
                return Err(
                    format!("{backend} {path}: {} {}", answer.status, answer.text()).into(),
                );
            }
            group.bench_function(endpoint, |b| {
                b.to_async(&runtime).iter(|| r.get_with(&path, &token))
            });
            rows.push(Row {
                backend: backend.into(),
                endpoint: endpoint.into(),
                path,
                status: answer.status.as_u16(),
                median_us: 0.0,
                gets: counts.gets,
                queries: counts.queries,
                writes: counts.writes(),
                read_bytes: read.bytes,
                response_bytes: answer.body.len(),
            });
        }
        group.finish();
    }
    for row in &mut rows {
        row.median_us = median_ns(&criterion_dir, &row.backend, &row.endpoint)? / 1000.0;
    }
    Ok(Section {
        name: "handlers".into(),
        title: "Warm per-request cost of each read endpoint, in-process".into(),
        markdown: markdown(&rows),
        figures: serde_json::to_value(&rows)?,
    })
}

/// Criterion's median estimate for `group/function`, in nanoseconds.
fn median_ns(dir: &Path, group: &str, function: &str) -> Result<f64, Error> {
    let safe = |s: &str| s.replace(['?', '"', '/', '\\', '*', '<', '>', ':', '|', '^'], "_");
    let path = dir
        .join(safe(group))
        .join(safe(function))
        .join("new/estimates.json");
    let estimates: serde_json::Value = serde_json::from_slice(
        &std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?,
    )?;
    estimates["median"]["point_estimate"]
        .as_f64()
        .ok_or_else(|| format!("{}: no median", path.display()).into())
}

fn markdown(rows: &[Row]) -> String {
    let mut md = format!(
        "Each read endpoint through the whole `app::handle` in-process (routing, a read token checked, the handler, the request line formatted into a sink), timed by criterion (median of 30 samples) on a current-thread runtime. The registry is private; the fixture is a provider with {VERSIONS} versions x {PLATFORMS} platforms, a module with {VERSIONS} versions and a mirrored provider of the same size. *embedded*: SQLite and files; *aws*: DynamoDB and S3 on the emulators over loopback HTTP (the emulators' own time included). Storage requests are counted by `CountingStore` on one request with the token already verified (the verifier caches it). The ratio is to discovery on the same backend, which reads no store.\n\n| backend | endpoint | median | x discovery | GetItem | Query | writes | bytes read | response |\n|---|---|---:|---:|---:|---:|---:|---:|---:|\n"
    );
    for row in rows {
        let baseline = rows
            .iter()
            .find(|r| r.backend == row.backend && r.endpoint == "discovery")
            .map_or(f64::NAN, |r| r.median_us);
        md.push_str(&format!(
            "| {} | {} | {:.1} µs | {:.1} | {} | {} | {} | {} B | {} B |\n",
            row.backend,
            row.endpoint,
            row.median_us,
            row.median_us / baseline,
            row.gets,
            row.queries,
            row.writes,
            row.read_bytes,
            row.response_bytes
        ));
    }
    md
}
