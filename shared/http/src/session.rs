//! The web UI's session: after a sign-in with a token, a cookie that names
//! the token by its hash (never the token itself), with an expiry, signed
//! with a key derived from the registry's URL signing secret. Every request
//! verifies the token again (`auth::authorize`), so revoking or expiring the
//! token ends its sessions (within the token cache's seconds).
//!
//! The cookie is `__Host-` prefixed (`Secure`, `Path=/`, no `Domain`: only
//! this host over HTTPS can set or read it), `HttpOnly` (no script reads it)
//! and `SameSite=Strict` (no other site's page sends it: no CSRF).

use http::HeaderMap;

use crate::signed_url::UrlSigner;

/// The cookie's name.
pub const COOKIE: &str = "__Host-tfreg_session";
/// How long a session lasts (a token's own expiry may end it sooner).
pub const SESSION_SECS: u64 = 8 * 3600;
/// The MAC's purpose, so it is never valid as anything else.
const PURPOSE: &str = "ui-session-v1";

/// The cookie value of a session of the token stored under `token_hash`
/// until `expires` (unix seconds): `hash.expires.mac`.
pub fn value(signer: &UrlSigner, token_hash: &str, expires: u64) -> String {
    let message = format!("{token_hash}.{expires}");
    let mac = signer.purpose_mac(PURPOSE, &message);
    format!("{message}.{mac}")
}

/// The token hash of the request's session, if its cookie is there, signed
/// by this registry and not expired at `now`.
pub fn token_hash(signer: &UrlSigner, headers: &HeaderMap, now: u64) -> Option<String> {
    let value = cookie(headers, COOKIE)?;
    let mut parts = value.splitn(3, '.');
    let (hash, expires, mac) = (parts.next()?, parts.next()?, parts.next()?);
    let well_formed = hash.len() == 64 && hash.bytes().all(|b| b.is_ascii_hexdigit());
    let expires: u64 = expires.parse().ok()?;
    (well_formed
        && expires > now
        && signer.purpose_mac_matches(PURPOSE, &format!("{hash}.{expires}"), mac))
    .then(|| hash.to_string())
}

/// A `Set-Cookie` value that opens a session.
pub fn set_cookie(value: &str) -> String {
    format!("{COOKIE}={value}; Path=/; Secure; HttpOnly; SameSite=Strict; Max-Age={SESSION_SECS}")
}

/// A `Set-Cookie` value that ends the session.
pub fn clear_cookie() -> String {
    format!("{COOKIE}=; Path=/; Secure; HttpOnly; SameSite=Strict; Max-Age=0")
}

/// The value of cookie `name` in the request's `Cookie` headers.
pub fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.trim())
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn headers(cookie: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(http::header::COOKIE, HeaderValue::from_str(cookie).unwrap());
        h
    }

    #[test]
    fn a_session_is_valid_only_signed_by_this_registry_and_unexpired() {
        let signer = UrlSigner::new(vec![7; 32]);
        let hash = "ab".repeat(32);
        let v = value(&signer, &hash, 100);
        assert!(!v.contains("tfreg_"), "no token in the cookie");
        let ok = headers(&format!("other=1; {COOKIE}={v}"));
        assert_eq!(token_hash(&signer, &ok, 99), Some(hash.clone()));
        assert_eq!(token_hash(&signer, &ok, 100), None, "expired");
        let other = UrlSigner::new(vec![8; 32]);
        assert_eq!(token_hash(&other, &ok, 99), None, "another registry's");
        let later = v.replacen(".100.", ".200.", 1);
        assert_eq!(
            token_hash(&signer, &headers(&format!("{COOKIE}={later}")), 99),
            None
        );
        let swapped = v.replacen(&hash, &"cd".repeat(32), 1);
        assert_eq!(
            token_hash(&signer, &headers(&format!("{COOKIE}={swapped}")), 99),
            None
        );
        for junk in [
            "",
            "x",
            "a.b.c",
            &format!("{hash}.x.y"),
            "..",
            &"a".repeat(5000),
        ] {
            assert_eq!(
                token_hash(&signer, &headers(&format!("{COOKIE}={junk}")), 0),
                None
            );
        }
        assert_eq!(token_hash(&signer, &HeaderMap::new(), 0), None);
        // Not a URL signature: the key is derived for this purpose only.
        assert_ne!(
            signer.purpose_mac(PURPOSE, "m"),
            signer.purpose_mac("other", "m")
        );
    }

    #[test]
    fn the_cookie_is_host_only_secure_http_only_and_strict() {
        let set = set_cookie("v");
        for attr in [
            "__Host-",
            "Path=/",
            "Secure",
            "HttpOnly",
            "SameSite=Strict",
            "Max-Age=",
        ] {
            assert!(set.contains(attr), "{attr}: {set}");
        }
        assert!(!set.contains("Domain"));
        assert!(clear_cookie().contains("Max-Age=0"));
    }
}
