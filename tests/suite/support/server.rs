//! A registry over real HTTPS: `tfreg serve`, or every Lambda function behind
//! `cargo lambda watch` on the DynamoDB and S3 emulators.

use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use super::command::ok;
use super::tools::{Tools, require_emulators, tfreg_bin};

/// The path of [`Server::server_log`]'s marker requests.
const LOG_MARK: &str = "/_log-mark/";

/// The function binaries, by the names cargo lambda watch's router gives them.
pub const FUNCTIONS: [&str; 7] = ["read", "blob", "publish", "admin", "ui", "auth", "fill"];

/// A loopback port that was free a moment ago.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Two adjacent loopback ports, `p` and `p + 1`, free a moment ago, for
/// `cargo lambda watch --tls-*`: it serves TLS on `--invoke-port` and its
/// runtime API on the port after it, which nobody reserved. The pair is taken
/// below the kernel's ephemeral range (`ip_local_port_range`), where neither
/// outgoing connections nor other tests' `bind(0)` listeners land: a CI run
/// lost a test when the port after a `bind(0)` port was already in use.
pub fn free_port_pair() -> u16 {
    let ephemeral_low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768);
    let (low, high) = (10_000u16, ephemeral_low.saturating_sub(2).max(10_100));
    // A different start per process and call, so concurrent tests spread out.
    let seed = {
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u32(std::process::id());
        h.finish()
    };
    let span = u64::from(high - low);
    for attempt in 0..span {
        let port = low + ((seed + attempt * 7919) % span) as u16;
        let first = TcpListener::bind(("127.0.0.1", port));
        let second = TcpListener::bind(("127.0.0.1", port + 1));
        if first.is_ok() && second.is_ok() {
            return port;
        }
    }
    panic!("no two adjacent free loopback ports between {low} and {high}");
}

/// `tfreg dev-cert` for 127.0.0.1 in `dir`: `dir/tls/{ca,server}.pem`,
/// `server.key` (the CA reused when `dir` has one).
pub fn dev_cert(dir: &Path) {
    ok(
        Command::new(tfreg_bin())
            .args(["dev-cert", "--hostname", "127.0.0.1", "--dir"])
            .arg(dir)
            .output()
            .unwrap(),
        "tfreg dev-cert",
    );
}

/// Panics with the watcher's log if `cargo lambda watch` has exited (a port
/// it could not bind, say), rather than waiting out the deadline.
fn watcher_still_running(watcher: &mut Child, log: &Path) {
    if let Ok(Some(status)) = watcher.try_wait() {
        panic!(
            "cargo lambda watch exited ({status}):\n{}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
    }
}

/// One function of a rehearsed stack: its name (Lambda's), the binary of
/// its package, its whole environment.
pub struct StackFunction {
    pub name: String,
    pub binary: String,
    pub env: Vec<(String, String)>,
}

/// A running registry over HTTPS (`tfreg serve`, or the Lambda functions under
/// `cargo lambda watch`), stopped on drop.
pub struct Server {
    /// Stops the server's process group (and reaps its processes) on drop.
    _group: Group,
    pub host: String,
    /// Arguments that point `tfreg token create` at this registry's store.
    pub(crate) store_args: Vec<String>,
    /// The environment those commands run with beside the suite's own
    /// (a rehearsed stack's: its endpoint and the deployer's credentials).
    pub(crate) store_env: Vec<(String, String)>,
    pub ca: PathBuf,
    /// Its stderr. Read it with [`Server::server_log`]: `tfreg serve` writes
    /// its log from a thread, so a line may land after the response.
    pub log: PathBuf,
    pub http: reqwest::blocking::Client,
    /// Whether its log is written from a thread (`tfreg serve`).
    log_thread: bool,
}

/// Processes started in one process group, all stopped on drop (also when a
/// test fails half-way through starting them).
struct Group {
    leader: Child,
    members: Vec<Child>,
}

impl Group {
    /// `function` (a function binary) run as Lambda runs it: polling the
    /// runtime API at `runtime_addr` under `name`, its output in `log`, in
    /// this group.
    fn start_function(
        &mut self,
        function: &mut Command,
        runtime_addr: &str,
        name: &str,
        log: &std::fs::File,
        tmp_root: &Path,
    ) {
        // A temporary directory of its own (`tmp_root/name`), as a Lambda
        // sandbox's /tmp is: the fill function clears its part of it at init.
        let tmp = tmp_root.join(name);
        std::fs::create_dir_all(&tmp).unwrap();
        let child = function
            .env("TMPDIR", &tmp)
            .env(
                "AWS_LAMBDA_RUNTIME_API",
                format!("http://{runtime_addr}/.rt/{name}"),
            )
            .env("AWS_LAMBDA_FUNCTION_NAME", name)
            .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256")
            .env("AWS_LAMBDA_FUNCTION_VERSION", "1")
            .stdout(log.try_clone().unwrap())
            .stderr(log.try_clone().unwrap())
            .process_group(self.leader.id() as i32)
            .spawn()
            .expect("start a function");
        self.members.push(child);
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", "--", &format!("-{}", self.leader.id())])
            .status();
        for child in self
            .members
            .iter_mut()
            .chain(std::iter::once(&mut self.leader))
        {
            let _ = child.wait();
        }
    }
}

/// The suite's HTTP client: no redirects, a generous timeout.
fn client() -> reqwest::blocking::ClientBuilder {
    reqwest::blocking::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(300))
}

/// A client trusting the CA in `ca`, once that file holds one.
fn client_trusting(ca: &Path) -> Option<reqwest::blocking::Client> {
    let cert = reqwest::Certificate::from_pem(&std::fs::read(ca).ok()?).ok()?;
    Some(client().add_root_certificate(cert).build().unwrap())
}

/// Wait until `https://host/.well-known/terraform.json` answers 200 to the
/// client `client` makes; on timeout, fail with the last answer or error and
/// the contents of `logs`.
fn wait_for_discovery(
    host: &str,
    client: &dyn Fn() -> Option<reqwest::blocking::Client>,
    logs: &[&Path],
    limit: Duration,
    what: &str,
) -> reqwest::blocking::Client {
    let started = Instant::now();
    let mut last = String::from("no CA certificate yet");
    loop {
        if let Some(client) = client() {
            match client
                .get(format!("https://{host}/.well-known/terraform.json"))
                .timeout(Duration::from_secs(10))
                .send()
            {
                Ok(r) if r.status() == 200 => return client,
                Ok(r) => last = format!("HTTP {}", r.status()),
                Err(e) => last = format!("{e:?}"),
            }
        }
        if started.elapsed() > limit {
            let logs: Vec<String> = logs
                .iter()
                .map(|l| {
                    let text = std::fs::read_to_string(l).unwrap_or_default();
                    format!("--- {}:\n{text}", l.display())
                })
                .collect();
            panic!(
                "{what} did not come up in {limit:?}; last try: {last}\n{}",
                logs.join("\n")
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `cargo lambda watch` on `port` (TLS with `dir`'s certificate), routing
/// as the manifest in `manifest_dir` says, in a process group of its own;
/// the address of its runtime API once that accepts connections.
fn watch(dir: &Path, port: u16, manifest_dir: &Path) -> (Group, String) {
    let tools = Tools::get();
    let watch_log = dir.join("lambda-watch.log");
    let path = format!(
        "{}:{}",
        tools.path("TFREG_VENV_BIN").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let watch_out = std::fs::File::create(&watch_log).unwrap();
    let child = Command::new(tools.path("TFREG_CARGO_LAMBDA"))
        .args([
            "lambda",
            "watch",
            "--only-lambda-apis",
            "--invoke-address",
            "127.0.0.1",
        ])
        .args(["--invoke-port", &port.to_string()])
        .arg("--tls-cert")
        .arg(dir.join("tls/server.pem"))
        .arg("--tls-key")
        .arg(dir.join("tls/server.key"))
        .current_dir(manifest_dir)
        .env("PATH", path)
        .stdout(watch_out.try_clone().unwrap())
        .stderr(watch_out)
        .process_group(0)
        .spawn()
        .expect("start cargo lambda watch");
    let mut group = Group {
        leader: child,
        members: vec![],
    };
    // The runtime API listens beside the TLS front end; cargo lambda says where.
    let deadline = Instant::now() + Duration::from_secs(60);
    let runtime_addr = loop {
        let text = std::fs::read_to_string(&watch_log).unwrap_or_default();
        if let Some(addr) = text
            .lines()
            .find_map(|l| l.split("runtime_addr=").nth(1))
            .map(|a| a.split_whitespace().next().unwrap_or("").to_string())
        {
            break addr;
        }
        assert!(
            Instant::now() < deadline,
            "cargo lambda watch did not start:\n{text}"
        );
        watcher_still_running(&mut group.leader, &watch_log);
        std::thread::sleep(Duration::from_millis(100));
    };
    // cargo lambda logs the address before its server accepts connections,
    // and a function whose first poll of the runtime API is refused exits
    // (seen under load: all nine exited, and discovery never came up).
    while std::net::TcpStream::connect(&runtime_addr).is_err() {
        assert!(
            Instant::now() < deadline,
            "cargo lambda watch's runtime API at {runtime_addr} never accepted a connection:\n{}",
            std::fs::read_to_string(&watch_log).unwrap_or_default()
        );
        watcher_still_running(&mut group.leader, &watch_log);
        std::thread::sleep(Duration::from_millis(50));
    }
    (group, runtime_addr)
}

/// Where this `cargo test` built the function binaries.
fn functions_dir() -> PathBuf {
    std::env::current_exe()
        .unwrap()
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .to_path_buf()
}

impl Server {
    /// A server on a free port of 127.0.0.1, known as `127.0.0.1:<port>`.
    pub fn start(data_dir: &Path, extra: &[&str]) -> Server {
        let port = free_port();
        Self::start_at(data_dir, &format!("127.0.0.1:{port}"), extra)
    }

    /// A server on `listen` (`IP:PORT`); its hostname is `IP`, or `IP:PORT` unless the port is 443.
    pub fn start_at(data_dir: &Path, listen: &str, extra: &[&str]) -> Server {
        Self::start_with_env(data_dir, listen, extra, &[])
    }

    /// [`Server::start_at`], with `env` set for `tfreg serve` (e.g.
    /// `SSL_CERT_FILE` naming the CA of an identity provider it fetches from).
    pub fn start_with_env(
        data_dir: &Path,
        listen: &str,
        extra: &[&str],
        env: &[(&str, &Path)],
    ) -> Server {
        let ca = data_dir.join("tls/ca.pem");
        Self::serve(data_dir, listen, None, extra, env, &ca, &|| {
            client_trusting(&ca)
        })
    }

    /// A server on `listen` known as `hostname`, a name no DNS answers (an
    /// upstream origin such as `registry.example.test:PORT`): its `http`
    /// client resolves that name to `listen`.
    pub fn start_named(data_dir: &Path, listen: &str, hostname: &str, extra: &[&str]) -> Server {
        let ca = data_dir.join("tls/ca.pem");
        let addr: std::net::SocketAddr = listen.parse().unwrap();
        let name = hostname
            .rsplit_once(':')
            .map_or(hostname, |(n, _)| n)
            .to_string();
        Self::serve(data_dir, listen, Some(hostname), extra, &[], &ca, &|| {
            let cert = reqwest::Certificate::from_pem(&std::fs::read(&ca).ok()?).ok()?;
            Some(
                client()
                    .add_root_certificate(cert)
                    .resolve(&name, addr)
                    .build()
                    .unwrap(),
            )
        })
    }

    /// A server on a free port of 127.0.0.1 with the operator's own
    /// certificate (`--tls-cert CERT --tls-key KEY`); its `ca` is `cert`. Its
    /// `http` client does not check the certificate: reqwest (webpki) refuses
    /// the classic self-signed `CA:TRUE` certificate as a server's own, and
    /// whether the tfreg CLI trusts it is what tests using this check.
    pub fn start_with_cert(data_dir: &Path, cert: &Path, key: &Path) -> Server {
        let listen = format!("127.0.0.1:{}", free_port());
        let (cert_arg, key_arg) = (cert.to_str().unwrap(), key.to_str().unwrap());
        Self::serve(
            data_dir,
            &listen,
            None,
            &["--tls-cert", cert_arg, "--tls-key", key_arg],
            &[],
            cert,
            &|| Some(client().danger_accept_invalid_certs(true).build().unwrap()),
        )
    }

    /// `tfreg serve` on `listen`, ready once `client` gets discovery's answer.
    fn serve(
        data_dir: &Path,
        listen: &str,
        hostname: Option<&str>,
        extra: &[&str],
        env: &[(&str, &Path)],
        ca: &Path,
        client: &dyn Fn() -> Option<reqwest::blocking::Client>,
    ) -> Server {
        let (ip, port) = listen.rsplit_once(':').unwrap();
        let port: u16 = port.parse().unwrap();
        let host = match hostname {
            Some(h) => h.to_string(),
            None if port == 443 => ip.to_string(),
            None => listen.to_string(),
        };
        let log = data_dir.with_extension("log");
        let log_file = std::fs::File::create(&log).unwrap();
        let child = Command::new(tfreg_bin())
            .args(["serve", "--data-dir"])
            .arg(data_dir)
            .args(["--listen", listen, "--hostname", &host])
            .args(extra)
            .envs(env.iter().copied())
            .env("TFREG_LOG", "info")
            .stdout(Stdio::null())
            .stderr(log_file)
            .process_group(0)
            .spawn()
            .expect("start tfreg serve");
        let group = Group {
            leader: child,
            members: vec![],
        };
        let http = wait_for_discovery(
            &host,
            client,
            &[&log],
            Duration::from_secs(30),
            "tfreg serve",
        );
        let store_args = vec!["--data-dir".to_string(), data_dir.display().to_string()];
        Server {
            _group: group,
            host,
            store_args,
            store_env: vec![],
            ca: ca.to_path_buf(),
            log,
            http,
            log_thread: true,
        }
    }

    /// Every Lambda function behind `cargo lambda watch` (its Lambda runtime
    /// API, function router and TLS front end), on DynamoDB and S3 (the
    /// emulators: `AWS_ENDPOINT_URL_*` from the environment). Each function
    /// binary, built by this same `cargo test`, runs as its own process polling
    /// the runtime API, as on Lambda. A fresh table and bucket are made for it.
    pub fn start_lambda(dir: &Path) -> Server {
        Self::start_lambda_with(dir, &[])
    }

    /// Like [`Server::start_lambda`], with more of the functions' settings
    /// (`tfreg_lambda::config`: `TFREG_ANONYMOUS_READS`, `TFREG_URL_TTL`, ...).
    pub fn start_lambda_with(dir: &Path, settings: &[(&str, &str)]) -> Server {
        Self::start_lambda_on(dir, free_port_pair(), settings)
    }

    /// Like [`Server::start_lambda_with`] on `port` (from [`free_port_pair`]:
    /// the runtime API takes the next one), for a test that must name the
    /// registry's URL before it starts (an identity provider's redirect URI).
    pub fn start_lambda_on(dir: &Path, port: u16, settings: &[(&str, &str)]) -> Server {
        require_emulators();
        let host = format!("127.0.0.1:{port}");
        // Unique in the emulators, which outlive a test: a port is free
        // again once a test ends, and another test (or run) may get it.
        let name = format!("tfreg-e2e-{port}-{:08x}", rand::random::<u32>());
        std::fs::create_dir_all(dir).unwrap();
        ok(
            Command::new(tfreg_bin())
                .args([
                    "aws",
                    "init",
                    "--table",
                    &name,
                    "--bucket",
                    &name,
                    "--s3-force-path-style",
                ])
                .output()
                .unwrap(),
            "tfreg aws init",
        );
        dev_cert(dir);
        let log = dir.join("lambda.log");
        let watch_log = dir.join("lambda-watch.log");
        let (mut group, runtime_addr) = watch(dir, port, Path::new(env!("CARGO_MANIFEST_DIR")));
        let functions_dir = functions_dir();
        let function_log = std::fs::File::create(&log).unwrap();
        // What template.yaml deploys: one binary per function package, each
        // named as cargo lambda watch's router names it.
        for name_of_fn in FUNCTIONS {
            let bin = functions_dir.join(name_of_fn);
            assert!(
                bin.exists(),
                "{} is missing: cargo test --workspace builds it",
                bin.display()
            );
            let mut function = Command::new(&bin);
            function
                .env("TFREG_TABLE", &name)
                .env("TFREG_BUCKET", &name)
                .env("TFREG_HOSTNAME", &host)
                .env("TFREG_S3_FORCE_PATH_STYLE", "true")
                .env("TFREG_LOG", "info")
                // A cache miss invokes the fill function through cargo lambda
                // watch's Invoke API (on its plain runtime address, as the
                // SDK reaches Lambda's), and the test origins live on loopback.
                .env("TFREG_FILL_FUNCTION", "fill")
                .env("AWS_ENDPOINT_URL_LAMBDA", format!("http://{runtime_addr}"))
                .env("TFREG_ORIGIN_ALLOW_LOOPBACK", "true")
                .envs(settings.iter().copied());
            group.start_function(
                &mut function,
                &runtime_addr,
                name_of_fn,
                &function_log,
                &dir.join("tmp"),
            );
        }
        let ca = dir.join("tls/ca.pem");
        let http = wait_for_discovery(
            &host,
            &|| client_trusting(&ca),
            &[&log, &watch_log],
            Duration::from_secs(60),
            "the Lambda functions",
        );
        let store_args = ["--table", &name, "--bucket", &name, "--s3-force-path-style"]
            .map(String::from)
            .to_vec();
        Server {
            _group: group,
            host,
            store_args,
            store_env: vec![],
            ca,
            log,
            http,
            log_thread: false,
        }
    }

    /// The functions of a rehearsed stack (issue 36), each under its own
    /// name as Lambda runs it: one process of its binary per function,
    /// started with `env` and nothing else (no variable of the suite's),
    /// polling `cargo lambda watch`'s runtime API at its name, which
    /// `routes` (a `cargo lambda watch` path, a function's name) and
    /// Lambda's Invoke (`AWS_ENDPOINT_URL_LAMBDA`, added) lead to. The
    /// store's commands run with `store_env`.
    pub fn start_stack_functions(
        dir: &Path,
        port: u16,
        functions: &[StackFunction],
        routes: &[(String, String)],
        store: (Vec<String>, Vec<(String, String)>),
    ) -> Server {
        let host = format!("127.0.0.1:{port}");
        let router = dir.join("router");
        std::fs::create_dir_all(&router).unwrap();
        dev_cert(dir);
        // cargo lambda watch routes to binaries of the manifest it reads:
        // one (never built) per function name.
        let mut manifest = String::from(
            "[package]\nname = \"rehearsed-router\"\nversion = \"0.0.0\"\nedition = \"2021\"\n",
        );
        for f in functions {
            manifest += &format!("\n[[bin]]\nname = \"{}\"\npath = \"main.rs\"\n", f.name);
        }
        manifest += "\n[package.metadata.lambda.watch.router]\n";
        for (path, name) in routes {
            manifest += &format!("\"{path}\" = \"{name}\"\n");
        }
        std::fs::write(router.join("Cargo.toml"), manifest).unwrap();
        std::fs::write(router.join("main.rs"), "fn main() {}\n").unwrap();
        let log = dir.join("lambda.log");
        let (mut group, runtime_addr) = watch(dir, port, &router);
        let function_log = std::fs::File::create(&log).unwrap();
        for f in functions {
            let mut function = Command::new(functions_dir().join(&f.binary));
            function
                .env_clear()
                .envs(f.env.iter().map(|(k, v)| (k, v)))
                .env("AWS_ENDPOINT_URL_LAMBDA", format!("http://{runtime_addr}"));
            group.start_function(
                &mut function,
                &runtime_addr,
                &f.name,
                &function_log,
                &dir.join("tmp"),
            );
        }
        let ca = dir.join("tls/ca.pem");
        let http = wait_for_discovery(
            &host,
            &|| client_trusting(&ca),
            &[&log, &dir.join("lambda-watch.log")],
            Duration::from_secs(60),
            "the rehearsed stack's functions",
        );
        Server {
            _group: group,
            host,
            store_args: store.0,
            store_env: store.1,
            ca,
            log,
            http,
            log_thread: false,
        }
    }

    /// The process id of `tfreg serve` (the Lambda stack: of `cargo lambda watch`).
    pub fn pid(&self) -> u32 {
        self._group.leader.id()
    }

    pub fn url(&self, path: &str) -> String {
        format!("https://{}{path}", self.host)
    }

    /// A token made with `tfreg token create` against this registry's store.
    pub fn token(&self, scope: &str, namespace: Option<&str>) -> String {
        let mut cmd = Command::new(tfreg_bin());
        cmd.args(["token", "create", "--name", &format!("test-{scope}")])
            .args(&self.store_args)
            .envs(self.store_env.iter().map(|(k, v)| (k, v)))
            .args(["--scope", scope]);
        if let Some(ns) = namespace {
            cmd.args(["--namespace", ns]);
        }
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "token create: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let token = String::from_utf8(out.stdout).unwrap();
        assert_eq!(
            token.lines().count(),
            1,
            "token create must print only the token"
        );
        token.trim().to_string()
    }

    /// Run the tfreg CLI on this registry's store directly (`--data-dir`, or
    /// the Lambda stack's `--table`/`--bucket`), as an operator would.
    pub fn cli_on_store(&self, args: &[&str]) -> Output {
        let out = Command::new(tfreg_bin())
            .args(args)
            .args(&self.store_args)
            .envs(self.store_env.iter().map(|(k, v)| (k, v)))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "tfreg {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    /// The DynamoDB table (and S3 bucket, same name) of a Lambda server.
    pub fn table(&self) -> Option<&str> {
        let at = self.store_args.iter().position(|a| a == "--table")?;
        self.store_args.get(at + 1).map(String::as_str)
    }

    /// Run the tfreg CLI against this server with `token`.
    pub fn tfreg(&self, token: &str, args: &[&str]) -> Output {
        Command::new(tfreg_bin())
            .args(args)
            .args(["--registry", &self.url("")])
            .env("TFREG_TOKEN", token)
            .env("SSL_CERT_FILE", &self.ca)
            .output()
            .unwrap()
    }

    /// `tfreg publish provider DIST --namespace NS --signing-key DIST/key.asc [extra...]`.
    pub fn publish_provider(
        &self,
        token: &str,
        dist: &Path,
        namespace: &str,
        extra: &[&str],
    ) -> Output {
        self.publish_provider_with_key(token, dist, &dist.join("key.asc"), namespace, extra)
    }

    /// Like [`Server::publish_provider`] with another public key file.
    pub fn publish_provider_with_key(
        &self,
        token: &str,
        dist: &Path,
        key: &Path,
        namespace: &str,
        extra: &[&str],
    ) -> Output {
        let mut args = vec![
            "publish",
            "provider",
            dist.to_str().unwrap(),
            "--namespace",
            namespace,
            "--signing-key",
            key.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        self.tfreg(token, &args)
    }

    /// `tfreg publish module SRC --namespace NS --name NAME --system SYSTEM --version VERSION`.
    pub fn publish_module(&self, token: &str, src: &Path, module: &str, version: &str) -> Output {
        let [namespace, name, system] = module.split('/').collect::<Vec<_>>()[..] else {
            panic!("module address NS/NAME/SYSTEM expected, got {module}")
        };
        self.tfreg(
            token,
            &[
                "publish",
                "module",
                src.to_str().unwrap(),
                "--namespace",
                namespace,
                "--name",
                name,
                "--system",
                system,
                "--version",
                version,
            ],
        )
    }

    pub fn get(&self, path: &str) -> reqwest::blocking::Response {
        self.http.get(self.url(path)).send().unwrap()
    }

    /// [`Server::get`] with `token` as its bearer.
    pub fn get_as(&self, token: &str, path: &str) -> reqwest::blocking::Response {
        self.http
            .get(self.url(path))
            .bearer_auth(token)
            .send()
            .unwrap()
    }

    /// The server's log, with a line for every request answered so far.
    /// `tfreg serve` queues its lines to one writer thread, in order, so a
    /// marker request's line in the file means every earlier line is there
    /// too; the marker's lines are left out of what is returned.
    pub fn server_log(&self) -> String {
        let read = || std::fs::read_to_string(&self.log).unwrap_or_default();
        if !self.log_thread {
            return read();
        }
        static MARKS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let mark = format!(
            "{LOG_MARK}{}-{}",
            std::process::id(),
            MARKS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        );
        let _ = self.http.get(self.url(&mark)).send();
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let text = read();
            if text.contains(&mark) {
                return text
                    .lines()
                    .filter(|l| !l.contains(LOG_MARK))
                    .map(|l| format!("{l}\n"))
                    .collect();
            }
            assert!(
                Instant::now() < deadline,
                "the marker request {mark} was never logged:\n{text}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}
