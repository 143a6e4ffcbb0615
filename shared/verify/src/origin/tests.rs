//! Tests of the origin checks with real OpenPGP signatures: gpg-made fixtures
//! (`tests/fixtures/signing`) and signatures made here with rPGP by the
//! fixtures' test keys.

use std::io::Cursor;

use proptest::prelude::*;

use super::*;
use crate::archives::provider_zip;
use crate::signing::tests::sign_at;
use tfreg_testkit::{TestSigner, provider_release, provider_zip as zip_of};

const FIXTURE_SUMS: &[u8] = include_bytes!("../../tests/fixtures/signing/SHA256SUMS");
const RSA_PUB: &str = include_str!("../../tests/fixtures/signing/rsa.pub.asc");
const ED_PUB: &str = include_str!("../../tests/fixtures/signing/ed25519.pub.asc");
const EXPIRED_PUB: &str = include_str!("../../tests/fixtures/signing/expired.pub.asc");
const EXPIRED_SIG: &[u8] = include_bytes!("../../tests/fixtures/signing/SHA256SUMS.expired.sig");
const SUBKEY_EXPIRED_PUB: &str =
    include_str!("../../tests/fixtures/signing/subkey-expired.pub.asc");
const SUBKEY_EXPIRED_SIG: &[u8] =
    include_bytes!("../../tests/fixtures/signing/SHA256SUMS.subkey-expired.sig");
const REVOKED_PUB: &str = include_str!("../../tests/fixtures/signing/revoked.pub.asc");
const REVOKED_SIG: &[u8] = include_bytes!("../../tests/fixtures/signing/SHA256SUMS.revoked.sig");
const SIGNER_EXPIRED_SECRET: &str =
    include_str!("../../tests/fixtures/signing/signer-expired.secret.asc");

/// 2020-01-01T00:00:00Z: the `expired` and `signer-expired` keys are made,
/// each valid for a day.
const T_2020_01_01: u64 = 1_577_836_800;
const DAY: u64 = 24 * 60 * 60;

const LINUX: &str = "terraform-provider-null_1.0.0_linux_amd64.zip";
const DARWIN: &str = "terraform-provider-null_1.0.0_darwin_arm64.zip";

fn now() -> u64 {
    tfreg_model::unix_now()
}

fn key_id(armor: &str) -> String {
    PublicKey::parse(armor).unwrap().info().key_id.clone()
}

/// A key as an origin lists it.
fn listed(armor: &str) -> OriginKey {
    OriginKey {
        key_id: key_id(armor),
        ascii_armor: armor.to_string(),
    }
}

/// An entry as an origin may write it: any key ID, any text.
fn raw(key_id: &str, text: &str) -> OriginKey {
    OriginKey {
        key_id: key_id.into(),
        ascii_armor: text.into(),
    }
}

/// What an origin serves for `null` 1.0.0 on two platforms, signed by
/// [`TestSigner::rsa`]: SHA256SUMS, its signature and the zips.
struct Release {
    sums: Vec<u8>,
    sig: Vec<u8>,
    zips: Vec<(String, Vec<u8>)>,
}

fn release() -> Release {
    let files = provider_release(
        "null",
        "1.0.0",
        &["linux_amd64", "darwin_arm64"],
        &TestSigner::rsa(),
    );
    let get = |suffix: &str| {
        files
            .iter()
            .find(|(n, _)| n.ends_with(suffix))
            .map(|(_, b)| b.clone())
            .unwrap()
    };
    Release {
        sums: get("_SHA256SUMS"),
        sig: get("_SHA256SUMS.sig"),
        zips: files
            .into_iter()
            .filter(|(n, _)| n.ends_with(".zip"))
            .collect(),
    }
}

fn signer() -> &'static str {
    TestSigner::rsa().public_armor
}

/// `verify_sums` of the release at the real current time.
fn verify(r: &Release, keys: &[OriginKey]) -> Result<VerifiedSums, Refusal> {
    verify_sums(&r.sums, Some(&r.sig), keys, Unsigned::Refuse, now())
}

/// Two public keys in one armor (a key ring).
fn two_keys_in_one_text() -> String {
    use pgp::composed::{Deserializable, SignedPublicKey};
    let keys: Vec<SignedPublicKey> = [RSA_PUB, signer()]
        .iter()
        .map(|armor| SignedPublicKey::from_string(armor).unwrap().0)
        .collect();
    let mut out = Vec::new();
    pgp::armor::write(
        &keys,
        pgp::armor::BlockType::PublicKey,
        &mut out,
        None,
        true,
    )
    .unwrap();
    String::from_utf8(out).unwrap()
}

#[test]
fn a_good_signature_verifies_and_the_sums_are_kept() {
    let r = release();
    let verified = verify(&r, &[listed(signer())]).unwrap();
    assert_eq!(
        verified.sums,
        release_files::parse_shasums(&r.sums).unwrap()
    );
    assert_eq!(verified.sums.len(), 3, "two zips and the manifest");
    assert_eq!(verified.sha256, sha256_hex(&r.sums));
    assert_eq!(
        verified.signed_by,
        Some(SignedBy {
            key_id: key_id(signer()),
            signer_key_id: key_id(signer()),
            key_expired: None,
        })
    );
}

#[test]
fn keys_are_tried_in_order_until_one_signed() {
    let r = release();
    for keys in [
        vec![listed(RSA_PUB), listed(signer())],
        vec![listed(ED_PUB), listed(RSA_PUB), listed(signer())],
        // Once one has signed, the rest are not read (Terraform stops there).
        vec![listed(signer()), raw("ring", &two_keys_in_one_text())],
    ] {
        let verified = verify(&r, &keys).unwrap();
        assert_eq!(verified.signed_by.unwrap().key_id, key_id(signer()));
    }
    // The key ID an origin claims is not what is recorded.
    let misnamed = OriginKey {
        key_id: "0123456789ABCDEF".into(),
        ..listed(signer())
    };
    let verified = verify(&r, &[misnamed]).unwrap();
    assert_eq!(verified.signed_by.unwrap().key_id, key_id(signer()));
}

#[test]
fn a_key_that_expired_after_signing_is_accepted_and_recorded() {
    // gpg's `expired` key signed the fixture SHA256SUMS on 2020-01-01T12:00,
    // the day before it expired.
    let keys = [listed(EXPIRED_PUB)];
    let verified = verify_sums(
        FIXTURE_SUMS,
        Some(EXPIRED_SIG),
        &keys,
        Unsigned::Refuse,
        now(),
    )
    .unwrap();
    assert_eq!(
        verified.signed_by,
        Some(SignedBy {
            key_id: key_id(EXPIRED_PUB),
            signer_key_id: key_id(EXPIRED_PUB),
            key_expired: Some(T_2020_01_01 + DAY),
        })
    );
    // A signing subkey that expired after it signed (its primary key never expires).
    let keys = [listed(SUBKEY_EXPIRED_PUB)];
    let verified = verify_sums(
        FIXTURE_SUMS,
        Some(SUBKEY_EXPIRED_SIG),
        &keys,
        Unsigned::Refuse,
        now(),
    )
    .unwrap();
    let signed_by = verified.signed_by.unwrap();
    assert_eq!(signed_by.key_id, key_id(SUBKEY_EXPIRED_PUB));
    assert_ne!(signed_by.signer_key_id, signed_by.key_id);
    assert_eq!(signed_by.key_expired, Some(T_2020_01_01 + DAY));
    // The same with rPGP's signature by `signer-expired`, made while it was valid.
    let signer = TestSigner::expired();
    let sig = signer.sign(FIXTURE_SUMS);
    let keys = [listed(RSA_PUB), listed(signer.public_armor)];
    let verified = verify_sums(FIXTURE_SUMS, Some(&sig), &keys, Unsigned::Refuse, now()).unwrap();
    assert_eq!(
        verified.signed_by.unwrap().key_expired,
        Some(T_2020_01_01 + DAY)
    );
    // Once an expired key has signed, a later key that does not read no
    // longer refuses (Terraform would have stopped at the first).
    let keys = [listed(signer.public_armor), raw("junk", "not a key")];
    assert!(verify_sums(FIXTURE_SUMS, Some(&sig), &keys, Unsigned::Refuse, now()).is_ok());
}

#[test]
fn a_signature_made_after_the_key_expired_is_refused() {
    let armor = TestSigner::expired().public_armor;
    let sig = sign_at(
        SIGNER_EXPIRED_SECRET,
        FIXTURE_SUMS,
        (T_2020_01_01 + 2 * DAY) as u32,
        None,
    );
    let refusal = verify_sums(
        FIXTURE_SUMS,
        Some(&sig),
        &[listed(armor)],
        Unsigned::Refuse,
        now(),
    )
    .unwrap_err();
    let id = key_id(armor);
    assert_eq!(
        refusal,
        Refusal::Signature {
            key_id: id.clone(),
            source: SignatureError::SignedAfterKeyExpired {
                key_id: id.clone(),
                expired: "2020-01-02".into(),
                signed: "2020-01-03".into(),
            }
        }
    );
    assert_eq!(
        refusal.to_string(),
        format!(
            "the SHA256SUMS signature by key {id} is refused: the signature is dated 2020-01-03, after key {id} expired on 2020-01-02"
        )
    );
}

#[test]
fn a_changed_sha256sums_does_not_match_its_signature() {
    let mut r = release();
    let at = r.sums.iter().position(|&b| b == b'\n').unwrap() - 1;
    r.sums[at] ^= 1;
    let refusal = verify(&r, &[listed(RSA_PUB), listed(signer())]).unwrap_err();
    let id = key_id(signer());
    assert_eq!(refusal, Refusal::BadSignature { key_id: id.clone() });
    assert_eq!(
        refusal.to_string(),
        format!("SHA256SUMS does not match its signature by key {id}")
    );
}

#[test]
fn a_signature_by_a_key_not_listed_is_refused() {
    let r = release();
    let refusal = verify(&r, &[listed(RSA_PUB), listed(ED_PUB)]).unwrap_err();
    let id = key_id(signer());
    assert_eq!(refusal, Refusal::UnknownSigner { issuer: id.clone() });
    assert_eq!(
        refusal.to_string(),
        format!("SHA256SUMS is signed by key {id}, which is not among the origin's signing keys")
    );
}

#[test]
fn a_key_text_holding_several_keys_is_refused() {
    let r = release();
    let ring = raw("ring", &two_keys_in_one_text());
    let refusal = verify(&r, &[ring, listed(signer())]).unwrap_err();
    assert_eq!(
        refusal,
        Refusal::SeveralKeys {
            key_id: "ring".into(),
            count: 2
        }
    );
    assert_eq!(
        refusal.to_string(),
        "signing key ring holds 2 keys; each entry must hold one"
    );
}

#[test]
fn an_unreadable_key_or_signature_refuses() {
    let r = release();
    let junk = raw("junk", "not a key");
    assert_eq!(
        verify(&r, &[junk, listed(signer())]),
        Err(Refusal::Key {
            key_id: "junk".into(),
            source: SignatureError::NotAPublicKey
        })
    );
    let armored = verify_sums(
        &r.sums,
        Some(b"-----BEGIN PGP SIGNATURE-----\n"),
        &[listed(signer())],
        Unsigned::Refuse,
        now(),
    );
    assert_eq!(
        armored,
        Err(Refusal::Signature {
            key_id: key_id(signer()),
            source: SignatureError::ArmoredSignature
        })
    );
    assert_eq!(
        verify_sums(
            FIXTURE_SUMS,
            Some(REVOKED_SIG),
            &[listed(REVOKED_PUB)],
            Unsigned::Refuse,
            now()
        ),
        Err(Refusal::Signature {
            key_id: key_id(REVOKED_PUB),
            source: SignatureError::KeyRevoked {
                key_id: key_id(REVOKED_PUB)
            }
        })
    );
}

#[test]
fn without_keys_only_checksums_only_accepts_and_records_unsigned() {
    let r = release();
    for sig in [Some(r.sig.as_slice()), None] {
        assert_eq!(
            verify_sums(&r.sums, sig, &[], Unsigned::Refuse, now()),
            Err(Refusal::NoSigningKey)
        );
        let unsigned = verify_sums(&r.sums, sig, &[], Unsigned::ChecksumsOnly, now()).unwrap();
        assert_eq!(unsigned.signed_by, None);
        assert_eq!(unsigned.sha256, sha256_hex(&r.sums));
    }
    assert_eq!(
        Refusal::NoSigningKey.to_string(),
        "the origin lists no signing key, so SHA256SUMS cannot be verified"
    );
    // Keys that are listed are checked all the same.
    let keys = [listed(signer())];
    assert_eq!(
        verify_sums(&r.sums, None, &keys, Unsigned::ChecksumsOnly, now()),
        Err(Refusal::NoSignature)
    );
    assert!(matches!(
        verify_sums(
            &r.sums,
            Some(EXPIRED_SIG),
            &keys,
            Unsigned::ChecksumsOnly,
            now()
        ),
        Err(Refusal::UnknownSigner { .. })
    ));
    // And SHA256SUMS must still parse.
    assert_eq!(
        verify_sums(b"nonsense\n", None, &[], Unsigned::ChecksumsOnly, now()),
        Err(Refusal::Shasums(
            "SHA256SUMS line 1: expected \"<sha256>  <filename>\"".into()
        ))
    );
}

#[test]
fn a_signed_sha256sums_that_does_not_parse_is_refused() {
    let sums = b"not a checksum file\n";
    let sig = TestSigner::rsa().sign(sums);
    assert_eq!(
        verify_sums(
            sums,
            Some(&sig),
            &[listed(signer())],
            Unsigned::Refuse,
            now()
        ),
        Err(Refusal::Shasums(
            "SHA256SUMS line 1: expected \"<sha256>  <filename>\"".into()
        ))
    );
}

fn answer(filename: &str, shasum: &str) -> OriginAnswer {
    OriginAnswer {
        os: "linux".into(),
        arch: "amd64".into(),
        filename: filename.into(),
        shasum: shasum.into(),
    }
}

fn linux() -> Platform {
    Platform::parse("linux", "amd64").unwrap()
}

#[test]
fn the_download_answer_must_be_a_line_of_sha256sums() {
    let r = release();
    let sums = verify(&r, &[listed(signer())]).unwrap();
    let line = sums.sums[LINUX].clone();
    assert_eq!(check_answer(&sums, &linux(), &answer(LINUX, &line)), Ok(()));

    let other_line = sums.sums[DARWIN].clone();
    let mismatch = check_answer(&sums, &linux(), &answer(LINUX, &other_line)).unwrap_err();
    assert_eq!(
        mismatch,
        Refusal::ShasumMismatch {
            filename: LINUX.into()
        }
    );
    assert_eq!(
        mismatch.to_string(),
        format!("the download answer's shasum for {LINUX} is not its SHA256SUMS line")
    );

    let unlisted = "terraform-provider-null_1.0.0_linux_arm64.zip";
    let refusal = check_answer(&sums, &linux(), &answer(unlisted, &line)).unwrap_err();
    assert_eq!(
        refusal.to_string(),
        format!("SHA256SUMS has no line for {unlisted}")
    );

    for bad in [
        line.to_uppercase(),
        line[..63].to_string(),
        format!("{line}0"),
        String::new(),
    ] {
        assert_eq!(
            check_answer(&sums, &linux(), &answer(LINUX, &bad)),
            Err(Refusal::MalformedShasum {
                filename: LINUX.into()
            }),
            "{bad}"
        );
    }

    let darwin = Platform::parse("darwin", "arm64").unwrap();
    let refusal = check_answer(&sums, &darwin, &answer(DARWIN, &other_line)).unwrap_err();
    assert_eq!(
        refusal.to_string(),
        "the download answer is for linux_amd64, not darwin_arm64"
    );
}

#[test]
fn what_an_origin_wrote_is_quoted_escaped_and_short() {
    let r = release();
    let sums = verify(&r, &[listed(signer())]).unwrap();
    let hostile = format!("\u{1b}[2J{}", "x".repeat(500));
    let line = sums.sums[LINUX].clone();
    let refusal = check_answer(&sums, &linux(), &answer(&hostile, &line)).unwrap_err();
    let Refusal::NotListed { filename } = &refusal else {
        panic!("{refusal:?}")
    };
    assert!(filename.starts_with("\\u{1b}[2Jxxx"), "{filename}");
    assert!(filename.ends_with('…'), "{filename}");
    assert!(refusal.to_string().len() < 150, "{refusal}");
    let junk = raw(&hostile, "not a key");
    let refusal = verify(&r, &[junk]).unwrap_err();
    assert!(!refusal.to_string().contains('\u{1b}'), "{refusal}");
}

#[test]
fn an_archive_must_have_its_sha256sums_line() {
    let r = release();
    let sums = verify(&r, &[listed(signer())]).unwrap();
    for (name, bytes) in &r.zips {
        assert_eq!(check_archive(&sums, name, &sha256_hex(bytes)), Ok(()));
    }
    let (name, _) = &r.zips[0];
    let (_, other) = &r.zips[1];
    let actual = sha256_hex(other);
    let listed = sums.sums[name].clone();
    let refusal = check_archive(&sums, name, &actual).unwrap_err();
    assert_eq!(
        refusal.to_string(),
        format!("{name} has sha256 {actual}, but SHA256SUMS lists {listed}")
    );
    assert_eq!(
        refusal,
        Refusal::ArchiveMismatch {
            filename: name.clone(),
            actual: actual.clone(),
            listed
        }
    );
    assert_eq!(
        check_archive(&sums, "other.zip", &actual),
        Err(Refusal::NotListed {
            filename: "other.zip".into()
        })
    );
}

#[test]
fn sha256sums_never_change_once_stored() {
    let r = release();
    let first = verify(&r, &[listed(signer())]).unwrap();
    assert_eq!(check_same_sums(&first.sha256, &r.sums), Ok(()));
    // Properly signed, but other bytes: a new line for the same version.
    let mut later = r.sums.clone();
    later.extend_from_slice(format!("{}  extra.zip\n", "0".repeat(64)).as_bytes());
    let resigned = TestSigner::rsa().sign(&later);
    assert!(
        verify_sums(
            &later,
            Some(&resigned),
            &[listed(signer())],
            Unsigned::Refuse,
            now()
        )
        .is_ok()
    );
    let refusal = check_same_sums(&first.sha256, &later).unwrap_err();
    assert_eq!(refusal, Refusal::ShasumsChanged);
    assert_eq!(refusal.to_string(), "SHA256SUMS changed since first fill");
}

#[test]
fn the_h1_of_a_cached_zip_needs_only_the_zip_limits() {
    let r = release();
    for (_, bytes) in &r.zips {
        assert_eq!(
            origin_h1(Cursor::new(bytes)).unwrap(),
            provider_zip::inspect(Cursor::new(bytes), "null")
                .unwrap()
                .h1
        );
    }
    // Another provider's binary: not publishable as `null`, hashed all the same.
    let other = zip_of("other", "1.0.0", "x");
    assert_eq!(
        origin_h1(Cursor::new(&other)).unwrap(),
        provider_zip::inspect(Cursor::new(&other), "other")
            .unwrap()
            .h1
    );
    assert!(matches!(
        origin_h1(Cursor::new(b"not a zip".to_vec())),
        Err(ArchiveError::NotZip(_))
    ));
}

// ---------------------------------------------------------------------------
// Properties.

fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// `input` with each `(position, mask)` applied as an XOR (positions modulo
/// the length; a mask is never zero, so each change changes a byte).
fn mutated(input: &[u8], changes: &[(usize, u8)]) -> Vec<u8> {
    let mut out = input.to_vec();
    for &(at, mask) in changes {
        let len = out.len();
        out[at % len] ^= mask;
    }
    out
}

/// Longest refusal: a sentence, a key ID and quoted text, never the input.
const MAX_MESSAGE: usize = 400;

proptest! {
    #![proptest_config(config(64))]

    /// Damaged or arbitrary SHA256SUMS, signatures and key texts: verified or
    /// refused briefly, never a panic; changed SHA256SUMS bytes never verify.
    #[test]
    fn any_damage_is_refused_briefly(
        sums_changes in prop::collection::vec((any::<usize>(), 1..=255u8), 0..3),
        sig_changes in prop::collection::vec((any::<usize>(), 1..=255u8), 0..3),
        key_changes in prop::collection::vec((any::<usize>(), 1..=255u8), 0..2),
        junk in prop::collection::vec(any::<u8>(), 0..300),
        use_junk_sig in any::<bool>(),
    ) {
        let r = release_once();
        let sums = mutated(&r.sums, &sums_changes);
        let sig = if use_junk_sig { junk.clone() } else { mutated(&r.sig, &sig_changes) };
        let key_text = String::from_utf8_lossy(&mutated(signer().as_bytes(), &key_changes)).into_owned();
        let keys = [listed(RSA_PUB), raw("k", &key_text)];
        match verify_sums(&sums, Some(&sig), &keys, Unsigned::Refuse, now()) {
            Ok(verified) => {
                prop_assert_eq!(&sums, &r.sums);
                prop_assert_eq!(verified.sha256, sha256_hex(&r.sums));
            }
            Err(refusal) => prop_assert!(refusal.to_string().len() <= MAX_MESSAGE, "{}", refusal),
        }
        if let Err(refusal) = verify_sums(&junk, Some(&sig), &[], Unsigned::ChecksumsOnly, now()) {
            prop_assert!(refusal.to_string().len() <= MAX_MESSAGE, "{}", refusal);
        }
    }

    /// A download answer passes exactly when it names the platform asked for
    /// and a file whose line is its shasum, as written.
    #[test]
    fn an_answer_passes_only_with_its_exact_line(
        pick in 0..4usize,
        shasum in prop_oneof!["[0-9a-fA-F]{62,66}", ".{0,80}"],
        use_line in any::<bool>(),
        os in prop_oneof![Just("linux".to_string()), "[a-z]{1,8}"],
    ) {
        let r = release_once();
        let sums = verify_sums(&r.sums, None, &[], Unsigned::ChecksumsOnly, now()).unwrap();
        let names: Vec<&String> = sums.sums.keys().collect();
        let filename = names.get(pick).map_or("unlisted.zip".to_string(), |n| n.to_string());
        let listed = sums.sums.get(&filename).cloned();
        let shasum = match (&listed, use_line) {
            (Some(line), true) => line.clone(),
            _ => shasum,
        };
        let answer = OriginAnswer { os: os.clone(), arch: "amd64".into(), filename, shasum: shasum.clone() };
        let result = check_answer(&sums, &linux(), &answer);
        let expected = os == "linux" && listed.as_deref() == Some(shasum.as_str());
        prop_assert_eq!(result.is_ok(), expected, "{:?}", result);
        if let Err(refusal) = result {
            prop_assert!(refusal.to_string().len() <= MAX_MESSAGE, "{}", refusal);
        }
    }
}

/// One release for every property case (signing costs an RSA signature).
fn release_once() -> &'static Release {
    static RELEASE: std::sync::OnceLock<Release> = std::sync::OnceLock::new();
    RELEASE.get_or_init(release)
}
