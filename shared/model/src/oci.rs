//! The OCI view (issue 40): the names, references and wire types of an OCI
//! distribution registry as OpenTofu 1.10+ reads providers and modules from
//! one (`oci_mirror`, `oci://` module sources).
//!
//! - [`Repository`]: which of this registry's packages an OCI repository
//!   name is (`providers/NS/TYPE`, `mirror/HOST/NS/TYPE`,
//!   `modules/NS/NAME/SYSTEM`), and back.
//! - [`Reference`]: a tag (a version, `_` for `+`; `latest` for modules) or
//!   a `sha256:` digest.
//! - The bytes of an image index and an image manifest, written the one way
//!   [`Manifest`] writes them: the same package always has the same digest
//!   (the tests pin them), so nothing needs to be stored to answer by
//!   digest.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::address::{Hostname, ModuleName, Platform, ProviderName};
use crate::error::{Invalid, RouteError};
use crate::hashing::sha256_hex;
use crate::version::Version;

/// An image index's media type: a provider version's tag.
pub const INDEX_MEDIA_TYPE: &str = "application/vnd.oci.image.index.v1+json";
/// An image manifest's media type: a provider platform's, or a module version's.
pub const MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
/// The index of a provider version.
pub const PROVIDER_ARTIFACT: &str = "application/vnd.opentofu.provider";
/// The manifest of one platform of a provider version.
pub const PROVIDER_TARGET_ARTIFACT: &str = "application/vnd.opentofu.provider-target";
/// The manifest of a module version.
pub const MODULE_ARTIFACT: &str = "application/vnd.opentofu.modulepkg";
/// The one layer's media type: the zip, byte for byte.
pub const ZIP_LAYER: &str = "archive/zip";
/// The empty config every manifest names (OpenTofu ignores it).
pub const EMPTY_CONFIG_MEDIA_TYPE: &str = "application/vnd.oci.empty.v1+json";
/// The empty config's bytes.
pub const EMPTY_CONFIG: &[u8] = b"{}";
/// OpenTofu refuses a manifest larger than this.
pub const MAX_MANIFEST_BYTES: usize = 4 * 1024 * 1024;
/// The tag a module source without `?tag=` or `?digest=` asks for.
pub const LATEST: &str = "latest";
/// The most tags one page lists when the client names no `n`.
pub const DEFAULT_PAGE: usize = 1000;

/// A `sha256:<64 hex>` digest, lowercase.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Digest(String);

impl Digest {
    pub fn parse(s: &str) -> Result<Self, Invalid> {
        match s.strip_prefix("sha256:") {
            Some(hex)
                if hex.len() == 64
                    && hex
                        .bytes()
                        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) =>
            {
                Ok(Digest(s.to_string()))
            }
            _ => Err(Invalid::bad(format!(
                "invalid digest {:?}: this registry's digests are sha256:<64 lowercase hex digits>",
                s.chars().take(80).collect::<String>()
            ))),
        }
    }

    /// The digest of `bytes`.
    pub fn of(bytes: &[u8]) -> Self {
        Digest(format!("sha256:{}", sha256_hex(bytes)))
    }

    /// The digest of a file whose sha256 (hex) is known: a zip's
    /// SHA256SUMS line.
    pub fn of_sha256(hex: &str) -> Result<Self, Invalid> {
        Self::parse(&format!("sha256:{}", hex.to_ascii_lowercase()))
    }

    /// The 64 hex digits.
    pub fn hex(&self) -> &str {
        &self.0["sha256:".len()..]
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Which package an OCI repository is.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Repository {
    /// `providers/NS/TYPE`: published here.
    Provider(ProviderName),
    /// `mirror/HOST/NS/TYPE`: the network mirror's view of a host (this
    /// registry's own, an imported one, a configured upstream's). A port is
    /// written `HOST_PORT` (`:` may not be in a repository name; `_` is in
    /// no hostname).
    Mirrored {
        hostname: Hostname,
        provider: ProviderName,
    },
    /// `modules/NS/NAME/SYSTEM`: published here.
    Module(ModuleName),
}

impl Repository {
    /// The repository of a name's components (`["providers", "acme", "widget"]`).
    pub fn parse(parts: &[&str]) -> Result<Self, RouteError> {
        let not_one = || {
            RouteError::not_found(format!(
                "no repository {:?} here: this registry's are providers/NAMESPACE/TYPE, mirror/HOST/NAMESPACE/TYPE and modules/NAMESPACE/NAME/SYSTEM",
                parts.join("/").chars().take(200).collect::<String>()
            ))
        };
        // Repository names are lowercase (OCI distribution spec).
        if parts
            .iter()
            .any(|p| p.bytes().any(|b| b.is_ascii_uppercase()))
        {
            return Err(not_one());
        }
        Ok(match parts {
            ["providers", ns, ty] => Repository::Provider(ProviderName::parse(ns, ty)?),
            ["mirror", host, ns, ty] => Repository::Mirrored {
                hostname: Hostname::parse(&host.replacen('_', ":", 1))?,
                provider: ProviderName::parse(ns, ty)?,
            },
            ["modules", ns, name, system] => {
                Repository::Module(ModuleName::parse(ns, name, system)?)
            }
            _ => return Err(not_one()),
        })
    }

    /// Its name, as clients write it after the host.
    pub fn name(&self) -> String {
        match self {
            Repository::Provider(p) => format!("providers/{p}"),
            Repository::Mirrored { hostname, provider } => {
                format!("mirror/{}/{provider}", hostname.as_str().replace(':', "_"))
            }
            Repository::Module(m) => format!("modules/{m}"),
        }
    }

    /// Is it a module's (an image manifest per tag) rather than a provider's
    /// (an image index per tag)?
    pub fn is_module(&self) -> bool {
        matches!(self, Repository::Module(_))
    }
}

impl fmt::Display for Repository {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

/// What a manifest request names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reference {
    /// A version's tag (`1.2.3`, `1.2.3-rc.1`).
    Version(Version),
    /// `latest`: a module's newest listed version that is not a prerelease.
    Latest,
    Digest(Digest),
}

impl Reference {
    pub fn parse(s: &str) -> Result<Self, RouteError> {
        if s.contains(':') {
            return Ok(Reference::Digest(Digest::parse(s)?));
        }
        if s == LATEST {
            return Ok(Reference::Latest);
        }
        version_of_tag(s).map(Reference::Version).ok_or_else(|| {
            RouteError::not_found(format!(
                "no tag {:?} here: tags are versions (with _ for +), and latest for modules",
                s.chars().take(130).collect::<String>()
            ))
        })
    }
}

impl fmt::Display for Reference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reference::Version(v) => f.write_str(&tag_of(v)),
            Reference::Latest => f.write_str(LATEST),
            Reference::Digest(d) => d.fmt(f),
        }
    }
}

/// A version's tag: `+` is not allowed in a tag, so OpenTofu reads `_` as
/// `+` (this registry's versions carry no build metadata, so a tag is the
/// version as written).
pub fn tag_of(version: &Version) -> String {
    version.to_string().replace('+', "_")
}

/// The version a tag names, if it is one (OpenTofu ignores other tags).
pub fn version_of_tag(tag: &str) -> Option<Version> {
    Version::parse(&tag.replace('_', "+")).ok()
}

/// One page of a tag list (`GET /v2/<name>/tags/list?n=&last=`): the tags
/// after `last`, in lexical order (as the distribution spec orders them),
/// at most `n`; and whether more follow (a `Link` to the next page).
pub fn page_of_tags(mut tags: Vec<String>, n: Option<usize>, last: Option<&str>) -> TagPage {
    tags.sort();
    tags.dedup();
    let start = match last {
        Some(last) => tags.partition_point(|t| t.as_str() <= last),
        None => 0,
    };
    let n = n.unwrap_or(DEFAULT_PAGE);
    let rest = &tags[start.min(tags.len())..];
    let page: Vec<String> = rest.iter().take(n).cloned().collect();
    let more = rest.len() > page.len() && !page.is_empty();
    TagPage { tags: page, more }
}

/// A page of tags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TagPage {
    pub tags: Vec<String>,
    /// More tags follow the last of this page.
    pub more: bool,
}

/// The body of a tag list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TagList {
    pub name: String,
    pub tags: Vec<String>,
}

/// A content descriptor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    pub media_type: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact_type: Option<String>,
    pub digest: String,
    pub size: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platform: Option<OciPlatform>,
    /// A layer's file name (`org.opencontainers.image.title`, which `oras
    /// pull` names the file it writes by; OpenTofu does not look).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<std::collections::BTreeMap<String, String>>,
}

/// The annotation that names a layer's file.
pub const TITLE: &str = "org.opencontainers.image.title";

/// A descriptor's platform, in Go's names (Terraform's platforms are Go's).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OciPlatform {
    pub architecture: String,
    pub os: String,
}

/// An image index (a provider version: one manifest per platform).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageIndex {
    pub schema_version: u32,
    pub media_type: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact_type: Option<String>,
    pub manifests: Vec<Descriptor>,
}

/// An image manifest (a provider platform, a module version).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageManifest {
    pub schema_version: u32,
    pub media_type: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact_type: Option<String>,
    pub config: Descriptor,
    pub layers: Vec<Descriptor>,
}

/// A manifest's bytes, as answered, and what they are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    pub media_type: &'static str,
    pub bytes: Vec<u8>,
}

impl Manifest {
    pub fn digest(&self) -> Digest {
        Digest::of(&self.bytes)
    }

    /// The descriptor that names it from an index.
    fn descriptor(&self, artifact_type: &str, platform: Option<&Platform>) -> Descriptor {
        Descriptor {
            media_type: self.media_type.to_string(),
            artifact_type: Some(artifact_type.to_string()),
            digest: self.digest().to_string(),
            size: self.bytes.len() as u64,
            platform: platform.map(|p| OciPlatform {
                architecture: p.arch.clone(),
                os: p.os.clone(),
            }),
            annotations: None,
        }
    }

    fn written(media_type: &'static str, value: &impl Serialize) -> Self {
        Manifest {
            media_type,
            // A struct of strings and numbers: serialising cannot fail.
            bytes: serde_json::to_vec(value).unwrap_or_default(),
        }
    }

    /// One zip as an image manifest of `artifact_type`: the empty config and
    /// the zip as its one `archive/zip` layer, titled `filename`.
    pub fn of_zip(artifact_type: &str, zip: &Digest, size: u64, filename: &str) -> Self {
        Self::written(
            MANIFEST_MEDIA_TYPE,
            &ImageManifest {
                schema_version: 2,
                media_type: MANIFEST_MEDIA_TYPE.into(),
                artifact_type: Some(artifact_type.into()),
                config: empty_config(),
                layers: vec![Descriptor {
                    media_type: ZIP_LAYER.into(),
                    artifact_type: None,
                    digest: zip.to_string(),
                    size,
                    platform: None,
                    annotations: Some([(TITLE.to_string(), filename.to_string())].into()),
                }],
            },
        )
    }

    /// A provider version's index over its platforms' manifests (in
    /// platform order, whatever order they come in).
    pub fn provider_index(platforms: &[(Platform, Manifest)]) -> Self {
        let mut sorted: Vec<&(Platform, Manifest)> = platforms.iter().collect();
        sorted.sort_by(|a, b| a.0.cmp(&b.0));
        Self::written(
            INDEX_MEDIA_TYPE,
            &ImageIndex {
                schema_version: 2,
                media_type: INDEX_MEDIA_TYPE.into(),
                artifact_type: Some(PROVIDER_ARTIFACT.into()),
                manifests: sorted
                    .into_iter()
                    .map(|(p, m)| m.descriptor(PROVIDER_TARGET_ARTIFACT, Some(p)))
                    .collect(),
            },
        )
    }
}

/// The empty config's descriptor.
pub fn empty_config() -> Descriptor {
    Descriptor {
        media_type: EMPTY_CONFIG_MEDIA_TYPE.into(),
        artifact_type: None,
        digest: Digest::of(EMPTY_CONFIG).to_string(),
        size: EMPTY_CONFIG.len() as u64,
        platform: None,
        annotations: None,
    }
}

/// The `WWW-Authenticate` challenge of a repository endpoint (oras-go's,
/// and so OpenTofu's, way to find the token endpoint): `scope` is
/// `repository:<name>:pull`, none for `GET /v2/`.
pub fn challenge(realm: &str, service: &str, repository: Option<&Repository>) -> String {
    match repository {
        Some(r) => format!(
            "Bearer realm=\"{realm}\",service=\"{service}\",scope=\"repository:{}:pull\"",
            r.name()
        ),
        None => format!("Bearer realm=\"{realm}\",service=\"{service}\""),
    }
}

/// The repositories a token request's `scope` parameters ask to pull
/// (`repository:<name>:pull[,push]`; other resource types are ignored, as
/// this registry grants nothing else). A name that is no repository here
/// is refused.
pub fn pull_scopes<'a>(
    scopes: impl IntoIterator<Item = &'a str>,
) -> Result<Vec<Repository>, RouteError> {
    let mut out = Vec::new();
    for scope in scopes {
        // Several scopes may also come space-separated in one parameter.
        for one in scope.split(' ').filter(|s| !s.is_empty()) {
            let Some(rest) = one.strip_prefix("repository:") else {
                continue;
            };
            let Some((name, actions)) = rest.rsplit_once(':') else {
                return Err(RouteError::bad(format!(
                    "invalid scope {one:?}: repository:<name>:pull"
                )));
            };
            if !actions.split(',').any(|a| a == "pull" || a == "*") {
                continue;
            }
            let parts: Vec<&str> = name.split('/').collect();
            let repository = Repository::parse(&parts)?;
            if !out.contains(&repository) {
                out.push(repository);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
