//! `tfreg export` and `tfreg import` (issue 39): a registry to a directory
//! and back, across backends (a laptop's `tfreg serve` to a stack).
//!
//! The directory: `manifest.json` (the format, when, the sha256 of
//! `items.jsonl`, and every file's key, sha256 and size), `items.jsonl`
//! (one item a line: its keys, its data in base64, its times and counter)
//! and `files/<key>` (each archive a release refers to, as stored).
//!
//! What is carried: releases (own, mirrored, modules) with their files and
//! docs, signing keys, token hashes, trust policies, group mappings,
//! upstreams, download counts, audit. What is not: this registry's URL
//! signing secret (the new home has its own), what lives only for a moment
//! (publishes in progress, sign-in codes and nonces, leases, signed-out
//! sessions, places), the pull-through cache (refilled from its origins),
//! and the versions indexes and listing, which the import rebuilds from
//! the releases it writes.
//!
//! Import checks everything before it writes anything: `items.jsonl`
//! against the manifest, every file against the manifest and against the
//! release that refers to it, and every item against what the registry
//! already holds (the same item is merged; a different one under the same
//! keys is a conflict: refused, nothing written, nothing overwritten).
//! Then it writes the files (create-only), then the items (create-only),
//! then the indexes: a killed import has written nothing a client can
//! reach without its files, and run again it goes on where it stopped.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use serde::{Deserialize, Serialize};
use tfreg_model::blob_key::{ARCHIVES, BlobKey};

use super::{Found, references};
use crate::catalog::schema::{
    CACHE_MODULE_PREFIX, CACHE_PREFIX, CACHED_PK, CI_TOKENS_PK, FILLING_PK, INDEX_SK, JTI_PK,
    LISTING_PK, LOGINCODE_PK, NONCE_PK, SECRET_PK, SIGNED_OUT_PK, release_target,
};
use crate::{BlobStore, Condition, Counter, Digest, Item, ItemStore, StoreError, scan_all};

/// The manifest's `format`.
pub const FORMAT: &str = "tfreg-export/1";
const MANIFEST: &str = "manifest.json";
const ITEMS: &str = "items.jsonl";
const FILES: &str = "files";

/// Why an export or import stopped.
#[derive(Debug, thiserror::Error)]
pub enum TransferError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{0}")]
    Format(String),
    #[error(
        "{file} is not what {what} promises (sha256 {expected}; the export has {found}): refused, nothing imported"
    )]
    Tampered {
        file: String,
        what: String,
        expected: String,
        found: String,
    },
    #[error(
        "the registry already holds different items under {} of the export's keys, e.g. {}: refused, nothing imported or overwritten",
        .0.len(),
        .0.iter().take(5).cloned().collect::<Vec<_>>().join(", ")
    )]
    Conflicts(Vec<String>),
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> TransferError + '_ {
    move |source| TransferError::Io {
        path: path.to_path_buf(),
        source,
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Manifest {
    pub format: String,
    pub exported_at: u64,
    /// The exporting registry's hostname, when known: its download counts
    /// are kept under it, and an import under another hostname moves them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    pub items: usize,
    pub items_sha256: String,
    pub files: Vec<ManifestFile>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ManifestFile {
    pub key: BlobKey,
    pub sha256: String,
    pub size: u64,
}

/// One item as `items.jsonl` has it.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Line {
    pk: String,
    sk: String,
    data: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    expires_at: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    touched_at: Option<u64>,
    /// `[n, first_at, last_at]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    counter: Option<[u64; 3]>,
}

impl Line {
    fn of(item: &Item) -> Line {
        Line {
            pk: item.pk.clone(),
            sk: item.sk.clone(),
            data: base64::engine::general_purpose::STANDARD.encode(&item.data),
            expires_at: item.expires_at,
            touched_at: item.touched_at,
            counter: item.counter.map(|c| [c.n, c.first_at, c.last_at]),
        }
    }

    fn item(self) -> Result<Item, TransferError> {
        let data = base64::engine::general_purpose::STANDARD
            .decode(&self.data)
            .map_err(|e| TransferError::Format(format!("{ITEMS}: {} {}: {e}", self.pk, self.sk)))?;
        Ok(Item {
            pk: self.pk,
            sk: self.sk,
            data,
            expires_at: self.expires_at,
            touched_at: self.touched_at,
            counter: self.counter.map(|[n, first_at, last_at]| Counter {
                n,
                first_at,
                last_at,
            }),
        })
    }
}

/// Whether an item is carried (see the module's list).
fn carried(item: &Item, now: u64) -> bool {
    let ephemeral_pks = [
        SECRET_PK,
        LOGINCODE_PK,
        NONCE_PK,
        JTI_PK,
        FILLING_PK,
        SIGNED_OUT_PK,
        CI_TOKENS_PK,
        LISTING_PK,
        CACHED_PK,
    ];
    let ephemeral_prefixes = ["UPLOAD#", "PUBLISHING#", CACHE_PREFIX, CACHE_MODULE_PREFIX];
    !(ephemeral_pks.contains(&item.pk.as_str())
        || ephemeral_prefixes.iter().any(|p| item.pk.starts_with(p))
        || item.sk == INDEX_SK
        || item.expires_at.is_some_and(|t| t <= now))
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    hex::encode(sha2::Sha256::digest(bytes))
}

/// What an export carries: everything when empty. Namespaces and names
/// select what belongs to them (their providers, mirror imports and modules
/// with their files and docs, download counts, and their namespaces'
/// signing keys and trust policies) and leave out what is registry-wide
/// (tokens, group mappings, upstreams, the audit trail); a constraint keeps
/// only the versions meeting it (of releases, docs and download counts).
#[derive(Debug, Clone, Default)]
pub struct Selection {
    pub namespaces: Vec<String>,
    /// Providers as `NAMESPACE/TYPE`, modules as `NAMESPACE/NAME/SYSTEM`.
    pub names: Vec<String>,
    pub constraint: Option<tfreg_model::constraint::Constraints>,
}

impl Selection {
    /// The namespace an item belongs to, or `None` for a registry-wide one.
    fn namespace_of(item: &Item) -> Option<&str> {
        if let Some(name) = Self::name_of(item) {
            return name.split('/').next();
        }
        if let Some(rest) = item.pk.strip_prefix("KEYS#") {
            return Some(rest);
        }
        if item.pk == crate::catalog::schema::TRUST_PK {
            return item.sk.split('#').next();
        }
        None
    }

    /// The provider or module an item is of (without a host).
    fn name_of(item: &Item) -> Option<&str> {
        let pk = item.pk.as_str();
        if let Some(rest) = pk
            .strip_prefix("PROVIDER#")
            .or_else(|| pk.strip_prefix("MODULE#"))
        {
            return Some(rest);
        }
        // HOST/ns/...: the host may hold a port, never a '/'.
        pk.strip_prefix("MIRROR#")
            .or_else(|| pk.strip_prefix("USAGE#"))
            .and_then(|rest| rest.split_once('/'))
            .map(|(_, name)| name)
    }

    /// The version an item is of: a release's, its docs', a count's.
    fn version_of(item: &Item) -> Option<&str> {
        let sk = item.sk.as_str();
        if let Some(v) = sk.strip_prefix(crate::catalog::schema::VERSION_PREFIX) {
            return Some(v);
        }
        Self::name_of(item)?;
        [
            crate::catalog::schema::DOCS_PREFIX,
            crate::catalog::schema::ZIP_PREFIX,
            crate::catalog::schema::USAGE_DAY_PREFIX,
            crate::catalog::schema::USAGE_CONSUMER_PREFIX,
        ]
        .iter()
        .find_map(|p| sk.strip_prefix(p))
        .and_then(|rest| rest.split('#').next())
    }

    fn carries(&self, item: &Item) -> bool {
        let ns = Self::namespace_of(item);
        if !self.namespaces.is_empty()
            && !ns.is_some_and(|ns| self.namespaces.iter().any(|n| n == ns))
        {
            return false;
        }
        if !self.names.is_empty() {
            let wanted = match Self::name_of(item) {
                Some(name) => self.names.iter().any(|n| n == name),
                None => {
                    ns.is_some_and(|ns| self.names.iter().any(|n| n.split('/').next() == Some(ns)))
                }
            };
            if !wanted {
                return false;
            }
        }
        match (&self.constraint, Self::version_of(item)) {
            (Some(c), Some(v)) => {
                tfreg_model::version::Version::parse(v).is_ok_and(|v| c.matches(&v))
            }
            _ => true,
        }
    }
}

/// What an export wrote.
#[derive(Debug, Clone, Serialize)]
pub struct Exported {
    pub items: usize,
    pub files: usize,
    pub bytes: u64,
}

/// Export the registry (whose hostname is `hostname`, when known) into
/// `dir` (created; it must be empty), calling `progress(done, of)` after
/// each file.
pub async fn export(
    items: &dyn ItemStore,
    blobs: &dyn BlobStore,
    dir: &Path,
    select: &Selection,
    (hostname, now): (Option<&str>, u64),
    progress: &(dyn Fn(usize, usize) + Send + Sync),
) -> Result<Exported, TransferError> {
    tokio::fs::create_dir_all(dir).await.map_err(io(dir))?;
    let mut entries = tokio::fs::read_dir(dir).await.map_err(io(dir))?;
    if entries.next_entry().await.map_err(io(dir))?.is_some() {
        return Err(TransferError::Format(format!(
            "{} is not empty: export into a new directory",
            dir.display()
        )));
    }
    let all: Vec<Item> = scan_all(items)
        .await?
        .into_iter()
        .filter(|i| select.carries(i))
        .collect();
    let refs = references(&all, now)?;
    let kept: Vec<&Item> = all.iter().filter(|i| carried(i, now)).collect();
    let mut jsonl = Vec::new();
    for item in &kept {
        serde_json::to_writer(&mut jsonl, &Line::of(item))
            .map_err(|e| TransferError::Format(e.to_string()))?;
        jsonl.push(b'\n');
    }
    let path = dir.join(ITEMS);
    tokio::fs::write(&path, &jsonl).await.map_err(io(&path))?;
    let keys: Vec<&BlobKey> = refs
        .files
        .keys()
        .filter(|k| k.as_str().starts_with(ARCHIVES))
        .collect();
    let mut files = Vec::new();
    let mut bytes = 0;
    for (i, key) in keys.iter().enumerate() {
        let claimed = blobs.claim(key, u64::MAX).await?;
        let dest = dir.join(FILES).join(key.as_str());
        if let Some(parent) = dest.parent() {
            tokio::fs::create_dir_all(parent)
                .await
                .map_err(io(parent))?;
        }
        let mut from = claimed.file.try_clone().map_err(io(&dest))?;
        let to_path = dest.clone();
        tokio::task::spawn_blocking(move || {
            let mut to = std::fs::File::create(&to_path)?;
            std::io::copy(&mut from, &mut to)?;
            to.sync_all()
        })
        .await
        .map_err(|e| StoreError::internal(e.to_string()))?
        .map_err(io(&dest))?;
        bytes += claimed.digest.size;
        files.push(ManifestFile {
            key: (*key).clone(),
            sha256: claimed.digest.sha256.clone(),
            size: claimed.digest.size,
        });
        progress(i + 1, keys.len());
    }
    let manifest = Manifest {
        format: FORMAT.into(),
        exported_at: now,
        hostname: hostname.map(String::from),
        items: kept.len(),
        items_sha256: sha256_hex(&jsonl),
        files,
    };
    let path = dir.join(MANIFEST);
    let text =
        serde_json::to_vec_pretty(&manifest).map_err(|e| TransferError::Format(e.to_string()))?;
    // Last: a directory with a manifest is a whole export.
    tokio::fs::write(&path, text).await.map_err(io(&path))?;
    Ok(Exported {
        items: kept.len(),
        files: manifest.files.len(),
        bytes,
    })
}

/// What an import did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Imported {
    pub items_written: usize,
    /// Already there, the same (a merge, or a resumed import).
    pub items_present: usize,
    pub files_written: usize,
    pub files_present: usize,
    /// Versions indexes rebuilt.
    pub reindexed: usize,
}

/// The sha256 and size of a file of the export.
async fn hash_file(path: &Path) -> Result<Digest, TransferError> {
    let p = path.to_path_buf();
    tokio::task::spawn_blocking(move || -> std::io::Result<Digest> {
        use sha2::Digest as _;
        let mut file = std::fs::File::open(&p)?;
        let mut hasher = sha2::Sha256::new();
        let size = std::io::copy(&mut file, &mut hasher)?;
        Ok(Digest {
            size,
            sha256: hex::encode(hasher.finalize()),
        })
    })
    .await
    .map_err(|e| StoreError::internal(e.to_string()))?
    .map_err(io(path))
}

/// Read and check an export: its items, and its files' paths with their
/// digests, or why it cannot be imported.
async fn checked(
    dir: &Path,
    now: u64,
) -> Result<(Manifest, Vec<Item>, Vec<(ManifestFile, PathBuf)>), TransferError> {
    let path = dir.join(MANIFEST);
    let text = tokio::fs::read(&path).await.map_err(io(&path))?;
    let manifest: Manifest = serde_json::from_slice(&text)
        .map_err(|e| TransferError::Format(format!("{}: {e}", path.display())))?;
    if manifest.format != FORMAT {
        return Err(TransferError::Format(format!(
            "{} is format {:?}; this tfreg reads {FORMAT}",
            path.display(),
            manifest.format
        )));
    }
    let path = dir.join(ITEMS);
    let jsonl = tokio::fs::read(&path).await.map_err(io(&path))?;
    let found = sha256_hex(&jsonl);
    if found != manifest.items_sha256 {
        return Err(TransferError::Tampered {
            file: ITEMS.into(),
            what: MANIFEST.into(),
            expected: manifest.items_sha256,
            found,
        });
    }
    let mut items = Vec::new();
    for line in jsonl.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        let line: Line = serde_json::from_slice(line)
            .map_err(|e| TransferError::Format(format!("{ITEMS}: {e}")))?;
        items.push(line.item()?);
    }
    // Every file: the manifest's digest, and the release's promise.
    let refs = references(&items, now)?;
    let mut files = Vec::new();
    for f in manifest.files.clone() {
        let path = dir.join(FILES).join(f.key.as_str());
        let got = hash_file(&path).await?;
        let promised = refs.files.get(&f.key);
        let (expected, what) = match promised {
            Some(p) => (p.sha256.clone(), p.record.clone()),
            None => (f.sha256.clone(), MANIFEST.to_string()),
        };
        if got.sha256 != expected || got.sha256 != f.sha256 || got.size != f.size {
            return Err(TransferError::Tampered {
                file: format!("{FILES}/{}", f.key),
                what,
                expected,
                found: Found::from(got).sha256,
            });
        }
        files.push((f, path));
    }
    Ok((manifest, items, files))
}

/// `item`, its download counts moved from hostname `from` to `to` (each
/// registry keeps its own packages' counts under its hostname).
fn moved(mut item: Item, from: &str, to: &str) -> Item {
    let old = format!("{}{from}/", crate::catalog::schema::USAGE_PREFIX);
    if let Some(rest) = item.pk.strip_prefix(&old) {
        item.pk = format!("{}{to}/{rest}", crate::catalog::schema::USAGE_PREFIX);
    }
    item
}

/// Import the export in `dir` into a registry whose hostname is `hostname`
/// (when known: the download counts of an export made under another one
/// are moved to it), calling `progress(done, of)` after each file and item.
pub async fn import(
    items: &dyn ItemStore,
    blobs: &dyn BlobStore,
    dir: &Path,
    (hostname, now): (Option<&str>, u64),
    progress: &(dyn Fn(usize, usize) + Send + Sync),
) -> Result<Imported, TransferError> {
    let (manifest, exported, files) = checked(dir, now).await?;
    let rename = match (manifest.hostname.as_deref(), hostname) {
        (Some(from), Some(to)) if from != to => Some((from, to)),
        _ => None,
    };
    let exported: Vec<Item> = exported
        .into_iter()
        .filter(|i| carried(i, now))
        .map(|i| match rename {
            Some((from, to)) => moved(i, from, to),
            None => i,
        })
        .collect();
    // What is here already: the same is merged, a different one refused.
    let mut present = BTreeMap::new();
    let mut conflicts = Vec::new();
    for item in &exported {
        if let Some(here) = items.get(&item.pk, &item.sk).await? {
            if here.data == item.data {
                present.insert((item.pk.clone(), item.sk.clone()), ());
            } else {
                conflicts.push(match release_target(&item.pk, &item.sk) {
                    Some(target) => target.to_string(),
                    None => format!("{} {}", item.pk, item.sk),
                });
            }
        }
    }
    if !conflicts.is_empty() {
        return Err(TransferError::Conflicts(conflicts));
    }
    let mut done = Imported::default();
    let total = files.len() + exported.len();
    for (i, (f, path)) in files.iter().enumerate() {
        if store_file(blobs, f, path).await? {
            done.files_written += 1;
        } else {
            done.files_present += 1;
        }
        progress(i + 1, total);
    }
    let mut targets = Vec::new();
    for (i, item) in exported.into_iter().enumerate() {
        if let Some(target) = release_target(&item.pk, &item.sk) {
            targets.push(target);
        }
        let keys = (item.pk.clone(), item.sk.clone());
        match items.put(item, Condition::IfAbsent).await {
            Ok(()) => done.items_written += 1,
            Err(StoreError::ConditionFailed) if present.contains_key(&keys) => {
                done.items_present += 1
            }
            Err(StoreError::ConditionFailed) => {
                return Err(TransferError::Conflicts(vec![format!(
                    "{} {} (written meanwhile)",
                    keys.0, keys.1
                )]));
            }
            Err(e) => return Err(e.into()),
        }
        progress(files.len() + i + 1, total);
    }
    for target in &targets {
        crate::catalog::sync_index(items, target).await?;
        done.reindexed += 1;
    }
    Ok(done)
}

/// Store one checked file at its key: `true` when written, `false` when
/// the same bytes are there already; other bytes there are a conflict.
async fn store_file(
    blobs: &dyn BlobStore,
    f: &ManifestFile,
    path: &Path,
) -> Result<bool, TransferError> {
    let expected = Digest {
        size: f.size,
        sha256: f.sha256.clone(),
    };
    let file = tokio::fs::File::open(path).await.map_err(io(path))?;
    match crate::keep_as(blobs, file, &expected, &f.key).await? {
        crate::Kept::Written => Ok(true),
        crate::Kept::Present => Ok(false),
        crate::Kept::Other(_) => Err(TransferError::Conflicts(vec![format!(
            "{} (other bytes are stored there)",
            f.key
        )])),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(pk: &str, sk: &str) -> Item {
        Item::new(pk, sk, b"{}".to_vec())
    }

    fn carried_by(select: &Selection) -> Vec<String> {
        [
            item("PROVIDER#acme/widget", "VERSION#1.0.0"),
            item("PROVIDER#acme/widget", "VERSION#2.0.0"),
            item("PROVIDER#acme/other", "VERSION#1.0.0"),
            item("MODULE#acme/vpc/aws", "VERSION#1.2.0"),
            item("MODULE#acme/vpc/aws", "DOCS#1.2.0#abc"),
            item("MODULE#beta/vpc/aws", "VERSION#1.0.0"),
            item(
                "USAGE#reg.example.com:8443/acme/widget",
                "DAY#2.0.0#2026-12-01#linux_amd64",
            ),
            item("USAGE#reg.example.com/acme/widget", "CONSUMER#1.0.0#tok"),
            item("MIRROR#other.example.com/acme/widget", "VERSION#1.0.0"),
            item("KEYS#acme", "KEY#AAAA"),
            item("KEYS#beta", "KEY#BBBB"),
            item("TRUST", "acme#policy"),
            item("TOKEN#x", "TOKEN"),
        ]
        .into_iter()
        .filter(|i| select.carries(i))
        .map(|i| format!("{} {}", i.pk, i.sk))
        .collect()
    }

    #[test]
    fn everything_without_a_selection() {
        assert_eq!(carried_by(&Selection::default()).len(), 13);
    }

    #[test]
    fn names_carry_their_packages_and_their_namespaces_keys_and_trust() {
        let select = Selection {
            names: vec!["acme/widget".into()],
            ..Default::default()
        };
        assert_eq!(
            carried_by(&select),
            [
                "PROVIDER#acme/widget VERSION#1.0.0",
                "PROVIDER#acme/widget VERSION#2.0.0",
                "USAGE#reg.example.com:8443/acme/widget DAY#2.0.0#2026-12-01#linux_amd64",
                "USAGE#reg.example.com/acme/widget CONSUMER#1.0.0#tok",
                "MIRROR#other.example.com/acme/widget VERSION#1.0.0",
                "KEYS#acme KEY#AAAA",
                "TRUST acme#policy",
            ]
        );
    }

    #[test]
    fn a_constraint_keeps_the_versions_meeting_it() {
        let select = Selection {
            names: vec!["acme/widget".into(), "acme/vpc/aws".into()],
            constraint: Some(tfreg_model::constraint::Constraints::parse(">= 1.1").unwrap()),
            ..Default::default()
        };
        assert_eq!(
            carried_by(&select),
            [
                "PROVIDER#acme/widget VERSION#2.0.0",
                "MODULE#acme/vpc/aws VERSION#1.2.0",
                "MODULE#acme/vpc/aws DOCS#1.2.0#abc",
                "USAGE#reg.example.com:8443/acme/widget DAY#2.0.0#2026-12-01#linux_amd64",
                "KEYS#acme KEY#AAAA",
                "TRUST acme#policy",
            ]
        );
    }

    #[test]
    fn a_namespace_leaves_out_what_is_registry_wide() {
        let select = Selection {
            namespaces: vec!["beta".into()],
            ..Default::default()
        };
        assert_eq!(
            carried_by(&select),
            ["MODULE#beta/vpc/aws VERSION#1.0.0", "KEYS#beta KEY#BBBB"]
        );
    }
}
