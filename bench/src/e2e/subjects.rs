//! What an init runs against: a registry (`tfreg serve` or the Lambda
//! functions), and nginx serving the same archives as static files.

use super::*;

/// A registry on a loopback port of its own: `tfreg serve --private`, or the
/// Lambda functions (`scripts/lambda-local`).
pub(crate) struct Registry {
    /// Dropped last of what matters: stops the registry.
    pub(crate) _child: StopOnDrop,
    /// Makes tokens: the serve's data directory, or the Lambda stack's admin token.
    pub(crate) admin: Admin,
    pub(crate) tfreg: PathBuf,
    /// Holds `tls/` (and for `tfreg serve`, the store).
    pub(crate) data: PathBuf,
    pub(crate) host: String,
    pub(crate) ca: PathBuf,
    pub(crate) log: PathBuf,
    pub(crate) http: reqwest::blocking::Client,
    pub(crate) discovery_bytes: usize,
}

impl Registry {
    pub(crate) fn start(tfreg: &Path, data: &Path) -> Result<Registry, Error> {
        let host = format!("127.0.0.1:{}", free_port()?);
        Self::start_at(tfreg, data, &host, &host, &["--private"])
    }

    /// `tfreg serve` on `listen`, known as `host` (its `--hostname`, for
    /// which its certificate is made), with `args`.
    pub(crate) fn start_at(
        tfreg: &Path,
        data: &Path,
        listen: &str,
        host: &str,
        args: &[&str],
    ) -> Result<Registry, Error> {
        let host = host.to_string();
        let log = data.with_extension("log");
        let child = Command::new(tfreg)
            .args(["serve", "--data-dir"])
            .arg(data)
            .args(["--listen", listen, "--hostname", &host])
            .args(args)
            .env("TFREG_LOG", "info")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log)?)
            .spawn()?;
        Self::wait(
            StopOnDrop(Some(child)),
            Admin::DataDir,
            tfreg,
            data,
            host,
            log,
        )
    }

    /// Every function under `cargo lambda watch` on DynamoDB and S3 emulators
    /// of its own, by the README's one command, with the bench's profile and
    /// archives handed out the `delivery` way.
    pub(crate) fn start_lambda(
        tfreg: &Path,
        data: &Path,
        delivery: crate::cost::delivery::Delivery,
    ) -> Result<Registry, Error> {
        let port = crate::tools::free_ports(3)?;
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/lambda-local");
        std::fs::create_dir_all(data)?;
        let out = data.join("lambda-local.out");
        let args = super::edge::lambda_local_args(delivery);
        eprintln!(
            "e2e: starting the Lambda functions (scripts/lambda-local {}; a build if the binaries are not there)",
            args.join(" ")
        );
        let child = Command::new(script)
            .args(&args)
            .args(["--port", &port.to_string(), "--data-dir"])
            .arg(data)
            .stdout(std::fs::File::create(&out)?)
            .stderr(std::fs::File::create(data.join("lambda-local.err"))?)
            .process_group(0)
            .spawn()?;
        let mut child = StopOnDrop(Some(child));
        let started = Instant::now();
        let token = loop {
            let text = std::fs::read_to_string(&out).unwrap_or_default();
            if let Some(token) = text
                .lines()
                .find_map(|l| l.trim().strip_prefix("export TFREG_TOKEN="))
            {
                break token.split_whitespace().next().unwrap_or("").to_string();
            }
            let process = child.0.as_mut().ok_or("no process")?;
            if process.try_wait()?.is_some() || started.elapsed() > Duration::from_secs(1800) {
                return Err(format!(
                    "scripts/lambda-local did not come up: {}",
                    std::fs::read_to_string(data.join("lambda-local.err")).unwrap_or_default()
                )
                .into());
            }
            std::thread::sleep(Duration::from_millis(200));
        };
        Self::wait(
            child,
            Admin::Token(token),
            tfreg,
            data,
            format!("127.0.0.1:{port}"),
            // The functions write their request lines here (scripts/lambda-local).
            data.join("functions.log"),
        )
    }

    /// Wait until discovery answers over HTTPS with the development CA.
    pub(crate) fn wait(
        child: StopOnDrop,
        admin: Admin,
        tfreg: &Path,
        data: &Path,
        host: String,
        log: PathBuf,
    ) -> Result<Registry, Error> {
        let ca = data.join("tls/ca.pem");
        let started = Instant::now();
        let (http, discovery_bytes) = loop {
            if let Ok(pem) = std::fs::read(&ca) {
                let http = reqwest::blocking::Client::builder()
                    .add_root_certificate(reqwest::Certificate::from_pem(&pem)?)
                    .build()?;
                if let Ok(resp) = http
                    .get(format!("https://{host}/.well-known/terraform.json"))
                    .send()
                    && resp.status().is_success()
                {
                    break (http, resp.bytes()?.len());
                }
            }
            if started.elapsed() > Duration::from_secs(60) {
                return Err(format!(
                    "the registry did not answer within 60 s: {}",
                    std::fs::read_to_string(&log).unwrap_or_default()
                )
                .into());
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        Ok(Registry {
            _child: child,
            admin,
            tfreg: tfreg.to_path_buf(),
            data: data.to_path_buf(),
            host,
            ca,
            log,
            http,
            discovery_bytes,
        })
    }

    pub(crate) fn token(&self, scope: &str) -> Result<String, Error> {
        let mut command = Command::new(&self.tfreg);
        command
            .args(["token", "create", "--name", &format!("bench-{scope}")])
            .args(["--scope", scope]);
        match &self.admin {
            Admin::DataDir => command.arg("--data-dir").arg(&self.data),
            Admin::Token(admin) => command
                .args(["--registry", &format!("https://{}", self.host)])
                .arg("--ca-cert")
                .arg(&self.ca)
                .env("TFREG_TOKEN", admin),
        };
        let out = command.output()?;
        if !out.status.success() {
            return Err(format!("token create: {}", String::from_utf8_lossy(&out.stderr)).into());
        }
        Ok(String::from_utf8(out.stdout)?.trim().to_string())
    }

    /// Publish the fixture's providers and modules with a publish token; a read token.
    pub(crate) fn publish_fixture(&self, fixture: &Fixture) -> Result<String, Error> {
        let publish_token = self.token("publish")?;
        for (i, dist) in fixture.provider_dists.iter().enumerate() {
            self.cli(
                &publish_token,
                &[
                    "publish",
                    "provider",
                    "--namespace",
                    NS,
                    "--signing-key",
                    &dist.join("key.asc").display().to_string(),
                    &dist.display().to_string(),
                ],
                &format!("publish provider p{i}"),
            )?;
        }
        for (i, archive) in fixture.module_archives.iter().enumerate() {
            self.cli(
                &publish_token,
                &[
                    "publish",
                    "module",
                    "--namespace",
                    NS,
                    "--name",
                    &format!("m{i}"),
                    "--system",
                    "null",
                    "--version",
                    VERSION,
                    &archive.display().to_string(),
                ],
                &format!("publish module m{i}"),
            )?;
        }
        self.token("read")
    }

    pub(crate) fn cli(&self, token: &str, args: &[&str], what: &str) -> Result<(), Error> {
        let out = Command::new(&self.tfreg)
            .args(args)
            .args(["--registry", &format!("https://{}", self.host)])
            .arg("--ca-cert")
            .arg(&self.ca)
            .env("TFREG_TOKEN", token)
            .output()?;
        if !out.status.success() {
            return Err(format!("{what}: {}", String::from_utf8_lossy(&out.stderr)).into());
        }
        Ok(())
    }

    pub(crate) fn get(&self, token: &str, path: &str) -> Result<Vec<u8>, Error> {
        let resp = self
            .http
            .get(format!("https://{}{path}", self.host))
            .bearer_auth(token)
            .send()?;
        if !resp.status().is_success() {
            return Err(format!("GET {path}: {}", resp.status()).into());
        }
        Ok(resp.bytes()?.to_vec())
    }

    pub(crate) fn log_len(&self) -> Result<u64, Error> {
        Ok(std::fs::metadata(&self.log)?.len())
    }

    pub(crate) fn log_since(&self, offset: u64) -> Result<Vec<String>, Error> {
        let text = std::fs::read(&self.log)?;
        let new = text.get(offset as usize..).unwrap_or_default();
        Ok(String::from_utf8_lossy(new)
            .lines()
            .map(str::to_string)
            .collect())
    }

    /// Bytes of every item in the embedded store.
    pub(crate) fn table_bytes(&self) -> Result<u64, Error> {
        let db = rusqlite::Connection::open_with_flags(
            self.data.join("registry.db"),
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
        )?;
        let bytes: i64 = db.query_row(
            "SELECT COALESCE(SUM(length(pk) + length(sk) + length(data)), 0) FROM items",
            [],
            |row| row.get(0),
        )?;
        Ok(bytes as u64)
    }

    /// Read units of one item read on a read endpoint (strongly consistent:
    /// 1 unit per 4 KB or part of it), the mean over this registry's
    /// release items of the fixture's namespace.
    pub(crate) fn read_units_per_request(&self) -> Result<f64, Error> {
        let db = rusqlite::Connection::open_with_flags(
            self.data.join("registry.db"),
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
        )?;
        let mut statement = db.prepare(
            "SELECT length(pk) + length(sk) + length(data) FROM items WHERE pk LIKE ?1 OR pk LIKE ?2",
        )?;
        let sizes: Vec<i64> = statement
            .query_map(
                [format!("PROVIDER#{NS}/%"), format!("MODULE#{NS}/%")],
                |row| row.get(0),
            )?
            .collect::<Result<_, _>>()?;
        if sizes.is_empty() {
            return Err("no release items found in the store".into());
        }
        let units: f64 = sizes.iter().map(|s| (*s as f64 / 4096.0).ceil()).sum();
        Ok(units / sizes.len() as f64)
    }
}

pub(crate) enum Admin {
    DataDir,
    Token(String),
}

/// A child stopped as Ctrl-C would stop it: SIGTERM (scripts/lambda-local
/// then stops its functions and emulators), then its process group killed.
pub(crate) struct StopOnDrop(pub(crate) Option<Child>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        let Some(mut child) = self.0.take() else {
            return;
        };
        let pid = child.id() as i32;
        // SAFETY: kill(2) on the child we spawned (and its process group).
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(30);
        while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
        }
        unsafe { libc::kill(-pid, libc::SIGKILL) };
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// The same archives as static files: providers in the network mirror layout
/// (tfreg's own mirror documents with relative archive URLs), modules as
/// `.tar.gz` files.
pub(super) struct StaticSite {
    pub(crate) root: PathBuf,
}

impl StaticSite {
    pub(crate) fn write(
        root: &Path,
        registry: &Registry,
        token: &str,
        fixture: &Fixture,
    ) -> Result<StaticSite, Error> {
        let host_segment = registry.host.replace(':', "%3A");
        for (i, dist) in fixture.provider_dists.iter().enumerate() {
            let ty = format!("p{i}");
            let dir = root
                .join("providers")
                .join(MIRRORED_HOST)
                .join(NS)
                .join(&ty);
            std::fs::create_dir_all(&dir)?;
            let index = registry.get(
                token,
                &format!("/v1/mirror/{host_segment}/{NS}/{ty}/index.json"),
            )?;
            std::fs::write(dir.join("index.json"), index)?;
            let version = registry.get(
                token,
                &format!("/v1/mirror/{host_segment}/{NS}/{ty}/{VERSION}.json"),
            )?;
            let mut version: serde_json::Value = serde_json::from_slice(&version)?;
            let archives = version["archives"]
                .as_object_mut()
                .ok_or("a mirror version document without archives")?;
            for (platform, archive) in archives.iter_mut() {
                let name = format!("terraform-provider-{ty}_{VERSION}_{platform}.zip");
                std::fs::copy(dist.join(&name), dir.join(&name))?;
                archive["url"] = serde_json::Value::String(name);
            }
            std::fs::write(
                dir.join(format!("{VERSION}.json")),
                serde_json::to_vec(&version)?,
            )?;
        }
        let modules = root.join("modules");
        std::fs::create_dir_all(&modules)?;
        for archive in &fixture.module_archives {
            std::fs::copy(
                archive,
                modules.join(archive.file_name().ok_or("a file name")?),
            )?;
        }
        Ok(StaticSite {
            root: root.to_path_buf(),
        })
    }
}

/// nginx over HTTPS with tfreg's development certificate (same name, same CA).
pub(super) struct Nginx {
    pub(crate) child: Child,
    pub(crate) host: String,
}

impl Nginx {
    pub(crate) fn start(
        bin: &Path,
        dir: &Path,
        root: &Path,
        registry: &Registry,
    ) -> Result<Nginx, Error> {
        std::fs::create_dir_all(dir)?;
        let host = format!("127.0.0.1:{}", free_port()?);
        let tls = registry.data.join("tls");
        let user = if crate::tools::running_as_root() {
            "user root;\n"
        } else {
            ""
        };
        let d = dir.display();
        let config = format!(
            "{user}worker_processes 2;\ndaemon off;\npid {d}/nginx.pid;\nerror_log {d}/error.log;\n\
             events {{ worker_connections 1024; }}\n\
             http {{\n  access_log off;\n  client_body_temp_path {d}/body;\n  proxy_temp_path {d}/proxy;\n  fastcgi_temp_path {d}/fastcgi;\n  uwsgi_temp_path {d}/uwsgi;\n  scgi_temp_path {d}/scgi;\n\
               types {{ application/json json; application/zip zip; application/gzip gz; }}\n  default_type application/octet-stream;\n\
               server {{\n    listen {host} ssl http2;\n    ssl_certificate {};\n    ssl_certificate_key {};\n    root {};\n  }}\n}}\n",
            tls.join("server.pem").display(),
            tls.join("server.key").display(),
            root.display(),
        );
        let conf = dir.join("nginx.conf");
        std::fs::write(&conf, config)?;
        let child = Command::new(bin)
            .arg("-c")
            .arg(&conf)
            .arg("-p")
            .arg(dir)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("stderr.log"))?)
            .spawn()?;
        let started = Instant::now();
        while std::net::TcpStream::connect(&host).is_err() {
            if started.elapsed() > Duration::from_secs(10) {
                return Err(format!(
                    "nginx did not listen within 10 s: {}",
                    std::fs::read_to_string(dir.join("stderr.log")).unwrap_or_default()
                )
                .into());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(Nginx { child, host })
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
