//! A Terraform working directory for one init.

use super::*;

/// A Terraform working directory and its CLI configuration.
pub(crate) struct Workspace {
    pub(crate) dir: PathBuf,
    pub(crate) cli_config: PathBuf,
}

impl Workspace {
    /// Everything from `registry` by the registry protocol, with `token`.
    pub(crate) fn for_registry(
        dir: &Path,
        registry: &Registry,
        token: &str,
    ) -> Result<Workspace, Error> {
        let host = &registry.host;
        Workspace::write(
            dir,
            host,
            &format!("credentials \"{host}\" {{\n  token = \"{token}\"\n}}\n"),
            |i| format!("source  = \"{host}/{NS}/m{i}/null\"\n  version = \"{VERSION}\""),
        )
    }

    pub(crate) fn write(
        dir: &Path,
        provider_host: &str,
        cli_config: &str,
        module_source: impl Fn(usize) -> String,
    ) -> Result<Workspace, Error> {
        std::fs::create_dir_all(dir)?;
        let mut main = String::from("terraform {\n  required_providers {\n");
        for i in 0..COUNT {
            main += &format!(
                "    p{i} = {{\n      source  = \"{provider_host}/{NS}/p{i}\"\n      version = \"{VERSION}\"\n    }}\n"
            );
        }
        main += "  }\n}\n";
        for i in 0..COUNT {
            main += &format!("module \"m{i}\" {{\n  {}\n}}\n", module_source(i));
        }
        std::fs::write(dir.join("main.tf"), main)?;
        let config = dir.join("cli.tfrc");
        std::fs::write(&config, format!("disable_checkpoint = true\n{cli_config}"))?;
        Ok(Workspace {
            dir: dir.to_path_buf(),
            cli_config: config,
        })
    }

    /// One `terraform init` from nothing; its wall time in seconds.
    pub(crate) fn init(&self, terraform: &Path, ca: &Path) -> Result<f64, Error> {
        let _ = std::fs::remove_dir_all(self.dir.join(".terraform"));
        let _ = std::fs::remove_file(self.dir.join(".terraform.lock.hcl"));
        let started = Instant::now();
        let out = Command::new(terraform)
            .args(["init", "-input=false", "-no-color"])
            .current_dir(&self.dir)
            .env("TF_CLI_CONFIG_FILE", &self.cli_config)
            .env("SSL_CERT_FILE", ca)
            .env("CHECKPOINT_DISABLE", "1")
            .env_remove("TF_PLUGIN_CACHE_DIR")
            .output()?;
        let seconds = started.elapsed().as_secs_f64();
        if !out.status.success() {
            return Err(format!(
                "terraform init in {}: {}{}",
                self.dir.display(),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
            .into());
        }
        Ok(seconds)
    }
}
