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
//!   current time, so an expired key breaks installs). The time of the check
//!   is always the caller's `now`: nothing here reads the clock. What
//!   another registry serves is judged as the clients that install judge it
//!   ([`PublicKey::verify_as_client`]): an expired key's signature made while
//!   it was valid is accepted.
//! * Terraform ≤ 1.5 uses golang.org/x/crypto/openpgp, which reads only RSA,
//!   DSA, Elgamal (encryption), and ECDSA/ECDH on the NIST curves. A key
//!   with *any* other (sub)key, e.g. an Ed25519 primary key or a Curve25519
//!   encryption subkey, is skipped entirely as "unsupported", so no signature
//!   by it can be verified there. [`VerifiedSignature::legacy_compatible`]
//!   reports this, and [`PublicKey::verify_for_terraform`] refuses such
//!   signatures unless modern keys are allowed.
//!
//! Nothing here panics on bad input: every function returns a
//! [`SignatureError`] instead (as a last line of defense, panics inside the
//! OpenPGP library are caught and reported as malformed input).
//!
//! The parts, one job each: `armor` (armor text to packet bytes), `packets`
//! (the packet framing scan), `key` (key loading), `verify` (the signature
//! checks), `usable` (can the key still sign: asked when it is registered),
//! `legacy` (the rules of old Terraform), `describe` (names, key IDs, expiry
//! arithmetic and dates) and `error`.

mod armor;
mod describe;
mod error;
mod key;
mod legacy;
mod packets;
mod usable;
mod verify;

#[cfg(test)]
pub(crate) mod tests;

use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

pub use error::SignatureError;

use key::{LoadedKey, load_key};
use verify::{Checked, Expired, verify_with_key};

/// How far in the future a signature may be dated (clock skew between the signing
/// machine and the registry) before it is refused.
pub const CLOCK_SKEW_SECS: u64 = 60 * 60;

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

/// A signature accepted by the rules of the clients that install
/// ([`PublicKey::verify_as_client`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientSignature {
    pub verified: VerifiedSignature,
    /// When the key (or the signing subkey, or a self-signature) stopped being
    /// valid, in seconds since the epoch, if it had by the time of the check;
    /// the signature was made before. `None`: the key is valid.
    pub key_expired: Option<u64>,
}

/// A provider signing key, parsed and checked once; cheap to clone and to share
/// between threads.
#[derive(Clone)]
pub struct PublicKey(Arc<LoadedKey>);

impl PublicKey {
    /// Parse and check an ASCII-armored OpenPGP public key offered as a provider signing key.
    ///
    /// Refuses secret keys, several keys in one armor, unreadable (sub)keys and keys without
    /// a user ID carrying a valid self-signature (Terraform cannot load those).
    pub fn parse(ascii_armor: &str) -> Result<PublicKey, SignatureError> {
        catch_unwind(AssertUnwindSafe(|| load_key(ascii_armor)))
            .unwrap_or_else(|_| {
                Err(SignatureError::MalformedKey(
                    "the OpenPGP data could not be processed".to_string(),
                ))
            })
            .map(|key| PublicKey(Arc::new(key)))
    }

    /// What the registry records about the key.
    pub fn info(&self) -> &PublicKeyInfo {
        &self.0.info
    }

    /// Can the key still make a signature Terraform accepts, at `now`
    /// (seconds since the epoch)? Refused: a revoked or expired primary key
    /// (or primary identity), and a key none of whose (sub)keys may sign,
    /// or whose signing subkeys are all revoked or expired. Asked when a key
    /// is registered: such a key would only fail every later publish.
    pub fn check_usable(&self, now: u64) -> Result<(), SignatureError> {
        catch_unwind(AssertUnwindSafe(|| usable::check_usable(&self.0, now))).unwrap_or_else(|_| {
            Err(SignatureError::MalformedKey(
                "the OpenPGP data could not be processed".to_string(),
            ))
        })
    }

    /// What Terraform 1.5 and older cannot read in the key (an algorithm,
    /// and which subkey), if anything: no signature by it verifies there.
    pub fn legacy_problem(&self) -> Option<&str> {
        self.0.legacy_problem.as_deref()
    }

    /// Verify a binary detached signature over `data` with the key (any of its
    /// signing-capable subkeys or the primary), at the time `now` (seconds since the epoch).
    ///
    /// Besides the cryptographic check this applies Terraform's rules: the issuing (sub)key
    /// must be marked for signing, and neither it nor the primary key may be revoked or
    /// expired at `now`. `legacy_compatible` in the result tells whether Terraform ≤ 1.5
    /// can verify it as well.
    pub fn verify_detached(
        &self,
        data: &[u8],
        signature: &[u8],
        now: u64,
    ) -> Result<VerifiedSignature, SignatureError> {
        self.verify_guarded(data, signature, now, Expired::Refuse)
            .map(|checked| checked.verified)
    }

    /// Like [`verify_detached`](Self::verify_detached), and additionally refuse
    /// (`LegacyIncompatibleKey`) a signature that old Terraform (≤ 1.5) cannot verify,
    /// unless `allow_modern` is true.
    ///
    /// "Cannot verify" covers the whole key: old Terraform discards a key entirely if any of
    /// its subkeys uses an algorithm it does not know (e.g. a Curve25519 encryption subkey),
    /// even when the signing subkey itself is RSA.
    pub fn verify_for_terraform(
        &self,
        data: &[u8],
        signature: &[u8],
        allow_modern: bool,
        now: u64,
    ) -> Result<VerifiedSignature, SignatureError> {
        let checked = self.verify_guarded(data, signature, now, Expired::Refuse)?;
        match checked.legacy_problem {
            Some(algorithm) if !allow_modern => {
                Err(SignatureError::LegacyIncompatibleKey { algorithm })
            }
            _ => Ok(checked.verified),
        }
    }

    /// Verify a binary detached signature the way the clients that install a
    /// provider do, for a release another registry serves: like
    /// [`verify_detached`](Self::verify_detached), except that a key that has
    /// expired by `now` is accepted if it was valid when the signature was
    /// made (else [`SignatureError::SignedAfterKeyExpired`]), and the result
    /// says when it expired. Every other fault is still refused.
    ///
    /// Why: Terraform maps go-crypto's `ErrKeyExpired` to success
    /// (`checkDetachedSignature`), and OpenTofu ignores expiry unless
    /// `OPENTOFU_ENFORCE_GPG_EXPIRATION=true`, so old public releases signed
    /// by a key that has since expired install everywhere; refusing them, as
    /// publishing does, would break them only behind the cache. Stricter than
    /// both: Terraform accepts an expired key's signature whenever it was made.
    pub fn verify_as_client(
        &self,
        data: &[u8],
        signature: &[u8],
        now: u64,
    ) -> Result<ClientSignature, SignatureError> {
        self.verify_guarded(data, signature, now, Expired::ValidWhenSigned)
            .map(|checked| ClientSignature {
                verified: checked.verified,
                key_expired: checked.key_expired,
            })
    }

    /// The signature check with panics inside the OpenPGP library caught.
    fn verify_guarded(
        &self,
        data: &[u8],
        signature: &[u8],
        now: u64,
        expired: Expired,
    ) -> Result<Checked, SignatureError> {
        catch_unwind(AssertUnwindSafe(|| {
            verify_with_key(&self.0, data, signature, now, expired)
        }))
        .unwrap_or_else(|_| {
            Err(SignatureError::MalformedSignature(
                "the OpenPGP data could not be processed".to_string(),
            ))
        })
    }
}

impl fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PublicKey")
            .field("key_id", &self.0.info.key_id)
            .finish_non_exhaustive()
    }
}

/// A key an admin registered for a namespace, parsed for verifying. It was
/// checked when it was registered: one that no longer parses is corrupt
/// data, not the publisher's mistake.
pub fn registered_key(key: &tfreg_model::keys::RegisteredKey) -> Result<PublicKey, String> {
    PublicKey::parse(&key.ascii_armor)
        .map_err(|e| format!("registered key {} no longer parses: {e}", key.key_id))
}
