//! A function's first requests over DynamoDB with and without TLS, with and
//! without the connection opened at init (`tfreg-bench lambda`).

use super::*;

/// Events per process in [`first_requests`]: the first, then warm ones.
pub(super) const EVENTS: usize = 4;

/// How long after its init a function initialised ahead gets its first event.
const AHEAD: Duration = Duration::from_millis(100);

#[derive(Serialize)]
pub(super) struct FirstRequest {
    /// How the function reached DynamoDB: `http` or `https`.
    dynamodb: &'static str,
    /// `TFREG_CONNECT_AT_INIT`: the connection opened during init.
    connect_at_init: bool,
    init_ms: f64,
    /// From the spawn to the first response: a cold start on the request's
    /// path (the event waiting when init ends).
    first_response_ms: f64,
    /// The first event's handling, from its `invocation/next` to its
    /// response, in a process initialised [`AHEAD`] of it.
    first_ms: f64,
    /// The later events' median, the same way.
    warm_ms: f64,
}

/// DynamoDB behind TLS (dynalite over HTTPS with a development certificate),
/// beside the plain emulator, with and without `TFREG_CONNECT_AT_INIT`: does
/// a function's first request pay for a connection (TCP and TLS handshakes)
/// that its init could have opened, and what does opening it cost the init?
/// provider-versions, each process given the same event [`EVENTS`] times;
/// the four variants alternate, each started twice a round: with its first
/// event waiting (a cold start on the request's path) and initialised
/// [`AHEAD`] of it.
/// What provider-versions answers on these empty tables.
const NOT_FOUND: u16 = 404;

pub(super) async fn first_requests(dir: &Path, runs: usize) -> Result<Vec<FirstRequest>, BoxError> {
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
    let checked = |run: runtime_api::ColdStart| {
        if run.status != NOT_FOUND || run.handling.len() != EVENTS {
            return Err(format!(
                "{}: answered {} to {} of {EVENTS} events",
                function.endpoint,
                run.status,
                run.handling.len()
            ));
        }
        Ok(run)
    };
    for _ in 0..runs {
        for (i, (dynamodb, connect)) in VARIANTS.into_iter().enumerate() {
            let variant = || {
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
                command
            };
            let failed = |e: runtime_api::RunError| {
                format!("{} (DynamoDB over {dynamodb}): {e}", function.endpoint)
            };
            let cold = checked(
                runtime_api::cold_start_then(variant(), event.clone(), EVENTS)
                    .await
                    .map_err(failed)?,
            )?;
            let ahead = checked(
                runtime_api::initialised_ahead(variant(), event.clone(), EVENTS, AHEAD)
                    .await
                    .map_err(failed)?,
            )?;
            let mut warm: Vec<f64> = ahead.handling[1..].iter().map(|d| ms(*d)).collect();
            samples[i][0].push(ms(cold.init));
            samples[i][1].push(ms(cold.first_response));
            samples[i][2].push(ms(ahead.handling[0]));
            samples[i][3].push(median(&mut warm));
        }
    }
    Ok(VARIANTS
        .into_iter()
        .zip(samples.iter_mut())
        .map(|((dynamodb, connect_at_init), s)| FirstRequest {
            dynamodb,
            connect_at_init,
            init_ms: median(&mut s[0]),
            first_response_ms: median(&mut s[1]),
            first_ms: median(&mut s[2]),
            warm_ms: median(&mut s[3]),
        })
        .collect())
}

pub(super) fn first_requests_markdown(rows: &[FirstRequest], runs: usize) -> String {
    let mut text = format!(
        "\n**Opening the DynamoDB connection at init** (`TFREG_CONNECT_AT_INIT`, off by default; on, a function starts reading the URL signing secret at init, beside it: init does not wait for the read, and a first request that needs the secret waits for it instead of reading again). provider-versions of a provider not published (these tables are empty): two DynamoDB requests, a `GetItem` of the versions index, then a `Query` of the releases, which a store from before the index needs; {runs} rounds, the four variants alternating, each started twice a round and given {EVENTS} events. *Cold start on the request's path*: from the spawn to the first response, the event waiting when init ends (an on-demand cold start: what the request whose arrival started the function waits). *First request, initialised ahead*: the first event's handling (its `invocation/next` to its response) when it comes {ahead} ms after init (provisioned concurrency); *warm*: the later events' median in the same process. Medians. Over HTTPS the emulator is dynalite behind TLS with a development certificate (trusted through `SSL_CERT_FILE`), so a new connection costs a TCP and a TLS handshake.\n\n| DynamoDB over | connect at init | init (ms) | cold start on the request's path (ms) | first request, initialised ahead (ms) | warm request (ms) | first ÷ warm |\n|---|---|---:|---:|---:|---:|---:|\n",
        ahead = AHEAD.as_millis(),
    );
    for r in rows {
        text += &format!(
            "| {} | {} | {:.1} | {:.1} | {:.2} | {:.2} | {:.2} |\n",
            r.dynamodb,
            if r.connect_at_init { "yes" } else { "no" },
            r.init_ms,
            r.first_response_ms,
            r.first_ms,
            r.warm_ms,
            r.first_ms / r.warm_ms,
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
