//! Why a key or signature was refused, and short descriptions of rPGP's errors.

use pgp::errors::Error as PgpError;

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
    /// Neither the primary key nor any subkey may sign (key flags), so no
    /// signature by the key can ever be accepted.
    #[error(
        "key {key_id} cannot sign: neither it nor any of its subkeys is marked for signing (key flag S), so Terraform would refuse every signature"
    )]
    NoSigningKey {
        /// Key ID of the primary key.
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
    /// The signature is dated after its key had expired (only from
    /// [`PublicKey::verify_as_client`](super::PublicKey::verify_as_client),
    /// which accepts an expired key's signatures made while it was valid).
    #[error("the signature is dated {signed}, after key {key_id} expired on {expired}")]
    SignedAfterKeyExpired {
        /// Key ID of the expired (sub)key.
        key_id: String,
        /// Expiry date, `YYYY-MM-DD` (UTC).
        expired: String,
        /// Creation date of the signature, `YYYY-MM-DD` (UTC).
        signed: String,
    },
    /// The signature carries an expiration time that has passed.
    #[error("the signature expired on {expired}; sign SHA256SUMS again")]
    SignatureExpired {
        /// Expiry date, `YYYY-MM-DD` (UTC).
        expired: String,
    },
    /// The signature is dated in the future (beyond [`CLOCK_SKEW_SECS`](super::CLOCK_SKEW_SECS));
    /// Terraform treats such a signature as expired until that time.
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
    /// Terraform 1.5 and older cannot verify this signature (see
    /// [`PublicKey::verify_for_terraform`](super::PublicKey::verify_for_terraform)).
    #[error(
        "Terraform 1.5 and older cannot verify this signature because it uses {algorithm}; sign with an RSA key (without ECC subkeys), or publish with --allow-modern-keys"
    )]
    LegacyIncompatibleKey {
        /// The algorithm (and which subkey, if not the signing one) old Terraform cannot handle.
        algorithm: String,
    },
}

/// A one-line, bounded description of an rPGP error (its `Display` can embed `Debug`
/// dumps of whole buffers).
pub(super) fn short_pgp_error(e: &PgpError) -> String {
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

/// Whether rPGP refused a packet as being of an unsupported kind or version.
pub(super) fn is_unsupported(e: &PgpError) -> bool {
    match e {
        PgpError::Unsupported { .. } => true,
        PgpError::InvalidPacketContent { source } => {
            matches!(**source, PgpError::Unsupported { .. })
        }
        _ => false,
    }
}
