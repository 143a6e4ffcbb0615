//! What the cache benchmark runs: the origin (a `tfreg serve` of its own,
//! publishing the e2e fixture under a foreign hostname on 443 of its own
//! loopback address), caching registries with that origin as their upstream,
//! and the Terraform configurations that reach each, as
//! tests/suite/cache_mirror.rs arranges them (`Rig::caching`, the `host` block).

use std::path::Path;
use std::process::Command;

use crate::e2e::subjects::Registry;
use crate::e2e::workspace::Workspace;
use crate::e2e::{Fixture, NS, VERSION};
use crate::tools::Error;

/// The origin's name: no port in it (Terraform's `host` block and network
/// mirror cannot use one), so it listens on 443 of an address of its own.
pub(crate) const ORIGIN_HOST: &str = "origin.bench.test";
/// No test listens here (tests/suite uses .2, .78, .90-.98, .100-.111).
pub(crate) const ORIGIN_IP: &str = "127.0.0.120";

pub(crate) fn origin_listen() -> String {
    format!("{ORIGIN_IP}:443")
}

/// The origin, public (as the tests' origins are), the fixture published.
pub(crate) fn start_origin(tfreg: &Path, dir: &Path, fixture: &Fixture) -> Result<Registry, Error> {
    in_hosts_file()?;
    let origin = Registry::start_at(
        tfreg,
        &dir.join("origin"),
        &origin_listen(),
        ORIGIN_HOST,
        &[],
    )?;
    origin.publish_fixture(fixture)?;
    Ok(origin)
}

/// `ORIGIN_HOST` resolving to `ORIGIN_IP` for Terraform (which asks the
/// system) and the tfreg CLI publishing to the origin: a line in
/// `/etc/hosts`, added once (the benchmarks run as root, as the suite does).
fn in_hosts_file() -> Result<(), Error> {
    use std::io::Write;
    let hosts = std::fs::read_to_string("/etc/hosts").unwrap_or_default();
    if hosts
        .lines()
        .any(|l| l.split_whitespace().collect::<Vec<_>>() == [ORIGIN_IP, ORIGIN_HOST])
    {
        return Ok(());
    }
    let line = format!("{ORIGIN_IP} {ORIGIN_HOST}");
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open("/etc/hosts")
        .map_err(|e| format!("add `{line}` to /etc/hosts or run as root ({e})"))?;
    let newline = if hosts.is_empty() || hosts.ends_with('\n') {
        ""
    } else {
        "\n"
    };
    file.write_all(format!("{newline}{line}\n").as_bytes())?;
    Ok(())
}

/// A private `tfreg serve` caching the origin (providers and modules), and
/// a read token made with `--fill`.
pub(crate) struct Caching {
    pub(crate) registry: Registry,
    pub(crate) fill: String,
}

impl Caching {
    pub(crate) fn start(tfreg: &Path, data: &Path, origin: &Registry) -> Result<Caching, Error> {
        // The origin lives on loopback: the operator allows `connect` there.
        let host = format!("127.0.0.1:{}", crate::tools::free_port()?);
        let registry = Registry::start_at(
            tfreg,
            data,
            &host,
            &host,
            &[
                "--private",
                "--upstream-connect-allow",
                &format!("{ORIGIN_IP}/32"),
            ],
        )?;
        let admin = registry.token("admin")?;
        registry.cli(
            &admin,
            &[
                "upstream",
                "set",
                ORIGIN_HOST,
                "--providers",
                "--modules",
                // Its module archives are its own signed URLs.
                "--module-host",
                ORIGIN_HOST,
                "--connect-to",
                &format!("{ORIGIN_HOST}={}", origin_listen()),
                "--ca-file",
                &origin.ca.display().to_string(),
            ],
            "upstream set",
        )?;
        let out = Command::new(tfreg)
            .args(["token", "create", "--name", "bench-fill", "--scope", "read"])
            .args(["--fill", "--data-dir"])
            .arg(data)
            .output()?;
        if !out.status.success() {
            return Err(format!(
                "token create --fill: {}",
                String::from_utf8_lossy(&out.stderr)
            )
            .into());
        }
        let fill = String::from_utf8(out.stdout)?.trim().to_string();
        Ok(Caching { registry, fill })
    }

    /// The configuration as users write it (the origin's addresses), the
    /// origin's registry protocols pointed at this cache by a `host` block,
    /// the fill token under the origin's name.
    pub(crate) fn workspace(&self, dir: &Path) -> Result<Workspace, Error> {
        let url = |kind: &str| {
            format!(
                "https://{}/v1/cache/{ORIGIN_HOST}/{kind}/",
                self.registry.host
            )
        };
        let config = format!(
            "credentials \"{ORIGIN_HOST}\" {{\n  token = \"{}\"\n}}\nhost \"{ORIGIN_HOST}\" {{\n  services = {{\n    \"providers.v1\" = \"{}\"\n    \"modules.v1\" = \"{}\"\n  }}\n}}\n",
            self.fill,
            url("providers"),
            url("modules"),
        );
        Workspace::write(dir, ORIGIN_HOST, &config, module_source)
    }
}

/// The same configuration straight from the origin (public: no token).
pub(crate) fn direct_workspace(dir: &Path) -> Result<Workspace, Error> {
    Workspace::write(dir, ORIGIN_HOST, "", module_source)
}

fn module_source(i: usize) -> String {
    format!("source  = \"{ORIGIN_HOST}/{NS}/m{i}/null\"\n  version = \"{VERSION}\"")
}
