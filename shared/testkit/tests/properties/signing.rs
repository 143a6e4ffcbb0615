//! OpenPGP keys and signatures ([`tfreg_verify::signing`]): arbitrary text and bytes,
//! and mutations (bit flips, truncations, inserted bytes) of the gpg-made
//! fixtures and of [`TestSigner`] signatures, give a [`PublicKey`] or a
//! [`SignatureError`]. The OpenPGP library runs behind `catch_unwind` guards;
//! these properties also check that no panic was raised inside it at all (a
//! release build with `panic = "abort"` would have no guard).
//!
//! Key mutations are made twice: in the armor text (caught by the armor and its
//! checksum) and in the packet bytes, armored again with a correct checksum, so
//! that they reach the packet parsers.

use std::io::Read;
use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

use pgp::armor::{BlockType, Dearmor};
use proptest::prelude::*;

use super::{config, in_place_mutations, mutate, mutations};
use tfreg_testkit::TestSigner;
use tfreg_testkit::panics::caught;
use tfreg_verify::signing::{PublicKey, SignatureError, VerifiedSignature};

macro_rules! fixture {
    ($name:literal) => {
        include_bytes!(concat!("../../../verify/tests/fixtures/signing/", $name)).as_slice()
    };
}

const SUMS: &[u8] = fixture!("SHA256SUMS");

/// Every fixture key with the signature it made over [`SUMS`].
const PAIRS: [(&[u8], &[u8]); 8] = [
    (fixture!("rsa.pub.asc"), fixture!("SHA256SUMS.rsa.sig")),
    (
        fixture!("ed25519.pub.asc"),
        fixture!("SHA256SUMS.ed25519.sig"),
    ),
    (
        fixture!("subkey.pub.asc"),
        fixture!("SHA256SUMS.subkey.sig"),
    ),
    (fixture!("mixed.pub.asc"), fixture!("SHA256SUMS.mixed.sig")),
    (
        fixture!("expired.pub.asc"),
        fixture!("SHA256SUMS.expired.sig"),
    ),
    (
        fixture!("revoked.pub.asc"),
        fixture!("SHA256SUMS.revoked.sig"),
    ),
    (
        fixture!("certonly.pub.asc"),
        fixture!("SHA256SUMS.certonly.sig"),
    ),
    (fixture!("rsa.pub.asc"), fixture!("SHA256SUMS.rsa.text.sig")),
];

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("the clock is after 1970")
        .as_secs()
}

fn text(armor: &[u8]) -> &str {
    std::str::from_utf8(armor).expect("armor is text")
}

/// The packet bytes of an armored fixture key.
fn packets(armor: &[u8]) -> Vec<u8> {
    let mut bytes = Vec::new();
    Dearmor::new(armor)
        .read_to_end(&mut bytes)
        .expect("a fixture key");
    bytes
}

/// Bytes written as they are, for the armor writer.
struct Raw<'a>(&'a [u8]);

impl pgp::ser::Serialize for Raw<'_> {
    fn to_writer<W: std::io::Write>(&self, w: &mut W) -> pgp::errors::Result<()> {
        w.write_all(self.0)?;
        Ok(())
    }

    fn write_len(&self) -> usize {
        self.0.len()
    }
}

/// `packets` as an ASCII-armored public key block with a correct checksum.
fn armor(packets: &[u8]) -> String {
    let mut out = Vec::new();
    pgp::armor::write(&Raw(packets), BlockType::PublicKey, &mut out, None, true)
        .expect("armor to memory");
    String::from_utf8(out).expect("armor is text")
}

/// A key, or a refusal, with no panic inside the OpenPGP library.
fn parse_key(armor: &str) -> Result<Result<PublicKey, SignatureError>, TestCaseError> {
    let (key, panicked) = caught(|| PublicKey::parse(armor));
    prop_assert!(!panicked, "the OpenPGP library panicked on a key");
    Ok(key)
}

/// The signature check, with no panic inside the OpenPGP library.
fn verify(
    key: &PublicKey,
    data: &[u8],
    sig: &[u8],
    allow_modern: bool,
) -> Result<Result<VerifiedSignature, SignatureError>, TestCaseError> {
    let (verified, panicked) = caught(|| key.verify_for_terraform(data, sig, allow_modern, now()));
    prop_assert!(!panicked, "the OpenPGP library panicked on a signature");
    Ok(verified)
}

fn signer() -> &'static TestSigner {
    static SIGNER: OnceLock<TestSigner> = OnceLock::new();
    SIGNER.get_or_init(TestSigner::rsa)
}

fn signer_key() -> &'static PublicKey {
    static KEY: OnceLock<PublicKey> = OnceLock::new();
    KEY.get_or_init(|| PublicKey::parse(signer().public_armor).expect("the signer's key"))
}

/// A TestSigner signature over [`SUMS`], made once.
fn signer_sig() -> &'static [u8] {
    static SIG: OnceLock<Vec<u8>> = OnceLock::new();
    SIG.get_or_init(|| signer().sign(SUMS))
}

#[test]
fn the_fixtures_verify_as_they_are_and_armor_again_unchanged() {
    // Controls for the mutations below: unchanged inputs pass.
    for (key, _) in &PAIRS[..4] {
        let again = armor(&packets(key));
        let original = PublicKey::parse(text(key)).unwrap();
        let rearmored = PublicKey::parse(&again).unwrap();
        assert_eq!(original.info().key_id, rearmored.info().key_id);
    }
    let rsa = PublicKey::parse(text(PAIRS[0].0)).unwrap();
    assert!(
        rsa.verify_for_terraform(SUMS, PAIRS[0].1, false, now())
            .is_ok()
    );
    assert!(
        signer_key()
            .verify_for_terraform(SUMS, signer_sig(), false, now())
            .is_ok()
    );
}

fn pair() -> impl Strategy<Value = (&'static [u8], &'static [u8])> {
    prop::sample::select(PAIRS.to_vec())
}

proptest! {
    #![proptest_config(config(128))]

    #[test]
    fn any_text_is_a_key_or_a_key_error(s in any::<String>(), bytes in prop::collection::vec(any::<u8>(), 0..600)) {
        parse_key(&s)?.ok();
        // Random packet bytes inside a well-formed armor reach the packet parser.
        let armored = armor(&bytes);
        let key = parse_key(&armored)?;
        prop_assert!(key.is_err());
    }

    #[test]
    fn damaged_key_armor_is_refused_or_still_the_same_key((key, _) in pair(), changes in mutations()) {
        let damaged = mutate(key, &changes);
        let damaged = String::from_utf8_lossy(&damaged);
        if let Ok(parsed) = parse_key(&damaged)? {
            // Only changes the armor ignores (whitespace, headers) can pass.
            let original = PublicKey::parse(text(key)).unwrap();
            prop_assert_eq!(&parsed.info().key_id, &original.info().key_id);
        }
    }

    #[test]
    fn damaged_key_packets_give_a_key_or_a_key_error((key, sig) in pair(), changes in prop_oneof![mutations(), in_place_mutations()]) {
        let damaged = armor(&mutate(&packets(key), &changes));
        if let Ok(parsed) = parse_key(&damaged)? {
            // What still loads is checked with the signature, without panic.
            verify(&parsed, SUMS, sig, true)?.ok();
        }
    }

    #[test]
    fn any_bytes_are_no_signature(bytes in prop::collection::vec(any::<u8>(), 0..800), allow_modern in any::<bool>()) {
        let verified = verify(signer_key(), SUMS, &bytes, allow_modern)?;
        prop_assert!(verified.is_err());
    }

    #[test]
    fn damaged_fixture_signatures_are_refused_or_verify((key, sig) in pair(), changes in prop_oneof![mutations(), in_place_mutations()], allow_modern in any::<bool>()) {
        let key = PublicKey::parse(text(key)).unwrap();
        let damaged = mutate(sig, &changes);
        if let Ok(v) = verify(&key, SUMS, &damaged, allow_modern)? {
            // Only the unhashed part of a signature can change and still verify.
            prop_assert_eq!(v.key_id, key.info().key_id.clone());
        }
    }

    #[test]
    fn damaged_signer_signatures_are_refused_or_verify(changes in prop_oneof![mutations(), in_place_mutations()], allow_modern in any::<bool>()) {
        let damaged = mutate(signer_sig(), &changes);
        if let Ok(v) = verify(signer_key(), SUMS, &damaged, allow_modern)? {
            prop_assert_eq!(v.key_id, signer_key().info().key_id.clone());
        }
    }

    #[test]
    fn changed_data_never_verifies(changes in mutations()) {
        let data = mutate(SUMS, &changes);
        prop_assume!(data != SUMS);
        let verified = verify(signer_key(), &data, signer_sig(), true)?;
        prop_assert_eq!(verified, Err(SignatureError::BadSignature));
    }
}

proptest! {
    // Signing with RSA is the slow part: fewer cases.
    #![proptest_config(config(16))]

    #[test]
    fn a_fresh_signature_over_any_data_verifies(data in prop::collection::vec(any::<u8>(), 0..2048)) {
        let sig = signer().sign(&data);
        let verified = verify(signer_key(), &data, &sig, false)?;
        prop_assert!(verified.is_ok(), "{verified:?}");
    }
}
