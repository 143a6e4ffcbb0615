//! What one init asks of a caching registry, counted: the requests of a
//! `terraform init` through the `host` block (as the real init's request
//! lines show them), made in-process against a registry caching the real
//! origin, once from an empty cache (every request a miss) and once more
//! (every one a hit). The registry's item store and the fill's are each
//! behind a counter ([`Tally`]), archives stored are counted, and each fill
//! is run as `tfreg serve` runs it, timed; the origin's requests are its
//! own request lines.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::Method;
use tfreg_model::token::{NewToken, Scope};
use tfreg_model::upstream::{Connect, Serves, UpstreamHost, UpstreamSettings};
use tfreg_testkit::{PUBLIC_URL, TestRegistry, TestResponse};

use super::rig::{ORIGIN_HOST, origin_listen};
use super::stores::{Asked, CountingBlobs, Tally, TimedFiller};
use crate::e2e::subjects::Registry;
use crate::e2e::{COUNT, NS, VERSION, count_requests};
use crate::tools::Error;

/// What the requests of one kind asked, summed over the init's requests of it.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub(crate) struct Row {
    /// What Terraform asked (each one request, or more when the registry
    /// sends a waiting archive download to a fresh URL of itself).
    pub(crate) steps: u64,
    pub(crate) requests: u64,
    /// What the read (or blob) function asked of the store: the token, the
    /// item, and on a miss the polls while it waits.
    pub(crate) read: Asked,
    /// What the fills asked of the store: lease, origin answers stored.
    pub(crate) fill: Asked,
    /// Fills started (an asynchronous `Invoke` of the fill function each).
    pub(crate) fills: u64,
    /// Their summed durations, ms.
    pub(crate) fill_ms: f64,
    /// Objects stored (an S3 PUT each) and their bytes.
    pub(crate) blob_puts: u64,
    pub(crate) blob_put_bytes: u64,
    /// Requests the origin answered.
    pub(crate) origin_requests: u64,
    /// Summed wall time of the requests (a miss waits for its fill), ms.
    pub(crate) wall_ms: f64,
    /// Blob requests (an S3 GET each in AWS, the blob function redirecting).
    pub(crate) blobs: u64,
}

impl Row {
    fn add(&mut self, other: &Row) {
        self.steps += other.steps;
        self.requests += other.requests;
        self.read = self.read.plus(&other.read);
        self.fill = self.fill.plus(&other.fill);
        self.fills += other.fills;
        self.fill_ms += other.fill_ms;
        self.blob_puts += other.blob_puts;
        self.blob_put_bytes += other.blob_put_bytes;
        self.origin_requests += other.origin_requests;
        self.wall_ms += other.wall_ms;
        self.blobs += other.blobs;
    }
}

/// Rows by request kind, for the misses (an empty cache) and the hits.
#[derive(Debug, Default, serde::Serialize)]
pub(crate) struct Counted {
    pub(crate) misses: BTreeMap<String, Row>,
    pub(crate) hits: BTreeMap<String, Row>,
    /// The origin's request lines during the misses, by endpoint.
    pub(crate) origin_endpoints: BTreeMap<String, u64>,
    /// Fills by kind: how many, and their median duration (ms).
    pub(crate) fill_kinds: BTreeMap<String, (u64, f64)>,
}

pub(crate) fn count(origin: &Registry) -> Result<Counted, Error> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(counted(origin))
}

/// The registry, its counters, and the fill token.
struct Counters {
    registry: TestRegistry,
    read: Tally,
    fill: Tally,
    blobs: CountingBlobs,
    filler: TimedFiller,
    token: String,
    _fill_dir: tempfile::TempDir,
}

async fn counted(origin: &Registry) -> Result<Counted, Error> {
    // Warnings only, on stderr, from every thread (the fills run on the
    // runtime's workers): the registry's request lines are not needed here.
    let _ = tracing_subscriber::fmt()
        .with_env_filter("warn")
        .with_writer(std::io::stderr)
        .try_init();
    let c = caching(origin).await?;
    let mut counted = Counted::default();
    let origin_before = origin.log_len()?;
    counted.misses = pass(&c, origin).await?;
    counted.origin_endpoints = count_requests(&origin.log_since(origin_before)?).0;
    counted.hits = pass(&c, origin).await?;
    let mut by_kind: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for (kind, ms) in c.filler.finished() {
        by_kind.entry(kind).or_default().push(ms);
    }
    counted.fill_kinds = by_kind
        .into_iter()
        .map(|(k, ms)| (k.to_string(), (ms.len() as u64, crate::tools::median(&ms))))
        .collect();
    Ok(counted)
}

/// A registry in-process (SQLite and files), private, caching the origin
/// as `tfreg upstream set` configures it, its stores behind counters.
async fn caching(origin: &Registry) -> Result<Counters, Error> {
    // The origin lives on loopback: the operator allows `connect` there.
    let policy = tfreg_model::upstream::OperatorPolicy {
        connect_allow: tfreg_model::upstream::OperatorPolicy::parse_nets(&format!(
            "{}/32",
            super::rig::ORIGIN_IP
        ))
        .map_err(|e| e.0)?,
        credentials_dir: None,
    };
    let allowing = policy.clone();
    let base = TestRegistry::embedded().await.reconfigure(move |mut r| {
        r.config.upstream_policy = allowing;
        r
    });
    let admin = base.token(Scope::Admin, None).await;
    let host = UpstreamHost::parse(ORIGIN_HOST).map_err(|e| format!("{e:?}"))?;
    let mut settings = UpstreamSettings::new(Serves {
        providers: true,
        modules: true,
    });
    settings.module_hosts = vec![host.clone()];
    let mut connect = Connect::default();
    connect.to.insert(host, vec![origin_listen().parse()?]);
    connect.ca_pem = Some(std::fs::read_to_string(&origin.ca)?);
    settings.connect = Some(connect);
    let set = base
        .request(
            Method::PUT,
            &format!("/v1/admin/upstreams/{ORIGIN_HOST}"),
            Some(&admin),
            &[("content-type", "application/json")],
            serde_json::to_vec(&settings)?,
        )
        .await;
    if !set.status.is_success() {
        return Err(format!("upstream set in-process: {} {}", set.status, set.text()).into());
    }
    let token = base
        .token_with(NewToken {
            name: "bench-fill".into(),
            scopes: vec![Scope::Read],
            namespaces: vec![],
            grants: vec![],
            expires_at: None,
            fill: true,
        })
        .await;
    let read = Tally::new(base.registry.items.clone());
    let fill = Tally::new(base.registry.items.clone());
    let blobs = CountingBlobs::new(base.registry.blobs.clone());
    let fill_dir = tempfile::tempdir()?;
    let cache = tfreg_cache::fill::Cache::new(
        Arc::new(fill.clone()),
        Arc::new(blobs.clone()),
        fill_dir.path().to_path_buf(),
        tfreg_outbound::Deployment::Serve,
        base.registry.config.max_archive_bytes,
    )
    .with_policy(policy);
    let filler = TimedFiller::new(cache);
    let (reading, filling) = (read.clone(), filler.clone());
    let registry = base.reconfigure(move |mut r| {
        r.items = Arc::new(reading);
        r.with_filler(Arc::new(filling))
    });
    Ok(Counters {
        registry,
        read,
        fill,
        blobs,
        filler,
        token,
        _fill_dir: fill_dir,
    })
}

/// Every request of one init, in Terraform's order, counted by kind.
async fn pass(c: &Counters, origin: &Registry) -> Result<BTreeMap<String, Row>, Error> {
    let mut rows: BTreeMap<String, Row> = BTreeMap::new();
    let mut add = |kind: &str, row: Row| rows.entry(kind.to_string()).or_default().add(&row);
    for i in 0..COUNT {
        let base = format!("/v1/cache/{ORIGIN_HOST}/providers/{NS}/p{i}");
        let (row, _) = step(c, origin, &format!("{base}/versions"), true).await?;
        add("provider-versions", row);
        let (row, answer) = step(
            c,
            origin,
            &format!("{base}/{VERSION}/download/linux/amd64"),
            true,
        )
        .await?;
        add("provider-download", row);
        let answer = answer.json();
        for (kind, field) in [
            ("provider archive (blob)", "download_url"),
            ("SHA256SUMS (blob)", "shasums_url"),
            ("SHA256SUMS.sig (blob)", "shasums_signature_url"),
        ] {
            let url = answer[field]
                .as_str()
                .ok_or_else(|| format!("no {field} in {answer}"))?;
            let (row, _) = step(c, origin, url, false).await?;
            add(kind, row);
        }
        let base = format!("/v1/cache/{ORIGIN_HOST}/modules/{NS}/m{i}/null");
        let (row, _) = step(c, origin, &format!("{base}/versions"), true).await?;
        add("module-versions", row);
        let (row, answer) = step(c, origin, &format!("{base}/{VERSION}/download"), true).await?;
        add("module-download", row);
        let url = answer
            .headers
            .get("x-terraform-get")
            .and_then(|v| v.to_str().ok())
            .ok_or("no X-Terraform-Get")?
            .to_string();
        let (row, _) = step(c, origin, &url, false).await?;
        add("module archive (blob)", row);
    }
    Ok(rows)
}

/// One request (with the fill token on the registry API, none on a signed
/// URL), its redirects to itself followed, then until its fills are done;
/// what it and they asked.
async fn step(
    c: &Counters,
    origin: &Registry,
    target: &str,
    api: bool,
) -> Result<(Row, TestResponse), Error> {
    let (read, fill) = (c.read.asked(), c.fill.asked());
    let (puts, put_bytes) = c.blobs.puts();
    let fills = c.filler.finished().len();
    let origin_log = origin.log_len()?;
    let started = Instant::now();
    let mut url = target.to_string();
    let mut requests = 0;
    let answer = loop {
        requests += 1;
        let path = url.strip_prefix(PUBLIC_URL).unwrap_or(&url);
        if !path.starts_with('/') {
            return Err(format!("not this registry's URL: {url}").into());
        }
        let token = api.then_some(c.token.as_str());
        let answer = c
            .registry
            .request(Method::GET, path, token, &[], Bytes::new())
            .await;
        if answer.status.is_redirection() && requests < 5 {
            url = answer.headers[http::header::LOCATION].to_str()?.to_string();
            continue;
        }
        break answer;
    };
    let wall_ms = started.elapsed().as_secs_f64() * 1000.0;
    // 204 with X-Terraform-Get: a module's download answer.
    if !answer.status.is_success() {
        return Err(format!("GET {target}: {} {}", answer.status, answer.text()).into());
    }
    // The fills it started are done (a lease released after the answer).
    let waiting = Instant::now();
    while c.filler.running() > 0 {
        if waiting.elapsed() > Duration::from_secs(60) {
            return Err(format!("the fills of {target} did not end within 60 s").into());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // The origin's request lines are written by a thread of their own.
    tokio::time::sleep(Duration::from_millis(30)).await;
    let done = c.filler.finished();
    let (puts_after, put_bytes_after) = c.blobs.puts();
    let row = Row {
        steps: 1,
        requests,
        read: c.read.asked().minus(&read),
        fill: c.fill.asked().minus(&fill),
        fills: (done.len() - fills) as u64,
        fill_ms: done[fills..].iter().map(|(_, ms)| ms).sum(),
        blob_puts: puts_after - puts,
        blob_put_bytes: put_bytes_after - put_bytes,
        origin_requests: count_requests(&origin.log_since(origin_log)?)
            .0
            .values()
            .sum(),
        wall_ms,
        blobs: if api { 0 } else { requests },
    };
    Ok((row, answer))
}
