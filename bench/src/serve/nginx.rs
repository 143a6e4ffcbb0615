//! nginx (`$TFREG_NGINX`), unprivileged on a loopback port with a config
//! written to a temp dir, serving tfreg's answers as static files over HTTPS
//! (HTTP/2) with tfreg's certificate.

use std::fmt::Write as _;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::Error;
use super::fixture::{Registry, Target};
use crate::tools::free_port;

pub struct Nginx {
    child: Child,
    host: String,
    pub access_log: PathBuf,
}

impl Drop for Nginx {
    fn drop(&mut self) {
        // SIGTERM: the master stops its workers (a SIGKILL would leave them).
        let _ = Command::new("kill")
            .arg(self.child.id().to_string())
            .status();
        let _ = self.child.wait();
    }
}

/// nginx's config: one server on `host`, files under `root`, the module
/// download's empty answer and its header as tfreg gives them.
fn config(dir: &Path, host: &str, registry: &Registry, targets: &[Target]) -> String {
    let d = dir.display();
    let mut locations = String::new();
    for t in targets {
        if let Some(get) = &t.terraform_get {
            let _ = writeln!(
                locations,
                "    location = {} {{ add_header X-Terraform-Get \"{get}\"; return {}; }}",
                t.path_and_query, t.status
            );
        }
        if let Some(to) = &t.location {
            let _ = writeln!(
                locations,
                "    location = {} {{ return {} \"{to}\"; }}",
                t.path_and_query, t.status
            );
        }
    }
    format!(
        r#"daemon off;
worker_processes auto;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 1024; }}
http {{
  access_log {d}/access.log;
  client_body_temp_path {d}/tmp/body;
  proxy_temp_path {d}/tmp/proxy;
  fastcgi_temp_path {d}/tmp/fastcgi;
  uwsgi_temp_path {d}/tmp/uwsgi;
  scgi_temp_path {d}/tmp/scgi;
  sendfile on;
  keepalive_requests 1000000;
  types {{ application/json json; application/zip zip; }}
  default_type application/json;
  server {{
    listen {host} ssl http2;
    ssl_certificate {cert};
    ssl_certificate_key {key};
    root {d}/www;
{locations}  }}
}}
"#,
        cert = registry.cert.display(),
        key = registry.key.display(),
    )
}

impl Nginx {
    pub fn start(tmp: &Path, registry: &Registry, targets: &[Target]) -> Result<Self, Error> {
        let nginx = std::env::var("TFREG_NGINX")
            .map_err(|_| "TFREG_NGINX is not set: run .ci/install-tools and source .tools/env")?;
        let dir = tmp.join("nginx");
        std::fs::create_dir_all(dir.join("tmp"))?;
        // Even when every row measured is answered from the configuration.
        std::fs::create_dir_all(dir.join("www"))?;
        for t in targets
            .iter()
            .filter(|t| t.terraform_get.is_none() && t.location.is_none())
        {
            let path = t.path_and_query.split('?').next().unwrap_or_default();
            let file = dir.join("www").join(path.trim_start_matches('/'));
            std::fs::create_dir_all(file.parent().ok_or("a path without a parent")?)?;
            std::fs::write(file, &t.body)?;
        }
        // nginx started by root serves from workers running as nobody.
        for d in [tmp, &dir, &dir.join("www")] {
            std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755))?;
        }
        let host = format!("127.0.0.1:{}", free_port()?);
        let conf = dir.join("nginx.conf");
        std::fs::write(&conf, config(&dir, &host, registry, targets))?;
        let child = Command::new(nginx)
            .arg("-p")
            .arg(&dir)
            .arg("-c")
            .arg(&conf)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("stderr.log"))?)
            .spawn()?;
        let web = Nginx {
            child,
            host,
            access_log: dir.join("access.log"),
        };
        web.wait_ready(&dir, &targets[0])?;
        Ok(web)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn url(&self, path: &str) -> String {
        format!("https://{}{path}", self.host)
    }

    fn wait_ready(&self, dir: &Path, first: &Target) -> Result<(), Error> {
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(30) {
            let out = Command::new("curl")
                .args(["-sk", "--fail", &self.url(&first.path_and_query)])
                .output()?;
            if out.status.success() && out.stdout == first.body {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        let log = std::fs::read_to_string(dir.join("stderr.log")).unwrap_or_default();
        let errors = std::fs::read_to_string(dir.join("error.log")).unwrap_or_default();
        Err(format!(
            "nginx did not serve {} within 30 s:\n{log}{errors}",
            first.name
        )
        .into())
    }
}
