//! The registry's metrics (issue 38), read by real parsers: `tfreg serve
//! --metrics-listen` scraped after real requests and parsed by the
//! Prometheus project's Python client (its OpenMetrics parser, the format
//! served, and its classic text parser); the embedded-metric-format lines
//! the real Lambda function binaries print under `cargo lambda watch`'s
//! runtime API validated against the EMF specification's JSON schema
//! (support/emf-schema.json) with Python's jsonschema, plus the
//! specification's rules a schema cannot say.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::Value;
use tfreg_model::router::Endpoint;

use crate::support::server::free_port;
use crate::support::tools::tfreg_bin;
use crate::support::*;

/// The venv's Python running `code` with `input` on stdin; its stdout as JSON.
fn python(code: &str, input: &str) -> Value {
    use std::io::Write;
    let mut child = Command::new(Tools::get().path("TFREG_VENV_BIN").join("python"))
        .args(["-c", code])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "python failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

/// The exposition parsed twice: strictly as OpenMetrics (what the listener
/// says it serves) and by the classic text parser; the samples of each
/// family as [name, labels, value], and both parsers' sample counts.
const PROMETHEUS_PARSE: &str = r#"
import json, sys
from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics
from prometheus_client.parser import text_string_to_metric_families as classic
text = sys.stdin.read()
families = {}
for f in openmetrics(text):
    families[f.name] = {"type": f.type, "samples": [[s.name, s.labels, s.value] for s in f.samples]}
classic_samples = sum(len(f.samples) for f in classic(text))
print(json.dumps({"families": families, "classic_samples": classic_samples}))
"#;

struct Scrape {
    families: BTreeMap<String, Value>,
}

impl Scrape {
    fn of(addr: &str) -> Scrape {
        let resp = reqwest::blocking::get(format!("http://{addr}/metrics")).unwrap();
        assert_eq!(resp.status(), 200);
        assert_eq!(
            resp.headers()["content-type"],
            "application/openmetrics-text; version=1.0.0; charset=utf-8"
        );
        let text = resp.text().unwrap();
        let parsed = python(PROMETHEUS_PARSE, &text);
        let families: BTreeMap<String, Value> = parsed["families"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let openmetrics_samples: usize = families
            .values()
            .map(|f| f["samples"].as_array().unwrap().len())
            .sum();
        // The classic parser reads the same samples (but the `# EOF`).
        assert_eq!(parsed["classic_samples"], openmetrics_samples, "{text}");
        Scrape { families }
    }

    /// Every sample of `family`: (sample name, labels, value).
    fn samples(&self, family: &str) -> Vec<(String, BTreeMap<String, String>, f64)> {
        let Some(f) = self.families.get(family) else {
            return vec![];
        };
        f["samples"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                let labels = s[1]
                    .as_object()
                    .unwrap()
                    .iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
                    .collect();
                (
                    s[0].as_str().unwrap().to_string(),
                    labels,
                    s[2].as_f64().unwrap(),
                )
            })
            .collect()
    }

    /// The value of `sample` with exactly `labels` (0 when absent).
    fn value(&self, family: &str, sample: &str, labels: &[(&str, &str)]) -> f64 {
        let want: BTreeMap<String, String> = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        self.samples(family)
            .into_iter()
            .find(|(name, l, _)| name == sample && *l == want)
            .map_or(0.0, |(_, _, v)| v)
    }

    fn total(&self, family: &str, sample: &str) -> f64 {
        self.samples(family)
            .iter()
            .filter(|(name, _, _)| name == sample)
            .map(|(_, _, v)| v)
            .sum()
    }
}

fn endpoint_names() -> BTreeSet<String> {
    let mut names: BTreeSet<String> = Endpoint::all()
        .iter()
        .map(|e| e.name().to_string())
        .collect();
    names.insert("none".into());
    names
}

#[test]
fn tfreg_serve_metrics_listen_counts_each_request_for_a_real_prometheus_parser() {
    let tmp = tempfile::tempdir().unwrap();
    let metrics = format!("127.0.0.1:{}", free_port());
    let server = Server::start(&tmp.path().join("data"), &["--metrics-listen", &metrics]);
    let publish = server.token("publish", None);
    let before = Scrape::of(&metrics);

    for _ in 0..3 {
        assert_eq!(server.get("/.well-known/terraform.json").status(), 200);
    }
    for _ in 0..2 {
        assert_eq!(
            server.get("/v1/providers/acme/absent/versions").status(),
            404
        );
    }
    // The registry's own listener has no /metrics (a path no route matches).
    assert_eq!(server.get("/metrics").status(), 404);
    // A publish refused at complete (no upload was begun): a 400, counted.
    let refused = server
        .http
        .post(server.url("/v1/publish/providers/acme/thing/1.0.0/complete"))
        .bearer_auth(&publish)
        .json(&serde_json::json!({"files": []}))
        .send()
        .unwrap();
    assert_eq!(refused.status(), 400);

    let after = Scrape::of(&metrics);
    let requests = "tfreg_requests";
    let delta = |endpoint: &str, class: &str| {
        let labels = [("endpoint", endpoint), ("status_class", class)];
        after.value(requests, "tfreg_requests_total", &labels)
            - before.value(requests, "tfreg_requests_total", &labels)
    };
    assert_eq!(after.families[requests]["type"], "counter");
    assert_eq!(delta("discovery", "2xx"), 3.0);
    assert_eq!(delta("provider-versions", "4xx"), 2.0);
    assert_eq!(delta("none", "4xx"), 1.0);
    assert_eq!(delta("publish", "4xx"), 1.0);
    // Nothing else was counted: 7 requests in all.
    assert_eq!(
        after.total(requests, "tfreg_requests_total")
            - before.total(requests, "tfreg_requests_total"),
        7.0
    );
    assert_eq!(
        after.value(
            "tfreg_publishes",
            "tfreg_publishes_total",
            &[("kind", "provider"), ("outcome", "refused")]
        ),
        1.0
    );

    // Histograms: a count per endpoint matching its requests, buckets
    // cumulative in `le` and ending at +Inf with the count.
    let durations = "tfreg_request_duration_seconds";
    assert_eq!(after.families[durations]["type"], "histogram");
    let count = |s: &Scrape, endpoint: &str| {
        s.value(
            durations,
            "tfreg_request_duration_seconds_count",
            &[("endpoint", endpoint)],
        )
    };
    assert_eq!(
        count(&after, "discovery") - count(&before, "discovery"),
        3.0
    );
    assert_eq!(count(&after, "provider-versions"), 2.0);
    let mut buckets: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for (name, labels, value) in after.samples(durations) {
        if name == "tfreg_request_duration_seconds_bucket" {
            let le = labels["le"].parse::<f64>().unwrap();
            buckets
                .entry(labels["endpoint"].clone())
                .or_default()
                .push((le, value));
        }
    }
    assert!(buckets.contains_key("provider-versions"), "{buckets:?}");
    for (endpoint, mut b) in buckets {
        b.sort_by(|x, y| x.0.partial_cmp(&y.0).unwrap());
        assert!(b.windows(2).all(|w| w[0].1 <= w[1].1), "{endpoint}: {b:?}");
        let (le, last) = *b.last().unwrap();
        assert!(le.is_infinite(), "{endpoint}: {b:?}");
        assert_eq!(last, count(&after, &endpoint), "{endpoint}");
    }

    // Every endpoint label is an endpoint's name, never a path.
    let names = endpoint_names();
    for family in [requests, durations] {
        for (_, labels, _) in after.samples(family) {
            let e = &labels["endpoint"];
            assert!(names.contains(e) && !e.contains('/'), "{family}: {e}");
        }
    }

    // The metrics listener serves GET /metrics and nothing else.
    let plain = reqwest::blocking::Client::new();
    let base = format!("http://{metrics}");
    for path in [
        "/",
        "/v1/providers/acme/absent/versions",
        "/.well-known/terraform.json",
    ] {
        assert_eq!(
            plain.get(format!("{base}{path}")).send().unwrap().status(),
            404,
            "{path}"
        );
    }
    assert_eq!(
        plain
            .post(format!("{base}/metrics"))
            .send()
            .unwrap()
            .status(),
        405
    );
    eprintln!(
        "FIGURE tfreg serve /metrics: {} families, {} samples",
        after.families.len(),
        after
            .families
            .values()
            .map(|f| f["samples"].as_array().unwrap().len())
            .sum::<usize>()
    );
}

#[test]
fn metrics_listen_is_off_by_default_and_its_help_says_why_it_is_separate() {
    let help = ok(
        Command::new(tfreg_bin())
            .args(["serve", "--help"])
            .output()
            .unwrap(),
        "tfreg serve --help",
    );
    let help = help.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(help.contains("--metrics-listen <ADDR>"), "{help}");
    assert!(help.contains("off by default"), "{help}");
    assert!(help.contains("admin token"), "{help}");
    assert!(help.contains("no names, versions or identities"), "{help}");
}

/// Every EMF line validated against the specification's schema, and the
/// rules a schema cannot say; each line's facts for the test.
const EMF_VALIDATE: &str = r#"
import json, sys
import jsonschema
schema = json.load(open(sys.argv[1]))
jsonschema.Draft7Validator.check_schema(schema)
validator = jsonschema.Draft7Validator(schema)
out = []
for text in sys.stdin.read().splitlines():
    doc = json.loads(text)
    errors = [e.message for e in validator.iter_errors(doc)]
    if errors:
        sys.exit(f"{text}: {errors}")
    for d in doc["_aws"]["CloudWatchMetrics"]:
        if len(d["Metrics"]) > 100:
            sys.exit(f"{text}: more than 100 metrics")
        for m in d["Metrics"]:
            v = doc.get(m["Name"])
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                sys.exit(f"{text}: metric {m['Name']} is no top-level number")
        for s in d["Dimensions"]:
            if len(s) > 30:
                sys.exit(f"{text}: more than 30 dimensions")
            for name in s:
                if not isinstance(doc.get(name), str):
                    sys.exit(f"{text}: dimension {name} is no top-level string")
    out.append(doc)
print(json.dumps(out))
"#;

/// The EMF lines in a function log (the lines with `_aws`), each parsed.
fn emf_lines(log: &str) -> Vec<String> {
    log.lines()
        .filter(|l| l.contains("\"_aws\""))
        .map(String::from)
        .collect()
}

/// Every line of `log` that names `_aws`, each a whole JSON document (none
/// torn by another line written at the same time) the specification
/// accepts.
fn validated_emf(log: &str) -> Vec<Value> {
    let all = emf_lines(log);
    let schema = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/suite/support/emf-schema.json");
    let code = format!(
        "import sys; sys.argv = ['-', {:?}]\n{EMF_VALIDATE}",
        schema.to_str().unwrap()
    );
    let docs = python(&code, &(all.join("\n") + "\n"));
    let docs = docs.as_array().unwrap().clone();
    assert_eq!(docs.len(), all.len());
    docs
}

#[test]
fn lambda_functions_print_emf_lines_the_specification_accepts() {
    let tmp = tempfile::tempdir().unwrap();
    let namespace = "tfreg/metrics-test";
    let server = Server::start_lambda_with(
        &tmp.path().join("lambda"),
        &[("TFREG_METRICS_NAMESPACE", namespace)],
    );
    let read = server.token("read", None);
    let publish = server.token("publish", None);
    let started_ms = tfreg_model::unix_now() * 1000;
    let earlier = emf_lines(&server.server_log()).len();

    for _ in 0..3 {
        assert_eq!(server.get("/.well-known/terraform.json").status(), 200);
    }
    // Private by default: 401 without a token, 404 with one.
    let versions = "/v1/providers/acme/absent/versions";
    assert_eq!(server.get(versions).status(), 401);
    let with_token = server
        .http
        .get(server.url(versions))
        .bearer_auth(&read)
        .send()
        .unwrap();
    assert_eq!(with_token.status(), 404);
    let refused = server
        .http
        .post(server.url("/v1/publish/providers/acme/thing/1.0.0/complete"))
        .bearer_auth(&publish)
        .json(&serde_json::json!({"files": []}))
        .send()
        .unwrap();
    assert_eq!(refused.status(), 400);

    let docs = validated_emf(&server.server_log());
    let docs = docs.as_slice();
    for d in docs {
        let directive = &d["_aws"]["CloudWatchMetrics"][0];
        assert_eq!(directive["Namespace"], namespace, "{d}");
        let at = d["_aws"]["Timestamp"].as_u64().unwrap();
        assert!(at >= started_ms.saturating_sub(120_000), "{d}");
    }

    // What this test asked for, exactly once each.
    let new = &docs[earlier..];
    let requests: Vec<&Value> = new.iter().filter(|d| d.get("Endpoint").is_some()).collect();
    let of = |endpoint: &str| -> Vec<&Value> {
        requests
            .iter()
            .copied()
            .filter(|d| d["Endpoint"] == endpoint)
            .collect()
    };
    assert_eq!(requests.len(), 6, "{requests:#?}");
    let discovery = of("discovery");
    assert_eq!(discovery.len(), 3);
    for d in &discovery {
        assert_eq!(
            (
                &d["Status"],
                &d["Requests"],
                &d["ClientErrors"],
                &d["ServerErrors"]
            ),
            (
                &serde_json::json!(200),
                &serde_json::json!(1),
                &serde_json::json!(0),
                &serde_json::json!(0)
            )
        );
    }
    let statuses: BTreeSet<u64> = of("provider-versions")
        .iter()
        .map(|d| {
            assert_eq!(
                (&d["ClientErrors"], &d["StatusClass"]),
                (&serde_json::json!(1), &serde_json::json!("4xx"))
            );
            assert_eq!(d["Function"], "read");
            d["Status"].as_u64().unwrap()
        })
        .collect();
    assert_eq!(statuses, BTreeSet::from([401, 404]));
    let publish_request = of("publish");
    assert_eq!(publish_request.len(), 1);
    assert_eq!(publish_request[0]["Function"], "publish");
    assert_eq!(publish_request[0]["Status"], 400);
    // The invocation's request id, one per request.
    let ids: BTreeSet<&str> = requests
        .iter()
        .map(|d| d["RequestId"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), requests.len());
    assert!(!ids.contains(""));
    // The publish's own line: by kind, refused counted as a failure.
    let publishes: Vec<&Value> = new
        .iter()
        .filter(|d| d.get("Publishes").is_some())
        .collect();
    assert_eq!(publishes.len(), 1, "{publishes:#?}");
    let p = publishes[0];
    assert_eq!(
        p["_aws"]["CloudWatchMetrics"][0]["Dimensions"],
        serde_json::json!([["Kind"]])
    );
    assert_eq!(
        (&p["Kind"], &p["Outcome"], &p["PublishFailures"]),
        (
            &serde_json::json!("provider"),
            &serde_json::json!("refused"),
            &serde_json::json!(1)
        )
    );

    // A cold start is each function's first request, and only that.
    let mut seen: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for d in docs.iter().filter(|d| d.get("Endpoint").is_some()) {
        seen.entry(d["Function"].as_str().unwrap().to_string())
            .or_default()
            .push(d["ColdStarts"].as_u64().unwrap());
    }
    for (function, cold) in &seen {
        assert_eq!(cold[0], 1, "{function}: {cold:?}");
        assert!(cold[1..].iter().all(|c| *c == 0), "{function}: {cold:?}");
    }
    eprintln!(
        "FIGURE EMF lines: {} validated ({} requests here), functions {:?}",
        docs.len(),
        requests.len(),
        seen.keys().collect::<Vec<_>>()
    );
}

/// Fills are recorded where a version's fill ends: the version (its
/// verified SHA256SUMS kept) and an archive filled from a real origin, and
/// an archive whose origin is gone (origin_failed); a list fill is no
/// fill of a version.
#[test]
fn tfreg_serve_counts_the_cache_s_fills_by_outcome() {
    use crate::cache_mirror::{LOOPBACK, Origin, Rig};
    let tmp = tempfile::tempdir().unwrap();
    let origin = Origin::start(tmp.path(), "127.0.0.138", "origin-metrics.example.test");
    let metrics = format!("127.0.0.1:{}", free_port());
    let listen = format!("127.0.0.1:{}", free_port());
    let server = Server::start_at(
        &tmp.path().join("data"),
        &listen,
        &[
            "--private",
            "--upstream-connect-allow",
            LOOPBACK,
            "--metrics-listen",
            &metrics,
        ],
    );
    let rig = Rig::configured(server, origin.upstream_args());
    let base = format!("/v1/mirror/{}/hashicorp/null", origin.host);
    let fills = |s: &Scrape, outcome: &str| {
        s.value(
            "tfreg_fills",
            "tfreg_fills_total",
            &[("kind", "provider"), ("outcome", outcome)],
        )
    };

    let (status, _) = rig.get_as(&format!("{base}/index.json"), &rig.fill);
    assert_eq!(status, 200);
    assert_eq!(
        Scrape::of(&metrics).total("tfreg_fills", "tfreg_fills_total"),
        0.0
    );
    let (status, version) = rig.get_as(&format!("{base}/1.0.0.json"), &rig.fill);
    assert_eq!(status, 200, "{version}");
    let url = |platform: &str| {
        version["archives"][platform]["url"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(rig.download(&url("linux_amd64")).0, 200);
    let filled = Scrape::of(&metrics);
    assert_eq!(fills(&filled, "filled"), 2.0);
    assert_eq!(
        filled.value(
            "tfreg_fill_duration_seconds",
            "tfreg_fill_duration_seconds_count",
            &[("kind", "provider")]
        ),
        2.0
    );

    // The origin gone: the other platform's archive cannot be filled.
    drop(origin.server);
    let (status, _) = rig.download(&url("darwin_arm64"));
    assert!(status >= 500, "{status}");
    let after = Scrape::of(&metrics);
    assert_eq!(fills(&after, "origin_failed"), 1.0);
    assert_eq!(after.total("tfreg_fills", "tfreg_fills_total"), 3.0);
}

/// The fill function's EMF lines: one per version filled from a real
/// origin (its release, then an archive), by kind, valid by the schema.
#[test]
fn the_fill_function_prints_a_fill_line_per_version_filled() {
    use crate::cache_mirror::{Origin, Rig};
    let tmp = tempfile::tempdir().unwrap();
    let origin = Origin::start(tmp.path(), "127.0.0.139", "origin-emf.example.test");
    let rig = Rig::on_lambda(tmp.path(), &origin);
    let base = format!("/v1/mirror/{}/hashicorp/null", origin.host);
    assert_eq!(rig.get_as(&format!("{base}/index.json"), &rig.fill).0, 200);
    let (status, version) = rig.get_as(&format!("{base}/1.0.0.json"), &rig.fill);
    assert_eq!(status, 200, "{version}");
    let url = version["archives"]["linux_amd64"]["url"].as_str().unwrap();
    assert_eq!(rig.download(url).0, 200);

    let docs = validated_emf(&rig.server.server_log());
    let fills: Vec<&Value> = docs.iter().filter(|d| d.get("Fills").is_some()).collect();
    assert_eq!(fills.len(), 2, "{fills:#?}");
    for f in &fills {
        assert_eq!(
            (
                &f["Kind"],
                &f["Outcome"],
                &f["FillFailures"],
                &f["Function"]
            ),
            (
                &serde_json::json!("provider"),
                &serde_json::json!("filled"),
                &serde_json::json!(0),
                &serde_json::json!("fill")
            )
        );
        assert!(f["FillDuration"].as_f64().unwrap() > 0.0, "{f}");
        assert_eq!(
            f["_aws"]["CloudWatchMetrics"][0]["Dimensions"],
            serde_json::json!([["Kind"]])
        );
    }
}
