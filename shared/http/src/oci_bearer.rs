//! The OCI view's bearer tokens (issue 40): what its token endpoint gives a
//! client for Basic credentials (the password a tfreg token), as oras-go
//! (and so OpenTofu), skopeo and docker ask for one after a `401`.
//!
//! A bearer is kept by no one: the token's hash, the repositories it may
//! pull and its expiry, MAC'd with a key derived from the registry's secret
//! (as session cookies and sign-in states are). It is valid only on the
//! OCI routes, only for those repositories, only for
//! [`BEARER_TTL_SECS`], and only while the token it was issued for is: the
//! token is verified again on every request ([`crate::auth`]), so a revoked
//! token's bearers stop with it.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::signed_url::UrlSigner;

/// How a bearer of the OCI view starts (a tfreg token never does).
pub const PREFIX: &str = "tfreg-oci.";
/// How long a bearer is good for (a client asks again after a `401`).
pub const BEARER_TTL_SECS: u64 = 300;
const PURPOSE: &str = "oci-bearer-v1";
/// The longest bearer read back (a few dozen repositories).
const MAX_BEARER_CHARS: usize = 8192;

/// What a bearer grants.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grant {
    /// The sha256 of the token it was issued for (how the store keys it).
    #[serde(rename = "h")]
    pub token_hash: String,
    /// The repositories it may pull (none: only `GET /v2/`).
    #[serde(rename = "r")]
    pub repositories: Vec<String>,
    /// Unix seconds after which it is refused.
    #[serde(rename = "e")]
    pub expires: u64,
}

/// A bearer for `grant`.
pub fn issue(signer: &UrlSigner, grant: &Grant) -> String {
    // A struct of strings and numbers: serialising cannot fail.
    let payload = URL_SAFE_NO_PAD.encode(serde_json::to_vec(grant).unwrap_or_default());
    let mac = signer.purpose_mac(PURPOSE, &payload);
    format!("{PREFIX}{payload}.{mac}")
}

/// Is this presented token one of the OCI view's bearers?
pub fn is_bearer(token: &str) -> bool {
    token.starts_with(PREFIX)
}

fn refused(why: &str) -> Error {
    Error::Unauthorized(format!(
        "the bearer token is {why}: ask the token endpoint for a new one"
    ))
}

/// The grant of a bearer this registry issued, unexpired at `now`.
pub fn open(signer: &UrlSigner, bearer: &str, now: u64) -> Result<Grant, Error> {
    let body = bearer
        .strip_prefix(PREFIX)
        .filter(|b| b.len() <= MAX_BEARER_CHARS)
        .ok_or_else(|| refused("not one of this registry's"))?;
    let (payload, mac) = body.split_once('.').ok_or_else(|| refused("malformed"))?;
    if !signer.purpose_mac_matches(PURPOSE, payload, mac) {
        return Err(refused("not one of this registry's"));
    }
    let grant: Grant = URL_SAFE_NO_PAD
        .decode(payload)
        .ok()
        .and_then(|json| serde_json::from_slice(&json).ok())
        .ok_or_else(|| refused("malformed"))?;
    if grant.expires <= now {
        return Err(refused("expired"));
    }
    Ok(grant)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(expires: u64) -> Grant {
        Grant {
            token_hash: "ab".repeat(32),
            repositories: vec!["providers/acme/widget".into()],
            expires,
        }
    }

    #[test]
    fn a_bearer_opens_only_with_its_secret_and_before_it_expires() {
        let signer = UrlSigner::new(vec![7; 32]);
        let bearer = issue(&signer, &grant(1000));
        assert!(is_bearer(&bearer));
        assert_eq!(open(&signer, &bearer, 999).unwrap(), grant(1000));
        assert!(
            matches!(open(&signer, &bearer, 1000), Err(Error::Unauthorized(m)) if m.contains("expired"))
        );
        let other = UrlSigner::new(vec![8; 32]);
        assert!(
            open(&other, &bearer, 1).is_err(),
            "another registry's secret"
        );
        // A session cookie's or URL's MAC is never a bearer's.
        let payload = bearer
            .strip_prefix(PREFIX)
            .unwrap()
            .split_once('.')
            .unwrap()
            .0;
        let forged = format!(
            "{PREFIX}{payload}.{}",
            signer.purpose_mac("session-v1", payload)
        );
        assert!(open(&signer, &forged, 1).is_err());
        // A payload changed (more repositories, a later expiry) is refused.
        let mut wider = grant(1000);
        wider.repositories.push("providers/acme/other".into());
        let wider_payload = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&wider).unwrap());
        let mac = bearer.rsplit_once('.').unwrap().1;
        assert!(open(&signer, &format!("{PREFIX}{wider_payload}.{mac}"), 1).is_err());
        for junk in ["", "tfreg-oci.", "tfreg-oci.x", "tfreg-oci.a.b", "other"] {
            assert!(open(&signer, junk, 1).is_err(), "{junk}");
        }
    }
}
