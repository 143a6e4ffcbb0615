//! Load over real HTTPS, bounded in count and time: h2load (Debian's
//! nghttp2-client) against `tfreg serve` and against the Lambda functions under
//! `cargo lambda watch` on the DynamoDB and S3 emulators.
//!
//! Two h2load runs at once make the mix: GETs cycling through every read
//! endpoint (discovery, provider versions and downloads, module versions and
//! downloads, mirror index and versions) and every archive URL the download
//! answers handed out, and HEADs cycling through those archive URLs (Terraform
//! 1.11 sends HEAD before GET), and GETs of the web UI's pages (an eighth of
//! the load, printed on their own line beside the JSON's). h2load speaks HTTP/2, as Terraform does over
//! TLS, where a HEAD answer ends with its headers (wrk 4.1 waits for the body a
//! HEAD answer's Content-Length announces, and never completes one). Reads need
//! a token here; each request carries it.
//!
//! Bounds: `-n` requests over `-c` clients (one request in flight each); the
//! harness stops a run still going at its time bound and reports what was
//! done; a connection idle for 30 s fails its requests (`-N`). Every
//! request's status and latency comes from h2load's `--log-file`, so p50, p99
//! and max are over all of them. The figures are printed (`--nocapture`) and
//! carried in every failure message.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tfreg_model::address::{Hostname, ModuleName, Platform, ProviderName};
use tfreg_model::protocol::DISCOVERY_PATH;
use tfreg_model::router::ReadRoute;
use tfreg_model::version::Version;

use crate::support::fixtures::*;
use crate::support::log;
use crate::support::*;

/// How much load, and for how long at most.
struct Bound {
    requests: usize,
    clients: usize,
    /// A run still going then is stopped; what it did is reported and checked.
    time: Duration,
}

/// What the load asks for, as paths on the server.
struct Targets {
    /// Every read endpoint's paths, then every archive URL.
    get: Vec<String>,
    /// The archive URLs.
    head: Vec<String>,
}

// Reads need a token, and URLs live an hour, so none expires during a run.

#[test]
fn tfreg_serve_under_load() {
    let (started, tmp) = (Instant::now(), tempfile::tempdir().unwrap());
    let args = ["--private", "--url-ttl", "3600"];
    let server = Server::start(&tmp.path().join("data"), &args);
    let bound = Bound {
        requests: 20_000,
        clients: 64,
        time: Duration::from_secs(180),
    };
    under_load(
        &server,
        &bound,
        tmp.path(),
        "tfreg serve",
        &[200, 204],
        started,
    );
}

#[test]
fn lambda_functions_under_load() {
    let (started, tmp) = (Instant::now(), tempfile::tempdir().unwrap());
    // Private (the functions' default): every read carries its token.
    let settings = [("TFREG_URL_TTL", "3600")];
    let server = Server::start_lambda_with(&tmp.path().join("lambda"), &settings);
    let bound = Bound {
        requests: 5_000,
        clients: 32,
        time: Duration::from_secs(120),
    };
    // An archive GET is answered 307 to a presigned S3 URL (not followed here).
    let expected = [200, 204, 307];
    under_load(
        &server,
        &bound,
        tmp.path(),
        "the Lambda functions",
        &expected,
        started,
    );
}

/// Publish, load, check: every answer one of `expected`.
fn under_load(
    server: &Server,
    bound: &Bound,
    tmp: &Path,
    name: &str,
    expected: &[i32],
    started: Instant,
) {
    let read_token = load_fixture(server, tmp);
    let report = run_load(server, &read_token, bound, tmp, name);
    report.check(server, expected);
    eprintln!(
        "FIGURE load on {name}: test took {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

/// Publish the end-to-end fixture and import a mirror provider with the real
/// CLI; returns a read token, after showing that reads need one. The provider
/// zips hold a small script rather than the 20 MB null provider: the figures
/// are of answering requests, not of moving 6.7 MB zips through TLS.
fn load_fixture(server: &Server, tmp: &Path) -> String {
    let binary = tmp.join("provider.sh");
    std::fs::write(&binary, "#!/bin/sh\necho 'a provider for the load test'\n").unwrap();
    let publish_token = server.token("publish", None);
    publish_fixture_of(server, &publish_token, tmp, &binary);
    let (mirror_dir, _) = mirror_import_dir_of(tmp, &binary);
    ok(
        server.tfreg(
            &publish_token,
            &["mirror", "import", mirror_dir.to_str().unwrap()],
        ),
        "tfreg mirror import",
    );
    let versions = ReadRoute::ProviderVersions {
        provider: ProviderName::parse(NS, "null").unwrap(),
    }
    .path();
    assert_eq!(
        server.get(&versions).status(),
        401,
        "reads need a token, so the load's are answered only for its token"
    );
    server.token("read", None)
}

/// GET a read endpoint with the token: the answer, which must be `status`.
fn read(server: &Server, token: &str, path: &str, status: u16) -> reqwest::blocking::Response {
    let resp = server
        .http
        .get(server.url(path))
        .bearer_auth(token)
        .send()
        .unwrap();
    assert_eq!(resp.status(), status, "GET {path}");
    resp
}

fn read_json(server: &Server, token: &str, path: &str) -> serde_json::Value {
    read(server, token, path, 200).json().unwrap()
}

/// Every read path of what was published (found through the versions and
/// index answers), and every archive URL the download answers hand out.
fn targets(server: &Server, token: &str) -> Targets {
    let mut reads = vec![DISCOVERY_PATH.to_string()];
    let mut archives: Vec<String> = Vec::new();
    let mut archive = |url: &str| {
        let path = url
            .strip_prefix(&server.url(""))
            .unwrap_or_else(|| panic!("an archive URL of this server, got {url}"));
        if !archives.iter().any(|a| a == path) {
            archives.push(path.to_string());
        }
    };

    let provider = ProviderName::parse(NS, "null").unwrap();
    let path = ReadRoute::ProviderVersions {
        provider: provider.clone(),
    }
    .path();
    let versions = read_json(server, token, &path);
    reads.push(path);
    for v in versions["versions"].as_array().unwrap() {
        let version = Version::parse(v["version"].as_str().unwrap()).unwrap();
        for p in v["platforms"].as_array().unwrap() {
            let platform =
                Platform::parse(p["os"].as_str().unwrap(), p["arch"].as_str().unwrap()).unwrap();
            let path = ReadRoute::ProviderDownload {
                provider: provider.clone(),
                version: version.clone(),
                platform,
            }
            .path();
            let download = read_json(server, token, &path);
            reads.push(path);
            for url in ["download_url", "shasums_url", "shasums_signature_url"] {
                archive(download[url].as_str().unwrap());
            }
        }
    }

    let module = ModuleName::parse(NS, "greeting", "null").unwrap();
    let path = ReadRoute::ModuleVersions {
        module: module.clone(),
    }
    .path();
    let versions = read_json(server, token, &path);
    reads.push(path);
    for v in versions["modules"][0]["versions"].as_array().unwrap() {
        let path = ReadRoute::ModuleDownload {
            module: module.clone(),
            version: Version::parse(v["version"].as_str().unwrap()).unwrap(),
        }
        .path();
        let resp = read(server, token, &path, 204);
        reads.push(path);
        archive(resp.headers()["x-terraform-get"].to_str().unwrap());
    }

    // The mirror: our own provider under our hostname, and the imported one.
    for (hostname, provider) in [
        (server.host.as_str(), provider.clone()),
        (
            "registry.terraform.io",
            ProviderName::parse("hashicorp", "null").unwrap(),
        ),
    ] {
        let hostname = Hostname::parse(hostname).unwrap();
        let path = ReadRoute::MirrorIndex {
            hostname: hostname.clone(),
            provider: provider.clone(),
        }
        .path();
        let index = read_json(server, token, &path);
        reads.push(path);
        for version in index["versions"].as_object().unwrap().keys() {
            let path = ReadRoute::MirrorVersion {
                hostname: hostname.clone(),
                provider: provider.clone(),
                version: Version::parse(version).unwrap(),
            }
            .path();
            let answer = read_json(server, token, &path);
            reads.push(path);
            for a in answer["archives"].as_object().unwrap().values() {
                archive(a["url"].as_str().unwrap());
            }
        }
    }
    Targets {
        get: reads.into_iter().chain(archives.iter().cloned()).collect(),
        head: archives,
    }
}

/// The web UI's pages of what the fixture published (the load's bearer
/// token reads them as a session would).
fn ui_pages() -> Vec<String> {
    [
        "/ui/home".to_string(),
        "/ui/search?q=null".to_string(),
        format!("/ui/namespaces/{NS}"),
        format!("/ui/modules/{NS}/greeting/null"),
        format!("/ui/modules/{NS}/greeting/null/1.0.0"),
        format!("/ui/providers/{NS}/null"),
        format!("/ui/providers/{NS}/null/2.1.2"),
    ]
    .to_vec()
}

/// One h2load process: `requests` over `clients`, cycling through `paths`.
struct H2load {
    method: &'static str,
    requests: usize,
    child: Child,
    stdout: PathBuf,
    log: PathBuf,
    /// How long it ran, once it ended.
    took: Option<Duration>,
    /// Stopped by the time bound rather than finished.
    stopped: bool,
}

impl H2load {
    fn start(
        server: &Server,
        token: &str,
        method: &'static str,
        paths: &[String],
        requests: usize,
        clients: usize,
        dir: &Path,
    ) -> H2load {
        // `method` names the run too ("GET pages"): its first word is the method.
        let (http_method, file) = (method.split(' ').next().unwrap(), method.replace(' ', "-"));
        let urls = dir.join(format!("urls-{file}.txt"));
        let text: String = paths
            .iter()
            .map(|p| format!("{}\n", server.url(p)))
            .collect();
        std::fs::write(&urls, text).unwrap();
        let stdout = dir.join(format!("h2load-{file}.out"));
        let log = dir.join(format!("h2load-{file}.log"));
        let mut cmd = Command::new(Tools::get().path("TFREG_H2LOAD"));
        cmd.args(["-n", &requests.to_string(), "-c", &clients.to_string()])
            .args(["-t", "1", "-N", "30s"])
            .arg("-i")
            .arg(&urls)
            .arg("--log-file")
            .arg(&log)
            .args(["-H", &format!("authorization: Bearer {token}")]);
        if http_method != "GET" {
            cmd.args(["-H", &format!(":method: {http_method}")]);
        }
        let out = std::fs::File::create(&stdout).unwrap();
        let child = cmd
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .stdin(Stdio::null())
            .spawn()
            .expect("start h2load");
        H2load {
            method,
            requests,
            child,
            stdout,
            log,
            took: None,
            stopped: false,
        }
    }

    /// Wait for every run, noting when each ends; stop those still going at
    /// `started + bound`.
    fn wait_all(runs: &mut [H2load], started: Instant, bound: Duration) {
        while runs.iter().any(|r| r.took.is_none()) {
            let out_of_time = started.elapsed() >= bound;
            for run in runs.iter_mut().filter(|r| r.took.is_none()) {
                if let Some(status) = run.child.try_wait().unwrap() {
                    run.took = Some(started.elapsed());
                    assert!(
                        status.success(),
                        "h2load ({}) failed: {status}\n{}",
                        run.method,
                        run.output()
                    );
                } else if out_of_time {
                    run.child.kill().unwrap();
                    run.child.wait().unwrap();
                    run.took = Some(started.elapsed());
                    run.stopped = true;
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn output(&self) -> String {
        std::fs::read_to_string(&self.stdout).unwrap_or_default()
    }

    /// Every logged request: (status, or -1 for a failed stream; latency in µs).
    fn requests(&self) -> Vec<(i32, u64)> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|l| {
                let cols: Vec<&str> = l.split('\t').collect();
                assert!(cols.len() >= 3, "h2load log line {l:?}");
                (cols[1].parse().unwrap(), cols[2].parse().unwrap())
            })
            .collect()
    }

    /// The numbers of h2load's `requests:` summary line (`total`, `done`,
    /// `succeeded`, `failed`, `errored`, `timeout`, ...), when it finished.
    fn summary(&self) -> BTreeMap<String, usize> {
        let out = self.output();
        let Some(line) = out.lines().find(|l| l.starts_with("requests: ")) else {
            return BTreeMap::new();
        };
        line["requests: ".len()..]
            .split(", ")
            .filter_map(|part| {
                let (n, what) = part.split_once(' ')?;
                Some((what.to_string(), n.parse().ok()?))
            })
            .collect()
    }
}

/// What a load run did.
struct Report {
    runs: Vec<H2load>,
    elapsed: Duration,
    /// Request lines the server had logged before the load.
    log_before: usize,
    /// The figures, printed and carried in every failure message.
    text: String,
}

fn percentile(sorted: &[u64], p: usize) -> f64 {
    let i = (sorted.len() * p).div_ceil(100).max(1) - 1;
    sorted[i] as f64 / 1000.0
}

fn figures(what: &str, requests: &[(i32, u64)], elapsed: Duration) -> String {
    let mut latencies: Vec<u64> = requests.iter().map(|r| r.1).collect();
    latencies.sort_unstable();
    let mut statuses: BTreeMap<i32, usize> = BTreeMap::new();
    for (status, _) in requests {
        *statuses.entry(*status).or_default() += 1;
    }
    if latencies.is_empty() {
        return format!("FIGURE {what}: no request completed\n");
    }
    format!(
        "FIGURE {what}: {} requests in {:.2} s, {:.0} req/s, latency p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms, statuses {statuses:?}\n",
        requests.len(),
        elapsed.as_secs_f64(),
        requests.len() as f64 / elapsed.as_secs_f64(),
        percentile(&latencies, 50),
        percentile(&latencies, 99),
        *latencies.last().unwrap() as f64 / 1000.0,
    )
}

/// The mix: GETs and HEADs at once, requests and clients split alike (three
/// quarters GET), so both runs take about as long.
fn run_load(server: &Server, token: &str, bound: &Bound, dir: &Path, name: &str) -> Report {
    let targets = targets(server, token);
    // The server's request log from here on is the load's.
    let log_before = log::requests(&server.server_log()).len();
    let head_clients = bound.clients / 4;
    let head_requests = bound.requests / 4;
    // The web UI's pages, beside the JSON answers: an eighth of the load.
    let page_clients = bound.clients / 8;
    let page_requests = bound.requests / 8;
    let pages = ui_pages();
    let started = Instant::now();
    let mut runs = vec![
        H2load::start(
            server,
            token,
            "GET",
            &targets.get,
            bound.requests - head_requests - page_requests,
            bound.clients - head_clients - page_clients,
            dir,
        ),
        H2load::start(
            server,
            token,
            "GET pages",
            &pages,
            page_requests,
            page_clients,
            dir,
        ),
        H2load::start(
            server,
            token,
            "HEAD",
            &targets.head,
            head_requests,
            head_clients,
            dir,
        ),
    ];
    H2load::wait_all(&mut runs, started, bound.time);
    let elapsed = started.elapsed();
    let mut text = format!(
        "load on {name}: {} requests at concurrency {} ({} GET over {} paths, {} GET of {} web UI pages, {} HEAD over {} archive URLs), HTTP/2 over TLS, time bound {:?}\n",
        bound.requests,
        bound.clients,
        bound.requests - head_requests - page_requests,
        targets.get.len(),
        page_requests,
        pages.len(),
        head_requests,
        targets.head.len(),
        bound.time,
    );
    let mut all = Vec::new();
    for run in &runs {
        let requests = run.requests();
        let took = run.took.unwrap();
        text += &figures(&format!("{name} {}", run.method), &requests, took);
        if run.stopped {
            text += &format!(
                "{} run stopped by the time bound after {:.1} s\n",
                run.method,
                took.as_secs_f64()
            );
        }
        all.extend(requests);
    }
    text += &figures(&format!("{name} all"), &all, elapsed);
    text += &format!(
        "wall time {:.2} s (each run's req/s over its own time)\n",
        elapsed.as_secs_f64()
    );
    eprint!("{text}");
    Report {
        runs,
        elapsed,
        log_before,
        text,
    }
}

impl Report {
    /// Zero errors and every answer one of `expected` (no 4xx, no 5xx), by
    /// h2load's log and by the server's own request log, which must show
    /// every read endpoint and archive GET and HEAD.
    fn check(&self, server: &Server, expected: &[i32]) {
        let text = &self.text;
        let mut total = 0;
        for run in &self.runs {
            let requests = run.requests();
            assert!(
                !requests.is_empty(),
                "{text}{} did no request:\n{}",
                run.method,
                run.output()
            );
            total += requests.len();
            let unexpected: Vec<&(i32, u64)> = requests
                .iter()
                .filter(|(s, _)| !expected.contains(s))
                .collect();
            assert!(
                unexpected.is_empty(),
                "{text}{} answers other than {expected:?} (-1: a failed stream): {} of them, first {:?}\n{}",
                run.method,
                unexpected.len(),
                &unexpected[..unexpected.len().min(10)],
                run.output()
            );
            let out = run.output();
            assert!(
                out.contains("Application protocol: h2"),
                "{text}{}: HTTP/2 was not negotiated:\n{out}",
                run.method
            );
            if !run.stopped {
                let summary = run.summary();
                assert_eq!(
                    requests.len(),
                    run.requests,
                    "{text}{}: every request is logged\n{out}",
                    run.method
                );
                for (what, want) in [
                    ("done", run.requests),
                    ("succeeded", run.requests),
                    ("failed", 0),
                    ("errored", 0),
                    ("timeout", 0),
                ] {
                    assert_eq!(
                        summary.get(what),
                        Some(&want),
                        "{text}{} {what}:\n{out}",
                        run.method
                    );
                }
            }
        }
        let lines = log::requests(&server.server_log());
        let lines = &lines[self.log_before..];
        if self.runs.iter().any(|r| r.stopped) {
            // Requests in flight when a run was stopped may be logged too.
            assert!(
                lines.len() >= total,
                "{text}the server logged every request"
            );
        } else {
            assert_eq!(
                lines.len(),
                total,
                "{text}the server logged one line per request"
            );
        }
        let mut seen: BTreeMap<(String, String), usize> = BTreeMap::new();
        for l in lines {
            assert!(
                expected.contains(&i32::from(l.status)),
                "{text}the server answered {} {} with {}",
                l.method,
                l.path,
                l.status
            );
            *seen
                .entry((l.endpoint.clone(), l.method.clone()))
                .or_default() += 1;
        }
        for endpoint in [
            "discovery",
            "provider-versions",
            "provider-download",
            "module-versions",
            "module-download",
            "mirror-index",
            "mirror-version",
            "blob",
            "ui",
        ] {
            assert!(
                seen.contains_key(&(endpoint.to_string(), "GET".to_string())),
                "{text}no GET of {endpoint} in the server's log: {seen:?}"
            );
        }
        assert!(
            seen.contains_key(&("blob".to_string(), "HEAD".to_string())),
            "{text}no archive HEAD in the server's log: {seen:?}"
        );
        eprintln!(
            "FIGURE the server logged by endpoint and method: {seen:?} ({:.1} s of load)",
            self.elapsed.as_secs_f64()
        );
    }
}
