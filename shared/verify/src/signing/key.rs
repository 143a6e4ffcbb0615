//! Loading a public key: its packets, its primary identity and the state of its subkeys.

use pgp::composed::{Deserializable, SignedPublicKey, SignedPublicSubKey};
use pgp::packet::{Packet, PacketParser, Signature, SignatureType};
use pgp::types::Tag;

use super::armor::read_public_key_armor;
use super::describe::{algorithm_name, created_secs, issued_by, key_id_of};
use super::error::{is_unsupported, short_pgp_error};
use super::legacy::legacy_problem;
use super::packets::scan_packets;
use super::{PublicKeyInfo, SignatureError};

/// A parsed key plus the facts the signature check needs.
pub(super) struct LoadedKey {
    pub(super) key: SignedPublicKey,
    pub(super) info: PublicKeyInfo,
    /// Self-signature of the primary user ID (carries the primary key's flags and expiry).
    pub(super) primary_self_sig: Signature,
    /// All user IDs with a valid self-signature are revoked.
    pub(super) primary_identity_revoked: bool,
    /// A valid key revocation signature exists.
    pub(super) primary_revoked: bool,
    pub(super) subkeys: Vec<SubkeyState>,
    /// First (sub)key algorithm Terraform ≤ 1.5 cannot read, if any.
    pub(super) legacy_problem: Option<String>,
}

/// Validity facts about one subkey.
pub(super) struct SubkeyState {
    /// Newest binding signature that verifies.
    pub(super) binding: Option<Signature>,
    /// The binding marks the subkey for signing and its embedded back-signature verifies.
    pub(super) backsig_ok: bool,
    /// A valid subkey revocation signature exists.
    pub(super) revoked: bool,
}

/// Parse and check an ASCII-armored public key (unguarded: a panic inside rPGP escapes).
pub(super) fn load_key(ascii_armor: &str) -> Result<LoadedKey, SignatureError> {
    let (text, bytes) = read_public_key_armor(ascii_armor)?;
    let tags = scan_packets(&bytes).map_err(SignatureError::MalformedKey)?;
    if tags
        .iter()
        .any(|&t| t == Tag::SecretKey || t == Tag::SecretSubkey)
    {
        return Err(SignatureError::PrivateKeyGiven);
    }
    let primaries = tags.iter().filter(|&&t| t == Tag::PublicKey).count();
    match primaries {
        0 => {
            return Err(SignatureError::MalformedKey(
                "it contains no public key packet".to_string(),
            ));
        }
        1 => {}
        count => return Err(SignatureError::MultipleKeys { count }),
    }
    if tags.first() != Some(&Tag::PublicKey) {
        return Err(SignatureError::MalformedKey(
            "it does not start with a public key packet".to_string(),
        ));
    }
    let key_packets = tags
        .iter()
        .filter(|&&t| t == Tag::PublicKey || t == Tag::PublicSubkey)
        .count();

    let mut packets = Vec::new();
    for item in PacketParser::new(&bytes[..]) {
        match item {
            Ok(Packet::Marker(_) | Packet::Padding(_) | Packet::Trust(_)) => {}
            Ok(packet) => packets.push(packet),
            // Like rPGP's own key reader (and go-crypto), skip packets of unsupported
            // kinds or versions; key packets among them are caught by the count below.
            Err(e) if is_unsupported(&e) => {}
            Err(e) => return Err(SignatureError::MalformedKey(short_pgp_error(&e))),
        }
    }
    let mut parsed = SignedPublicKey::from_packets(packets.into_iter().map(Ok).peekable());
    let key = match parsed.next() {
        Some(Ok(key)) => key,
        Some(Err(e)) => return Err(SignatureError::MalformedKey(short_pgp_error(&e))),
        None => {
            return Err(SignatureError::MalformedKey(
                "its primary key uses an unsupported algorithm or version".to_string(),
            ));
        }
    };
    if parsed.next().is_some() {
        return Err(SignatureError::MultipleKeys { count: 2 });
    }
    let readable = 1 + key.public_subkeys.len();
    if readable != key_packets {
        return Err(SignatureError::MalformedKey(format!(
            "{} of its {key_packets} (sub)keys could not be read (unsupported algorithm, or a subkey without binding signature)",
            key_packets.saturating_sub(readable)
        )));
    }

    let primary = &key.primary_key;
    let (primary_self_sig, primary_identity_revoked) = primary_identity(&key).ok_or_else(|| {
        SignatureError::MalformedKey(
            "it has no user ID with a valid self-signature (Terraform cannot load such a key)"
                .to_string(),
        )
    })?;
    let primary_revoked = key
        .details
        .revocation_signatures
        .iter()
        .any(|sig| issued_by(sig, primary) && sig.verify_key(primary).is_ok());
    let subkeys = key
        .public_subkeys
        .iter()
        .map(|sub| subkey_state(primary, sub))
        .collect();

    let mut algorithms = vec![algorithm_name(primary)];
    algorithms.extend(key.public_subkeys.iter().map(|s| algorithm_name(&s.key)));

    let legacy_problem = legacy_problem(primary).or_else(|| {
        key.public_subkeys.iter().find_map(|s| {
            legacy_problem(&s.key).map(|alg| format!("{alg} (in subkey {})", key_id_of(&s.key)))
        })
    });

    let info = PublicKeyInfo {
        key_id: key_id_of(primary),
        ascii_armor: format!("{text}\n"),
        algorithms,
    };
    Ok(LoadedKey {
        key,
        info,
        primary_self_sig,
        primary_identity_revoked,
        primary_revoked,
        subkeys,
        legacy_problem,
    })
}

/// The primary identity's newest valid self-signature, and whether that identity is
/// revoked. Follows go-crypto: prefer non-revoked identities, then one flagged
/// primary, then the newest self-signature.
pub(super) fn primary_identity(key: &SignedPublicKey) -> Option<(Signature, bool)> {
    let primary = &key.primary_key;
    let mut best: Option<(&Signature, usize)> = None;
    for user in &key.details.users {
        let mut newest: Option<&Signature> = None;
        let mut revocations = 0usize;
        for sig in &user.signatures {
            if !issued_by(sig, primary)
                || sig
                    .verify_certification(primary, Tag::UserId, &user.id)
                    .is_err()
            {
                continue;
            }
            if sig.typ() == Some(SignatureType::CertRevocation) {
                revocations += 1;
            } else if newest.is_none_or(|n| created_secs(sig) >= created_secs(n)) {
                newest = Some(sig);
            }
        }
        let Some(sig) = newest else { continue };
        let better = match best {
            None => true,
            Some((b, b_revocations)) => {
                if revocations != b_revocations {
                    revocations < b_revocations
                } else if sig.is_primary() != b.is_primary() {
                    sig.is_primary()
                } else {
                    created_secs(sig) > created_secs(b)
                }
            }
        };
        if better {
            best = Some((sig, revocations));
        }
    }
    best.map(|(sig, revocations)| (sig.clone(), revocations > 0))
}

/// The newest valid binding, back-signature and revocation state of a subkey.
pub(super) fn subkey_state(
    primary: &pgp::packet::PublicKey,
    sub: &SignedPublicSubKey,
) -> SubkeyState {
    let mut binding: Option<&Signature> = None;
    let mut revoked = false;
    for sig in &sub.signatures {
        if !issued_by(sig, primary) || sig.verify_subkey_binding(primary, &sub.key).is_err() {
            continue;
        }
        match sig.typ() {
            Some(SignatureType::SubkeyRevocation) => revoked = true,
            Some(SignatureType::SubkeyBinding)
                if binding.is_none_or(|b| created_secs(sig) >= created_secs(b)) =>
            {
                binding = Some(sig);
            }
            _ => {}
        }
    }
    let backsig_ok = binding.is_some_and(|b| {
        b.embedded_signature()
            .is_some_and(|back| back.verify_primary_key_binding(&sub.key, primary).is_ok())
    });
    SubkeyState {
        binding: binding.cloned(),
        backsig_ok,
        revoked,
    }
}
