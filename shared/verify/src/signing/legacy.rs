//! What Terraform ≤ 1.5 (golang.org/x/crypto/openpgp) cannot read: it knows only v4 (and
//! v2/v3 RSA) keys with RSA, DSA, Elgamal (encryption) and ECDSA/ECDH on the NIST curves,
//! and v3/v4 signatures with an issuer key ID and a hash it knows.

use pgp::crypto::ecc_curve::ECCCurve;
use pgp::crypto::hash::HashAlgorithm;
use pgp::crypto::public_key::PublicKeyAlgorithm;
use pgp::packet::{Signature, SignatureVersion};
use pgp::types::{KeyDetails, KeyVersion, PublicParams};

use super::describe::algorithm_name;

/// What golang.org/x/crypto/openpgp (Terraform ≤ 1.5) cannot handle in the signature
/// itself, if anything.
pub(super) fn legacy_signature_problem(sig: &Signature) -> Option<String> {
    if !matches!(sig.version(), SignatureVersion::V3 | SignatureVersion::V4) {
        return Some(format!("a {:?} signature", sig.version()));
    }
    match sig.hash_alg() {
        Some(hash) if legacy_hash(hash) => {}
        Some(other) => return Some(format!("the {other} hash")),
        None => return Some("an unknown hash".to_string()),
    }
    if sig.version() == SignatureVersion::V4 && sig.issuer_key_id().is_empty() {
        return Some("a signature without an issuer key ID subpacket".to_string());
    }
    None
}

/// The signature hashes golang.org/x/crypto/openpgp knows (Terraform ≤ 1.5).
pub(super) fn legacy_hash(hash: HashAlgorithm) -> bool {
    matches!(
        hash,
        HashAlgorithm::Md5
            | HashAlgorithm::Sha1
            | HashAlgorithm::Ripemd160
            | HashAlgorithm::Sha256
            | HashAlgorithm::Sha384
            | HashAlgorithm::Sha512
            | HashAlgorithm::Sha224
    )
}

/// The signature hashes ProtonMail go-crypto knows (Terraform ≥ 1.6,
/// OpenTofu): the legacy ones and SHA3. A signature with another is refused.
pub(super) fn known_hash(hash: HashAlgorithm) -> bool {
    legacy_hash(hash) || matches!(hash, HashAlgorithm::Sha3_256 | HashAlgorithm::Sha3_512)
}

/// Why Terraform ≤ 1.5 cannot read this (sub)key, if it cannot.
pub(super) fn legacy_problem<K: KeyDetails>(k: &K) -> Option<String> {
    let params = k.public_params();
    let version_ok = match k.version() {
        KeyVersion::V4 => true,
        KeyVersion::V2 | KeyVersion::V3 => matches!(params, PublicParams::RSA(_)),
        _ => false,
    };
    if !version_ok {
        return Some(format!("a version {} key", u8::from(k.version())));
    }
    let nist = |c: ECCCurve| matches!(c, ECCCurve::P256 | ECCCurve::P384 | ECCCurve::P521);
    let ok = match params {
        PublicParams::RSA(_) | PublicParams::DSA(_) => true,
        PublicParams::Elgamal(_) => k.algorithm() == PublicKeyAlgorithm::ElgamalEncrypt,
        PublicParams::ECDSA(p) => nist(p.curve()),
        PublicParams::ECDH(p) => nist(p.curve()),
        _ => false,
    };
    (!ok).then(|| algorithm_name(k))
}
