//! Pure checks of what a publisher uploads: goreleaser file names (what kind
//! of release file a name is, decided here for the server and for `tfreg
//! publish` / `tfreg mirror import`: [`ReleaseFileName::parse`]), declared
//! files, SHA256SUMS, the release manifest and plugin protocol versions.
//! Every refusal is a typed [`ReleaseError`].

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use crate::archives::ArchiveError;
use crate::signing::SignatureError;
use tfreg_model::address::Platform;
use tfreg_model::blob_key::FileName;
use tfreg_model::protocol::FileDecl;
use tfreg_model::version::Version;

/// Why the files of a publish were refused.
#[derive(Debug, thiserror::Error)]
pub enum ReleaseError {
    /// A file name, declaration, SHA256SUMS, manifest or protocol list is wrong.
    #[error("{0}")]
    Invalid(String),
    /// A declared file is larger than the registry accepts.
    #[error("{0}")]
    TooLarge(String),
    /// The signature over SHA256SUMS, or the key, is refused.
    #[error(transparent)]
    Signature(#[from] SignatureError),
    /// An archive's contents are refused.
    #[error("{file}: {source}")]
    Archive {
        file: String,
        #[source]
        source: ArchiveError,
    },
}

impl ReleaseError {
    pub fn invalid(msg: impl Into<String>) -> Self {
        ReleaseError::Invalid(msg.into())
    }

    /// True when the refusal is about size (answered 413).
    pub fn is_too_large(&self) -> bool {
        matches!(self, ReleaseError::TooLarge(_))
    }
}

/// The part of a provider release a file is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReleaseFile {
    /// `<os>_<arch>.zip`.
    Package(Platform),
    /// `SHA256SUMS`.
    Shasums,
    /// `SHA256SUMS.sig`.
    Signature,
    /// `manifest.json`.
    Manifest,
}

/// A goreleaser file name: `terraform-provider-<type>_<version>_<file>`.
///
/// Provider types hold no `_` and versions none either (semver allows only
/// letters, digits, `-` and `.`), so the name splits unambiguously. The type
/// and version are only split off here; callers validate them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReleaseFileName {
    pub provider_type: String,
    pub version: String,
    pub file: ReleaseFile,
}

const PROVIDER_PREFIX: &str = "terraform-provider-";

impl ReleaseFileName {
    pub fn new(provider_type: &str, version: &Version, file: ReleaseFile) -> Self {
        Self {
            provider_type: provider_type.to_string(),
            version: version.to_string(),
            file,
        }
    }

    /// The parts of a goreleaser file name, or `None` if it is not one.
    pub fn parse(name: &str) -> Option<Self> {
        let rest = name.strip_prefix(PROVIDER_PREFIX)?;
        let (provider_type, rest) = rest.split_once('_')?;
        let (version, file) = rest.split_once('_')?;
        if provider_type.is_empty() || version.is_empty() {
            return None;
        }
        let file = match file {
            "SHA256SUMS" => ReleaseFile::Shasums,
            "SHA256SUMS.sig" => ReleaseFile::Signature,
            "manifest.json" => ReleaseFile::Manifest,
            zip => {
                let (os, arch) = zip.strip_suffix(".zip")?.split_once('_')?;
                ReleaseFile::Package(Platform::parse(os, arch).ok()?)
            }
        };
        Some(Self {
            provider_type: provider_type.to_string(),
            version: version.to_string(),
            file,
        })
    }
}

impl fmt::Display for ReleaseFileName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{PROVIDER_PREFIX}{}_{}_",
            self.provider_type, self.version
        )?;
        match &self.file {
            ReleaseFile::Package(p) => write!(f, "{p}.zip"),
            ReleaseFile::Shasums => f.write_str("SHA256SUMS"),
            ReleaseFile::Signature => f.write_str("SHA256SUMS.sig"),
            ReleaseFile::Manifest => f.write_str("manifest.json"),
        }
    }
}

/// The files of a provider release, sorted into their roles.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderFiles {
    pub zips: Vec<(Platform, FileDecl)>,
    /// Absent for mirror imports.
    pub shasums: Option<FileDecl>,
    pub signature: Option<FileDecl>,
    pub manifest: Option<FileDecl>,
}

/// Largest number of files in one publish.
pub const MAX_FILES: usize = 200;

/// Check one declared file: a safe file name, a well-formed sha256 and a size
/// within `max_size`.
pub fn check_decl(f: &FileDecl, max_size: u64) -> Result<FileName, ReleaseError> {
    let name = FileName::parse(&f.name).map_err(|e| ReleaseError::invalid(e.to_string()))?;
    if !is_sha256_hex(&f.sha256) {
        return Err(ReleaseError::invalid(format!(
            "{}: sha256 must be 64 lowercase hex characters",
            f.name
        )));
    }
    if f.size > max_size {
        return Err(ReleaseError::TooLarge(format!(
            "{} is larger than {max_size} bytes",
            f.name
        )));
    }
    Ok(name)
}

/// Is `s` a sha256 as the registry writes and compares it: 64 lowercase hex
/// digits?
pub fn is_sha256_hex(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Check every declared file and that none is listed twice.
pub fn check_decls(files: &[FileDecl], max_size: u64) -> Result<(), ReleaseError> {
    if files.len() > MAX_FILES {
        return Err(ReleaseError::invalid(format!(
            "too many files (at most {MAX_FILES})"
        )));
    }
    let mut seen = BTreeSet::new();
    for f in files {
        check_decl(f, max_size)?;
        if !seen.insert(f.name.as_str()) {
            return Err(ReleaseError::invalid(format!("{} is listed twice", f.name)));
        }
    }
    Ok(())
}

/// Sort declared files into a provider release, refusing names that do not
/// match the provider type, version and a platform. `signed` releases (the
/// registry's own) need SHA256SUMS and its `.sig`; mirror imports take zips only.
pub fn provider_files(
    provider_type: &str,
    version: &Version,
    files: &[FileDecl],
    signed: bool,
    max_size: u64,
) -> Result<ProviderFiles, ReleaseError> {
    check_decls(files, max_size)?;
    let base = format!("{PROVIDER_PREFIX}{provider_type}_{version}");
    let mut out = ProviderFiles {
        zips: Vec::new(),
        shasums: None,
        signature: None,
        manifest: None,
    };
    for f in files {
        let parsed = ReleaseFileName::parse(&f.name)
            .filter(|n| n.provider_type == provider_type && n.version == version.to_string());
        let slot = match parsed.map(|n| n.file) {
            Some(ReleaseFile::Package(platform)) => {
                out.zips.push((platform, f.clone()));
                continue;
            }
            Some(ReleaseFile::Shasums) if signed => &mut out.shasums,
            Some(ReleaseFile::Signature) if signed => &mut out.signature,
            Some(ReleaseFile::Manifest) if signed => &mut out.manifest,
            _ => {
                let expected = if signed {
                    format!(
                        "{base}_<os>_<arch>.zip, {base}_SHA256SUMS, {base}_SHA256SUMS.sig or {base}_manifest.json"
                    )
                } else {
                    format!("{base}_<os>_<arch>.zip")
                };
                return Err(ReleaseError::invalid(format!(
                    "{} does not belong to this release: expected {expected}",
                    f.name
                )));
            }
        };
        *slot = Some(f.clone());
    }
    if out.zips.is_empty() {
        return Err(ReleaseError::invalid(format!(
            "no provider packages: expected at least one {base}_<os>_<arch>.zip"
        )));
    }
    if signed && out.shasums.is_none() {
        return Err(ReleaseError::invalid(format!(
            "{base}_SHA256SUMS is missing"
        )));
    }
    if signed && out.signature.is_none() {
        return Err(ReleaseError::invalid(format!(
            "{base}_SHA256SUMS.sig is missing: sign SHA256SUMS with gpg --detach-sign"
        )));
    }
    out.zips.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// Parse a SHA256SUMS file: `<64 hex>  <filename>` per line, no blank lines.
pub fn parse_shasums(text: &[u8]) -> Result<BTreeMap<String, String>, ReleaseError> {
    let text = std::str::from_utf8(text)
        .map_err(|_| ReleaseError::invalid("SHA256SUMS is not UTF-8 text"))?;
    let mut sums = BTreeMap::new();
    for (n, line) in text.lines().enumerate() {
        let bad = || {
            ReleaseError::invalid(format!(
                "SHA256SUMS line {}: expected \"<sha256>  <filename>\"",
                n + 1
            ))
        };
        let (hash, name) = line.split_once("  ").ok_or_else(bad)?;
        let name = name.strip_prefix('*').unwrap_or(name);
        if hash.len() != 64 || !hash.bytes().all(|b| b.is_ascii_hexdigit()) || name.is_empty() {
            return Err(bad());
        }
        if sums
            .insert(name.to_string(), hash.to_ascii_lowercase())
            .is_some()
        {
            let shown: String = name.chars().take(80).collect();
            return Err(ReleaseError::invalid(format!(
                "SHA256SUMS lists {shown} twice"
            )));
        }
    }
    if sums.is_empty() {
        return Err(ReleaseError::invalid("SHA256SUMS is empty"));
    }
    Ok(sums)
}

/// Check every zip against SHA256SUMS, and that SHA256SUMS lists no package left out.
pub fn check_against_shasums(
    sums: &BTreeMap<String, String>,
    zips: &[(Platform, FileDecl)],
    provider_type: &str,
    version: &Version,
) -> Result<(), ReleaseError> {
    for (_, zip) in zips {
        match sums.get(&zip.name) {
            None => {
                return Err(ReleaseError::invalid(format!(
                    "SHA256SUMS has no line for {}",
                    zip.name
                )));
            }
            Some(h) if *h != zip.sha256 => {
                return Err(ReleaseError::invalid(format!(
                    "{}: its sha256 is {} but SHA256SUMS says {h}",
                    zip.name, zip.sha256
                )));
            }
            Some(_) => {}
        }
    }
    let uploaded: BTreeSet<&str> = zips.iter().map(|(_, z)| z.name.as_str()).collect();
    let ours = |name: &str| {
        ReleaseFileName::parse(name).is_some_and(|n| {
            n.provider_type == provider_type
                && n.version == version.to_string()
                && matches!(n.file, ReleaseFile::Package(_))
        })
    };
    if let Some(missing) = sums
        .keys()
        .find(|name| ours(name) && !uploaded.contains(name.as_str()))
    {
        return Err(ReleaseError::invalid(format!(
            "SHA256SUMS lists {missing}, which was not uploaded"
        )));
    }
    Ok(())
}

/// Check plugin protocol versions: `major.minor`, and at least one that Terraform (>=5, <7) speaks.
pub fn check_protocols(protocols: &[String]) -> Result<Vec<String>, ReleaseError> {
    if protocols.is_empty() || protocols.len() > 10 {
        return Err(ReleaseError::invalid(
            "protocols must list 1 to 10 versions such as 5.0 or 6.0",
        ));
    }
    let mut majors = Vec::new();
    for p in protocols {
        let parsed = p
            .split_once('.')
            .and_then(|(a, b)| Some((a.parse::<u32>().ok()?, b.parse::<u32>().ok()?)))
            .or_else(|| p.parse::<u32>().ok().map(|a| (a, 0)));
        let Some((major, _)) = parsed else {
            let shown: String = p.chars().take(20).collect();
            return Err(ReleaseError::invalid(format!(
                "invalid protocol version {shown:?}: expected e.g. 5.0 or 6.0"
            )));
        };
        majors.push(major);
    }
    if !majors.iter().any(|m| (5..7).contains(m)) {
        return Err(ReleaseError::invalid(format!(
            "protocols {protocols:?} include none that Terraform 0.13+ speaks (5.x or 6.x)"
        )));
    }
    Ok(protocols.to_vec())
}

/// Read `protocol_versions` from a goreleaser release manifest
/// (`{"version": 1, "metadata": {"protocol_versions": ["5.0"]}}`).
pub fn manifest_protocols(manifest: &[u8]) -> Result<Option<Vec<String>>, ReleaseError> {
    #[derive(serde::Deserialize)]
    struct Manifest {
        #[serde(default)]
        metadata: Option<Metadata>,
    }
    #[derive(serde::Deserialize)]
    struct Metadata {
        #[serde(default)]
        protocol_versions: Option<Vec<String>>,
    }
    let m: Manifest = serde_json::from_slice(manifest).map_err(|e| {
        // serde's message quotes a wrongly typed string whole: say where instead.
        let what = match e.classify() {
            serde_json::error::Category::Data => "not a release manifest",
            _ => "not JSON",
        };
        ReleaseError::invalid(format!(
            "manifest.json is not valid: {what} (line {}, column {})",
            e.line(),
            e.column()
        ))
    })?;
    Ok(m.metadata.and_then(|m| m.protocol_versions))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decl(name: &str, sha: &str) -> FileDecl {
        FileDecl {
            name: name.into(),
            size: 10,
            sha256: sha.repeat(64 / sha.len()),
        }
    }

    fn v(s: &str) -> Version {
        Version::parse(s).unwrap()
    }

    #[test]
    fn goreleaser_names_parse_and_print_back() {
        for name in [
            "terraform-provider-null_2.1.2_linux_amd64.zip",
            "terraform-provider-google-beta_5.0.0-rc.1_darwin_arm64.zip",
            "terraform-provider-null_2.1.2_SHA256SUMS",
            "terraform-provider-null_2.1.2_SHA256SUMS.sig",
            "terraform-provider-null_2.1.2_manifest.json",
        ] {
            let parsed = ReleaseFileName::parse(name).expect(name);
            assert_eq!(parsed.to_string(), name);
        }
        let p =
            ReleaseFileName::parse("terraform-provider-google-beta_5.0.0-rc.1_darwin_arm64.zip")
                .unwrap();
        assert_eq!(p.provider_type, "google-beta");
        assert_eq!(p.version, "5.0.0-rc.1");
        assert_eq!(
            p.file,
            ReleaseFile::Package(Platform::parse("darwin", "arm64").unwrap())
        );
        for not_ours in [
            "terraform-provider-null_2.1.2_linux.zip",
            "terraform-provider-null_2.1.2_Linux_amd64.zip",
            "terraform-provider-null_2.1.2_linux_amd64.tar.gz",
            "terraform-provider-null_2.1.2",
            "terraform-provider-_2.1.2_SHA256SUMS",
            "null_2.1.2_SHA256SUMS",
            "index.json",
        ] {
            assert!(ReleaseFileName::parse(not_ours).is_none(), "{not_ours}");
        }
    }

    #[test]
    fn goreleaser_names_are_sorted_into_roles() {
        let files = [
            decl("terraform-provider-null_2.1.2_linux_amd64.zip", "a"),
            decl("terraform-provider-null_2.1.2_darwin_arm64.zip", "b"),
            decl("terraform-provider-null_2.1.2_SHA256SUMS", "c"),
            decl("terraform-provider-null_2.1.2_SHA256SUMS.sig", "d"),
            decl("terraform-provider-null_2.1.2_manifest.json", "e"),
        ];
        let f = provider_files("null", &v("2.1.2"), &files, true, 1000).unwrap();
        assert_eq!(f.zips.len(), 2);
        assert_eq!(f.zips[0].0.to_string(), "darwin_arm64");
        assert!(f.shasums.is_some() && f.signature.is_some() && f.manifest.is_some());
    }

    #[test]
    fn wrong_names_versions_and_missing_files_are_refused() {
        let sums = decl("terraform-provider-null_2.1.2_SHA256SUMS", "c");
        let sig = decl("terraform-provider-null_2.1.2_SHA256SUMS.sig", "d");
        let zip = decl("terraform-provider-null_2.1.2_linux_amd64.zip", "a");
        let cases: Vec<(Vec<FileDecl>, &str)> = vec![
            (
                vec![
                    decl("terraform-provider-null_2.1.3_linux_amd64.zip", "a"),
                    sums.clone(),
                    sig.clone(),
                ],
                "does not belong",
            ),
            (
                vec![
                    decl("terraform-provider-other_2.1.2_linux_amd64.zip", "a"),
                    sums.clone(),
                    sig.clone(),
                ],
                "does not belong",
            ),
            (
                vec![
                    decl("terraform-provider-null_2.1.2_linux.zip", "a"),
                    sums.clone(),
                    sig.clone(),
                ],
                "expected",
            ),
            (
                vec![
                    decl("terraform-provider-null_2.1.2_Linux_amd64.zip", "a"),
                    sums.clone(),
                    sig.clone(),
                ],
                "expected",
            ),
            (vec![zip.clone(), sig.clone()], "SHA256SUMS is missing"),
            (vec![zip.clone(), sums.clone()], "gpg --detach-sign"),
            (vec![sums.clone(), sig.clone()], "no provider packages"),
            (
                vec![zip.clone(), zip.clone(), sums.clone(), sig.clone()],
                "twice",
            ),
            (
                vec![
                    FileDecl {
                        sha256: "XYZ".into(),
                        ..zip.clone()
                    },
                    sums.clone(),
                    sig.clone(),
                ],
                "64 lowercase hex",
            ),
            (
                vec![
                    FileDecl {
                        name: "../../x.zip".into(),
                        ..zip.clone()
                    },
                    sums.clone(),
                    sig.clone(),
                ],
                "invalid file name",
            ),
        ];
        for (files, want) in cases {
            let err = provider_files("null", &v("2.1.2"), &files, true, 1000)
                .unwrap_err()
                .to_string();
            assert!(err.contains(want), "{err} should contain {want}");
        }
        let big = FileDecl {
            size: 1001,
            ..zip.clone()
        };
        assert!(
            provider_files("null", &v("2.1.2"), &[big, sums, sig], true, 1000)
                .unwrap_err()
                .is_too_large()
        );
        assert!(provider_files("null", &v("2.1.2"), &[zip], false, 1000).is_ok());
    }

    #[test]
    fn shasums_are_parsed_strictly_and_checked() {
        let a = "a".repeat(64);
        let text = format!(
            "{a}  terraform-provider-null_2.1.2_linux_amd64.zip\n{a}  terraform-provider-null_2.1.2_manifest.json\n"
        );
        let sums = parse_shasums(text.as_bytes()).unwrap();
        assert_eq!(sums.len(), 2);
        for bad in [
            "",
            "\n",
            "xyz  file\n",
            &format!("{a} file\n"),
            &format!("{a}  f\n\n{a}  g\n"),
        ] {
            assert!(parse_shasums(bad.as_bytes()).is_err(), "{bad:?}");
        }
        let zip = |sha: &str| {
            (
                Platform::parse("linux", "amd64").unwrap(),
                FileDecl {
                    name: "terraform-provider-null_2.1.2_linux_amd64.zip".into(),
                    size: 1,
                    sha256: sha.into(),
                },
            )
        };
        assert!(check_against_shasums(&sums, &[zip(&a)], "null", &v("2.1.2")).is_ok());
        let err =
            check_against_shasums(&sums, &[zip(&"b".repeat(64))], "null", &v("2.1.2")).unwrap_err();
        assert!(err.to_string().contains("SHA256SUMS says"));
        let more = parse_shasums(
            format!("{text}{a}  terraform-provider-null_2.1.2_windows_amd64.zip\n").as_bytes(),
        )
        .unwrap();
        assert!(
            check_against_shasums(&more, &[zip(&a)], "null", &v("2.1.2"))
                .unwrap_err()
                .to_string()
                .contains("not uploaded")
        );
    }

    #[test]
    fn protocols_and_manifest() {
        assert!(check_protocols(&["5.0".into()]).is_ok());
        assert!(check_protocols(&["6.0".into(), "5.2".into()]).is_ok());
        assert!(check_protocols(&["4.0".into()]).is_err());
        assert!(check_protocols(&["five".into()]).is_err());
        assert!(check_protocols(&[]).is_err());
        assert_eq!(
            manifest_protocols(br#"{"version":1,"metadata":{"protocol_versions":["6.0"]}}"#)
                .unwrap(),
            Some(vec!["6.0".to_string()])
        );
        assert_eq!(manifest_protocols(br#"{"version":1}"#).unwrap(), None);
        assert!(manifest_protocols(b"nope").is_err());
    }

    #[test]
    fn a_manifest_refusal_does_not_quote_the_manifest() {
        // Found by the property tests: a 1 MiB string where a list belongs came
        // back whole in the 400.
        let long = "x".repeat(100_000);
        for manifest in [
            format!(r#"{{"metadata":{{"protocol_versions":"{long}"}}}}"#),
            format!(r#"{{"metadata":{{"protocol_versions":[{{"{long}":1}}]}}}}"#),
        ] {
            let err = manifest_protocols(manifest.as_bytes())
                .unwrap_err()
                .to_string();
            assert!(
                err.starts_with(
                    "manifest.json is not valid: not a release manifest (line 1, column "
                ) && err.len() < 100,
                "{err:.200}"
            );
        }
        assert_eq!(
            manifest_protocols(b"{").unwrap_err().to_string(),
            "manifest.json is not valid: not JSON (line 1, column 1)"
        );
    }
}
