//! The pull-through cache through the network mirror, on `tfreg serve`
//! (issue 22, plan step 1): the origin is a second `tfreg serve` with its
//! own data directory and CA, publishing a real gpg-signed release, known
//! as `registry.example.test:PORT` (no DNS answers that name: the upstream's
//! admin-only `connect.to` and CA reach it). What a token made with
//! `--fill` asks is fetched, verified and stored byte for byte; a token
//! without it gets only what is cached; once the origin is gone, what is
//! cached still installs.

use std::path::Path;

use std::path::PathBuf;

use serde_json::Value;

use crate::support::command::ok;
use crate::support::dist::provider_dist;
use crate::support::gpg::Gpg;
use crate::support::server::Server;

/// An origin registry publishing hashicorp/null 1.0.0 for two platforms,
/// known as `name` and served at `ip`:443 (no port in the name: Terraform
/// cannot use a network mirror for a provider whose hostname has one: it
/// resolves `host:port/ns/type/index.json` against the mirror's URL as a
/// URL of scheme `host`); its zips (linux_amd64, darwin_arm64).
pub(crate) struct Origin {
    pub server: Server,
    pub host: String,
    pub listen: String,
    pub linux_zip: Vec<u8>,
    pub zips: Vec<std::path::PathBuf>,
}

impl Origin {
    pub fn start(dir: &Path, ip: &str, name: &str) -> Origin {
        let gpg = Gpg::new("rsa2048");
        Self::start_with(dir, ip, name, &[("1.0.0", &gpg)])
    }

    /// [`Origin::start`] publishing these versions, each signed by its key.
    pub fn start_with(dir: &Path, ip: &str, name: &str, releases: &[(&str, &Gpg)]) -> Origin {
        Self::serving(dir, ip, name, releases, &[])
    }

    /// [`Origin::start`], private: its API (not its signed archive URLs)
    /// needs a token.
    pub fn start_private(dir: &Path, ip: &str, name: &str) -> Origin {
        let gpg = Gpg::new("rsa2048");
        Self::serving(dir, ip, name, &[("1.0.0", &gpg)], &["--private"])
    }

    fn serving(
        dir: &Path,
        ip: &str,
        name: &str,
        releases: &[(&str, &Gpg)],
        serve_args: &[&str],
    ) -> Origin {
        let listen = format!("{ip}:443");
        let host = name.to_string();
        let data = dir.join("origin");
        let mut zips = Vec::new();
        // Published while it answers to its address (the CLI resolves no
        // test name), then served under the foreign name: URLs are made
        // per request from the hostname, the data does not change.
        {
            let first = Server::start_at(&data, &listen, &[]);
            let token = first.token("publish", None);
            for (version, gpg) in releases {
                let dist = dir.join(format!("origin-dist-{version}"));
                let made = provider_dist(
                    &dist,
                    "null",
                    version,
                    &["linux_amd64", "darwin_arm64"],
                    gpg,
                );
                ok(
                    first.publish_provider(&token, &dist, "hashicorp", &[]),
                    "publish at the origin",
                );
                if zips.is_empty() {
                    zips = made;
                }
            }
            // A module (hashicorp/greeting/null 1.0.0), served by the
            // origin as an https archive of its own.
            let module = dir.join("origin-module");
            crate::support::dist::write_tree(
                &module,
                &[
                    ("main.tf", "variable \"name\" {\n  type = string\n}\n"),
                    (
                        "outputs.tf",
                        "output \"greeting\" {\n  value = \"hello, ${var.name}\"\n}\n",
                    ),
                ],
            );
            ok(
                first.publish_module(&token, &module, "hashicorp/greeting/null", "1.0.0"),
                "publish a module at the origin",
            );
        }
        let server = Server::start_named(&data, &listen, &host, serve_args);
        Origin {
            server,
            host,
            listen,
            linux_zip: std::fs::read(&zips[0]).unwrap(),
            zips,
        }
    }

    /// `tfreg upstream set` arguments reaching it.
    pub fn upstream_args(&self) -> Vec<String> {
        vec![
            "upstream".into(),
            "set".into(),
            self.host.clone(),
            "--providers".into(),
            "--modules".into(),
            // Its module archives are its own signed URLs.
            "--module-host".into(),
            self.host.clone(),
            "--connect-to".into(),
            format!("{}={}", self.host, self.listen),
            "--ca-file".into(),
            self.server.ca.display().to_string(),
        ]
    }
}

/// The networks the test registries' operator lets upstreams' `connect`
/// settings name: the test origins' loopback addresses.
pub(crate) const LOOPBACK: &str = "127.0.0.0/8";

/// A registry caching `origin` (providers), with an admin and a fill token.
pub(crate) struct Rig {
    pub server: Server,
    pub admin: String,
    pub fill: String,
}

impl Rig {
    pub fn start(dir: &Path, origin: &Origin, extra: &[&str]) -> Rig {
        Self::start_with_env(dir, origin, extra, &[])
    }

    /// [`Rig::start`], `tfreg serve` given `env`.
    pub fn start_with_env(
        dir: &Path,
        origin: &Origin,
        extra: &[&str],
        env: &[(&str, &Path)],
    ) -> Rig {
        Self::caching(dir, origin.upstream_args(), extra, env)
    }

    /// A registry with the upstream `tfreg upstream set` makes of
    /// `upstream` and `extra`.
    pub fn caching(
        dir: &Path,
        upstream: Vec<String>,
        extra: &[&str],
        env: &[(&str, &Path)],
    ) -> Rig {
        std::fs::create_dir_all(dir).unwrap();
        let listen = format!("127.0.0.1:{}", crate::support::server::free_port());
        // The test origins live on loopback: the operator allows it.
        let server = Server::start_with_env(
            &dir.join("data"),
            &listen,
            &["--private", "--upstream-connect-allow", LOOPBACK],
            env,
        );
        let mut args = upstream;
        args.extend(extra.iter().map(|s| s.to_string()));
        Self::configured(server, args)
    }

    /// `server` with the upstream `upstream_set` makes (`tfreg upstream
    /// set ...`, by an admin), and a fill token.
    pub(crate) fn configured(server: Server, upstream_set: Vec<String>) -> Rig {
        let admin = server.token("admin", None);
        let args: Vec<&str> = upstream_set.iter().map(String::as_str).collect();
        ok(server.tfreg(&admin, &args), "upstream set");
        let out = server.tfreg(
            &admin,
            &[
                "token", "create", "--name", "f", "--scope", "read", "--fill",
            ],
        );
        let fill = String::from_utf8(out.stdout).unwrap().trim().to_string();
        Rig {
            server,
            admin,
            fill,
        }
    }

    /// The Lambda functions under `cargo lambda watch` on the emulators
    /// caching `origin`: the upstream set through the admin function, the
    /// misses fetched by the fill function, invoked by read and blob.
    pub fn on_lambda(dir: &Path, origin: &Origin) -> Rig {
        Self::configured(
            Server::start_lambda_with(
                &dir.join("lambda"),
                &[("TFREG_UPSTREAM_CONNECT_ALLOW", LOOPBACK)],
            ),
            origin.upstream_args(),
        )
    }

    /// Whether these are the Lambda functions (archives in the S3 emulator).
    fn on_aws(&self) -> bool {
        self.server.table().is_some()
    }

    pub fn get(&self, path: &str) -> (u16, Value) {
        self.get_as(path, &self.fill)
    }

    /// GET `path` with `token`: its status and JSON body.
    pub fn get_as(&self, path: &str, token: &str) -> (u16, Value) {
        let resp = self
            .server
            .http
            .get(self.server.url(path))
            .bearer_auth(token)
            .send()
            .unwrap();
        let status = resp.status().as_u16();
        (status, resp.json().unwrap_or(Value::Null))
    }

    /// An archive URL's final answer (redirects followed, as Terraform does).
    pub fn download(&self, url: &str) -> (u16, Vec<u8>) {
        let mut url = url.to_string();
        for _ in 0..10 {
            let resp = self.server.http.get(&url).send().unwrap();
            if resp.status().is_redirection() {
                url = resp.headers()["location"].to_str().unwrap().to_string();
                continue;
            }
            return (resp.status().as_u16(), resp.bytes().unwrap().to_vec());
        }
        panic!("more than 10 redirects")
    }

    pub fn audit(&self, action: &str) -> Vec<Value> {
        let out = self
            .server
            .tfreg(&self.admin, &["audit", "--json", "--limit", "200"]);
        let events: Value = serde_json::from_slice(&out.stdout).unwrap();
        events["events"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["action"] == action)
            .cloned()
            .collect()
    }

    /// The archive a cached module version's download leads to: stored
    /// under `cache/` (a file of the data directory, or an object of the
    /// S3 emulator, reached as Terraform does: our signed URL, then S3's).
    pub fn module_archive(&self, host: &str, module: &str, version: &str) -> Vec<u8> {
        if !self.on_aws() {
            let stored: Vec<PathBuf> = self
                .cached_objects()
                .into_iter()
                .filter(|p| p.to_string_lossy().ends_with(".tar.gz"))
                .collect();
            assert_eq!(stored.len(), 1, "{stored:?}");
            return std::fs::read(&stored[0]).unwrap();
        }
        let resp = self
            .server
            .http
            .get(self.server.url(&format!(
                "/v1/cache/{host}/modules/{module}/{version}/download"
            )))
            .bearer_auth(&self.fill)
            .send()
            .unwrap();
        assert_eq!(resp.status(), 204);
        let location = resp.headers()["x-terraform-get"].to_str().unwrap();
        assert!(location.contains("/v1/blobs/cache/"), "{location}");
        let (status, bytes) = self.download(location);
        assert_eq!(status, 200);
        bytes
    }

    pub fn cached_objects(&self) -> Vec<PathBuf> {
        files_named(&self.server_data(), |_| true)
            .into_iter()
            .filter(|p| p.to_string_lossy().contains("/cache/"))
            .collect()
    }

    pub fn server_data(&self) -> PathBuf {
        PathBuf::from(&self.server.store_args[1])
    }
}

/// Every file under `dir` whose name `pick` accepts.
pub(crate) fn files_named(dir: &Path, pick: impl Fn(&str) -> bool + Copy) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(files_named(&path, pick));
        } else if pick(&path.file_name().unwrap().to_string_lossy()) {
            found.push(path);
        }
    }
    found
}

/// The origin's data directory.
fn origin_data(origin: &Origin) -> PathBuf {
    PathBuf::from(&origin.server.store_args[1])
}

/// The platforms a `<version>.json` answer lists.
pub(crate) fn platforms_of(version: &Value) -> Vec<&str> {
    version["archives"]
        .as_object()
        .map(|a| a.keys().map(String::as_str).collect())
        .unwrap_or_default()
}

#[test]
fn the_mirror_fills_from_the_origin_verified_and_serves_when_it_is_gone() {
    let tmp = tempfile::tempdir().unwrap();
    let origin = Origin::start(tmp.path(), "127.0.0.90", "origin-http.example.test");
    let rig = Rig::start(tmp.path(), &origin, &[]);
    let server = &rig.server;
    let fill = rig.fill.clone();
    let reader = server.token("read", None);
    let base = format!("/v1/mirror/{}/hashicorp/null", origin.host);

    // Nothing cached: a reader may not make the registry fetch.
    let (status, body) = rig.get_as(&format!("{base}/index.json"), &reader);
    assert_eq!(status, 404, "{body}");
    assert!(
        body["errors"][0].as_str().unwrap().contains("--fill"),
        "{body}"
    );

    // A fill token: fetched from the origin, verified.
    let (status, index) = rig.get_as(&format!("{base}/index.json"), &fill);
    assert_eq!(status, 200, "{index}");
    assert_eq!(index, serde_json::json!({"versions": {"1.0.0": {}}}));
    let (status, version) = rig.get_as(&format!("{base}/1.0.0.json"), &fill);
    assert_eq!(status, 200, "{version}");
    let archives = version["archives"].as_object().unwrap();
    assert_eq!(platforms_of(&version), ["darwin_arm64", "linux_amd64"]);
    let sha = tfreg_model::hashing::sha256_hex(&origin.linux_zip);
    assert_eq!(
        archives["linux_amd64"]["hashes"],
        serde_json::json!([format!("zh:{sha}")]),
        "the zh: hash from the origin's signed SHA256SUMS"
    );
    // The archive: fetched on first download, the origin's bytes exactly.
    let url = archives["linux_amd64"]["url"].as_str().unwrap();
    assert!(
        url.contains("/v1/blobs/cache/origin-http.example.test/"),
        "{url}"
    );
    let (status, bytes) = rig.download(url);
    assert_eq!(status, 200);
    assert!(bytes == origin.linux_zip, "byte for byte");
    let (_, version) = rig.get_as(&format!("{base}/1.0.0.json"), &fill);
    let hashes = version["archives"]["linux_amd64"]["hashes"]
        .as_array()
        .unwrap();
    assert_eq!(hashes.len(), 2, "h1: once stored: {version}");
    assert!(hashes[0].as_str().unwrap().starts_with("h1:"), "{version}");

    // What the cache holds, as an admin lists it.
    let listed = server.tfreg(&rig.admin, &["cache", "list", "--json"]);
    let listed: Value = serde_json::from_slice(&listed.stdout).unwrap();
    let providers = listed["providers"].as_array().unwrap();
    assert_eq!(providers.len(), 1, "{listed}");
    assert_eq!(providers[0]["host"], origin.host);
    assert_eq!(providers[0]["namespace"], "hashicorp");
    let versions = providers[0]["versions"].as_array().unwrap();
    assert_eq!(versions.len(), 1, "{listed}");
    assert_eq!(versions[0]["version"], "1.0.0");
    assert_eq!(versions[0]["stored"], serde_json::json!(["linux_amd64"]));
    assert!(versions[0]["signed_by"].is_string(), "{listed}");
    let shown = crate::support::command::ok(
        server.tfreg(&rig.admin, &["cache", "list", &origin.host]),
        "cache list HOST",
    );
    assert!(
        shown.contains(&format!("{}/hashicorp/null", origin.host)) && shown.contains("linux_amd64"),
        "{shown}"
    );

    // Cached now: the reader gets what is there, only the stored archive.
    let (status, _) = rig.get_as(&format!("{base}/index.json"), &reader);
    assert_eq!(status, 200);
    let (status, version) = rig.get_as(&format!("{base}/1.0.0.json"), &reader);
    assert_eq!(status, 200, "{version}");
    assert_eq!(platforms_of(&version), ["linux_amd64"]);

    // The origin gone: the cached archive still downloads.
    drop(origin.server);
    let (status, version) = rig.get_as(&format!("{base}/1.0.0.json"), &fill);
    assert_eq!(status, 200, "{version}");
    let url = version["archives"]["linux_amd64"]["url"].as_str().unwrap();
    let (status, bytes) = rig.download(url);
    assert_eq!(status, 200);
    assert!(bytes == origin.linux_zip);
    // A host that is no upstream: this registry's own mirror, 404.
    let (status, body) = rig.get("/v1/mirror/registry.example.test/hashicorp/null/index.json");
    assert_eq!(status, 404, "an unconfigured host: {body}");
}

/// `name` resolving to `ip` for programs that ask the system (Terraform,
/// making a lock file against the origin directly): a line in
/// `/etc/hosts`, added once (the suite runs as root, as CI does; the 443
/// tests need it too).
fn in_hosts_file(ip: &str, name: &str) {
    use std::io::Write;
    // One test at a time here: appends of two tests must not interleave.
    static HOSTS: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = HOSTS.lock().unwrap_or_else(|e| e.into_inner());
    let line = format!("{ip} {name}");
    let hosts = std::fs::read_to_string("/etc/hosts").unwrap_or_default();
    if hosts
        .lines()
        .any(|l| l.split_whitespace().collect::<Vec<_>>() == [ip, name])
    {
        return;
    }
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open("/etc/hosts")
        .unwrap_or_else(|e| {
            panic!("these tests name their origin {name}: add `{line}` to /etc/hosts or run as root ({e})")
        });
    let ends_a_line = hosts.is_empty() || hosts.ends_with('\n');
    let text = format!("{}{line}\n", if ends_a_line { "" } else { "\n" });
    file.write_all(text.as_bytes()).unwrap();
}

/// Real Terraform through the mirror of a configured upstream: a lock file
/// made against the origin itself installs through the cache;
/// `providers lock -net-mirror` fills both platforms; once the origin is
/// stopped and `.terraform` removed, `init` still works from the cache.
pub(crate) fn terraform_through_the_cache(bin_var: &str, ip: &str, name: &str, lambda: bool) {
    use crate::support::fixtures::{credentials, h1, lock_file, network_mirror_config, zh};
    use crate::support::terraform::Terraform;
    use crate::support::tools::Tools;
    in_hosts_file(ip, name);
    let tools = Tools::get();
    let tmp = tempfile::tempdir().unwrap();
    let origin = Origin::start(tmp.path(), ip, name);
    let rig = if lambda {
        Rig::on_lambda(tmp.path(), &origin)
    } else {
        Rig::start(tmp.path(), &origin, &[])
    };
    let (server, fill) = (&rig.server, rig.fill.clone());
    let _log = LogOnFailure(server);
    let main_tf = format!(
        "terraform {{\n  required_providers {{\n    null = {{ source = \"{}/hashicorp/null\", version = \"1.0.0\" }}\n  }}\n}}\nresource \"null_resource\" \"x\" {{}}\n",
        origin.host
    );
    // The module as users write it: the origin's address, not ours.
    let module_tf = format!(
        "module \"greeting\" {{\n  source  = \"{}/hashicorp/greeting/null\"\n  version = \"1.0.0\"\n  name    = \"cache\"\n}}\noutput \"greeting\" {{\n  value = module.greeting.greeting\n}}\n",
        origin.host
    );

    // A lock made against the origin itself (its registry protocol, signed).
    let direct = Terraform::new(tools.path(bin_var), &origin.server, "");
    let against_origin = tmp.path().join("against-origin");
    crate::support::dist::write_tree(&against_origin, &[("main.tf", &main_tf)]);
    ok(
        direct.run(&against_origin, &["init", "-no-color"]),
        "terraform init against the origin",
    );
    let origin_lock = lock_file(&against_origin);
    for zip in &origin.zips {
        assert!(origin_lock.contains(&zh(zip)), "{origin_lock}");
    }

    // Through the cache, with that lock: the same bytes, so it installs.
    let mirror = network_mirror_config(&server.host, &fill);
    let tf = Terraform::new(tools.path(bin_var), server, &mirror);
    let work = tmp.path().join("work");
    crate::support::dist::write_tree(
        &work,
        &[("main.tf", &main_tf), (".terraform.lock.hcl", &origin_lock)],
    );
    ok(
        tf.run(&work, &["init", "-no-color"]),
        "terraform init through the cache",
    );
    ok(
        tf.run(&work, &["apply", "-auto-approve", "-no-color"]),
        "terraform apply",
    );

    // Both platforms into a fresh lock, through the cache.
    let locking = tmp.path().join("locking");
    crate::support::dist::write_tree(&locking, &[("main.tf", &main_tf)]);
    let mirror_url = server.url("/v1/mirror/");
    ok(
        tf.run(
            &locking,
            &[
                "providers",
                "lock",
                &format!("-net-mirror={mirror_url}"),
                "-platform=linux_amd64",
                "-platform=darwin_arm64",
                "-no-color",
            ],
        ),
        "terraform providers lock -net-mirror",
    );
    let lock = lock_file(&locking);
    for zip in &origin.zips {
        assert!(lock.contains(&h1(zip)), "{} not in\n{lock}", h1(zip));
    }

    // `tfreg cache warm` reads Terraform's own lock file: every platform
    // whose hash it pins (the origin's two zips are the same bytes, so
    // both; stored already by the lock above, so nothing is fetched again).
    let warmed = ok(
        server.tfreg(
            &fill,
            &[
                "cache",
                "warm",
                "--lock-file",
                against_origin.join(".terraform.lock.hcl").to_str().unwrap(),
            ],
        ),
        "tfreg cache warm --lock-file",
    );
    for platform in ["linux_amd64", "darwin_arm64"] {
        assert!(
            warmed.contains(&format!("{name}/hashicorp/null 1.0.0 {platform}")),
            "{warmed}"
        );
    }

    // The registry protocol through a `host` block (Terraform 1.0.3 has
    // it too): the origin's SHA256SUMS, signature and keys as it served
    // them, so Terraform verifies who signed and locks every platform's
    // zh:, exactly as against the origin.
    // Modules the same way (modules.v1): the origin's archive fetched,
    // checked and kept byte for byte, our signed URL in X-Terraform-Get.
    let host_config = format!(
        "{}host \"{name}\" {{\n  services = {{\n    \"providers.v1\" = \"{}\"\n    \"modules.v1\" = \"{}\"\n  }}\n}}\n",
        credentials(name, &fill),
        server.url(&format!("/v1/cache/{name}/providers/")),
        server.url(&format!("/v1/cache/{name}/modules/"))
    );
    let tf_host = Terraform::new(tools.path(bin_var), server, &host_config);
    let via_host = tmp.path().join("via-host");
    crate::support::dist::write_tree(
        &via_host,
        &[("main.tf", &main_tf), ("module.tf", &module_tf)],
    );
    let out = ok(
        tf_host.run(&via_host, &["init", "-no-color"]),
        "terraform init through a host block",
    );
    assert!(out.contains("signed"), "Terraform names the signer:\n{out}");
    let applied = ok(
        tf_host.run(&via_host, &["apply", "-auto-approve", "-no-color"]),
        "terraform apply with the cached module",
    );
    assert!(applied.contains("hello, cache"), "{applied}");
    let origin_archive: Vec<PathBuf> =
        files_named(&origin_data(&origin), |n| n.ends_with(".tar.gz"))
            .into_iter()
            .filter(|p| p.to_string_lossy().contains("/archives/"))
            .collect();
    assert_eq!(origin_archive.len(), 1, "{origin_archive:?}");
    assert_eq!(
        rig.module_archive(name, "hashicorp/greeting/null", "1.0.0"),
        std::fs::read(&origin_archive[0]).unwrap(),
        "the module archive is kept byte for byte"
    );
    assert_eq!(
        lock_hashes(&lock_file(&via_host)),
        lock_hashes(&origin_lock),
        "the same lock as against the origin"
    );

    // The origin gone, .terraform removed: installed from the cache,
    // through the mirror and through the host block (module included).
    drop(origin.server);
    std::fs::remove_dir_all(work.join(".terraform")).unwrap();
    ok(
        tf.run(&work, &["init", "-no-color"]),
        "terraform init, the origin stopped",
    );
    std::fs::remove_dir_all(via_host.join(".terraform")).unwrap();
    ok(
        tf_host.run(&via_host, &["init", "-no-color"]),
        "terraform init through the host block, the origin stopped",
    );
    let log = server.server_log();
    assert!(!log.contains(&fill), "no token in the log");
}

/// Prints the end of the registry's log (the functions' log on Lambda)
/// when the test fails: why a request got the answer it got.
pub(crate) struct LogOnFailure<'a>(pub &'a Server);

impl Drop for LogOnFailure<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let log = self.0.server_log();
            let lines: Vec<&str> = log.lines().collect();
            let tail = lines[lines.len().saturating_sub(60)..].join("\n");
            eprintln!("--- the registry's log, last 60 lines ---\n{tail}");
        }
    }
}

/// The hashes of a lock file, sorted.
fn lock_hashes(lock: &str) -> Vec<String> {
    let mut hashes: Vec<String> = lock
        .lines()
        .map(|l| l.trim().trim_end_matches(',').trim_matches('"').to_string())
        .filter(|l| l.starts_with("h1:") || l.starts_with("zh:"))
        .collect();
    hashes.sort();
    hashes
}

#[test]
fn terraform_1_0_installs_through_the_cache_and_without_the_origin() {
    terraform_through_the_cache(
        "TFREG_TERRAFORM_1_0",
        "127.0.0.91",
        "origin-tf10.example.test",
        false,
    );
}

#[test]
fn terraform_new_installs_through_the_cache_and_without_the_origin() {
    terraform_through_the_cache(
        "TFREG_TERRAFORM_NEW",
        "127.0.0.92",
        "origin-tfnew.example.test",
        false,
    );
}
