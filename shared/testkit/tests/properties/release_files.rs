//! Release files ([`tfreg_verify::release_files`]): goreleaser file names, SHA256SUMS,
//! the release manifest, protocol lists and file declarations. Arbitrary bytes
//! and mutations of valid files are parsed or refused with a short
//! [`ReleaseError::Invalid`] (or `TooLarge` for sizes), never a panic; valid
//! names and SHA256SUMS files round-trip.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::names::{hostile_text, platform, version};
use super::{config, mutate, mutations};
use tfreg_model::protocol::FileDecl;
use tfreg_verify::release_files::{
    ReleaseError, ReleaseFile, ReleaseFileName, check_against_shasums, check_decls,
    check_protocols, manifest_protocols, parse_shasums, provider_files,
};

/// Longest refusal message: a sentence and a bounded excerpt of the input,
/// never the input itself.
const MAX_MESSAGE: usize = 400;

/// A short `Invalid` refusal (or acceptance).
fn short_refusal<T>(r: Result<T, ReleaseError>) -> Result<Option<T>, TestCaseError> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(ReleaseError::Invalid(msg)) if msg.len() <= MAX_MESSAGE => Ok(None),
        Err(other) => Err(TestCaseError::fail(format!(
            "not a short Invalid refusal ({} bytes): {:.600}",
            other.to_string().len(),
            other.to_string()
        ))),
    }
}

fn release_file() -> impl Strategy<Value = ReleaseFile> {
    prop_oneof![
        platform().prop_map(ReleaseFile::Package),
        Just(ReleaseFile::Shasums),
        Just(ReleaseFile::Signature),
        Just(ReleaseFile::Manifest),
    ]
}

fn release_file_name() -> impl Strategy<Value = ReleaseFileName> {
    (
        "[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?",
        version(),
        release_file(),
    )
        .prop_map(|(ty, v, file)| ReleaseFileName::new(&ty, &v, file))
}

fn sha256() -> impl Strategy<Value = String> {
    "[0-9a-f]{64}"
}

/// A SHA256SUMS file as goreleaser writes it, and the map it holds.
fn shasums() -> impl Strategy<Value = (String, BTreeMap<String, String>)> {
    prop::collection::btree_map(
        release_file_name().prop_map(|n| n.to_string()),
        sha256(),
        1..8,
    )
    .prop_map(|sums| {
        let text = sums.iter().map(|(n, h)| format!("{h}  {n}\n")).collect();
        (text, sums)
    })
}

fn file_decl() -> impl Strategy<Value = FileDecl> {
    let name = prop_oneof![
        release_file_name().prop_map(|n| n.to_string()),
        hostile_text()
    ];
    let sha = prop_oneof![sha256(), hostile_text()];
    let size = prop_oneof![0..2000u64, any::<u64>()];
    (name, sha, size).prop_map(|(name, sha256, size)| FileDecl { name, size, sha256 })
}

const MANIFEST: &[u8] = br#"{"version":1,"metadata":{"protocol_versions":["5.0","6.0"]}}"#;

proptest! {
    #![proptest_config(config(512))]

    #[test]
    fn any_file_name_parses_to_what_it_prints_or_to_nothing(s in hostile_text(), valid in release_file_name()) {
        if let Some(parsed) = ReleaseFileName::parse(&s) {
            prop_assert_eq!(parsed.to_string(), s);
        }
        let printed = valid.to_string();
        prop_assert_eq!(ReleaseFileName::parse(&printed), Some(valid));
    }

    #[test]
    fn shasums_parse_to_their_lines((text, sums) in shasums()) {
        prop_assert_eq!(parse_shasums(text.as_bytes()).unwrap(), sums.clone());
        // `*name` (binary mode) and uppercase hex mean the same.
        let star: String = sums.iter().map(|(n, h)| format!("{}  *{n}\n", h.to_uppercase())).collect();
        prop_assert_eq!(parse_shasums(star.as_bytes()).unwrap(), sums);
    }

    #[test]
    fn any_bytes_or_damaged_shasums_are_refused_briefly(
        (text, _) in shasums(),
        changes in mutations(),
        junk in prop::collection::vec(any::<u8>(), 0..512),
    ) {
        for input in [mutate(text.as_bytes(), &changes), junk] {
            if let Some(sums) = short_refusal(parse_shasums(&input))? {
                prop_assert!(!sums.is_empty());
                prop_assert!(sums.iter().all(|(n, h)| !n.is_empty() && h.len() == 64));
            }
        }
    }

    #[test]
    fn any_bytes_or_damaged_manifests_are_refused_briefly(
        changes in mutations(),
        junk in prop::collection::vec(any::<u8>(), 0..512),
        long in (".{0,16}", 500..5000usize).prop_map(|(s, n)| s.repeat(n)),
    ) {
        prop_assert_eq!(manifest_protocols(MANIFEST).unwrap(), Some(vec!["5.0".into(), "6.0".into()]));
        let long_value = serde_json::json!({"metadata": {"protocol_versions": long}}).to_string();
        let long_key = serde_json::json!({"metadata": {"protocol_versions": [{&long: 1}]}}).to_string();
        for input in [mutate(MANIFEST, &changes), junk, long_value.into_bytes(), long_key.into_bytes()] {
            short_refusal(manifest_protocols(&input))?;
        }
    }

    #[test]
    fn protocol_lists_are_checked_without_panic(list in prop::collection::vec(prop_oneof![hostile_text(), "[0-9]{1,12}(\\.[0-9]{0,12})?"], 0..14)) {
        if let Some(ok) = short_refusal(check_protocols(&list))? {
            prop_assert_eq!(ok, list);
        }
    }

    #[test]
    fn declarations_are_sorted_or_refused_with_a_typed_error(
        files in prop::collection::vec(file_decl(), 0..8),
        ty in "[a-z0-9]{1,8}",
        v in version(),
        signed in any::<bool>(),
        (text, _) in shasums(),
    ) {
        // The messages name declared files, which are checked (at most 128
        // characters) before they are echoed.
        let small = |r: Result<(), ReleaseError>| -> Result<(), TestCaseError> {
            match r {
                Ok(()) => {}
                Err(ReleaseError::Invalid(msg) | ReleaseError::TooLarge(msg)) => {
                    prop_assert!(msg.len() <= 1024, "{} bytes: {:.600}", msg.len(), msg);
                }
                Err(other) => prop_assert!(false, "{other:?}"),
            }
            Ok(())
        };
        small(check_decls(&files, 1000).map(|_| ()))?;
        let sorted = provider_files(&ty, &v, &files, signed, 1000);
        if let Ok(release) = &sorted {
            prop_assert!(!release.zips.is_empty());
            prop_assert!(!signed || (release.shasums.is_some() && release.signature.is_some()));
            let sums = parse_shasums(text.as_bytes()).unwrap();
            small(check_against_shasums(&sums, &release.zips, &ty, &v))?;
        }
        small(sorted.map(|_| ()))?;
    }
}
