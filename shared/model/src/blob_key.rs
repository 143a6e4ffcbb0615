//! Blob store keys: the one place that knows how archive objects are named.
//!
//! | object | key |
//! |---|---|
//! | an upload slot of a publish in progress | `uploads/<upload id>/<file name>` |
//! | a published file | `archives/<upload id>/<file name>` |
//! | a file the cache keeps from an upstream | `cache/<host>/p/<ns>/<type>/<sha256>/<file name>` |
//!
//! A published file's key names the upload that published it, so no two
//! publishes ever share or overwrite an object: a release owns its files, and
//! the release item holds each file's sha256. (Keys stay short: S3 allows 1 KB,
//! but the S3 emulator the tests use keeps a file named after each key.) Keys are valid by
//! construction — `/`-separated segments of ASCII letters, digits, `.`, `_` and
//! `-`, none empty, `.` or `..` — so no key can escape a directory store's root.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Prefix of upload slots: the only keys a client may write.
pub const UPLOADS: &str = "uploads/";
/// Prefix of published files.
pub const ARCHIVES: &str = "archives/";
/// Prefix of files the pull-through cache keeps (never written by a publish).
pub const CACHE: &str = "cache/";

/// Longest key accepted.
pub const MAX_KEY_LEN: usize = 512;
/// Longest file name a publisher may declare.
pub const MAX_FILE_NAME_LEN: usize = 128;

/// Why a key or file name was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("malformed archive path")]
    Malformed,
    #[error(
        "invalid file name {0:?}: use 1 to {MAX_FILE_NAME_LEN} letters, digits, '.', '_' or '-', not starting with '.'"
    )]
    FileName(String),
    #[error("malformed upload id")]
    UploadId,
}

fn is_key_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')
}

/// A file name as a publisher declares it: one safe key segment.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FileName(String);

impl FileName {
    pub fn parse(s: &str) -> Result<Self, KeyError> {
        let ok = !s.is_empty()
            && s.len() <= MAX_FILE_NAME_LEN
            && !s.starts_with('.')
            && s.chars().all(is_key_char);
        if ok {
            Ok(FileName(s.to_string()))
        } else {
            // Bounded, so a 10 KB name does not come back in the error.
            Err(KeyError::FileName(s.chars().take(80).collect()))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for FileName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The id of one publish: 32 lowercase hex digits of randomness.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct UploadId(String);

impl UploadId {
    /// A fresh random id.
    pub fn random() -> Self {
        UploadId(format!("{:032x}", rand::random::<u128>()))
    }

    pub fn parse(s: &str) -> Result<Self, KeyError> {
        if s.len() == 32
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            Ok(UploadId(s.to_string()))
        } else {
            Err(KeyError::UploadId)
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for UploadId {
    type Error = KeyError;
    fn try_from(s: String) -> Result<Self, KeyError> {
        UploadId::parse(&s)
    }
}

impl From<UploadId> for String {
    fn from(id: UploadId) -> String {
        id.0
    }
}

impl fmt::Display for UploadId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What a cached file's key names ([`BlobKey::cached_parts`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachedParts<'a> {
    pub host: String,
    pub namespace: &'a str,
    pub provider_type: &'a str,
    pub sha256: &'a str,
    pub file: &'a str,
}

/// A blob store key under [`UPLOADS`], [`ARCHIVES`] or [`CACHE`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct BlobKey(String);

impl BlobKey {
    /// Check a key read from a URL or a stored item.
    pub fn parse(s: &str) -> Result<Self, KeyError> {
        let safe = !s.is_empty()
            && s.len() <= MAX_KEY_LEN
            && s.split('/').all(|seg| {
                !seg.is_empty() && seg != "." && seg != ".." && seg.chars().all(is_key_char)
            });
        if safe && (s.starts_with(UPLOADS) || s.starts_with(ARCHIVES) || s.starts_with(CACHE)) {
            Ok(BlobKey(s.to_string()))
        } else {
            Err(KeyError::Malformed)
        }
    }

    /// The slot a publisher uploads `name` into.
    pub fn upload(id: &UploadId, name: &FileName) -> Self {
        BlobKey(format!("{UPLOADS}{id}/{name}"))
    }

    /// Where a verified file of the publish `id` is kept once published.
    pub fn archive(id: &UploadId, name: &FileName) -> Self {
        BlobKey(format!("{ARCHIVES}{id}/{name}"))
    }

    /// Where the cache keeps a provider's file `name` whose sha256 (hex) is
    /// `sha256`, from upstream `host`: per upstream and per content, so
    /// two upstreams never share an object and a file is never replaced.
    /// `name` must be one safe segment ([`FileName::parse`]); a port in the
    /// host is written `_PORT` (a hostname has no `_`).
    pub fn cached(
        host: &str,
        namespace: &str,
        provider_type: &str,
        sha256: &str,
        name: &FileName,
    ) -> Result<Self, KeyError> {
        let host = host.replace(':', "_");
        BlobKey::parse(&format!(
            "{CACHE}{host}/p/{namespace}/{provider_type}/{sha256}/{name}"
        ))
    }

    /// Where the cache keeps its archive of a module version from upstream
    /// `host`: per upstream, version and content (`file` names its sha256;
    /// the blob store creates only, so nothing is ever replaced).
    pub fn cached_module(
        host: &str,
        namespace: &str,
        name: &str,
        system: &str,
        version: &str,
        file: &FileName,
    ) -> Result<Self, KeyError> {
        let host = host.replace(':', "_");
        BlobKey::parse(&format!(
            "{CACHE}{host}/m/{namespace}/{name}/{system}/{version}/{file}"
        ))
    }

    /// True for a file the cache keeps.
    pub fn is_cached(&self) -> bool {
        self.0.starts_with(CACHE)
    }

    /// The parts of a key [`BlobKey::cached`] made (its host with its port
    /// again), or `None` for another key.
    pub fn cached_parts(&self) -> Option<CachedParts<'_>> {
        let rest = self.0.strip_prefix(CACHE)?;
        let parts: Vec<&str> = rest.split('/').collect();
        let [host, "p", namespace, provider_type, sha256, file] = parts[..] else {
            return None;
        };
        Some(CachedParts {
            host: host.replace('_', ":"),
            namespace,
            provider_type,
            sha256,
            file,
        })
    }

    /// True for an upload slot.
    pub fn is_upload(&self) -> bool {
        self.0.starts_with(UPLOADS)
    }

    /// The last segment: the file name.
    pub fn file_name(&self) -> &str {
        self.0.rsplit('/').next().unwrap_or_default()
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The media type the file is served as: never one a browser would run
    /// or render as a page.
    pub fn content_type(&self) -> &'static str {
        let name = self.file_name();
        if name.ends_with(".zip") {
            "application/zip"
        } else if name.ends_with(".tar.gz") || name.ends_with(".tgz") {
            "application/gzip"
        } else if name.ends_with("_SHA256SUMS") || name == "SHA256SUMS" || name.ends_with(".json") {
            "text/plain; charset=utf-8"
        } else {
            "application/octet-stream"
        }
    }

    /// `attachment; filename="<file name>"`: a download, never a page (the
    /// name is one safe segment: no quote or backslash to escape).
    pub fn content_disposition(&self) -> String {
        format!("attachment; filename=\"{}\"", self.file_name())
    }
}

impl TryFrom<String> for BlobKey {
    type Error = KeyError;
    fn try_from(s: String) -> Result<Self, KeyError> {
        BlobKey::parse(&s)
    }
}

impl From<BlobKey> for String {
    fn from(k: BlobKey) -> String {
        k.0
    }
}

impl fmt::Display for BlobKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cached_files_are_kept_per_upstream_and_content() {
        let name = FileName::parse("terraform-provider-null_3.2.0_linux_amd64.zip").unwrap();
        let sha = "ab".repeat(32);
        let key =
            BlobKey::cached("registry.terraform.io", "hashicorp", "null", &sha, &name).unwrap();
        assert_eq!(
            key.as_str(),
            format!("cache/registry.terraform.io/p/hashicorp/null/{sha}/{name}")
        );
        assert!(key.is_cached() && !key.is_upload());
        assert_eq!(BlobKey::parse(key.as_str()).unwrap(), key);
        let port = BlobKey::cached("registry.example.test:8443", "h", "n", &sha, &name).unwrap();
        assert!(
            port.as_str()
                .starts_with("cache/registry.example.test_8443/")
        );
        // Read back: the parts it was made of, the port restored.
        assert_eq!(
            port.cached_parts(),
            Some(CachedParts {
                host: "registry.example.test:8443".into(),
                namespace: "h",
                provider_type: "n",
                sha256: &sha,
                file: name.as_str(),
            })
        );
        assert_eq!(
            BlobKey::parse("archives/ab/x.zip").unwrap().cached_parts(),
            None
        );
        assert_eq!(
            BlobKey::parse("cache/h/p/a/b/x.zip")
                .unwrap()
                .cached_parts(),
            None
        );
        assert_ne!(
            BlobKey::cached("other.example.com", "hashicorp", "null", &sha, &name).unwrap(),
            key,
            "another upstream, another object"
        );
        let sums = FileName::parse("SHA256SUMS").unwrap();
        let sums =
            BlobKey::cached("registry.terraform.io", "hashicorp", "null", &sha, &sums).unwrap();
        assert_eq!(sums.content_type(), "text/plain; charset=utf-8");
        assert!(BlobKey::cached("h..x", "a", "b", &sha, &name).is_ok());
        let file = FileName::parse("module.tar.gz").unwrap();
        let module = BlobKey::cached_module(
            "registry.example.test:8443",
            "ns",
            "vpc",
            "aws",
            "1.0.0",
            &file,
        )
        .unwrap();
        assert_eq!(
            module.as_str(),
            "cache/registry.example.test_8443/m/ns/vpc/aws/1.0.0/module.tar.gz"
        );
        assert_eq!(module.cached_parts(), None);
        assert!(BlobKey::cached_module("h", "..", "b", "c", "1.0.0", &file).is_err());
        assert!(BlobKey::cached("h", "..", "b", &sha, &name).is_err());
    }

    #[test]
    fn files_are_served_as_attachments_of_their_type() {
        let served = |key: &str| {
            let key = BlobKey::parse(key).unwrap();
            (key.content_type(), key.content_disposition())
        };
        assert_eq!(
            served("archives/ab12/terraform-provider-null_2.1.2_linux_amd64.zip"),
            (
                "application/zip",
                r#"attachment; filename="terraform-provider-null_2.1.2_linux_amd64.zip""#.into()
            )
        );
        assert_eq!(served("archives/ab12/m.tar.gz").0, "application/gzip");
        assert_eq!(
            served("archives/ab12/terraform-provider-null_2.1.2_SHA256SUMS").0,
            "text/plain; charset=utf-8"
        );
        assert_eq!(
            served("archives/ab12/terraform-provider-null_2.1.2_SHA256SUMS.sig"),
            (
                "application/octet-stream",
                r#"attachment; filename="terraform-provider-null_2.1.2_SHA256SUMS.sig""#.into()
            )
        );
    }

    #[test]
    fn keys_cannot_escape_or_leave_their_prefixes() {
        for good in [
            "archives/ab12/terraform-provider-null_2.1.2_linux_amd64.zip",
            "uploads/0123456789abcdef0123456789abcdef/m.tar.gz",
        ] {
            assert_eq!(BlobKey::parse(good).unwrap().as_str(), good);
        }
        for bad in [
            "",
            "/etc/passwd",
            "archives/../b",
            "archives/a/../../b",
            "..",
            "archives//b",
            "archives/./b",
            "archives/a\\b",
            "archives/a b",
            "archives/%2e%2e",
            "registry.db",
            "tls/ca.key",
            "archives",
        ] {
            assert!(BlobKey::parse(bad).is_err(), "{bad:?} must be refused");
        }
        assert!(BlobKey::parse(&format!("archives/{}", "a".repeat(600))).is_err());
    }

    #[test]
    fn file_names_are_one_safe_segment() {
        for good in ["m.tar.gz", "terraform-provider-null_2.1.2_linux_amd64.zip"] {
            assert!(FileName::parse(good).is_ok());
        }
        let long = "x".repeat(10_000);
        for bad in [
            "",
            "../../x.tar.gz",
            "a/b.zip",
            "line\nbreak.tar.gz",
            ".hidden.tar.gz",
            "..",
            long.as_str(),
        ] {
            let err = FileName::parse(bad).unwrap_err().to_string();
            assert!(err.len() < 250, "short message: {err}");
        }
    }

    #[test]
    fn constructed_keys_parse_back_and_name_their_parts() {
        let id = UploadId::random();
        let name = FileName::parse("x_1.0.0_linux_amd64.zip").unwrap();
        let upload = BlobKey::upload(&id, &name);
        assert!(upload.is_upload());
        assert_eq!(BlobKey::parse(upload.as_str()).unwrap(), upload);
        let archive = BlobKey::archive(&id, &name);
        assert!(!archive.is_upload());
        assert_eq!(BlobKey::parse(archive.as_str()).unwrap(), archive);
        assert_eq!(archive.file_name(), "x_1.0.0_linux_amd64.zip");
        assert_eq!(
            archive.as_str(),
            format!("archives/{id}/x_1.0.0_linux_amd64.zip")
        );
        assert!(UploadId::parse("ABCDEF0123456789abcdef0123456789").is_err());
        assert!(UploadId::parse(id.as_str()).is_ok());
    }
}
