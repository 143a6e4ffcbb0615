//! `tfreg publish provider|module` and `tfreg mirror import`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use clap::Args;
use tfreg_model::address::{Hostname, ModuleName, ProviderName};
use tfreg_model::protocol::{PublishRequest, PublishResult, PublishStatus};
use tfreg_model::router::PublishTarget;
use tfreg_model::version::Version;
use tfreg_verify::release_files::{ReleaseFile, ReleaseFileName};

use crate::cli_error::Result;
use crate::client::{LocalFile, PublishClient};

#[derive(Args)]
pub struct RegistryArgs {
    /// The registry's base URL, e.g. https://127.0.0.1:8443.
    #[arg(long)]
    registry: String,
    /// A token with publish rights.
    #[arg(long, env = "TFREG_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// A PEM certificate to trust for the registry: its own (even self-signed)
    /// or the CA that signed it; the system's roots and SSL_CERT_FILE stay trusted.
    #[arg(long, env = "TFREG_CA_CERT")]
    ca_cert: Option<PathBuf>,
    /// CI publishing with no stored secret.
    #[command(flatten)]
    oidc: crate::ci_token::OidcArgs,
}

impl RegistryArgs {
    async fn client(self) -> Result<PublishClient> {
        let mut token = self.token.filter(|t| !t.is_empty());
        if token.is_none() && self.oidc.oidc {
            let ca = self.ca_cert.as_deref();
            token = Some(crate::ci_token::exchange(&self.registry, ca, &self.oidc).await?);
        }
        PublishClient::new(&self.registry, token, self.ca_cert.as_deref())
    }
}

#[derive(Args)]
pub struct ProviderArgs {
    /// goreleaser's output directory (zips, SHA256SUMS, SHA256SUMS.sig, optional manifest.json).
    dist_dir: PathBuf,
    #[command(flatten)]
    registry: RegistryArgs,
    #[arg(long)]
    namespace: String,
    /// Provider type; default: read from the file names.
    #[arg(long = "type")]
    provider_type: Option<String>,
    /// Version; default: read from the file names.
    #[arg(long)]
    version: Option<String>,
    /// ASCII-armored public key that signed SHA256SUMS; not needed when the
    /// namespace has registered keys (`tfreg key add`), which are then used.
    #[arg(long)]
    signing_key: Option<PathBuf>,
    /// Plugin protocol versions (comma-separated), overriding the release manifest; default 5.0.
    #[arg(long, value_delimiter = ',')]
    protocols: Option<Vec<String>>,
    /// Accept an EdDSA key, which Terraform 1.5 and older cannot verify.
    #[arg(long)]
    allow_modern_keys: bool,
}

#[derive(Args)]
pub struct ModuleArgs {
    /// A module directory (packed to .tar.gz without .git and .terraform) or a .tar.gz.
    src: PathBuf,
    #[command(flatten)]
    registry: RegistryArgs,
    #[arg(long)]
    namespace: String,
    #[arg(long)]
    name: String,
    #[arg(long)]
    system: String,
    #[arg(long)]
    version: String,
}

#[derive(Args)]
pub struct MirrorImportArgs {
    /// A directory written by `terraform providers mirror` (HOSTNAME/NAMESPACE/TYPE/*.zip).
    mirror_dir: PathBuf,
    #[command(flatten)]
    registry: RegistryArgs,
}

fn report(what: &str, result: &PublishResult) {
    for w in &result.warnings {
        eprintln!("warning: {w}");
    }
    match result.status {
        PublishStatus::Unchanged => {
            eprintln!("{what}: already published with identical content; nothing to do")
        }
        PublishStatus::Published => {
            eprintln!("{what}: published {} {}", result.address, result.version)
        }
    }
}

/// The goreleaser release files in a dist directory, by parsed name.
fn release_files_in(dist: &Path) -> Result<Vec<ReleaseFileName>> {
    let entries =
        std::fs::read_dir(dist).map_err(|e| format!("reading {}: {e}", dist.display()))?;
    let mut found: Vec<ReleaseFileName> = entries
        .flatten()
        .filter_map(|e| ReleaseFileName::parse(&e.file_name().to_string_lossy()))
        .collect();
    found.sort_by_key(|f| f.to_string());
    Ok(found)
}

/// The one release in a dist directory (its SHA256SUMS names it), or the one
/// `--type`/`--version` pick.
fn release_of(
    files: &[ReleaseFileName],
    dist: &Path,
    want_type: Option<&str>,
    want_version: Option<&str>,
) -> Result<(String, String)> {
    let mut found: Vec<(String, String)> = files
        .iter()
        .filter(|f| f.file == ReleaseFile::Shasums)
        .filter(|f| want_type.is_none_or(|t| t == f.provider_type))
        .filter(|f| want_version.is_none_or(|v| v == f.version))
        .map(|f| (f.provider_type.clone(), f.version.clone()))
        .collect();
    match found.len() {
        1 => Ok(found.remove(0)),
        0 => Err(format!(
            "no terraform-provider-<type>_<version>_SHA256SUMS in {} (run goreleaser, or pass --type and --version)",
            dist.display()
        )
        .into()),
        _ => Err(format!("several releases in {}: pass --type and --version", dist.display()).into()),
    }
}

pub async fn provider(args: ProviderArgs) -> Result<()> {
    if let Some(v) = &args.version {
        Version::parse(v)?;
    }
    let in_dist = release_files_in(&args.dist_dir)?;
    let (ty, version) = release_of(
        &in_dist,
        &args.dist_dir,
        args.provider_type.as_deref(),
        args.version.as_deref(),
    )?;
    let name = ProviderName::parse(&args.namespace, &ty)?;
    let version = Version::parse(&version)?;
    let mut files = Vec::new();
    for f in in_dist
        .iter()
        .filter(|f| f.provider_type == ty && f.version == version.to_string())
    {
        let file_name = f.to_string();
        files.push(LocalFile::hash(
            file_name.clone(),
            &args.dist_dir.join(&file_name),
        )?);
    }
    let signing_key = args
        .signing_key
        .as_ref()
        .map(|path| {
            std::fs::read_to_string(path)
                .map_err(|e| format!("reading --signing-key {}: {e}", path.display()))
        })
        .transpose()?;
    let client = args.registry.client().await?;
    let request = PublishRequest {
        signing_key,
        protocols: args.protocols,
        allow_modern_keys: args.allow_modern_keys,
        ..Default::default()
    };
    let target = PublishTarget::Provider {
        provider: name.clone(),
        version: version.clone(),
    };
    let result = client.publish(&target, &files, request).await?;
    report(&format!("provider {name} {version}"), &result);
    Ok(())
}

pub async fn module(args: ModuleArgs) -> Result<()> {
    let name = ModuleName::parse(&args.namespace, &args.name, &args.system)?;
    let version = Version::parse(&args.version)?;
    // The name the archive is kept under; a plain one when the long form is
    // not a valid file name (more than 128 characters).
    let filename = Some(format!("{}-{}-{version}.tar.gz", name.name, name.system))
        .filter(|n| tfreg_model::blob_key::FileName::parse(n).is_ok())
        .unwrap_or_else(|| "module.tar.gz".to_string());
    let packed;
    let archive = if args.src.is_dir() {
        let tmp = tempfile::NamedTempFile::new().map_err(|e| format!("temporary file: {e}"))?;
        tfreg_verify::archives::module::pack_dir(&args.src, std::io::BufWriter::new(tmp.as_file()))
            .map_err(|e| format!("packing {}: {e}", args.src.display()))?;
        packed = tmp;
        packed.path().to_path_buf()
    } else if args.src.to_string_lossy().ends_with(".tar.gz")
        || args.src.to_string_lossy().ends_with(".tgz")
    {
        args.src.clone()
    } else {
        return Err(format!(
            "{}: give a module directory or a .tar.gz",
            args.src.display()
        )
        .into());
    };
    let file = LocalFile::hash(filename, &archive)?;
    let client = args.registry.client().await?;
    let target = PublishTarget::Module {
        module: name.clone(),
        version: version.clone(),
    };
    let result = client
        .publish(&target, &[file], PublishRequest::default())
        .await?;
    report(&format!("module {name} {version}"), &result);
    Ok(())
}

/// One provider version found in a mirror directory.
type MirrorKey = (String, String, String, String);

pub async fn mirror_import(args: MirrorImportArgs) -> Result<()> {
    let root = &args.mirror_dir;
    let mut releases: BTreeMap<MirrorKey, Vec<LocalFile>> = BTreeMap::new();
    for entry in walkdir::WalkDir::new(root).min_depth(4).max_depth(4) {
        let entry = entry.map_err(|e| format!("reading {}: {e}", root.display()))?;
        let rel = entry.path().strip_prefix(root).map_err(|e| e.to_string())?;
        let parts: Vec<String> = rel
            .iter()
            .map(|p| p.to_string_lossy().into_owned())
            .collect();
        let [host, ns, ty, file] = parts.as_slice() else {
            continue;
        };
        if !entry.file_type().is_file() || !file.ends_with(".zip") {
            continue; // the JSON index files are never trusted over the zips
        }
        let version = match ReleaseFileName::parse(file) {
            Some(parsed)
                if parsed.provider_type == *ty
                    && matches!(parsed.file, ReleaseFile::Package(_)) =>
            {
                parsed.version
            }
            _ => {
                eprintln!(
                    "skipping {}: expected terraform-provider-{ty}_VERSION_OS_ARCH.zip",
                    rel.display()
                );
                continue;
            }
        };
        let key = (host.clone(), ns.clone(), ty.clone(), version);
        releases
            .entry(key)
            .or_default()
            .push(LocalFile::hash(file.clone(), entry.path())?);
    }
    if releases.is_empty() {
        return Err(format!(
            "no provider packages under {} (expected HOSTNAME/NAMESPACE/TYPE/terraform-provider-TYPE_VERSION_OS_ARCH.zip)",
            root.display()
        )
        .into());
    }
    let client = args.registry.client().await?;
    for ((host, ns, ty, version), files) in releases {
        let host = Hostname::parse(&host)?;
        let name = ProviderName::parse(&ns, &ty)?;
        let version = Version::parse(&version)?;
        let target = PublishTarget::Mirror {
            hostname: host.clone(),
            provider: name.clone(),
            version: version.clone(),
        };
        let result = client
            .publish(&target, &files, PublishRequest::default())
            .await?;
        report(&format!("mirror {host}/{name} {version}"), &result);
    }
    Ok(())
}
