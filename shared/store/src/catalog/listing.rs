//! The registry's listing: one item per provider and per module of this
//! registry (partition [`LISTING_PK`], sort key the releases' own partition
//! key), so the web UI's home, search and namespace pages are one `Query` of
//! small items, not a scan of the table.
//!
//! An entry is derived from its versions index, and written after every
//! write of that index (publish, lifecycle change, delete: see
//! `catalog::sync`). It carries the index's `rev`, and a write never
//! replaces an entry of a later `rev` (compare and swap), so racing changes
//! leave the latest state. A provider or module whose last version is
//! deleted keeps an entry of no versions, which lists leave out (a delete
//! could not be ordered against a later publish otherwise). Mirrored providers of other registries are not
//! listed: the UI shows what this registry publishes.

use serde::{Deserialize, Serialize};

use tfreg_model::version::Version;

use super::cas::{self, Step};
use super::index::VersionIndex;
use super::schema::LISTING_PK;
use crate::{Item, ItemStore, StoreError, query_all};

/// Providers or modules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Module,
    Provider,
}

/// What lists show of one provider or module.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub kind: Kind,
    /// `namespace/type` or `namespace/name/system`.
    pub address: String,
    pub namespace: String,
    /// The highest version not yanked (a release before a prerelease);
    /// `None` when every version is yanked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latest: Option<String>,
    /// Whether [`Self::latest`] is deprecated.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub latest_deprecated: bool,
    /// Versions listed (yanked ones included).
    pub versions: usize,
    /// Modules: the first paragraph of the latest version's README.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// When the entry last changed (unix seconds): a publish, a lifecycle change.
    pub updated_at: u64,
    /// The versions index's `rev` this entry was made from.
    pub rev: u64,
}

impl Entry {
    /// The entry of a partition, from its index; `None` for partitions that
    /// are not listed (mirrors).
    pub fn of(pk: &str, index: &VersionIndex, now: u64) -> Option<Entry> {
        let (kind, address) = if let Some(a) = pk.strip_prefix("PROVIDER#") {
            (Kind::Provider, a)
        } else if let Some(a) = pk.strip_prefix("MODULE#") {
            (Kind::Module, a)
        } else {
            return None;
        };
        let versions: Vec<_> = index.versions().collect();
        let pick = |prerelease: bool| {
            versions
                .iter()
                .filter(|v| !v.yanked)
                .filter_map(|v| Some((Version::parse(v.version).ok()?, v)))
                .filter(|(parsed, _)| prerelease || !parsed.is_prerelease())
                .max_by(|a, b| a.0.cmp(&b.0))
                .map(|(_, v)| *v)
        };
        let latest = pick(false).or_else(|| pick(true));
        Some(Entry {
            kind,
            address: address.to_string(),
            namespace: address.split('/').next().unwrap_or_default().to_string(),
            latest: latest.map(|v| v.version.to_string()),
            latest_deprecated: latest.is_some_and(|v| v.deprecated.is_some()),
            versions: versions.len(),
            description: None,
            updated_at: now,
            rev: index.rev,
        })
    }

    /// Does this entry match every word of `query` (case-insensitive, in its
    /// address or description)?
    pub fn matches(&self, query: &str) -> bool {
        let haystack = format!(
            "{} {} {}",
            self.address,
            match self.kind {
                Kind::Module => "module",
                Kind::Provider => "provider",
            },
            self.description.as_deref().unwrap_or_default()
        )
        .to_lowercase();
        query
            .split_whitespace()
            .all(|word| haystack.contains(&word.to_lowercase()))
    }
}

/// How many times a listing write retries after losing a race.
const ATTEMPTS: u32 = 20;

/// Make the listing entry of `pk` `entry` (made from the index of `pk`),
/// unless an entry of a later index is there already.
pub async fn record(store: &dyn ItemStore, pk: &str, entry: &Entry) -> Result<(), StoreError> {
    let data = super::codec::encode(entry)?;
    let decide = |current: Option<Item>| {
        let data = data.clone();
        async move {
            let current_rev = current
                .as_ref()
                .and_then(|item| super::codec::decode::<Entry>(item).ok())
                .map(|e| e.rev);
            Ok(if current_rev.is_some_and(|r| r > entry.rev) {
                Step::Keep(())
            } else {
                Step::Write(data, ())
            })
        }
    };
    cas::update(store, LISTING_PK, pk, ATTEMPTS, decide, || {
        StoreError::Unavailable(format!(
            "the listing entry of {pk} kept changing while it was updated; try again"
        ))
    })
    .await
}

/// Every listed provider and module that has versions, in sort-key order
/// (modules, then providers, each by address).
pub async fn all(store: &dyn ItemStore) -> Result<Vec<Entry>, StoreError> {
    let items = query_all(store, LISTING_PK, "").await?;
    let entries = items
        .iter()
        .map(super::codec::decode::<Entry>)
        .collect::<Result<Vec<_>, _>>()?;
    Ok(entries.into_iter().filter(|e| e.versions > 0).collect())
}

#[cfg(all(test, feature = "embedded"))]
mod tests {
    use super::*;
    use crate::catalog::index::Listing;

    fn listing(v: &str, yanked: bool, deprecated: bool) -> Listing {
        Listing {
            version: v.into(),
            protocols: vec![],
            platforms: vec![],
            deprecated: deprecated.then(|| "old".to_string()),
            yanked,
        }
    }

    #[test]
    fn the_latest_is_the_highest_release_not_yanked() {
        let index = VersionIndex::of(
            7,
            [
                listing("1.0.0", false, false),
                listing("1.2.0", false, true),
                listing("2.0.0", true, false),
                listing("2.1.0-beta", false, false),
            ],
        );
        let e = Entry::of("MODULE#team/vpc/aws", &index, 5).unwrap();
        assert_eq!(e.kind, Kind::Module);
        assert_eq!(e.address, "team/vpc/aws");
        assert_eq!(e.namespace, "team");
        assert_eq!(e.latest.as_deref(), Some("1.2.0"));
        assert!(e.latest_deprecated);
        assert_eq!((e.versions, e.rev, e.updated_at), (4, 7, 5));
        let pre = VersionIndex::of(1, [listing("0.1.0-rc1", false, false)]);
        let e = Entry::of("PROVIDER#team/x", &pre, 0).unwrap();
        assert_eq!(
            (e.kind, e.latest.as_deref()),
            (Kind::Provider, Some("0.1.0-rc1"))
        );
        let yanked = VersionIndex::of(1, [listing("1.0.0", true, false)]);
        assert_eq!(
            Entry::of("PROVIDER#team/x", &yanked, 0).unwrap().latest,
            None
        );
        let none = Entry::of("PROVIDER#team/x", &VersionIndex::of(1, []), 0).unwrap();
        assert_eq!((none.versions, none.latest), (0, None));
        assert_eq!(Entry::of("MIRROR#h/team/x", &index, 0), None);
    }

    #[test]
    fn every_word_of_a_query_must_match() {
        let mut e = Entry::of(
            "MODULE#team/vpc/aws",
            &VersionIndex::of(1, [listing("1.0.0", false, false)]),
            0,
        )
        .unwrap();
        e.description = Some("Creates a VPC with subnets".into());
        for q in ["", "vpc", "TEAM aws", "subnets vpc", "module", "team/vpc"] {
            assert!(e.matches(q), "{q}");
        }
        for q in ["gcp", "vpc gcp", "provider"] {
            assert!(!e.matches(q), "{q}");
        }
    }

    #[tokio::test]
    async fn an_older_index_never_replaces_a_newer_entry() {
        let store = crate::sqlite::SqliteStore::in_memory().unwrap();
        let index = |rev| VersionIndex::of(rev, [listing("1.0.0", false, false)]);
        let pk = "PROVIDER#team/x";
        let entry = |rev, now| Entry::of(pk, &index(rev), now).unwrap();
        record(&store, pk, &entry(2, 10)).await.unwrap();
        record(&store, pk, &entry(1, 20)).await.unwrap();
        let listed = all(&store).await.unwrap();
        assert_eq!(
            (listed.len(), listed[0].rev, listed[0].updated_at),
            (1, 2, 10)
        );
        // Deleted: an entry of no versions, left out of the lists, which a
        // late write of an older index does not bring back.
        let gone = Entry::of(pk, &VersionIndex::of(3, []), 30).unwrap();
        record(&store, pk, &gone).await.unwrap();
        record(&store, pk, &entry(2, 40)).await.unwrap();
        assert!(all(&store).await.unwrap().is_empty());
    }
}
