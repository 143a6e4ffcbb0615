//! TEMPORARY stub until signing.rs lands.
#[derive(Debug, thiserror::Error)]
pub enum SignatureError { #[error("bad")] Bad }
pub struct PublicKeyInfo { pub key_id: String, pub ascii_armor: String, pub algorithms: Vec<String> }
pub fn parse_public_key(a: &str) -> Result<PublicKeyInfo, SignatureError> { Ok(PublicKeyInfo{key_id: "X".into(), ascii_armor: a.into(), algorithms: vec![]}) }
pub struct VerifiedSignature { pub key_id: String, pub signer_key_id: String, pub algorithm: String, pub legacy_compatible: bool }
pub fn verify_for_terraform(_a: &str, _d: &[u8], _s: &[u8], _m: bool) -> Result<VerifiedSignature, SignatureError> { Err(SignatureError::Bad) }
