//! Provider packages: inspecting a `terraform-provider-<TYPE>_<VERSION>_<OS>_<ARCH>.zip`
//! and computing Terraform's `h1:` hash of it in the same pass.
//!
//! Order of work, cheapest first, so a hostile zip costs almost nothing:
//! 1. the end record: entry count, no zip64, nothing before, after or between
//!    the central directory and the end record;
//! 2. the central directory, parsed here: per entry the path, type, method,
//!    declared sizes and ratio, then the totals;
//! 3. the local headers: same name as the central directory, no overlapping data;
//! 4. only then the zip crate, for decompression: it opens the archive while
//!    the bytes before the central directory read as zeros (so it cannot fall
//!    back to fake end records hidden in entry data), its view of every entry
//!    must equal ours, and each entry is streamed into SHA-256, counting bytes.

use std::cell::Cell;
use std::io::{self, Read, Seek, SeekFrom};
use std::rc::Rc;

use sha2::{Digest, Sha256};
use zip::CompressionMethod;
use zip::read::{ArchiveOffset, Config, ZipArchive};

use super::{
    ArchiveError, MAX_RATIO, MAX_ZIP_CENTRAL_DIRECTORY, MAX_ZIP_ENTRIES, MAX_ZIP_UNPACKED,
    RATIO_FLOOR, Seen, check_entry_path,
};
use tfreg_model::hashing::{h1_from_file_hashes, sha256_hex};

/// A provider zip that passed inspection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderZip {
    /// Terraform's `h1:` hash (Go's `dirhash.HashZip` with `Hash1`).
    pub h1: String,
    /// Regular files (directories not counted).
    pub files: usize,
    /// Total unpacked size of the files.
    pub unpacked_bytes: u64,
}

/// Inspect a provider zip and compute its `h1:` hash.
///
/// Refused: entry paths that are absolute, contain `..`, a backslash, a control
/// character or a drive prefix; anything but regular files and directories
/// (unix mode or DOS attributes in the external attributes); duplicate paths;
/// encrypted entries and compression methods other than stored and deflate;
/// more than [`MAX_ZIP_ENTRIES`] entries or [`MAX_ZIP_UNPACKED`] declared bytes;
/// entries above [`RATIO_FLOOR`] (or the whole zip) declaring more than
/// [`MAX_RATIO`]:1; overlapping entry data; entries that unpack to other than
/// their declared size; zip64, split and self-extracting zips; and a zip
/// without `terraform-provider-<provider_type>*` as a regular file at its top level.
///
/// The `h1:` hash: for every entry sorted by name,
/// `hex(sha256(content)) + "  " + name + "\n"`, then `"h1:" + base64(sha256(lines))`;
/// directory entries count as empty files, exactly like Go's `dirhash.HashZip`.
pub fn inspect<R: Read + Seek>(
    mut reader: R,
    provider_type: &str,
) -> Result<ProviderZip, ArchiveError> {
    let (end, entries) = read_entries(&mut reader)?;
    let prefix = format!("terraform-provider-{provider_type}");
    if !entries
        .iter()
        .any(|e| !e.dir && !e.key.contains('/') && e.key.starts_with(&prefix))
    {
        return Err(ArchiveError::NoProviderBinary { prefix });
    }
    hash_entries(reader, &end, entries)
}

/// The `h1:` hash of a zip someone else published (another registry, which
/// the pull-through cache mirrors): [`inspect`] without asking what the zip
/// holds. Its limits (sizes, ratio, entry count and kinds, overlapping data)
/// bound the work of hashing it and make the hash the one Go's
/// `dirhash.HashZip` computes; a refusal only means the registry cannot vouch
/// for an `h1:` of that zip.
pub fn hash_any<R: Read + Seek>(mut reader: R) -> Result<ProviderZip, ArchiveError> {
    let (end, entries) = read_entries(&mut reader)?;
    hash_entries(reader, &end, entries)
}

/// Steps 1 to 3: the end record, the central directory and the local headers.
fn read_entries<R: Read + Seek>(reader: &mut R) -> Result<(EndRecord, Vec<Entry>), ArchiveError> {
    let end = end_record(reader)?;
    let mut entries = central_directory(reader, &end)?;
    for entry in &mut entries {
        check_local_header(reader, entry)?;
    }
    check_layout(&mut entries, &end)?;
    Ok((end, entries))
}

fn not_zip(e: impl std::fmt::Display) -> ArchiveError {
    ArchiveError::NotZip(e.to_string())
}

/// Where the central directory is, from the end of central directory record.
struct EndRecord {
    entries: usize,
    cd_start: u64,
    /// Where the end record starts, which is where the central directory must end.
    cd_end: u64,
    file_len: u64,
}

const END_LEN: usize = 22;

fn end_record<R: Read + Seek>(reader: &mut R) -> Result<EndRecord, ArchiveError> {
    let file_len = reader.seek(SeekFrom::End(0)).map_err(not_zip)?;
    let tail_len = file_len.min((END_LEN + u16::MAX as usize) as u64);
    if tail_len < END_LEN as u64 {
        return Err(not_zip("too short to be a zip"));
    }
    let mut tail = vec![0; tail_len as usize];
    read_at(reader, file_len - tail_len, &mut tail)?;
    let at = tail
        .windows(4)
        .rposition(|w| w == b"PK\x05\x06")
        .ok_or_else(|| not_zip("no end of central directory record"))?;
    let rec = &tail[at..];
    if rec.len() < END_LEN {
        return Err(not_zip("truncated end of central directory record"));
    }
    let (disk, cd_disk, here, total) = (le16(rec, 4), le16(rec, 6), le16(rec, 8), le16(rec, 10));
    let (cd_size, cd_offset, comment) = (le32(rec, 12), le32(rec, 16), le16(rec, 20));
    if at + END_LEN + comment as usize != tail.len() {
        return Err(not_zip("data after the end of central directory record"));
    }
    if disk != 0 || cd_disk != 0 || here != total {
        return Err(not_zip("split (multi-disk) zips are not supported"));
    }
    let zip64_locator = at >= 20 && &tail[at - 20..at - 16] == b"PK\x06\x07";
    if total == u16::MAX || cd_size == u32::MAX || cd_offset == u32::MAX || zip64_locator {
        return Err(not_zip(ZIP64));
    }
    if total as usize > MAX_ZIP_ENTRIES {
        return Err(ArchiveError::TooManyEntries {
            limit: MAX_ZIP_ENTRIES,
        });
    }
    if cd_size as u64 > MAX_ZIP_CENTRAL_DIRECTORY {
        return Err(not_zip(format!(
            "its central directory is over {MAX_ZIP_CENTRAL_DIRECTORY} bytes"
        )));
    }
    let cd_end = file_len - tail_len + at as u64;
    if cd_offset as u64 + cd_size as u64 != cd_end {
        return Err(not_zip(
            "the central directory does not end at the end record (data prepended or in between)",
        ));
    }
    Ok(EndRecord {
        entries: total as usize,
        cd_start: cd_offset as u64,
        cd_end,
        file_len,
    })
}

const ZIP64: &str = "zip64 is not supported (a provider zip is far below 4 GiB and 65,535 entries)";

/// One entry, as read from the central directory and its local header.
struct Entry {
    /// Position in the central directory (the zip crate's index).
    index: usize,
    name: String,
    key: String,
    dir: bool,
    method: u16,
    size: u64,
    compressed: u64,
    header_start: u64,
    data_start: u64,
}

const S_IFMT: u32 = 0o170000;
const S_IFREG: u32 = 0o100000;
const S_IFDIR: u32 = 0o040000;
const S_IFLNK: u32 = 0o120000;

/// Parse and check the central directory: every rule that needs no entry data.
fn central_directory<R: Read + Seek>(
    reader: &mut R,
    end: &EndRecord,
) -> Result<Vec<Entry>, ArchiveError> {
    let mut entries = Vec::with_capacity(end.entries);
    let mut seen = Seen::default();
    let (mut total, mut at) = (0u64, end.cd_start);
    for index in 0..end.entries {
        let mut h = [0u8; 46];
        read_at(reader, at, &mut h)?;
        if &h[..4] != b"PK\x01\x02" {
            return Err(not_zip("bad central directory header"));
        }
        let name_len = le16(&h, 28) as usize;
        let mut raw_name = vec![0u8; name_len];
        read_at(reader, at + 46, &mut raw_name)?;
        at += 46 + name_len as u64 + le16(&h, 30) as u64 + le16(&h, 32) as u64;
        let name = match String::from_utf8(raw_name) {
            Ok(name) => name,
            Err(e) => {
                return Err(ArchiveError::BadName {
                    name: String::from_utf8_lossy(e.as_bytes()).into_owned(),
                    reason: "is not UTF-8",
                });
            }
        };
        check_entry_path(&name)?;
        let dir = name.ends_with('/');
        check_kind(&name, dir, h[5], le32(&h, 38))?;
        let (flags, method) = (le16(&h, 8), le16(&h, 10));
        let (compressed, size, header_start) = (le32(&h, 20), le32(&h, 24), le32(&h, 42));
        if flags & 1 != 0 {
            return Err(unsupported(&name, "encryption"));
        }
        if method != 0 && method != 8 {
            return Err(unsupported(
                &name,
                "a compression method other than stored or deflate",
            ));
        }
        if [compressed, size, header_start].contains(&u32::MAX) {
            return Err(unsupported(&name, ZIP64));
        }
        let (size, compressed) = (size as u64, compressed as u64);
        if dir && size != 0 {
            return Err(ArchiveError::Corrupt {
                name,
                reason: "a directory entry must be empty".into(),
            });
        }
        if size > RATIO_FLOOR && size > compressed.saturating_mul(MAX_RATIO) {
            return Err(ArchiveError::Ratio {
                name,
                limit: MAX_RATIO,
            });
        }
        total += size;
        if total > MAX_ZIP_UNPACKED {
            return Err(ArchiveError::TooBig {
                limit: MAX_ZIP_UNPACKED,
            });
        }
        let key = seen.insert(&name)?;
        entries.push(Entry {
            index,
            name,
            key,
            dir,
            method,
            size,
            compressed,
            header_start: header_start as u64,
            data_start: 0,
        });
    }
    if at != end.cd_end {
        return Err(not_zip(
            "the central directory holds more than its declared entries",
        ));
    }
    if total > RATIO_FLOOR && total > end.file_len.saturating_mul(MAX_RATIO) {
        return Err(ArchiveError::Ratio {
            name: "the zip".into(),
            limit: MAX_RATIO,
        });
    }
    Ok(entries)
}

fn unsupported(name: &str, what: &str) -> ArchiveError {
    ArchiveError::Unsupported {
        name: name.to_string(),
        what: what.to_string(),
    }
}

/// The entry type from the external attributes, read as Go's archive/zip does:
/// a unix mode for unix (3) and macOS (19) creators, the DOS directory bit for
/// FAT (0), NTFS (11) and VFAT (14); the name's trailing `/` marks a directory.
fn check_kind(name: &str, dir: bool, creator: u8, external: u32) -> Result<(), ArchiveError> {
    let not_regular = |kind: &str| {
        Err(ArchiveError::NotRegular {
            name: name.to_string(),
            kind: kind.to_string(),
        })
    };
    let mode_dir = match creator {
        3 | 19 => match (external >> 16) & S_IFMT {
            0 | S_IFREG => false,
            S_IFDIR => true,
            S_IFLNK => return not_regular("symbolic link"),
            _ => return not_regular("special file (device, pipe or socket)"),
        },
        0 | 11 | 14 => external & 0x10 != 0,
        _ => false,
    };
    if mode_dir && !dir {
        return not_regular("directory whose name does not end with /");
    }
    Ok(())
}

/// The local header must be there and name the same file (streaming unzippers
/// read it, not the central directory); it gives where the data starts.
fn check_local_header<R: Read + Seek>(
    reader: &mut R,
    entry: &mut Entry,
) -> Result<(), ArchiveError> {
    let mut h = [0u8; 30];
    read_at(reader, entry.header_start, &mut h)?;
    let name_len = le16(&h, 26) as usize;
    let mut name = vec![0u8; name_len];
    read_at(reader, entry.header_start + 30, &mut name)?;
    if &h[..4] != b"PK\x03\x04" || name != entry.name.as_bytes() {
        return Err(ArchiveError::Corrupt {
            name: entry.name.clone(),
            reason: "its local header is missing or names a different file".into(),
        });
    }
    entry.data_start = entry.header_start + 30 + name_len as u64 + le16(&h, 28) as u64;
    Ok(())
}

/// Refuse entries whose bytes (local header and data) overlap, or run into the
/// central directory: that is how a small zip declares gigabytes of output.
fn check_layout(entries: &mut [Entry], end: &EndRecord) -> Result<(), ArchiveError> {
    entries.sort_by_key(|e| e.header_start);
    for pair in entries.windows(2) {
        if pair[0].data_start + pair[0].compressed > pair[1].header_start {
            return Err(ArchiveError::Overlap {
                first: pair[0].name.clone(),
                second: pair[1].name.clone(),
            });
        }
    }
    match entries.last() {
        Some(last) if last.data_start + last.compressed > end.cd_start => {
            Err(ArchiveError::Overlap {
                first: last.name.clone(),
                second: "the central directory".into(),
            })
        }
        _ => Ok(()),
    }
}

/// Decompress every file into SHA-256 (streamed, never held in memory),
/// counting the bytes, and combine the digests into the `h1:` hash.
fn hash_entries<R: Read + Seek>(
    reader: R,
    end: &EndRecord,
    mut entries: Vec<Entry>,
) -> Result<ProviderZip, ArchiveError> {
    let fence = Rc::new(Cell::new(end.cd_start));
    let fenced = Fenced {
        inner: reader,
        fence: Rc::clone(&fence),
        pos: 0,
    };
    let config = Config {
        archive_offset: ArchiveOffset::Known(0),
    };
    let mut zip = ZipArchive::with_config(config, fenced).map_err(not_zip)?;
    fence.set(0);
    if zip.len() != entries.len() {
        return Err(not_zip(
            "the zip library reads a different number of entries",
        ));
    }
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    let mut hashes = Vec::with_capacity(entries.len());
    let (mut files, mut unpacked_bytes) = (0, 0);
    for entry in entries {
        let corrupt = |e: &dyn std::fmt::Display| ArchiveError::Corrupt {
            name: entry.name.clone(),
            reason: e.to_string(),
        };
        let mut file = zip.by_index(entry.index).map_err(|e| corrupt(&e))?;
        let method = if entry.method == 0 {
            CompressionMethod::Stored
        } else {
            CompressionMethod::Deflated
        };
        let same = file.name_raw() == entry.name.as_bytes()
            && file.header_start() == entry.header_start
            && file.data_start() == entry.data_start
            && file.compressed_size() == entry.compressed
            && file.size() == entry.size
            && file.compression() == method;
        if !same {
            return Err(corrupt(&"the zip library reads it differently"));
        }
        let digest = if entry.dir {
            // Go's zip reader returns no content for a directory entry.
            sha256_hex(b"")
        } else {
            let mut hasher = Sha256::new();
            let read = io::copy(&mut (&mut file).take(entry.size + 1), &mut hasher)
                .map_err(|e| corrupt(&e))?;
            if read != entry.size {
                return Err(ArchiveError::SizeMismatch {
                    name: entry.name,
                    declared: entry.size,
                });
            }
            files += 1;
            unpacked_bytes += entry.size;
            hex::encode(hasher.finalize())
        };
        hashes.push((entry.name, digest));
    }
    Ok(ProviderZip {
        h1: h1_from_file_hashes(hashes),
        files,
        unpacked_bytes,
    })
}

fn le16(b: &[u8], i: usize) -> u16 {
    u16::from_le_bytes([b[i], b[i + 1]])
}

fn le32(b: &[u8], i: usize) -> u32 {
    u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]])
}

fn read_at<R: Read + Seek>(reader: &mut R, at: u64, buf: &mut [u8]) -> Result<(), ArchiveError> {
    reader
        .seek(SeekFrom::Start(at))
        .and_then(|_| reader.read_exact(buf))
        .map_err(|e| not_zip(format!("reading {} bytes at offset {at}: {e}", buf.len())))
}

/// Reads starting more than this before the fence fail (while opening, the zip
/// crate needs only the bytes from the central directory on).
const FENCE_SLACK: u64 = 64 * 1024;

/// The reader handed to the zip crate. While `fence` is non-zero the bytes
/// before it read as zeros and reads starting well before it fail, so that the
/// crate's search for an end record cannot use one hidden in entry data.
struct Fenced<R> {
    inner: R,
    fence: Rc<Cell<u64>>,
    pos: u64,
}

impl<R: Read> Read for Fenced<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let fence = self.fence.get();
        if self.pos.saturating_add(FENCE_SLACK) < fence {
            return Err(io::Error::other("read far before the central directory"));
        }
        let n = self.inner.read(buf)?;
        if self.pos < fence {
            let hidden = usize::try_from(fence - self.pos)
                .unwrap_or(usize::MAX)
                .min(n);
            buf[..hidden].fill(0);
        }
        self.pos += n as u64;
        Ok(n)
    }
}

impl<R: Seek> Seek for Fenced<R> {
    fn seek(&mut self, to: SeekFrom) -> io::Result<u64> {
        self.pos = self.inner.seek(to)?;
        Ok(self.pos)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Cursor, Write};

    // Fixture zip and its hashes were computed independently of this code:
    // the zip was written by Python's zipfile, h1 by a Python transcription of
    // Go's dirhash.Hash1, and cross-checked with `terraform providers lock`
    // (see tests/fixtures/hashing/README.md). It passes the rules as it is:
    // a top-level terraform-provider-sample_v1.0.0, a docs/ directory entry
    // (hashed as an empty file), unix modes without file-type bits.
    const FIXTURE_ZIP: &[u8] = include_bytes!("../../tests/fixtures/hashing/sample.zip");
    const FIXTURE_SHA256: &str = include_str!("../../tests/fixtures/hashing/sample.zip.sha256");
    const FIXTURE_H1: &str = include_str!("../../tests/fixtures/hashing/sample.zip.h1");

    #[test]
    fn h1_matches_independent_computation() {
        assert_eq!(sha256_hex(FIXTURE_ZIP), FIXTURE_SHA256.trim());
        let zip = inspect(Cursor::new(FIXTURE_ZIP), "sample").unwrap();
        assert_eq!(zip.h1, FIXTURE_H1.trim());
        assert_eq!((zip.files, zip.unpacked_bytes), (3, 1213));
    }

    /// One zip entry, as written by [`zip_of`]: `body` is stored as it is.
    #[derive(Clone)]
    struct E {
        name: String,
        local_name: Option<String>,
        body: Vec<u8>,
        method: u16,
        flags: u16,
        size: u32,
        csize: u32,
        crc: u32,
        creator: u8,
        external: u32,
        central_extra: Vec<u8>,
    }

    impl E {
        /// A deflated regular file (unix mode 0644).
        fn file(name: &str, content: &[u8]) -> E {
            let mut enc =
                flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
            enc.write_all(content).unwrap();
            let body = enc.finish().unwrap();
            let mut crc = flate2::Crc::new();
            crc.update(content);
            E {
                name: name.into(),
                local_name: None,
                size: content.len() as u32,
                csize: body.len() as u32,
                body,
                method: 8,
                flags: 0,
                crc: crc.sum(),
                creator: 3,
                external: (S_IFREG | 0o644) << 16,
                central_extra: Vec::new(),
            }
        }
        fn stored(name: &str, content: &[u8]) -> E {
            E {
                method: 0,
                csize: content.len() as u32,
                body: content.to_vec(),
                ..E::file(name, content)
            }
        }
        fn mode(self, creator: u8, external: u32) -> E {
            E {
                creator,
                external,
                ..self
            }
        }
    }

    fn binary() -> E {
        E::file("terraform-provider-foo_v1.0.0", b"\x7fELF provider")
            .mode(3, (S_IFREG | 0o755) << 16)
    }

    fn local(e: &E) -> Vec<u8> {
        let name = e.local_name.as_ref().unwrap_or(&e.name);
        let mut out = b"PK\x03\x04".to_vec();
        for v in [20, e.flags, e.method, 0, 0x21] {
            out.extend_from_slice(&u16::to_le_bytes(v));
        }
        for v in [e.crc, e.csize, e.size] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend_from_slice(&(name.len() as u16).to_le_bytes());
        out.extend_from_slice(&0u16.to_le_bytes());
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(&e.body);
        out
    }

    fn central(e: &E, offset: usize) -> Vec<u8> {
        let mut out = b"PK\x01\x02".to_vec();
        let made_by = (e.creator as u16) << 8 | 20;
        for v in [made_by, 20, e.flags, e.method, 0, 0x21] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        for v in [e.crc, e.csize, e.size] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        for v in [e.name.len() as u16, e.central_extra.len() as u16, 0, 0, 0] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend_from_slice(&e.external.to_le_bytes());
        out.extend_from_slice(&(offset as u32).to_le_bytes());
        out.extend_from_slice(e.name.as_bytes());
        out.extend_from_slice(&e.central_extra);
        out
    }

    /// `data` (local headers and data) followed by a central directory listing
    /// `entries` at the given offsets, and the end record.
    fn with_central(mut data: Vec<u8>, entries: &[(&E, usize)]) -> Vec<u8> {
        let cd_start = data.len();
        for (e, offset) in entries {
            data.extend(central(e, *offset));
        }
        let cd_size = data.len() - cd_start;
        data.extend_from_slice(b"PK\x05\x06\0\0\0\0");
        let n = (entries.len() as u16).to_le_bytes();
        data.extend_from_slice(&[n, n].concat());
        data.extend_from_slice(&(cd_size as u32).to_le_bytes());
        data.extend_from_slice(&(cd_start as u32).to_le_bytes());
        data.extend_from_slice(&[0, 0]);
        data
    }

    /// A well-formed zip of `entries`, the first local header at `base`
    /// (offsets are absolute, as if `base` bytes came before it).
    fn zip_at(base: usize, entries: &[E]) -> Vec<u8> {
        let mut data = vec![0; base];
        let mut listed = Vec::new();
        for e in entries {
            listed.push((e, data.len()));
            data.extend(local(e));
        }
        with_central(data, &listed)[base..].to_vec()
    }

    fn zip_of(entries: &[E]) -> Vec<u8> {
        zip_at(0, entries)
    }

    fn refused(zip: Vec<u8>) -> ArchiveError {
        inspect(Cursor::new(zip), "foo").unwrap_err()
    }

    #[test]
    fn a_normal_provider_zip_passes_with_the_h1_terraform_computes() {
        use zip::write::SimpleFileOptions;
        let content: Vec<u8> = (0..200_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect();
        let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
        let opts = SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated)
            .unix_permissions(0o755);
        w.start_file("terraform-provider-foo_v1.2.3_x5", opts)
            .unwrap();
        w.write_all(&content).unwrap();
        w.start_file("LICENSE", opts).unwrap();
        w.write_all(b"MPL-2.0\n").unwrap();
        w.add_directory("docs/", opts).unwrap();
        w.start_file("docs/README.md", opts).unwrap();
        let bytes = w.finish().unwrap().into_inner();
        let zip = inspect(Cursor::new(&bytes), "foo").unwrap();
        let expected = h1_from_file_hashes(vec![
            (
                "terraform-provider-foo_v1.2.3_x5".into(),
                sha256_hex(&content),
            ),
            ("LICENSE".into(), sha256_hex(b"MPL-2.0\n")),
            ("docs/".into(), sha256_hex(b"")),
            ("docs/README.md".into(), sha256_hex(b"")),
        ]);
        assert_eq!(zip.h1, expected);
        assert_eq!(
            (zip.files, zip.unpacked_bytes),
            (3, content.len() as u64 + 8)
        );
        // The hand-written zips of these tests pass when nothing is wrong.
        let ok = zip_of(&[
            binary(),
            E::stored("./LICENSE", b"x"),
            E::file("docs/", b""),
        ]);
        assert_eq!(inspect(Cursor::new(ok), "foo").unwrap().files, 2);
    }

    #[test]
    fn entry_paths_must_stay_inside() {
        for name in [
            "../../evil.sh",
            "/etc/cron.d/evil",
            "C:/evil.sh",
            "docs/../../evil",
        ] {
            assert_eq!(
                refused(zip_of(&[binary(), E::file(name, b"#!/bin/sh")])),
                ArchiveError::Escapes(name.into())
            );
        }
        for name in ["a\\..\\..\\evil", "evil\n.sh", "evil\0.sh", ""] {
            assert!(matches!(
                refused(zip_of(&[binary(), E::file(name, b"x")])),
                ArchiveError::BadName { .. }
            ));
        }
        // A streaming unzipper reads the local header's name.
        let mut evil = E::file("LICENSE", b"x");
        evil.local_name = Some("../../evil.sh".into());
        assert!(matches!(
            refused(zip_of(&[binary(), evil])),
            ArchiveError::Corrupt { ref name, .. } if name == "LICENSE"
        ));
    }

    #[test]
    fn only_regular_files_and_directories() {
        let link = |name: &str, creator| {
            E::file(name, b"/etc/passwd").mode(creator, (S_IFLNK | 0o777) << 16)
        };
        // A symlink next to the binary, a symlinked binary, and macOS-made symlinks.
        for zip in [
            zip_of(&[binary(), link("evil", 3)]),
            zip_of(&[link("terraform-provider-foo_v1.0.0", 3)]),
            zip_of(&[binary(), link("evil", 19)]),
        ] {
            assert!(matches!(
                refused(zip),
                ArchiveError::NotRegular { ref kind, .. } if kind == "symbolic link"
            ));
        }
        let fifo = E::file("pipe", b"").mode(3, 0o010644 << 16);
        assert!(matches!(
            refused(zip_of(&[binary(), fifo])),
            ArchiveError::NotRegular { .. }
        ));
        // A directory (by unix mode or DOS attribute) whose name lacks the slash.
        let unix_dir = E::file("bin", b"").mode(3, (S_IFDIR | 0o755) << 16);
        let dos_dir = E::file("bin", b"").mode(0, 0x10);
        for dir in [unix_dir, dos_dir] {
            assert!(matches!(
                refused(zip_of(&[binary(), dir])),
                ArchiveError::NotRegular { .. }
            ));
        }
        // A directory entry with content (Go's zip reader fails on it).
        assert!(matches!(
            refused(zip_of(&[binary(), E::file("docs/", b"data")])),
            ArchiveError::Corrupt { .. }
        ));
    }

    #[test]
    fn duplicate_paths_are_refused() {
        for second in ["LICENSE", "./LICENSE", ".//LICENSE"] {
            let zip = zip_of(&[binary(), E::file("LICENSE", b"a"), E::file(second, b"b")]);
            assert_eq!(refused(zip), ArchiveError::Duplicate(second.into()));
        }
    }

    #[test]
    fn the_binary_is_a_regular_file_at_the_top_level() {
        let missing = ArchiveError::NoProviderBinary {
            prefix: "terraform-provider-foo".into(),
        };
        let nested = E::file("bin/terraform-provider-foo_v1.0.0", b"x");
        assert_eq!(refused(zip_of(&[nested])), missing);
        let as_dir = E::file("terraform-provider-foo_v1.0.0/", b"");
        assert_eq!(refused(zip_of(&[as_dir])), missing);
        assert_eq!(refused(zip_of(&[E::file("LICENSE", b"x")])), missing);
        assert_eq!(refused(zip_of(&[])), missing);
        let dotted = E::file("./terraform-provider-foo", b"x");
        assert!(inspect(Cursor::new(zip_of(&[dotted])), "foo").is_ok());
    }

    #[test]
    fn any_zip_is_hashed_under_the_same_limits_without_asking_what_it_holds() {
        assert_eq!(
            hash_any(Cursor::new(FIXTURE_ZIP)),
            inspect(Cursor::new(FIXTURE_ZIP), "sample")
        );
        // No binary at the top level: not publishable, hashed as it is.
        let nested = zip_of(&[E::file("bin/terraform-provider-foo_v1.0.0", b"x")]);
        assert_eq!(
            hash_any(Cursor::new(nested)).unwrap().h1,
            h1_from_file_hashes(vec![(
                "bin/terraform-provider-foo_v1.0.0".into(),
                sha256_hex(b"x")
            )])
        );
        // The limits hold: 200 entries of 1 MiB of zeros, 1000:1 together.
        let mib = E::file("x", &vec![0u8; RATIO_FLOOR as usize]);
        let entries: Vec<E> = (0..200)
            .map(|i| E {
                name: format!("f{i}"),
                ..mib.clone()
            })
            .collect();
        assert!(matches!(
            hash_any(Cursor::new(zip_of(&entries))),
            Err(ArchiveError::Ratio { ref name, .. }) if name == "the zip"
        ));
        let twice = zip_of(&[E::file("a", b"x"), E::file("./a", b"y")]);
        assert_eq!(
            hash_any(Cursor::new(twice)),
            Err(ArchiveError::Duplicate("./a".into()))
        );
    }

    #[test]
    fn overlapping_entries_are_refused_before_decompressing() {
        // David Fifield's construction: the data of `a` (stored) quotes the
        // local header and data of `b`, so the central directory can list both.
        let b = binary();
        let a = E::stored("a", &local(&b));
        let data = local(&a);
        let b_offset = 30 + a.name.len();
        let zip = with_central(data, &[(&a, 0), (&b, b_offset)]);
        assert_eq!(
            refused(zip),
            ArchiveError::Overlap {
                first: "a".into(),
                second: "terraform-provider-foo_v1.0.0".into()
            }
        );
        // Twenty central entries declaring 1 GiB each, all on the same data.
        let mut bomb = binary();
        bomb.size = 1 << 30;
        let names: Vec<E> = (0..20)
            .map(|i| E {
                name: format!("terraform-provider-foo_{i}"),
                ..bomb.clone()
            })
            .collect();
        let listed: Vec<_> = names.iter().map(|e| (e, 0)).collect();
        let started = std::time::Instant::now();
        assert!(matches!(
            refused(with_central(local(&bomb), &listed)),
            ArchiveError::Ratio { .. }
        ));
        assert!(started.elapsed() < std::time::Duration::from_secs(2));
    }

    #[test]
    fn a_high_ratio_entry_is_refused() {
        let zeros = vec![0u8; 100 * 1024 * 1024];
        let bomb = E::file("LICENSE", &zeros);
        assert!(bomb.csize < 200_000, "{}", bomb.csize);
        assert_eq!(
            refused(zip_of(&[binary(), bomb])),
            ArchiveError::Ratio {
                name: "LICENSE".into(),
                limit: MAX_RATIO
            }
        );
        // Many small entries, each under the floor, but 1000:1 together.
        let mib = E::file("x", &zeros[..RATIO_FLOOR as usize]);
        let mut entries = vec![binary()];
        entries.extend((0..200).map(|i| E {
            name: format!("f{i}"),
            ..mib.clone()
        }));
        assert!(
            matches!(refused(zip_of(&entries)), ArchiveError::Ratio { ref name, .. } if name == "the zip")
        );
    }

    #[test]
    fn declared_sizes_are_bounded_and_checked() {
        // Declared only: refused from the central directory, nothing is read.
        let mut big = binary();
        big.size = 1 << 30;
        big.csize = 20 << 20; // 50:1, a plausible ratio
        let entries: Vec<E> = (0..3)
            .map(|i| E {
                name: format!("f{i}"),
                ..big.clone()
            })
            .collect();
        let listed: Vec<_> = entries.iter().map(|e| (e, 0)).collect();
        assert_eq!(
            refused(with_central(local(&binary()), &listed)),
            ArchiveError::TooBig {
                limit: MAX_ZIP_UNPACKED
            }
        );
        // An entry that yields more, or fewer, bytes than it declares.
        let content = vec![7u8; 10_000];
        for declared in [100, 20_000] {
            let mut liar = E::file("LICENSE", &content);
            liar.size = declared;
            assert_eq!(
                refused(zip_of(&[binary(), liar])),
                ArchiveError::SizeMismatch {
                    name: "LICENSE".into(),
                    declared: declared as u64
                }
            );
        }
        // Bad deflate data or CRC.
        let mut bad_crc = E::file("LICENSE", b"text");
        bad_crc.crc ^= 1;
        assert!(matches!(
            refused(zip_of(&[binary(), bad_crc])),
            ArchiveError::Corrupt { .. }
        ));
    }

    #[test]
    fn too_many_entries_are_refused() {
        use zip::write::SimpleFileOptions;
        let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
        let opts = SimpleFileOptions::default();
        for i in 0..=MAX_ZIP_ENTRIES {
            w.start_file(format!("terraform-provider-foo_{i}"), opts)
                .unwrap();
        }
        let bytes = w.finish().unwrap().into_inner();
        assert_eq!(
            refused(bytes),
            ArchiveError::TooManyEntries {
                limit: MAX_ZIP_ENTRIES
            }
        );
    }

    #[test]
    fn encryption_and_other_methods_are_refused() {
        let mut encrypted = E::file("LICENSE", b"x");
        encrypted.flags = 1;
        let mut bzip2 = E::file("LICENSE", b"x");
        bzip2.method = 12;
        for e in [encrypted, bzip2] {
            assert!(matches!(
                refused(zip_of(&[binary(), e])),
                ArchiveError::Unsupported { .. }
            ));
        }
    }

    #[test]
    fn only_plain_zips_are_read() {
        let good = zip_of(&[binary()]);
        let not_zip = |bytes: Vec<u8>| matches!(refused(bytes), ArchiveError::NotZip(_));
        assert!(not_zip(b"not a zip".to_vec()));
        assert!(not_zip(Vec::new()));
        assert!(not_zip([good.clone(), b"appended".to_vec()].concat()));
        assert!(not_zip([b"#!/bin/sh\n".to_vec(), good.clone()].concat()));
        // zip64 marker in the end record.
        let mut zip64 = good.clone();
        let n = zip64.len();
        zip64[n - 12..n - 8].copy_from_slice(&[0xff; 4]);
        assert!(not_zip(zip64));
        // A central directory too big to hold in memory.
        let mut padded = binary();
        padded.central_extra = [&[0xfe, 0xca, 0xf8, 0xff][..], &[0; 0xfff8]].concat();
        let many: Vec<E> = (0..70)
            .map(|i| E {
                name: format!("terraform-provider-foo_{i}"),
                ..padded.clone()
            })
            .collect();
        assert!(not_zip(zip_of(&many)));
        // A broken central directory header.
        let mut broken = good.clone();
        let cd = broken.len() - 22 - 46 - binary().name.len();
        broken[cd + 3] = 3;
        assert!(not_zip(broken));
    }

    #[test]
    fn the_zip_crate_cannot_fall_back_to_an_end_record_hidden_in_data() {
        // The zip crate refuses this central directory (an AES extra field with
        // a bad vendor id; Go and our parser skip it) and would then search
        // backwards for another end record: a complete zip hides in the data
        // of `inner.zip`, its offsets absolute. The fence makes those bytes
        // read as zeros, so the crate finds nothing and opening fails.
        let name = "inner.zip";
        let inner_at = 30 + name.len();
        let mut carrier = E::stored(name, &zip_at(inner_at, &[binary()]));
        carrier.central_extra = vec![0x01, 0x99, 7, 0, 1, 0, 0, 0, 1, 8, 0];
        let outer = zip_of(&[carrier, binary()]);
        let err = refused(outer);
        assert!(
            matches!(err, ArchiveError::NotZip(ref why) if !why.contains("different")),
            "{err}"
        );
        // Fenced itself: zeros before the fence, failure far before it.
        let bytes: Vec<u8> = (1..=255).cycle().take(200_000).collect();
        let fence = Rc::new(Cell::new(150_000));
        let mut r = Fenced {
            inner: Cursor::new(bytes),
            fence: Rc::clone(&fence),
            pos: 0,
        };
        let mut buf = [9u8; 8];
        r.seek(SeekFrom::Start(149_996)).unwrap();
        r.read_exact(&mut buf).unwrap();
        assert_eq!(&buf[..4], &[0; 4]);
        assert!(buf[4..].iter().all(|b| *b != 0));
        r.seek(SeekFrom::Start(0)).unwrap();
        assert!(r.read(&mut buf).is_err());
        fence.set(0);
        r.read_exact(&mut buf).unwrap();
        assert_eq!(buf, [1, 2, 3, 4, 5, 6, 7, 8]);
    }

    #[test]
    fn the_zip_crate_must_read_entries_as_go_does() {
        // A zip64 extra field of 24 bytes: the zip crate takes sizes and offset
        // from it although the 32-bit fields are not 0xFFFFFFFF; Go does not.
        let mut lying = binary();
        lying.central_extra = [&[1, 0, 24, 0][..], &[0; 24]].concat();
        let err = refused(zip_of(&[lying]));
        assert!(
            matches!(err, ArchiveError::Corrupt { ref reason, .. } if reason.contains("differently")),
            "{err}"
        );
    }
}
