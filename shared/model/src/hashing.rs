//! Package hashes: plain sha256, Terraform's `zh:` (sha256 of the zip) and the
//! last step of `h1:` (dirhash Hash1). The `h1:` of a provider zip is computed
//! while inspecting it: [`crate::archives::provider_zip::inspect`].

use base64::Engine as _;
use sha2::{Digest, Sha256};

/// Lowercase hex sha256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Terraform's `zh:` hash: the hex sha256 of the zip file itself.
pub fn zh_hash(zip_sha256_hex: &str) -> String {
    format!("zh:{zip_sha256_hex}")
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_of_known_input() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(zh_hash("ab"), "zh:ab");
    }

    #[test]
    fn h1_of_empty_file_list_is_hash_of_nothing() {
        // sha256("") base64-encoded, the Hash1 of an empty tree.
        assert_eq!(
            h1_from_file_hashes(vec![]),
            "h1:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="
        );
    }
}
