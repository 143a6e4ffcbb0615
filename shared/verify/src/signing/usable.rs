//! Whether a key can still make a signature Terraform accepts, asked when an
//! admin registers it: a revoked or expired key, or one none of whose
//! (sub)keys may sign, would only fail every later publish.

use pgp::types::KeyDetails;

use super::SignatureError;
use super::describe::{format_date, key_expiry, key_id_of, signature_expiry};
use super::key::LoadedKey;
use super::verify::{Signer, signing_capability};

/// `Ok` if some (sub)key of `key` may sign at `now` by Terraform's rules
/// (neither it nor the primary key revoked or expired); else why not.
pub(super) fn check_usable(key: &LoadedKey, now: u64) -> Result<(), SignatureError> {
    let primary = &key.key.primary_key;
    let primary_id = key_id_of(primary);
    if key.primary_revoked || key.primary_identity_revoked {
        return Err(SignatureError::KeyRevoked { key_id: primary_id });
    }
    // A self-signature's own expiry counts as the key's (as in verifying).
    let expiry = |created: u32, self_sig: &pgp::packet::Signature| {
        [key_expiry(created, self_sig), signature_expiry(self_sig)]
            .into_iter()
            .flatten()
            .filter(|&e| now > e)
            .min()
    };
    if let Some(e) = expiry(primary.created_at().as_secs(), &key.primary_self_sig) {
        return Err(SignatureError::KeyExpired {
            key_id: primary_id,
            expired: format_date(e),
        });
    }
    if signing_capability(key, Signer::Primary).is_ok() {
        return Ok(());
    }
    // The primary may not sign: a signing subkey that is still valid, then.
    let mut why = None;
    for (i, sub) in key.key.public_subkeys.iter().enumerate() {
        let state = &key.subkeys[i];
        let Some(binding) = state.binding.as_ref() else {
            continue;
        };
        if signing_capability(key, Signer::Subkey(i)).is_err() {
            continue;
        }
        let key_id = key_id_of(&sub.key);
        if state.revoked {
            why.get_or_insert(SignatureError::KeyRevoked { key_id });
        } else if let Some(e) = expiry(sub.key.created_at().as_secs(), binding) {
            why.get_or_insert(SignatureError::KeyExpired {
                key_id,
                expired: format_date(e),
            });
        } else {
            return Ok(());
        }
    }
    Err(why.unwrap_or(SignatureError::NoSigningKey { key_id: primary_id }))
}
