//! Small helpers: algorithm names, key IDs, issuers, expiry arithmetic and dates.

use pgp::crypto::ecc_curve::ECCCurve;
use pgp::packet::Signature;
use pgp::ser::Serialize;
use pgp::types::{KeyDetails, PublicParams};

/// Human name of a (sub)key's algorithm.
pub(super) fn algorithm_name<K: KeyDetails>(k: &K) -> String {
    let params = k.public_params();
    match params {
        PublicParams::RSA(_) => format!("RSA {}", leading_mpi_bits(params)),
        PublicParams::DSA(_) => format!("DSA {}", leading_mpi_bits(params)),
        PublicParams::Elgamal(_) => format!("Elgamal {}", leading_mpi_bits(params)),
        PublicParams::ECDSA(p) => format!("ECDSA ({})", curve_name(&p.curve())),
        PublicParams::ECDH(p) => format!("ECDH ({})", curve_name(&p.curve())),
        PublicParams::EdDSALegacy(p) => format!("EdDSA ({})", curve_name(&p.curve())),
        PublicParams::Ed25519(_) => "Ed25519".to_string(),
        PublicParams::X25519(_) => "X25519".to_string(),
        PublicParams::Ed448(_) => "Ed448".to_string(),
        PublicParams::X448(_) => "X448".to_string(),
        _ => format!(
            "{:?} (algorithm {})",
            k.algorithm(),
            u8::from(k.algorithm())
        ),
    }
}

fn curve_name(curve: &ECCCurve) -> String {
    match curve {
        ECCCurve::Curve25519Legacy => "Curve25519".to_string(),
        ECCCurve::Ed25519Legacy => "Ed25519".to_string(),
        ECCCurve::Unknown(oid) => format!("curve {oid}"),
        other => other.name().to_string(),
    }
}

/// Bit length of the first MPI of the public parameters (RSA n, DSA/Elgamal p): an
/// OpenPGP MPI starts with its big-endian bit count.
fn leading_mpi_bits(params: &PublicParams) -> u16 {
    match params.to_bytes() {
        Ok(bytes) if bytes.len() >= 2 => u16::from_be_bytes([bytes[0], bytes[1]]),
        _ => 0,
    }
}

/// Key ID of a (sub)key: 16 uppercase hex digits.
pub(super) fn key_id_of<K: KeyDetails>(k: &K) -> String {
    hex::encode_upper(k.legacy_key_id())
}

/// Whether `sig` names `k` as its issuer, by key ID or fingerprint.
pub(super) fn names_issuer<K: KeyDetails>(sig: &Signature, k: &K) -> bool {
    let id = k.legacy_key_id();
    let fp = k.fingerprint();
    sig.issuer_key_id().iter().any(|i| **i == id)
        || sig.issuer_fingerprint().iter().any(|f| **f == fp)
}

/// Whether a self-signature may have been issued by `k` (it names `k`, or names no one).
pub(super) fn issued_by<K: KeyDetails>(sig: &Signature, k: &K) -> bool {
    (sig.issuer_key_id().is_empty() && sig.issuer_fingerprint().is_empty()) || names_issuer(sig, k)
}

/// The issuer a signature names, for messages: its key ID, else its fingerprint.
pub(super) fn issuer_label(sig: &Signature) -> Option<String> {
    if let Some(id) = sig.issuer_key_id().first() {
        return Some(hex::encode_upper(id));
    }
    sig.issuer_fingerprint()
        .first()
        .map(|fp| hex::encode_upper(fp.as_bytes()))
}

/// Creation time of a signature (seconds since the epoch), 0 if it has none.
pub(super) fn created_secs(sig: &Signature) -> u32 {
    sig.created().map(|t| t.as_secs()).unwrap_or(0)
}

/// Absolute expiry (seconds since the epoch) of a key created at `created`, per the key
/// expiration time subpacket of its self-signature; `None` if it does not expire.
pub(super) fn key_expiry(created: u32, self_sig: &Signature) -> Option<u64> {
    let lifetime = self_sig.key_expiration_time()?.as_secs();
    (lifetime != 0).then(|| u64::from(created) + u64::from(lifetime))
}

/// Absolute expiry (seconds since the epoch) of a signature, if it has one.
pub(super) fn signature_expiry(sig: &Signature) -> Option<u64> {
    let lifetime = sig.signature_expiration_time()?.as_secs();
    (lifetime != 0).then(|| u64::from(created_secs(sig)) + u64::from(lifetime))
}

/// `YYYY-MM-DD` (UTC) for seconds since the epoch. The times formatted here are at most
/// two 32-bit second counts added up (the year 2242).
pub(super) fn format_date(secs: u64) -> String {
    tfreg_model::date::ymd(secs)
}
