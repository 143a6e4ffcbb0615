//! A store that goes away: the registry answers 503 with `Retry-After` (never a
//! wrong 404 or a 500) while DynamoDB or S3 is down, and serves again, the same
//! registry object, once it is back. The test runs a dynalite (on LevelDB, so
//! its data outlives a restart) and an s3s-fs of its own, and stops and
//! restarts them; the shared emulators other tests use are left alone.

use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Method, StatusCode, header};
use tfreg_model::protocol::PublishRequest;
use tfreg_model::router::PublishStep;
use tfreg_model::token::Scope;
use tfreg_testkit::{
    PUBLIC_URL, TestRegistry, TestResponse, TestSigner, decl, module_archive, provider_release,
    provider_request,
};

use crate::backend_contract::{module, publish_module};
use crate::publish_attacks::{begin, provider, put};
use crate::support::Tools;
use crate::support::server::free_port;

/// Every read endpoint, on the provider and the module the test publishes.
const READS: [&str; 6] = [
    "/v1/providers/outage/tool/versions",
    "/v1/providers/outage/tool/1.0.0/download/linux/amd64",
    "/v1/modules/outage/net/aws/versions",
    "/v1/modules/outage/net/aws/1.0.0/download",
    "/v1/mirror/registry.test/outage/tool/index.json",
    "/v1/mirror/registry.test/outage/tool/1.0.0.json",
];

/// What a 503 body must never tell a client (lower case): transport errors,
/// addresses, table and bucket names.
const INTERNALS: [&str; 8] = [
    "dispatch",
    "connect",
    "refused",
    "127.0.0.1",
    "tfreg-test-",
    "io error",
    "timed out",
    "sdk",
];

/// How long a (re)started emulator may take to accept connections.
const START_TIMEOUT: Duration = Duration::from_secs(20);

/// Far longer than a request to a hung store may take.
const HANG_GUARD: Duration = Duration::from_secs(60);

/// One emulator process on a fixed port, restartable; killed on drop (also
/// when the test fails).
struct Emulator {
    name: &'static str,
    program: PathBuf,
    args: Vec<String>,
    port: u16,
    log: PathBuf,
    child: Option<Child>,
}

fn env(var: &str) -> String {
    std::env::var(var).unwrap_or_else(|_| {
        panic!("{var} is not set: run scripts/test, which exports the emulators' settings")
    })
}

impl Emulator {
    /// dynalite keeping its tables in `dir` (LevelDB).
    fn dynalite(dir: &Path) -> Emulator {
        let port = free_port();
        Self::new(
            "dynalite",
            Tools::get().path("TFREG_DYNALITE"),
            vec![
                "--host".into(),
                "127.0.0.1".into(),
                "--port".into(),
                port.to_string(),
                "--path".into(),
                dir.display().to_string(),
            ],
            port,
            dir,
        )
    }

    /// s3s-fs on `dir`, verifying the environment's credentials.
    fn s3s_fs(dir: &Path) -> Emulator {
        let port = free_port();
        std::fs::create_dir_all(dir).unwrap();
        Self::new(
            "s3s-fs",
            Tools::get().path("TFREG_S3S_FS"),
            vec![
                "--host".into(),
                "127.0.0.1".into(),
                "--port".into(),
                port.to_string(),
                "--access-key".into(),
                env("AWS_ACCESS_KEY_ID"),
                "--secret-key".into(),
                env("AWS_SECRET_ACCESS_KEY"),
                dir.display().to_string(),
            ],
            port,
            dir,
        )
    }

    fn new(
        name: &'static str,
        program: PathBuf,
        args: Vec<String>,
        port: u16,
        dir: &Path,
    ) -> Emulator {
        let mut emulator = Emulator {
            name,
            program,
            args,
            port,
            log: dir.with_extension("log"),
            child: None,
        };
        emulator.start();
        emulator
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn accepts(&self) -> bool {
        let addr = SocketAddr::from(([127, 0, 0, 1], self.port));
        TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok()
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Start on the port and data of the first start; wait until it listens.
    fn start(&mut self) {
        assert!(self.child.is_none(), "{} runs already", self.name);
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let child = Command::new(&self.program)
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("{}: {e}", self.program.display()));
        self.child = Some(child);
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            let child = self.child.as_mut().expect("started");
            if let Some(status) = child.try_wait().unwrap() {
                panic!(
                    "{} exited at start ({status}):\n{}",
                    self.name,
                    self.log_text()
                );
            }
            if self.accepts() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{} does not listen on port {} after {START_TIMEOUT:?}:\n{}",
                self.name,
                self.port,
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn signal(&self, signal: &str) {
        let pid = self.child.as_ref().expect("running").id().to_string();
        let sent = Command::new("kill").args([signal, &pid]).status().unwrap();
        assert!(sent.success(), "kill {signal} {}", self.name);
    }

    /// SIGTERM, and wait for the process to end.
    fn stop(&mut self) {
        self.signal("-TERM");
        self.child.take().expect("running").wait().unwrap();
        assert!(!self.accepts(), "{} still listens once stopped", self.name);
    }

    /// SIGSTOP: the kernel still accepts connections, nothing answers them.
    fn freeze(&self) {
        self.signal("-STOP");
    }

    fn thaw(&self) {
        self.signal("-CONT");
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A response without what changes from one request to the next: the
/// signature and expiry of archive URLs.
fn stable(resp: &TestResponse) -> (StatusCode, String) {
    fn strip(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::String(s) if s.starts_with(PUBLIC_URL) => {
                s.truncate(s.find('?').unwrap_or(s.len()))
            }
            serde_json::Value::Array(a) => a.iter_mut().for_each(strip),
            serde_json::Value::Object(o) => o.values_mut().for_each(strip),
            _ => {}
        }
    }
    let text = match resp.headers.get("x-terraform-get") {
        Some(url) => {
            let url = url.to_str().unwrap();
            url[..url.find('?').unwrap_or(url.len())].to_string()
        }
        None => {
            let mut body = resp.json();
            strip(&mut body);
            body.to_string()
        }
    };
    (resp.status, text)
}

/// Every read, each a success.
async fn read_all(r: &TestRegistry, context: &str) -> Vec<(StatusCode, String)> {
    let mut out = Vec::new();
    for path in READS {
        let resp = r.get(path).await;
        assert!(
            resp.status.is_success(),
            "{context}: {path}: {} {}",
            resp.status,
            resp.text()
        );
        out.push(stable(&resp));
    }
    out
}

/// `request` must answer 503 with `Retry-After` (in seconds). Prints the
/// answer and how long it took (shown with `--nocapture`).
async fn answers_503(what: &str, request: impl Future<Output = TestResponse>) -> TestResponse {
    let started = Instant::now();
    let resp = request.await;
    let took = started.elapsed();
    resp.expect(StatusCode::SERVICE_UNAVAILABLE, what);
    let retry_after: u64 = resp
        .headers
        .get(header::RETRY_AFTER)
        .unwrap_or_else(|| panic!("{what}: a 503 without Retry-After"))
        .to_str()
        .unwrap()
        .parse()
        .unwrap_or_else(|e| panic!("{what}: Retry-After is not seconds: {e}"));
    assert!(retry_after > 0, "{what}");
    println!(
        "{what}: {} in {took:.2?}, Retry-After {retry_after}: {}",
        resp.status,
        resp.text()
    );
    resp
}

/// [`answers_503`], with a JSON error list that names nothing internal.
async fn unavailable(what: &str, request: impl Future<Output = TestResponse>) {
    let resp = answers_503(what, request).await;
    resp.error();
    let body = resp.text().to_lowercase();
    assert!(
        body.contains("request id"),
        "{what}: the body names the log line: {body}"
    );
    for internal in INTERNALS {
        assert!(
            !body.contains(internal),
            "{what}: the body tells {internal:?}: {body}"
        );
    }
}

/// begin and the upload of a module publish, leaving `complete` to the caller.
async fn begin_and_upload(
    r: &TestRegistry,
    token: &str,
    version: &str,
    archive: &[u8],
) -> PublishRequest {
    let mut request = PublishRequest {
        files: vec![decl("m.tar.gz", archive)],
        ..Default::default()
    };
    let answer = begin(r, &module("outage/net/aws", version), token, &request).await;
    put(r, &answer, "m.tar.gz", archive)
        .await
        .expect(StatusCode::OK, "upload");
    request.upload_id = answer.upload_id;
    request
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_registry_answers_503_while_dynamodb_or_s3_is_down_and_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let mut dynalite = Emulator::dynalite(&dir.path().join("dynalite"));
    let mut s3s = Emulator::s3s_fs(&dir.path().join("s3"));
    let r = TestRegistry::aws_at(&dynalite.url(), &s3s.url()).await;
    let token = r.token(Scope::Publish, None).await;
    let signer = TestSigner::rsa();
    let files = provider_release("tool", "1.0.0", &["linux_amd64"], &signer);
    r.publish(
        &provider("outage/tool", "1.0.0"),
        &token,
        &files,
        provider_request(&signer),
    )
    .await
    .expect(StatusCode::CREATED, "publish the provider");
    let archive = module_archive(&[("main.tf", "output \"x\" { value = 1 }\n")]);
    publish_module(&r, &token, "outage/net/aws", "1.0.0", &archive)
        .await
        .expect(StatusCode::CREATED, "publish the module");
    let before = read_all(&r, "before any outage").await;
    let zip = r.get(READS[1]).await.json()["download_url"]
        .as_str()
        .unwrap()
        .to_string();
    let head_zip = || r.send_url(Method::HEAD, &zip, &[], Bytes::new());
    head_zip().await.expect(StatusCode::OK, "HEAD the archive");

    // DynamoDB down: every read and publish begin is a 503…
    dynalite.stop();
    for path in READS {
        unavailable(path, r.get(path)).await;
    }
    let next = PublishRequest {
        files: vec![decl("m.tar.gz", &archive)],
        ..Default::default()
    };
    let target = module("outage/net/aws", "1.1.0");
    unavailable(
        "begin",
        r.publish_step(&target, PublishStep::Begin, &token, &next),
    )
    .await;
    // …and what needs only S3 (and the URL key the registry holds) still works.
    head_zip()
        .await
        .expect(StatusCode::OK, "HEAD the archive, DynamoDB down");
    // Back: the same registry serves the same data again.
    dynalite.start();
    assert_eq!(read_all(&r, "DynamoDB back").await, before);

    // DynamoDB hung (connections accepted, never answered): a 503 too, once
    // the client's timeout ends the wait (the guard only keeps a regression
    // from hanging the suite).
    dynalite.freeze();
    let hung = tokio::time::timeout(HANG_GUARD, r.get(READS[2]));
    unavailable("DynamoDB hung", async {
        hung.await
            .unwrap_or_else(|_| panic!("no answer within {HANG_GUARD:?} from a hung DynamoDB"))
    })
    .await;
    dynalite.thaw();
    assert_eq!(read_all(&r, "DynamoDB thawed").await, before);

    // S3 hung: what reads it (a HEAD of an archive) is a 503 as well.
    s3s.freeze();
    let hung = tokio::time::timeout(HANG_GUARD, head_zip());
    answers_503("S3 hung", async {
        hung.await
            .unwrap_or_else(|_| panic!("no answer within {HANG_GUARD:?} from a hung S3"))
    })
    .await;
    s3s.thaw();

    // S3 down, with an upload made before.
    let request = begin_and_upload(&r, &token, "1.1.0", &archive).await;
    s3s.stop();
    // Reads need only DynamoDB: archive URLs are the registry's own, and a
    // GET of one is redirected to a presigned URL (made without S3)…
    assert_eq!(read_all(&r, "S3 down").await, before);
    r.send_url(Method::GET, &zip, &[], Bytes::new())
        .await
        .expect(StatusCode::TEMPORARY_REDIRECT, "GET the archive, S3 down");
    // …what reads S3 is a 503.
    // (A HEAD answer has no body.)
    answers_503("HEAD the archive", head_zip()).await;
    unavailable(
        "complete",
        r.publish_step(&target, PublishStep::Complete, &token, &request),
    )
    .await;
    // Back: the archive is there, and a publish completes again.
    s3s.start();
    let got = r.download(&zip).await;
    got.expect(StatusCode::OK, "download the archive, S3 back");
    let genuine = &files
        .iter()
        .find(|(n, _)| n.ends_with("_linux_amd64.zip"))
        .unwrap()
        .1;
    assert_eq!(got.body.as_ref(), genuine.as_slice());
    // The same complete, retried as its 503 asked: the publish was kept for it.
    r.publish_step(&target, PublishStep::Complete, &token, &request)
        .await
        .expect(StatusCode::CREATED, "complete retried, S3 back");
    let versions = r.get(READS[2]).await.json();
    assert_eq!(
        versions["modules"][0]["versions"].as_array().unwrap().len(),
        2,
        "{versions}"
    );
}
