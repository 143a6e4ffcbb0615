//! Path segments as the router reads and writes them: escapes decoded
//! strictly, hostnames escaped, ids checked, the methods each kind of route
//! takes, and the 404 of an unknown path (bounded).

use std::borrow::Cow;

use http::Method;

use crate::address::Hostname;
use crate::error::RouteError;

pub(crate) const READ_METHODS: &[Method] = &[Method::GET, Method::HEAD];
pub(crate) const BLOB_METHODS: &[Method] = &[Method::GET, Method::HEAD, Method::PUT];
pub(crate) const PUBLISH_METHODS: &[Method] = &[Method::POST];
pub(crate) const GET: &[Method] = &[Method::GET];
pub(crate) const GET_POST: &[Method] = &[Method::GET, Method::POST];
pub(crate) const DELETE: &[Method] = &[Method::DELETE];
pub(crate) const POST: &[Method] = &[Method::POST];
pub(crate) const PUT: &[Method] = &[Method::PUT];
pub(crate) const GET_PUT_DELETE: &[Method] = &[Method::GET, Method::PUT, Method::DELETE];
pub(crate) const GET_HEAD_POST: &[Method] = &[Method::GET, Method::HEAD, Method::POST];

/// A hostname as one path segment: `:` (before a port) is escaped.
pub(crate) fn host_segment(host: &Hostname) -> String {
    host.as_str().replace(':', "%3A")
}

/// Decode one `%XX`-escaped path segment; refuse escapes that would change the
/// path's structure (`/`, `\`, NUL) or invalid UTF-8. Borrowed when
/// nothing is escaped (every request's path, as Terraform sends it).
pub(crate) fn decode_segment(seg: &str) -> Result<Cow<'_, str>, RouteError> {
    let bad = || RouteError::bad(format!("malformed path segment {seg:?}"));
    if !seg.contains('%') {
        return Ok(Cow::Borrowed(seg));
    }
    let bytes = seg.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = seg
                .get(i + 1..i + 3)
                .filter(|h| h.bytes().all(|c| c.is_ascii_hexdigit()))
                .ok_or_else(bad)?;
            let b = u8::from_str_radix(hex, 16).map_err(|_| bad())?;
            if matches!(b, b'/' | b'\\' | 0) {
                return Err(bad());
            }
            out.push(b);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map(Cow::Owned).map_err(|_| bad())
}

pub(crate) fn not_found(path: &str) -> RouteError {
    // Bounded: the path may be 2 KB of junk.
    let shown: String = path.chars().take(120).collect();
    RouteError::not_found(format!("no such endpoint: {shown}"))
}

/// A token's public id: [`crate::token::TOKEN_ID_LEN`] hex digits, lowercase.
pub(crate) fn token_id(s: &str) -> Result<String, RouteError> {
    if s.len() == crate::token::TOKEN_ID_LEN && s.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(s.to_ascii_lowercase())
    } else {
        Err(RouteError::bad(format!(
            "invalid token id {:?}: {} hex digits, as `tfreg token list` shows",
            s.chars().take(40).collect::<String>(),
            crate::token::TOKEN_ID_LEN
        )))
    }
}

/// An OpenPGP key id: 16 hex digits, uppercase.
pub(crate) fn key_id_segment(s: &str) -> Result<String, RouteError> {
    if s.len() == 16 && s.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(s.to_ascii_uppercase())
    } else {
        Err(RouteError::bad(format!(
            "invalid key id {:?}: 16 hex digits, as `tfreg key list` shows",
            s.chars().take(40).collect::<String>()
        )))
    }
}

/// Longest path the router looks at.
pub const MAX_PATH_LEN: usize = 2048;
