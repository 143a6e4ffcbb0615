//! `tfreg-bench lambda`: what a Lambda function of tfreg costs beside two
//! baselines built with the same release profile: the smallest `lambda_http`
//! function (the package `bench/lambda-hello`), and the smallest one that
//! reads one DynamoDB item a request with the functions' SDK crates
//! (`bench/lambda-hello-dynamodb`), the floor of a function that reads the
//! table. Binary and zipped size (`zip -9`: what Lambda stores and loads),
//! and cold start against a Runtime API served on loopback (`runtime_api`),
//! with DynamoDB and S3 on the emulators. Runs alternate between tfreg and
//! the baselines; medians and ratios.

mod arm64;
mod bloat;
mod check;
mod counting;
mod edge;
mod first_requests;
mod runtime_api;
mod seed;

use arm64::{arm64_markdown, arm64_zip};
use bloat::{bloat, bloat_markdown};
use check::{check_markdown, check_starts};
use counting::{counting, counting_markdown};
use first_requests::{first_requests, first_requests_markdown};

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

use crate::report::Section;

/// One deployed function: the binary it runs, a request for its route,
/// the status it must answer (a function that fails fast is not a fast one)
/// and whether answering it reads the table.
struct Function {
    endpoint: &'static str,
    binary: &'static str,
    method: &'static str,
    path: &'static str,
    status: u16,
    table: Table,
    delivery: Delivery,
}

/// How the function hands out archive URLs: the registry's own (presigned
/// S3 behind the blob function, the default), or CloudFront signed URLs
/// with a key read from SSM at init ([`edge`]).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Delivery {
    Presigned,
    CloudFront,
}

/// Whether a function's request reads the table: those that do are measured
/// beside the DynamoDB baseline too.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Table {
    Read,
    Untouched,
}

const fn function(
    endpoint: &'static str,
    binary: &'static str,
    (method, path): (&'static str, &'static str),
    status: u16,
    table: Table,
) -> Function {
    Function {
        endpoint,
        binary,
        method,
        path,
        status,
        table,
        delivery: Delivery::Presigned,
    }
}

/// `function`, in `TFREG_ARCHIVE_DELIVERY=cloudfront` mode.
const fn at_edge(function: Function) -> Function {
    Function {
        delivery: Delivery::CloudFront,
        ..function
    }
}

/// template.yaml's functions (by their route) and the binary each runs. Anonymous reads
/// are on, and the table holds one provider and one module ([`seed`]): the
/// read routes other than discovery answer them from DynamoDB (one
/// `GetItem`); the cache routes, with no upstream configured, 404 after one
/// read; blob refuses a URL without its signature (400); publish and admin
/// answer 401 to a request without a token; the UI's home page lists the
/// two (one Query); auth, started without an identity provider, answers its
/// routes with 404. Only the read routes and the UI read the table.
const FUNCTIONS: &[Function] = &[
    function(
        "discovery",
        "read",
        ("GET", "/.well-known/terraform.json"),
        200,
        Table::Untouched,
    ),
    function(
        "provider-versions",
        "read",
        ("GET", "/v1/providers/acme/widget/versions"),
        200,
        Table::Read,
    ),
    function(
        "provider-download",
        "read",
        (
            "GET",
            "/v1/providers/acme/widget/1.0.0/download/linux/amd64",
        ),
        200,
        Table::Read,
    ),
    function(
        "module-versions",
        "read",
        ("GET", "/v1/modules/acme/net/aws/versions"),
        200,
        Table::Read,
    ),
    function(
        "module-download",
        "read",
        ("GET", "/v1/modules/acme/net/aws/1.0.0/download"),
        204,
        Table::Read,
    ),
    function(
        "mirror-index",
        "read",
        (
            "GET",
            "/v1/mirror/registry.example.com/acme/widget/index.json",
        ),
        200,
        Table::Read,
    ),
    function(
        "mirror-version",
        "read",
        (
            "GET",
            "/v1/mirror/registry.example.com/acme/widget/1.0.0.json",
        ),
        200,
        Table::Read,
    ),
    // OpenTofu over OCI (issue 40), the OCI function: a provider version's
    // image index (the heaviest of its answers: every platform's manifest
    // digested).
    function(
        "oci",
        "read",
        ("GET", "/v2/providers/acme/widget/manifests/1.0.0"),
        200,
        Table::Read,
    ),
    // No upstream is configured: 404, after one read.
    function(
        "cache-provider-versions",
        "read",
        (
            "GET",
            "/v1/cache/registry.terraform.io/providers/hashicorp/null/versions",
        ),
        404,
        Table::Read,
    ),
    function(
        "cache-provider-download",
        "read",
        (
            "GET",
            "/v1/cache/registry.terraform.io/providers/hashicorp/null/1.0.0/download/linux/amd64",
        ),
        404,
        Table::Read,
    ),
    function(
        "cache-module-versions",
        "read",
        (
            "GET",
            "/v1/cache/registry.terraform.io/modules/hashicorp/consul/aws/versions",
        ),
        404,
        Table::Read,
    ),
    function(
        "cache-module-download",
        "read",
        (
            "GET",
            "/v1/cache/registry.terraform.io/modules/hashicorp/consul/aws/1.0.0/download",
        ),
        404,
        Table::Read,
    ),
    function(
        "blob",
        "blob",
        ("GET", "/v1/blobs/providers/acme/widget/1.0.0/x.zip"),
        400,
        Table::Untouched,
    ),
    function(
        "publish",
        "publish",
        ("POST", "/v1/publish/providers/acme/widget/1.0.0/begin"),
        401,
        Table::Untouched,
    ),
    function(
        "admin",
        "admin",
        ("GET", "/v1/admin/tokens"),
        401,
        Table::Untouched,
    ),
    function("ui", "ui", ("GET", "/ui/home"), 200, Table::Read),
    // Without an identity provider the auth function serves no sign-in: 404.
    function(
        "auth",
        "auth",
        ("GET", "/oauth/authorize"),
        404,
        Table::Untouched,
    ),
    // The signing functions in cloudfront mode (issue 37): the key read from
    // SSM at init; one URL signed (a provider download), one per platform (a
    // mirror's version), none (blob refuses an unsigned URL first).
    at_edge(function(
        "provider-download, cloudfront",
        "read",
        (
            "GET",
            "/v1/providers/acme/widget/1.0.0/download/linux/amd64",
        ),
        200,
        Table::Read,
    )),
    at_edge(function(
        "mirror-version, cloudfront",
        "read",
        (
            "GET",
            "/v1/mirror/registry.example.com/acme/widget/1.0.0.json",
        ),
        200,
        Table::Read,
    )),
    at_edge(function(
        "blob, cloudfront",
        "blob",
        ("GET", "/v1/blobs/providers/acme/widget/1.0.0/x.zip"),
        400,
        Table::Untouched,
    )),
];

/// The baseline: a `lambda_http` hello-world, built like the functions.
const HELLO: &str = "lambda-hello";
const HELLO_PACKAGE: &str = "tfreg-lambda-hello";
/// The baseline of the functions that read the table: a `lambda_http`
/// function making one DynamoDB `GetItem` a request with the functions' SDK
/// crates and HTTPS client, nothing of tfreg; built like the functions.
const HELLO_DYNAMODB: &str = "lambda-hello-dynamodb";
const HELLO_DYNAMODB_PACKAGE: &str = "tfreg-lambda-hello-dynamodb";
/// Both baselines: (package, binary).
const BASELINES: [(&str, &str); 2] = [
    (HELLO_PACKAGE, HELLO),
    (HELLO_DYNAMODB_PACKAGE, HELLO_DYNAMODB),
];

#[derive(clap::Args, Clone)]
pub struct Args {
    /// Cold starts of each function, and as many of the hello-world beside
    /// each (and of the DynamoDB baseline beside each that reads the table).
    #[arg(long, default_value_t = 15)]
    pub runs: usize,
    /// Take the binaries from here (`<dir>/<binary>`, or cargo lambda's
    /// `<dir>/<binary>/bootstrap`) instead of building them with the release profile.
    #[arg(long)]
    pub bin_dir: Option<PathBuf>,
    /// A check, not a benchmark: start each function once, without the
    /// baseline, and fail unless each answers its route as it should
    /// (infra/check-cargo-lambda, on the zips cargo lambda built).
    #[arg(long)]
    pub check: bool,
    /// Start each binary through this command, e.g. `qemu-aarch64 -L
    /// /usr/aarch64-linux-gnu` for arm64 binaries on x86_64 (with --check:
    /// emulated start times are no figures).
    #[arg(long, requires = "check")]
    pub runner: Option<String>,
    /// Skip the largest crates of each binary (`cargo bloat`: a second
    /// release build of every binary, symbols kept, as long as the first):
    /// the section then says they were not measured.
    #[arg(long, conflicts_with = "check")]
    pub no_bloat: bool,
    /// With --check: also start this build of `tests/panic-probe` and fail
    /// unless a request that panics is a 500 and the same process answers
    /// the next one.
    #[arg(long, requires = "check")]
    pub panic_probe: Option<PathBuf>,
    /// Measure only what counting downloads costs a download (the section's
    /// last table), not the sizes and cold starts.
    #[arg(long, conflicts_with = "check")]
    pub only_counting: bool,
}

impl Default for Args {
    fn default() -> Self {
        Self {
            runs: 15,
            bin_dir: None,
            check: false,
            no_bloat: false,
            runner: None,
            panic_probe: None,
            only_counting: false,
        }
    }
}

type BoxError = Box<dyn std::error::Error>;

fn binaries(with_baseline: bool) -> Vec<&'static str> {
    let mut names: Vec<&str> = FUNCTIONS.iter().map(|f| f.binary).collect();
    // The function no route reaches (started by check::check_fill).
    names.push("fill");
    if with_baseline {
        names.extend(BASELINES.map(|(_, binary)| binary));
    }
    names.sort_unstable();
    names.dedup();
    names
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("bench/ is in the workspace")
        .to_path_buf()
}

/// Build every binary with the release profile: each function's package
/// alone (as `sam build` does: one package a build, so each is built with
/// only its own features), then the baselines'.
fn build() -> Result<PathBuf, BoxError> {
    let mut builds: Vec<(String, Vec<&str>)> = binaries(false)
        .into_iter()
        .map(|name| (format!("tfreg-function-{name}"), vec![name]))
        .collect();
    builds.extend(BASELINES.map(|(package, binary)| (package.to_string(), vec![binary])));
    for (package, bins) in builds {
        let mut command =
            std::process::Command::new(std::env::var("CARGO").unwrap_or("cargo".into()));
        command
            .current_dir(workspace())
            .args(["build", "--release", "--locked", "-p", &package]);
        for name in &bins {
            command.args(["--bin", name]);
        }
        eprintln!("lambda: building {package} {bins:?} (release profile)");
        if !command.status()?.success() {
            return Err(format!("cargo build --release -p {package} failed").into());
        }
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("target"));
    Ok(target.join("release"))
}

fn locate(dir: &Path, name: &str) -> Result<PathBuf, BoxError> {
    [dir.join(name).join("bootstrap"), dir.join(name)]
        .into_iter()
        .find(|p| p.is_file())
        .ok_or_else(|| format!("no binary {name} in {}", dir.display()).into())
}

/// A binary given by path: cargo lambda's `<dir>/bootstrap` or the file.
fn locate_file(path: &Path) -> Result<PathBuf, BoxError> {
    [path.join("bootstrap"), path.to_path_buf()]
        .into_iter()
        .find(|p| p.is_file())
        .ok_or_else(|| format!("no binary at {}", path.display()).into())
}

/// Bytes of a Lambda zip holding `binary` as `bootstrap` (deflate, level 9).
pub fn zipped_size(binary: &[u8]) -> Result<u64, BoxError> {
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated)
        .compression_level(Some(9))
        .unix_permissions(0o755);
    zip.start_file("bootstrap", options)?;
    zip.write_all(binary)?;
    Ok(zip.finish()?.into_inner().len() as u64)
}

/// An API Gateway HTTP API (payload 2.0) event for `method path`.
pub fn http_api_event(method: &str, path: &str) -> serde_json::Value {
    serde_json::json!({
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": path,
        "rawQueryString": "",
        "headers": {
            "accept": "application/json",
            "host": "registry.example.com",
            "user-agent": "tfreg-bench",
            "x-forwarded-proto": "https",
            "x-forwarded-port": "443"
        },
        "requestContext": {
            "accountId": "000000000000",
            "apiId": "bench",
            "domainName": "registry.example.com",
            "domainPrefix": "registry",
            "http": {
                "method": method,
                "path": path,
                "protocol": "HTTP/1.1",
                "sourceIp": "192.0.2.1",
                "userAgent": "tfreg-bench"
            },
            "requestId": "bench-1",
            "routeKey": "$default",
            "stage": "$default",
            "time": "01/Jan/2026:00:00:00 +0000",
            "timeEpoch": 1_767_225_600_000u64
        },
        "isBase64Encoded": false
    })
}

pub fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The table and bucket of this run, on the emulators (never on AWS).
struct Backends {
    table: String,
    bucket: String,
}

async fn create_backends() -> Result<Backends, BoxError> {
    for var in ["AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL_S3"] {
        if std::env::var_os(var).is_none() {
            return Err(format!(
                "{var} is not set: the benchmark runs against the emulators (source .tools/run/emulators.env)"
            )
            .into());
        }
    }
    let id = format!("tfreg-bench-{}-{}", std::process::id(), unique());
    let (dynamodb, s3) = tfreg_store::aws::clients(true).await?;
    tfreg_store::dynamodb::DynamoStore::new(dynamodb, &id)
        .create_table()
        .await?;
    tfreg_store::s3::S3BlobStore::new(s3, &id, Duration::from_secs(60))
        .create_bucket()
        .await?;
    Ok(Backends {
        table: id.clone(),
        bucket: id,
    })
}

fn unique() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn command(
    binary: &Path,
    runner: &[String],
    function: &Function,
    backends: &Backends,
) -> tokio::process::Command {
    command_with(binary, runner, function, backends, &[])
}

/// [`command`], with `extra` in its environment (a signing function's, [`edge`]).
fn command_with(
    binary: &Path,
    runner: &[String],
    function: &Function,
    backends: &Backends,
    extra: &[(&'static str, String)],
) -> tokio::process::Command {
    let mut command = match runner.split_first() {
        Some((program, args)) => {
            let mut command = tokio::process::Command::new(program);
            command.args(args).arg(binary);
            command
        }
        None => tokio::process::Command::new(binary),
    };
    lambda_environment(&mut command, |name| std::env::var(name).ok());
    command
        .env("AWS_LAMBDA_FUNCTION_NAME", function.endpoint)
        .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256")
        .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        .env("AWS_LAMBDA_LOG_STREAM_NAME", "bench")
        .env("AWS_LAMBDA_LOG_GROUP_NAME", "bench")
        .env("TFREG_TABLE", &backends.table)
        .env("TFREG_BUCKET", &backends.bucket)
        .env("TFREG_HOSTNAME", "registry.example.com")
        .env("TFREG_ANONYMOUS_READS", "true")
        .env("TFREG_S3_FORCE_PATH_STYLE", "true")
        .envs(extra.iter().map(|(k, v)| (k, v)));
    command
}

/// What Lambda sets in a function's environment, other than the function's
/// own names (and the Runtime API's address, set by [`runtime_api`]), from
/// its documentation's list of defined runtime variables.
const LAMBDA_ENVIRONMENT: [(&str, &str); 6] = [
    ("PATH", "/usr/local/bin:/usr/bin/:/bin:/opt/bin"),
    ("LANG", "en_US.UTF-8"),
    ("TZ", ":UTC"),
    (
        "LD_LIBRARY_PATH",
        "/var/lang/lib:/lib64:/usr/lib64:/var/runtime:/var/runtime/lib:/var/task:/var/task/lib:/opt/lib",
    ),
    ("LAMBDA_TASK_ROOT", "/var/task"),
    ("LAMBDA_RUNTIME_DIR", "/var/runtime"),
];

/// Passed from the bench's own environment: the region and credentials
/// (Lambda sets the role's), the emulators' endpoints (a deployment against
/// them sets these), the log filter.
const PASSED_THROUGH: [&str; 10] = [
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_DYNAMODB",
    "AWS_ENDPOINT_URL_S3",
    "TFREG_LOG",
    "RUST_LOG",
];

/// Start from an empty environment, as Lambda does: nothing of the machine
/// running the bench reaches a function. A developer machine or a CI runner
/// often sets `SSL_CERT_FILE` and `SSL_CERT_DIR`, which Lambda does not;
/// inherited, they would make a function read and parse every certificate
/// of the system at init (a cost no deployed function pays).
fn lambda_environment(command: &mut tokio::process::Command, get: impl Fn(&str) -> Option<String>) {
    command.env_clear().envs(LAMBDA_ENVIRONMENT);
    for name in PASSED_THROUGH {
        if let Some(value) = get(name) {
            command.env(name, value);
        }
    }
}

#[derive(Serialize)]
struct Size {
    binary: String,
    bytes: u64,
    zipped: u64,
}

#[derive(Serialize)]
struct Start {
    endpoint: String,
    binary: String,
    status: u16,
    init_ms: f64,
    first_response_ms: f64,
    hello_init_ms: f64,
    hello_first_response_ms: f64,
    /// The DynamoDB baseline's, beside a function that reads the table.
    dynamodb_init_ms: Option<f64>,
    dynamodb_first_response_ms: Option<f64>,
}

/// Build (or take) the binaries, measure them and return the section.
pub fn run(args: &Args) -> Result<Section, BoxError> {
    let dir = match &args.bin_dir {
        Some(dir) => dir.clone(),
        None => build()?,
    };
    if args.only_counting {
        let counting = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?
            .block_on(counting(&dir, args.runs.clamp(1, 11)))?;
        let markdown = counting_markdown(&counting, args.runs.clamp(1, 11));
        println!("{markdown}");
        return Ok(Section {
            name: "lambda-counting".into(),
            title: "Lambda functions: what counting downloads costs a download".into(),
            markdown,
            figures: serde_json::json!({ "runs": args.runs, "counting": counting }),
        });
    }
    let mut sizes = Vec::new();
    for name in binaries(!args.check) {
        let bytes = std::fs::read(locate(&dir, name)?)?;
        sizes.push(Size {
            binary: name.to_string(),
            bytes: bytes.len() as u64,
            zipped: zipped_size(&bytes)?,
        });
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let runner: Vec<String> = args
        .runner
        .iter()
        .flat_map(|r| r.split_whitespace().map(String::from))
        .collect();
    if args.check {
        let mut starts = runtime.block_on(check_starts(&dir, &runner))?;
        if let Some(probe) = &args.panic_probe {
            starts.push(runtime.block_on(check::check_panic_probe(&locate_file(probe)?, &runner))?);
        }
        let markdown = check_markdown(&sizes, &starts, &runner);
        println!("{markdown}");
        return Ok(Section {
            name: "lambda-check".into(),
            title: "Lambda functions: each started once from its binary".into(),
            markdown,
            figures: serde_json::json!({ "sizes": sizes, "starts": starts }),
        });
    }
    let starts = runtime.block_on(cold_starts(&dir, args.runs.max(1)))?;
    let first_requests = runtime.block_on(first_requests(&dir, args.runs.clamp(1, 7)))?;
    let counting = runtime.block_on(counting(&dir, args.runs.clamp(1, 11)))?;
    let arm64 = arm64_zip()?;
    let bloat = if args.no_bloat { None } else { Some(bloat()?) };
    let mut markdown = markdown(&sizes, &starts, args.runs.max(1));
    markdown += &bloat_markdown(bloat.as_deref());
    markdown += &first_requests_markdown(&first_requests, args.runs.clamp(1, 7));
    markdown += &counting_markdown(&counting, args.runs.clamp(1, 11));
    markdown += &arm64_markdown(arm64.as_ref());
    println!("{markdown}");
    Ok(Section {
        name: "lambda".into(),
        title: "Lambda functions: size and cold start".into(),
        markdown,
        figures: serde_json::json!({
            "runs": args.runs,
            "sizes": sizes,
            "cold_starts": starts,
            "first_requests": first_requests,
            "counting": counting,
            "arm64": arm64,
            "bloat": bloat,
        }),
    })
}

/// Each function's cold starts, the hello-world's beside each (and the
/// DynamoDB baseline's beside each that reads the table), alternating
/// within every run.
async fn cold_starts(dir: &Path, runs: usize) -> Result<Vec<Start>, BoxError> {
    let backends = create_backends().await?;
    seed::seed(&backends).await?;
    let hello = locate(dir, HELLO)?;
    let hello_dynamodb = locate(dir, HELLO_DYNAMODB)?;
    let edge = edge::Edge::start().await?;
    let mut samples: Vec<[Vec<f64>; 6]> = FUNCTIONS.iter().map(|_| Default::default()).collect();
    let mut statuses = vec![0u16; FUNCTIONS.len()];
    for _ in 0..runs {
        for (i, function) in FUNCTIONS.iter().enumerate() {
            let event = bytes::Bytes::from(serde_json::to_vec(&http_api_event(
                function.method,
                function.path,
            ))?);
            let binary = locate(dir, function.binary)?;
            let extra = match function.delivery {
                Delivery::Presigned => Vec::new(),
                Delivery::CloudFront => edge.environment(),
            };
            let tfreg = command_with(&binary, &[], function, &backends, &extra);
            let tfreg = runtime_api::cold_start(tfreg, event.clone())
                .await
                .map_err(|e| format!("{} ({}): {e}", function.endpoint, binary.display()))?;
            let baseline =
                runtime_api::cold_start(command(&hello, &[], function, &backends), event.clone())
                    .await
                    .map_err(|e| format!("{HELLO}: {e}"))?;
            if tfreg.status != function.status || baseline.status != 200 {
                return Err(format!(
                    "{}: answered {} (expected {}), the baseline {}",
                    function.endpoint, tfreg.status, function.status, baseline.status
                )
                .into());
            }
            statuses[i] = tfreg.status;
            let s = &mut samples[i];
            s[0].push(ms(tfreg.init));
            s[1].push(ms(tfreg.first_response));
            s[2].push(ms(baseline.init));
            s[3].push(ms(baseline.first_response));
            if function.table == Table::Read {
                let command = command(&hello_dynamodb, &[], function, &backends);
                let dynamodb = runtime_api::cold_start(command, event)
                    .await
                    .map_err(|e| format!("{HELLO_DYNAMODB}: {e}"))?;
                // The item it reads (acme/widget's versions index) is published.
                if dynamodb.status != 200 {
                    return Err(format!(
                        "{HELLO_DYNAMODB} beside {}: answered {} (expected 200)",
                        function.endpoint, dynamodb.status
                    )
                    .into());
                }
                s[4].push(ms(dynamodb.init));
                s[5].push(ms(dynamodb.first_response));
            }
        }
    }
    Ok(FUNCTIONS
        .iter()
        .zip(samples.iter_mut().zip(statuses))
        .map(|(function, (s, status))| Start {
            endpoint: function.endpoint.into(),
            binary: function.binary.into(),
            status,
            init_ms: median(&mut s[0]),
            first_response_ms: median(&mut s[1]),
            hello_init_ms: median(&mut s[2]),
            hello_first_response_ms: median(&mut s[3]),
            dynamodb_init_ms: (!s[4].is_empty()).then(|| median(&mut s[4])),
            dynamodb_first_response_ms: (!s[5].is_empty()).then(|| median(&mut s[5])),
        })
        .collect())
}

fn mb(bytes: u64) -> f64 {
    bytes as f64 / 1_000_000.0
}

/// The rows of a size table, each binary beside the hello-world among them.
fn size_rows(sizes: &[Size]) -> String {
    let hello = sizes.iter().find(|s| s.binary == HELLO);
    let (hello_bytes, hello_zipped) = hello.map_or((1, 1), |h| (h.bytes, h.zipped));
    let mut text = String::new();
    for s in sizes {
        text.push_str(&format!(
            "| `{}` | {:.2} | {:.1} | {:.2} | {:.1} |\n",
            s.binary,
            mb(s.bytes),
            s.bytes as f64 / hello_bytes as f64,
            mb(s.zipped),
            s.zipped as f64 / hello_zipped as f64,
        ));
    }
    text
}

/// The header of a size table.
const SIZE_HEADER: &str =
    "| binary | size (MB) | × hello | zipped (MB) | × hello |\n|---|---:|---:|---:|---:|\n";

/// `value` (ms) and its ratio to `baseline`'s, or dashes without one.
fn beside(value: f64, baseline: Option<f64>) -> String {
    match baseline {
        Some(b) => format!("{b:.1} | {:.2}", value / b),
        None => "— | —".into(),
    }
}

/// The median, least and greatest of `values` (none when empty).
fn spread(mut values: Vec<f64>) -> Option<(f64, f64, f64)> {
    let least = values.iter().copied().reduce(f64::min)?;
    let greatest = values.iter().copied().reduce(f64::max)?;
    Some((median(&mut values), least, greatest))
}

fn markdown(sizes: &[Size], starts: &[Start], runs: usize) -> String {
    let mut text = format!(
        "Release profile of Cargo.toml for every binary, two baselines included, each built like the functions and never deployed: *hello*, `{HELLO}`, a `lambda_http` hello-world that reads nothing (the Lambda runtime alone); and *GetItem*, `{HELLO_DYNAMODB}`, the smallest `lambda_http` function that reads one DynamoDB item a request (a strongly consistent `GetItem` of the versions index provider-versions reads) with the functions' SDK crates and HTTPS client (`aws-sdk-dynamodb` without default features, aws-smithy-http-client with rustls and *ring*, the region and the environment's credentials, the same timeouts) and nothing of tfreg. Both are there because a function that reads the table cannot answer before its round trip to DynamoDB (a new connection, a signed request, the answer parsed), which on the emulator is longer than the hello-world's whole first response: × hello is what a function costs in all, × GetItem what tfreg adds over the work any function reading the table must do. Zipped = one `bootstrap` entry, deflate level 9. Cold start: process spawned against a Runtime API on loopback, init = until its first `invocation/next`, first response = until the response to an API Gateway (payload 2.0) event for its route is POSTed; DynamoDB and S3 on the emulators (DynamoDB: dynalite, a Node.js process); {runs} runs each, a function, the hello-world and, for a function that reads the table, the GetItem baseline alternating; medians (— where the function reads nothing).\n\n{SIZE_HEADER}"
    );
    text.push_str(&size_rows(sizes));
    text.push_str("\n| function (binary) | status | init (ms) | hello init (ms) | × hello | GetItem init (ms) | × GetItem | first response (ms) | hello (ms) | × hello | GetItem (ms) | × GetItem |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for s in starts {
        text.push_str(&format!(
            "| {} (`{}`) | {} | {:.1} | {} | {} | {:.1} | {} | {} |\n",
            s.endpoint,
            s.binary,
            s.status,
            s.init_ms,
            beside(s.init_ms, Some(s.hello_init_ms)),
            beside(s.init_ms, s.dynamodb_init_ms),
            s.first_response_ms,
            beside(s.first_response_ms, Some(s.hello_first_response_ms)),
            beside(s.first_response_ms, s.dynamodb_first_response_ms),
        ));
    }
    let ratios = |of: fn(&Start) -> Option<f64>| {
        spread(starts.iter().filter_map(of).collect())
            .map(|(m, lo, hi)| format!("median {m:.2} ({lo:.2}–{hi:.2})"))
    };
    if let (Some(init), Some(first)) = (
        ratios(|s| s.dynamodb_init_ms.map(|b| s.init_ms / b)),
        ratios(|s| {
            s.dynamodb_first_response_ms
                .map(|b| s.first_response_ms / b)
        }),
    ) {
        text.push_str(&format!(
            "\nThe functions that read the table, × GetItem: init {init}, first response {first}.\n"
        ));
    }
    let at_edge = |name: &str| {
        let of = |endpoint: &str| starts.iter().find(|s| s.endpoint == endpoint);
        let (edge, own) = (of(&format!("{name}, cloudfront"))?, of(name)?);
        Some(format!(
            "{name} {:.2} at init, {:.2} to the first response",
            edge.init_ms / own.init_ms,
            edge.first_response_ms / own.first_response_ms
        ))
    };
    let beside: Vec<String> = ["provider-download", "mirror-version", "blob"]
        .into_iter()
        .filter_map(at_edge)
        .collect();
    if !beside.is_empty() {
        text.push_str(&format!(
            "\n*cloudfront* rows: the function with `TFREG_ARCHIVE_DELIVERY=cloudfront` (issue 37), its 2048-bit archive signing key read at init from SSM Parameter Store (a moto server on loopback: an HTTP round trip with no TLS, where AWS adds a TLS handshake to SSM's endpoint) and each archive URL of its answer signed with it (one for a provider download, one per platform for a mirror's version; blob refuses the unsigned URL before signing anything). × the same route in the default mode, in the same runs: {}.\n",
            beside.join("; ")
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), 2.5);
    }

    #[test]
    fn a_zipped_binary_is_smaller_when_it_repeats_itself() {
        let repetitive = vec![7u8; 100_000];
        let zipped = zipped_size(&repetitive).unwrap();
        assert!(zipped < 10_000, "{zipped}");
        assert!(zipped > 0);
    }

    #[test]
    fn the_getitem_baseline_is_beside_only_the_functions_that_read_the_table() {
        let start = |endpoint: &str, dynamodb: Option<(f64, f64)>| Start {
            endpoint: endpoint.into(),
            binary: "read".into(),
            status: 404,
            init_ms: 3.0,
            first_response_ms: 6.0,
            hello_init_ms: 2.0,
            hello_first_response_ms: 2.0,
            dynamodb_init_ms: dynamodb.map(|d| d.0),
            dynamodb_first_response_ms: dynamodb.map(|d| d.1),
        };
        let starts = [
            start("discovery", None),
            start("provider-versions", Some((2.5, 5.0))),
            start("module-versions", Some((2.0, 4.0))),
        ];
        let md = markdown(&[], &starts, 3);
        assert!(
            md.contains(
                "| discovery (`read`) | 404 | 3.0 | 2.0 | 1.50 | — | — | 6.0 | 2.0 | 3.00 | — | — |"
            ),
            "{md}"
        );
        assert!(
            md.contains("| provider-versions (`read`) | 404 | 3.0 | 2.0 | 1.50 | 2.5 | 1.20 | 6.0 | 2.0 | 3.00 | 5.0 | 1.20 |"),
            "{md}"
        );
        assert!(
            md.contains(
                "× GetItem: init median 1.35 (1.20–1.50), first response median 1.35 (1.20–1.50)."
            ),
            "{md}"
        );
        assert!(every_table_row_has_its_headers_cells(&md), "{md}");
    }

    /// Each row of each table has as many cells as its header.
    fn every_table_row_has_its_headers_cells(md: &str) -> bool {
        let mut cells = None;
        md.lines().all(|line| {
            if !line.starts_with('|') {
                cells = None;
                return true;
            }
            let n = line.matches('|').count();
            *cells.get_or_insert(n) == n
        })
    }

    #[tokio::test]
    async fn a_function_gets_lambdas_environment_not_the_benchs() {
        let mut command = tokio::process::Command::new("env");
        // Set before: as if the bench's machine had it.
        command.env("SSL_CERT_FILE", "/etc/ssl/certs/ca-certificates.crt");
        lambda_environment(&mut command, |name| {
            ["AWS_REGION", "SSL_CERT_DIR"]
                .contains(&name)
                .then(|| format!("{name}-value"))
        });
        let output = command.output().await.expect("env runs");
        assert!(output.status.success());
        let mut seen: Vec<String> = String::from_utf8(output.stdout)
            .unwrap()
            .lines()
            .map(|l| l.split('=').next().unwrap().to_string())
            .collect();
        seen.sort();
        let mut expected: Vec<String> = LAMBDA_ENVIRONMENT
            .iter()
            .map(|(name, _)| name.to_string())
            .chain(["AWS_REGION".to_string()])
            .collect();
        expected.sort();
        assert_eq!(
            seen, expected,
            "exactly Lambda's variables and those passed"
        );
    }

    #[test]
    fn every_function_of_the_template_is_measured() {
        let template = std::fs::read_to_string(workspace().join("template.yaml")).unwrap();
        // Each function resource (`  ProviderVersionsFunction:`) names its
        // endpoint, and its `Binary:` follows.
        let kebab = |camel: &str| {
            let mut out = String::new();
            for (i, c) in camel.chars().enumerate() {
                if c.is_ascii_uppercase() && i > 0 {
                    out.push('-');
                }
                out.push(c.to_ascii_lowercase());
            }
            out
        };
        let mut endpoint = String::new();
        let mut deployed = Vec::new();
        for line in template.lines() {
            if let Some(name) = line
                .strip_prefix("  ")
                .filter(|l| !l.starts_with(' '))
                .and_then(|l| l.strip_suffix("Function:"))
            {
                endpoint = kebab(name);
            } else if let Some(b) = line.trim().strip_prefix("Binary: ") {
                deployed.push((endpoint.clone(), b.to_string()));
            }
        }
        // The fill function has no route: check::check_fill starts it.
        let fill = ("fill".to_string(), "fill".to_string());
        assert!(deployed.contains(&fill), "{deployed:?}");
        deployed.retain(|d| *d != fill);
        let measured: Vec<(String, String)> = FUNCTIONS
            .iter()
            .filter(|f| f.delivery == Delivery::Presigned)
            .map(|f| (f.endpoint.to_string(), f.binary.to_string()))
            .collect();
        assert_eq!(deployed, measured);
    }
}
