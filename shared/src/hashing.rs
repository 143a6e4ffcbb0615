//! Package hashes: plain sha256, Terraform's `zh:` (sha256 of the zip) and
//! `h1:` (dirhash Hash1 over the files inside the zip, as `golang.org/x/mod/sumdb/dirhash.HashZip`).

use std::io::{Read, Seek};

use base64::Engine as _;
use sha2::{Digest, Sha256};

/// Why a package could not be hashed.
#[derive(Debug, thiserror::Error)]
pub enum HashError {
    #[error("not a valid zip archive: {0}")]
    NotAZip(String),
    #[error("zip entry name {0:?} contains a newline")]
    NewlineInName(String),
    #[error("reading zip entry {name:?}: {reason}")]
    Entry { name: String, reason: String },
}

/// Lowercase hex sha256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Terraform's `zh:` hash: the hex sha256 of the zip file itself.
pub fn zh_hash(zip_sha256_hex: &str) -> String {
    format!("zh:{zip_sha256_hex}")
}

/// Terraform's `h1:` hash of a zip package: for every entry sorted by name,
/// `hex(sha256(content)) + "  " + name + "\n"`, then `"h1:" + base64(sha256(lines))`.
/// Directory entries count as empty files, exactly as Go's `HashZip` does.
pub fn h1_hash_zip<R: Read + Seek>(reader: R) -> Result<String, HashError> {
    let mut zip = zip::ZipArchive::new(reader).map_err(|e| HashError::NotAZip(e.to_string()))?;
    let mut entries: Vec<(String, String)> = Vec::with_capacity(zip.len());
    for i in 0..zip.len() {
        let mut file = zip
            .by_index(i)
            .map_err(|e| HashError::NotAZip(e.to_string()))?;
        let name = file.name().to_string();
        if name.contains('\n') {
            return Err(HashError::NewlineInName(name));
        }
        let mut hasher = Sha256::new();
        std::io::copy(&mut file, &mut hasher).map_err(|e| HashError::Entry {
            name: name.clone(),
            reason: e.to_string(),
        })?;
        entries.push((name, hex::encode(hasher.finalize())));
    }
    Ok(h1_from_file_hashes(entries))
}

/// Hash1 over `(name, hex sha256)` pairs: the shared last step of every `h1:` hash.
pub fn h1_from_file_hashes(mut entries: Vec<(String, String)>) -> String {
    entries.sort();
    let mut summary = Sha256::new();
    for (name, hash) in &entries {
        summary.update(format!("{hash}  {name}\n").as_bytes());
    }
    format!(
        "h1:{}",
        base64::engine::general_purpose::STANDARD.encode(summary.finalize())
    )
}

/// Names of the regular files in a zip (directories skipped), for sanity checks.
pub fn zip_file_names<R: Read + Seek>(reader: R) -> Result<Vec<String>, HashError> {
    let zip = zip::ZipArchive::new(reader).map_err(|e| HashError::NotAZip(e.to_string()))?;
    Ok(zip
        .file_names()
        .filter(|n| !n.ends_with('/'))
        .map(str::to_string)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    // Fixture zip and its hashes were computed independently of this code:
    // the zip was written by Python's zipfile, h1 by a Python transcription of
    // Go's dirhash.Hash1, and cross-checked with `terraform providers lock`
    // (see tests/fixtures/hashing/README.md).
    const FIXTURE_ZIP: &[u8] = include_bytes!("../tests/fixtures/hashing/sample.zip");
    const FIXTURE_SHA256: &str = include_str!("../tests/fixtures/hashing/sample.zip.sha256");
    const FIXTURE_H1: &str = include_str!("../tests/fixtures/hashing/sample.zip.h1");

    #[test]
    fn sha256_of_known_input() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(zh_hash("ab"), "zh:ab");
    }

    #[test]
    fn h1_matches_independent_computation() {
        assert_eq!(sha256_hex(FIXTURE_ZIP), FIXTURE_SHA256.trim());
        assert_eq!(
            h1_hash_zip(Cursor::new(FIXTURE_ZIP)).unwrap(),
            FIXTURE_H1.trim()
        );
    }

    #[test]
    fn h1_of_empty_file_list_is_hash_of_nothing() {
        // sha256("") base64-encoded, the Hash1 of an empty tree.
        assert_eq!(
            h1_from_file_hashes(vec![]),
            "h1:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="
        );
    }

    #[test]
    fn garbage_is_not_a_zip() {
        assert!(matches!(
            h1_hash_zip(Cursor::new(b"not a zip")),
            Err(HashError::NotAZip(_))
        ));
        assert!(matches!(
            h1_hash_zip(Cursor::new(b"")),
            Err(HashError::NotAZip(_))
        ));
    }

    #[test]
    fn file_names_skip_directories() {
        let names = zip_file_names(Cursor::new(FIXTURE_ZIP)).unwrap();
        assert!(names.iter().all(|n| !n.ends_with('/')));
        assert!(!names.is_empty());
    }
}
