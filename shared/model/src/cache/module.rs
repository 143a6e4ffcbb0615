//! What the pull-through cache keeps of an upstream's module versions
//! (issue 22, plan §4): where each version's source is, pinned once
//! (a git ref resolved to its commit, an https archive's URL), and the
//! archive of ours made from it once fetched. A source the cache does not
//! fetch (another protocol, a host not in `module_hosts`, a submodule or a
//! symlink in the tree) is passed through: an online upstream answers it as
//! the origin gave it, a sealed one never.

use serde::{Deserialize, Serialize};

/// One module version of an upstream, as the cache resolved it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CachedModuleRelease {
    pub version: String,
    /// The origin's source for it, as the origin answered.
    pub origin_source: String,
    pub source: ModuleOrigin,
    pub resolved_at: u64,
    /// Our archive of it, stored before this record is made (none for a
    /// source passed through).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stored: Option<StoredModule>,
}

/// Where a cached module version comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ModuleOrigin {
    /// A git repository over https; `commit` is what `reference` named when
    /// first resolved (a tag that moves later changes nothing here).
    Git {
        repo: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reference: Option<String>,
        commit: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        subdir: Option<String>,
    },
    /// An archive over https, kept byte for byte.
    Archive {
        url: String,
        format: ModuleArchiveFormat,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        subdir: Option<String>,
    },
    /// Not fetched by the cache, and why.
    PassThrough { why: String },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ModuleArchiveFormat {
    TarGz,
    Zip,
}

impl ModuleArchiveFormat {
    /// The name the cache stores an archive of content `sha256` under.
    pub fn file_name(self, sha256: &str) -> String {
        match self {
            ModuleArchiveFormat::TarGz => format!("{sha256}.tar.gz"),
            ModuleArchiveFormat::Zip => format!("{sha256}.zip"),
        }
    }
}

/// Query parameters of a module source that are no secret (go-getter's
/// ref, depth and archive type); any other value is hidden.
const PLAIN_PARAMS: &[&str] = &["ref", "rev", "depth", "archive"];

/// A module source as the page shows it: the origin's text, but for what
/// may be a credential in it: a URL's user and password (`https://user:
/// token@host/...`) and the values of query parameters other than
/// [`PLAIN_PARAMS`] (`sshkey=`, an S3 signature, `aws_access_key_secret=`).
/// An origin's signed archive URL is one (issue 35: `tfreg cache list` and
/// `GET /v1/admin/cache` printed it whole): hidden in every view.
pub fn shown_source(source: &str) -> String {
    let (head, query) = match source.split_once('?') {
        Some((head, query)) => (head, Some(query)),
        None => (source, None),
    };
    let mut shown = match head.split_once("://") {
        Some((scheme, rest)) => {
            let authority_end = rest.find('/').unwrap_or(rest.len());
            let (authority, path) = rest.split_at(authority_end);
            match authority.rsplit_once('@') {
                Some((_, host)) => format!("{scheme}://***@{host}{path}"),
                None => head.to_string(),
            }
        }
        None => head.to_string(),
    };
    if let Some(query) = query {
        let params: Vec<String> = query
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((key, _)) if !PLAIN_PARAMS.contains(&key) => format!("{key}=***"),
                _ => pair.to_string(),
            })
            .collect();
        shown.push('?');
        shown.push_str(&params.join("&"));
    }
    shown
}

/// Our archive of a module version, once stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredModule {
    pub sha256: String,
    pub size: u64,
    pub stored_at: u64,
}

impl CachedModuleRelease {
    /// What `tfreg cache list` shows of it.
    pub fn info(&self) -> super::CachedModuleVersionInfo {
        super::CachedModuleVersionInfo {
            version: self.version.clone(),
            source: shown_source(&self.origin_source),
            commit: match &self.source {
                ModuleOrigin::Git { commit, .. } => Some(commit.clone()),
                _ => None,
            },
            stored: self.stored.is_some(),
            passed_through: match &self.source {
                ModuleOrigin::PassThrough { why } => Some(why.clone()),
                _ => None,
            },
        }
    }

    /// The format of our archive of it, or `None` for a source passed through.
    pub fn format(&self) -> Option<ModuleArchiveFormat> {
        match &self.source {
            ModuleOrigin::Git { .. } => Some(ModuleArchiveFormat::TarGz),
            ModuleOrigin::Archive { format, .. } => Some(*format),
            ModuleOrigin::PassThrough { .. } => None,
        }
    }

    /// The name of our archive of it once stored: its sha256 and the
    /// suffix that tells go-getter how to unpack it.
    pub fn file_name(&self) -> Option<String> {
        let stored = self.stored.as_ref()?;
        Some(self.format()?.file_name(&stored.sha256))
    }

    /// The directory inside the archive the origin's source named (`//sub`).
    pub fn subdir(&self) -> Option<&str> {
        match &self.source {
            ModuleOrigin::Git { subdir, .. } | ModuleOrigin::Archive { subdir, .. } => {
                subdir.as_deref()
            }
            ModuleOrigin::PassThrough { .. } => None,
        }
    }

    /// What the module download answers in `X-Terraform-Get`: our archive's
    /// URL with the origin's `//sub` (go-getter splits it off before the
    /// query), or the origin's source when passed through.
    pub fn location(&self, archive_url: Option<&str>) -> Option<String> {
        match (&self.source, archive_url) {
            (ModuleOrigin::PassThrough { .. }, _) => Some(self.origin_source.clone()),
            (_, None) => None,
            (_, Some(url)) => Some(match self.subdir() {
                None => url.to_string(),
                Some(sub) => match url.split_once('?') {
                    Some((path, query)) => format!("{path}//{sub}?{query}"),
                    None => format!("{url}//{sub}"),
                },
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn release(source: ModuleOrigin) -> CachedModuleRelease {
        CachedModuleRelease {
            version: "1.0.0".into(),
            origin_source: "git::https://github.com/o/r?ref=v1.0.0".into(),
            source,
            resolved_at: 1,
            stored: Some(StoredModule {
                sha256: "ab".repeat(32),
                size: 1,
                stored_at: 1,
            }),
        }
    }

    /// Issue 35: `tfreg cache list` and `GET /v1/admin/cache` printed a
    /// cached module's source as the origin's whole signed URL.
    #[test]
    fn a_listed_source_hides_its_signature() {
        let mut r = release(ModuleOrigin::Archive {
            url: "https://origin.example.test/v1/blobs/x.tar.gz".into(),
            format: ModuleArchiveFormat::TarGz,
            subdir: None,
        });
        r.origin_source =
            "https://origin.example.test/v1/blobs/x.tar.gz?expires=9&signature=c2VjcmV0".into();
        assert_eq!(
            r.info().source,
            "https://origin.example.test/v1/blobs/x.tar.gz?expires=***&signature=***"
        );
        r.origin_source = "git::https://u:tok@github.com/o/r?ref=v1.0.0".into();
        assert_eq!(
            r.info().source,
            "git::https://***@github.com/o/r?ref=v1.0.0"
        );
    }

    #[test]
    fn the_location_keeps_the_subdir_before_the_query() {
        let git = release(ModuleOrigin::Git {
            repo: "https://github.com/o/r".into(),
            reference: Some("v1.0.0".into()),
            commit: "a".repeat(40),
            subdir: Some("modules/vpc".into()),
        });
        assert_eq!(git.file_name(), Some(format!("{}.tar.gz", "ab".repeat(32))));
        assert_eq!(
            git.location(Some("https://r.example/v1/blobs/k/module.tar.gz?sig=1"))
                .as_deref(),
            Some("https://r.example/v1/blobs/k/module.tar.gz//modules/vpc?sig=1")
        );
        assert_eq!(git.location(None), None);
        let zip = release(ModuleOrigin::Archive {
            url: "https://h/m.zip".into(),
            format: ModuleArchiveFormat::Zip,
            subdir: None,
        });
        assert_eq!(zip.file_name(), Some(format!("{}.zip", "ab".repeat(32))));
        assert_eq!(zip.location(Some("u")).as_deref(), Some("u"));
        let mut passed = release(ModuleOrigin::PassThrough { why: "s3".into() });
        passed.stored = None;
        assert_eq!(passed.file_name(), None);
        assert_eq!(
            passed.location(None).as_deref(),
            Some("git::https://github.com/o/r?ref=v1.0.0")
        );
        let json = serde_json::to_string(&git).unwrap();
        assert_eq!(
            serde_json::from_str::<CachedModuleRelease>(&json).unwrap(),
            git
        );
    }
}
