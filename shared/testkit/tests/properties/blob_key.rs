//! Blob store keys ([`tfreg_model::blob_key`]): any string is a safe key, file name
//! or upload id or a [`KeyError`], never a panic; what is accepted stays under
//! its prefix with no dot segment, and prints back as itself.

use proptest::prelude::*;

use super::config;
use super::names::hostile_text;
use tfreg_model::blob_key::{
    ARCHIVES, BlobKey, FileName, KeyError, MAX_FILE_NAME_LEN, MAX_KEY_LEN, UPLOADS, UploadId,
};

/// Key-like strings: the two prefixes, safe and unsafe segments, anything.
fn key_text() -> impl Strategy<Value = String> {
    let segment = prop_oneof![
        "[A-Za-z0-9._-]{1,20}",
        prop::sample::select(vec!["", ".", "..", "...", "a\\b", "%2e", " ", "\0", "ä"])
            .prop_map(str::to_string),
        hostile_text(),
    ];
    let prefix = prop::sample::select(vec![UPLOADS, ARCHIVES, "", "/", "uploads", "tls/"]);
    prop_oneof![
        4 => (prefix, prop::collection::vec(segment, 0..6))
            .prop_map(|(p, s)| format!("{p}{}", s.join("/"))),
        1 => hostile_text(),
    ]
}

proptest! {
    #![proptest_config(config(1024))]

    #[test]
    fn an_accepted_key_cannot_escape_its_prefix(s in key_text()) {
        match BlobKey::parse(&s) {
            Ok(key) => {
                prop_assert!(key.as_str().starts_with(UPLOADS) || key.as_str().starts_with(ARCHIVES));
                prop_assert!(key.as_str().len() <= MAX_KEY_LEN);
                prop_assert!(key.as_str().split('/').all(|seg| !seg.is_empty() && seg != "." && seg != ".."));
                prop_assert!(key.as_str().bytes().all(|b| b.is_ascii_alphanumeric() || b"._-/".contains(&b)));
                prop_assert_eq!(key.is_upload(), s.starts_with(UPLOADS));
                prop_assert_eq!(BlobKey::parse(&key.to_string()), Ok(key.clone()));
                prop_assert_eq!(key.as_str(), s.as_str());
                // The serde form is the string.
                prop_assert_eq!(BlobKey::try_from(String::from(key.clone())), Ok(key));
            }
            Err(e) => prop_assert_eq!(e, KeyError::Malformed),
        }
    }

    #[test]
    fn file_names_are_one_safe_segment_or_a_short_error(s in key_text()) {
        match FileName::parse(&s) {
            Ok(name) => {
                prop_assert_eq!(name.as_str(), s.as_str());
                prop_assert!(!s.contains('/') && !s.starts_with('.') && s.len() <= MAX_FILE_NAME_LEN);
            }
            Err(KeyError::FileName(shown)) => prop_assert!(shown.chars().count() <= 80),
            Err(other) => prop_assert!(false, "{other:?}"),
        }
        match UploadId::parse(&s) {
            Ok(id) => prop_assert_eq!(UploadId::try_from(String::from(id)).ok().map(|i| i.to_string()), Some(s.clone())),
            Err(e) => prop_assert_eq!(e, KeyError::UploadId),
        }
    }

    #[test]
    fn constructed_keys_parse_back(id in "[0-9a-f]{32}", name in "[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}") {
        let id = UploadId::parse(&id).unwrap();
        let name = FileName::parse(&name).unwrap();
        for key in [BlobKey::upload(&id, &name), BlobKey::archive(&id, &name)] {
            prop_assert_eq!(BlobKey::parse(key.as_str()), Ok(key.clone()));
            prop_assert_eq!(key.file_name(), name.as_str());
        }
    }
}
