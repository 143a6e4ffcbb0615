//! The web UI's session: after a sign-in with a token, a cookie that names
//! the token by its hash (never the token itself), the session's own random
//! id and its expiry, MAC'd with a key derived from the registry's URL
//! signing secret (so none of the three can be forged or changed). Every
//! request verifies the token again (`auth::authorize`), so revoking or
//! expiring the token ends its sessions (within the token cache's seconds);
//! signing out records the session's id as ended
//! (`tfreg_store::catalog::sessions`), so the cookie replayed afterwards is
//! refused while other sessions of the same token go on.
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
/// The MAC's purpose, so it is never valid as anything else. (v1 cookies had
/// no session id, so no sign-out could end them: they are no longer valid.)
const PURPOSE: &str = "ui-session-v2";
/// Hex digits of a session id (128 random bits).
const ID_LEN: usize = 32;

/// One browser's session, as its (verified) cookie says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    /// The sha256 (hex) of the token it was opened with.
    pub token_hash: String,
    /// Random, one per sign-in: what a sign-out records as ended.
    pub id: String,
    /// Unix seconds: the cookie is refused from then on.
    pub expires: u64,
}

impl Session {
    /// A new session of the token stored under `token_hash`, from `now`.
    pub fn open(token_hash: &str, now: u64) -> Self {
        Self {
            token_hash: token_hash.to_string(),
            id: hex::encode(rand::random::<[u8; ID_LEN / 2]>()),
            expires: now + SESSION_SECS,
        }
    }
}

fn hex_of(s: &str, len: usize) -> bool {
    s.len() == len && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The cookie value of `session`: `hash.expires.id.mac`.
pub fn value(signer: &UrlSigner, session: &Session) -> String {
    let message = format!("{}.{}.{}", session.token_hash, session.expires, session.id);
    let mac = signer.purpose_mac(PURPOSE, &message);
    format!("{message}.{mac}")
}

/// The request's session, if its cookie is there, MAC'd by this registry
/// and not expired at `now`. (Whether it was signed out of is the store's to
/// say: `auth::authorize`.)
pub fn read(signer: &UrlSigner, headers: &HeaderMap, now: u64) -> Option<Session> {
    let value = cookie(headers, COOKIE)?;
    let mut parts = value.splitn(4, '.');
    let (hash, expires, id, mac) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let well_formed = hex_of(hash, 64) && hex_of(id, ID_LEN);
    let expires: u64 = expires.parse().ok()?;
    (well_formed
        && expires > now
        && signer.purpose_mac_matches(PURPOSE, &format!("{hash}.{expires}.{id}"), mac))
    .then(|| Session {
        token_hash: hash.to_string(),
        id: id.to_string(),
        expires,
    })
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
        let session = Session {
            expires: 100,
            ..Session::open(&hash, 0)
        };
        let v = value(&signer, &session);
        assert!(!v.contains("tfreg_"), "no token in the cookie");
        let ok = headers(&format!("other=1; {COOKIE}={v}"));
        assert_eq!(read(&signer, &ok, 99), Some(session.clone()));
        assert_eq!(read(&signer, &ok, 100), None, "expired");
        let other = UrlSigner::new(vec![8; 32]);
        assert_eq!(read(&other, &ok, 99), None, "another registry's");
        let changed = |from: &str, to: &str| {
            let v = v.replacen(from, to, 1);
            read(&signer, &headers(&format!("{COOKIE}={v}")), 99)
        };
        assert_eq!(changed(".100.", ".200."), None, "a later expiry");
        assert_eq!(changed(&hash, &"cd".repeat(32)), None, "another token");
        assert_eq!(
            changed(&session.id, &"0".repeat(ID_LEN)),
            None,
            "another id"
        );
        // A cookie of the first format (no session id) is no session.
        let v1 = format!(
            "{hash}.100.{}",
            signer.purpose_mac("ui-session-v1", &format!("{hash}.100"))
        );
        assert_eq!(read(&signer, &headers(&format!("{COOKIE}={v1}")), 99), None);
        for junk in [
            "",
            "x",
            "a.b.c",
            "a.b.c.d",
            &format!("{hash}.x.y.z"),
            "...",
            &"a".repeat(5000),
        ] {
            assert_eq!(
                read(&signer, &headers(&format!("{COOKIE}={junk}")), 0),
                None
            );
        }
        assert_eq!(read(&signer, &HeaderMap::new(), 0), None);
        // Each sign-in is a session of its own.
        assert_ne!(Session::open(&hash, 0).id, Session::open(&hash, 0).id);
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
