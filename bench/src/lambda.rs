//! `tfreg-bench lambda`: what a Lambda function of tfreg costs beside the
//! smallest `lambda_http` function (`src/bin/lambda-hello.rs`) built with the
//! same release profile: binary and zipped size (`zip -9`: what Lambda
//! stores and loads), and cold start against a Runtime API served on
//! loopback (`runtime_api`), with DynamoDB and S3 on the emulators. Runs
//! alternate between tfreg and the hello-world; medians and ratios.

mod runtime_api;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

use crate::report::Section;

/// One deployed function: the binary it runs, a request for its route and
/// the status it must answer (a function that fails fast is not a fast one).
struct Function {
    endpoint: &'static str,
    binary: &'static str,
    method: &'static str,
    path: &'static str,
    status: u16,
}

const fn function(
    endpoint: &'static str,
    binary: &'static str,
    (method, path): (&'static str, &'static str),
    status: u16,
) -> Function {
    Function {
        endpoint,
        binary,
        method,
        path,
        status,
    }
}

/// template.yaml's functions (by their route) and the binary each runs. Anonymous reads
/// are on: the read routes query DynamoDB (nothing is published, so 404),
/// blob refuses a URL without its signature (400); publish and admin
/// answer 401 to a request without a token; the UI's home page lists
/// nothing (one Query).
const FUNCTIONS: &[Function] = &[
    function(
        "discovery",
        "read",
        ("GET", "/.well-known/terraform.json"),
        200,
    ),
    function(
        "provider-versions",
        "read",
        ("GET", "/v1/providers/acme/widget/versions"),
        404,
    ),
    function(
        "provider-download",
        "read",
        (
            "GET",
            "/v1/providers/acme/widget/1.0.0/download/linux/amd64",
        ),
        404,
    ),
    function(
        "module-versions",
        "read",
        ("GET", "/v1/modules/acme/net/aws/versions"),
        404,
    ),
    function(
        "module-download",
        "read",
        ("GET", "/v1/modules/acme/net/aws/1.0.0/download"),
        404,
    ),
    function(
        "mirror-index",
        "read",
        (
            "GET",
            "/v1/mirror/registry.example.com/acme/widget/index.json",
        ),
        404,
    ),
    function(
        "mirror-version",
        "read",
        (
            "GET",
            "/v1/mirror/registry.example.com/acme/widget/1.0.0.json",
        ),
        404,
    ),
    function(
        "blob",
        "blob",
        ("GET", "/v1/blobs/providers/acme/widget/1.0.0/x.zip"),
        400,
    ),
    function(
        "publish",
        "publish",
        ("POST", "/v1/publish/providers/acme/widget/1.0.0/begin"),
        401,
    ),
    function("admin", "admin", ("GET", "/v1/admin/tokens"), 401),
    function("ui", "ui", ("GET", "/ui/home"), 200),
];

/// The baseline: a `lambda_http` hello-world, built like the functions.
const HELLO: &str = "lambda-hello";

#[derive(clap::Args, Clone)]
pub struct Args {
    /// Cold starts of each function, and as many of the hello-world beside each.
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
}

impl Default for Args {
    fn default() -> Self {
        Self {
            runs: 15,
            bin_dir: None,
            check: false,
            runner: None,
        }
    }
}

type BoxError = Box<dyn std::error::Error>;

fn binaries(with_baseline: bool) -> Vec<&'static str> {
    let mut names: Vec<&str> = FUNCTIONS.iter().map(|f| f.binary).collect();
    if with_baseline {
        names.push(HELLO);
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
/// only its own features), then the baseline's.
fn build() -> Result<PathBuf, BoxError> {
    let mut builds: Vec<(String, Vec<&str>)> = binaries(false)
        .into_iter()
        .map(|name| (format!("tfreg-function-{name}"), vec![name]))
        .collect();
    builds.push(("tfreg-bench".into(), vec![HELLO]));
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
    let mut command = match runner.split_first() {
        Some((program, args)) => {
            let mut command = tokio::process::Command::new(program);
            command.args(args).arg(binary);
            command
        }
        None => tokio::process::Command::new(binary),
    };
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
        .env("TFREG_S3_FORCE_PATH_STYLE", "true");
    command
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
}

/// Build (or take) the binaries, measure them and return the section.
pub fn run(args: &Args) -> Result<Section, BoxError> {
    let dir = match &args.bin_dir {
        Some(dir) => dir.clone(),
        None => build()?,
    };
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
        let starts = runtime.block_on(check_starts(&dir, &runner))?;
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
    let arm64 = arm64_zip()?;
    let mut markdown = markdown(&sizes, &starts, args.runs.max(1));
    markdown += &first_requests_markdown(&first_requests, args.runs.clamp(1, 7));
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
            "arm64": arm64,
        }),
    })
}

/// Events per process in [`first_requests`]: the first, then warm ones.
const EVENTS: usize = 4;

#[derive(Serialize)]
struct FirstRequest {
    /// How the function reached DynamoDB: `http` or `https`.
    dynamodb: &'static str,
    /// `TFREG_CONNECT_AT_INIT`: the connection opened during init.
    connect_at_init: bool,
    init_ms: f64,
    /// The first event, from its `invocation/next` to its response.
    first_ms: f64,
    /// The later events' median, the same way.
    warm_ms: f64,
    /// From the spawn to the first response: a cold start on the request's path.
    first_response_ms: f64,
}

/// DynamoDB behind TLS (dynalite over HTTPS with a development certificate),
/// beside the plain emulator, with and without `TFREG_CONNECT_AT_INIT`: does
/// a function's first request pay for a connection (TCP and TLS handshakes)
/// that its init could have opened, and what does opening it cost the init?
/// provider-versions, each process given the same event [`EVENTS`] times;
/// the four variants alternate.
async fn first_requests(dir: &Path, runs: usize) -> Result<Vec<FirstRequest>, BoxError> {
    const VARIANTS: [(&str, bool); 4] = [
        ("http", true),
        ("http", false),
        ("https", true),
        ("https", false),
    ];
    let plain = create_backends().await?;
    let tls = TlsDynamo::start()?;
    let function = FUNCTIONS
        .iter()
        .find(|f| f.endpoint == "provider-versions")
        .ok_or("provider-versions is one of the functions")?;
    let binary = locate(dir, function.binary)?;
    let event = bytes::Bytes::from(serde_json::to_vec(&http_api_event(
        function.method,
        function.path,
    ))?);
    let mut samples: [[Vec<f64>; 4]; 4] = Default::default();
    for _ in 0..runs {
        for (i, (dynamodb, connect)) in VARIANTS.into_iter().enumerate() {
            let mut command = command(&binary, &[], function, &plain);
            command.env(
                tfreg_lambda::config::CONNECT_AT_INIT,
                if connect { "true" } else { "false" },
            );
            if dynamodb == "https" {
                command
                    .env("AWS_ENDPOINT_URL_DYNAMODB", &tls.endpoint)
                    .env("SSL_CERT_FILE", &tls.ca)
                    .env("TFREG_TABLE", &tls.table);
            }
            let run = runtime_api::cold_start_then(command, event.clone(), EVENTS)
                .await
                .map_err(|e| format!("{} (DynamoDB over {dynamodb}): {e}", function.endpoint))?;
            if run.status != function.status || run.handling.len() != EVENTS {
                return Err(format!(
                    "{}: answered {} to {} of {EVENTS} events",
                    function.endpoint,
                    run.status,
                    run.handling.len()
                )
                .into());
            }
            let mut warm: Vec<f64> = run.handling[1..].iter().map(|d| ms(*d)).collect();
            samples[i][0].push(ms(run.init));
            samples[i][1].push(ms(run.handling[0]));
            samples[i][2].push(median(&mut warm));
            samples[i][3].push(ms(run.first_response));
        }
    }
    Ok(VARIANTS
        .into_iter()
        .zip(samples.iter_mut())
        .map(|((dynamodb, connect_at_init), s)| FirstRequest {
            dynamodb,
            connect_at_init,
            init_ms: median(&mut s[0]),
            first_ms: median(&mut s[1]),
            warm_ms: median(&mut s[2]),
            first_response_ms: median(&mut s[3]),
        })
        .collect())
}

fn first_requests_markdown(rows: &[FirstRequest], runs: usize) -> String {
    let mut text = format!(
        "\n**Opening the DynamoDB connection during init** (`TFREG_CONNECT_AT_INIT`, on by default: every function but discovery reads the URL signing secret at init). provider-versions, one DynamoDB `GetItem` a request; {runs} processes for each variant, alternating, each given {EVENTS} events; medians. Over HTTPS the emulator is dynalite behind TLS with a development certificate (trusted through `SSL_CERT_FILE`), so a new connection costs a TCP and a TLS handshake. *First request* is the first event's handling (from its `invocation/next` to its response): what a request pays when Lambda initialised the function before it arrived. *Cold start on the request's path* is from the spawn to the first response: what it pays when its arrival started the function.\n\n| DynamoDB over | connect at init | init (ms) | first request (ms) | warm request (ms) | first ÷ warm | cold start on the request's path (ms) |\n|---|---|---:|---:|---:|---:|---:|\n"
    );
    for r in rows {
        text += &format!(
            "| {} | {} | {:.1} | {:.2} | {:.2} | {:.2} | {:.1} |\n",
            r.dynamodb,
            if r.connect_at_init { "yes" } else { "no" },
            r.init_ms,
            r.first_ms,
            r.warm_ms,
            r.first_ms / r.warm_ms,
            r.first_response_ms,
        );
    }
    text
}

/// dynalite over HTTPS (its own `--ssl` certificate expired in 2018 and has
/// no subjectAltName, so it is given a development certificate for
/// 127.0.0.1 made by `tfreg dev-cert`), with a table of this run.
struct TlsDynamo {
    _dir: tempfile::TempDir,
    child: std::process::Child,
    endpoint: String,
    ca: PathBuf,
    table: String,
}

impl TlsDynamo {
    fn start() -> Result<TlsDynamo, BoxError> {
        let dynalite_bin = crate::tools::require_env("TFREG_DYNALITE")?;
        let tfreg = crate::tools::sibling_binary("tfreg")?;
        let package = dynalite_bin
            .parent()
            .and_then(Path::parent)
            .ok_or("TFREG_DYNALITE is <node_modules>/.bin/dynalite")?
            .join("dynalite");
        let dir = tempfile::tempdir()?;
        let run = |command: &mut std::process::Command, what: &str| -> Result<(), BoxError> {
            let out = command.output()?;
            if !out.status.success() {
                return Err(format!("{what}: {}", String::from_utf8_lossy(&out.stderr)).into());
            }
            Ok(())
        };
        run(
            std::process::Command::new(&tfreg)
                .args(["dev-cert", "--hostname", "127.0.0.1", "--dir"])
                .arg(dir.path()),
            "tfreg dev-cert",
        )?;
        let tls = dir.path().join("tls");
        let port = crate::tools::free_port()?;
        let child = std::process::Command::new("node")
            .arg("-e")
            .arg(
                "const fs = require('fs');\
                 require(process.env.DYNALITE)({ ssl: true, createTableMs: 0, deleteTableMs: 0, updateTableMs: 0, \
                   key: fs.readFileSync(process.env.KEY), cert: fs.readFileSync(process.env.CERT) })\
                   .listen(Number(process.env.PORT), '127.0.0.1');",
            )
            .env("DYNALITE", &package)
            .env("KEY", tls.join("server.key"))
            .env("CERT", tls.join("server.pem"))
            .env("PORT", port.to_string())
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("dynalite.log"))?)
            .spawn()?;
        let mut dynamo = TlsDynamo {
            endpoint: format!("https://127.0.0.1:{port}"),
            ca: tls.join("ca.pem"),
            table: format!("tfreg-bench-tls-{}-{}", std::process::id(), unique()),
            _dir: dir,
            child,
        };
        let started = std::time::Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if started.elapsed() > Duration::from_secs(20) || dynamo.child.try_wait()?.is_some() {
                return Err(format!(
                    "dynalite over TLS did not start: {}",
                    std::fs::read_to_string(dynamo._dir.path().join("dynalite.log"))
                        .unwrap_or_default()
                )
                .into());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        // The table, through the same TLS (and the plain S3 emulator's bucket).
        run(
            std::process::Command::new(&tfreg)
                .args(["aws", "init", "--table", &dynamo.table, "--bucket"])
                .arg(&dynamo.table)
                .arg("--s3-force-path-style")
                .env("AWS_ENDPOINT_URL_DYNAMODB", &dynamo.endpoint)
                .env("SSL_CERT_FILE", &dynamo.ca),
            "tfreg aws init against dynalite over TLS",
        )?;
        Ok(dynamo)
    }
}

impl Drop for TlsDynamo {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Where `TFREG_SAM_FULL=1 infra/check-build arm64` and then
/// `TFREG_CARGO_LAMBDA_FULL=1 infra/check-cargo-lambda arm64` leave the
/// deployed architecture's zip, built with the full release profile.
const ARM64_ZIP: &str = "target/sam-arm64-full/cargo-lambda/zips/lambda/bootstrap.zip";
const ARM64_SAM_BOOTSTRAP: &str = "target/sam-arm64-full/build";

#[derive(Serialize)]
struct Arm64 {
    zip: u64,
    bootstrap: u64,
    /// The zip's age when this ran, in hours (it may be older than the code).
    age_hours: f64,
}

/// The arm64 zip's size, if infra/check-cargo-lambda has built it with the full profile.
fn arm64_zip() -> Result<Option<Arm64>, BoxError> {
    let zip = workspace().join(ARM64_ZIP);
    let Ok(meta) = std::fs::metadata(&zip) else {
        return Ok(None);
    };
    let mut bootstrap = 0;
    if let Ok(dirs) = std::fs::read_dir(workspace().join(ARM64_SAM_BOOTSTRAP)) {
        for dir in dirs.flatten() {
            if let Ok(m) = std::fs::metadata(dir.path().join("bootstrap")) {
                bootstrap = m.len();
            }
        }
    }
    let age_hours = meta
        .modified()?
        .elapsed()
        .map_or(0.0, |d| d.as_secs_f64() / 3600.0);
    Ok(Some(Arm64 {
        zip: meta.len(),
        bootstrap,
        age_hours,
    }))
}

fn arm64_markdown(arm64: Option<&Arm64>) -> String {
    let how = "`TFREG_SAM_FULL=1 infra/check-build arm64` (sam build, which asserts that the ten functions share one compile) and then `TFREG_CARGO_LAMBDA_FULL=1 infra/check-cargo-lambda arm64` (cargo lambda's zip from the same compile, every function started from it through qemu-aarch64)";
    match arm64 {
        Some(a) => format!(
            "\n**arm64, as deployed** (full release profile, zig-linked by cargo lambda): `bootstrap` {:.2} MB from `sam build`, cargo lambda's zip {:.2} MB; built {:.1} h before this run by {how}.\n",
            mb(a.bootstrap),
            mb(a.zip),
            a.age_hours,
        ),
        None => format!("\n**arm64, as deployed**: not measured in this run; {how} build it.\n"),
    }
}

async fn cold_starts(dir: &Path, runs: usize) -> Result<Vec<Start>, BoxError> {
    let backends = create_backends().await?;
    let hello = locate(dir, HELLO)?;
    let mut samples: Vec<[Vec<f64>; 4]> = FUNCTIONS.iter().map(|_| Default::default()).collect();
    let mut statuses = vec![0u16; FUNCTIONS.len()];
    for _ in 0..runs {
        for (i, function) in FUNCTIONS.iter().enumerate() {
            let event = bytes::Bytes::from(serde_json::to_vec(&http_api_event(
                function.method,
                function.path,
            ))?);
            let binary = locate(dir, function.binary)?;
            let tfreg =
                runtime_api::cold_start(command(&binary, &[], function, &backends), event.clone())
                    .await
                    .map_err(|e| format!("{} ({}): {e}", function.endpoint, binary.display()))?;
            let baseline =
                runtime_api::cold_start(command(&hello, &[], function, &backends), event)
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
        })
        .collect())
}

#[derive(Serialize)]
struct Started {
    endpoint: String,
    status: u16,
    init_ms: f64,
    first_response_ms: f64,
}

/// Each function started once (through `runner`, if any), its answer checked.
async fn check_starts(dir: &Path, runner: &[String]) -> Result<Vec<Started>, BoxError> {
    let backends = create_backends().await?;
    let mut started = Vec::new();
    for function in FUNCTIONS {
        let event = bytes::Bytes::from(serde_json::to_vec(&http_api_event(
            function.method,
            function.path,
        ))?);
        let binary = locate(dir, function.binary)?;
        let start = runtime_api::cold_start(command(&binary, runner, function, &backends), event)
            .await
            .map_err(|e| format!("{} ({}): {e}", function.endpoint, binary.display()))?;
        if start.status != function.status {
            return Err(format!(
                "{}: answered {} (expected {})",
                function.endpoint, start.status, function.status
            )
            .into());
        }
        started.push(Started {
            endpoint: function.endpoint.into(),
            status: start.status,
            init_ms: ms(start.init),
            first_response_ms: ms(start.first_response),
        });
    }
    Ok(started)
}

fn check_markdown(sizes: &[Size], starts: &[Started], runner: &[String]) -> String {
    let mut text = String::from("| binary | size (MB) | zipped (MB) |\n|---|---:|---:|\n");
    for s in sizes {
        text += &format!(
            "| `{}` | {:.2} | {:.2} |\n",
            s.binary,
            mb(s.bytes),
            mb(s.zipped)
        );
    }
    let through = if runner.is_empty() {
        "natively".to_string()
    } else {
        format!("through `{}`", runner.join(" "))
    };
    text += &format!(
        "\nEach function started once {through}, on the emulators, and answered as it should:\n\n| function | status | init (ms) | first response (ms) |\n|---|---:|---:|---:|\n"
    );
    for s in starts {
        text += &format!(
            "| {} | {} | {:.1} | {:.1} |\n",
            s.endpoint, s.status, s.init_ms, s.first_response_ms
        );
    }
    text
}

fn mb(bytes: u64) -> f64 {
    bytes as f64 / 1_000_000.0
}

fn markdown(sizes: &[Size], starts: &[Start], runs: usize) -> String {
    let hello = sizes.iter().find(|s| s.binary == HELLO);
    let (hello_bytes, hello_zipped) = hello.map_or((1, 1), |h| (h.bytes, h.zipped));
    let mut text = format!(
        "Release profile of Cargo.toml for every binary, the baseline `{HELLO}` (a `lambda_http` hello-world) included; zipped = one `bootstrap` entry, deflate level 9. Cold start: process spawned against a Runtime API on loopback, init = until its first `invocation/next`, first response = until the response to an API Gateway (payload 2.0) event for its route is POSTed; DynamoDB and S3 on the emulators; {runs} runs each, tfreg and the baseline alternating; medians.\n\n| binary | size (MB) | × baseline | zipped (MB) | × baseline |\n|---|---:|---:|---:|---:|\n"
    );
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
    text.push_str("\n| function (binary) | status | init (ms) | baseline init (ms) | × baseline | first response (ms) | baseline (ms) | × baseline |\n|---|---:|---:|---:|---:|---:|---:|---:|\n");
    for s in starts {
        text.push_str(&format!(
            "| {} (`{}`) | {} | {:.1} | {:.1} | {:.2} | {:.1} | {:.1} | {:.2} |\n",
            s.endpoint,
            s.binary,
            s.status,
            s.init_ms,
            s.hello_init_ms,
            s.init_ms / s.hello_init_ms,
            s.first_response_ms,
            s.hello_first_response_ms,
            s.first_response_ms / s.hello_first_response_ms,
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
        let measured: Vec<(String, String)> = FUNCTIONS
            .iter()
            .map(|f| (f.endpoint.to_string(), f.binary.to_string()))
            .collect();
        assert_eq!(deployed, measured);
    }
}
