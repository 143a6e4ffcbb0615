//! `scale`: what a versions list costs as a provider or module grows, for the
//! layout before the versions index (a query of every release item: the read
//! path a store without an index still takes) beside the index (one `GetItem`),
//! in the same run, on the embedded store and on DynamoDB (the emulator, when
//! `AWS_ENDPOINT_URL_DYNAMODB` is set). Per size: median latency of the
//! in-process request, response size, storage requests, item bytes read and
//! the read capacity DynamoDB bills for them (1 unit per 4 KB of a strongly
//! consistent GetItem, ½ per 4 KB of a Query page: computed from the items
//! read, as dynalite's own figures are not DynamoDB's), peak heap allocated
//! during one request; and what writes cost: a publish (the release item
//! alone before, with the index's upkeep now), a deprecation, a delete.

mod alloc;

use alloc::peak_of;
use std::path::Path;
use std::time::{Duration, Instant};

use serde::Serialize;
use tfreg_model::address::{ModuleName, ProviderName};
use tfreg_model::router::{LifecycleAction, PublishTarget};
use tfreg_store::catalog::schema::INDEX_SK;
use tfreg_store::catalog::{self, Mark, Origin};
use tfreg_store::{Condition, Item, ItemStore};
use tfreg_testkit::counting::{CountingStore, Counts, ReadVolume};
use tfreg_testkit::{TestRegistry, TestSigner, scale};

use crate::report::Section;

// ---------------------------------------------------------------------------
// Figures
// ---------------------------------------------------------------------------

const PROVIDER_SIZES: &[usize] = &[10, 100, 1000, 5000];
const MODULE_SIZES: &[usize] = &[10, 100, 1000, 5000];
const PLATFORMS: usize = 12;
const NAMESPACE_MODULES: usize = 2000;
const NS: &str = "scale";

/// One versions list, one layout.
#[derive(Debug, Clone, Serialize)]
struct Read {
    backend: String,
    /// `provider`, `module`, `module in a namespace of 2000`.
    subject: String,
    versions: usize,
    /// `query` (before the index) or `index`.
    layout: &'static str,
    median_ms: f64,
    response_bytes: usize,
    requests: u64,
    bytes_read: u64,
    read_units: f64,
    peak_heap_bytes: usize,
}

/// One write, with the index.
#[derive(Debug, Clone, Serialize)]
struct Write {
    backend: String,
    subject: String,
    versions: usize,
    /// `publish (release item only, before)`, `publish`, `deprecate`, `delete`.
    operation: &'static str,
    median_ms: f64,
    reads: u64,
    writes: u64,
    bytes_read: u64,
}

#[derive(Debug, Clone, Serialize)]
struct IndexSize {
    backend: String,
    subject: String,
    versions: usize,
    bytes: u64,
}

#[derive(Default, Serialize)]
struct Figures {
    reads: Vec<Read>,
    writes: Vec<Write>,
    index_sizes: Vec<IndexSize>,
}

fn median(mut samples: Vec<Duration>) -> f64 {
    samples.sort();
    samples
        .get(samples.len() / 2)
        .map_or(0.0, |d| d.as_secs_f64() * 1000.0)
}

/// Fewer samples where one request reads megabytes.
fn samples_for(versions: usize) -> usize {
    match versions {
        0..=100 => 21,
        101..=1000 => 9,
        _ => 5,
    }
}

/// One provider or module being measured, through a counting store.
struct Subject<'a> {
    r: &'a TestRegistry,
    counting: CountingStore,
    /// `r`, reading through `counting`.
    view: TestRegistry,
    name: &'a str,
    versions: usize,
}

impl<'a> Subject<'a> {
    fn new(r: &'a TestRegistry, name: &'a str, versions: usize) -> Self {
        let (counting, view) = r.counted();
        Subject {
            r,
            counting,
            view,
            name,
            versions,
        }
    }

    /// The list at `path` read through the index of `pk`, and the index's size.
    async fn indexed(&self, path: &str, pk: &str, figures: &mut Figures) -> Result<(), String> {
        figures.reads.push(self.read(path, "index").await?);
        figures.index_sizes.push(self.index_size(pk).await?);
        Ok(())
    }

    async fn read(&self, path: &str, layout: &'static str) -> Result<Read, String> {
        let (c0, v0) = (self.counting.counts(), self.counting.read_volume());
        let (peak, resp) = peak_of(self.view.get(path)).await;
        if resp.status != http::StatusCode::OK {
            return Err(format!("{path}: {} {}", resp.status, resp.text()));
        }
        let counts: Counts = self.counting.counts() - c0;
        let volume: ReadVolume = self.counting.read_volume() - v0;
        let mut times = Vec::new();
        for _ in 0..samples_for(self.versions) {
            let t = Instant::now();
            self.view.get(path).await;
            times.push(t.elapsed());
        }
        Ok(Read {
            backend: self.r.name.to_string(),
            subject: self.name.to_string(),
            versions: self.versions,
            layout,
            median_ms: median(times),
            response_bytes: resp.body.len(),
            requests: counts.total(),
            bytes_read: volume.bytes,
            read_units: volume.units(),
            peak_heap_bytes: peak,
        })
    }

    /// Run `op` `times` times (the `i`th call gets `i`), counted and timed.
    async fn write<F: AsyncFn(usize) -> Result<(), String>>(
        &self,
        operation: &'static str,
        times: usize,
        op: F,
    ) -> Result<Write, String> {
        let (c0, v0) = (self.counting.counts(), self.counting.read_volume());
        let mut samples = Vec::new();
        for i in 0..times {
            let t = Instant::now();
            op(i).await?;
            samples.push(t.elapsed());
        }
        let counts = self.counting.counts() - c0;
        let volume = self.counting.read_volume() - v0;
        let per = |n: u64| n / times as u64;
        Ok(Write {
            backend: self.r.name.to_string(),
            subject: self.name.to_string(),
            versions: self.versions,
            operation,
            median_ms: median(samples),
            reads: per(counts.reads()),
            writes: per(counts.writes()),
            bytes_read: per(volume.bytes),
        })
    }

    async fn index_size(&self, pk: &str) -> Result<IndexSize, String> {
        let item = self
            .counting
            .get(pk, INDEX_SK)
            .await
            .map_err(|e| e.to_string())?
            .ok_or("no index")?;
        Ok(IndexSize {
            backend: self.r.name.to_string(),
            subject: self.name.to_string(),
            versions: self.versions,
            bytes: tfreg_testkit::counting::item_size(&item),
        })
    }
}

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// A write's outcome, as the benchmark needs it.
fn done<T, E: std::fmt::Display>(result: Result<T, E>) -> Result<(), String> {
    result.map(drop).map_err(err)
}

fn mark() -> Mark {
    Mark {
        message: "use 2.x".into(),
        at: 0,
        by: "bench".into(),
    }
}

const WRITES: usize = 5;

async fn provider(r: &TestRegistry, n: usize, figures: &mut Figures) -> Result<(), String> {
    let items = r.registry.items.clone();
    let name = ProviderName::parse(NS, &format!("p{n}")).map_err(err)?;
    let pk = format!("PROVIDER#{name}");
    let signer = TestSigner::rsa();
    let platforms = scale::platforms(PLATFORMS);
    let versions = scale::versions(n);
    scale::seed_provider(
        items.as_ref(),
        &Origin::Registry,
        &name,
        &versions,
        &platforms,
        signer.public_armor,
    )
    .await
    .map_err(err)?;
    let s = Subject::new(r, "provider", n);
    let counting = &s.counting;
    let path = format!("/v1/providers/{name}/versions");
    s.indexed(&path, &pk, figures).await?;
    let release = |i: usize| {
        scale::provider_release(
            &name.r#type,
            &format!("2.0.{i}"),
            &platforms,
            signer.public_armor,
        )
    };
    let target = |v: &str| PublishTarget::try_from(format!("providers/{name}/{v}")).map_err(err);
    figures.writes.push(
        s.write("publish", WRITES, async |i| {
            let r = release(i);
            let v = tfreg_model::version::Version::parse(&r.version).map_err(err)?;
            done(catalog::put_provider_release(counting, &Origin::Registry, &name, &v, &r).await)
        })
        .await?,
    );
    figures.writes.push(
        s.write("deprecate", WRITES, async |i| {
            let t = target(&format!("2.0.{i}"))?;
            done(catalog::change_lifecycle(counting, &t, LifecycleAction::Deprecate, mark()).await)
        })
        .await?,
    );
    figures.writes.push(
        s.write("delete", WRITES, async |i| {
            let t = target(&format!("2.0.{i}"))?;
            done(catalog::delete_release(counting, &t).await)
        })
        .await?,
    );
    // Before the index: the same partition without it.
    items.take(&pk, INDEX_SK).await.map_err(err)?;
    figures.reads.push(s.read(&path, "query").await?);
    figures.writes.push(
        s.write("publish (release item only, before)", WRITES, async |i| {
            let r = release(i);
            let data = serde_json::to_vec(&r).map_err(err)?;
            let item = Item::new(pk.clone(), format!("VERSION#{}", r.version), data);
            counting.put(item, Condition::IfAbsent).await.map_err(err)
        })
        .await?,
    );
    Ok(())
}

async fn module(
    r: &TestRegistry,
    subject: &str,
    name: &ModuleName,
    n: usize,
    figures: &mut Figures,
) -> Result<(), String> {
    let items = r.registry.items.clone();
    let pk = format!("MODULE#{name}");
    scale::seed_module(items.as_ref(), name, &scale::versions(n))
        .await
        .map_err(err)?;
    let s = Subject::new(r, subject, n);
    let counting = &s.counting;
    let path = format!("/v1/modules/{name}/versions");
    s.indexed(&path, &pk, figures).await?;
    figures.writes.push(
        s.write("publish", WRITES, async |i| {
            let r = scale::module_release(&format!("2.0.{i}"));
            let v = tfreg_model::version::Version::parse(&r.version).map_err(err)?;
            done(catalog::put_module_release(counting, name, &v, &r).await)
        })
        .await?,
    );
    items.take(&pk, INDEX_SK).await.map_err(err)?;
    figures.reads.push(s.read(&path, "query").await?);
    Ok(())
}

async fn namespace(r: &TestRegistry, figures: &mut Figures) -> Result<(), String> {
    use futures_util::{StreamExt, TryStreamExt};
    let items = r.registry.items.clone();
    let versions = scale::versions(3);
    futures_util::stream::iter(0..NAMESPACE_MODULES)
        .map(|i| {
            let (items, versions) = (items.clone(), versions.clone());
            async move {
                let m = ModuleName::parse("wide", &format!("m{i}"), "aws").map_err(err)?;
                scale::seed_module(items.as_ref(), &m, &versions)
                    .await
                    .map_err(err)
            }
        })
        .buffer_unordered(16)
        .try_collect::<Vec<()>>()
        .await?;
    let name = ModuleName::parse("wide", "probe", "aws").map_err(err)?;
    let subject = format!("module in a namespace of {NAMESPACE_MODULES}");
    module(r, &subject, &name, 3, figures).await
}

async fn backend(r: TestRegistry, figures: &mut Figures) -> Result<(), String> {
    for &n in PROVIDER_SIZES {
        eprintln!("scale: {} provider of {n} versions", r.name);
        provider(&r, n, figures).await?;
    }
    for &n in MODULE_SIZES {
        eprintln!("scale: {} module of {n} versions", r.name);
        let name = ModuleName::parse(NS, &format!("m{n}"), "aws").map_err(err)?;
        module(&r, "module", &name, n, figures).await?;
    }
    eprintln!("scale: {} namespace of {NAMESPACE_MODULES} modules", r.name);
    namespace(&r, figures).await
}

/// Run the benchmark; its chart goes to `out`.
pub fn run(out: &Path) -> Result<Section, Box<dyn std::error::Error>> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let mut figures = Figures::default();
    rt.block_on(async {
        backend(TestRegistry::embedded().await, &mut figures).await?;
        if std::env::var_os("AWS_ENDPOINT_URL_DYNAMODB").is_some() {
            backend(TestRegistry::aws().await, &mut figures).await?;
        } else {
            eprintln!("scale: AWS_ENDPOINT_URL_DYNAMODB is not set: DynamoDB left out");
        }
        Ok::<_, String>(())
    })?;
    let chart = "scale.svg";
    std::fs::write(out.join(chart), chart::svg(&figures.reads))?;
    Ok(Section {
        name: "scale".into(),
        title: "Versions lists at scale: one GetItem whatever the size".into(),
        markdown: markdown(&figures, chart),
        figures: serde_json::to_value(&figures)?,
    })
}

// ---------------------------------------------------------------------------
// Report
// ---------------------------------------------------------------------------

fn kb(bytes: f64) -> String {
    if bytes >= 1024.0 * 1024.0 {
        format!("{:.1} MB", bytes / 1024.0 / 1024.0)
    } else {
        format!("{:.1} KB", bytes / 1024.0)
    }
}

fn ratio(before: f64, after: f64) -> String {
    if after > 0.0 {
        format!("{:.1}×", before / after)
    } else {
        "–".into()
    }
}

fn markdown(f: &Figures, chart: &str) -> String {
    let mut md = String::from(
        "A versions list before the versions index was a query of every release item (a provider's carries its signing key: ~4.3 KB a version at 12 platforms); with it, one `GetItem` of the partition's index (compressed JSON: distinct platform sets and messages kept once). Both layouts are measured in the same run, on the same data: \"query\" is the index's fallback path, taken by stores from before it. Latency is the median of in-process requests (handler, store, JSON); read units are what DynamoDB bills for the items read (1 per 4 KB of a strongly consistent GetItem, ½ per 4 KB of a Query page); heap is the peak allocated during one request.\n\n",
    );
    md.push_str(&format!("![read cost by size]({chart})\n\n"));
    md.push_str("| backend | list | versions | requests (query → index) | read (query → index) | read units (query → index) | median (query → index) | faster | response | heap peak (query → index) |\n|---|---|---|---|---|---|---|---|---|---|\n");
    let find = |b: &str, s: &str, n: usize, l: &str| {
        f.reads
            .iter()
            .find(|r| r.backend == b && r.subject == s && r.versions == n && r.layout == l)
    };
    for idx in f.reads.iter().filter(|r| r.layout == "index") {
        let Some(q) = find(&idx.backend, &idx.subject, idx.versions, "query") else {
            continue;
        };
        md.push_str(&format!(
            "| {} | {} | {} | {} → {} | {} → {} | {} → {} | {:.2} → {:.2} ms | {} | {} | {} → {} |\n",
            idx.backend,
            idx.subject,
            idx.versions,
            q.requests,
            idx.requests,
            kb(q.bytes_read as f64),
            kb(idx.bytes_read as f64),
            q.read_units,
            idx.read_units,
            q.median_ms,
            idx.median_ms,
            ratio(q.median_ms, idx.median_ms),
            kb(idx.response_bytes as f64),
            kb(q.peak_heap_bytes as f64),
            kb(idx.peak_heap_bytes as f64),
        ));
    }
    md.push_str("\nGrowth from the smallest to the largest size (×, versions grow ×500):\n\n");
    for backend in ["embedded", "aws"] {
        for subject in ["provider", "module"] {
            for layout in ["query", "index"] {
                let rows: Vec<&Read> = f
                    .reads
                    .iter()
                    .filter(|r| r.backend == backend && r.subject == subject && r.layout == layout)
                    .collect();
                let (Some(first), Some(last)) = (rows.first(), rows.last()) else {
                    continue;
                };
                md.push_str(&format!(
                    "- {backend} {subject}, {layout}: requests {}, bytes read {}, latency {}, heap {}\n",
                    ratio(last.requests as f64, first.requests as f64),
                    ratio(last.bytes_read as f64, first.bytes_read as f64),
                    ratio(last.median_ms, first.median_ms),
                    ratio(last.peak_heap_bytes as f64, first.peak_heap_bytes as f64),
                ));
            }
        }
    }
    md.push_str("\nThe index item (DynamoDB's 400 KB item limit):\n\n| backend | of | versions | bytes |\n|---|---|---|---|\n");
    for s in &f.index_sizes {
        md.push_str(&format!(
            "| {} | {} | {} | {} |\n",
            s.backend,
            s.subject,
            s.versions,
            kb(s.bytes as f64)
        ));
    }
    md.push_str("\nWrites with the index (median of 5; requests and bytes read per write). A publish adds to the release item's conditional put a read of the index, of the release, and a conditional put of the index; a delete still queries the partition (to keep archives another release refers to):\n\n| backend | of | versions | write | median | reads | writes | read |\n|---|---|---|---|---|---|---|---|\n");
    for w in &f.writes {
        md.push_str(&format!(
            "| {} | {} | {} | {} | {:.2} ms | {} | {} | {} |\n",
            w.backend,
            w.subject,
            w.versions,
            w.operation,
            w.median_ms,
            w.reads,
            w.writes,
            kb(w.bytes_read as f64)
        ));
    }
    md
}

mod chart;
