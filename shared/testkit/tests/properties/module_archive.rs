//! Module archives ([`tfreg_verify::archives::module::check_tar_gz`]): arbitrary
//! bytes, mutations of archives packed like `tfreg publish module`, and
//! generated tar streams with hostile headers (GNU long names, pax records,
//! huge declared sizes, odd types) are accepted or refused with an
//! [`ArchiveError`], never a panic, holding at most [`MAX_PEAK`] of heap and
//! without reading what a header declares before its size is checked. What is
//! accepted, the tar crate also reads as safe relative paths.
//!
//! The unit tests at the end rebuild the archive of issue 9: a 1 MB `.tar.gz`
//! whose GNU long name (or pax header) declares 1 GiB.

use std::cell::Cell;
use std::io::{Read, Write};

use flate2::Compression;
use flate2::write::GzEncoder;
use proptest::prelude::*;
use tar::{EntryType, Header};

use super::{config, in_place_mutations, mutate, mutations};
use tfreg_testkit::alloc::{MIB, peak_bytes};
use tfreg_testkit::module_archive;
use tfreg_verify::archives::module::{ModuleSummary, check_tar_gz};
use tfreg_verify::archives::{
    ArchiveError, MAX_MODULE_ENTRIES, MAX_MODULE_UNPACKED, MAX_TAR_EXTENSION_BYTES,
};

/// Most heap a check may hold at once for these small inputs (the decoder's
/// window and buffers, at most one 64 KiB extension header, the names seen).
const MAX_PEAK: usize = 16 * MIB;

/// The end marker: two zero blocks.
const END: [u8; 1024] = [0; 1024];

fn gz(data: &[u8]) -> Vec<u8> {
    gz_at(Compression::fast(), data)
}

fn gz_at(level: Compression, data: &[u8]) -> Vec<u8> {
    let mut e = GzEncoder::new(Vec::new(), level);
    e.write_all(data).expect("gzip to memory");
    e.finish().expect("gzip to memory")
}

fn gunzip(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::MultiGzDecoder::new(data)
        .read_to_end(&mut out)
        .expect("a gzip stream");
    out
}

/// A reader that counts the bytes taken from it.
struct Counted<'a> {
    data: &'a [u8],
    taken: &'a Cell<usize>,
}

impl Read for Counted<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.data.read(buf)?;
        self.taken.set(self.taken.get() + n);
        Ok(n)
    }
}

/// Outcome of one check: the result, the peak heap and the compressed bytes read.
struct Checked {
    result: Result<ModuleSummary, ArchiveError>,
    peak: usize,
    read: usize,
}

fn check(tgz: &[u8]) -> Checked {
    let taken = Cell::new(0);
    let (result, peak) = peak_bytes(|| {
        check_tar_gz(Counted {
            data: tgz,
            taken: &taken,
        })
    });
    Checked {
        result,
        peak,
        read: taken.get(),
    }
}

/// The check's result, failing the case if it held more than [`MAX_PEAK`].
fn bounded(tgz: &[u8]) -> Result<Result<ModuleSummary, ArchiveError>, TestCaseError> {
    let checked = check(tgz);
    prop_assert!(checked.peak < MAX_PEAK, "peak heap {} bytes", checked.peak);
    Ok(checked.result)
}

/// What an accepted archive must look like to the tar crate's own reader (the
/// one `tar::Archive::unpack` uses): every entry a regular file or directory
/// at a relative path without `..`, as many files as the summary says. Pax
/// global headers it hands on as entries, and unpacks nothing for them (nor
/// do Go's go-getter, GNU tar or Python): their names are not paths.
fn tar_crate_agrees(tgz: &[u8], summary: &ModuleSummary) -> Result<(), TestCaseError> {
    let mut archive = tar::Archive::new(flate2::read::MultiGzDecoder::new(tgz));
    let mut files = 0;
    for entry in archive.entries().expect("entries") {
        let entry = entry.expect("an accepted archive reads");
        let path = entry.path().expect("a path").into_owned();
        match entry.header().entry_type() {
            EntryType::XGlobalHeader => continue,
            EntryType::Regular | EntryType::Continuous => files += 1,
            EntryType::Directory => {}
            other => prop_assert!(false, "{other:?} entry {}", path.display()),
        }
        prop_assert!(path.is_relative(), "{}", path.display());
        prop_assert!(
            path.components()
                .all(|c| !matches!(c, std::path::Component::ParentDir)),
            "{}",
            path.display()
        );
    }
    prop_assert_eq!(files, summary.files);
    Ok(())
}

/// Module files: `.tf` and other text at nested paths.
fn module_files() -> impl Strategy<Value = Vec<(String, String)>> {
    let path = "[a-z]{1,8}(/[a-z]{1,8}){0,2}\\.(tf|md|tf\\.json)";
    prop::collection::btree_map(path, "[ -~\n]{0,200}", 1..6).prop_map(|files| {
        let mut files: Vec<_> = files.into_iter().collect();
        files.push(("main.tf".into(), "variable \"x\" {}\n".into()));
        // A path may not be both a file and a directory.
        let dirs: Vec<String> = files
            .iter()
            .flat_map(|(p, _)| {
                let parts: Vec<&str> = p.split('/').collect();
                (1..parts.len()).map(move |n| parts[..n].join("/"))
            })
            .collect();
        files.retain(|(p, _)| !dirs.contains(p));
        files
    })
}

fn packed(files: &[(String, String)]) -> Vec<u8> {
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, c)| (p.as_str(), c.as_str()))
        .collect();
    module_archive(&refs)
}

/// One raw tar entry, with whatever header a hostile archive may carry.
#[derive(Debug, Clone)]
struct RawEntry {
    /// Magic and version: GNU, ustar or none (v7).
    format: Format,
    ty: u8,
    name: Vec<u8>,
    /// The size the header declares; `None` for the data's length.
    size: Option<u64>,
    data: Vec<u8>,
    /// Changes to the header block (its checksum is set afterwards).
    header_changes: Vec<super::Mutation>,
}

#[derive(Debug, Clone, Copy)]
enum Format {
    Gnu,
    Ustar,
    V7,
}

/// Pax records `"<len> key=value\n"`, well framed.
fn pax(records: &[(String, String)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (k, v) in records {
        let body = k.len() + v.len() + 3;
        let mut len = body + 1;
        while len != body + len.to_string().len() {
            len = body + len.to_string().len();
        }
        out.extend_from_slice(format!("{len} {k}={v}\n").as_bytes());
    }
    out
}

fn hostile_size() -> impl Strategy<Value = u64> {
    prop_oneof![
        prop::sample::select(vec![
            MAX_TAR_EXTENSION_BYTES,
            MAX_TAR_EXTENSION_BYTES + 1,
            MAX_MODULE_UNPACKED,
            MAX_MODULE_UNPACKED + 1,
            1 << 30,
            (8 << 30) - 1,
            8 << 30,
            1 << 40,
            u64::MAX - 511,
            u64::MAX,
        ]),
        any::<u64>(),
    ]
}

fn format() -> impl Strategy<Value = Format> {
    prop::sample::select(vec![Format::Gnu, Format::Ustar, Format::V7])
}

/// Data for an extension header: pax records, a long name, or anything.
fn extension_data() -> impl Strategy<Value = Vec<u8>> {
    let key = prop::sample::select(vec![
        "path",
        "size",
        "linkpath",
        "comment",
        "mtime",
        "GNU.sparse.name",
        "GNU.sparse.major",
        "uid",
    ])
    .prop_map(str::to_string);
    let value = prop_oneof!["(\\.\\./)?[a-z]{1,10}(\\.tf)?", "[0-9]{1,20}", ".{0,30}"];
    prop_oneof![
        prop::collection::vec((key, value), 1..4).prop_map(|r| pax(&r)),
        "(\\.\\./)?[a-z]{1,20}(/[a-z]{1,20}){0,3}\\.tf\0{0,3}".prop_map(String::into_bytes),
        prop::collection::vec(any::<u8>(), 0..700),
    ]
}

/// An entry name: plain, escaping, or any bytes.
fn entry_name() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        "(\\./)?[a-z]{1,8}(/[a-z]{1,8}){0,2}(\\.tf)?/?".prop_map(String::into_bytes),
        "(\\.\\./|/|[a-z]:)[a-z]{1,5}\\.tf".prop_map(String::into_bytes),
        Just(b"././@LongLink".to_vec()),
        prop::collection::vec(any::<u8>(), 0..100),
    ]
}

fn raw_entry() -> impl Strategy<Value = RawEntry> {
    let ty = prop_oneof![
        4 => prop::sample::select(b"005LLxxgK12346S7MNV".to_vec()),
        1 => any::<u8>(),
    ];
    let size = prop_oneof![4 => Just(None), 1 => hostile_size().prop_map(Some)];
    let header_changes = prop_oneof![
        3 => Just(Vec::new()),
        1 => mutations(),
    ];
    (
        format(),
        ty,
        entry_name(),
        size,
        extension_data(),
        header_changes,
    )
        .prop_map(|(format, ty, name, size, data, header_changes)| RawEntry {
            format,
            ty,
            name,
            size,
            data,
            header_changes,
        })
}

/// The tar blocks of `entries`: headers as given, data padded to a block.
fn tar_of(entries: &[RawEntry]) -> Vec<u8> {
    let mut out = Vec::new();
    for e in entries {
        let mut h = match e.format {
            Format::Gnu => Header::new_gnu(),
            Format::Ustar => Header::new_ustar(),
            Format::V7 => Header::new_old(),
        };
        let n = e.name.len().min(100);
        h.as_old_mut().name[..n].copy_from_slice(&e.name[..n]);
        h.set_mode(0o644);
        h.set_size(e.size.unwrap_or(e.data.len() as u64));
        h.as_mut_bytes()[156] = e.ty;
        let changed = mutate(h.as_bytes(), &e.header_changes);
        let mut block = [0u8; 512];
        let n = changed.len().min(512);
        block[..n].copy_from_slice(&changed[..n]);
        h.as_mut_bytes().copy_from_slice(&block);
        h.set_cksum();
        out.extend_from_slice(h.as_bytes());
        out.extend_from_slice(&e.data);
        out.resize(out.len().next_multiple_of(512), 0);
    }
    out
}

/// A valid module entry, so that some generated archives pass.
fn main_tf() -> RawEntry {
    RawEntry {
        format: Format::Gnu,
        ty: b'0',
        name: b"main.tf".to_vec(),
        size: None,
        data: b"variable \"x\" {}\n".to_vec(),
        header_changes: Vec::new(),
    }
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn any_bytes_are_refused_within_bounds(bytes in prop::collection::vec(any::<u8>(), 0..4096)) {
        // As they are (mostly not gzip), and gzip'd (the tar parser sees them).
        prop_assert!(bounded(&bytes)?.is_err());
        bounded(&gz(&bytes))?.ok();
    }

    #[test]
    fn packed_modules_pass(files in module_files()) {
        let tgz = packed(&files);
        let summary = bounded(&tgz)?.expect("a packed module passes");
        prop_assert_eq!(summary.files, files.len());
        tar_crate_agrees(&tgz, &summary)?;
    }

    #[test]
    fn damaged_modules_are_refused_or_still_safe(
        files in module_files(),
        changes in prop_oneof![mutations(), in_place_mutations()],
        in_tar in any::<bool>(),
    ) {
        let tgz = packed(&files);
        // Damage the gzip stream, or the tar inside it (gzip'd again).
        let damaged = if in_tar { gz(&mutate(&gunzip(&tgz), &changes)) } else { mutate(&tgz, &changes) };
        if let Ok(summary) = bounded(&damaged)? {
            tar_crate_agrees(&damaged, &summary)?;
        }
    }

    #[test]
    fn hostile_tar_streams_are_refused_or_safe(
        entries in prop::collection::vec(raw_entry(), 1..6),
        main_first in any::<bool>(),
        end in any::<bool>(),
        split in any::<prop::sample::Index>(),
    ) {
        let mut all = entries;
        if main_first { all.insert(0, main_tf()) } else { all.push(main_tf()) }
        let mut tar = tar_of(&all);
        if end {
            tar.extend_from_slice(&END);
        }
        // One gzip member, or two split anywhere (every member is read).
        let at = split.index(tar.len() + 1);
        let one = gz(&tar);
        let two = [gz(&tar[..at]), gz(&tar[at..])].concat();
        for tgz in [one, two] {
            if let Ok(summary) = bounded(&tgz)? {
                tar_crate_agrees(&tgz, &summary)?;
            }
        }
    }

    #[test]
    fn an_accepted_extension_header_means_the_same_to_the_tar_crate(
        format in format(),
        ty in prop::sample::select(b"LxgK".to_vec()),
        data in extension_data(),
        next_format in format(),
        next_name in entry_name(),
    ) {
        let extension = RawEntry { format, ty, name: b"././@LongLink".to_vec(), data, ..main_tf() };
        let next = RawEntry { format: next_format, name: next_name, ..main_tf() };
        let tgz = gz(&[tar_of(&[extension, next]), END.to_vec()].concat());
        if let Ok(summary) = bounded(&tgz)? {
            tar_crate_agrees(&tgz, &summary)?;
        }
    }

    #[test]
    fn an_oversized_extension_header_is_refused_from_its_header(
        ty in prop::sample::select(vec![EntryType::GNULongName, EntryType::XHeader, EntryType::XGlobalHeader]),
        size in (MAX_TAR_EXTENSION_BYTES + 1)..=(64 << 30),
        present in 0..8192usize,
    ) {
        // Only the first few KiB of the declared data are there: a check that
        // reads (or allocates) the declared size fails here.
        let mut h = Header::new_gnu();
        h.as_old_mut().name[..13].copy_from_slice(b"././@LongLink");
        h.set_entry_type(ty);
        h.set_size(size);
        h.set_cksum();
        let tgz = gz(&[h.as_bytes().as_slice(), &vec![b'a'; present]].concat());
        let checked = check(&tgz);
        prop_assert!(
            matches!(checked.result, Err(ArchiveError::Unsupported { .. } | ArchiveError::TooBig { .. })),
            "{:?}", checked.result
        );
        prop_assert!(checked.peak < MIB, "peak heap {} bytes", checked.peak);
    }
}

/// A `.tar.gz` of one extension header of type `ty` declaring `size` bytes
/// (a multiple of 1 MiB) of `a`, the data itself, `main.tf` and the end
/// marker. Written as gzip members, one made once per MiB of data and repeated,
/// so the declared data is never held in memory: 1 GiB takes about 1 MB.
fn huge_extension_tgz(ty: EntryType, size: u64) -> Vec<u8> {
    assert_eq!(size % MIB as u64, 0);
    let mut h = Header::new_gnu();
    h.as_old_mut().name[..13].copy_from_slice(b"././@LongLink");
    h.set_entry_type(ty);
    h.set_size(size);
    h.set_cksum();
    let mut out = gz(h.as_bytes());
    let mib_of_a = gz_at(Compression::best(), &vec![b'a'; MIB]);
    for _ in 0..size / MIB as u64 {
        out.extend_from_slice(&mib_of_a);
    }
    out.extend_from_slice(&gz(&[tar_of(&[main_tf()]), END.to_vec()].concat()));
    out
}

#[test]
fn the_archive_builder_makes_what_it_says() {
    // At 1 MiB, the same builder gives a long name the tar crate reads whole:
    // header, 1 MiB of data, main.tf, the end marker.
    let small = huge_extension_tgz(EntryType::GNULongName, MIB as u64);
    assert_eq!(gunzip(&small).len(), 512 + MIB + 1024 + 1024);
    let mut archive = tar::Archive::new(flate2::read::MultiGzDecoder::new(&small[..]));
    let (names, peak) = peak_bytes(|| {
        archive
            .entries()
            .unwrap()
            .map(|e| e.unwrap().path_bytes().len())
            .collect::<Vec<_>>()
    });
    assert_eq!(names, [MIB]);
    // The measure sees what a reader that trusts the header holds.
    assert!(peak >= MIB, "peak heap {peak} bytes");
    // And check_tar_gz refuses it for its size, holding a fraction of that.
    let checked = check(&small);
    assert!(
        matches!(checked.result, Err(ArchiveError::Unsupported { .. })),
        "{:?}",
        checked.result
    );
    assert!(checked.peak < MIB / 4, "peak heap {} bytes", checked.peak);
}

/// Issue 9: "A 1 MB module .tar.gz holding a 1 GiB GNU long-name entry took
/// the server from 16 MB to 2,129 MB before the 400." The same archive, and its
/// pax local and global header twins, are refused from the header: one 32 KiB
/// buffer read of the 1 MB, well under 1 MiB of heap.
#[test]
fn a_one_gib_extension_header_is_refused_without_reading_it() {
    let one_gib = 1 << 30;
    let cases = [
        (EntryType::GNULongName, "GNU long name"),
        (EntryType::XHeader, "pax header"),
        (EntryType::XGlobalHeader, "pax global header"),
    ];
    for (ty, what) in cases {
        let tgz = huge_extension_tgz(ty, one_gib);
        assert!(
            (MIB / 2..2 * MIB).contains(&tgz.len()),
            "{what}: {} bytes",
            tgz.len()
        );
        let checked = check(&tgz);
        assert_eq!(
            checked.result,
            Err(ArchiveError::TooBig {
                limit: MAX_MODULE_UNPACKED
            }),
            "{what}"
        );
        assert!(
            checked.peak < MIB,
            "{what}: peak heap {} bytes",
            checked.peak
        );
        assert!(
            checked.read < 64 * 1024,
            "{what}: read {} bytes",
            checked.read
        );
    }
}

/// The entry limit is reached while the names held to find duplicates are
/// still small, even when every entry carries a pax path of 4 KiB (this held
/// 40 MB of names before they were kept as digests).
#[test]
fn many_entries_with_long_names_stay_bounded() {
    let entries: Vec<RawEntry> = (0..=MAX_MODULE_ENTRIES)
        .flat_map(|i| {
            let path = format!("{}/{i}.tf", "d".repeat(4000));
            let records = pax(&[("path".to_string(), path)]);
            [
                RawEntry {
                    ty: b'x',
                    name: b"pax".to_vec(),
                    data: records,
                    ..main_tf()
                },
                RawEntry {
                    data: Vec::new(),
                    ..main_tf()
                },
            ]
        })
        .collect();
    let tgz = gz(&[tar_of(&entries), END.to_vec()].concat());
    let checked = check(&tgz);
    assert_eq!(
        checked.result,
        Err(ArchiveError::TooManyEntries {
            limit: MAX_MODULE_ENTRIES
        })
    );
    assert!(
        checked.peak < MAX_PEAK,
        "peak heap {} bytes for {} compressed bytes",
        checked.peak,
        tgz.len()
    );
}
