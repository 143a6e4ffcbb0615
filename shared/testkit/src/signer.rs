//! [`TestSigner`]: throwaway OpenPGP keys (committed fixtures, made by gpg;
//! see `shared/verify/tests/fixtures/signing/README.md`) that sign SHA256SUMS
//! in-process with rPGP, so publish tests need no gpg.

use pgp::composed::{Deserializable, DetachedSignature, SignedSecretKey, SubpacketConfig};
use pgp::crypto::hash::HashAlgorithm;
use pgp::packet::{Subpacket, SubpacketData};
use pgp::ser::Serialize;
use pgp::types::{KeyDetails, Password, Timestamp};

/// A secret key and its public half.
pub struct TestSigner {
    key: SignedSecretKey,
    /// `gpg --armor --export` of the key: what a publisher gives the registry.
    pub public_armor: &'static str,
    /// When its signatures are dated (unix seconds); now when `None`.
    created: Option<u32>,
}

const SIGNER_SECRET: &str = include_str!("../../verify/tests/fixtures/signing/signer.secret.asc");
const SIGNER_PUB: &str = include_str!("../../verify/tests/fixtures/signing/signer.pub.asc");
const EXPIRED_SECRET: &str =
    include_str!("../../verify/tests/fixtures/signing/signer-expired.secret.asc");
const EXPIRED_PUB: &str =
    include_str!("../../verify/tests/fixtures/signing/signer-expired.pub.asc");

impl TestSigner {
    /// RSA 2048 `[SC]`, never expires: what Terraform of every version verifies.
    pub fn rsa() -> Self {
        Self::load(SIGNER_SECRET, SIGNER_PUB, None)
    }

    /// RSA 2048 `[SC]` made 2020-01-01, expired 2020-01-02; it signs as of
    /// 2020-01-01T06:00:00Z, while it was valid.
    pub fn expired() -> Self {
        Self::load(EXPIRED_SECRET, EXPIRED_PUB, Some(1_577_858_400))
    }

    fn load(secret: &str, public: &'static str, created: Option<u32>) -> Self {
        let (key, _) = SignedSecretKey::from_string(secret).expect("a fixture secret key");
        TestSigner {
            key,
            public_armor: public,
            created,
        }
    }

    /// A binary detached signature over `data` (SHA-256), as `gpg --detach-sign` makes.
    pub fn sign(&self, data: &[u8]) -> Vec<u8> {
        let signer = &self.key.primary_key;
        let rng = rand_core06::OsRng;
        let signature = match self.created {
            None => DetachedSignature::sign_binary_data(
                rng,
                signer,
                &Password::empty(),
                HashAlgorithm::Sha256,
                data,
            ),
            Some(created) => {
                // rPGP's default subpackets, with the creation time given.
                let hashed = vec![
                    Subpacket::regular(SubpacketData::IssuerFingerprint(signer.fingerprint()))
                        .expect("subpacket"),
                    Subpacket::regular(SubpacketData::SignatureCreationTime(Timestamp::from_secs(
                        created,
                    )))
                    .expect("subpacket"),
                ];
                let unhashed = vec![
                    Subpacket::regular(SubpacketData::IssuerKeyId(signer.legacy_key_id()))
                        .expect("subpacket"),
                ];
                DetachedSignature::sign_binary_data_with_subpackets(
                    rng,
                    signer,
                    &Password::empty(),
                    HashAlgorithm::Sha256,
                    data,
                    SubpacketConfig::UserDefined { hashed, unhashed },
                )
            }
        };
        signature
            .expect("signing")
            .to_bytes()
            .expect("a serialisable signature")
    }
}
