//! Time-limited, unguessable archive URLs: an HMAC-SHA256 over what the URL
//! grants and its expiry, keyed by a secret only the registry holds.
//!
//! A URL granting a read answers both HEAD and GET (Terraform 1.11.0–1.12.0
//! sends a HEAD before the GET). A URL granting a write answers one PUT of
//! exactly the declared bytes: their size and sha256 are signed into it, so
//! the registry refuses anything else while receiving.

use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha2::Sha256;

use tfreg_model::blob_key::BlobKey;
use tfreg_store::catalog::secret;
use tfreg_store::{Digest, ItemStore, StoreError};

use crate::error::Error;

type HmacSha256 = Hmac<Sha256>;

/// What a signed URL allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grant<'a> {
    /// GET and HEAD of an object.
    Read(&'a BlobKey),
    /// A PUT of exactly these bytes into an upload slot.
    Write(&'a BlobKey, &'a Digest),
}

impl Grant<'_> {
    fn message(&self, expires: u64) -> String {
        match self {
            Grant::Read(key) => format!("read\n{key}\n{expires}"),
            Grant::Write(key, d) => format!("write\n{key}\n{expires}\n{}\n{}", d.size, d.sha256),
        }
    }
}

/// Signs and verifies archive URLs.
#[derive(Clone)]
pub struct UrlSigner {
    secret: Vec<u8>,
}

impl std::fmt::Debug for UrlSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("UrlSigner(..)")
    }
}

fn denied(why: &str) -> Error {
    Error::Forbidden(format!("archive URL refused: {why}"))
}

impl UrlSigner {
    /// A signer with this secret (at least 32 bytes of randomness).
    pub fn new(secret: Vec<u8>) -> Self {
        Self { secret }
    }

    fn mac(&self, grant: Grant<'_>, expires: u64) -> HmacSha256 {
        // Keys of any length are valid for HMAC; `new_from_slice` cannot fail here.
        let mut mac = HmacSha256::new_from_slice(&self.secret).expect("HMAC takes any key length");
        mac.update(grant.message(expires).as_bytes());
        mac
    }

    /// A MAC of `message` for another `purpose` than archive URLs (the web
    /// UI's session cookie): keyed by a key derived from the secret for that
    /// purpose, so no such MAC is ever a valid URL signature, nor the reverse.
    pub fn purpose_mac(&self, purpose: &str, message: &str) -> String {
        base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(self.purpose_hmac(purpose, message).finalize().into_bytes())
    }

    fn purpose_hmac(&self, purpose: &str, message: &str) -> HmacSha256 {
        let key = HmacSha256::new_from_slice(&self.secret)
            .expect("HMAC takes any key length")
            .chain_update(b"tfreg purpose key\0")
            .chain_update(purpose.as_bytes())
            .finalize()
            .into_bytes();
        HmacSha256::new_from_slice(&key)
            .expect("HMAC takes any key length")
            .chain_update(message.as_bytes())
    }

    /// Does `mac` match [`Self::purpose_mac`] of `message` (compared in
    /// constant time)?
    pub fn purpose_mac_matches(&self, purpose: &str, message: &str, mac: &str) -> bool {
        let Ok(mac) = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(mac) else {
            return false;
        };
        self.purpose_hmac(purpose, message)
            .verify_slice(&mac)
            .is_ok()
    }

    /// The query string that grants `grant` until `expires` (unix seconds):
    /// `expires=..&signature=..`, with `size=..&sha256=..` for a write.
    pub fn sign(&self, grant: Grant<'_>, expires: u64) -> String {
        let sig = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(self.mac(grant, expires).finalize().into_bytes());
        match grant {
            Grant::Read(_) => format!("expires={expires}&signature={sig}"),
            Grant::Write(_, d) => format!(
                "expires={expires}&size={}&sha256={}&signature={sig}",
                d.size, d.sha256
            ),
        }
    }

    /// Check a download URL's query string for `key` at time `now`.
    pub fn verify_read(&self, key: &BlobKey, query: Option<&str>, now: u64) -> Result<(), Error> {
        let q = Query::parse(query)?;
        self.check(Grant::Read(key), &q, now)
    }

    /// Check an upload URL's query string for `key` at time `now`; returns the
    /// size and sha256 the upload must have.
    pub fn verify_write(
        &self,
        key: &BlobKey,
        query: Option<&str>,
        now: u64,
    ) -> Result<Digest, Error> {
        let q = Query::parse(query)?;
        let (Some(size), Some(sha256)) = (&q.size, &q.sha256) else {
            return Err(denied("it is not an upload URL"));
        };
        let digest = Digest {
            size: size.parse().map_err(|_| denied("malformed size"))?,
            sha256: sha256.clone(),
        };
        self.check(Grant::Write(key, &digest), &q, now)?;
        Ok(digest)
    }

    fn check(&self, grant: Grant<'_>, q: &Query, now: u64) -> Result<(), Error> {
        let expires: u64 = q.expires.parse().map_err(|_| denied("malformed expiry"))?;
        let sig = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(q.signature.as_bytes())
            .map_err(|_| denied("malformed signature"))?;
        self.mac(grant, expires)
            .verify_slice(&sig)
            .map_err(|_| denied("the signature does not match"))?;
        if now > expires {
            return Err(denied("it has expired; ask the registry for a new one"));
        }
        Ok(())
    }
}

/// The parameters of a signed URL's query string.
struct Query {
    expires: String,
    signature: String,
    size: Option<String>,
    sha256: Option<String>,
}

impl Query {
    fn parse(query: Option<&str>) -> Result<Query, Error> {
        let (mut expires, mut signature, mut size, mut sha256) = (None, None, None, None);
        for (k, v) in url::form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
            let slot = match k.as_ref() {
                "expires" => &mut expires,
                "signature" => &mut signature,
                "size" => &mut size,
                "sha256" => &mut sha256,
                _ => continue,
            };
            *slot = Some(v.into_owned());
        }
        let (Some(expires), Some(signature)) = (expires, signature) else {
            return Err(denied("it is not signed"));
        };
        Ok(Query {
            expires,
            signature,
            size,
            sha256,
        })
    }
}

/// The signer of this registry if its secret exists yet (one `GetItem`); never
/// writes, so functions that may only read the table can call it.
pub async fn read_signer(items: &dyn ItemStore) -> Result<Option<UrlSigner>, StoreError> {
    Ok(secret::read(items).await?.map(UrlSigner::new))
}

/// The signer of this registry, its secret kept in the item store so that every
/// process (the local server, each Lambda function) shares it without extra
/// configuration. The first caller creates it. Only writers (the local server,
/// the publish function) call this.
pub async fn load_signer(items: &dyn ItemStore) -> Result<UrlSigner, StoreError> {
    secret::read_or_create(items).await.map(UrlSigner::new)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn signer() -> UrlSigner {
        UrlSigner::new(vec![7; 32])
    }

    fn key(s: &str) -> BlobKey {
        BlobKey::parse(s).unwrap()
    }

    #[test]
    fn a_signed_url_verifies_until_it_expires() {
        let k = key("archives/x.zip");
        let q = signer().sign(Grant::Read(&k), 1000);
        assert!(signer().verify_read(&k, Some(&q), 999).is_ok());
        assert!(signer().verify_read(&k, Some(&q), 1000).is_ok());
        let err = signer().verify_read(&k, Some(&q), 1001).unwrap_err();
        assert!(err.to_string().contains("expired"));
    }

    #[test]
    fn an_upload_url_carries_the_declared_bytes() {
        let k = key("uploads/0123456789abcdef0123456789abcdef/m.tar.gz");
        let d = Digest {
            size: 10,
            sha256: "a".repeat(64),
        };
        let q = signer().sign(Grant::Write(&k, &d), 1000);
        assert_eq!(signer().verify_write(&k, Some(&q), 0).unwrap(), d);
        // Another size or digest in the query breaks the signature.
        for forged in [
            q.replace("size=10", "size=100000000"),
            q.replace(&d.sha256, &"b".repeat(64)),
        ] {
            let err = signer().verify_write(&k, Some(&forged), 0).unwrap_err();
            assert!(err.to_string().contains("does not match"), "{err}");
        }
        // A write URL grants no read, a read URL no write.
        assert!(signer().verify_read(&k, Some(&q), 0).is_err());
        let read = signer().sign(Grant::Read(&k), 1000);
        assert!(signer().verify_write(&k, Some(&read), 0).is_err());
    }

    #[tokio::test]
    async fn the_secret_is_made_once_and_shared() {
        let store = tfreg_store::sqlite::SqliteStore::in_memory().unwrap();
        let a = load_signer(&store).await.unwrap();
        let b = load_signer(&store).await.unwrap();
        let k = key("archives/k.zip");
        let q = a.sign(Grant::Read(&k), 10);
        assert!(b.verify_read(&k, Some(&q), 0).is_ok());
    }

    #[tokio::test]
    async fn readers_never_create_the_secret() {
        let store = tfreg_store::sqlite::SqliteStore::in_memory().unwrap();
        assert!(read_signer(&store).await.unwrap().is_none());
        assert!(read_signer(&store).await.unwrap().is_none(), "still absent");
        let made = load_signer(&store).await.unwrap();
        let read = read_signer(&store).await.unwrap().expect("now present");
        let k = key("archives/k.zip");
        let q = made.sign(Grant::Read(&k), 10);
        assert!(read.verify_read(&k, Some(&q), 0).is_ok());
    }

    #[test]
    fn tampering_is_refused() {
        let k = key("archives/x.zip");
        let q = signer().sign(Grant::Read(&k), 1000);
        assert!(
            signer()
                .verify_read(&key("archives/y.zip"), Some(&q), 0)
                .is_err()
        );
        let later = q.replace("expires=1000", "expires=9999");
        assert!(signer().verify_read(&k, Some(&later), 0).is_err());
        assert!(
            UrlSigner::new(vec![8; 32])
                .verify_read(&k, Some(&q), 0)
                .is_err()
        );
        assert!(signer().verify_read(&k, None, 0).is_err());
        assert!(
            signer()
                .verify_read(&k, Some("expires=a&signature=%%"), 0)
                .is_err()
        );
    }
}
