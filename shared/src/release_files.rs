//! Pure checks of what a publisher uploads: goreleaser file names, SHA256SUMS,
//! the release manifest and plugin protocol versions.

use std::collections::{BTreeMap, BTreeSet};

use crate::address::Platform;
use crate::error::Error;
use crate::protocol::FileDecl;
use crate::version::Version;

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

/// Check one declared file: a well-formed sha256 and a size within `max_size`.
pub fn check_decl(f: &FileDecl, max_size: u64) -> Result<(), Error> {
    if f.sha256.len() != 64
        || !f
            .sha256
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return Err(Error::bad(format!(
            "{}: sha256 must be 64 lowercase hex characters",
            f.name
        )));
    }
    if f.size > max_size {
        return Err(Error::PayloadTooLarge(format!(
            "{} is larger than {max_size} bytes",
            f.name
        )));
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
) -> Result<ProviderFiles, Error> {
    if files.len() > MAX_FILES {
        return Err(Error::bad(format!("too many files (at most {MAX_FILES})")));
    }
    let base = format!("terraform-provider-{provider_type}_{version}");
    let mut out = ProviderFiles {
        zips: Vec::new(),
        shasums: None,
        signature: None,
        manifest: None,
    };
    let mut seen = BTreeSet::new();
    for f in files {
        check_decl(f, max_size)?;
        if !seen.insert(f.name.as_str()) {
            return Err(Error::bad(format!("{} is listed twice", f.name)));
        }
        let rest = f.name.strip_prefix(&base).and_then(|r| r.strip_prefix('_'));
        let slot = match rest {
            Some("SHA256SUMS") if signed => &mut out.shasums,
            Some("SHA256SUMS.sig") if signed => &mut out.signature,
            Some("manifest.json") if signed => &mut out.manifest,
            Some(r) if r.ends_with(".zip") => {
                let platform = r[..r.len() - 4]
                    .split_once('_')
                    .ok_or(())
                    .and_then(|(os, arch)| Platform::parse(os, arch).map_err(|_| ()))
                    .map_err(|_| {
                        Error::bad(format!("{}: expected {base}_<os>_<arch>.zip", f.name))
                    })?;
                out.zips.push((platform, f.clone()));
                continue;
            }
            _ => {
                let expected = if signed {
                    format!(
                        "{base}_<os>_<arch>.zip, {base}_SHA256SUMS, {base}_SHA256SUMS.sig or {base}_manifest.json"
                    )
                } else {
                    format!("{base}_<os>_<arch>.zip")
                };
                return Err(Error::bad(format!(
                    "{} does not belong to this release: expected {expected}",
                    f.name
                )));
            }
        };
        *slot = Some(f.clone());
    }
    if out.zips.is_empty() {
        return Err(Error::bad(format!(
            "no provider packages: expected at least one {base}_<os>_<arch>.zip"
        )));
    }
    if signed && out.shasums.is_none() {
        return Err(Error::bad(format!("{base}_SHA256SUMS is missing")));
    }
    if signed && out.signature.is_none() {
        return Err(Error::bad(format!(
            "{base}_SHA256SUMS.sig is missing: sign SHA256SUMS with gpg --detach-sign"
        )));
    }
    out.zips.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// Parse a SHA256SUMS file: `<64 hex>  <filename>` per line, no blank lines.
pub fn parse_shasums(text: &[u8]) -> Result<BTreeMap<String, String>, Error> {
    let text = std::str::from_utf8(text).map_err(|_| Error::bad("SHA256SUMS is not UTF-8 text"))?;
    let mut sums = BTreeMap::new();
    for (n, line) in text.lines().enumerate() {
        let bad = || {
            Error::bad(format!(
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
            return Err(Error::bad(format!("SHA256SUMS lists {name} twice")));
        }
    }
    if sums.is_empty() {
        return Err(Error::bad("SHA256SUMS is empty"));
    }
    Ok(sums)
}

/// Check every zip against SHA256SUMS, and that SHA256SUMS lists no package left out.
pub fn check_against_shasums(
    sums: &BTreeMap<String, String>,
    zips: &[(Platform, FileDecl)],
    provider_type: &str,
    version: &Version,
) -> Result<(), Error> {
    for (_, zip) in zips {
        match sums.get(&zip.name) {
            None => {
                return Err(Error::bad(format!(
                    "SHA256SUMS has no line for {}",
                    zip.name
                )));
            }
            Some(h) if *h != zip.sha256 => {
                return Err(Error::bad(format!(
                    "{}: its sha256 is {} but SHA256SUMS says {h}",
                    zip.name, zip.sha256
                )));
            }
            Some(_) => {}
        }
    }
    let prefix = format!("terraform-provider-{provider_type}_{version}_");
    let uploaded: BTreeSet<&str> = zips.iter().map(|(_, z)| z.name.as_str()).collect();
    if let Some(missing) = sums.keys().find(|name| {
        name.starts_with(&prefix) && name.ends_with(".zip") && !uploaded.contains(name.as_str())
    }) {
        return Err(Error::bad(format!(
            "SHA256SUMS lists {missing}, which was not uploaded"
        )));
    }
    Ok(())
}

/// Check plugin protocol versions: `major.minor`, and at least one that Terraform (>=5, <7) speaks.
pub fn check_protocols(protocols: &[String]) -> Result<Vec<String>, Error> {
    if protocols.is_empty() || protocols.len() > 10 {
        return Err(Error::bad(
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
            return Err(Error::bad(format!(
                "invalid protocol version {p:?}: expected e.g. 5.0 or 6.0"
            )));
        };
        majors.push(major);
    }
    if !majors.iter().any(|m| (5..7).contains(m)) {
        return Err(Error::bad(format!(
            "protocols {protocols:?} include none that Terraform 0.13+ speaks (5.x or 6.x)"
        )));
    }
    Ok(protocols.to_vec())
}

/// Read `protocol_versions` from a goreleaser release manifest
/// (`{"version": 1, "metadata": {"protocol_versions": ["5.0"]}}`).
pub fn manifest_protocols(manifest: &[u8]) -> Result<Option<Vec<String>>, Error> {
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
    let m: Manifest = serde_json::from_slice(manifest)
        .map_err(|e| Error::bad(format!("manifest.json is not valid: {e}")))?;
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
        assert_eq!(
            provider_files("null", &v("2.1.2"), &[big, sums, sig], true, 1000)
                .unwrap_err()
                .status()
                .as_u16(),
            413
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
}
