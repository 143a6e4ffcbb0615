//! Provider packages ([`tfreg_verify::archives::provider_zip::inspect`]): arbitrary
//! bytes, mutations of zips as goreleaser makes them, and hostile values in
//! the size, offset, count and length fields of the end record, the central
//! directory and the local headers are accepted or refused with an
//! [`ArchiveError`], never a panic, within bounded heap. A zip that still
//! passes after its headers were edited hashes to the same `h1:`: no header
//! edit changes what the registry records without being refused.

use std::io::Cursor;

use proptest::prelude::*;

use super::{config, mutate, mutations};
use tfreg_testkit::alloc::{MIB, peak_bytes};
use tfreg_testkit::{provider_zip, zip_with};
use tfreg_verify::archives::ArchiveError;
use tfreg_verify::archives::provider_zip::{ProviderZip, inspect};

/// Most heap one inspection of these small zips may hold (the zip crate's
/// central directory and buffers, the names).
const MAX_PEAK: usize = 16 * MIB;

fn bounded(zip: &[u8]) -> Result<Result<ProviderZip, ArchiveError>, TestCaseError> {
    let (result, peak) = peak_bytes(|| inspect(Cursor::new(zip), "null"));
    prop_assert!(peak < MAX_PEAK, "peak heap {peak} bytes");
    Ok(result)
}

/// A provider package: the binary and a few text files, deflated.
fn package() -> impl Strategy<Value = Vec<u8>> {
    let extra = prop::collection::btree_map(
        "(docs/)?[A-Z]{1,8}(\\.md)?",
        prop::collection::vec(any::<u8>(), 0..300),
        0..3,
    );
    (
        "[a-z0-9]{1,8}",
        prop::collection::vec(any::<u8>(), 0..2000),
        extra,
    )
        .prop_map(|(version, binary, extra)| {
            let name = format!("terraform-provider-null_v{version}");
            let mut entries: Vec<(&str, &[u8])> = vec![(&name, &binary)];
            entries.extend(extra.iter().map(|(n, c)| (n.as_str(), c.as_slice())));
            zip_with(&entries)
        })
}

/// Offsets of the fields a hostile zip sets: in the end record, the first
/// central directory header and the first local header, with their widths.
fn header_fields(zip: &[u8]) -> Vec<(usize, usize)> {
    let end = zip.len() - 22;
    let le32 = |at: usize| u32::from_le_bytes(zip[at..at + 4].try_into().unwrap()) as usize;
    let cd = le32(end + 16);
    let mut fields = vec![
        // End record: disk numbers, entry counts, directory size and offset, comment length.
        (end + 4, 2),
        (end + 8, 2),
        (end + 10, 2),
        (end + 12, 4),
        (end + 16, 4),
        (end + 20, 2),
    ];
    // Central directory header: creator, flags, method, crc, sizes, name/extra/comment
    // lengths, external attributes, local header offset.
    for (at, width) in [
        (5, 1),
        (8, 2),
        (10, 2),
        (16, 4),
        (20, 4),
        (24, 4),
        (28, 2),
        (30, 2),
        (32, 2),
        (38, 4),
        (42, 4),
    ] {
        fields.push((cd + at, width));
    }
    // Local header: flags, method, crc, sizes, name and extra lengths.
    for (at, width) in [(6, 2), (8, 2), (14, 4), (18, 4), (22, 4), (26, 2), (28, 2)] {
        fields.push((at, width));
    }
    fields
}

fn hostile_value() -> impl Strategy<Value = u32> {
    prop_oneof![
        prop::sample::select(vec![
            0,
            1,
            8,
            0x7f,
            0x80,
            0xffff,
            0x1_0000,
            0x10_0000,
            0x7fff_ffff,
            0xffff_ffff,
        ]),
        any::<u32>(),
    ]
}

#[test]
fn a_provider_package_passes() {
    let zip = provider_zip("null", "1.0.0", "linux_amd64");
    let (result, peak) = peak_bytes(|| inspect(Cursor::new(&zip), "null"));
    let inspected = result.unwrap();
    assert_eq!(inspected.files, 1);
    assert!(peak < MAX_PEAK, "peak heap {peak} bytes");
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn any_bytes_are_refused_within_bounds(bytes in prop::collection::vec(any::<u8>(), 0..4096), tail in any::<bool>()) {
        // Random bytes, and random bytes ending in an end record signature.
        let mut bytes = bytes;
        if tail {
            let at = bytes.len().saturating_sub(22);
            bytes.splice(at..at, *b"PK\x05\x06");
        }
        prop_assert!(bounded(&bytes)?.is_err());
    }

    #[test]
    fn packages_pass_and_damaged_ones_are_refused_within_bounds(zip in package(), changes in mutations()) {
        let good = bounded(&zip)?.expect("a package passes");
        let damaged = mutate(&zip, &changes);
        if let Ok(inspected) = bounded(&damaged)? {
            // Only bytes nobody reads (a local header's time, say) may change.
            prop_assert_eq!(inspected, good);
        }
    }

    #[test]
    fn hostile_header_fields_are_refused_or_change_nothing(
        zip in package(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), hostile_value()), 1..4),
    ) {
        let good = bounded(&zip)?.expect("a package passes");
        let fields = header_fields(&zip);
        let mut edited = zip.clone();
        for (which, value) in edits {
            let (at, width) = *which.get(&fields);
            edited[at..at + width].copy_from_slice(&value.to_le_bytes()[..width]);
        }
        if let Ok(inspected) = bounded(&edited)? {
            prop_assert_eq!(inspected, good);
        }
    }
}
