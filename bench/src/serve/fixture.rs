//! A release-built `tfreg serve` on a fresh data dir, what is published on
//! it (a provider on several platforms, a module, a mirrored provider), and
//! the requests the benchmark makes, each with the bytes tfreg answers.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use super::Error;
use crate::tools::free_port;

const NS: &str = "bench";
const PROVIDER: &str = "demo";
const VERSIONS: &[&str] = &["1.0.0", "1.1.0"];
const PLATFORMS: &[&str] = &["linux_amd64", "linux_arm64", "darwin_amd64", "darwin_arm64"];
const MODULE: &str = "bench/app/aws";

/// `tfreg serve` and what talking to it needs.
pub struct Registry {
    tfreg: PathBuf,
    child: Child,
    pub data_dir: PathBuf,
    pub host: String,
    /// Its stderr: the log.
    pub log: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
    ca: PathBuf,
    admin_token: String,
    pub read_token: String,
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `output`'s stdout, or an error naming `what` with its stderr.
fn ok(what: &str, output: std::io::Result<Output>) -> Result<String, Error> {
    let out = output.map_err(|e| format!("{what}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{what} failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    Ok(String::from_utf8(out.stdout)?)
}

impl Registry {
    pub fn start(tfreg: &Path, tmp: &Path) -> Result<Self, Error> {
        if !tfreg.is_file() {
            return Err(format!(
                "{} not found: build it (cargo build --release -p tfreg) or pass --tfreg",
                tfreg.display()
            )
            .into());
        }
        let data_dir = tmp.join("data");
        let host = format!("127.0.0.1:{}", free_port()?);
        let log = tmp.join("tfreg.log");
        let child = Command::new(tfreg)
            .args(["serve", "--private", "--url-ttl", "3600", "--data-dir"])
            .arg(&data_dir)
            .args(["--listen", &host, "--hostname", &host])
            .env("TFREG_LOG", "info")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log)?)
            .spawn()?;
        let tls = data_dir.join("tls");
        let mut registry = Registry {
            tfreg: tfreg.to_path_buf(),
            child,
            host,
            log,
            cert: tls.join("server.pem"),
            key: tls.join("server.key"),
            ca: tls.join("ca.pem"),
            data_dir,
            admin_token: String::new(),
            read_token: String::new(),
        };
        registry.wait_ready()?;
        registry.admin_token = registry.token("admin")?;
        registry.read_token = registry.token("read")?;
        Ok(registry)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn url(&self, path: &str) -> String {
        format!("https://{}{path}", self.host)
    }

    fn wait_ready(&mut self) -> Result<(), Error> {
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(60) {
            if let Some(status) = self.child.try_wait()? {
                let log = std::fs::read_to_string(&self.log).unwrap_or_default();
                return Err(format!("tfreg serve exited ({status}):\n{log}").into());
            }
            if self.ca.is_file() && self.fetch("/.well-known/terraform.json").is_ok() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        Err("tfreg serve did not answer discovery within 60 s".into())
    }

    fn token(&self, scope: &str) -> Result<String, Error> {
        let out = Command::new(&self.tfreg)
            .args(["token", "create", "--name", &format!("bench-{scope}")])
            .args(["--scope", scope, "--data-dir"])
            .arg(&self.data_dir)
            .output();
        Ok(ok("tfreg token create", out)?.trim().to_string())
    }

    /// The tfreg CLI against this server, as the admin.
    fn cli(&self, what: &str, args: &[&str]) -> Result<String, Error> {
        let out = Command::new(&self.tfreg)
            .args(args)
            .args(["--registry", &self.url("")])
            .env("TFREG_TOKEN", &self.admin_token)
            .env("SSL_CERT_FILE", &self.ca)
            .output();
        ok(what, out)
    }

    /// GET `path_and_query` with the read token: the response head (curl's
    /// `-D`) and body.
    pub fn fetch_with_head(&self, path_and_query: &str) -> Result<(String, Vec<u8>), Error> {
        let body = self.data_dir.with_extension("body");
        let out = Command::new("curl")
            .args(["-sS", "--fail", "--http2", "-D", "-", "--cacert"])
            .arg(&self.ca)
            .arg("-o")
            .arg(&body)
            .args(["-H", &format!("authorization: Bearer {}", self.read_token)])
            .arg(self.url(path_and_query))
            .output();
        let head = ok(&format!("curl {path_and_query}"), out)?;
        Ok((head, std::fs::read(&body)?))
    }

    fn fetch(&self, path: &str) -> Result<Vec<u8>, Error> {
        let out = Command::new("curl")
            .args(["-sS", "--fail", "--cacert"])
            .arg(&self.ca)
            .arg(self.url(path))
            .output()?;
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).into_owned().into());
        }
        Ok(out.stdout)
    }
}

/// A zip holding one small executable file.
fn zip_of(path: &Path, name: &str) -> Result<(), Error> {
    let mut zip = zip::ZipWriter::new(std::fs::File::create(path)?);
    let opts = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated)
        .unix_permissions(0o755);
    zip.start_file(name, opts)?;
    zip.write_all(b"#!/bin/sh\necho 'a provider for the serve benchmark'\n")?;
    zip.finish()?;
    Ok(())
}

fn sha256_hex(path: &Path) -> Result<String, Error> {
    Ok(hex::encode(Sha256::digest(std::fs::read(path)?)))
}

/// gpg with a throw-away home holding one signing key.
struct Gpg {
    home: tempfile::TempDir,
}

impl Gpg {
    fn new() -> Result<Self, Error> {
        let gpg = Gpg {
            home: tempfile::tempdir()?,
        };
        gpg.run(
            "gpg --quick-gen-key",
            &[
                "--passphrase",
                "",
                "--quick-gen-key",
                "tfreg bench <bench@example.com>",
            ],
            &["rsa2048", "sign", "never"],
        )?;
        Ok(gpg)
    }

    fn run(&self, what: &str, args: &[&str], more: &[&str]) -> Result<String, Error> {
        let gpg = std::env::var("TFREG_GPG").unwrap_or_else(|_| "gpg".into());
        let out = Command::new(gpg)
            .arg("--homedir")
            .arg(self.home.path())
            .args(["--batch", "--yes", "--pinentry-mode", "loopback"])
            .args(args)
            .args(more)
            .output();
        ok(what, out)
    }
}

/// A goreleaser-style dist directory of `version`, signed by `gpg`.
fn provider_dist(dist: &Path, version: &str, gpg: &Gpg) -> Result<(), Error> {
    std::fs::create_dir_all(dist)?;
    let prefix = format!("terraform-provider-{PROVIDER}_{version}");
    let mut sums = String::new();
    for platform in PLATFORMS {
        let name = format!("{prefix}_{platform}.zip");
        zip_of(
            &dist.join(&name),
            &format!("terraform-provider-{PROVIDER}_v{version}_x5"),
        )?;
        sums += &format!("{}  {name}\n", sha256_hex(&dist.join(&name))?);
    }
    let manifest = format!("{prefix}_manifest.json");
    std::fs::write(
        dist.join(&manifest),
        r#"{"version":1,"metadata":{"protocol_versions":["5.0"]}}"#,
    )?;
    sums += &format!("{}  {manifest}\n", sha256_hex(&dist.join(&manifest))?);
    let sums_path = dist.join(format!("{prefix}_SHA256SUMS"));
    std::fs::write(&sums_path, sums)?;
    let sig = dist.join(format!("{prefix}_SHA256SUMS.sig"));
    let (sig, sums_path) = (sig.to_str().unwrap(), sums_path.to_str().unwrap());
    gpg.run(
        "gpg --detach-sign",
        &[
            "--passphrase",
            "",
            "--output",
            sig,
            "--detach-sign",
            sums_path,
        ],
        &[],
    )?;
    let key = gpg.run("gpg --export", &["--armor", "--export"], &[])?;
    std::fs::write(dist.join("key.asc"), key)?;
    Ok(())
}

/// What was published.
pub struct Published {
    pub mirror_version: &'static str,
}

/// Publish the provider (every version, every platform), the module and a
/// mirrored hashicorp/null.
pub fn publish(registry: &Registry, tmp: &Path) -> Result<Published, Error> {
    let gpg = Gpg::new()?;
    for version in VERSIONS {
        let dist = tmp.join(format!("dist-{version}"));
        provider_dist(&dist, version, &gpg)?;
        let key = dist.join("key.asc");
        registry.cli(
            "tfreg publish provider",
            &[
                "publish",
                "provider",
                dist.to_str().unwrap(),
                "--namespace",
                NS,
                "--signing-key",
                key.to_str().unwrap(),
            ],
        )?;
    }
    let module = tmp.join("module");
    std::fs::create_dir_all(module.join("modules/sub"))?;
    std::fs::write(
        module.join("main.tf"),
        "output \"hello\" { value = \"hi\" }\n",
    )?;
    std::fs::write(module.join("modules/sub/main.tf"), "variable \"x\" {}\n")?;
    let [ns, name, system] = MODULE.split('/').collect::<Vec<_>>()[..] else {
        unreachable!()
    };
    for version in VERSIONS {
        registry.cli(
            "tfreg publish module",
            &[
                "publish",
                "module",
                module.to_str().unwrap(),
                "--namespace",
                ns,
                "--name",
                name,
                "--system",
                system,
                "--version",
                version,
            ],
        )?;
    }
    let mirror_version = "2.1.2";
    let mirror = tmp.join("mirror");
    let dir = mirror.join("registry.terraform.io/hashicorp/null");
    std::fs::create_dir_all(&dir)?;
    for platform in ["linux_amd64", "darwin_arm64"] {
        zip_of(
            &dir.join(format!(
                "terraform-provider-null_{mirror_version}_{platform}.zip"
            )),
            &format!("terraform-provider-null_v{mirror_version}_x4"),
        )?;
    }
    registry.cli(
        "tfreg mirror import",
        &["mirror", "import", mirror.to_str().unwrap()],
    )?;
    Ok(Published { mirror_version })
}

/// One request the benchmark makes, and tfreg's answer to it.
pub struct Target {
    pub name: &'static str,
    pub method: &'static str,
    pub path_and_query: String,
    pub status: u16,
    /// Headers nginx must add to look alike (a module download's location).
    pub terraform_get: Option<String>,
    /// Where a redirect points (an OCI blob's archive URL).
    pub location: Option<String>,
    pub body: Vec<u8>,
}

fn status_of(head: &str) -> u16 {
    head.lines()
        .rev()
        .find(|l| l.starts_with("HTTP/"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().find_map(|l| {
        let (n, v) = l.split_once(':')?;
        n.eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

/// Every read endpoint, then the archive GET and HEAD.
pub fn targets(registry: &Registry, published: &Published) -> Result<Vec<Target>, Error> {
    let latest = VERSIONS[VERSIONS.len() - 1];
    let mirror = "/v1/mirror/registry.terraform.io/hashicorp/null";
    let paths = [
        ("discovery", "/.well-known/terraform.json".to_string()),
        (
            "provider-versions",
            format!("/v1/providers/{NS}/{PROVIDER}/versions"),
        ),
        (
            "provider-download",
            format!("/v1/providers/{NS}/{PROVIDER}/{latest}/download/linux/amd64"),
        ),
        ("module-versions", format!("/v1/modules/{MODULE}/versions")),
        (
            "module-download",
            format!("/v1/modules/{MODULE}/{latest}/download"),
        ),
        ("mirror-index", format!("{mirror}/index.json")),
        (
            "mirror-version",
            format!("{mirror}/{}.json", published.mirror_version),
        ),
    ];
    let mut targets = Vec::new();
    for (name, path) in paths {
        let (head, body) = registry.fetch_with_head(&path)?;
        targets.push(Target {
            name,
            method: "GET",
            status: status_of(&head),
            terraform_get: header(&head, "x-terraform-get").map(str::to_string),
            location: header(&head, "location").map(str::to_string),
            path_and_query: path,
            body,
        });
    }
    let download: serde_json::Value = serde_json::from_slice(&targets[2].body)?;
    let url = download["download_url"]
        .as_str()
        .ok_or("the provider download answer has no download_url")?;
    let archive = url
        .strip_prefix(&registry.url(""))
        .unwrap_or(url)
        .to_string();
    for method in ["GET", "HEAD"] {
        let (head, body) = registry.fetch_with_head(&archive)?;
        targets.push(Target {
            name: "archive",
            method,
            status: status_of(&head),
            terraform_get: None,
            location: None,
            path_and_query: archive.clone(),
            body,
        });
    }
    targets.extend(oci_targets(registry)?);
    for t in &targets {
        if !(200..300).contains(&t.status) && t.location.is_none() {
            return Err(format!("{} {}: status {}", t.method, t.path_and_query, t.status).into());
        }
    }
    Ok(targets)
}

/// The OCI view's requests as OpenTofu makes them (issue 40): the
/// provider's tag list, the newest version's index, its linux_amd64
/// manifest by digest, that manifest's layer (a redirect to the archive),
/// and the module's `latest` manifest.
fn oci_targets(registry: &Registry) -> Result<Vec<Target>, Error> {
    let latest = VERSIONS[VERSIONS.len() - 1];
    let repo = format!("/v2/providers/{NS}/{PROVIDER}");
    let get = |name: &'static str, path: String| -> Result<Target, Error> {
        let (head, body) = registry.fetch_with_head(&path)?;
        Ok(Target {
            name,
            method: "GET",
            status: status_of(&head),
            terraform_get: None,
            location: header(&head, "location").map(str::to_string),
            path_and_query: path,
            body,
        })
    };
    let tags = get("oci-tags", format!("{repo}/tags/list"))?;
    let index = get("oci-index", format!("{repo}/manifests/{latest}"))?;
    let parsed: serde_json::Value = serde_json::from_slice(&index.body)?;
    let linux = parsed["manifests"]
        .as_array()
        .and_then(|m| {
            m.iter().find(|m| {
                m["platform"]["os"] == "linux" && m["platform"]["architecture"] == "amd64"
            })
        })
        .and_then(|m| m["digest"].as_str())
        .ok_or("the OCI index has no linux/amd64 manifest")?
        .to_string();
    let manifest = get("oci-manifest", format!("{repo}/manifests/{linux}"))?;
    let parsed: serde_json::Value = serde_json::from_slice(&manifest.body)?;
    let layer = parsed["layers"][0]["digest"]
        .as_str()
        .ok_or("the OCI manifest has no layer")?
        .to_string();
    let blob = get("oci-blob", format!("{repo}/blobs/{layer}"))?;
    if blob.location.is_none() {
        return Err(format!("GET {}: no redirect", blob.path_and_query).into());
    }
    let module = get(
        "oci-module",
        format!("/v2/modules/{MODULE}/manifests/latest"),
    )?;
    Ok(vec![tags, index, manifest, blob, module])
}
