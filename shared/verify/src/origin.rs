//! What another registry (an origin) serves, checked before the pull-through
//! cache (issue 22, `tests/cache/plan.md` §3) stores any of it. Pure
//! functions over bytes the cache has already fetched: no I/O, no clock.
//!
//! The checks are the ones Terraform makes when it installs from that
//! registry (`internal/getproviders/package_authentication.go`), so that the
//! cache stores what the client would have accepted from the origin itself,
//! and refuses what it would have refused:
//!
//! 1. [`verify_sums`]: the detached signature over SHA256SUMS verifies with
//!    one of the keys the download answer lists (`signing_keys.
//!    gpg_public_keys`), tried in order as Terraform's `findSigningKey` does,
//!    by the clients' rule for expired keys
//!    ([`PublicKey::verify_as_client`]); SHA256SUMS parses
//!    ([`release_files::parse_shasums`]);
//! 2. [`check_answer`]: the download answer is for the platform asked, and
//!    its `filename` and `shasum` are a line of SHA256SUMS (Terraform's
//!    `matchingChecksumAuthentication`);
//! 3. [`check_same_sums`]: SHA256SUMS, once stored, never changes;
//! 4. [`check_archive`]: the sha256 of the archive, computed while it
//!    streamed in, is its SHA256SUMS line;
//! 5. [`origin_h1`]: the `h1:` hash of the stored zip, when the zip limits
//!    let the registry compute it.
//!
//! Every refusal is a [`Refusal`], whose message the cache answers as
//! `502 {"errors":["<host>: <reason>"]}`; what an origin wrote is quoted in
//! it escaped and cut short ([`quoted`]).

use std::collections::BTreeMap;
use std::io::{Read, Seek};

use crate::archives::{ArchiveError, provider_zip};
use crate::release_files::{self, is_sha256_hex};
use crate::signing::{ClientSignature, PublicKey, SignatureError};
use tfreg_model::address::Platform;
use tfreg_model::hashing::sha256_hex;

#[cfg(test)]
mod tests;

/// Most characters of an origin's text (a file name, a claimed key ID)
/// quoted in a refusal.
pub const MAX_QUOTED_CHARS: usize = 100;

/// One key of an origin's download answer (`signing_keys.gpg_public_keys[]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OriginKey {
    /// The key ID the origin claims. Only named in refusals: Terraform does
    /// not compare it with the key, and neither does this (an origin's typo
    /// must not refuse what Terraform installs). The key ID recorded
    /// ([`SignedBy::key_id`]) is read from the key itself.
    pub key_id: String,
    pub ascii_armor: String,
}

/// What to do with a release whose origin lists no signing key: the
/// upstream's setting ([`tfreg_model::upstream::Unsigned`]).
pub use tfreg_model::upstream::Unsigned;

/// SHA256SUMS that passed [`verify_sums`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifiedSums {
    /// File name → lowercase hex sha256, one per line.
    pub sums: BTreeMap<String, String>,
    /// Lowercase hex sha256 of the SHA256SUMS bytes: names the stored copy;
    /// [`check_same_sums`] compares every later fetch with it.
    pub sha256: String,
    /// Who signed it; `None` when accepted unsigned ([`Unsigned::ChecksumsOnly`]).
    pub signed_by: Option<SignedBy>,
}

/// The key whose signature over SHA256SUMS verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedBy {
    /// Primary key ID (16 uppercase hex digits), read from the key.
    pub key_id: String,
    /// Key ID of the (sub)key that made the signature.
    pub signer_key_id: String,
    /// When the key had expired (seconds since the epoch), if it had by the
    /// check; it signed while it was valid.
    pub key_expired: Option<u64>,
}

/// What SHA256SUMS vouches for in an origin's download answer
/// (`…/<version>/download/<os>/<arch>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OriginAnswer {
    pub os: String,
    pub arch: String,
    pub filename: String,
    pub shasum: String,
}

/// Why what an origin serves is not stored. One variant per reason; the
/// messages are short and exact, and the cache prefixes them with the
/// origin's hostname.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// SHA256SUMS does not parse; the text (from
    /// [`release_files::parse_shasums`]) says where.
    #[error("{0}")]
    Shasums(String),
    /// Keys are listed, but there is no signature to check with them.
    #[error("the origin lists signing keys but serves no SHA256SUMS signature")]
    NoSignature,
    /// No key is listed and the upstream takes no unsigned release
    /// ([`Unsigned::Refuse`]).
    #[error("the origin lists no signing key, so SHA256SUMS cannot be verified")]
    NoSigningKey,
    /// One entry's key text holds several keys. go-crypto would read it as a
    /// key ring; tfreg verifies one key per entry.
    #[error("signing key {key_id} holds {count} keys; each entry must hold one")]
    SeveralKeys { key_id: String, count: usize },
    /// A key text that is not a usable public key (Terraform: "error
    /// decoding signing key").
    #[error("signing key {key_id} is refused: {source}")]
    Key {
        key_id: String,
        source: SignatureError,
    },
    /// No listed key made the signature (Terraform: "authentication
    /// signature from unknown issuer").
    #[error("SHA256SUMS is signed by key {issuer}, which is not among the origin's signing keys")]
    UnknownSigner { issuer: String },
    /// The signature was made by the key, over other bytes: SHA256SUMS or
    /// the signature was changed.
    #[error("SHA256SUMS does not match its signature by key {key_id}")]
    BadSignature { key_id: String },
    /// Every other fault of the signature or of the key that made it
    /// (revoked, signed after it expired, a signature dated in the future or
    /// expired, damaged, a subkey that may not sign).
    #[error("the SHA256SUMS signature by key {key_id} is refused: {source}")]
    Signature {
        key_id: String,
        source: SignatureError,
    },
    /// The download answer names another platform than the one asked for.
    #[error("the download answer is for {answered}, not {asked}")]
    WrongPlatform { asked: String, answered: String },
    /// The download answer's `shasum` is not 64 lowercase hex digits.
    #[error("the download answer's shasum for {filename} is not 64 lowercase hex digits")]
    MalformedShasum { filename: String },
    /// SHA256SUMS has no line for the file.
    #[error("SHA256SUMS has no line for {filename}")]
    NotListed { filename: String },
    /// The download answer's `shasum` is not the file's SHA256SUMS line.
    #[error("the download answer's shasum for {filename} is not its SHA256SUMS line")]
    ShasumMismatch { filename: String },
    /// The archive fetched is not the one SHA256SUMS lists.
    #[error("{filename} has sha256 {actual}, but SHA256SUMS lists {listed}")]
    ArchiveMismatch {
        filename: String,
        actual: String,
        listed: String,
    },
    /// A later fetch of the release's SHA256SUMS (another platform's answer,
    /// a refresh) differs from the stored one.
    #[error("SHA256SUMS changed since first fill")]
    ShasumsChanged,
}

/// Check a release's SHA256SUMS and its signature at `now` (seconds since
/// the epoch), with the keys of the origin's download answer.
///
/// The keys are tried in order, as Terraform's `findSigningKey` does: a key
/// that did not make the signature (another issuer, or a subkey that may not
/// sign: go-crypto's `ErrUnknownIssuer`) passes to the next; a key text that
/// does not read, or holds several keys, and any other fault of the
/// signature refuse. A key that expired after signing is accepted; like
/// OpenTofu, a later key that has not expired is preferred to it, and once
/// one has signed, the later keys' faults no longer refuse (Terraform stops
/// at the first). No keys: refused, unless `unsigned` is
/// [`Unsigned::ChecksumsOnly`], when the signature is not looked at.
pub fn verify_sums(
    shasums: &[u8],
    signature: Option<&[u8]>,
    keys: &[OriginKey],
    unsigned: Unsigned,
    now: u64,
) -> Result<VerifiedSums, Refusal> {
    let signed_by = match (keys.is_empty(), unsigned) {
        (true, Unsigned::Refuse) => return Err(Refusal::NoSigningKey),
        (true, Unsigned::ChecksumsOnly) => None,
        (false, _) => {
            let signature = signature.ok_or(Refusal::NoSignature)?;
            Some(find_signer(shasums, signature, keys, now)?)
        }
    };
    let sums =
        release_files::parse_shasums(shasums).map_err(|e| Refusal::Shasums(e.to_string()))?;
    Ok(VerifiedSums {
        sums,
        sha256: sha256_hex(shasums),
        signed_by,
    })
}

/// Why one key did not yield a signer.
enum Miss {
    /// It did not make the signature: try the next.
    NotSigner(Refusal),
    /// A fault that refuses the release.
    Refused(Refusal),
}

/// The first key that made `signature` over `data` (see [`verify_sums`]).
fn find_signer(
    data: &[u8],
    signature: &[u8],
    keys: &[OriginKey],
    now: u64,
) -> Result<SignedBy, Refusal> {
    let mut expired = None;
    let (mut unknown, mut unusable) = (None, None);
    for key in keys {
        match try_key(key, data, signature, now) {
            Ok(signed) if signed.key_expired.is_none() => return Ok(signed),
            Ok(signed) => {
                expired.get_or_insert(signed);
            }
            Err(Miss::NotSigner(why @ Refusal::UnknownSigner { .. })) => {
                unknown.get_or_insert(why);
            }
            Err(Miss::NotSigner(why)) => {
                unusable.get_or_insert(why);
            }
            Err(Miss::Refused(refusal)) if expired.is_none() => return Err(refusal),
            Err(Miss::Refused(_)) => {}
        }
    }
    match (expired, unusable.or(unknown)) {
        (Some(signed), _) => Ok(signed),
        (None, Some(why)) => Err(why),
        (None, None) => Err(Refusal::NoSigningKey),
    }
}

/// Parse one key and verify the signature with it.
fn try_key(key: &OriginKey, data: &[u8], signature: &[u8], now: u64) -> Result<SignedBy, Miss> {
    let public = PublicKey::parse(&key.ascii_armor).map_err(|e| {
        let key_id = quoted(&key.key_id);
        Miss::Refused(match e {
            SignatureError::MultipleKeys { count } => Refusal::SeveralKeys { key_id, count },
            source => Refusal::Key { key_id, source },
        })
    })?;
    let key_id = public.info().key_id.clone();
    match public.verify_as_client(data, signature, now) {
        Ok(ClientSignature {
            verified,
            key_expired,
        }) => Ok(SignedBy {
            key_id,
            signer_key_id: verified.signer_key_id,
            key_expired,
        }),
        Err(SignatureError::UnknownKey { key_id: issuer }) => {
            Err(Miss::NotSigner(Refusal::UnknownSigner { issuer }))
        }
        Err(source @ SignatureError::UnusableSigningKey { .. }) => {
            Err(Miss::NotSigner(Refusal::Signature { key_id, source }))
        }
        Err(SignatureError::BadSignature) => Err(Miss::Refused(Refusal::BadSignature { key_id })),
        Err(source) => Err(Miss::Refused(Refusal::Signature { key_id, source })),
    }
}

/// Check an origin's download answer against the release's SHA256SUMS: it
/// echoes the platform asked for (Terraform's registry client checks the
/// echo; done here, so that the check is pure and tested), its `shasum` is 64
/// lowercase hex digits, and it is the line SHA256SUMS has for `filename`.
///
/// Stricter than Terraform, which decodes `shasum` as hex of either case:
/// the cache answers this `shasum` to clients as it is, and compares it as
/// text; the public registries write lowercase.
pub fn check_answer(
    sums: &VerifiedSums,
    asked: &Platform,
    answer: &OriginAnswer,
) -> Result<(), Refusal> {
    if answer.os != asked.os || answer.arch != asked.arch {
        return Err(Refusal::WrongPlatform {
            asked: asked.to_string(),
            answered: quoted(&format!("{}_{}", answer.os, answer.arch)),
        });
    }
    let filename = || quoted(&answer.filename);
    if !is_sha256_hex(&answer.shasum) {
        return Err(Refusal::MalformedShasum {
            filename: filename(),
        });
    }
    match sums.sums.get(&answer.filename) {
        None => Err(Refusal::NotListed {
            filename: filename(),
        }),
        Some(listed) if *listed != answer.shasum => Err(Refusal::ShasumMismatch {
            filename: filename(),
        }),
        Some(_) => Ok(()),
    }
}

/// SHA256SUMS bytes are immutable once stored: `later` (fetched for another
/// platform, or again on a refresh) must have the stored copy's sha256,
/// `first_sha256` ([`VerifiedSums::sha256`]). Anything else would let an
/// origin vouch for different archives of one version over time.
pub fn check_same_sums(first_sha256: &str, later: &[u8]) -> Result<(), Refusal> {
    if sha256_hex(later) == first_sha256 {
        Ok(())
    } else {
        Err(Refusal::ShasumsChanged)
    }
}

/// Check an archive's sha256 (lowercase hex, computed while it streamed into
/// a temporary file) against its SHA256SUMS line, before it is stored.
pub fn check_archive(sums: &VerifiedSums, filename: &str, sha256: &str) -> Result<(), Refusal> {
    match sums.sums.get(filename) {
        None => Err(Refusal::NotListed {
            filename: quoted(filename),
        }),
        Some(listed) if listed != sha256 => Err(Refusal::ArchiveMismatch {
            filename: quoted(filename),
            actual: quoted(sha256),
            listed: listed.clone(),
        }),
        Some(_) => Ok(()),
    }
}

/// The `h1:` hash of a provider zip the cache has stored, with the zip limits
/// of publishing ([`archives::provider_zip::hash_any`](provider_zip::hash_any):
/// sizes, ratio, entry kinds) but not its layout rule (a
/// `terraform-provider-<type>` binary at the top level): what an origin's
/// zip holds is its publisher's business.
///
/// An error is no refusal: the zip is stored and answered with its `zh:`
/// hash only, since refusing it would break lock files made against the
/// origin; the error says why there is no `h1:`.
pub fn origin_h1<R: Read + Seek>(zip: R) -> Result<String, ArchiveError> {
    provider_zip::hash_any(zip).map(|zip| zip.h1)
}

/// An origin's text for a refusal: at most [`MAX_QUOTED_CHARS`] characters,
/// control and invisible characters escaped.
pub fn quoted(text: &str) -> String {
    let mut cut: String = text.chars().take(MAX_QUOTED_CHARS).collect();
    if cut.len() < text.len() {
        cut.push('…');
    }
    tfreg_model::text::escaped(&cut).into_owned()
}
