//! Time-limited, unguessable archive URLs: an HMAC-SHA256 over the method
//! class, object key and expiry, keyed by a secret only the registry holds.
//!
//! A URL signed for reading answers both HEAD and GET (Terraform 1.11.0–1.12.0
//! sends a HEAD before the GET); a URL signed for writing answers PUT only.

use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::error::Error;
use crate::storage::{Condition, Item, ItemStore, StoreError};

type HmacSha256 = Hmac<Sha256>;

/// What a signed URL allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// GET and HEAD.
    Read,
    /// PUT.
    Write,
}

impl Access {
    fn tag(self) -> &'static str {
        match self {
            Access::Read => "read",
            Access::Write => "write",
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

impl UrlSigner {
    /// A signer with this secret (at least 32 bytes of randomness).
    pub fn new(secret: Vec<u8>) -> Self {
        Self { secret }
    }

    fn mac(&self, access: Access, key: &str, expires: u64) -> HmacSha256 {
        // Keys of any length are valid for HMAC; `new_from_slice` cannot fail here.
        let mut mac = HmacSha256::new_from_slice(&self.secret).expect("HMAC takes any key length");
        mac.update(format!("{}\n{}\n{}", access.tag(), key, expires).as_bytes());
        mac
    }

    /// The query string (`expires=..&signature=..`) that grants `access` to `key` until `expires` (unix seconds).
    pub fn sign(&self, access: Access, key: &str, expires: u64) -> String {
        let sig = self.mac(access, key, expires).finalize().into_bytes();
        format!(
            "expires={expires}&signature={}",
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sig)
        )
    }

    /// Check a request's query string for `key` at time `now`.
    pub fn verify(
        &self,
        access: Access,
        key: &str,
        query: Option<&str>,
        now: u64,
    ) -> Result<(), Error> {
        let denied = |why: &str| Error::Forbidden(format!("archive URL refused: {why}"));
        let mut expires = None;
        let mut signature = None;
        for (k, v) in url::form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
            match k.as_ref() {
                "expires" => expires = Some(v.into_owned()),
                "signature" => signature = Some(v.into_owned()),
                _ => {}
            }
        }
        let (Some(expires), Some(signature)) = (expires, signature) else {
            return Err(denied("it is not signed"));
        };
        let expires: u64 = expires.parse().map_err(|_| denied("malformed expiry"))?;
        let sig = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(signature.as_bytes())
            .map_err(|_| denied("malformed signature"))?;
        self.mac(access, key, expires)
            .verify_slice(&sig)
            .map_err(|_| denied("the signature does not match"))?;
        if now > expires {
            return Err(denied("it has expired; ask the registry for a new one"));
        }
        Ok(())
    }
}

const SECRET_PK: &str = "CONFIG#url-signing-secret";
const SECRET_SK: &str = "CONFIG";

fn decode_secret(item: Item) -> Result<UrlSigner, StoreError> {
    let secret = base64::engine::general_purpose::STANDARD
        .decode(&item.data)
        .map_err(|e| StoreError::Backend(format!("corrupt URL signing secret: {e}")))?;
    if secret.len() < 32 {
        return Err(StoreError::Backend("URL signing secret too short".into()));
    }
    Ok(UrlSigner::new(secret))
}

/// The signer of this registry if its secret exists yet (one `GetItem`); never
/// writes, so functions that may only read the table can call it.
pub async fn read_signer(items: &dyn ItemStore) -> Result<Option<UrlSigner>, StoreError> {
    match items.get(SECRET_PK, SECRET_SK).await? {
        Some(item) => decode_secret(item).map(Some),
        None => Ok(None),
    }
}

/// The signer of this registry, its secret kept in the item store so that every
/// process (the local server, each Lambda function) shares it without extra
/// configuration. The first caller creates it; a race is settled by the
/// conditional put. Only writers (the local server, the publish function) call this.
pub async fn load_signer(items: &dyn ItemStore) -> Result<UrlSigner, StoreError> {
    if let Some(signer) = read_signer(items).await? {
        return Ok(signer);
    }
    let secret: [u8; 32] = rand::random();
    let item = Item {
        pk: SECRET_PK.into(),
        sk: SECRET_SK.into(),
        data: base64::engine::general_purpose::STANDARD
            .encode(secret)
            .into_bytes(),
    };
    match items.put(item.clone(), Condition::IfAbsent).await {
        Ok(()) => decode_secret(item),
        Err(StoreError::ConditionFailed) => read_signer(items)
            .await?
            .ok_or_else(|| StoreError::Backend("URL signing secret vanished".into())),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn signer() -> UrlSigner {
        UrlSigner::new(vec![7; 32])
    }

    #[test]
    fn a_signed_url_verifies_until_it_expires() {
        let q = signer().sign(Access::Read, "archives/x.zip", 1000);
        assert!(
            signer()
                .verify(Access::Read, "archives/x.zip", Some(&q), 999)
                .is_ok()
        );
        assert!(
            signer()
                .verify(Access::Read, "archives/x.zip", Some(&q), 1000)
                .is_ok()
        );
        let err = signer()
            .verify(Access::Read, "archives/x.zip", Some(&q), 1001)
            .unwrap_err();
        assert!(err.to_string().contains("expired"));
    }

    #[tokio::test]
    async fn the_secret_is_made_once_and_shared() {
        let store = crate::storage::sqlite::SqliteStore::in_memory().unwrap();
        let a = load_signer(&store).await.unwrap();
        let b = load_signer(&store).await.unwrap();
        let q = a.sign(Access::Read, "k.zip", 10);
        assert!(b.verify(Access::Read, "k.zip", Some(&q), 0).is_ok());
    }

    #[tokio::test]
    async fn readers_never_create_the_secret() {
        let store = crate::storage::sqlite::SqliteStore::in_memory().unwrap();
        assert!(read_signer(&store).await.unwrap().is_none());
        assert!(read_signer(&store).await.unwrap().is_none(), "still absent");
        let made = load_signer(&store).await.unwrap();
        let read = read_signer(&store).await.unwrap().expect("now present");
        let q = made.sign(Access::Read, "k.zip", 10);
        assert!(read.verify(Access::Read, "k.zip", Some(&q), 0).is_ok());
    }

    #[test]
    fn tampering_is_refused() {
        let q = signer().sign(Access::Read, "archives/x.zip", 1000);
        assert!(
            signer()
                .verify(Access::Read, "archives/y.zip", Some(&q), 0)
                .is_err()
        );
        assert!(
            signer()
                .verify(Access::Write, "archives/x.zip", Some(&q), 0)
                .is_err()
        );
        let later = q.replace("expires=1000", "expires=9999");
        assert!(
            signer()
                .verify(Access::Read, "archives/x.zip", Some(&later), 0)
                .is_err()
        );
        assert!(
            UrlSigner::new(vec![8; 32])
                .verify(Access::Read, "archives/x.zip", Some(&q), 0)
                .is_err()
        );
        assert!(
            signer()
                .verify(Access::Read, "archives/x.zip", None, 0)
                .is_err()
        );
        assert!(
            signer()
                .verify(
                    Access::Read,
                    "archives/x.zip",
                    Some("expires=a&signature=%%"),
                    0
                )
                .is_err()
        );
    }
}
