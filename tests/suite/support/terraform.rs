//! The real Terraform CLI, run in an isolated home.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use super::server::Server;

/// A Terraform CLI run in an isolated home, trusting the server's CA.
pub struct Terraform {
    pub bin: PathBuf,
    pub home: tempfile::TempDir,
    pub cli_config: PathBuf,
    pub ca: PathBuf,
}

impl Terraform {
    pub fn new(bin: PathBuf, server: &Server, cli_config: &str) -> Terraform {
        let home = tempfile::tempdir().unwrap();
        let cli_config_path = home.path().join("terraformrc");
        std::fs::write(&cli_config_path, cli_config).unwrap();
        Terraform {
            bin,
            home,
            cli_config: cli_config_path,
            ca: server.ca.clone(),
        }
    }

    pub fn run(&self, dir: &Path, args: &[&str]) -> Output {
        self.run_env(dir, args, &[])
    }

    /// [`Terraform::run`] with more environment variables (e.g. `TF_TOKEN_<host>`).
    pub fn run_env(&self, dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
        Command::new(&self.bin)
            .args(args)
            .current_dir(dir)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", self.home.path())
            .env("TF_CLI_CONFIG_FILE", &self.cli_config)
            .env("SSL_CERT_FILE", &self.ca)
            .env("CHECKPOINT_DISABLE", "1")
            .env("TF_IN_AUTOMATION", "1")
            .env("TF_INPUT", "0")
            .envs(env.iter().copied())
            .output()
            .unwrap()
    }
}
