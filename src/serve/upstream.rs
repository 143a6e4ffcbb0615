//! The operator's side of the pull-through cache's upstreams (issue 35):
//! which networks an upstream's `connect` settings may name, and where
//! credential files are. The admin API can only name what these allow.

use std::path::PathBuf;

use clap::Args;
use tfreg_model::upstream::{CONNECT_ALLOW_ENV, Net, OperatorPolicy};

#[derive(Args)]
pub struct UpstreamArgs {
    /// A network (CIDR) that upstreams' `--connect-to` addresses and
    /// `--allow-net` networks may name (repeatable or comma-separated;
    /// default none: no `connect` setting can be saved, so an admin token
    /// cannot point the cache at this machine or its network). A registry
    /// inside your network, or a test origin on loopback.
    #[arg(long = "upstream-connect-allow", value_name = "CIDR", env = CONNECT_ALLOW_ENV, value_delimiter = ',', value_parser = net)]
    connect_allow: Vec<Net>,
    /// A directory of upstream credential files, one per upstream named as
    /// its host (`app.terraform.io`): `tfreg upstream set HOST
    /// --credentials-file HOST` (default none: no files; each upstream's own
    /// TFREG_UPSTREAM_CREDENTIAL_<HOST> variable always works).
    #[arg(long, value_name = "DIR", env = "TFREG_UPSTREAM_CREDENTIALS_DIR")]
    upstream_credentials_dir: Option<PathBuf>,
}

fn net(text: &str) -> Result<Net, String> {
    Net::parse(text).map_err(|e| e.0)
}

impl UpstreamArgs {
    pub fn policy(&self) -> OperatorPolicy {
        OperatorPolicy {
            connect_allow: self.connect_allow.clone(),
            credentials_dir: self.upstream_credentials_dir.clone(),
        }
    }
}
