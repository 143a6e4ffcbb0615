//! Module archives: packing a directory into a reproducible `.tar.gz`, and
//! checking an uploaded one before it is published.
//!
//! The check reads the archive the way every client does, and refuses whatever
//! two readers could see differently:
//! - every gzip member is read (go-getter, GNU tar and Python do), and after the
//!   tar end marker only zero padding may follow;
//! - extension headers (pax records, GNU long names) are parsed here, bounded
//!   by [`MAX_TAR_EXTENSION_BYTES`], with the precedence Go and the tar crate
//!   share; pax `size` overrides, sparse files, ustar/star-ambiguous prefixes
//!   and extension headers without ustar or GNU magic (which the tar crate
//!   passes over as entries) are refused;
//! - directories must have no data (Go ignores a directory's size field, the
//!   tar crate skips that many bytes: entries could hide in between).

use std::io::{Read, Write};
use std::path::Path;

use flate2::Compression;
use flate2::read::MultiGzDecoder;
use flate2::write::GzEncoder;

use crate::module_docs::{MAX_DOCS_BYTES, MAX_DOCS_FILES, Unread};

use super::{
    ArchiveError, MAX_MODULE_ENTRIES, MAX_MODULE_UNPACKED, MAX_TAR_EXTENSION_BYTES,
    MAX_TAR_PADDING, Seen, check_entry_path,
};

/// Directories never packed into a module archive.
pub const IGNORED_DIRS: [&str; 2] = [".git", ".terraform"];

/// Pack `dir` into a gzip'd tar. Entries are sorted and carry no owner or time,
/// so packing the same tree twice gives the same bytes (a re-publish is a no-op).
/// `.git` and `.terraform` directories are skipped; symlinks are refused.
pub fn pack_dir<W: Write>(dir: &Path, out: W) -> std::io::Result<W> {
    let gz = GzEncoder::new(out, Compression::default());
    let mut tar = tar::Builder::new(gz);
    tar.mode(tar::HeaderMode::Deterministic);
    tar.follow_symlinks(false);
    add_dir(&mut tar, dir, Path::new(""))?;
    tar.into_inner()?.finish()
}

fn add_dir<W: Write>(tar: &mut tar::Builder<W>, root: &Path, rel: &Path) -> std::io::Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(root.join(rel))?.collect::<Result<_, _>>()?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let name = entry.file_name();
        let rel_path = rel.join(&name);
        let ty = entry.file_type()?;
        if ty.is_dir() {
            if IGNORED_DIRS.iter().any(|d| name == *d) {
                continue;
            }
            tar.append_dir(&rel_path, entry.path())?;
            add_dir(tar, root, &rel_path)?;
        } else if ty.is_file() {
            tar.append_path_with_name(entry.path(), &rel_path)?;
        } else {
            return Err(std::io::Error::other(format!(
                "{} is a symlink or special file; module archives hold only regular files",
                rel_path.display()
            )));
        }
    }
    Ok(())
}

/// Pack files (a git tree's, [`crate::git::walk`]) into a gzip'd tar as
/// [`pack_dir`] packs a directory, with publish's rules: entries sorted,
/// each directory before what it holds, fixed owner and time, mode 0644 or
/// 0755; anything under a `.git` or `.terraform` directory left out; every
/// path checked ([`check_entry_path`]), at most once, within
/// [`MAX_MODULE_ENTRIES`] and [`MAX_MODULE_UNPACKED`]. The same files give
/// the same bytes.
pub fn pack_entries(entries: &[crate::git::TreeEntry]) -> Result<Vec<u8>, ArchiveError> {
    let mut files: Vec<(Vec<&str>, &crate::git::TreeEntry)> = Vec::new();
    let mut dirs: std::collections::BTreeSet<Vec<&str>> = std::collections::BTreeSet::new();
    let mut seen = Seen::default();
    let mut unpacked = 0u64;
    for entry in entries {
        check_entry_path(&entry.path)?;
        let parts: Vec<&str> = entry
            .path
            .split('/')
            .filter(|c| !c.is_empty() && *c != ".")
            .collect();
        let Some((_, parents)) = parts.split_last() else {
            return Err(ArchiveError::BadName {
                name: entry.path.clone(),
                reason: "names no file",
            });
        };
        if parents.iter().any(|p| IGNORED_DIRS.contains(p)) {
            continue;
        }
        seen.insert(&entry.path)?;
        unpacked += entry.bytes.len() as u64;
        if unpacked > MAX_MODULE_UNPACKED {
            return Err(ArchiveError::TooBig {
                limit: MAX_MODULE_UNPACKED,
            });
        }
        for depth in 1..parts.len() {
            dirs.insert(parts[..depth].to_vec());
        }
        files.push((parts, entry));
    }
    if files.len() + dirs.len() > MAX_MODULE_ENTRIES {
        return Err(ArchiveError::TooManyEntries {
            limit: MAX_MODULE_ENTRIES,
        });
    }
    // A file and a directory of the same path would be two entries.
    for (parts, entry) in &files {
        if dirs.contains(parts) {
            return Err(ArchiveError::Duplicate(entry.path.clone()));
        }
    }
    let mut all: Vec<(Vec<&str>, Option<&crate::git::TreeEntry>)> =
        dirs.into_iter().map(|d| (d, None)).collect();
    all.extend(files.into_iter().map(|(p, e)| (p, Some(e))));
    // By components: a directory right before its contents, as pack_dir.
    all.sort_by(|a, b| a.0.cmp(&b.0));
    let build = || -> std::io::Result<Vec<u8>> {
        let gz = GzEncoder::new(Vec::new(), Compression::default());
        let mut tar = tar::Builder::new(gz);
        for (parts, entry) in &all {
            let mut header = tar::Header::new_gnu();
            // tar's HeaderMode::Deterministic, as pack_dir writes.
            header.set_mtime(DETERMINISTIC_MTIME);
            header.set_uid(0);
            header.set_gid(0);
            let path = parts.join("/");
            match entry {
                None => {
                    header.set_entry_type(tar::EntryType::Directory);
                    header.set_mode(0o755);
                    header.set_size(0);
                    tar.append_data(&mut header, format!("{path}/"), std::io::empty())?;
                }
                Some(file) => {
                    header.set_entry_type(tar::EntryType::Regular);
                    header.set_mode(if file.executable { 0o755 } else { 0o644 });
                    header.set_size(file.bytes.len() as u64);
                    tar.append_data(&mut header, &path, file.bytes.as_slice())?;
                }
            }
        }
        tar.into_inner()?.finish()
    };
    build().map_err(|e| ArchiveError::NotTarGz(e.to_string()))
}

/// The time tar's `HeaderMode::Deterministic` writes.
const DETERMINISTIC_MTIME: u64 = 1153704088;

/// What a valid module archive holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModuleSummary {
    /// Regular files.
    pub files: usize,
    /// Their total size.
    pub unpacked_bytes: u64,
    /// The files the module's docs are read from ([`crate::module_docs::reads`]),
    /// with their bytes, in archive order.
    pub docs_files: Vec<(String, Vec<u8>)>,
    /// Such files not kept for being too large, one line each.
    pub docs_skipped: Vec<String>,
    /// Set when the docs files passed a bound in all (bytes, files): then
    /// none is kept, and the module's interface is not read.
    pub docs_unread: Option<Unread>,
}

/// A module `.tar.gz` checked as a publish checks it ([`check_tar_gz`]),
/// and its docs read in the same pass from exactly those bytes (what a
/// publish, `tfreg sync` and `tfreg reindex` store beside a release).
pub fn checked_docs(reader: impl Read) -> Result<crate::module_docs::Extracted, ArchiveError> {
    let summary = check_tar_gz(reader)?;
    let mut extracted = crate::module_docs::extract_bounded(
        summary
            .docs_files
            .iter()
            .map(|(name, bytes)| (name.as_str(), bytes.as_slice())),
        summary.docs_unread,
    );
    extracted.docs.notes.extend(summary.docs_skipped);
    Ok(extracted)
}

/// Check an uploaded module archive: a gzip'd tar (all members) of regular
/// files and directories only, with relative paths that stay inside the
/// archive, each at most once, at least one `.tf` file, at most
/// [`MAX_MODULE_ENTRIES`] entries and [`MAX_MODULE_UNPACKED`] bytes, and
/// nothing but zero padding after the end marker.
pub fn check_tar_gz<R: Read>(reader: R) -> Result<ModuleSummary, ArchiveError> {
    let mut archive = tar::Archive::new(MultiGzDecoder::new(reader));
    let mut scan = Scan::default();
    // Raw mode: the extension headers come to us, so their size is checked
    // before they are read, and their meaning is decided here.
    for entry in archive.entries().map_err(not_tar)?.raw(true) {
        scan.entry(entry.map_err(not_tar)?)?;
    }
    if scan.long_name.is_some() || scan.pax.is_some() {
        return Err(not_tar("an extension header is not followed by an entry"));
    }
    check_padding(archive.into_inner())?;
    if !scan.has_tf {
        return Err(ArchiveError::NoTfFile);
    }
    let mut summary = scan.summary;
    summary.docs_files.extend(scan.readme.map(|(_, file)| file));
    Ok(summary)
}

fn not_tar(e: impl std::fmt::Display) -> ArchiveError {
    ArchiveError::NotTarGz(e.to_string())
}

/// After the first zero block (the end marker), the rest of the decompressed
/// stream must be zeros, at most [`MAX_TAR_PADDING`] bytes. Reading it to the
/// end also checks the gzip trailers and that no garbage follows the members.
fn check_padding<R: Read>(rest: R) -> Result<(), ArchiveError> {
    let mut rest = rest.take(MAX_TAR_PADDING + 1);
    let mut buf = [0u8; 8192];
    let mut total = 0u64;
    loop {
        let n = match rest.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(not_tar(e)),
        };
        total += n as u64;
        if total > MAX_TAR_PADDING || buf[..n].iter().any(|b| *b != 0) {
            return Err(ArchiveError::TrailingData);
        }
    }
    Ok(())
}

#[derive(Default)]
struct Scan {
    summary: ModuleSummary,
    has_tf: bool,
    entries: usize,
    /// Every byte the tar parser reads past a header (file data, extension headers).
    data_bytes: u64,
    seen: Seen,
    long_name: Option<Vec<u8>>,
    pax: Option<Vec<u8>>,
    /// Bytes of the `.tf` files kept for the docs.
    docs_bytes: usize,
    /// The README kept (its name's rank, its name and bytes).
    readme: Option<(u8, (String, Vec<u8>))>,
}

impl Scan {
    fn entry<R: Read>(&mut self, mut entry: tar::Entry<'_, R>) -> Result<(), ArchiveError> {
        let ty = entry.header().entry_type();
        let size = entry.size();
        // Counted before the data is read or skipped: nothing past the limit is decompressed.
        self.data_bytes = self.data_bytes.saturating_add(size);
        if self.data_bytes > MAX_MODULE_UNPACKED {
            return Err(ArchiveError::TooBig {
                limit: MAX_MODULE_UNPACKED,
            });
        }
        let extension =
            ty.is_gnu_longname() || ty.is_pax_local_extensions() || ty.is_pax_global_extensions();
        let header = entry.header();
        if extension && header.as_ustar().is_none() && header.as_gnu().is_none() {
            // Go, GNU tar and Python apply it by its type, the tar crate only
            // with the magic (it reads the next entry under its own name).
            return Err(ArchiveError::Unsupported {
                name: String::from_utf8_lossy(&header_path(header)?).into_owned(),
                what: "an extension header without ustar or GNU magic".into(),
            });
        }
        if ty.is_gnu_longname() || ty.is_pax_local_extensions() {
            let slot = if ty.is_gnu_longname() {
                &mut self.long_name
            } else {
                &mut self.pax
            };
            if slot.is_some() {
                return Err(not_tar("two extension headers of one kind for one entry"));
            }
            *slot = Some(read_extension(&mut entry, size)?);
            return Ok(());
        }
        self.entries += 1;
        if self.entries > MAX_MODULE_ENTRIES {
            return Err(ArchiveError::TooManyEntries {
                limit: MAX_MODULE_ENTRIES,
            });
        }
        if ty.is_pax_global_extensions() {
            // Go drops a pending long name or pax header here, the tar crate keeps it.
            if self.long_name.is_some() || self.pax.is_some() {
                return Err(not_tar(
                    "a pax global header splits an entry from its extension header",
                ));
            }
            // Go ignores global records, GNU tar applies them to every member:
            // only records that change nothing about the entries (git's `comment`) pass.
            let data = read_extension(&mut entry, size)?;
            return pax_records(&data, "(pax global header)", true).map(|_| ());
        }
        let (name, pax_size) = self.entry_name(entry.header())?;
        check_entry_path(&name)?;
        if pax_size.is_some_and(|s| s != size) {
            return Err(ArchiveError::Corrupt {
                name,
                reason: "its pax size record disagrees with its header".into(),
            });
        }
        match ty {
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                if name.ends_with('/') {
                    // Go and Python read an old-style regular file named `x/` as a directory.
                    return Err(ArchiveError::BadName {
                        name,
                        reason: "is a regular file whose name ends with /",
                    });
                }
                self.seen.insert(&name)?;
                self.summary.files += 1;
                self.summary.unpacked_bytes += size;
                self.has_tf |= name.ends_with(".tf") || name.ends_with(".tf.json");
                if crate::module_docs::reads(&name) {
                    self.keep_docs_file(name, size, &mut entry)?;
                }
            }
            tar::EntryType::Directory => {
                if size != 0 {
                    return Err(ArchiveError::Corrupt {
                        name,
                        reason: "a directory entry must have no data".into(),
                    });
                }
                self.seen.insert(&name)?;
            }
            other => {
                return Err(ArchiveError::NotRegular {
                    name,
                    kind: kind(other),
                });
            }
        }
        Ok(())
    }

    /// Keep a file the docs are read from, within the limits.
    fn keep_docs_file<R: Read>(
        &mut self,
        name: String,
        size: u64,
        entry: &mut tar::Entry<'_, R>,
    ) -> Result<(), ArchiveError> {
        let max = crate::module_docs::MAX_FILE_BYTES;
        let readme = crate::module_docs::readme_rank_of(&name);
        if readme.is_none() && self.summary.docs_unread.is_some() {
            return Ok(());
        }
        if size > max as u64 {
            self.summary
                .docs_skipped
                .push(format!("{name}: not read ({size} bytes; at most {max})"));
            return Ok(());
        }
        if let Some(rank) = readme {
            // Only the README the page shows is kept: the best-ranked name,
            // the first of equal ones.
            if self.readme.as_ref().is_some_and(|(kept, _)| *kept <= rank) {
                return Ok(());
            }
            let mut data = Vec::with_capacity(size as usize);
            entry.read_to_end(&mut data).map_err(not_tar)?;
            self.readme = Some((rank, (name, data)));
            return Ok(());
        }
        let unread = if self.summary.docs_files.len() >= MAX_DOCS_FILES {
            Some(Unread::Files)
        } else if self.docs_bytes + size as usize > MAX_DOCS_BYTES {
            Some(Unread::Bytes)
        } else {
            None
        };
        if unread.is_some() {
            // No more is kept, and what was kept is let go.
            self.summary.docs_unread = unread;
            self.summary.docs_files = Vec::new();
            self.summary.docs_skipped = Vec::new();
            return Ok(());
        }
        let mut data = Vec::with_capacity(size as usize);
        entry.read_to_end(&mut data).map_err(not_tar)?;
        self.docs_bytes += data.len();
        self.summary.docs_files.push((name, data));
        Ok(())
    }

    /// The entry's path: GNU long name, else pax `path`, else the header (with
    /// its ustar prefix); and the pax `size` record if any.
    fn entry_name(&mut self, header: &tar::Header) -> Result<(String, Option<u64>), ArchiveError> {
        let long_name = self.long_name.take();
        let (pax_path, pax_size) = match self.pax.take() {
            Some(data) => {
                let label = String::from_utf8_lossy(&header_path(header)?).into_owned();
                pax_records(&data, &label, false)?
            }
            None => (None, None),
        };
        let bytes = match (long_name, pax_path) {
            (Some(_), Some(_)) => {
                return Err(not_tar("an entry has both a GNU long name and a pax path"));
            }
            (Some(mut long), None) => {
                while long.last() == Some(&0) {
                    long.pop();
                }
                long
            }
            (None, Some(path)) => path,
            (None, None) => header_path(header)?,
        };
        match String::from_utf8(bytes) {
            Ok(name) => Ok((name, pax_size)),
            Err(e) => Err(ArchiveError::BadName {
                name: String::from_utf8_lossy(e.as_bytes()).into_owned(),
                reason: "is not UTF-8",
            }),
        }
    }
}

/// Read an extension header's data, refusing it first if it is too big.
fn read_extension<R: Read>(
    entry: &mut tar::Entry<'_, R>,
    size: u64,
) -> Result<Vec<u8>, ArchiveError> {
    if size > MAX_TAR_EXTENSION_BYTES {
        return Err(ArchiveError::Unsupported {
            name: "(extension header)".into(),
            what: format!("an extension header over {MAX_TAR_EXTENSION_BYTES} bytes"),
        });
    }
    let mut data = Vec::with_capacity(size as usize);
    entry.read_to_end(&mut data).map_err(not_tar)?;
    if data.len() as u64 != size {
        return Err(not_tar("truncated extension header"));
    }
    Ok(data)
}

/// Parse pax records (`"<len> <key>=<value>\n"`, by length as Go does) and
/// return the `path` and `size` values. Sparse-file records are refused (Go
/// renames an entry after `GNU.sparse.name`); in a global header, so are
/// `path`, `linkpath` and `size`.
fn pax_records(
    mut data: &[u8],
    entry: &str,
    global: bool,
) -> Result<(Option<Vec<u8>>, Option<u64>), ArchiveError> {
    let malformed = || not_tar(format!("malformed pax record for {entry}"));
    let (mut path, mut size) = (None, None);
    while !data.is_empty() {
        let space = data.iter().position(|b| *b == b' ').ok_or_else(malformed)?;
        let len: usize = std::str::from_utf8(&data[..space])
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(malformed)?;
        if len <= space + 1 || len > data.len() || data[len - 1] != b'\n' {
            return Err(malformed());
        }
        let record = &data[space + 1..len - 1];
        let eq = record
            .iter()
            .position(|b| *b == b'=')
            .ok_or_else(malformed)?;
        let (key, value) = (&record[..eq], &record[eq + 1..]);
        data = &data[len..];
        let unsupported = |what: &str| ArchiveError::Unsupported {
            name: entry.to_string(),
            what: what.to_string(),
        };
        if key.starts_with(b"GNU.sparse.") {
            return Err(unsupported("a sparse file (pax GNU.sparse records)"));
        }
        if global && matches!(key, b"path" | b"linkpath" | b"size") {
            return Err(unsupported("a pax global path, linkpath or size record"));
        }
        match key {
            b"path" => path = Some(value.to_vec()),
            b"size" => {
                let parsed = std::str::from_utf8(value).ok().and_then(|s| s.parse().ok());
                size = Some(parsed.ok_or_else(malformed)?);
            }
            _ => {}
        }
    }
    Ok((path, size))
}

/// The path in a tar header: `prefix/name` when the ustar prefix is set.
/// Readers disagree about the prefix field (Go reads only 131 bytes of it when
/// the header has star's trailer, Python reads it whatever the magic), so a
/// prefix is accepted only in a ustar header and NUL-terminated within 131 bytes.
fn header_path(header: &tar::Header) -> Result<Vec<u8>, ArchiveError> {
    let raw = header.as_bytes();
    let until_nul = |b: &[u8]| -> Vec<u8> { b.iter().copied().take_while(|c| *c != 0).collect() };
    let name = until_nul(&raw[..100]);
    let prefix = &raw[345..500];
    if prefix[0] == 0 {
        return Ok(name);
    }
    if &raw[257..263] != b"ustar\0" || !prefix[..131].contains(&0) {
        return Err(ArchiveError::Unsupported {
            name: String::from_utf8_lossy(&name).into_owned(),
            what: "a header prefix that tar readers interpret differently".into(),
        });
    }
    let mut path = until_nul(prefix);
    path.push(b'/');
    path.extend_from_slice(&name);
    Ok(path)
}

fn kind(ty: tar::EntryType) -> String {
    match ty {
        tar::EntryType::Symlink => "symbolic link".into(),
        tar::EntryType::Link => "hard link".into(),
        tar::EntryType::Char => "character device".into(),
        tar::EntryType::Block => "block device".into(),
        tar::EntryType::Fifo => "named pipe".into(),
        tar::EntryType::GNUSparse => "sparse file".into(),
        tar::EntryType::GNULongLink => "GNU long link name".into(),
        other => format!("tar entry of type {:?}", other.as_byte() as char),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::read::GzDecoder;
    use tar::EntryType;

    fn tree() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("main.tf"), "variable \"x\" {}\n").unwrap();
        std::fs::create_dir_all(dir.path().join("modules/sub")).unwrap();
        std::fs::write(
            dir.path().join("modules/sub/main.tf"),
            "output \"y\" { value = 1 }\n",
        )
        .unwrap();
        std::fs::create_dir_all(dir.path().join(".git")).unwrap();
        std::fs::write(dir.path().join(".git/config"), "secret").unwrap();
        std::fs::create_dir_all(dir.path().join(".terraform/providers")).unwrap();
        std::fs::write(dir.path().join(".terraform/providers/x"), "big").unwrap();
        dir
    }

    fn names(tgz: &[u8]) -> Vec<String> {
        let mut a = tar::Archive::new(GzDecoder::new(tgz));
        a.entries()
            .unwrap()
            .map(|e| e.unwrap().path().unwrap().display().to_string())
            .collect()
    }

    #[test]
    fn the_check_keeps_the_files_the_docs_are_read_from() {
        let dir = tree();
        std::fs::write(dir.path().join("README.md"), "# M\n").unwrap();
        std::fs::write(dir.path().join("LICENSE"), "MIT").unwrap();
        let big = "#".repeat(crate::module_docs::MAX_FILE_BYTES + 1);
        std::fs::write(dir.path().join("big.tf"), big).unwrap();
        let tgz = pack_dir(dir.path(), Vec::new()).unwrap();
        let summary = check_tar_gz(tgz.as_slice()).unwrap();
        let mut kept: Vec<&str> = summary.docs_files.iter().map(|(n, _)| n.as_str()).collect();
        kept.sort_unstable();
        assert_eq!(kept, ["README.md", "main.tf", "modules/sub/main.tf"]);
        let main = &summary
            .docs_files
            .iter()
            .find(|(n, _)| n == "main.tf")
            .unwrap()
            .1;
        assert_eq!(main, b"variable \"x\" {}\n");
        assert_eq!(summary.docs_skipped.len(), 1, "{:?}", summary.docs_skipped);
        assert!(summary.docs_skipped[0].starts_with("big.tf: not read"));
    }

    /// A module of `files` `.tf` files of `size` bytes each in
    /// `examples/eN/`, and a README at the end of the archive.
    fn docs_bomb(files: usize, size: usize) -> Vec<u8> {
        let dir = tempfile::tempdir().unwrap();
        let block = "variable \"v\" {\n  default = 1\n}\n";
        let body = block.repeat(size / block.len());
        for i in 0..files {
            let sub = dir.path().join(format!("examples/e{i:04}"));
            std::fs::create_dir_all(&sub).unwrap();
            std::fs::write(sub.join("main.tf"), &body).unwrap();
        }
        std::fs::write(dir.path().join("main.tf"), "variable \"x\" {}\n").unwrap();
        std::fs::write(dir.path().join("README.md"), "# Bomb\n").unwrap();
        pack_dir(dir.path(), Vec::new()).unwrap()
    }

    #[test]
    fn past_the_docs_bounds_no_tf_file_is_kept_but_the_readme_is() {
        use crate::module_docs::{MAX_DOCS_BYTES, MAX_DOCS_FILES, MAX_FILE_BYTES, Unread};
        // More files than the bound, each small.
        let summary = check_tar_gz(docs_bomb(MAX_DOCS_FILES, 64).as_slice()).unwrap();
        assert_eq!(summary.docs_unread, Some(Unread::Files));
        let kept: Vec<&str> = summary.docs_files.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(kept, ["README.md"]);
        // More bytes than the bound, in few files.
        let files = MAX_DOCS_BYTES / MAX_FILE_BYTES + 1;
        let summary = check_tar_gz(docs_bomb(files, MAX_FILE_BYTES - 64).as_slice()).unwrap();
        assert_eq!(summary.docs_unread, Some(Unread::Bytes));
        let kept: Vec<&str> = summary.docs_files.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(kept, ["README.md"]);
        // Within both: everything kept.
        let summary = check_tar_gz(docs_bomb(3, 1024).as_slice()).unwrap();
        assert_eq!(summary.docs_unread, None);
        assert_eq!(summary.docs_files.len(), 5);
    }

    #[test]
    fn packing_skips_git_and_terraform_and_is_reproducible() {
        let dir = tree();
        let a = pack_dir(dir.path(), Vec::new()).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(1100));
        std::fs::write(dir.path().join("main.tf"), "variable \"x\" {}\n").unwrap(); // new mtime, same bytes
        let b = pack_dir(dir.path(), Vec::new()).unwrap();
        assert_eq!(a, b);
        let n = names(&a);
        assert!(n.contains(&"main.tf".to_string()));
        assert!(n.contains(&"modules/sub/main.tf".to_string()));
        assert!(
            n.iter()
                .all(|p| !p.starts_with(".git") && !p.starts_with(".terraform")),
            "{n:?}"
        );
        assert_eq!(check_tar_gz(&a[..]).unwrap().files, 2);
    }

    fn raw_tar(path: &str, ty: tar::EntryType, data: &[u8]) -> Vec<u8> {
        let mut b = tar::Builder::new(GzEncoder::new(Vec::new(), Compression::fast()));
        let mut h = tar::Header::new_gnu();
        // Write the name bytes directly so "../" names reach the archive.
        h.as_old_mut().name[..path.len()].copy_from_slice(path.as_bytes());
        h.set_entry_type(ty);
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        b.append(&h, data).unwrap();
        b.into_inner().unwrap().finish().unwrap()
    }

    #[test]
    fn dangerous_or_empty_archives_are_refused() {
        assert!(check_tar_gz(&raw_tar("main.tf", tar::EntryType::Regular, b"x")[..]).is_ok());
        let cases = [
            (
                raw_tar("../evil.tf", tar::EntryType::Regular, b"x"),
                "escapes",
            ),
            (
                raw_tar("/etc/evil.tf", tar::EntryType::Regular, b"x"),
                "escapes",
            ),
            (
                raw_tar("link.tf", tar::EntryType::Symlink, b""),
                "only regular files",
            ),
            (
                raw_tar("README.md", tar::EntryType::Regular, b"x"),
                "no .tf file",
            ),
            (b"not gzip at all".to_vec(), "not a .tar.gz"),
            (Vec::new(), "not a .tar.gz"),
        ];
        for (bytes, want) in cases {
            let err = check_tar_gz(&bytes[..]).unwrap_err().to_string();
            assert!(err.contains(want), "{err} should contain {want}");
        }
    }

    /// The end marker: two zero blocks.
    const END: [u8; 1024] = [0; 1024];

    /// Raw tar blocks (no end marker) for `(name, type, data)` entries, names
    /// written as they are (GNU header), `evil` symlinks pointing at /etc/passwd.
    fn blocks(entries: &[(&str, EntryType, &[u8])]) -> Vec<u8> {
        let mut out = Vec::new();
        for (name, ty, data) in entries {
            let mut h = tar::Header::new_gnu();
            h.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
            h.set_entry_type(*ty);
            h.set_size(data.len() as u64);
            h.set_mode(0o644);
            if *ty == EntryType::Symlink {
                h.set_link_name("/etc/passwd").unwrap();
            }
            h.set_cksum();
            out.extend_from_slice(h.as_bytes());
            out.extend_from_slice(data);
            out.resize(out.len().next_multiple_of(512), 0);
        }
        out
    }

    fn gz(data: &[u8]) -> Vec<u8> {
        let mut e = GzEncoder::new(Vec::new(), Compression::fast());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    fn check(parts: &[Vec<u8>]) -> Result<ModuleSummary, ArchiveError> {
        check_tar_gz(&parts.concat()[..])
    }

    const MAIN: (&str, EntryType, &[u8]) = ("main.tf", EntryType::Regular, b"variable \"x\" {}\n");

    #[test]
    fn a_second_gzip_member_continuing_the_tar_is_read() {
        // Member 1: a tar WITHOUT end marker; member 2 carries the evil entries.
        // A reader of the first member only saw a clean module.
        let first = gz(&blocks(&[MAIN]));
        let evil = [
            ("evil", EntryType::Symlink, &b""[..]),
            ("../escape.tf", EntryType::Regular, b"x"),
        ];
        let second = gz(&[blocks(&evil), END.to_vec()].concat());
        assert!(matches!(
            check(&[first.clone(), second]),
            Err(ArchiveError::NotRegular { ref name, .. }) if name == "evil"
        ));
        let second = gz(&[blocks(&evil[1..]), END.to_vec()].concat());
        assert_eq!(
            check(&[first, second]),
            Err(ArchiveError::Escapes("../escape.tf".into()))
        );
    }

    #[test]
    fn a_second_gzip_member_after_the_end_marker_is_refused() {
        let first = gz(&[blocks(&[MAIN]), END.to_vec()].concat());
        let second = gz(&[
            blocks(&[("../escape.tf", EntryType::Regular, b"x")]),
            END.to_vec(),
        ]
        .concat());
        let err = check(&[first.clone(), second]).unwrap_err();
        assert_eq!(err, ArchiveError::TrailingData);
        assert!(
            err.to_string()
                .contains("data after the end of the tar archive")
        );
        // Non-zero bytes after the end marker in the same member, too.
        let same = gz(&[blocks(&[MAIN]), END.to_vec(), blocks(&[MAIN])].concat());
        assert_eq!(check(&[same]), Err(ArchiveError::TrailingData));
        // And non-gzip garbage after the members.
        assert!(matches!(
            check(&[first, b"garbage".to_vec()]),
            Err(ArchiveError::NotTarGz(_))
        ));
    }

    #[test]
    fn zero_padding_after_the_end_marker_passes() {
        let tar = [blocks(&[MAIN]), END.to_vec()].concat();
        assert_eq!(check(&[gz(&tar)]).unwrap().files, 1);
        // GNU tar pads to a 10 KiB record.
        let mut padded = tar.clone();
        padded.resize(10240, 0);
        assert!(check(&[gz(&padded)]).is_ok());
        // Zero padding in a member of its own, and a tar ending at EOF without marker.
        assert!(check(&[gz(&tar), gz(&[0; 4096])]).is_ok());
        assert!(check(&[gz(&blocks(&[MAIN]))]).is_ok());
        // But not without bound.
        let mut huge = tar;
        huge.resize(1024 + 512 + MAX_TAR_PADDING as usize + 512, 0);
        assert_eq!(check(&[gz(&huge)]), Err(ArchiveError::TrailingData));
    }

    #[test]
    fn a_directory_with_data_cannot_hide_entries() {
        // Go ignores a directory's size and reads the next header right after
        // it; the tar crate would skip the "data" and never see ../escape.tf.
        let hidden = blocks(&[("../escape.tf", EntryType::Regular, b"x")]);
        let tar = [
            blocks(&[MAIN, ("d/", EntryType::Directory, &hidden)]),
            END.to_vec(),
        ]
        .concat();
        assert!(matches!(
            check(&[gz(&tar)]),
            Err(ArchiveError::Corrupt { ref name, .. }) if name == "d/"
        ));
    }

    /// A pax extension block with `records`.
    fn pax(records: &[(&str, &str)]) -> Vec<u8> {
        let mut out = Vec::new();
        for (k, v) in records {
            let body = k.len() + v.len() + 3; // ' ', '=', '\n'
            let mut len = body + 1;
            while len != body + len.to_string().len() {
                len = body + len.to_string().len();
            }
            out.extend_from_slice(format!("{len} {k}={v}\n").as_bytes());
        }
        out
    }

    fn with_pax(ty: EntryType, records: &[(&str, &str)]) -> Result<ModuleSummary, ArchiveError> {
        let data = pax(records);
        let tar = [blocks(&[("pax", ty, &data), MAIN]), END.to_vec()].concat();
        check(&[gz(&tar)])
    }

    #[test]
    fn pax_records_are_read_like_go_reads_them() {
        let x = EntryType::XHeader;
        let g = EntryType::XGlobalHeader;
        assert_eq!(
            with_pax(x, &[("path", "../escape.tf")]),
            Err(ArchiveError::Escapes("../escape.tf".into()))
        );
        assert!(with_pax(x, &[("path", "sub/renamed.tf"), ("mtime", "1.5")]).is_ok());
        // Go renames a sparse entry after GNU.sparse.name.
        assert!(matches!(
            with_pax(
                x,
                &[("GNU.sparse.major", "1"), ("GNU.sparse.name", "../x.tf")]
            ),
            Err(ArchiveError::Unsupported { .. })
        ));
        // Go sizes the entry by the pax record, the header says otherwise.
        assert!(matches!(
            with_pax(x, &[("size", "1024")]),
            Err(ArchiveError::Corrupt { .. })
        ));
        // git archive's global header passes; a global path does not.
        assert!(with_pax(g, &[("comment", "0123456789abcdef")]).is_ok());
        assert!(matches!(
            with_pax(g, &[("path", "x.tf")]),
            Err(ArchiveError::Unsupported { .. })
        ));
        // Records are framed by their length, as in Go.
        let malformed = [blocks(&[("p", x, b"9 path=\n"), MAIN]), END.to_vec()].concat();
        assert!(matches!(
            check(&[gz(&malformed)]),
            Err(ArchiveError::NotTarGz(_))
        ));
    }

    #[test]
    fn gnu_long_names_are_bounded_and_used() {
        let long = format!("{}/../../escape.tf\0", "d/".repeat(60));
        let tar = [
            blocks(&[
                ("././@LongLink", EntryType::GNULongName, long.as_bytes()),
                MAIN,
            ]),
            END.to_vec(),
        ]
        .concat();
        assert_eq!(
            check(&[gz(&tar)]),
            Err(ArchiveError::Escapes(long.trim_end_matches('\0').into()))
        );
        // Refused from the header, before the data is read.
        let mut h = tar::Header::new_gnu();
        h.as_old_mut().name[..13].copy_from_slice(b"././@LongLink");
        h.set_entry_type(EntryType::GNULongName);
        h.set_size(MAX_TAR_EXTENSION_BYTES + 1);
        h.set_cksum();
        assert!(matches!(
            check(&[gz(h.as_bytes())]),
            Err(ArchiveError::Unsupported { .. })
        ));
    }

    #[test]
    fn extension_headers_need_their_magic() {
        // Found by the property tests: a long name in a v7 header (no magic)
        // names the next entry for Go, GNU tar and Python, not for the tar
        // crate, which read this archive's only file as ../evil.tf.
        let v7 = |ty: EntryType, data: &[u8]| {
            let mut h = tar::Header::new_old();
            h.as_old_mut().name[..4].copy_from_slice(b"long");
            h.set_entry_type(ty);
            h.set_size(data.len() as u64);
            h.set_cksum();
            let mut block = h.as_bytes().to_vec();
            block.extend_from_slice(data);
            block.resize(block.len().next_multiple_of(512), 0);
            block
        };
        let evil = blocks(&[("../evil.tf", EntryType::Regular, b"x")]);
        for (ty, data) in [
            (EntryType::GNULongName, &b"safe.tf\0"[..]),
            (EntryType::XHeader, &pax(&[("path", "safe.tf")])[..]),
            (EntryType::XGlobalHeader, &pax(&[("comment", "x")])[..]),
        ] {
            let tar = [v7(ty, data), evil.clone(), END.to_vec()].concat();
            assert_eq!(
                check(&[gz(&tar)]),
                Err(ArchiveError::Unsupported {
                    name: "long".into(),
                    what: "an extension header without ustar or GNU magic".into()
                }),
                "{ty:?}"
            );
        }
    }

    #[test]
    fn ambiguous_header_prefixes_are_refused() {
        let ustar = |prefix: &[u8], magic_ustar: bool| {
            let mut h = if magic_ustar {
                tar::Header::new_ustar()
            } else {
                tar::Header::new_gnu()
            };
            h.as_old_mut().name[..7].copy_from_slice(b"main.tf");
            // The prefix field (bytes 345..500), also in a GNU header.
            h.as_mut_bytes()[345..345 + prefix.len()].copy_from_slice(prefix);
            h.set_size(0);
            h.set_entry_type(EntryType::Regular);
            h.set_cksum();
            check(&[gz(&[h.as_bytes().to_vec(), END.to_vec()].concat())])
        };
        assert!(ustar(b"modules/sub", true).is_ok());
        // Go (star trailer) reads 131 bytes of it, the tar crate 155.
        assert!(matches!(
            ustar(&[b'a'; 140], true),
            Err(ArchiveError::Unsupported { .. })
        ));
        // Python reads a prefix whatever the magic; Go and the tar crate do not.
        assert!(matches!(
            ustar(b"../..", false),
            Err(ArchiveError::Unsupported { .. })
        ));
    }

    #[test]
    fn duplicates_links_and_odd_entries_are_refused() {
        let refused = |entries: &[(&str, EntryType, &[u8])]| {
            check(&[gz(&[blocks(entries), END.to_vec()].concat())]).unwrap_err()
        };
        assert_eq!(
            refused(&[MAIN, ("./main.tf", EntryType::Regular, b"")]),
            ArchiveError::Duplicate("./main.tf".into())
        );
        assert!(matches!(
            refused(&[MAIN, ("x/", EntryType::Regular, b"")]),
            ArchiveError::BadName { .. }
        ));
        for ty in [
            EntryType::Link,
            EntryType::Char,
            EntryType::Fifo,
            EntryType::GNUSparse,
        ] {
            assert!(
                matches!(
                    refused(&[MAIN, ("x", ty, b"")]),
                    ArchiveError::NotRegular { .. }
                ),
                "{ty:?}"
            );
        }
    }

    #[test]
    fn entry_count_and_size_are_bounded() {
        let many: Vec<(String, EntryType, &[u8])> = (0..=MAX_MODULE_ENTRIES)
            .map(|i| (format!("f{i}.tf"), EntryType::Regular, &b""[..]))
            .collect();
        let many: Vec<_> = many.iter().map(|(n, t, d)| (n.as_str(), *t, *d)).collect();
        assert_eq!(
            check(&[gz(&[blocks(&many), END.to_vec()].concat())]),
            Err(ArchiveError::TooManyEntries {
                limit: MAX_MODULE_ENTRIES
            })
        );
        // Refused from the header: the data need not even be there.
        let mut h = tar::Header::new_gnu();
        h.as_old_mut().name[..7].copy_from_slice(b"main.tf");
        h.set_size(MAX_MODULE_UNPACKED + 1);
        h.set_cksum();
        assert_eq!(
            check(&[gz(h.as_bytes())]),
            Err(ArchiveError::TooBig {
                limit: MAX_MODULE_UNPACKED
            })
        );
    }
}
