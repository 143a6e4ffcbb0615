//! End to end: `terraform init` of one configuration with 10 providers and 10
//! modules against `tfreg serve` (registry protocol, private, a read token in
//! a `credentials` block) and against nginx serving the same archives as
//! static files (providers as a network mirror, modules as archive URLs),
//! alternating, in the same run. It also counts what one init asked of tfreg,
//! by endpoint, and the bytes involved: the inputs of the cost model.

use std::collections::BTreeMap;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub(crate) mod edge;
pub(crate) mod modes;
pub(crate) mod subjects;
pub(crate) mod workspace;

use subjects::*;
use workspace::Workspace;

use crate::cost::delivery::{self, BLOB, Delivery};
use crate::cost::{self, PerInit};
use crate::report::Section;
use crate::tools::{Error, free_port, median, require_env, sibling_binary};

pub(crate) const NS: &str = "bench";
pub(crate) const COUNT: usize = 10;
pub(crate) const VERSION: &str = "1.0.0";
/// The providers' hostname in the nginx configuration: Terraform cannot ask a
/// network mirror for a provider whose hostname has a port ("first path
/// segment in URL cannot contain colon"), and a mirror never contacts it.
const MIRRORED_HOST: &str = "registry.bench.test";
/// The three that serve the same configuration.
const TFREG: &str = "tfreg";
const LAMBDA: &str = "lambda";
const NGINX: &str = "nginx";
/// The Lambda functions again, archives from the CloudFront stand-in.
const EDGE: &str = "lambda-edge";

pub fn run(rounds: usize) -> Result<Section, Error> {
    let terraform = require_env("TFREG_TERRAFORM_NEW")?;
    let terraform_version = require_env("TFREG_TERRAFORM_NEW_VERSION")?
        .display()
        .to_string();
    let null_provider = require_env("TFREG_NULL_PROVIDER")?;
    let nginx_bin = require_env("TFREG_NGINX")?;
    let tfreg = sibling_binary("tfreg")?;
    let tmp = tempfile::tempdir()?;
    let dir = tmp.path();

    let registry = Registry::start(&tfreg, &dir.join("data"))?;
    let fixture = Fixture::write(&dir.join("fixture"), &std::fs::read(null_provider)?)?;
    let read_token = registry.publish_fixture(&fixture)?;
    // The same registry as the Lambda functions, started the README's way.
    let lambda = Registry::start_lambda(&tfreg, &dir.join("lambda"), Delivery::Presigned)?;
    let lambda_read_token = lambda.publish_fixture(&fixture)?;
    // And once more with archives from the edge, when scripts/lambda-local
    // can put the CloudFront stand-in in front of the S3 emulator.
    let edge = match edge::supported() {
        true => Some(Registry::start_lambda(
            &tfreg,
            &dir.join("lambda-edge"),
            Delivery::CloudFront,
        )?),
        false => None,
    };
    let edge_read_token = edge
        .as_ref()
        .map(|e| e.publish_fixture(&fixture))
        .transpose()?;

    let static_site = StaticSite::write(&dir.join("www"), &registry, &read_token, &fixture)?;
    let nginx = Nginx::start(&nginx_bin, &dir.join("nginx"), &static_site.root, &registry)?;

    let tfreg_config = Workspace::for_registry(&dir.join("with-tfreg"), &registry, &read_token)?;
    let lambda_config =
        Workspace::for_registry(&dir.join("with-lambda"), &lambda, &lambda_read_token)?;
    let edge_config = match (&edge, &edge_read_token) {
        (Some(e), Some(token)) => Some(Workspace::for_registry(
            &dir.join("with-lambda-edge"),
            e,
            token,
        )?),
        _ => None,
    };
    let nginx_config = Workspace::write(
        &dir.join("with-nginx"),
        MIRRORED_HOST,
        &format!(
            "provider_installation {{\n  network_mirror {{\n    url = \"https://{}/providers/\"\n  }}\n}}\n",
            nginx.host
        ),
        |i| format!("source = \"https://{}/modules/m{i}.tar.gz\"", nginx.host),
    )?;

    // Every run starts with no .terraform, no lock file and no plugin cache.
    // A first init of each, untimed in the medians: it starts the functions
    // (cargo lambda watch starts each on its first request) and warms caches.
    let mut targets: Vec<(&str, &Workspace, &Path)> = vec![
        (TFREG, &tfreg_config, &registry.ca),
        (LAMBDA, &lambda_config, &lambda.ca),
        (NGINX, &nginx_config, &registry.ca),
    ];
    if let (Some(e), Some(config)) = (&edge, &edge_config) {
        targets.push((EDGE, config, &e.ca));
    }
    // The registries whose request lines are counted, by target name.
    let mut watched: Vec<(&str, &Registry)> = vec![(TFREG, &registry), (LAMBDA, &lambda)];
    if let Some(e) = &edge {
        watched.push((EDGE, e));
    }
    let mut first: BTreeMap<&str, f64> = BTreeMap::new();
    for (name, workspace, ca) in &targets {
        first.insert(name, workspace.init(&terraform, ca)?);
    }
    // Then rounds, rotating which goes first.
    let mut times: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    let mut counted: BTreeMap<&str, Counted> = BTreeMap::new();
    let mut blob_requests = None;
    let mut edge_count = None;
    let mut tfreg_lines_during_nginx = 0;
    for round in 0..rounds {
        for k in 0..targets.len() {
            let (name, workspace, ca) = targets[(round + k) % targets.len()];
            let offsets = watched
                .iter()
                .map(|(_, r)| r.log_len())
                .collect::<Result<Vec<_>, Error>>()?;
            let edge_offset = edge.as_ref().map(edge::log_len).transpose()?;
            let seconds = workspace.init(&terraform, ca)?;
            let mut lines = BTreeMap::new();
            for ((who, r), offset) in watched.iter().zip(offsets) {
                lines.insert(*who, r.log_since(offset)?);
            }
            if name == NGINX {
                tfreg_lines_during_nginx += lines
                    .values()
                    .map(|l| count_requests(l).0.values().sum::<u64>())
                    .sum::<u64>();
            } else if !counted.contains_key(name) {
                counted.insert(name, count_requests(&lines[name]));
                if name == LAMBDA {
                    blob_requests = Some(modes::by_method(&lines[name], BLOB));
                }
                if let (EDGE, Some(e), Some(offset)) = (name, &edge, edge_offset) {
                    edge_count = Some(modes::EdgeCount::from_log(&edge::log_since(e, offset)?));
                }
            }
            times.entry(name).or_default().push(seconds);
        }
    }
    let (requests, log_bytes, latencies) = counted.remove(TFREG).ok_or("no rounds were run")?;
    let lambda_requests = counted.remove(LAMBDA).map(|c| c.0).unwrap_or_default();
    let edge_requests = counted.remove(EDGE).map(|c| c.0);
    let tfreg_s = median(&times[TFREG]);
    let lambda_s = median(&times[LAMBDA]);
    let nginx_s = median(&times[NGINX]);

    let per_init = per_init(&registry, &fixture, &requests, log_bytes, &latencies)?;
    let bill = cost::per_thousand_inits(&per_init);
    let idle = cost::idle_per_month(registry.table_bytes()?, fixture.archive_bytes());
    let cacheable = cost::edge_cacheable(&bill);
    let dominant = &bill[0];
    // Counted when the functions in cloudfront mode sent the init to the
    // edge (functions without that mode hand out their own URLs: derived).
    let edge_count = edge_count.filter(|c| c.requests() > 0 && edge_requests.is_some());
    let derived_because = match edge {
        None => modes::NO_STAND_IN,
        Some(_) => modes::NOT_AT_THE_EDGE,
    };
    let cloudfront = match (&edge_requests, &edge_count) {
        (Some(functions), Some(count)) => modes::counted_cloudfront(&per_init, functions, count),
        _ => delivery::derived_cloudfront(&per_init),
    };
    let modes = modes::Modes {
        presigned: per_init.clone(),
        cloudfront,
        blob: blob_requests.unwrap_or_default(),
        edge: edge_count,
        derived_because,
    };
    let profile = edge::PROFILE;

    let mut markdown = format!(
        "`terraform init` (Terraform {terraform_version}) of one configuration with {COUNT} providers (each the real hashicorp/null 2.1.2 binary, {:.1} MB zipped) and {COUNT} modules, from nothing each time (no `.terraform`, no lock file, no plugin cache); {rounds} rounds, alternating which goes first; medians.\n\n\
         | served by | init (median) | ratio to nginx | first init |\n|---|---:|---:|---:|\n\
         | tfreg serve (registry protocol, private, token in a `credentials` block) | {tfreg_s:.2} s | {:.2} | {:.2} s |\n\
         | tfreg's Lambda functions under `cargo lambda watch` on the DynamoDB and S3 emulators (`scripts/lambda-local`, {profile} profile: the same protocol and token; the blob function redirects each archive to a presigned URL of the S3 emulator) | {lambda_s:.2} s | {:.2} | {:.2} s |\n",
        fixture.provider_zip_bytes as f64 / 1e6,
        tfreg_s / nginx_s,
        first[TFREG],
        lambda_s / nginx_s,
        first[LAMBDA],
    );
    if let Some(edge_times) = times.get(EDGE) {
        let edge_s = median(edge_times);
        markdown += &format!(
            "| the same functions with `TFREG_ARCHIVE_DELIVERY=cloudfront`, archives from the CloudFront stand-in (a Python HTTPS server checking each signed URL, then reading the S3 emulator: no cache, so not CloudFront's speed) | {edge_s:.2} s | {:.2} | {:.2} s |\n",
            edge_s / nginx_s,
            first[EDGE],
        );
    }
    markdown += &format!(
        "| nginx static files (providers as a network mirror, modules as archive URLs) | {nginx_s:.2} s | 1.00 | {:.2} s |\n\n\
         The first init of each, before the rounds, is not in the medians: for the Lambda functions it includes starting each one (cargo lambda watch starts a function on its first request; in AWS that is a cold start, measured in the lambda section). tfreg answered {tfreg_lines_during_nginx} requests during the nginx runs (0 means they used nginx alone).\n\n",
        first[NGINX],
    );
    markdown += "### What one init asks of tfreg\n\nCounted from the request lines of one init (the Lambda functions' count is a cross-check: the same client, the same protocol).\n\n";
    markdown += &edge::requests_table(&requests, &lambda_requests, edge_requests.as_ref());
    markdown += &format!(
        "\n### Cost of 1,000 inits on AWS (presigned mode)\n\nFrom the counts above, deployed as template.yaml deploys it with `TFREG_ARCHIVE_DELIVERY=presigned`: discovery from CloudFront, every other request a Lambda function behind the HTTP API, archives included (the blob function checks the signed URL and redirects to a presigned S3 URL: one S3 GET more each; a HEAD, one S3 HeadObject). No free tier counted here (the modes below count it). Inputs: {} invocations per init; {:.1} DynamoDB read units per init (each function reads one item, strongly consistent: 1 unit per 4 KB of item; plus one token lookup per endpoint, a token stays cached in a warm function for 10 s); {:.0} ms billed per invocation (the median handler time measured here, {:.2} ms, plus 5 ms for a DynamoDB round trip in the region, rounded up to the millisecond Lambda bills by); {} B of logs per invocation (this run's request lines, {:.0} B each, plus Lambda's START/END/REPORT platform lines); {} MB read functions (template.yaml `ReadMemorySize`).\n\n{}\nThe largest line is **{}** ({}): the archives themselves, out of S3; the `cloudfront` mode below sends them from CloudFront instead. Of what tfreg itself decides, API Gateway, logs and Lambda lead.\n\n**Edge caching of read responses** (CloudFront in front of the API, the token in the cache key, a short TTL) would not pay: a request CloudFront answers costs USD 1.00 per million, what the HTTP API request it replaces costs, so a cache hit saves only the Lambda, DynamoDB and log lines behind it, at most USD {:.5} per 1,000 inits ({:.2}% of the bill), while every revoked token could go on reading cached answers for the TTL. Not done (archives are another matter: no token travels with them, see below).\n\n{}\n### Idle cost per month\n\nStorage only (no provisioned capacity anywhere: HTTP API, Lambda, on-demand DynamoDB and CloudFront cost nothing idle); logs add USD 0.03 per GB kept for `LogRetentionDays`.\n\n{}",
        per_init.invocations(),
        per_init.dynamodb_read_units,
        per_init.billed_ms_per_invocation,
        median(&latencies),
        per_init.log_bytes_per_invocation,
        log_bytes as f64 / requests.values().sum::<u64>().max(1) as f64,
        per_init.memory_mb,
        cost::table(&bill, "USD per 1,000 inits"),
        dominant.service,
        dominant.what,
        cacheable,
        cacheable / cost::total(&bill) * 100.0,
        modes.markdown(),
        cost::table(&idle, "USD per month"),
    );
    let figures = serde_json::json!({
        "rounds": rounds,
        "init_seconds": times,
        "first_init_seconds": first,
        "ratio_tfreg_to_nginx": tfreg_s / nginx_s,
        "ratio_lambda_to_nginx": lambda_s / nginx_s,
        "requests_per_init": requests,
        "requests_per_init_lambda": lambda_requests,
        "per_init": per_init,
        "usd_per_1000_inits": cost::total(&bill),
        "usd_idle_per_month": cost::total(&idle),
        "requests_per_init_lambda_edge": edge_requests,
        "profile": profile,
        "modes": modes.figures(),
    });
    drop(nginx);
    drop(edge);
    drop(lambda);
    drop(registry);
    Ok(Section {
        name: "e2e".into(),
        title: "End to end: terraform init of 10 providers and 10 modules, and its cost".into(),
        markdown,
        figures,
    })
}

/// Requests by endpoint, log bytes and handler latencies (ms).
pub(crate) type Counted = (BTreeMap<String, u64>, u64, Vec<f64>);

/// Requests by endpoint, log bytes and handler latencies (ms) in request lines.
pub(crate) fn count_requests(lines: &[String]) -> Counted {
    let mut by_endpoint = BTreeMap::new();
    let mut bytes = 0;
    let mut latencies = Vec::new();
    for line in lines {
        let Some(endpoint) = field(line, "endpoint") else {
            continue;
        };
        bytes += line.len() as u64 + 1;
        *by_endpoint.entry(endpoint).or_insert(0) += 1;
        if let Some(ms) = field(line, "latency_ms").and_then(|v| v.parse().ok()) {
            latencies.push(ms);
        }
    }
    (by_endpoint, bytes, latencies)
}

/// `name=value` or `name="value"` (text logs) or `"name":value` (JSON logs).
pub(crate) fn field(line: &str, name: &str) -> Option<String> {
    let rest = line
        .split_once(&format!(" {name}="))
        .or_else(|| line.split_once(&format!("\"{name}\":")))?
        .1;
    let value = match rest.strip_prefix('"') {
        Some(quoted) => quoted.split('"').next()?,
        None => rest.split([' ', ',', '}']).next()?,
    };
    Some(value.to_string())
}

/// The endpoint AWS serves from CloudFront rather than a function.
const CLOUDFRONT: &str = "discovery";

fn per_init(
    registry: &Registry,
    fixture: &Fixture,
    requests: &BTreeMap<String, u64>,
    log_bytes: u64,
    latencies: &[f64],
) -> Result<PerInit, Error> {
    let function_requests: BTreeMap<String, u64> = requests
        .iter()
        .filter(|(e, _)| *e != CLOUDFRONT)
        .map(|(e, n)| (e.clone(), *n))
        .collect();
    let blobs = requests.get(BLOB).copied().unwrap_or(0);
    let lines: u64 = requests.values().sum();
    // Read units: every function request but a blob's reads one item (rounded
    // up to 4 KB, strongly consistent), and each of those endpoints' functions
    // looks its token up once.
    let item_units = registry.read_units_per_request()?;
    let reading = function_requests.keys().filter(|e| *e != BLOB).count();
    let reads: u64 = function_requests.values().sum::<u64>() - blobs;
    let dynamodb_read_units = reads as f64 * item_units + reading as f64 * 1.0;
    let handler_ms = median(latencies);
    Ok(PerInit {
        cloudfront_requests: requests.get(CLOUDFRONT).copied().unwrap_or(0),
        cloudfront_bytes: registry.discovery_bytes as u64,
        s3_requests: blobs,
        s3_bytes: fixture.archive_bytes(),
        function_bytes: 0,
        dynamodb_read_units,
        log_bytes_per_invocation: (log_bytes as f64 / lines.max(1) as f64
            + LAMBDA_PLATFORM_LINE_BYTES)
            .round(),
        billed_ms_per_invocation: (handler_ms + 5.0).ceil(),
        memory_mb: 256.0,
        function_requests,
    })
}

/// Lambda's own lines per invocation in JSON log format (`platform.start`,
/// `platform.report`; the sizes of the documented examples, in bytes).
pub(crate) const LAMBDA_PLATFORM_LINE_BYTES: f64 = 160.0 + 420.0;

/// Ten goreleaser-style provider releases and ten module archives.
pub(crate) struct Fixture {
    pub(crate) provider_dists: Vec<PathBuf>,
    pub(crate) module_archives: Vec<PathBuf>,
    pub(crate) provider_zip_bytes: u64,
    /// Every file an init downloads: zips, SHA256SUMS, signatures, modules.
    downloaded: Vec<PathBuf>,
}

impl Fixture {
    pub(crate) fn write(dir: &Path, provider_binary: &[u8]) -> Result<Fixture, Error> {
        let signer = tfreg_testkit::TestSigner::rsa();
        let mut fixture = Fixture {
            provider_dists: Vec::new(),
            module_archives: Vec::new(),
            provider_zip_bytes: 0,
            downloaded: Vec::new(),
        };
        for i in 0..COUNT {
            let ty = format!("p{i}");
            let dist = dir.join(&ty);
            std::fs::create_dir_all(&dist)?;
            let zip_name = format!("terraform-provider-{ty}_{VERSION}_linux_amd64.zip");
            let zip = tfreg_testkit::zip_with(&[(
                &format!("terraform-provider-{ty}_v{VERSION}_x5"),
                provider_binary,
            )]);
            fixture.provider_zip_bytes = zip.len() as u64;
            let sums = format!("{}  {zip_name}\n", tfreg_model::hashing::sha256_hex(&zip));
            let sums_name = format!("terraform-provider-{ty}_{VERSION}_SHA256SUMS");
            std::fs::write(dist.join(&zip_name), &zip)?;
            std::fs::write(dist.join(&sums_name), &sums)?;
            std::fs::write(
                dist.join(format!("{sums_name}.sig")),
                signer.sign(sums.as_bytes()),
            )?;
            std::fs::write(dist.join("key.asc"), signer.public_armor)?;
            fixture.downloaded.extend([
                dist.join(&zip_name),
                dist.join(&sums_name),
                dist.join(format!("{sums_name}.sig")),
            ]);
            fixture.provider_dists.push(dist);

            let archive = dir.join(format!("m{i}.tar.gz"));
            std::fs::write(
                &archive,
                tfreg_testkit::module_archive(&[(
                    "main.tf",
                    &format!(
                        "variable \"size\" {{\n  default = {i}\n}}\noutput \"size\" {{\n  value = var.size\n}}\n"
                    ),
                )]),
            )?;
            fixture.downloaded.push(archive.clone());
            fixture.module_archives.push(archive);
        }
        Ok(fixture)
    }

    pub(crate) fn archive_bytes(&self) -> u64 {
        self.downloaded
            .iter()
            .map(|p| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0))
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_read_from_both_log_formats() {
        let text = "2026-11-23T04:00:00Z  INFO request method=GET path=/v1/x endpoint=\"provider-versions\" status=200 latency_ms=0.42";
        assert_eq!(
            field(text, "endpoint").as_deref(),
            Some("provider-versions")
        );
        assert_eq!(field(text, "latency_ms").as_deref(), Some("0.42"));
        let json = r#"{"level":"INFO","fields":{"endpoint":"blob","status":200,"latency_ms":1.5}}"#;
        assert_eq!(field(json, "endpoint").as_deref(), Some("blob"));
        assert_eq!(field(json, "latency_ms").as_deref(), Some("1.5"));
        assert_eq!(field(json, "missing"), None);
    }

    #[test]
    fn requests_are_counted_by_endpoint_with_their_log_bytes() {
        let lines = vec![
            "x endpoint=blob latency_ms=1".to_string(),
            "x endpoint=blob latency_ms=3".to_string(),
            "starting up".to_string(),
            "x endpoint=discovery latency_ms=2".to_string(),
        ];
        let (counts, bytes, latencies) = count_requests(&lines);
        assert_eq!(counts["blob"], 2);
        assert_eq!(counts["discovery"], 1);
        assert_eq!(
            bytes,
            (lines[0].len() + lines[1].len() + lines[3].len() + 3) as u64
        );
        assert_eq!(latencies, vec![1.0, 3.0, 2.0]);
    }
}
