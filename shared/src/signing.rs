//! Verification of Terraform provider release signatures.
//!
//! A provider release is published with a `SHA256SUMS` file, a detached
//! OpenPGP signature over it (`SHA256SUMS.sig`, which must be *binary*, as
//! made by `gpg --detach-sign`) and the ASCII-armored public key that made it.
//! Terraform downloads all three and refuses to install the provider unless
//! the signature verifies, so the registry checks them before a version
//! becomes visible.
//!
//! What Terraform accepts, and what this module therefore checks:
//!
//! * The signature packet names its issuer; the issuer must be the primary
//!   key or a subkey of the given key, and that (sub)key must be allowed to
//!   sign (key flags of its self-signature; a signing subkey needs a valid
//!   binding signature with an embedded back-signature).
//! * At the time of the check, neither the primary key nor the signing subkey
//!   is revoked or expired, and the signature itself has not expired
//!   (Terraform ≥ 1.6 with ProtonMail go-crypto checks these against the
//!   current time, so an expired key breaks installs).
//! * Terraform ≤ 1.5 uses golang.org/x/crypto/openpgp, which reads only RSA,
//!   DSA, Elgamal (encryption), and ECDSA/ECDH on the NIST curves. A key
//!   with *any* other (sub)key, e.g. an Ed25519 primary key or a Curve25519
//!   encryption subkey, is skipped entirely as "unsupported", so no signature
//!   by it can be verified there. [`VerifiedSignature::legacy_compatible`]
//!   reports this, and [`verify_for_terraform`] refuses such signatures
//!   unless modern keys are allowed.
//!
//! Nothing here panics on bad input: every function returns a
//! [`SignatureError`] instead (as a last line of defense, panics inside the
//! OpenPGP library are caught and reported as malformed input).

use std::io::Read;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::{SystemTime, UNIX_EPOCH};

use pgp::armor::{BlockType, Dearmor, DearmorOptions};
use pgp::composed::{Deserializable, SignedPublicKey, SignedPublicSubKey};
use pgp::crypto::ecc_curve::ECCCurve;
use pgp::crypto::hash::HashAlgorithm;
use pgp::crypto::public_key::PublicKeyAlgorithm;
use pgp::errors::Error as PgpError;
use pgp::packet::{
    Packet, PacketParser, PacketTrait, Signature, SignatureType, SignatureVersion, SubpacketData,
};
use pgp::ser::Serialize;
use pgp::types::{KeyDetails, KeyVersion, PublicParams, Tag, VerifyingKey};

/// Largest accepted ASCII-armored public key (keys with many third-party
/// certifications can be large, but not this large).
const MAX_KEY_ARMOR_LEN: usize = 1024 * 1024;

/// Largest accepted detached signature; a real one is a few hundred bytes.
const MAX_SIGNATURE_LEN: usize = 64 * 1024;

/// How far in the future a signature may be dated (clock skew between the signing
/// machine and the registry) before it is refused.
pub const CLOCK_SKEW_SECS: u64 = 60 * 60;

const PUBLIC_KEY_BEGIN: &str = "-----BEGIN PGP PUBLIC KEY BLOCK-----";
const PUBLIC_KEY_END: &str = "-----END PGP PUBLIC KEY BLOCK-----";
const PRIVATE_KEY_BEGIN: &str = "-----BEGIN PGP PRIVATE KEY BLOCK-----";

/// Why a signing key or a release signature was refused.
///
/// The messages are meant to be shown to the person publishing the provider.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    /// The key text is not an ASCII-armored OpenPGP public key block.
    #[error(
        "the signing key must be an ASCII-armored OpenPGP public key (-----BEGIN PGP PUBLIC KEY BLOCK-----, from gpg --armor --export KEYID)"
    )]
    NotAPublicKey,
    /// The key text holds secret key material, which is refused outright.
    #[error("that is a private key: give the public key (gpg --armor --export KEYID)")]
    PrivateKeyGiven,
    /// The key is armored but its content cannot be used; the text says why.
    #[error("the signing key could not be read: {0}")]
    MalformedKey(String),
    /// The armor holds more than one primary key.
    #[error("the armor holds {count} keys; give exactly one public key")]
    MultipleKeys {
        /// How many primary keys were found.
        count: usize,
    },
    /// The signature is ASCII-armored; Terraform needs the binary form.
    #[error("the signature must be binary (gpg --detach-sign), not ASCII-armored")]
    ArmoredSignature,
    /// The signature bytes are not a usable detached OpenPGP signature; the text says why.
    #[error("the signature is not a valid binary OpenPGP detached signature: {0}")]
    MalformedSignature(String),
    /// The signature was made by the given key but does not match the data.
    #[error("the signature over SHA256SUMS does not verify with the given key")]
    BadSignature,
    /// The signature names an issuer that is neither the key nor one of its subkeys.
    #[error("the signature was made by key {key_id}, which is not the given key")]
    UnknownKey {
        /// Issuer key ID (16 uppercase hex digits) or fingerprint named by the signature.
        key_id: String,
    },
    /// The signature was made by a (sub)key of the given key that Terraform will not
    /// accept signatures from.
    #[error("the signature was made by key {key_id}, which may not be used for signing: {reason}")]
    UnusableSigningKey {
        /// Key ID of the (sub)key that made the signature.
        key_id: String,
        /// Why the (sub)key may not sign.
        reason: String,
    },
    /// The primary key, the signing subkey or the key's only user IDs are revoked.
    #[error("key {key_id} has been revoked, so Terraform will refuse its signatures")]
    KeyRevoked {
        /// Key ID of the revoked (sub)key.
        key_id: String,
    },
    /// The primary key or the signing subkey has expired.
    #[error(
        "key {key_id} expired on {expired}, so Terraform will refuse its signatures; extend it (gpg --quick-set-expire) and give the re-exported public key"
    )]
    KeyExpired {
        /// Key ID of the expired (sub)key.
        key_id: String,
        /// Expiry date, `YYYY-MM-DD` (UTC).
        expired: String,
    },
    /// The signature carries an expiration time that has passed.
    #[error("the signature expired on {expired}; sign SHA256SUMS again")]
    SignatureExpired {
        /// Expiry date, `YYYY-MM-DD` (UTC).
        expired: String,
    },
    /// The signature is dated in the future (beyond [`CLOCK_SKEW_SECS`]); Terraform
    /// treats such a signature as expired until that time.
    #[error(
        "the signature is dated {created}, in the future, so Terraform will refuse it until then; check the clock of the machine that signed"
    )]
    SignatureInFuture {
        /// Creation date of the signature, `YYYY-MM-DD` (UTC).
        created: String,
    },
    /// The signing (sub)key uses an algorithm or curve that cannot be verified here.
    #[error("signatures made with {algorithm} keys cannot be verified; sign with an RSA key")]
    UnsupportedAlgorithm {
        /// Human name of the algorithm.
        algorithm: String,
    },
    /// Terraform 1.5 and older cannot verify this signature (see [`verify_for_terraform`]).
    #[error(
        "Terraform 1.5 and older cannot verify this signature because it uses {algorithm}; sign with an RSA key (without ECC subkeys), or publish with --allow-modern-keys"
    )]
    LegacyIncompatibleKey {
        /// The algorithm (and which subkey, if not the signing one) old Terraform cannot handle.
        algorithm: String,
    },
}

/// What the registry records about an accepted signing key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicKeyInfo {
    /// Primary key ID: the last 16 hex digits of the fingerprint, uppercase, as
    /// Terraform's registry protocol and `gpg --with-colons` show it.
    pub key_id: String,
    /// The input armor with surrounding whitespace (and a byte-order mark) removed and a
    /// single trailing newline added; the key is not re-encoded, so Terraform receives
    /// exactly the packets that were checked.
    pub ascii_armor: String,
    /// Human names of the primary key's and then each subkey's algorithm, e.g. `RSA 4096`,
    /// `EdDSA (Ed25519)`, `ECDH (Curve25519)`.
    pub algorithms: Vec<String>,
}

/// The outcome of a successful signature check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifiedSignature {
    /// Primary key ID of the given key (16 uppercase hex digits).
    pub key_id: String,
    /// Key ID of the (sub)key that made the signature; equals `key_id` when the primary signed.
    pub signer_key_id: String,
    /// Human name of the signing (sub)key's algorithm, e.g. `RSA 2048`.
    pub algorithm: String,
    /// Whether Terraform 1.5 and older (golang.org/x/crypto/openpgp) can verify this
    /// signature too: every (sub)key of the key uses an algorithm it reads, and the
    /// signature is a v3/v4 one with an issuer key ID and a hash it knows.
    pub legacy_compatible: bool,
}

/// Parse and check an ASCII-armored OpenPGP public key offered as a provider signing key.
///
/// Refuses secret keys, several keys in one armor, unreadable (sub)keys and keys without
/// a user ID carrying a valid self-signature (Terraform cannot load those).
pub fn parse_public_key(ascii_armor: &str) -> Result<PublicKeyInfo, SignatureError> {
    load_key_guarded(ascii_armor).map(|k| k.info)
}

/// Verify a binary detached signature over `data` with the key (any of its signing-capable subkeys or the primary).
///
/// Besides the cryptographic check this applies Terraform's rules: the issuing (sub)key
/// must be marked for signing, and neither it nor the primary key may be revoked or
/// expired now. `legacy_compatible` in the result tells whether Terraform ≤ 1.5 can
/// verify it as well.
pub fn verify_detached(
    ascii_armor: &str,
    data: &[u8],
    signature: &[u8],
) -> Result<VerifiedSignature, SignatureError> {
    verify_guarded(ascii_armor, data, signature).map(|(verified, _)| verified)
}

/// Verify and additionally refuse (LegacyIncompatibleKey) a signature whose signing key old Terraform (<=1.5) cannot verify, unless allow_modern is true.
///
/// "Cannot verify" covers the whole key: old Terraform discards a key entirely if any of
/// its subkeys uses an algorithm it does not know (e.g. a Curve25519 encryption subkey),
/// even when the signing subkey itself is RSA.
pub fn verify_for_terraform(
    ascii_armor: &str,
    data: &[u8],
    signature: &[u8],
    allow_modern: bool,
) -> Result<VerifiedSignature, SignatureError> {
    let (verified, legacy_problem) = verify_guarded(ascii_armor, data, signature)?;
    match legacy_problem {
        Some(algorithm) if !allow_modern => {
            Err(SignatureError::LegacyIncompatibleKey { algorithm })
        }
        _ => Ok(verified),
    }
}

// ---------------------------------------------------------------------------
// Panic guards

fn load_key_guarded(ascii_armor: &str) -> Result<LoadedKey, SignatureError> {
    catch_unwind(AssertUnwindSafe(|| load_key(ascii_armor))).unwrap_or_else(|_| {
        Err(SignatureError::MalformedKey(
            "the OpenPGP data could not be processed".to_string(),
        ))
    })
}

fn verify_guarded(
    ascii_armor: &str,
    data: &[u8],
    signature: &[u8],
) -> Result<(VerifiedSignature, Option<String>), SignatureError> {
    let key = load_key_guarded(ascii_armor)?;
    catch_unwind(AssertUnwindSafe(|| verify_with_key(&key, data, signature))).unwrap_or_else(|_| {
        Err(SignatureError::MalformedSignature(
            "the OpenPGP data could not be processed".to_string(),
        ))
    })
}

// ---------------------------------------------------------------------------
// Key loading

/// A parsed key plus the facts the signature check needs.
struct LoadedKey {
    key: SignedPublicKey,
    info: PublicKeyInfo,
    /// Self-signature of the primary user ID (carries the primary key's flags and expiry).
    primary_self_sig: Signature,
    /// All user IDs with a valid self-signature are revoked.
    primary_identity_revoked: bool,
    /// A valid key revocation signature exists.
    primary_revoked: bool,
    subkeys: Vec<SubkeyState>,
    /// First (sub)key algorithm Terraform ≤ 1.5 cannot read, if any.
    legacy_problem: Option<String>,
}

/// Validity facts about one subkey.
struct SubkeyState {
    /// Newest binding signature that verifies.
    binding: Option<Signature>,
    /// The binding marks the subkey for signing and its embedded back-signature verifies.
    backsig_ok: bool,
    /// A valid subkey revocation signature exists.
    revoked: bool,
}

fn load_key(ascii_armor: &str) -> Result<LoadedKey, SignatureError> {
    if ascii_armor.len() > MAX_KEY_ARMOR_LEN {
        return Err(SignatureError::MalformedKey(format!(
            "it is larger than {} KiB",
            MAX_KEY_ARMOR_LEN / 1024
        )));
    }
    let text = ascii_armor.trim().trim_start_matches('\u{feff}').trim();
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

    let bytes = dearmor_public_key(text)?;
    let raw = scan_packets(&bytes).map_err(SignatureError::MalformedKey)?;
    if raw
        .iter()
        .any(|p| p.tag == TAG_SECRET_KEY || p.tag == TAG_SECRET_SUBKEY)
    {
        return Err(SignatureError::PrivateKeyGiven);
    }
    let primaries = raw.iter().filter(|p| p.tag == TAG_PUBLIC_KEY).count();
    match primaries {
        0 => {
            return Err(SignatureError::MalformedKey(
                "it contains no public key packet".to_string(),
            ));
        }
        1 => {}
        count => return Err(SignatureError::MultipleKeys { count }),
    }
    if raw.first().map(|p| p.tag) != Some(TAG_PUBLIC_KEY) {
        return Err(SignatureError::MalformedKey(
            "it does not start with a public key packet".to_string(),
        ));
    }
    let key_packets = raw
        .iter()
        .filter(|p| p.tag == TAG_PUBLIC_KEY || p.tag == TAG_PUBLIC_SUBKEY)
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

/// Decode the armor (checking its CRC24, as Go's armor decoder does) into packet bytes.
fn dearmor_public_key(text: &str) -> Result<Vec<u8>, SignatureError> {
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
    if let Some(expected) = dearmor.checksum
        && expected != u64::from(crc24(&bytes))
    {
        return Err(SignatureError::MalformedKey(
            "the armor checksum (the =XXXX line) does not match; was the key copied completely?"
                .to_string(),
        ));
    }
    Ok(bytes)
}

/// The OpenPGP armor checksum (RFC 9580 section 6.1).
fn crc24(data: &[u8]) -> u32 {
    let mut crc: u32 = 0x00B7_04CE;
    for &byte in data {
        crc ^= u32::from(byte) << 16;
        for _ in 0..8 {
            crc <<= 1;
            if crc & 0x0100_0000 != 0 {
                crc ^= 0x0186_4CFB;
            }
        }
    }
    crc & 0x00FF_FFFF
}

/// A one-line, bounded description of an rPGP error (its `Display` can embed `Debug`
/// dumps of whole buffers).
fn short_pgp_error(e: &PgpError) -> String {
    let mut e = e;
    while let PgpError::InvalidPacketContent { source } = e {
        e = source;
    }
    let text = match e {
        PgpError::Message { message, .. } | PgpError::Unsupported { message, .. } => {
            message.clone()
        }
        other => other.to_string(),
    };
    let line = text.lines().next().unwrap_or_default();
    let line = line.split(" {").next().unwrap_or_default().trim();
    let mut short: String = line.chars().take(120).collect();
    if short.is_empty() {
        short = "a packet is damaged".to_string();
    }
    format!("damaged OpenPGP data ({short})")
}

fn is_unsupported(e: &PgpError) -> bool {
    match e {
        PgpError::Unsupported { .. } => true,
        PgpError::InvalidPacketContent { source } => {
            matches!(**source, PgpError::Unsupported { .. })
        }
        _ => false,
    }
}

/// The primary identity's newest valid self-signature, and whether that identity is
/// revoked. Follows go-crypto: prefer non-revoked identities, then one flagged
/// primary, then the newest self-signature.
fn primary_identity(key: &SignedPublicKey) -> Option<(Signature, bool)> {
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

fn subkey_state(primary: &pgp::packet::PublicKey, sub: &SignedPublicSubKey) -> SubkeyState {
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

// ---------------------------------------------------------------------------
// Signature checking

/// Which part of the key made a signature.
#[derive(Clone, Copy)]
enum Signer {
    Primary,
    Subkey(usize),
}

fn verify_with_key(
    key: &LoadedKey,
    data: &[u8],
    signature: &[u8],
) -> Result<(VerifiedSignature, Option<String>), SignatureError> {
    let sigs = parse_signature(signature)?;
    let now = now_secs();

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
                Ok(()) => return check_signature(key, signer, sig, data, now),
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
fn parse_signature(signature: &[u8]) -> Result<Vec<Signature>, SignatureError> {
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
    let raw = scan_packets(signature).map_err(SignatureError::MalformedSignature)?;
    for p in &raw {
        let what = match p.tag {
            TAG_SIGNATURE => continue,
            TAG_ONE_PASS_SIGNATURE | TAG_COMPRESSED_DATA | TAG_LITERAL_DATA => {
                "it is a signed message (gpg --sign); make a detached signature with gpg --detach-sign"
                    .to_string()
            }
            TAG_PUBLIC_KEY | TAG_PUBLIC_SUBKEY => "it is a public key, not a signature".to_string(),
            TAG_SECRET_KEY | TAG_SECRET_SUBKEY => "it is a private key, not a signature".to_string(),
            tag => format!("it contains an OpenPGP packet of type {tag}, not only signatures"),
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
fn signing_capability(key: &LoadedKey, signer: Signer) -> Result<(), String> {
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
fn explicit_key_flags(sig: &Signature) -> Option<bool> {
    let config = sig.config()?;
    config
        .hashed_subpackets()
        .any(|p| matches!(p.data, SubpacketData::KeyFlags(_)))
        .then(|| sig.key_flags().sign())
}

fn check_signature(
    key: &LoadedKey,
    signer: Signer,
    sig: &Signature,
    data: &[u8],
    now: u64,
) -> Result<(VerifiedSignature, Option<String>), SignatureError> {
    match signer {
        Signer::Primary => verify_data(sig, &key.key.primary_key, data)?,
        Signer::Subkey(i) => verify_data(sig, &key.key.public_subkeys[i].key, data)?,
    }

    let primary = &key.key.primary_key;
    let primary_id = key_id_of(primary);
    let signer_id = signer_key_id(key, signer);

    // The order of these checks follows go-crypto's checkSignatureDetails.
    let subkey = match signer {
        Signer::Primary => None,
        Signer::Subkey(i) => Some((&key.key.public_subkeys[i].key, &key.subkeys[i])),
    };
    if key.primary_revoked || key.primary_identity_revoked {
        return Err(SignatureError::KeyRevoked { key_id: primary_id });
    }
    if subkey.is_some_and(|(_, state)| state.revoked) {
        return Err(SignatureError::KeyRevoked { key_id: signer_id });
    }
    let expired = |expiry: Option<u64>| expiry.filter(|&e| now > e);
    if let Some(expiry) = expired(key_expiry(
        primary.created_at().as_secs(),
        &key.primary_self_sig,
    )) {
        return Err(SignatureError::KeyExpired {
            key_id: primary_id,
            expired: format_date(expiry),
        });
    }
    // The subkey binding: it carries the subkey's expiry, and (below) may itself expire.
    let binding = subkey.and_then(|(sub, state)| Some((sub, state.binding.as_ref()?)));
    if let Some((sub, binding)) = binding
        && let Some(expiry) = expired(key_expiry(sub.created_at().as_secs(), binding))
    {
        return Err(SignatureError::KeyExpired {
            key_id: signer_id,
            expired: format_date(expiry),
        });
    }
    let created = u64::from(created_secs(sig));
    if created > now.saturating_add(CLOCK_SKEW_SECS) {
        return Err(SignatureError::SignatureInFuture {
            created: format_date(created),
        });
    }
    if let Some(expiry) = expired(signature_expiry(sig)) {
        return Err(SignatureError::SignatureExpired {
            expired: format_date(expiry),
        });
    }
    // An expired self-signature (primary user ID or subkey binding) makes go-crypto
    // refuse the signature too; report it as the key having expired.
    if let Some(expiry) = expired(signature_expiry(&key.primary_self_sig)) {
        return Err(SignatureError::KeyExpired {
            key_id: primary_id,
            expired: format_date(expiry),
        });
    }
    if let Some((_, binding)) = binding
        && let Some(expiry) = expired(signature_expiry(binding))
    {
        return Err(SignatureError::KeyExpired {
            key_id: signer_id,
            expired: format_date(expiry),
        });
    }

    let algorithm = match signer {
        Signer::Primary => algorithm_name(primary),
        Signer::Subkey(i) => algorithm_name(&key.key.public_subkeys[i].key),
    };
    let legacy_problem = key
        .legacy_problem
        .clone()
        .or_else(|| legacy_signature_problem(sig));
    Ok((
        VerifiedSignature {
            key_id: key.info.key_id.clone(),
            signer_key_id: signer_id,
            algorithm,
            legacy_compatible: legacy_problem.is_none(),
        },
        legacy_problem,
    ))
}

/// The cryptographic check of `sig` over `data` by one (sub)key.
fn verify_data<K: KeyDetails + VerifyingKey>(
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
        Some(
            HashAlgorithm::Md5
            | HashAlgorithm::Sha1
            | HashAlgorithm::Ripemd160
            | HashAlgorithm::Sha256
            | HashAlgorithm::Sha384
            | HashAlgorithm::Sha512
            | HashAlgorithm::Sha224
            | HashAlgorithm::Sha3_256
            | HashAlgorithm::Sha3_512,
        ) => {}
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
fn can_verify_params(params: &PublicParams) -> bool {
    use pgp::types::{EcdsaPublicParams, EddsaLegacyPublicParams};
    !matches!(
        params,
        PublicParams::ECDSA(EcdsaPublicParams::Unsupported { .. })
            | PublicParams::EdDSALegacy(EddsaLegacyPublicParams::Unsupported { .. })
            | PublicParams::Unknown { .. }
    )
}

/// What golang.org/x/crypto/openpgp (Terraform ≤ 1.5) cannot handle in the signature
/// itself, if anything.
fn legacy_signature_problem(sig: &Signature) -> Option<String> {
    if !matches!(sig.version(), SignatureVersion::V3 | SignatureVersion::V4) {
        return Some(format!("a {:?} signature", sig.version()));
    }
    match sig.hash_alg() {
        Some(
            HashAlgorithm::Md5
            | HashAlgorithm::Sha1
            | HashAlgorithm::Ripemd160
            | HashAlgorithm::Sha256
            | HashAlgorithm::Sha384
            | HashAlgorithm::Sha512
            | HashAlgorithm::Sha224,
        ) => {}
        Some(other) => return Some(format!("the {other} hash")),
        None => return Some("an unknown hash".to_string()),
    }
    if sig.version() == SignatureVersion::V4 && sig.issuer_key_id().is_empty() {
        return Some("a signature without an issuer key ID subpacket".to_string());
    }
    None
}

/// Why Terraform ≤ 1.5 cannot read this (sub)key, if it cannot.
fn legacy_problem<K: KeyDetails>(k: &K) -> Option<String> {
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

// ---------------------------------------------------------------------------
// Small helpers

/// Human name of a (sub)key's algorithm.
fn algorithm_name<K: KeyDetails>(k: &K) -> String {
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

fn key_id_of<K: KeyDetails>(k: &K) -> String {
    hex::encode_upper(k.legacy_key_id())
}

fn signer_key_id(key: &LoadedKey, signer: Signer) -> String {
    match signer {
        Signer::Primary => key_id_of(&key.key.primary_key),
        Signer::Subkey(i) => key_id_of(&key.key.public_subkeys[i].key),
    }
}

/// Whether `sig` names `k` as its issuer, by key ID or fingerprint.
fn names_issuer<K: KeyDetails>(sig: &Signature, k: &K) -> bool {
    let id = k.legacy_key_id();
    let fp = k.fingerprint();
    sig.issuer_key_id().iter().any(|i| **i == id)
        || sig.issuer_fingerprint().iter().any(|f| **f == fp)
}

/// Whether a self-signature may have been issued by `k` (it names `k`, or names no one).
fn issued_by<K: KeyDetails>(sig: &Signature, k: &K) -> bool {
    (sig.issuer_key_id().is_empty() && sig.issuer_fingerprint().is_empty()) || names_issuer(sig, k)
}

/// The issuer a signature names, for messages: its key ID, else its fingerprint.
fn issuer_label(sig: &Signature) -> Option<String> {
    if let Some(id) = sig.issuer_key_id().first() {
        return Some(hex::encode_upper(id));
    }
    sig.issuer_fingerprint()
        .first()
        .map(|fp| hex::encode_upper(fp.as_bytes()))
}

fn created_secs(sig: &Signature) -> u32 {
    sig.created().map(|t| t.as_secs()).unwrap_or(0)
}

/// Absolute expiry (seconds since the epoch) of a key created at `created`, per the key
/// expiration time subpacket of its self-signature; `None` if it does not expire.
fn key_expiry(created: u32, self_sig: &Signature) -> Option<u64> {
    let lifetime = self_sig.key_expiration_time()?.as_secs();
    (lifetime != 0).then(|| u64::from(created) + u64::from(lifetime))
}

/// Absolute expiry (seconds since the epoch) of a signature, if it has one.
fn signature_expiry(sig: &Signature) -> Option<u64> {
    let lifetime = sig.signature_expiration_time()?.as_secs();
    (lifetime != 0).then(|| u64::from(created_secs(sig)) + u64::from(lifetime))
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// `YYYY-MM-DD` (UTC) for seconds since the epoch.
fn format_date(secs: u64) -> String {
    // Days to civil date (Howard Hinnant's algorithm), for non-negative day counts.
    let z = secs / 86_400 + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

// ---------------------------------------------------------------------------
// A minimal OpenPGP packet framing scanner (RFC 9580 section 4.2), used to see every
// packet's tag independently of whether rPGP can parse its body.

const TAG_SIGNATURE: u8 = 2;
const TAG_ONE_PASS_SIGNATURE: u8 = 4;
const TAG_SECRET_KEY: u8 = 5;
const TAG_PUBLIC_KEY: u8 = 6;
const TAG_SECRET_SUBKEY: u8 = 7;
const TAG_COMPRESSED_DATA: u8 = 8;
const TAG_LITERAL_DATA: u8 = 11;
const TAG_PUBLIC_SUBKEY: u8 = 14;

struct RawPacket {
    tag: u8,
}

fn scan_packets(mut data: &[u8]) -> Result<Vec<RawPacket>, String> {
    fn take<'a>(data: &mut &'a [u8], n: usize) -> Result<&'a [u8], String> {
        if data.len() < n {
            return Err("it is truncated (a packet is cut short)".to_string());
        }
        let (head, rest) = data.split_at(n);
        *data = rest;
        Ok(head)
    }
    /// New-format body length: `(length, is_partial)`.
    fn new_length(data: &mut &[u8]) -> Result<(usize, bool), String> {
        let b0 = take(data, 1)?[0];
        Ok(match b0 {
            0..=191 => (usize::from(b0), false),
            192..=223 => {
                let b1 = take(data, 1)?[0];
                (
                    ((usize::from(b0) - 192) << 8) + usize::from(b1) + 192,
                    false,
                )
            }
            224..=254 => (1usize << (b0 & 0x1f), true),
            255 => {
                let b = take(data, 4)?;
                let len = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
                (usize::try_from(len).unwrap_or(usize::MAX), false)
            }
        })
    }

    let mut packets = Vec::new();
    while !data.is_empty() {
        let ctb = take(&mut data, 1)?[0];
        if ctb & 0x80 == 0 {
            return Err(if packets.is_empty() {
                "it is not OpenPGP data".to_string()
            } else {
                "it has trailing bytes that are not an OpenPGP packet".to_string()
            });
        }
        let tag = if ctb & 0x40 != 0 {
            let tag = ctb & 0x3f;
            let (mut len, mut partial) = new_length(&mut data)?;
            while partial {
                take(&mut data, len)?;
                (len, partial) = new_length(&mut data)?;
            }
            take(&mut data, len)?;
            tag
        } else {
            let tag = (ctb >> 2) & 0x0f;
            let len = match ctb & 0x03 {
                0 => usize::from(take(&mut data, 1)?[0]),
                1 => {
                    let b = take(&mut data, 2)?;
                    usize::from(u16::from_be_bytes([b[0], b[1]]))
                }
                2 => {
                    let b = take(&mut data, 4)?;
                    usize::try_from(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
                        .unwrap_or(usize::MAX)
                }
                _ => data.len(), // indeterminate length: the rest of the data
            };
            take(&mut data, len)?;
            tag
        };
        if tag == 0 {
            return Err("it contains an invalid packet (tag 0)".to_string());
        }
        packets.push(RawPacket { tag });
    }
    Ok(packets)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SUMS: &[u8] = include_bytes!("../tests/fixtures/signing/SHA256SUMS");
    const RSA_PUB: &str = include_str!("../tests/fixtures/signing/rsa.pub.asc");
    const RSA_SIG: &[u8] = include_bytes!("../tests/fixtures/signing/SHA256SUMS.rsa.sig");
    const RSA_SIG_ASC: &[u8] = include_bytes!("../tests/fixtures/signing/SHA256SUMS.rsa.sig.asc");
    const RSA_COLONS: &str = include_str!("../tests/fixtures/signing/rsa.colons.txt");
    const ED_PUB: &str = include_str!("../tests/fixtures/signing/ed25519.pub.asc");
    const ED_SIG: &[u8] = include_bytes!("../tests/fixtures/signing/SHA256SUMS.ed25519.sig");
    const ED_COLONS: &str = include_str!("../tests/fixtures/signing/ed25519.colons.txt");
    const SUB_PUB: &str = include_str!("../tests/fixtures/signing/subkey.pub.asc");
    const SUB_SIG: &[u8] = include_bytes!("../tests/fixtures/signing/SHA256SUMS.subkey.sig");
    const SUB_COLONS: &str = include_str!("../tests/fixtures/signing/subkey.colons.txt");
    const MIXED_PUB: &str = include_str!("../tests/fixtures/signing/mixed.pub.asc");
    const MIXED_SIG: &[u8] = include_bytes!("../tests/fixtures/signing/SHA256SUMS.mixed.sig");
    const MIXED_COLONS: &str = include_str!("../tests/fixtures/signing/mixed.colons.txt");
    const EXPIRED_PUB: &str = include_str!("../tests/fixtures/signing/expired.pub.asc");
    const EXPIRED_SIG: &[u8] = include_bytes!("../tests/fixtures/signing/SHA256SUMS.expired.sig");
    const EXPIRED_COLONS: &str = include_str!("../tests/fixtures/signing/expired.colons.txt");
    const REVOKED_PUB: &str = include_str!("../tests/fixtures/signing/revoked.pub.asc");
    const REVOKED_SIG: &[u8] = include_bytes!("../tests/fixtures/signing/SHA256SUMS.revoked.sig");
    const REVOKED_COLONS: &str = include_str!("../tests/fixtures/signing/revoked.colons.txt");
    const SECRET: &str = include_str!("../tests/fixtures/signing/throwaway.secret.asc");
    const RSA_TEXT_SIG: &[u8] = include_bytes!("../tests/fixtures/signing/SHA256SUMS.rsa.text.sig");
    const CERT_ONLY_PUB: &str = include_str!("../tests/fixtures/signing/certonly.pub.asc");
    const CERT_ONLY_SIG: &[u8] =
        include_bytes!("../tests/fixtures/signing/SHA256SUMS.certonly.sig");
    const CERT_ONLY_COLONS: &str = include_str!("../tests/fixtures/signing/certonly.colons.txt");

    /// `(key id, fingerprint)` of the primary key and of each subkey, as gpg listed them.
    fn gpg_ids(colons: &str) -> Vec<(String, String)> {
        let mut ids: Vec<(String, String)> = Vec::new();
        for line in colons.lines() {
            let fields: Vec<&str> = line.split(':').collect();
            match fields[0] {
                "pub" | "sub" => ids.push((fields[4].to_string(), String::new())),
                "fpr" => {
                    if let Some(last) = ids.last_mut()
                        && last.1.is_empty()
                    {
                        last.1 = fields[9].to_string();
                    }
                }
                _ => {}
            }
        }
        ids
    }

    fn primary_id(colons: &str) -> String {
        gpg_ids(colons)[0].0.clone()
    }

    /// Armor binary packets without a checksum line (for tests that craft keys).
    fn armor(kind: &str, bytes: &[u8]) -> String {
        use base64::Engine as _;
        let b64 = base64::engine::general_purpose::STANDARD.encode(bytes);
        let mut out = format!("-----BEGIN PGP {kind}-----\n\n");
        for chunk in b64.as_bytes().chunks(64) {
            out.push_str(std::str::from_utf8(chunk).unwrap());
            out.push('\n');
        }
        out.push_str(&format!("-----END PGP {kind}-----\n"));
        out
    }

    fn dearmored(text: &str) -> Vec<u8> {
        dearmor_public_key(text.trim()).unwrap()
    }

    #[test]
    fn key_ids_match_gpg() {
        for (armor, colons) in [
            (RSA_PUB, RSA_COLONS),
            (ED_PUB, ED_COLONS),
            (SUB_PUB, SUB_COLONS),
            (MIXED_PUB, MIXED_COLONS),
            (EXPIRED_PUB, EXPIRED_COLONS),
            (REVOKED_PUB, REVOKED_COLONS),
            (CERT_ONLY_PUB, CERT_ONLY_COLONS),
        ] {
            let info = parse_public_key(armor).unwrap();
            let ids = gpg_ids(colons);
            assert_eq!(info.key_id, ids[0].0);
            assert_eq!(info.key_id.len(), 16);
            assert!(ids[0].1.ends_with(&info.key_id), "{ids:?}");
            assert_eq!(info.algorithms.len(), ids.len());
            assert_eq!(info.ascii_armor, armor, "gpg's armor is kept as is");
        }
    }

    #[test]
    fn algorithm_names() {
        assert_eq!(parse_public_key(RSA_PUB).unwrap().algorithms, ["RSA 2048"]);
        assert_eq!(
            parse_public_key(ED_PUB).unwrap().algorithms,
            ["EdDSA (Ed25519)"]
        );
        assert_eq!(
            parse_public_key(SUB_PUB).unwrap().algorithms,
            ["RSA 2048", "RSA 2048"]
        );
        assert_eq!(
            parse_public_key(MIXED_PUB).unwrap().algorithms,
            ["RSA 2048", "ECDH (Curve25519)"]
        );
    }

    #[test]
    fn armor_is_normalized_and_tolerant() {
        let crlf = RSA_PUB.replace('\n', "\r\n");
        let messy = format!("\u{feff}\n  {crlf}\n\n");
        let info = parse_public_key(&messy).unwrap();
        assert_eq!(info.key_id, primary_id(RSA_COLONS));
        assert_eq!(info.ascii_armor, format!("{}\n", crlf.trim()));
    }

    #[test]
    fn valid_rsa_signature_verifies() {
        let v = verify_detached(RSA_PUB, SUMS, RSA_SIG).unwrap();
        assert_eq!(v.key_id, primary_id(RSA_COLONS));
        assert_eq!(v.signer_key_id, v.key_id);
        assert_eq!(v.algorithm, "RSA 2048");
        assert!(v.legacy_compatible);
        assert_eq!(
            verify_for_terraform(RSA_PUB, SUMS, RSA_SIG, false).unwrap(),
            v
        );
    }

    #[test]
    fn subkey_signature_reports_primary_key_id() {
        let ids = gpg_ids(SUB_COLONS);
        let v = verify_for_terraform(SUB_PUB, SUMS, SUB_SIG, false).unwrap();
        assert_eq!(v.key_id, ids[0].0);
        assert_eq!(v.signer_key_id, ids[1].0);
        assert_ne!(v.key_id, v.signer_key_id);
        assert!(v.legacy_compatible);
    }

    #[test]
    fn text_mode_signature_verifies_with_either_line_ending() {
        let v = verify_for_terraform(RSA_PUB, SUMS, RSA_TEXT_SIG, false).unwrap();
        assert_eq!(v.key_id, primary_id(RSA_COLONS));
        let crlf = String::from_utf8(SUMS.to_vec())
            .unwrap()
            .replace('\n', "\r\n");
        assert!(verify_detached(RSA_PUB, crlf.as_bytes(), RSA_TEXT_SIG).is_ok());
        let mut data = SUMS.to_vec();
        data[3] ^= 1;
        assert_eq!(
            verify_detached(RSA_PUB, &data, RSA_TEXT_SIG),
            Err(SignatureError::BadSignature)
        );
    }

    #[test]
    fn signature_by_certify_only_primary_is_refused() {
        // The key signed while it was [SC]; its usage was then changed to [C] only, and
        // gpg --verify now says "Wrong key usage" too.
        let err = verify_detached(CERT_ONLY_PUB, SUMS, CERT_ONLY_SIG).unwrap_err();
        match &err {
            SignatureError::UnusableSigningKey { key_id, reason } => {
                assert_eq!(key_id, &primary_id(CERT_ONLY_COLONS));
                assert!(reason.contains("key flag S"), "{reason}");
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn tampered_data_is_a_bad_signature() {
        let mut data = SUMS.to_vec();
        data[0] ^= 1;
        assert_eq!(
            verify_detached(RSA_PUB, &data, RSA_SIG),
            Err(SignatureError::BadSignature)
        );
        assert_eq!(
            verify_detached(SUB_PUB, &data, SUB_SIG),
            Err(SignatureError::BadSignature)
        );
        assert_eq!(
            verify_detached(ED_PUB, &data, ED_SIG),
            Err(SignatureError::BadSignature)
        );
        let crlf = String::from_utf8(SUMS.to_vec())
            .unwrap()
            .replace('\n', "\r\n");
        assert_eq!(
            verify_detached(RSA_PUB, crlf.as_bytes(), RSA_SIG),
            Err(SignatureError::BadSignature)
        );
        assert_eq!(
            verify_detached(RSA_PUB, b"", RSA_SIG),
            Err(SignatureError::BadSignature)
        );
    }

    #[test]
    fn tampered_signature_is_a_bad_signature() {
        // Flip a bit in the last byte: inside the RSA signature value.
        let mut sig = RSA_SIG.to_vec();
        let last = sig.len() - 1;
        sig[last] ^= 0x01;
        assert_eq!(
            verify_detached(RSA_PUB, SUMS, &sig),
            Err(SignatureError::BadSignature)
        );
    }

    #[test]
    fn signature_by_another_key_is_unknown_key() {
        // The signature's issuer subpacket names the ed25519 key: the RSA key is not asked.
        let err = verify_detached(RSA_PUB, SUMS, ED_SIG).unwrap_err();
        assert_eq!(
            err,
            SignatureError::UnknownKey {
                key_id: primary_id(ED_COLONS)
            }
        );
        assert_eq!(
            err.to_string(),
            format!(
                "the signature was made by key {}, which is not the given key",
                primary_id(ED_COLONS)
            )
        );
        let err = verify_detached(SUB_PUB, SUMS, RSA_SIG).unwrap_err();
        assert_eq!(
            err,
            SignatureError::UnknownKey {
                key_id: primary_id(RSA_COLONS)
            }
        );
    }

    #[test]
    fn armored_signature_is_refused() {
        assert_eq!(
            verify_detached(RSA_PUB, SUMS, RSA_SIG_ASC),
            Err(SignatureError::ArmoredSignature)
        );
        let mut padded = b"\r\n  ".to_vec();
        padded.extend_from_slice(RSA_SIG_ASC);
        assert_eq!(
            verify_detached(RSA_PUB, SUMS, &padded),
            Err(SignatureError::ArmoredSignature)
        );
    }

    #[test]
    fn secret_key_is_refused() {
        assert_eq!(
            parse_public_key(SECRET),
            Err(SignatureError::PrivateKeyGiven)
        );
        assert_eq!(
            verify_detached(SECRET, SUMS, ED_SIG),
            Err(SignatureError::PrivateKeyGiven)
        );
        // Secret key packets inside a block labelled PUBLIC KEY are refused too.
        let mut secret_bytes = Vec::new();
        let mut dearmor = Dearmor::new(SECRET.as_bytes());
        dearmor.read_to_end(&mut secret_bytes).unwrap();
        assert_eq!(dearmor.typ, Some(BlockType::PrivateKey));
        let disguised = armor("PUBLIC KEY BLOCK", &secret_bytes);
        assert_eq!(
            parse_public_key(&disguised),
            Err(SignatureError::PrivateKeyGiven)
        );
        // As the signature argument it is simply not a signature.
        assert!(matches!(
            verify_detached(RSA_PUB, SUMS, &secret_bytes),
            Err(SignatureError::MalformedSignature(_))
        ));
    }

    #[test]
    fn ed25519_needs_modern_terraform() {
        let v = verify_detached(ED_PUB, SUMS, ED_SIG).unwrap();
        assert_eq!(v.key_id, primary_id(ED_COLONS));
        assert_eq!(v.algorithm, "EdDSA (Ed25519)");
        assert!(!v.legacy_compatible);
        let err = verify_for_terraform(ED_PUB, SUMS, ED_SIG, false).unwrap_err();
        assert_eq!(
            err,
            SignatureError::LegacyIncompatibleKey {
                algorithm: "EdDSA (Ed25519)".to_string()
            }
        );
        assert!(
            err.to_string()
                .contains("Terraform 1.5 and older cannot verify")
        );
        assert!(err.to_string().contains("--allow-modern-keys"));
        assert_eq!(verify_for_terraform(ED_PUB, SUMS, ED_SIG, true).unwrap(), v);
    }

    #[test]
    fn curve25519_subkey_makes_rsa_signature_legacy_incompatible() {
        let ids = gpg_ids(MIXED_COLONS);
        let v = verify_detached(MIXED_PUB, SUMS, MIXED_SIG).unwrap();
        assert_eq!(v.algorithm, "RSA 2048");
        assert!(!v.legacy_compatible);
        assert_eq!(
            verify_for_terraform(MIXED_PUB, SUMS, MIXED_SIG, false),
            Err(SignatureError::LegacyIncompatibleKey {
                algorithm: format!("ECDH (Curve25519) (in subkey {})", ids[1].0)
            })
        );
        assert!(verify_for_terraform(MIXED_PUB, SUMS, MIXED_SIG, true).is_ok());
    }

    #[test]
    fn expired_key_is_refused() {
        // Made with gpg --faked-system-time 2020-01-01, expiring a day later.
        assert_eq!(
            verify_detached(EXPIRED_PUB, SUMS, EXPIRED_SIG),
            Err(SignatureError::KeyExpired {
                key_id: primary_id(EXPIRED_COLONS),
                expired: "2020-01-02".to_string()
            })
        );
        // The key itself is still accepted as a key (it may be renewed).
        assert!(parse_public_key(EXPIRED_PUB).is_ok());
    }

    #[test]
    fn future_signature_is_refused() {
        // Made with gpg --faked-system-time 2099-01-01.
        const FUTURE_SIG: &[u8] =
            include_bytes!("../tests/fixtures/signing/SHA256SUMS.rsa.future.sig");
        assert_eq!(
            verify_detached(RSA_PUB, SUMS, FUTURE_SIG),
            Err(SignatureError::SignatureInFuture {
                created: "2099-01-01".to_string()
            })
        );
    }

    #[test]
    fn revoked_key_is_refused() {
        assert_eq!(
            verify_detached(REVOKED_PUB, SUMS, REVOKED_SIG),
            Err(SignatureError::KeyRevoked {
                key_id: primary_id(REVOKED_COLONS)
            })
        );
    }

    #[test]
    fn garbage_keys_are_errors() {
        let truncated = &RSA_PUB[..RSA_PUB.len() / 2];
        let no_end = RSA_PUB.trim().trim_end_matches(PUBLIC_KEY_END);
        let sig_as_key = String::from_utf8(RSA_SIG_ASC.to_vec()).unwrap();
        let two_keys = format!("{RSA_PUB}{ED_PUB}");
        let bad_crc = {
            let lines: Vec<&str> = RSA_PUB.lines().collect();
            let crc_line = lines.iter().position(|l| l.starts_with('=')).unwrap();
            let mut lines: Vec<String> = lines.iter().map(|s| s.to_string()).collect();
            lines[crc_line] = "=AAAA".to_string();
            lines.join("\n")
        };
        let bad_base64 = RSA_PUB.replacen("m", "!", 3);
        let huge = format!(
            "{PUBLIC_KEY_BEGIN}\n\n{}\n{PUBLIC_KEY_END}\n",
            "A".repeat(2 << 20)
        );
        let both_keys_one_block = {
            let mut bytes = dearmored(RSA_PUB);
            bytes.extend(dearmored(ED_PUB));
            armor("PUBLIC KEY BLOCK", &bytes)
        };
        let only_signature_packets = armor("PUBLIC KEY BLOCK", RSA_SIG);
        let junk_packets = armor("PUBLIC KEY BLOCK", &[0x99, 0x00, 0x05, 1, 2, 3]);
        let mut cut = dearmored(RSA_PUB);
        cut.truncate(cut.len() - 10);
        let cut_packets = armor("PUBLIC KEY BLOCK", &cut);

        let cases: Vec<(&str, String)> = vec![
            ("empty", String::new()),
            ("spaces", "  \n\t ".to_string()),
            ("text", "hello".to_string()),
            ("truncated armor", truncated.to_string()),
            ("no end line", no_end.to_string()),
            ("signature armor", sig_as_key),
            ("bad crc", bad_crc),
            ("bad base64", bad_base64),
            ("huge", huge),
            ("only signature packets", only_signature_packets),
            ("junk packets", junk_packets),
            ("cut packets", cut_packets),
            (
                "binary as text",
                String::from_utf8_lossy(RSA_SIG).into_owned(),
            ),
        ];
        for (name, text) in &cases {
            let res = parse_public_key(text);
            assert!(res.is_err(), "{name}: {res:?}");
            let res = verify_detached(text, SUMS, RSA_SIG);
            assert!(res.is_err(), "{name}: {res:?}");
        }
        assert_eq!(parse_public_key(""), Err(SignatureError::NotAPublicKey));
        assert_eq!(
            parse_public_key(&two_keys),
            Err(SignatureError::MultipleKeys { count: 2 })
        );
        assert_eq!(
            parse_public_key(&both_keys_one_block),
            Err(SignatureError::MultipleKeys { count: 2 })
        );
    }

    #[test]
    fn garbage_signatures_are_errors() {
        let mut cases: Vec<Vec<u8>> = vec![
            Vec::new(),
            b"hello".to_vec(),
            vec![0u8; 100],
            vec![0xffu8; 100],
            vec![0x88; MAX_SIGNATURE_LEN + 1],
            dearmored(RSA_PUB),
        ];
        // Every truncation of a real signature.
        for n in 1..RSA_SIG.len() {
            cases.push(RSA_SIG[..n].to_vec());
        }
        // A real signature followed by junk.
        let mut trailing = RSA_SIG.to_vec();
        trailing.extend_from_slice(b"junk");
        cases.push(trailing);
        for sig in &cases {
            let res = verify_detached(RSA_PUB, SUMS, sig);
            assert!(
                matches!(res, Err(SignatureError::MalformedSignature(_))),
                "{} bytes: {res:?}",
                sig.len()
            );
        }
        assert!(matches!(
            verify_detached(RSA_PUB, SUMS, &dearmored(RSA_PUB)),
            Err(SignatureError::MalformedSignature(m)) if m.contains("public key")
        ));
    }

    #[test]
    fn two_signatures_use_the_first_matching_one() {
        let mut both = ED_SIG.to_vec();
        both.extend_from_slice(RSA_SIG);
        let v = verify_detached(RSA_PUB, SUMS, &both).unwrap();
        assert_eq!(v.signer_key_id, primary_id(RSA_COLONS));
        let v = verify_detached(ED_PUB, SUMS, &both).unwrap();
        assert_eq!(v.signer_key_id, primary_id(ED_COLONS));
    }

    #[test]
    fn large_data_is_fine() {
        let data = vec![b'x'; 8 << 20];
        assert_eq!(
            verify_detached(RSA_PUB, &data, RSA_SIG),
            Err(SignatureError::BadSignature)
        );
    }

    #[test]
    fn messages_are_as_documented() {
        assert_eq!(
            SignatureError::PrivateKeyGiven.to_string(),
            "that is a private key: give the public key (gpg --armor --export KEYID)"
        );
        assert_eq!(
            SignatureError::ArmoredSignature.to_string(),
            "the signature must be binary (gpg --detach-sign), not ASCII-armored"
        );
        assert_eq!(
            SignatureError::BadSignature.to_string(),
            "the signature over SHA256SUMS does not verify with the given key"
        );
    }

    #[test]
    fn dates_format() {
        assert_eq!(format_date(0), "1970-01-01");
        assert_eq!(format_date(1_577_923_200), "2020-01-02");
        assert_eq!(format_date(951_782_400), "2000-02-29");
        assert_eq!(format_date(4_102_444_800), "2100-01-01");
    }

    /// Deterministic mutation fuzzing of every input, calling the unguarded internals so
    /// that a panic inside rPGP fails this test instead of being caught.
    #[test]
    fn mutations_never_panic() {
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut rand = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mutate = |input: &[u8], rand: &mut dyn FnMut() -> u64| -> Vec<u8> {
            let mut out = input.to_vec();
            for _ in 0..=(rand() % 4) {
                if out.is_empty() {
                    break;
                }
                let pos = (rand() as usize) % out.len();
                match rand() % 4 {
                    0 => out[pos] ^= 1 << (rand() % 8),
                    1 => out[pos] = rand() as u8,
                    2 => out.truncate(pos),
                    _ => {
                        let b = rand() as u8;
                        out.insert(pos, b);
                    }
                }
            }
            out
        };
        let keys = [
            (RSA_PUB, RSA_SIG),
            (SUB_PUB, SUB_SIG),
            (ED_PUB, ED_SIG),
            (MIXED_PUB, MIXED_SIG),
        ];
        let loaded: Vec<LoadedKey> = keys.iter().map(|(k, _)| load_key(k).unwrap()).collect();
        for round in 0..1200 {
            let which = round % keys.len();
            let (armor_text, sig) = keys[which];
            let bad_sig = mutate(sig, &mut rand);
            let _ = verify_with_key(&loaded[which], SUMS, &bad_sig);
            let key_bytes = mutate(&dearmored(armor_text), &mut rand);
            let bad_key = armor("PUBLIC KEY BLOCK", &key_bytes);
            if let Ok(k) = load_key(&bad_key) {
                let _ = verify_with_key(&k, SUMS, sig);
            }
            let _ = load_key(&String::from_utf8_lossy(&mutate(
                armor_text.as_bytes(),
                &mut rand,
            )));
        }
    }
}
