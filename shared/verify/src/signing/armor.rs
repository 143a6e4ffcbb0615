//! From the ASCII-armored text of a public key to its packet bytes.

use std::io::Read;

use pgp::armor::{BlockType, Dearmor, DearmorOptions};

use super::SignatureError;

/// Largest accepted ASCII-armored public key (keys with many third-party
/// certifications can be large, but not this large).
pub(super) const MAX_KEY_ARMOR_LEN: usize = 1024 * 1024;

pub(super) const PUBLIC_KEY_BEGIN: &str = "-----BEGIN PGP PUBLIC KEY BLOCK-----";
pub(super) const PUBLIC_KEY_END: &str = "-----END PGP PUBLIC KEY BLOCK-----";
const PRIVATE_KEY_BEGIN: &str = "-----BEGIN PGP PRIVATE KEY BLOCK-----";

/// Check the armor text of a public key and decode it: returns the text without
/// surrounding whitespace (and byte-order mark), and the packet bytes.
pub(super) fn read_public_key_armor(ascii_armor: &str) -> Result<(&str, Vec<u8>), SignatureError> {
    if ascii_armor.len() > MAX_KEY_ARMOR_LEN {
        return Err(SignatureError::MalformedKey(format!(
            "it is larger than {} KiB",
            MAX_KEY_ARMOR_LEN / 1024
        )));
    }
    let text = ascii_armor.trim().trim_start_matches('\u{feff}').trim();
    // Its header lines (`Comment: ...`) are text a publisher writes that
    // Terraform and admins are served as it is: no control character besides
    // line breaks and tabs, no invisible one.
    if let Some(c) = text
        .chars()
        .find(|&c| tfreg_model::text::unprintable(c) && !matches!(c, '\n' | '\r' | '\t'))
    {
        return Err(SignatureError::MalformedKey(format!(
            "the armor holds the invisible or control character U+{:04X}",
            c as u32
        )));
    }
    if text.contains(PRIVATE_KEY_BEGIN) {
        return Err(SignatureError::PrivateKeyGiven);
    }
    if !text.starts_with(PUBLIC_KEY_BEGIN) {
        return Err(SignatureError::NotAPublicKey);
    }
    let blocks = text.matches(PUBLIC_KEY_BEGIN).count();
    if blocks > 1 {
        return Err(SignatureError::MultipleKeys { count: blocks });
    }
    if !text.ends_with(PUBLIC_KEY_END) {
        return Err(SignatureError::MalformedKey(format!(
            "the armor must end with the line {PUBLIC_KEY_END}, with nothing after it"
        )));
    }
    Ok((text, dearmor_public_key(text)?))
}

/// Decode the armor (checking its CRC24, as Go's armor decoder does) into packet bytes.
pub(super) fn dearmor_public_key(text: &str) -> Result<Vec<u8>, SignatureError> {
    // rPGP 0.21's own CRC24 check (`DearmorOptions::enable_crc24_check`) is broken (it
    // updates a copy of the hasher, so every checksum "mismatches"): check it here.
    let options = DearmorOptions::new().set_limit(MAX_KEY_ARMOR_LEN);
    let mut dearmor = Dearmor::with_options(text.as_bytes(), options);
    let mut bytes = Vec::new();
    // The decoded size is bounded by the (already bounded) armor size. The Dearmor is
    // not touched again after an error.
    dearmor.read_to_end(&mut bytes).map_err(|_| {
        SignatureError::MalformedKey(
            "the ASCII armor is damaged (bad base64 text, header or footer line)".to_string(),
        )
    })?;
    match dearmor.typ {
        Some(BlockType::PublicKey) => {}
        Some(BlockType::PrivateKey) => return Err(SignatureError::PrivateKeyGiven),
        _ => return Err(SignatureError::NotAPublicKey),
    }
    // The OpenPGP armor checksum (RFC 9580 section 6.1).
    if let Some(expected) = dearmor.checksum
        && expected != u64::from(crc24::hash_raw(&bytes))
    {
        return Err(SignatureError::MalformedKey(
            "the armor checksum (the =XXXX line) does not match; was the key copied completely?"
                .to_string(),
        ));
    }
    Ok(bytes)
}
