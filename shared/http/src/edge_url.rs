//! Archives from the edge (issue 37): CloudFront signed URLs with a canned
//! policy, the second way an AWS deployment hands out archives
//! ([`ArchiveDelivery::CloudFront`](crate::registry::ArchiveDelivery)).
//!
//! A URL is `{base}/{blob key}?Expires=E&Signature=S&Key-Pair-Id=ID`, where
//! `S` is the RSA-SHA1 PKCS#1 v1.5 signature of the canned policy
//! `{"Statement":[{"Resource":"<the URL without the query>","Condition":{"DateLessThan":{"AWS:EpochTime":E}}}]}`
//! in CloudFront's base64 (`+` `=` `/` as `-` `_` `~`). Byte for byte what
//! botocore's `CloudFrontSigner.generate_presigned_url(url,
//! date_less_than=E)` makes (tests/suite/cloudfront_signer.rs compares the
//! two for several keys, URLs and expiries).
//!
//! Blob keys are ASCII letters, digits, `.`, `_`, `-` and `/` only
//! (`tfreg_model::blob_key`): the key is the URL's path as it is, no
//! percent-encoding, so the resource signed is the path CloudFront sees.
//!
//! The private key never reaches a log line: [`CloudFrontSigner`]'s `Debug`
//! leaves it out, and errors never quote the PEM.

use std::sync::Arc;

use async_trait::async_trait;
use rsa::RsaPrivateKey;
use rsa::pkcs1::DecodeRsaPrivateKey;
use rsa::pkcs1v15::SigningKey;
use rsa::pkcs8::DecodePrivateKey;
use rsa::signature::{RandomizedSigner, SignatureEncoding};
use rsa::traits::PublicKeyParts;
use sha1::Sha1;
use tfreg_model::blob_key::BlobKey;
use tfreg_store::{BlobStore, ByteStream, Claimed, Digest, Download, StoreError, UploadVia};

/// The shortest RSA key accepted (CloudFront's public keys are 2048-bit
/// or longer).
pub const MIN_KEY_BITS: usize = 2048;

/// Why a CloudFront signer cannot be made: each names the setting, never
/// the key's bytes.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum EdgeKeyError {
    #[error(
        "not a PEM RSA private key: expected `-----BEGIN RSA PRIVATE KEY-----` (PKCS#1) or `-----BEGIN PRIVATE KEY-----` (PKCS#8)"
    )]
    NotPem,
    #[error(
        "the private key is encrypted (`BEGIN ENCRYPTED PRIVATE KEY`): store it unencrypted, in an SSM SecureString or a Secrets Manager secret"
    )]
    Encrypted,
    #[error("the private key does not decode as {format}: {reason}")]
    Malformed {
        format: &'static str,
        reason: String,
    },
    #[error("the private key has {0} bits: at least {MIN_KEY_BITS} are needed")]
    TooShort(usize),
    #[error(
        "the key pair id {0:?} is not a CloudFront public key id (1 to 64 ASCII letters and digits)"
    )]
    KeyPairId(String),
    #[error(
        "the base URL {0:?} must be http(s)://host[:port][/path] with no query, fragment or trailing slash"
    )]
    BaseUrl(String),
}

/// Signs CloudFront URLs with one key pair: for archives, under one base URL.
pub struct CloudFrontSigner {
    base_url: String,
    key_pair_id: String,
    key: SigningKey<Sha1>,
}

impl std::fmt::Debug for CloudFrontSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CloudFrontSigner")
            .field("base_url", &self.base_url)
            .field("key_pair_id", &self.key_pair_id)
            .finish_non_exhaustive()
    }
}

/// The private key a PEM holds, PKCS#1 or PKCS#8 (unencrypted).
pub fn parse_private_key(pem: &str) -> Result<RsaPrivateKey, EdgeKeyError> {
    let pem = pem.trim();
    let malformed = |format: &'static str| {
        move |e: &dyn std::fmt::Display| EdgeKeyError::Malformed {
            format,
            reason: e.to_string(),
        }
    };
    let key = if pem.starts_with("-----BEGIN RSA PRIVATE KEY-----") {
        RsaPrivateKey::from_pkcs1_pem(pem).map_err(|e| malformed("PKCS#1")(&e))?
    } else if pem.starts_with("-----BEGIN PRIVATE KEY-----") {
        RsaPrivateKey::from_pkcs8_pem(pem).map_err(|e| malformed("PKCS#8")(&e))?
    } else if pem.starts_with("-----BEGIN ENCRYPTED PRIVATE KEY-----") {
        return Err(EdgeKeyError::Encrypted);
    } else {
        return Err(EdgeKeyError::NotPem);
    };
    let bits = key.n().bits();
    if bits < MIN_KEY_BITS {
        return Err(EdgeKeyError::TooShort(bits));
    }
    Ok(key)
}

/// A CloudFront public key id: what `Key-Pair-Id=` carries, unescaped.
pub fn check_key_pair_id(id: &str) -> Result<(), EdgeKeyError> {
    if id.is_empty() || id.len() > 64 || !id.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return Err(EdgeKeyError::KeyPairId(id.chars().take(80).collect()));
    }
    Ok(())
}

/// A base URL signed URLs are built on: `http(s)://host[:port][/path]`,
/// no query, fragment, user info or trailing slash.
pub fn check_base_url(url: &str) -> Result<(), EdgeKeyError> {
    let bad = || EdgeKeyError::BaseUrl(url.chars().take(200).collect());
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
        .ok_or_else(bad)?;
    let host = rest.split('/').next().unwrap_or_default();
    let ok = !host.is_empty()
        && !url.ends_with('/')
        && rest.bytes().all(|b| {
            b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_' | b':' | b'/' | b'[' | b']')
        })
        && !rest.contains("//");
    ok.then_some(()).ok_or_else(bad)
}

impl CloudFrontSigner {
    /// A signer for URLs under `base_url` (see [`check_base_url`]) with the
    /// key pair `key_pair_id` whose private key `pem` holds.
    pub fn new(base_url: &str, key_pair_id: &str, pem: &str) -> Result<Self, EdgeKeyError> {
        check_base_url(base_url)?;
        check_key_pair_id(key_pair_id)?;
        Ok(Self::with_key(
            base_url,
            key_pair_id,
            parse_private_key(pem)?,
        ))
    }

    /// [`new`](Self::new) with a key already decoded (its checks not made).
    pub fn with_key(base_url: &str, key_pair_id: &str, key: RsaPrivateKey) -> Self {
        Self {
            base_url: base_url.to_string(),
            key_pair_id: key_pair_id.to_string(),
            key: SigningKey::new(key),
        }
    }

    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    pub fn key_pair_id(&self) -> &str {
        &self.key_pair_id
    }

    /// The signed URL of the archive `key`, valid until `expires` (Unix
    /// seconds; CloudFront refuses it from then on).
    pub fn archive_url(&self, key: &BlobKey, expires: u64) -> String {
        self.sign(&format!("{}/{key}", self.base_url), expires)
    }

    /// `url` signed with a canned policy until `expires`, as botocore's
    /// `generate_presigned_url(url, date_less_than=expires)`: the
    /// parameters appended after `&` if `url` has a query, else after `?`.
    pub fn sign(&self, url: &str, expires: u64) -> String {
        let policy = canned_policy(url, expires);
        // Blinded (a fresh random factor per signature): the time a
        // signature takes says nothing about the key. PKCS#1 v1.5 is
        // deterministic: the signature is the same either way.
        let signature = self
            .key
            .sign_with_rng(&mut rsa::rand_core::OsRng, policy.as_bytes());
        let separator = if url.contains('?') { '&' } else { '?' };
        format!(
            "{url}{separator}Expires={expires}&Signature={}&Key-Pair-Id={}",
            cloudfront_base64(&signature.to_bytes()),
            self.key_pair_id
        )
    }
}

/// The canned policy of `resource` until `expires`, as botocore's
/// `build_policy` writes it (`json.dumps`, no spaces).
pub fn canned_policy(resource: &str, expires: u64) -> String {
    format!(
        r#"{{"Statement":[{{"Resource":{},"Condition":{{"DateLessThan":{{"AWS:EpochTime":{expires}}}}}}}]}}"#,
        json_string(resource)
    )
}

/// `s` as Python's `json.dumps` writes a string (`ensure_ascii`): `"` and
/// `\` escaped, control characters as `\n`-style or `\u00XX`, everything
/// past ASCII as `\uXXXX` (UTF-16, so surrogate pairs past the BMP).
fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 || (c as u32) > 0x7f => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Base64 in CloudFront's URL-safe alphabet: the standard one (padded)
/// with `+`, `=` and `/` replaced by `-`, `_` and `~`.
pub fn cloudfront_base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-~";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('_');
            }
        }
    }
    out
}

/// The blob store of the `blob` function in CloudFront mode: what a
/// download would redirect to (a presigned S3 URL) becomes a CloudFront
/// signed URL of the same key, valid for `ttl_secs`. Everything else, HEAD
/// included (answered from the store), is the inner store's.
///
/// Only files the pull-through cache keeps reach the blob function in this
/// mode: their URLs stay the registry's own, since such a file may not be
/// in the bucket yet (the blob function fetches it on a miss, then sends
/// the client here). A GET of one that is stored ends at the edge.
pub struct EdgeRedirects {
    inner: Arc<dyn BlobStore>,
    signer: Arc<CloudFrontSigner>,
    ttl_secs: u64,
    clock: fn() -> u64,
}

impl EdgeRedirects {
    pub fn new(inner: Arc<dyn BlobStore>, signer: Arc<CloudFrontSigner>, ttl_secs: u64) -> Self {
        Self {
            inner,
            signer,
            ttl_secs,
            clock: tfreg_model::unix_now,
        }
    }

    /// Replace the clock (tests).
    pub fn with_clock(mut self, clock: fn() -> u64) -> Self {
        self.clock = clock;
        self
    }
}

#[async_trait]
impl BlobStore for EdgeRedirects {
    async fn receive(
        &self,
        key: &BlobKey,
        body: ByteStream,
        expected: &Digest,
    ) -> Result<(), StoreError> {
        self.inner.receive(key, body, expected).await
    }
    async fn claim(&self, key: &BlobKey, max: u64) -> Result<Claimed, StoreError> {
        self.inner.claim(key, max).await
    }
    async fn keep(&self, claimed: &Claimed, dest: &BlobKey) -> Result<(), StoreError> {
        self.inner.keep(claimed, dest).await
    }
    async fn close_upload(&self, key: &BlobKey) -> Result<(), StoreError> {
        self.inner.close_upload(key).await
    }
    async fn delete(&self, key: &BlobKey) -> Result<(), StoreError> {
        self.inner.delete(key).await
    }
    async fn list(&self, prefix: &str) -> Result<Vec<BlobKey>, StoreError> {
        self.inner.list(prefix).await
    }
    async fn download(&self, key: &BlobKey, head: bool) -> Result<Download, StoreError> {
        match self.inner.download(key, head).await? {
            Download::Redirect(_) => Ok(Download::Redirect(
                self.signer.archive_url(key, (self.clock)() + self.ttl_secs),
            )),
            other => Ok(other),
        }
    }
    async fn upload_via(&self, key: &BlobKey, expected: &Digest) -> Result<UploadVia, StoreError> {
        self.inner.upload_via(key, expected).await
    }
    async fn put_file(
        &self,
        key: &BlobKey,
        path: &std::path::Path,
        expected: &Digest,
    ) -> Result<(), StoreError> {
        self.inner.put_file(key, path, expected).await
    }
}

#[cfg(test)]
mod tests;
