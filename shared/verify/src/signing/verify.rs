//! Checking a detached signature with a loaded key, by Terraform's rules.

use pgp::packet::{Packet, PacketParser, PacketTrait, Signature, SignatureType, SubpacketData};
use pgp::types::{KeyDetails, PublicParams, Tag, VerifyingKey};

use super::describe::{
    algorithm_name, created_secs, format_date, issuer_label, key_expiry, key_id_of, names_issuer,
    signature_expiry,
};
use super::error::short_pgp_error;
use super::key::LoadedKey;
use super::legacy::{known_hash, legacy_signature_problem};
use super::packets::scan_packets;
use super::{CLOCK_SKEW_SECS, SignatureError, VerifiedSignature};

/// Largest accepted detached signature; a real one is a few hundred bytes.
pub(super) const MAX_SIGNATURE_LEN: usize = 64 * 1024;

/// Which part of the key made a signature.
#[derive(Clone, Copy)]
pub(super) enum Signer {
    Primary,
    Subkey(usize),
}

/// What a key that has expired by `now` means for its signatures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Expired {
    /// Refused: a publish must verify for Terraform ≥ 1.6 today.
    Refuse,
    /// Accepted if the key was valid when the signature was made, as the
    /// clients that install accept it ([`PublicKey::verify_as_client`](super::PublicKey::verify_as_client)).
    ValidWhenSigned,
}

/// A signature that passed, and what the callers report about it.
pub(super) struct Checked {
    pub(super) verified: VerifiedSignature,
    /// What Terraform ≤ 1.5 cannot handle in the key or signature, if anything.
    pub(super) legacy_problem: Option<String>,
    /// When the key stopped being valid, if it had by `now` (only with
    /// [`Expired::ValidWhenSigned`]).
    pub(super) key_expired: Option<u64>,
}

/// Verify `signature` over `data` with `key` at the time `now` (seconds since the
/// epoch), treating an expired key as `expired` says.
/// Unguarded: a panic inside rPGP escapes.
pub(super) fn verify_with_key(
    key: &LoadedKey,
    data: &[u8],
    signature: &[u8],
    now: u64,
    expired: Expired,
) -> Result<Checked, SignatureError> {
    let sigs = parse_signature(signature)?;

    // Like Terraform (go-crypto's CheckDetachedSignature): use the first signature whose
    // issuer is a signing-capable (sub)key of the key, and check only that one.
    let mut first_issuer: Option<String> = None;
    let mut unusable: Option<SignatureError> = None;
    for sig in &sigs {
        let issuer = issuer_label(sig).ok_or_else(|| {
            SignatureError::MalformedSignature(
                "it does not name the key that made it (no issuer subpacket)".to_string(),
            )
        })?;
        first_issuer.get_or_insert(issuer);

        let mut candidates = Vec::new();
        if names_issuer(sig, &key.key.primary_key) {
            candidates.push(Signer::Primary);
        }
        for (i, sub) in key.key.public_subkeys.iter().enumerate() {
            if names_issuer(sig, &sub.key) {
                candidates.push(Signer::Subkey(i));
            }
        }
        for signer in candidates {
            match signing_capability(key, signer) {
                Ok(()) => return check_signature(key, signer, sig, data, now, expired),
                Err(reason) => {
                    unusable.get_or_insert(SignatureError::UnusableSigningKey {
                        key_id: signer_key_id(key, signer),
                        reason,
                    });
                }
            }
        }
    }
    Err(unusable.unwrap_or_else(|| SignatureError::UnknownKey {
        key_id: first_issuer.unwrap_or_default(),
    }))
}

/// Split a binary detached signature into its signature packets.
pub(super) fn parse_signature(signature: &[u8]) -> Result<Vec<Signature>, SignatureError> {
    if signature.is_empty() {
        return Err(SignatureError::MalformedSignature(
            "it is empty".to_string(),
        ));
    }
    let trimmed = signature.trim_ascii_start();
    if trimmed.starts_with(b"-----BEGIN PGP") {
        return Err(SignatureError::ArmoredSignature);
    }
    if signature.len() > MAX_SIGNATURE_LEN {
        return Err(SignatureError::MalformedSignature(format!(
            "it is larger than {} KiB (a detached signature is a few hundred bytes)",
            MAX_SIGNATURE_LEN / 1024
        )));
    }
    let tags = scan_packets(signature).map_err(SignatureError::MalformedSignature)?;
    for tag in tags {
        let what = match tag {
            Tag::Signature => continue,
            Tag::OnePassSignature | Tag::CompressedData | Tag::LiteralData => {
                "it is a signed message (gpg --sign); make a detached signature with gpg --detach-sign"
                    .to_string()
            }
            Tag::PublicKey | Tag::PublicSubkey => "it is a public key, not a signature".to_string(),
            Tag::SecretKey | Tag::SecretSubkey => "it is a private key, not a signature".to_string(),
            tag => format!(
                "it contains an OpenPGP packet of type {}, not only signatures",
                u8::from(tag)
            ),
        };
        return Err(SignatureError::MalformedSignature(what));
    }

    let mut sigs = Vec::new();
    for item in PacketParser::new(signature) {
        match item {
            Ok(Packet::Signature(sig)) => {
                if sig.config().is_none() {
                    return Err(SignatureError::MalformedSignature(format!(
                        "signature version {:?} is not supported",
                        sig.version()
                    )));
                }
                match sig.typ() {
                    Some(SignatureType::Binary | SignatureType::Text) => {}
                    typ => {
                        return Err(SignatureError::MalformedSignature(format!(
                            "it is a {typ:?} signature, not a signature over a file"
                        )));
                    }
                }
                sigs.push(sig);
            }
            Ok(other) => {
                return Err(SignatureError::MalformedSignature(format!(
                    "it contains a {:?} packet, not only signatures",
                    other.tag()
                )));
            }
            Err(e) => return Err(SignatureError::MalformedSignature(short_pgp_error(&e))),
        }
    }
    if sigs.is_empty() {
        return Err(SignatureError::MalformedSignature(
            "it contains no signature packet".to_string(),
        ));
    }
    Ok(sigs)
}

/// Whether Terraform would pick `signer` for a signature naming it (go-crypto's
/// `KeysByIdUsage(id, KeyFlagSign)` plus the binding checks done when reading the key).
pub(super) fn signing_capability(key: &LoadedKey, signer: Signer) -> Result<(), String> {
    match signer {
        Signer::Primary => {
            if !key.key.primary_key.algorithm().can_sign() {
                return Err("its algorithm cannot sign".to_string());
            }
            match explicit_key_flags(&key.primary_self_sig) {
                Some(false) => {
                    Err("its self-signature does not mark it for signing (key flag S)".to_string())
                }
                _ => Ok(()),
            }
        }
        Signer::Subkey(i) => {
            let sub = &key.key.public_subkeys[i];
            let state = &key.subkeys[i];
            if !sub.key.algorithm().can_sign() {
                return Err("it is an encryption-only subkey".to_string());
            }
            let Some(binding) = &state.binding else {
                return Err("it has no valid binding signature from the primary key".to_string());
            };
            match explicit_key_flags(binding) {
                Some(false) => Err(
                    "its binding signature does not mark it for signing (key flag S)".to_string(),
                ),
                Some(true) if !state.backsig_ok => Err(
                    "it lacks a valid back-signature (cross-certification) to the primary key"
                        .to_string(),
                ),
                _ => Ok(()),
            }
        }
    }
}

/// `Some(can_sign)` if the self-signature carries a key flags subpacket, `None` if not.
pub(super) fn explicit_key_flags(sig: &Signature) -> Option<bool> {
    let config = sig.config()?;
    config
        .hashed_subpackets()
        .any(|p| matches!(p.data, SubpacketData::KeyFlags(_)))
        .then(|| sig.key_flags().sign())
}

/// The cryptographic check, then Terraform's validity checks at `now`.
///
/// With [`Expired::ValidWhenSigned`], a key that has expired by `now` is
/// judged at the signature's creation time instead; the signature's own
/// checks (dated in the future, expired) stay at `now`. That creation time is
/// the signer's claim: the rule refuses what an honest signer could not
/// have made (gpg will not sign with an expired key), not a backdated
/// signature by whoever still holds the old secret key.
pub(super) fn check_signature(
    key: &LoadedKey,
    signer: Signer,
    sig: &Signature,
    data: &[u8],
    now: u64,
    expired: Expired,
) -> Result<Checked, SignatureError> {
    match signer {
        Signer::Primary => verify_data(sig, &key.key.primary_key, data)?,
        Signer::Subkey(i) => verify_data(sig, &key.key.public_subkeys[i].key, data)?,
    }

    let primary = &key.key.primary_key;
    let primary_id = key_id_of(primary);
    let signer_id = signer_key_id(key, signer);

    // The order of these checks follows go-crypto's checkSignatureDetails.
    if key.primary_revoked || key.primary_identity_revoked {
        return Err(SignatureError::KeyRevoked { key_id: primary_id });
    }
    if let Signer::Subkey(i) = signer
        && key.subkeys[i].revoked
    {
        return Err(SignatureError::KeyRevoked { key_id: signer_id });
    }
    let ends = KeyEnds::of(key, signer);
    let created = u64::from(created_secs(sig));
    let (key_time, key_expired) = match (expired, ends.passed(now)) {
        (Expired::ValidWhenSigned, Some((_, end))) => {
            if let Some((key_id, before)) = ends.passed(created) {
                return Err(SignatureError::SignedAfterKeyExpired {
                    key_id,
                    expired: format_date(before),
                    signed: format_date(created),
                });
            }
            (created, Some(end))
        }
        _ => (now, None),
    };
    if let Some(e) = first_passed(&ends.lifetimes, key_time) {
        return Err(e);
    }
    if created > now.saturating_add(CLOCK_SKEW_SECS) {
        return Err(SignatureError::SignatureInFuture {
            created: format_date(created),
        });
    }
    if let Some(expiry) = signature_expiry(sig).filter(|&e| now > e) {
        return Err(SignatureError::SignatureExpired {
            expired: format_date(expiry),
        });
    }
    if let Some(e) = first_passed(&ends.self_signatures, key_time) {
        return Err(e);
    }

    let algorithm = match signer {
        Signer::Primary => algorithm_name(primary),
        Signer::Subkey(i) => algorithm_name(&key.key.public_subkeys[i].key),
    };
    let legacy_problem = key
        .legacy_problem
        .clone()
        .or_else(|| legacy_signature_problem(sig));
    Ok(Checked {
        verified: VerifiedSignature {
            key_id: key.info.key_id.clone(),
            signer_key_id: signer_id,
            algorithm,
            legacy_compatible: legacy_problem.is_none(),
        },
        legacy_problem,
        key_expired,
    })
}

/// Where a key's validity for a signature by `signer` ends, as `(key ID,
/// last valid second)`, in go-crypto's order: the lifetimes of the primary
/// key and of the signing subkey, then the expiry of the primary
/// self-signature and of the subkey binding (an expired self-signature makes
/// go-crypto refuse too; it is reported as the key having expired).
struct KeyEnds {
    lifetimes: Vec<(String, u64)>,
    self_signatures: Vec<(String, u64)>,
}

impl KeyEnds {
    fn of(key: &LoadedKey, signer: Signer) -> Self {
        let primary = &key.key.primary_key;
        let primary_id = key_id_of(primary);
        let mut lifetimes = Vec::new();
        let mut self_signatures = Vec::new();
        let self_sig = &key.primary_self_sig;
        if let Some(end) = key_expiry(primary.created_at().as_secs(), self_sig) {
            lifetimes.push((primary_id.clone(), end));
        }
        if let Some(end) = signature_expiry(self_sig) {
            self_signatures.push((primary_id, end));
        }
        // The subkey binding carries the subkey's expiry, and may itself expire.
        if let Signer::Subkey(i) = signer
            && let Some(binding) = &key.subkeys[i].binding
        {
            let sub = &key.key.public_subkeys[i].key;
            if let Some(end) = key_expiry(sub.created_at().as_secs(), binding) {
                lifetimes.push((key_id_of(sub), end));
            }
            if let Some(end) = signature_expiry(binding) {
                self_signatures.push((key_id_of(sub), end));
            }
        }
        KeyEnds {
            lifetimes,
            self_signatures,
        }
    }

    /// The first end that has passed at `time`, of either kind.
    fn passed(&self, time: u64) -> Option<(String, u64)> {
        self.lifetimes
            .iter()
            .chain(&self.self_signatures)
            .find(|&&(_, end)| time > end)
            .cloned()
    }
}

/// `KeyExpired` for the first of `ends` that has passed at `time`.
fn first_passed(ends: &[(String, u64)], time: u64) -> Option<SignatureError> {
    ends.iter()
        .find(|&&(_, end)| time > end)
        .map(|(key_id, end)| SignatureError::KeyExpired {
            key_id: key_id.clone(),
            expired: format_date(*end),
        })
}

/// The cryptographic check of `sig` over `data` by one (sub)key.
pub(super) fn verify_data<K: KeyDetails + VerifyingKey>(
    sig: &Signature,
    signer: &K,
    data: &[u8],
) -> Result<(), SignatureError> {
    if !can_verify_params(signer.public_params()) {
        return Err(SignatureError::UnsupportedAlgorithm {
            algorithm: algorithm_name(signer),
        });
    }
    match sig.hash_alg() {
        Some(hash) if known_hash(hash) => {}
        other => {
            return Err(SignatureError::MalformedSignature(format!(
                "it uses an unknown hash algorithm ({other:?})"
            )));
        }
    }
    if sig.created().is_none() {
        return Err(SignatureError::MalformedSignature(
            "it has no creation time".to_string(),
        ));
    }
    sig.verify(signer, data)
        .map_err(|_| SignatureError::BadSignature)
}

/// Whether rPGP holds usable public parameters for this key (unknown curves are kept
/// only as opaque bytes).
pub(super) fn can_verify_params(params: &PublicParams) -> bool {
    use pgp::types::{EcdsaPublicParams, EddsaLegacyPublicParams};
    !matches!(
        params,
        PublicParams::ECDSA(EcdsaPublicParams::Unsupported { .. })
            | PublicParams::EdDSALegacy(EddsaLegacyPublicParams::Unsupported { .. })
            | PublicParams::Unknown { .. }
    )
}

/// Key ID of the (sub)key `signer` of `key`.
fn signer_key_id(key: &LoadedKey, signer: Signer) -> String {
    match signer {
        Signer::Primary => key_id_of(&key.key.primary_key),
        Signer::Subkey(i) => key_id_of(&key.key.public_subkeys[i].key),
    }
}
