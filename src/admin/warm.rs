//! `tfreg cache warm`: fill the pull-through cache ahead of use (before an
//! upstream is sealed, for air-gapped use), as a client of the registry's
//! own read routes with a token that may fill: for each provider version,
//! its `<version>.json` through the network mirror (SHA256SUMS verified),
//! then each wanted platform's archive (a HEAD of its URL, which the
//! registry fills before answering); for each module version, the
//! module's list and the version's download (resolved, fetched, stored). From a lock file the platforms
//! are those whose hashes the lock pins; otherwise `--platform`.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use tfreg_model::protocol::MirrorVersion;

use crate::cli_error::Result;
use crate::client::PublishClient;

#[derive(Args)]
pub struct WarmArgs {
    /// A `.terraform.lock.hcl`: every provider version in it, with the
    /// platforms whose hashes it pins (repeatable).
    #[arg(long = "lock-file", value_name = "PATH")]
    lock_files: Vec<PathBuf>,
    /// A provider version, HOST/NAMESPACE/TYPE@VERSION (repeatable; with
    /// --platform).
    #[arg(long = "provider", value_name = "ADDRESS@VERSION")]
    providers: Vec<String>,
    /// A platform, OS_ARCH, for --provider (repeatable).
    #[arg(long = "platform", value_name = "OS_ARCH")]
    platforms: Vec<String>,
    /// A module version, HOST/NAMESPACE/NAME/SYSTEM@VERSION (repeatable).
    #[arg(long = "module", value_name = "ADDRESS@VERSION")]
    modules: Vec<String>,
    /// The registry's base URL (e.g. https://registry.example.com).
    #[arg(long)]
    registry: String,
    /// A token that may fill (`tfreg token create --fill`, or admin).
    #[arg(long, env = "TFREG_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// A PEM certificate to trust for --registry besides the system's.
    #[arg(long, env = "TFREG_CA_CERT")]
    ca_cert: Option<PathBuf>,
}

/// One provider version to warm, and which of its platforms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WantedProvider {
    /// `host/namespace/type`.
    pub address: String,
    pub version: String,
    pub pick: Pick,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pick {
    /// The platforms whose archives have one of these hashes (a lock file's).
    Hashes(BTreeSet<String>),
    /// These `os_arch` platforms.
    Platforms(Vec<String>),
}

impl Pick {
    /// The platforms of a `<version>.json` answer this picks.
    pub fn platforms(&self, answer: &MirrorVersion) -> Vec<String> {
        answer
            .archives
            .iter()
            .filter(|(platform, archive)| match self {
                Pick::Hashes(pinned) => archive.hashes.iter().any(|h| pinned.contains(h)),
                Pick::Platforms(wanted) => wanted.contains(platform),
            })
            .map(|(platform, _)| platform.clone())
            .collect()
    }
}

/// The provider versions a lock file pins, each with its hashes.
pub fn from_lock_file(text: &str) -> std::result::Result<Vec<WantedProvider>, String> {
    let body: hcl::Body = hcl::from_str(text).map_err(|e| format!("not a lock file: {e}"))?;
    let mut found = Vec::new();
    for block in body.blocks().filter(|b| b.identifier() == "provider") {
        let [label] = block.labels() else {
            return Err("a provider block without its one address".into());
        };
        let address = label.as_str().to_string();
        let mut version = None;
        let mut hashes = BTreeSet::new();
        for attr in block.body().attributes() {
            match (attr.key(), attr.expr()) {
                ("version", hcl::Expression::String(v)) => version = Some(v.clone()),
                ("hashes", hcl::Expression::Array(items)) => {
                    hashes.extend(items.iter().filter_map(|e| match e {
                        hcl::Expression::String(h) => Some(h.clone()),
                        _ => None,
                    }));
                }
                _ => {}
            }
        }
        let version = version.ok_or_else(|| format!("{address}: no version"))?;
        found.push(WantedProvider {
            address,
            version,
            pick: Pick::Hashes(hashes),
        });
    }
    Ok(found)
}

/// `ADDRESS@VERSION` with `parts` segments in the address.
fn split_versioned(text: &str, parts: usize) -> std::result::Result<(String, String), String> {
    let (address, version) = text
        .rsplit_once('@')
        .ok_or_else(|| format!("{text}: expected ADDRESS@VERSION"))?;
    if address.split('/').count() != parts || address.split('/').any(str::is_empty) {
        return Err(format!("{text}: the address needs {parts} parts"));
    }
    Ok((address.to_string(), version.to_string()))
}

/// GET `path`, waiting out a fill still going on (503 with Retry-After).
async fn get_filled(client: &PublishClient, path: &str) -> Result<(u16, bytes::Bytes)> {
    for _ in 0..30 {
        let (status, body) = client.call(http::Method::GET, path, None).await?;
        if status != http::StatusCode::SERVICE_UNAVAILABLE {
            return Ok((status.as_u16(), body));
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    Err(format!("{path}: still being filled after a minute").into())
}

fn refused(what: &str, status: u16, body: &[u8]) -> crate::cli_error::CliError {
    let detail = serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v["errors"].as_array().cloned())
        .map(|e| {
            e.iter()
                .filter_map(|m| m.as_str())
                .collect::<Vec<_>>()
                .join("; ")
        })
        .unwrap_or_else(|| String::from_utf8_lossy(body).into_owned());
    format!("{what}: the registry answered {status}: {detail}").into()
}

pub async fn warm(args: WarmArgs) -> Result<()> {
    let mut wanted = Vec::new();
    for path in &args.lock_files {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        wanted.extend(from_lock_file(&text).map_err(|e| format!("{}: {e}", path.display()))?);
    }
    if !args.providers.is_empty() && args.platforms.is_empty() {
        return Err("--provider needs at least one --platform OS_ARCH".into());
    }
    for text in &args.providers {
        let (address, version) = split_versioned(text, 3)?;
        wanted.push(WantedProvider {
            address,
            version,
            pick: Pick::Platforms(args.platforms.clone()),
        });
    }
    let modules = args
        .modules
        .iter()
        .map(|m| split_versioned(m, 4))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    if wanted.is_empty() && modules.is_empty() {
        return Err("nothing to warm: give --lock-file, --provider or --module".into());
    }
    let client = PublishClient::new(&args.registry, args.token.clone(), args.ca_cert.as_deref())?;
    for w in &wanted {
        let (host, provider) = w
            .address
            .split_once('/')
            .ok_or_else(|| format!("{}: not HOST/NAMESPACE/TYPE", w.address))?;
        let path = format!("/v1/mirror/{host}/{provider}/{}.json", w.version);
        let (status, body) = get_filled(&client, &path).await?;
        let what = format!("{} {}", w.address, w.version);
        if status != 200 {
            return Err(refused(&what, status, &body));
        }
        let answer: MirrorVersion =
            serde_json::from_slice(&body).map_err(|e| format!("{what}: unexpected answer: {e}"))?;
        let platforms = w.pick.platforms(&answer);
        if platforms.is_empty() {
            return Err(format!("{what}: none of its platforms is wanted here").into());
        }
        for platform in platforms {
            let url = &answer.archives[&platform].url;
            let status = client.head(url).await?;
            if !status.is_success() {
                return Err(format!("{what} {platform}: the archive answered {status}").into());
            }
            println!("warmed {what} {platform}");
        }
    }
    for (address, version) in &modules {
        let (host, module) = address.split_once('/').expect("four parts");
        // Its list too: a sealed upstream lists only what is cached.
        let list = format!("/v1/cache/{host}/modules/{module}/versions");
        let (status, body) = get_filled(&client, &list).await?;
        if status != 200 {
            return Err(refused(&format!("{address}'s versions"), status, &body));
        }
        let path = format!("/v1/cache/{host}/modules/{module}/{version}/download");
        let (status, body) = get_filled(&client, &path).await?;
        if status != 204 {
            return Err(refused(&format!("{address} {version}"), status, &body));
        }
        println!("warmed {address} {version}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use tfreg_model::protocol::MirrorArchive;

    use super::*;

    #[test]
    fn a_lock_file_names_each_version_and_its_hashes() {
        let lock = r#"
# This file is maintained automatically by "terraform init".
provider "registry.terraform.io/hashicorp/null" {
  version     = "3.2.0"
  constraints = "~> 3.0"
  hashes = [
    "h1:aaa=",
    "zh:0123",
  ]
}
provider "registry.example.test/acme/widget" {
  version = "1.0.0"
  hashes  = ["zh:9999"]
}
"#;
        let found = from_lock_file(lock).unwrap();
        assert_eq!(found.len(), 2);
        assert_eq!(found[0].address, "registry.terraform.io/hashicorp/null");
        assert_eq!(found[0].version, "3.2.0");
        assert_eq!(
            found[0].pick,
            Pick::Hashes(["h1:aaa=".to_string(), "zh:0123".to_string()].into())
        );
        assert!(from_lock_file("provider \"x\" {\n}\n").is_err());
        assert!(from_lock_file("{").is_err());
    }

    #[test]
    fn platforms_are_picked_by_pinned_hash_or_by_name() {
        let archive = |h: &str| MirrorArchive {
            url: "u".into(),
            hashes: vec![h.to_string()],
        };
        let answer = MirrorVersion {
            archives: BTreeMap::from([
                ("linux_amd64".to_string(), archive("zh:1")),
                ("darwin_arm64".to_string(), archive("zh:2")),
                ("windows_amd64".to_string(), archive("zh:3")),
            ]),
        };
        let pinned = Pick::Hashes(["zh:2".to_string(), "zh:1".to_string()].into());
        assert_eq!(pinned.platforms(&answer), ["darwin_arm64", "linux_amd64"]);
        let named = Pick::Platforms(vec!["windows_amd64".into(), "freebsd_386".into()]);
        assert_eq!(named.platforms(&answer), ["windows_amd64"]);
    }

    #[test]
    fn addresses_need_their_parts_and_a_version() {
        assert_eq!(
            split_versioned("r.example/ns/t@1.0.0", 3).unwrap(),
            ("r.example/ns/t".to_string(), "1.0.0".to_string())
        );
        assert!(split_versioned("r.example/ns/t", 3).is_err());
        assert!(split_versioned("r.example//t@1", 3).is_err());
        assert!(split_versioned("r.example/ns/n/s@1", 3).is_err());
        assert!(split_versioned("r.example/ns/n/s@1", 4).is_ok());
    }
}
