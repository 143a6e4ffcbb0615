//! The maintenance verbs over both stores (issue 39): `tfreg gc`, objects
//! no record refers to; `tfreg verify`, stored bytes against what their
//! records promise. Both read the item store whole ([`scan_all`]) and the
//! blob store's listing; the pure decisions ([`references`], [`garbage`])
//! are apart from the I/O.
//!
//! What gc collects (and nothing else):
//! - `archives/<upload>/<file>` that no release item (own, mirrored or
//!   module) refers to and that is not of a publish still in progress:
//!   files kept by a `complete` that then failed or lost a race, files of a
//!   delete that stopped half-way.
//! - `uploads/<upload>/<file>` of no publish in progress (the session
//!   expired or ended).
//!
//! Each only once it is older than the grace period: a `complete` keeps
//! its files *before* it writes the release that refers to them, so a file
//! kept a moment ago and not yet referred to is a publish at work, not
//! garbage. The grace must be longer than any `complete` takes (a Lambda's
//! at most 15 minutes); the default is a day. The listing is taken before
//! the items are read, so a release written meanwhile is seen. The pull-
//! through cache's `cache/` objects are content-addressed and kept by the
//! cache (`tfreg cache`), not collected here.
//!
//! A record gc cannot read stops it: it never deletes on a guess.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use tfreg_model::blob_key::{ARCHIVES, BlobKey, CACHE, UPLOADS};
use tfreg_model::release::{ModuleRelease, ProviderRelease, StoredFile};

use crate::catalog::codec::decode;
use crate::catalog::schema::{CACHE_PREFIX, UPLOAD_SK, VERSION_PREFIX};
use crate::catalog::uploads::UploadSession;
use crate::{BlobStore, Digest, Item, ItemStore, StoreError, scan_all};

/// What a record promises of a file: its bytes' sha256 (and size, where
/// the record keeps it), and which record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Promised {
    pub sha256: String,
    pub size: Option<u64>,
    /// `PROVIDER#acme/widget VERSION#1.0.0`: the item's keys.
    pub record: String,
}

/// What the items refer to.
#[derive(Debug, Default)]
pub struct References {
    pub files: BTreeMap<BlobKey, Promised>,
    /// Upload ids of the publishes in progress (sessions not expired).
    pub open_uploads: BTreeSet<String>,
}

fn promise(files: &mut BTreeMap<BlobKey, Promised>, item: &Item, file: &StoredFile) {
    files.insert(
        file.key.clone(),
        Promised {
            sha256: file.sha256.clone(),
            size: Some(file.size),
            record: format!("{} {}", item.pk, item.sk),
        },
    );
}

/// The files `items` (the whole store) refer to at `now`. An item that
/// should be a release or an upload session and cannot be read is an
/// error naming it.
pub fn references(items: &[Item], now: u64) -> Result<References, StoreError> {
    let mut refs = References::default();
    let unreadable = |item: &Item, e: StoreError| {
        StoreError::internal(format!(
            "the record {} {} cannot be read ({e}): nothing is collected while a record is unreadable",
            item.pk, item.sk
        ))
    };
    for item in items {
        let release = item.sk.starts_with(VERSION_PREFIX);
        if release && (item.pk.starts_with("PROVIDER#") || item.pk.starts_with("MIRROR#")) {
            let r: ProviderRelease = decode(item).map_err(|e| unreadable(item, e))?;
            for file in r
                .packages
                .iter()
                .map(|p| &p.file)
                .chain(r.shasums.iter())
                .chain(r.shasums_signature.iter())
            {
                promise(&mut refs.files, item, file);
            }
        } else if release && item.pk.starts_with("MODULE#") {
            let r: ModuleRelease = decode(item).map_err(|e| unreadable(item, e))?;
            promise(&mut refs.files, item, &r.file);
        } else if item.pk.starts_with("MODULE#")
            && item.sk.starts_with(crate::catalog::schema::ZIP_PREFIX)
        {
            // A module archive's zip (the OCI view's layer).
            let zip: StoredFile = decode(item).map_err(|e| unreadable(item, e))?;
            promise(&mut refs.files, item, &zip);
        } else if item.pk.starts_with("UPLOAD#") && item.sk == UPLOAD_SK {
            let s: UploadSession = decode(item).map_err(|e| unreadable(item, e))?;
            if s.expires_at > now {
                let id = item.pk.trim_start_matches("UPLOAD#");
                refs.open_uploads.insert(id.to_string());
            }
        }
    }
    Ok(refs)
}

/// Why an object is garbage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Why {
    /// A published file no release refers to.
    Unreferenced,
    /// An upload of no publish in progress.
    AbandonedUpload,
}

/// An object gc deletes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Garbage {
    pub key: BlobKey,
    pub why: Why,
    /// When it was last modified (unix seconds).
    pub modified: u64,
}

/// The upload id of an `archives/` or `uploads/` key.
fn upload_of(key: &BlobKey) -> Option<&str> {
    let rest = key
        .as_str()
        .strip_prefix(ARCHIVES)
        .or_else(|| key.as_str().strip_prefix(UPLOADS))?;
    rest.split('/').next()
}

/// Of the `listed` objects (key, modified), what gc deletes: the garbage
/// modified before `cutoff`; and how many more would be garbage but are
/// too recent.
pub fn garbage(listed: &[(BlobKey, u64)], refs: &References, cutoff: u64) -> (Vec<Garbage>, usize) {
    let mut out = Vec::new();
    let mut recent = 0;
    for (key, modified) in listed {
        let open = upload_of(key).is_some_and(|id| refs.open_uploads.contains(id));
        let why = if key.as_str().starts_with(ARCHIVES) {
            (!refs.files.contains_key(key) && !open).then_some(Why::Unreferenced)
        } else if key.is_upload() {
            (!open).then_some(Why::AbandonedUpload)
        } else {
            None
        };
        match why {
            Some(_) if *modified >= cutoff => recent += 1,
            Some(why) => out.push(Garbage {
                key: key.clone(),
                why,
                modified: *modified,
            }),
            None => {}
        }
    }
    out.sort_by(|a, b| a.key.as_str().cmp(b.key.as_str()));
    (out, recent)
}

/// What a gc found (and, applied, did).
#[derive(Debug, Clone, Serialize)]
pub struct GcReport {
    /// Objects under `archives/` and `uploads/`.
    pub objects: usize,
    /// Files the records refer to.
    pub referenced: usize,
    /// Garbage younger than the grace period, left for a later run.
    pub recent: usize,
    pub garbage: Vec<Garbage>,
    /// How many of them were deleted (0 on a dry run).
    pub deleted: usize,
}

/// Find (and with `apply`, delete) the garbage at `now`, `grace_secs`
/// after which an unreferenced object is garbage; `progress(done, of)`
/// after each deletion.
pub async fn gc(
    items: &dyn ItemStore,
    blobs: &dyn BlobStore,
    now: u64,
    grace_secs: u64,
    apply: bool,
    progress: &(dyn Fn(usize, usize) + Send + Sync),
) -> Result<GcReport, StoreError> {
    // The listing first: a release written after it is in the scan.
    let mut listed = blobs.list_dated(ARCHIVES).await?;
    listed.extend(blobs.list_dated(UPLOADS).await?);
    let refs = references(&scan_all(items).await?, now)?;
    let (garbage, recent) = garbage(&listed, &refs, now.saturating_sub(grace_secs));
    let mut deleted = 0;
    if apply {
        for (i, g) in garbage.iter().enumerate() {
            blobs.delete(&g.key).await?;
            deleted += 1;
            progress(i + 1, garbage.len());
        }
    }
    Ok(GcReport {
        objects: listed.len(),
        referenced: refs.files.len(),
        recent,
        garbage,
        deleted,
    })
}

/// A stored object that is not what its record promises.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Mismatch {
    pub key: BlobKey,
    pub record: String,
    pub expected_sha256: String,
    pub expected_size: Option<u64>,
    /// What is there; `None`: nothing is.
    pub found: Option<Found>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Found {
    pub sha256: String,
    pub size: u64,
}

impl From<Digest> for Found {
    fn from(d: Digest) -> Self {
        Found {
            sha256: d.sha256,
            size: d.size,
        }
    }
}

/// What a verify found.
#[derive(Debug, Clone, Serialize)]
pub struct VerifyReport {
    /// Files read and hashed.
    pub checked: usize,
    pub bytes: u64,
    pub mismatches: Vec<Mismatch>,
}

/// The files to verify: every file a release refers to, and every
/// provider archive the cache keeps (its key names its sha256).
pub async fn promised(
    items: &dyn ItemStore,
    blobs: &dyn BlobStore,
    now: u64,
) -> Result<Vec<(BlobKey, Promised)>, StoreError> {
    let mut files = references(&scan_all(items).await?, now)?.files;
    for key in blobs.list(CACHE).await? {
        if let Some(parts) = key.cached_parts() {
            let promised = Promised {
                sha256: parts.sha256.to_string(),
                size: None,
                record: format!(
                    "{CACHE_PREFIX}{}/{}/{} (its key)",
                    parts.host, parts.namespace, parts.provider_type
                ),
            };
            files.insert(key.clone(), promised);
        }
    }
    Ok(files.into_iter().collect())
}

/// Re-hash one file against its promise: `None` when it is what was
/// promised.
pub async fn check(
    blobs: &dyn BlobStore,
    key: &BlobKey,
    promised: &Promised,
) -> Result<(Option<Mismatch>, u64), StoreError> {
    let found = match blobs.claim(key, u64::MAX).await {
        Ok(claimed) => Some(claimed.digest),
        Err(StoreError::NotFound(_)) => None,
        Err(e) => return Err(e),
    };
    let bytes = found.as_ref().map_or(0, |d| d.size);
    let good = found
        .as_ref()
        .is_some_and(|d| d.sha256 == promised.sha256 && promised.size.is_none_or(|s| s == d.size));
    let mismatch = (!good).then(|| Mismatch {
        key: key.clone(),
        record: promised.record.clone(),
        expected_sha256: promised.sha256.clone(),
        expected_size: promised.size,
        found: found.map(Found::from),
    });
    Ok((mismatch, bytes))
}

/// Rebuild the versions index (and listing entry) of every provider and
/// module from its releases (`tfreg reindex`): what a crash between a
/// release's write and its index's leaves behind (a version not listed, a
/// deleted one still listed), or an index an older tfreg made. Every
/// partition with a release or an index is rebuilt from a query of its
/// releases; idempotent, so a run cut short is run again. Returns how many
/// were rebuilt; `progress(done, of)` after each.
pub async fn reindex(
    items: &dyn ItemStore,
    progress: &(dyn Fn(usize, usize) + Send + Sync),
) -> Result<usize, StoreError> {
    use crate::catalog::schema::{INDEX_SK, release_target};
    use tfreg_model::release::Origin;
    use tfreg_model::router::PublishTarget;
    let mut partitions = BTreeMap::new();
    for item in scan_all(items).await? {
        // An index without releases is named by its partition alone.
        let sk = if item.sk == INDEX_SK {
            "VERSION#0.0.0"
        } else {
            &item.sk
        };
        if let Some(target) = release_target(&item.pk, sk) {
            partitions.entry(item.pk.clone()).or_insert(target);
        }
    }
    for (i, target) in partitions.values().enumerate() {
        match target {
            PublishTarget::Provider { provider, .. } => {
                crate::catalog::reindex_provider(items, &Origin::Registry, provider).await?
            }
            PublishTarget::Mirror {
                hostname, provider, ..
            } => {
                let origin = Origin::Mirror(hostname.clone());
                crate::catalog::reindex_provider(items, &origin, provider).await?
            }
            PublishTarget::Module { module, .. } => {
                crate::catalog::reindex_module(items, module).await?
            }
        }
        progress(i + 1, partitions.len());
    }
    Ok(partitions.len())
}

/// The module releases that have no docs item (published before tfreg read
/// docs, or by a version that stopped between the two): what `tfreg
/// reindex` reads docs for, from each one's archive.
pub async fn undocumented_modules(
    items: &dyn ItemStore,
) -> Result<Vec<(tfreg_model::address::ModuleName, ModuleRelease)>, StoreError> {
    modules_lacking(items, crate::catalog::schema::DOCS_PREFIX).await
}

/// The module releases whose archive has no zip (published before the OCI
/// view): what `tfreg reindex` makes one for.
pub async fn unzipped_modules(
    items: &dyn ItemStore,
) -> Result<Vec<(tfreg_model::address::ModuleName, ModuleRelease)>, StoreError> {
    modules_lacking(items, crate::catalog::schema::ZIP_PREFIX).await
}

/// The module releases with no `PREFIX<version>#<archive sha256>` item.
async fn modules_lacking(
    items: &dyn ItemStore,
    prefix: &str,
) -> Result<Vec<(tfreg_model::address::ModuleName, ModuleRelease)>, StoreError> {
    use crate::catalog::schema::release_target;
    use tfreg_model::router::PublishTarget;
    let all = scan_all(items).await?;
    let made: BTreeSet<(&str, &str)> = all
        .iter()
        .filter_map(|i| Some((i.pk.as_str(), i.sk.strip_prefix(prefix)?)))
        .collect();
    let mut todo = Vec::new();
    for item in &all {
        let Some(PublishTarget::Module { module, .. }) = release_target(&item.pk, &item.sk) else {
            continue;
        };
        let release: ModuleRelease = decode(item)?;
        let sk = format!("{}#{}", release.version, release.file.sha256);
        if !made.contains(&(item.pk.as_str(), sk.as_str())) {
            todo.push((module, release));
        }
    }
    Ok(todo)
}

pub mod transfer;

#[cfg(test)]
mod tests;
