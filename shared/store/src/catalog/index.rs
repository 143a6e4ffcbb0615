//! The versions index: one item per provider or module (sort key `INDEX`, in
//! the releases' own partition) holding exactly what the versions lists need,
//! so that a list is one `GetItem` whatever the number of versions.
//!
//! Pure logic: building, changing, encoding. Distinct protocol lists, platform
//! sets and deprecation messages are kept once, in tables the versions refer
//! to by index; the JSON is then deflated. 5,000 versions of 12 platforms take
//! about 12 KB (measured by `tfreg-bench scale`), far under DynamoDB's 400 KB item limit; an index that
//! would not fit is stored as [`VersionIndex::overflowed`] and readers query
//! the releases instead.
//!
//! The release items stay the truth: the index is derived from them (see
//! `catalog::sync_index`), and `rev`, bumped by every write, lets each writer
//! compare-and-swap it.

use std::io::{Read, Write};

use serde::{Deserialize, Serialize};

use tfreg_model::release::{ModuleRelease, ProviderRelease};
use tfreg_model::version::Version;

/// Largest encoded index kept in one item: DynamoDB's item limit is 400 KB
/// (keys and attribute names included); this leaves room to spare.
pub const MAX_INDEX_BYTES: usize = 350 * 1024;

/// What a versions list shows of one release.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listing {
    pub version: String,
    /// Providers only.
    pub protocols: Vec<String>,
    /// Providers only: `(os, arch)` in the release's order.
    pub platforms: Vec<(String, String)>,
    /// The deprecation message, if deprecated.
    pub deprecated: Option<String>,
    pub yanked: bool,
}

impl From<&ProviderRelease> for Listing {
    fn from(r: &ProviderRelease) -> Self {
        Listing {
            version: r.version.clone(),
            protocols: r.protocols.clone(),
            platforms: r
                .packages
                .iter()
                .map(|p| (p.os.clone(), p.arch.clone()))
                .collect(),
            deprecated: r.lifecycle.deprecated.as_ref().map(|m| m.message.clone()),
            yanked: r.lifecycle.yanked.is_some(),
        }
    }
}

impl From<&ModuleRelease> for Listing {
    fn from(r: &ModuleRelease) -> Self {
        Listing {
            version: r.version.clone(),
            protocols: vec![],
            platforms: vec![],
            deprecated: r.lifecycle.deprecated.as_ref().map(|m| m.message.clone()),
            yanked: r.lifecycle.yanked.is_some(),
        }
    }
}

/// One version, its lists by index into the tables.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Entry {
    v: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    p: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    s: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    d: Option<u32>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    y: bool,
}

/// Every version of one provider or module, oldest first (semver order).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VersionIndex {
    /// Bumped by every write of the index.
    pub rev: u64,
    /// The index did not fit in one item: it lists nothing, readers query.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub overflow: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    protocols: Vec<Vec<String>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    platforms: Vec<Vec<(String, String)>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    messages: Vec<String>,
    #[serde(default)]
    versions: Vec<Entry>,
}

/// One version as a list shows it, borrowed from the index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct View<'a> {
    pub version: &'a str,
    pub protocols: &'a [String],
    pub platforms: &'a [(String, String)],
    pub deprecated: Option<&'a str>,
    pub yanked: bool,
}

/// The position of `value` in `table`, adding `value` if it is not there.
fn intern<T: PartialEq>(table: &mut Vec<T>, value: T) -> u32 {
    let at = table.iter().position(|t| *t == value).unwrap_or_else(|| {
        table.push(value);
        table.len() - 1
    });
    u32::try_from(at).unwrap_or(u32::MAX)
}

/// A version string's semver order (unparsable strings, which a correct
/// store never holds, sort first).
fn order(v: &str) -> Option<Version> {
    Version::parse(v).ok()
}

/// `Error` of decoding a stored index.
#[derive(Debug, thiserror::Error)]
#[error("corrupt versions index: {0}")]
pub struct CorruptIndex(String);

impl VersionIndex {
    /// The index of these releases (any order).
    pub fn of(rev: u64, listings: impl IntoIterator<Item = Listing>) -> Self {
        let mut index = VersionIndex {
            rev,
            ..Default::default()
        };
        let mut listings: Vec<Listing> = listings.into_iter().collect();
        listings.sort_by_cached_key(|l| order(&l.version));
        for l in listings {
            let entry = index.entry(l);
            index.versions.push(entry);
        }
        index
    }

    /// The stand-in for an index too large for one item.
    pub fn overflowed(rev: u64) -> Self {
        VersionIndex {
            rev,
            overflow: true,
            ..Default::default()
        }
    }

    fn entry(&mut self, l: Listing) -> Entry {
        let provider = !l.protocols.is_empty() || !l.platforms.is_empty();
        Entry {
            p: provider.then(|| intern(&mut self.protocols, l.protocols)),
            s: provider.then(|| intern(&mut self.platforms, l.platforms)),
            d: l.deprecated.map(|m| intern(&mut self.messages, m)),
            y: l.yanked,
            v: l.version,
        }
    }

    /// Replace what the index holds of `version` by `listing` (`None`: the
    /// version is not published).
    pub fn set(&mut self, version: &str, listing: Option<Listing>) {
        self.versions.retain(|e| e.v != version);
        if let Some(l) = listing {
            let key = order(&l.version);
            let at = self.versions.partition_point(|e| order(&e.v) < key);
            let entry = self.entry(l);
            self.versions.insert(at, entry);
        }
    }

    /// Nothing is published (yanked versions count as published).
    pub fn is_empty(&self) -> bool {
        self.versions.is_empty()
    }

    /// Every version, oldest first.
    pub fn versions(&self) -> impl Iterator<Item = View<'_>> {
        fn row<T>(table: &[Vec<T>], i: Option<u32>) -> &[T] {
            i.and_then(|i| table.get(i as usize))
                .map_or(&[][..], Vec::as_slice)
        }
        self.versions.iter().map(move |e| View {
            version: &e.v,
            protocols: row(&self.protocols, e.p),
            platforms: row(&self.platforms, e.s),
            deprecated: e
                .d
                .and_then(|i| self.messages.get(i as usize))
                .map(String::as_str),
            yanked: e.y,
        })
    }

    /// Drop table rows no version refers to any more, renumbering the rest.
    fn compact(&mut self) {
        fn remap<T: Clone>(
            old: &[T],
            new: &mut Vec<T>,
            seen: &mut [Option<u32>],
            i: &mut Option<u32>,
        ) {
            if let Some(at) = i {
                let old_at = *at as usize;
                *at = *seen[old_at].get_or_insert_with(|| {
                    new.push(old[old_at].clone());
                    u32::try_from(new.len() - 1).unwrap_or(u32::MAX)
                });
            }
        }
        let (protocols, platforms, messages) = (
            std::mem::take(&mut self.protocols),
            std::mem::take(&mut self.platforms),
            std::mem::take(&mut self.messages),
        );
        let mut seen = (
            vec![None; protocols.len()],
            vec![None; platforms.len()],
            vec![None; messages.len()],
        );
        for e in &mut self.versions {
            remap(&protocols, &mut self.protocols, &mut seen.0, &mut e.p);
            remap(&platforms, &mut self.platforms, &mut seen.1, &mut e.s);
            remap(&messages, &mut self.messages, &mut seen.2, &mut e.d);
        }
    }

    /// The stored form: compacted JSON, deflated.
    pub fn encode(&mut self) -> Vec<u8> {
        self.compact();
        let json = serde_json::to_vec(self).unwrap_or_default();
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        // Writing to a Vec cannot fail.
        let _ = z.write_all(&json);
        z.finish().unwrap_or_default()
    }

    /// Read the stored form.
    pub fn decode(data: &[u8]) -> Result<Self, CorruptIndex> {
        let mut json = Vec::new();
        flate2::read::ZlibDecoder::new(data)
            .take(64 * 1024 * 1024)
            .read_to_end(&mut json)
            .map_err(|e| CorruptIndex(e.to_string()))?;
        let index: VersionIndex =
            serde_json::from_slice(&json).map_err(|e| CorruptIndex(e.to_string()))?;
        let bad = |i: Option<u32>, len: usize| i.is_some_and(|i| i as usize >= len);
        if index.versions.iter().any(|e| {
            bad(e.p, index.protocols.len())
                || bad(e.s, index.platforms.len())
                || bad(e.d, index.messages.len())
        }) {
            return Err(CorruptIndex("an entry refers past a table".into()));
        }
        Ok(index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listing(v: &str, platforms: usize, deprecated: Option<&str>, yanked: bool) -> Listing {
        Listing {
            version: v.into(),
            protocols: vec!["5.0".into(), "6.0".into()],
            platforms: (0..platforms)
                .map(|i| (format!("os{}", i / 4), format!("arch{}", i % 4)))
                .collect(),
            deprecated: deprecated.map(str::to_string),
            yanked,
        }
    }

    fn shown(index: &VersionIndex) -> Vec<(String, usize, Option<String>, bool)> {
        index
            .versions()
            .map(|v| {
                (
                    v.version.to_string(),
                    v.platforms.len(),
                    v.deprecated.map(str::to_string),
                    v.yanked,
                )
            })
            .collect()
    }

    #[test]
    fn versions_are_kept_in_semver_order_whatever_the_order_of_changes() {
        let mut index = VersionIndex::of(
            1,
            ["1.10.0", "1.2.0", "1.0.0-beta"]
                .into_iter()
                .map(|v| listing(v, 2, None, false)),
        );
        index.set("1.9.0", Some(listing("1.9.0", 3, Some("old"), false)));
        index.set("1.2.0", Some(listing("1.2.0", 2, None, true)));
        index.set("1.10.0", None);
        assert_eq!(
            shown(&index),
            vec![
                ("1.0.0-beta".into(), 2, None, false),
                ("1.2.0".into(), 2, None, true),
                ("1.9.0".into(), 3, Some("old".into()), false),
            ]
        );
    }

    #[test]
    fn encoding_round_trips_and_drops_unused_table_rows() {
        let mut index = VersionIndex::of(
            7,
            [
                listing("1.0.0", 1, Some("a"), false),
                listing("2.0.0", 2, Some("b"), false),
                listing("3.0.0", 3, Some("a"), true),
            ],
        );
        index.set("1.0.0", None);
        index.set("2.0.0", Some(listing("2.0.0", 3, None, false)));
        let before = shown(&index);
        let decoded = VersionIndex::decode(&index.encode()).unwrap();
        assert_eq!(shown(&decoded), before);
        assert_eq!(decoded.platforms.len(), 1, "one distinct platform set left");
        assert_eq!(decoded.messages, vec!["a".to_string()]);
        assert_eq!(decoded.rev, 7);
    }

    #[test]
    fn five_thousand_versions_of_twelve_platforms_fit_in_one_item() {
        let mut index = VersionIndex::of(
            1,
            (0..5000).map(|i| {
                let deprecated = (i % 10 == 0).then_some("use 2.x");
                listing(
                    &format!("1.{}.{}", i / 100, i % 100),
                    12,
                    deprecated,
                    i % 7 == 0,
                )
            }),
        );
        let size = index.encode().len();
        assert!(size < MAX_INDEX_BYTES, "{size} bytes");
        assert!(size < 100 * 1024, "{size} bytes: compact, not merely under");
    }

    #[test]
    fn garbage_is_refused() {
        assert!(VersionIndex::decode(b"not zlib").is_err());
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        z.write_all(br#"{"rev":1,"versions":[{"v":"1.0.0","s":3}]}"#)
            .unwrap();
        assert!(VersionIndex::decode(&z.finish().unwrap()).is_err());
    }
}
