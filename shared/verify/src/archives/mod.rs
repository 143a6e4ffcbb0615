//! Archive inspection for everything the registry publishes: module `.tar.gz`
//! archives ([`module`]) and provider `.zip` packages ([`provider_zip`]).
//!
//! Both formats follow the same rules, so that what the registry accepts is what
//! every client unpacks the same way (Go's archive/tar and archive/zip, GNU tar,
//! Python, Info-ZIP):
//!
//! - entry paths are relative and stay inside the archive ([`check_entry_path`]);
//! - only regular files and directories, each path at most once (after
//!   dropping `./` components);
//! - bounded entry counts and unpacked sizes, checked from the headers before
//!   anything is decompressed where the format allows it.
//!
//! Everything here is a pure function of a reader: no storage, no async.

use std::collections::HashSet;

use sha2::{Digest, Sha256};

pub mod module;
pub mod module_zip;
pub mod provider_zip;

/// Longest entry path, in bytes (Linux's `PATH_MAX`). Real module and provider
/// files have paths well below 300 bytes.
pub const MAX_NAME_BYTES: usize = 4096;

/// Most entries (files and directories) in a module archive. Big public modules
/// (terraform-aws-modules, with examples and tests) hold a few hundred files;
/// this leaves 20x room and bounds the per-entry work of a hostile archive.
pub const MAX_MODULE_ENTRIES: usize = 10_000;

/// Largest total size of the data a module archive unpacks to (the files and
/// the tar extension headers). Modules are text; this is far above any real one.
pub const MAX_MODULE_UNPACKED: u64 = 512 * 1024 * 1024;

/// Largest tar extension header (pax record block or GNU long name). Go's
/// archive/tar allows 1 MiB; a long path plus a few extended attributes needs a
/// few KiB. These headers are read into memory, so they are bounded first.
pub const MAX_TAR_EXTENSION_BYTES: u64 = 64 * 1024;

/// Most zero bytes allowed after the tar end marker. GNU tar pads the archive
/// to a whole record (20 blocks = 10 KiB by default; `--blocking-factor` can
/// raise it); anything beyond this, or any non-zero byte, is refused.
pub const MAX_TAR_PADDING: u64 = 1024 * 1024;

/// Most entries in a provider zip. A provider package holds the binary and a
/// few text files (LICENSE, README, CHANGELOG).
pub const MAX_ZIP_ENTRIES: usize = 1_000;

/// Largest central directory of a provider zip: [`MAX_ZIP_ENTRIES`] entries
/// of about 4 KiB (a 46-byte header, a name up to [`MAX_NAME_BYTES`], extra
/// fields). Real ones are a few hundred bytes; the zip crate holds it in memory.
pub const MAX_ZIP_CENTRAL_DIRECTORY: u64 = 4 * 1024 * 1024;

/// Largest total declared uncompressed size of a provider zip: 2 GiB. The
/// biggest public providers (hashicorp/aws, azurerm, google) ship binaries of a
/// few hundred MB up to under 1 GB unpacked; this leaves over 2x room for growth
/// while bounding the decompression and hashing work of one publish to what
/// publishing the AWS provider costs anyway (a few seconds of CPU). It matches
/// the registry's default `max_archive_bytes`.
pub const MAX_ZIP_UNPACKED: u64 = 2 * 1024 * 1024 * 1024;

/// Highest allowed compression ratio (uncompressed : compressed) of a zip entry
/// larger than [`RATIO_FLOOR`], and of the whole zip. A Go provider binary
/// deflates about 3-4:1 and text about 5-10:1; a zip bomb's entries reach
/// 1000:1 and more.
pub const MAX_RATIO: u64 = 100;

/// Entries up to this size are not ratio-checked (a small file of repeated
/// bytes may legitimately compress very well; [`MAX_ZIP_UNPACKED`] still bounds
/// the total).
pub const RATIO_FLOOR: u64 = 1024 * 1024;

/// Why an archive was refused. Every message names the entry and says what to
/// fix; callers prefix it with the file name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArchiveError {
    /// Not a gzip'd tar (bad gzip framing or tar header, truncated data).
    #[error("not a .tar.gz: {0}")]
    NotTarGz(String),
    /// Not a zip this registry accepts (no end record, zip64, split, inconsistent directory).
    #[error("not a valid zip: {0}")]
    NotZip(String),
    /// An absolute path, a `..` component or a drive prefix.
    #[error("entry {0} escapes the archive; entry paths must be relative and stay inside it")]
    Escapes(String),
    /// An entry name that is empty, too long, not UTF-8, or has a backslash or control character.
    #[error("entry name {name:?} {reason}")]
    BadName { name: String, reason: &'static str },
    /// A symlink, hard link, device, pipe or other non-regular entry.
    #[error("entry {name} is a {kind}; only regular files and directories are allowed")]
    NotRegular { name: String, kind: String },
    /// The same path twice (compared after dropping `./` components).
    #[error("entry {0} appears more than once; each path may appear only once")]
    Duplicate(String),
    /// More entries than the format's limit.
    #[error("more than {limit} entries")]
    TooManyEntries { limit: usize },
    /// More unpacked bytes than the format's limit.
    #[error("more than {limit} bytes unpacked")]
    TooBig { limit: u64 },
    /// A zip entry (or the whole zip) declares more than [`MAX_RATIO`] times its compressed size.
    #[error(
        "{name} would unpack to more than {limit} times its compressed size; that is a zip bomb, not a package"
    )]
    Ratio { name: String, limit: u64 },
    /// Two zip entries whose data ranges overlap (a non-recursive zip bomb), or
    /// an entry running into the central directory.
    #[error("entries {first} and {second} overlap in the zip; each entry needs its own data")]
    Overlap { first: String, second: String },
    /// A zip entry that unpacks to a size other than the one it declares.
    #[error("entry {name} does not unpack to the {declared} bytes it declares")]
    SizeMismatch { name: String, declared: u64 },
    /// A feature the registry does not accept: encryption, a compression method
    /// other than stored/deflate, sparse files, unknown header forms.
    #[error("entry {name}: {what} is not supported")]
    Unsupported { name: String, what: String },
    /// An entry whose data or headers are inconsistent (bad deflate data, CRC,
    /// local header that disagrees with the central directory).
    #[error("entry {name} is corrupt: {reason}")]
    Corrupt { name: String, reason: String },
    /// Non-zero data after the tar end marker (e.g. a second gzip member).
    #[error("data after the end of the tar archive; only zero padding may follow it")]
    TrailingData,
    /// A module archive without any `.tf` (or `.tf.json`) file.
    #[error("it holds no .tf file")]
    NoTfFile,
    /// A provider zip without `terraform-provider-<TYPE>*` as a regular file at its top level.
    #[error("it holds no {prefix}* executable at the top level of the zip")]
    NoProviderBinary { prefix: String },
}

/// Check one entry path, the same way for tar and zip: non-empty, at most
/// [`MAX_NAME_BYTES`], no control character (NUL, newline, ...) or backslash,
/// not absolute, no Windows drive prefix (`C:`), no `..` component.
/// `./` components and a trailing `/` (directories) are allowed.
pub fn check_entry_path(name: &str) -> Result<(), ArchiveError> {
    let bad = |reason| {
        Err(ArchiveError::BadName {
            name: name.to_string(),
            reason,
        })
    };
    if name.is_empty() {
        return bad("is empty");
    }
    if name.len() > MAX_NAME_BYTES {
        return bad("is longer than 4096 bytes");
    }
    if name.chars().any(char::is_control) {
        return bad("contains a control character (NUL, newline, ...)");
    }
    if name.contains('\\') {
        return bad("contains a backslash; use / between directories");
    }
    let bytes = name.as_bytes();
    let absolute = bytes[0] == b'/';
    let drive = bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':';
    if absolute || drive || name.split('/').any(|c| c == "..") {
        return Err(ArchiveError::Escapes(name.to_string()));
    }
    Ok(())
}

/// The path an entry names, for comparisons: `.` and empty components dropped
/// (`./a//b/` → `a/b`). The archive root (`./`) is the empty string.
pub(crate) fn entry_key(name: &str) -> String {
    name.split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect::<Vec<_>>()
        .join("/")
}

/// The paths seen so far in one archive, to refuse duplicates: the SHA-256 of
/// each [`entry_key`], so that the set stays small however long the names are
/// ([`MAX_MODULE_ENTRIES`] names of [`MAX_NAME_BYTES`] would be 40 MiB).
#[derive(Debug, Default)]
pub(crate) struct Seen(HashSet<[u8; 32]>);

impl Seen {
    /// Record `name`; returns its [`entry_key`], or an error if it was already seen.
    pub(crate) fn insert(&mut self, name: &str) -> Result<String, ArchiveError> {
        let key = entry_key(name);
        if self.0.insert(Sha256::digest(&key).into()) {
            Ok(key)
        } else {
            Err(ArchiveError::Duplicate(name.to_string()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_inside_the_archive_pass() {
        for ok in [
            "main.tf",
            "modules/sub/main.tf",
            "./main.tf",
            "./",
            "docs/",
            "a//b",
            "a/..b/c..",
            "terraform-provider-x_v1.0.0",
        ] {
            assert_eq!(check_entry_path(ok), Ok(()), "{ok}");
        }
    }

    #[test]
    fn escaping_paths_are_refused() {
        for name in [
            "../escape.tf",
            "a/../../b",
            "..",
            "/etc/passwd",
            "/",
            "C:/Windows/evil",
            "c:evil",
        ] {
            assert_eq!(
                check_entry_path(name),
                Err(ArchiveError::Escapes(name.into())),
                "{name}"
            );
        }
        assert_eq!(
            check_entry_path("../escape.tf").unwrap_err().to_string(),
            "entry ../escape.tf escapes the archive; entry paths must be relative and stay inside it"
        );
    }

    #[test]
    fn malformed_names_are_refused() {
        let long = "a".repeat(MAX_NAME_BYTES + 1);
        for name in [
            "",
            "a\0b",
            "evil\n.tf",
            "a\rb",
            "a\\..\\evil",
            "dir\\file",
            long.as_str(),
        ] {
            assert!(
                matches!(check_entry_path(name), Err(ArchiveError::BadName { .. })),
                "{name:?}"
            );
        }
    }

    #[test]
    fn the_names_seen_take_little_memory() {
        // Found by the bounded-memory tests (shared/testkit/tests/properties): a 0.7 MB module
        // of 10,000 entries with 4 KiB pax paths held 40 MB of names.
        let name = |i: usize| format!("{}/{i}.tf", "d".repeat(4000));
        let mut seen = Seen::default();
        let ((), peak) = tfreg_testkit::alloc::peak_bytes(|| {
            for i in 0..MAX_MODULE_ENTRIES {
                seen.insert(&name(i)).unwrap();
            }
        });
        assert!(peak < 2 * 1024 * 1024, "peak heap {peak} bytes");
        assert_eq!(seen.insert(&name(7)), Err(ArchiveError::Duplicate(name(7))));
    }

    #[test]
    fn keys_drop_dot_components() {
        assert_eq!(entry_key("./a//./b/"), "a/b");
        assert_eq!(entry_key("./"), "");
        let mut seen = Seen::default();
        assert_eq!(seen.insert("./LICENSE").unwrap(), "LICENSE");
        assert_eq!(
            seen.insert("LICENSE"),
            Err(ArchiveError::Duplicate("LICENSE".into()))
        );
        seen.insert("docs/").unwrap();
        assert!(seen.insert("./docs").is_err());
    }
}
