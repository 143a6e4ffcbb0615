//! Tests of the signing module, on the gpg-made fixtures in `shared/tests/fixtures/signing`.

use std::io::Read;
use std::time::{SystemTime, UNIX_EPOCH};

use pgp::armor::{BlockType, Dearmor};

use super::armor::{PUBLIC_KEY_BEGIN, PUBLIC_KEY_END, dearmor_public_key};
use super::describe::{created_secs, format_date};
use super::key::{LoadedKey, load_key};
use super::verify::{Expired, MAX_SIGNATURE_LEN, parse_signature, verify_with_key};
use super::*;

const SUMS: &[u8] = include_bytes!("../../tests/fixtures/signing/SHA256SUMS");
const RSA_PUB: &str = include_str!("../../tests/fixtures/signing/rsa.pub.asc");
const RSA_SIG: &[u8] = include_bytes!("../../tests/fixtures/signing/SHA256SUMS.rsa.sig");
const RSA_SIG_ASC: &[u8] = include_bytes!("../../tests/fixtures/signing/SHA256SUMS.rsa.sig.asc");
const RSA_COLONS: &str = include_str!("../../tests/fixtures/signing/rsa.colons.txt");
const ED_PUB: &str = include_str!("../../tests/fixtures/signing/ed25519.pub.asc");
const ED_SIG: &[u8] = include_bytes!("../../tests/fixtures/signing/SHA256SUMS.ed25519.sig");
const ED_COLONS: &str = include_str!("../../tests/fixtures/signing/ed25519.colons.txt");
const SUB_PUB: &str = include_str!("../../tests/fixtures/signing/subkey.pub.asc");
const SUB_SIG: &[u8] = include_bytes!("../../tests/fixtures/signing/SHA256SUMS.subkey.sig");
const SUB_COLONS: &str = include_str!("../../tests/fixtures/signing/subkey.colons.txt");
const MIXED_PUB: &str = include_str!("../../tests/fixtures/signing/mixed.pub.asc");
const MIXED_SIG: &[u8] = include_bytes!("../../tests/fixtures/signing/SHA256SUMS.mixed.sig");
const MIXED_COLONS: &str = include_str!("../../tests/fixtures/signing/mixed.colons.txt");
const EXPIRED_PUB: &str = include_str!("../../tests/fixtures/signing/expired.pub.asc");
const EXPIRED_SIG: &[u8] = include_bytes!("../../tests/fixtures/signing/SHA256SUMS.expired.sig");
const EXPIRED_COLONS: &str = include_str!("../../tests/fixtures/signing/expired.colons.txt");
const REVOKED_PUB: &str = include_str!("../../tests/fixtures/signing/revoked.pub.asc");
const REVOKED_SIG: &[u8] = include_bytes!("../../tests/fixtures/signing/SHA256SUMS.revoked.sig");
const REVOKED_COLONS: &str = include_str!("../../tests/fixtures/signing/revoked.colons.txt");
const SECRET: &str = include_str!("../../tests/fixtures/signing/throwaway.secret.asc");
const RSA_TEXT_SIG: &[u8] = include_bytes!("../../tests/fixtures/signing/SHA256SUMS.rsa.text.sig");
const CERT_ONLY_PUB: &str = include_str!("../../tests/fixtures/signing/certonly.pub.asc");
const CERT_ONLY_SIG: &[u8] = include_bytes!("../../tests/fixtures/signing/SHA256SUMS.certonly.sig");
const CERT_ONLY_COLONS: &str = include_str!("../../tests/fixtures/signing/certonly.colons.txt");

/// The real current time, seconds since the epoch (for checks the fixtures pass "now").
fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("the clock is after 1970")
        .as_secs()
}

/// `PublicKey::parse(armor)`'s info.
fn key_info(armor: &str) -> Result<PublicKeyInfo, SignatureError> {
    PublicKey::parse(armor).map(|k| k.info().clone())
}

/// `verify_detached` at the real current time.
fn verify_now(armor: &str, data: &[u8], sig: &[u8]) -> Result<VerifiedSignature, SignatureError> {
    PublicKey::parse(armor)?.verify_detached(data, sig, now())
}

/// `verify_for_terraform` at the real current time.
fn verify_tf_now(
    armor: &str,
    data: &[u8],
    sig: &[u8],
    allow_modern: bool,
) -> Result<VerifiedSignature, SignatureError> {
    PublicKey::parse(armor)?.verify_for_terraform(data, sig, allow_modern, now())
}

/// `(key id, fingerprint)` of the primary key and of each subkey, as gpg listed them.
fn gpg_ids(colons: &str) -> Vec<(String, String)> {
    let mut ids: Vec<(String, String)> = Vec::new();
    for line in colons.lines() {
        let fields: Vec<&str> = line.split(':').collect();
        match fields[0] {
            "pub" | "sub" => ids.push((fields[4].to_string(), String::new())),
            "fpr" => {
                if let Some(last) = ids.last_mut()
                    && last.1.is_empty()
                {
                    last.1 = fields[9].to_string();
                }
            }
            _ => {}
        }
    }
    ids
}

fn primary_id(colons: &str) -> String {
    gpg_ids(colons)[0].0.clone()
}

/// Armor binary packets without a checksum line (for tests that craft keys).
fn armor(kind: &str, bytes: &[u8]) -> String {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD.encode(bytes);
    let mut out = format!("-----BEGIN PGP {kind}-----\n\n");
    for chunk in b64.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(chunk).unwrap());
        out.push('\n');
    }
    out.push_str(&format!("-----END PGP {kind}-----\n"));
    out
}

fn dearmored(text: &str) -> Vec<u8> {
    dearmor_public_key(text.trim()).unwrap()
}

#[test]
fn key_ids_match_gpg() {
    for (armor, colons) in [
        (RSA_PUB, RSA_COLONS),
        (ED_PUB, ED_COLONS),
        (SUB_PUB, SUB_COLONS),
        (MIXED_PUB, MIXED_COLONS),
        (EXPIRED_PUB, EXPIRED_COLONS),
        (REVOKED_PUB, REVOKED_COLONS),
        (CERT_ONLY_PUB, CERT_ONLY_COLONS),
    ] {
        let info = key_info(armor).unwrap();
        let ids = gpg_ids(colons);
        assert_eq!(info.key_id, ids[0].0);
        assert_eq!(info.key_id.len(), 16);
        assert!(ids[0].1.ends_with(&info.key_id), "{ids:?}");
        assert_eq!(info.algorithms.len(), ids.len());
        assert_eq!(info.ascii_armor, armor, "gpg's armor is kept as is");
    }
}

#[test]
fn algorithm_names() {
    assert_eq!(key_info(RSA_PUB).unwrap().algorithms, ["RSA 2048"]);
    assert_eq!(key_info(ED_PUB).unwrap().algorithms, ["EdDSA (Ed25519)"]);
    assert_eq!(
        key_info(SUB_PUB).unwrap().algorithms,
        ["RSA 2048", "RSA 2048"]
    );
    assert_eq!(
        key_info(MIXED_PUB).unwrap().algorithms,
        ["RSA 2048", "ECDH (Curve25519)"]
    );
}

#[test]
fn armor_is_normalized_and_tolerant() {
    let crlf = RSA_PUB.replace('\n', "\r\n");
    let messy = format!("\u{feff}\n  {crlf}\n\n");
    let info = key_info(&messy).unwrap();
    assert_eq!(info.key_id, primary_id(RSA_COLONS));
    assert_eq!(info.ascii_armor, format!("{}\n", crlf.trim()));
}

#[test]
fn valid_rsa_signature_verifies() {
    let v = verify_now(RSA_PUB, SUMS, RSA_SIG).unwrap();
    assert_eq!(v.key_id, primary_id(RSA_COLONS));
    assert_eq!(v.signer_key_id, v.key_id);
    assert_eq!(v.algorithm, "RSA 2048");
    assert!(v.legacy_compatible);
    assert_eq!(verify_tf_now(RSA_PUB, SUMS, RSA_SIG, false).unwrap(), v);
}

#[test]
fn subkey_signature_reports_primary_key_id() {
    let ids = gpg_ids(SUB_COLONS);
    let v = verify_tf_now(SUB_PUB, SUMS, SUB_SIG, false).unwrap();
    assert_eq!(v.key_id, ids[0].0);
    assert_eq!(v.signer_key_id, ids[1].0);
    assert_ne!(v.key_id, v.signer_key_id);
    assert!(v.legacy_compatible);
}

#[test]
fn text_mode_signature_verifies_with_either_line_ending() {
    let v = verify_tf_now(RSA_PUB, SUMS, RSA_TEXT_SIG, false).unwrap();
    assert_eq!(v.key_id, primary_id(RSA_COLONS));
    let crlf = String::from_utf8(SUMS.to_vec())
        .unwrap()
        .replace('\n', "\r\n");
    assert!(verify_now(RSA_PUB, crlf.as_bytes(), RSA_TEXT_SIG).is_ok());
    let mut data = SUMS.to_vec();
    data[3] ^= 1;
    assert_eq!(
        verify_now(RSA_PUB, &data, RSA_TEXT_SIG),
        Err(SignatureError::BadSignature)
    );
}

#[test]
fn signature_by_certify_only_primary_is_refused() {
    // The key signed while it was [SC]; its usage was then changed to [C] only, and
    // gpg --verify now says "Wrong key usage" too.
    let err = verify_now(CERT_ONLY_PUB, SUMS, CERT_ONLY_SIG).unwrap_err();
    match &err {
        SignatureError::UnusableSigningKey { key_id, reason } => {
            assert_eq!(key_id, &primary_id(CERT_ONLY_COLONS));
            assert!(reason.contains("key flag S"), "{reason}");
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn tampered_data_is_a_bad_signature() {
    let mut data = SUMS.to_vec();
    data[0] ^= 1;
    assert_eq!(
        verify_now(RSA_PUB, &data, RSA_SIG),
        Err(SignatureError::BadSignature)
    );
    assert_eq!(
        verify_now(SUB_PUB, &data, SUB_SIG),
        Err(SignatureError::BadSignature)
    );
    assert_eq!(
        verify_now(ED_PUB, &data, ED_SIG),
        Err(SignatureError::BadSignature)
    );
    let crlf = String::from_utf8(SUMS.to_vec())
        .unwrap()
        .replace('\n', "\r\n");
    assert_eq!(
        verify_now(RSA_PUB, crlf.as_bytes(), RSA_SIG),
        Err(SignatureError::BadSignature)
    );
    assert_eq!(
        verify_now(RSA_PUB, b"", RSA_SIG),
        Err(SignatureError::BadSignature)
    );
}

#[test]
fn tampered_signature_is_a_bad_signature() {
    // Flip a bit in the last byte: inside the RSA signature value.
    let mut sig = RSA_SIG.to_vec();
    let last = sig.len() - 1;
    sig[last] ^= 0x01;
    assert_eq!(
        verify_now(RSA_PUB, SUMS, &sig),
        Err(SignatureError::BadSignature)
    );
}

#[test]
fn signature_by_another_key_is_unknown_key() {
    // The signature's issuer subpacket names the ed25519 key: the RSA key is not asked.
    let err = verify_now(RSA_PUB, SUMS, ED_SIG).unwrap_err();
    assert_eq!(
        err,
        SignatureError::UnknownKey {
            key_id: primary_id(ED_COLONS)
        }
    );
    assert_eq!(
        err.to_string(),
        format!(
            "the signature was made by key {}, which is not the given key",
            primary_id(ED_COLONS)
        )
    );
    let err = verify_now(SUB_PUB, SUMS, RSA_SIG).unwrap_err();
    assert_eq!(
        err,
        SignatureError::UnknownKey {
            key_id: primary_id(RSA_COLONS)
        }
    );
}

#[test]
fn armored_signature_is_refused() {
    assert_eq!(
        verify_now(RSA_PUB, SUMS, RSA_SIG_ASC),
        Err(SignatureError::ArmoredSignature)
    );
    let mut padded = b"\r\n  ".to_vec();
    padded.extend_from_slice(RSA_SIG_ASC);
    assert_eq!(
        verify_now(RSA_PUB, SUMS, &padded),
        Err(SignatureError::ArmoredSignature)
    );
}

#[test]
fn secret_key_is_refused() {
    assert_eq!(key_info(SECRET), Err(SignatureError::PrivateKeyGiven));
    assert_eq!(
        verify_now(SECRET, SUMS, ED_SIG),
        Err(SignatureError::PrivateKeyGiven)
    );
    // Secret key packets inside a block labelled PUBLIC KEY are refused too.
    let mut secret_bytes = Vec::new();
    let mut dearmor = Dearmor::new(SECRET.as_bytes());
    dearmor.read_to_end(&mut secret_bytes).unwrap();
    assert_eq!(dearmor.typ, Some(BlockType::PrivateKey));
    let disguised = armor("PUBLIC KEY BLOCK", &secret_bytes);
    assert_eq!(key_info(&disguised), Err(SignatureError::PrivateKeyGiven));
    // As the signature argument it is simply not a signature.
    assert!(matches!(
        verify_now(RSA_PUB, SUMS, &secret_bytes),
        Err(SignatureError::MalformedSignature(_))
    ));
}

#[test]
fn ed25519_needs_modern_terraform() {
    let v = verify_now(ED_PUB, SUMS, ED_SIG).unwrap();
    assert_eq!(v.key_id, primary_id(ED_COLONS));
    assert_eq!(v.algorithm, "EdDSA (Ed25519)");
    assert!(!v.legacy_compatible);
    let err = verify_tf_now(ED_PUB, SUMS, ED_SIG, false).unwrap_err();
    assert_eq!(
        err,
        SignatureError::LegacyIncompatibleKey {
            algorithm: "EdDSA (Ed25519)".to_string()
        }
    );
    assert!(
        err.to_string()
            .contains("Terraform 1.5 and older cannot verify")
    );
    assert!(err.to_string().contains("--allow-modern-keys"));
    assert_eq!(verify_tf_now(ED_PUB, SUMS, ED_SIG, true).unwrap(), v);
}

#[test]
fn curve25519_subkey_makes_rsa_signature_legacy_incompatible() {
    let ids = gpg_ids(MIXED_COLONS);
    let v = verify_now(MIXED_PUB, SUMS, MIXED_SIG).unwrap();
    assert_eq!(v.algorithm, "RSA 2048");
    assert!(!v.legacy_compatible);
    assert_eq!(
        verify_tf_now(MIXED_PUB, SUMS, MIXED_SIG, false),
        Err(SignatureError::LegacyIncompatibleKey {
            algorithm: format!("ECDH (Curve25519) (in subkey {})", ids[1].0)
        })
    );
    assert!(verify_tf_now(MIXED_PUB, SUMS, MIXED_SIG, true).is_ok());
}

#[test]
fn expired_key_is_refused() {
    // Made with gpg --faked-system-time 2020-01-01, expiring a day later.
    assert_eq!(
        verify_now(EXPIRED_PUB, SUMS, EXPIRED_SIG),
        Err(SignatureError::KeyExpired {
            key_id: primary_id(EXPIRED_COLONS),
            expired: "2020-01-02".to_string()
        })
    );
    // The key itself is still accepted as a key (it may be renewed).
    assert!(key_info(EXPIRED_PUB).is_ok());
}

#[test]
fn future_signature_is_refused() {
    // Made with gpg --faked-system-time 2099-01-01.
    const FUTURE_SIG: &[u8] =
        include_bytes!("../../tests/fixtures/signing/SHA256SUMS.rsa.future.sig");
    assert_eq!(
        verify_now(RSA_PUB, SUMS, FUTURE_SIG),
        Err(SignatureError::SignatureInFuture {
            created: "2099-01-01".to_string()
        })
    );
}

#[test]
fn revoked_key_is_refused() {
    assert_eq!(
        verify_now(REVOKED_PUB, SUMS, REVOKED_SIG),
        Err(SignatureError::KeyRevoked {
            key_id: primary_id(REVOKED_COLONS)
        })
    );
}

#[test]
fn garbage_keys_are_errors() {
    let truncated = &RSA_PUB[..RSA_PUB.len() / 2];
    let no_end = RSA_PUB.trim().trim_end_matches(PUBLIC_KEY_END);
    let sig_as_key = String::from_utf8(RSA_SIG_ASC.to_vec()).unwrap();
    let two_keys = format!("{RSA_PUB}{ED_PUB}");
    let bad_crc = {
        let lines: Vec<&str> = RSA_PUB.lines().collect();
        let crc_line = lines.iter().position(|l| l.starts_with('=')).unwrap();
        let mut lines: Vec<String> = lines.iter().map(|s| s.to_string()).collect();
        lines[crc_line] = "=AAAA".to_string();
        lines.join("\n")
    };
    let bad_base64 = RSA_PUB.replacen("m", "!", 3);
    let huge = format!(
        "{PUBLIC_KEY_BEGIN}\n\n{}\n{PUBLIC_KEY_END}\n",
        "A".repeat(2 << 20)
    );
    let both_keys_one_block = {
        let mut bytes = dearmored(RSA_PUB);
        bytes.extend(dearmored(ED_PUB));
        armor("PUBLIC KEY BLOCK", &bytes)
    };
    let only_signature_packets = armor("PUBLIC KEY BLOCK", RSA_SIG);
    let junk_packets = armor("PUBLIC KEY BLOCK", &[0x99, 0x00, 0x05, 1, 2, 3]);
    let mut cut = dearmored(RSA_PUB);
    cut.truncate(cut.len() - 10);
    let cut_packets = armor("PUBLIC KEY BLOCK", &cut);

    let cases: Vec<(&str, String)> = vec![
        ("empty", String::new()),
        ("spaces", "  \n\t ".to_string()),
        ("text", "hello".to_string()),
        ("truncated armor", truncated.to_string()),
        ("no end line", no_end.to_string()),
        ("signature armor", sig_as_key),
        ("bad crc", bad_crc),
        ("bad base64", bad_base64),
        ("huge", huge),
        ("only signature packets", only_signature_packets),
        ("junk packets", junk_packets),
        ("cut packets", cut_packets),
        (
            "binary as text",
            String::from_utf8_lossy(RSA_SIG).into_owned(),
        ),
    ];
    for (name, text) in &cases {
        let res = key_info(text);
        assert!(res.is_err(), "{name}: {res:?}");
        let res = verify_now(text, SUMS, RSA_SIG);
        assert!(res.is_err(), "{name}: {res:?}");
    }
    assert_eq!(key_info(""), Err(SignatureError::NotAPublicKey));
    assert_eq!(
        key_info(&two_keys),
        Err(SignatureError::MultipleKeys { count: 2 })
    );
    assert_eq!(
        key_info(&both_keys_one_block),
        Err(SignatureError::MultipleKeys { count: 2 })
    );
}

#[test]
fn garbage_signatures_are_errors() {
    let mut cases: Vec<Vec<u8>> = vec![
        Vec::new(),
        b"hello".to_vec(),
        vec![0u8; 100],
        vec![0xffu8; 100],
        vec![0x88; MAX_SIGNATURE_LEN + 1],
        dearmored(RSA_PUB),
    ];
    // Every truncation of a real signature.
    for n in 1..RSA_SIG.len() {
        cases.push(RSA_SIG[..n].to_vec());
    }
    // A real signature followed by junk.
    let mut trailing = RSA_SIG.to_vec();
    trailing.extend_from_slice(b"junk");
    cases.push(trailing);
    for sig in &cases {
        let res = verify_now(RSA_PUB, SUMS, sig);
        assert!(
            matches!(res, Err(SignatureError::MalformedSignature(_))),
            "{} bytes: {res:?}",
            sig.len()
        );
    }
    assert!(matches!(
        verify_now(RSA_PUB, SUMS, &dearmored(RSA_PUB)),
        Err(SignatureError::MalformedSignature(m)) if m.contains("public key")
    ));
}

#[test]
fn two_signatures_use_the_first_matching_one() {
    let mut both = ED_SIG.to_vec();
    both.extend_from_slice(RSA_SIG);
    let v = verify_now(RSA_PUB, SUMS, &both).unwrap();
    assert_eq!(v.signer_key_id, primary_id(RSA_COLONS));
    let v = verify_now(ED_PUB, SUMS, &both).unwrap();
    assert_eq!(v.signer_key_id, primary_id(ED_COLONS));
}

#[test]
fn large_data_is_fine() {
    let data = vec![b'x'; 8 << 20];
    assert_eq!(
        verify_now(RSA_PUB, &data, RSA_SIG),
        Err(SignatureError::BadSignature)
    );
}

#[test]
fn messages_are_as_documented() {
    assert_eq!(
        SignatureError::PrivateKeyGiven.to_string(),
        "that is a private key: give the public key (gpg --armor --export KEYID)"
    );
    assert_eq!(
        SignatureError::ArmoredSignature.to_string(),
        "the signature must be binary (gpg --detach-sign), not ASCII-armored"
    );
    assert_eq!(
        SignatureError::BadSignature.to_string(),
        "the signature over SHA256SUMS does not verify with the given key"
    );
}

#[test]
fn dates_format() {
    assert_eq!(format_date(0), "1970-01-01");
    assert_eq!(format_date(1_577_923_200), "2020-01-02");
    assert_eq!(format_date(951_782_400), "2000-02-29");
    assert_eq!(format_date(4_102_444_800), "2100-01-01");
}

/// Deterministic mutation fuzzing of every input, calling the unguarded internals so
/// that a panic inside rPGP fails this test instead of being caught.
#[test]
fn mutations_never_panic() {
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut rand = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mutate = |input: &[u8], rand: &mut dyn FnMut() -> u64| -> Vec<u8> {
        let mut out = input.to_vec();
        for _ in 0..=(rand() % 4) {
            if out.is_empty() {
                break;
            }
            let pos = (rand() as usize) % out.len();
            match rand() % 4 {
                0 => out[pos] ^= 1 << (rand() % 8),
                1 => out[pos] = rand() as u8,
                2 => out.truncate(pos),
                _ => {
                    let b = rand() as u8;
                    out.insert(pos, b);
                }
            }
        }
        out
    };
    let keys = [
        (RSA_PUB, RSA_SIG),
        (SUB_PUB, SUB_SIG),
        (ED_PUB, ED_SIG),
        (MIXED_PUB, MIXED_SIG),
    ];
    let loaded: Vec<LoadedKey> = keys.iter().map(|(k, _)| load_key(k).unwrap()).collect();
    let now = now();
    for round in 0..1200 {
        let which = round % keys.len();
        let expired = [Expired::Refuse, Expired::ValidWhenSigned][(round / keys.len()) % 2];
        let (armor_text, sig) = keys[which];
        let bad_sig = mutate(sig, &mut rand);
        let _ = verify_with_key(&loaded[which], SUMS, &bad_sig, now, expired);
        let key_bytes = mutate(&dearmored(armor_text), &mut rand);
        let bad_key = armor("PUBLIC KEY BLOCK", &key_bytes);
        if let Ok(k) = load_key(&bad_key) {
            let _ = verify_with_key(&k, SUMS, sig, now, expired);
        }
        let _ = load_key(&String::from_utf8_lossy(&mutate(
            armor_text.as_bytes(),
            &mut rand,
        )));
    }
}

// ---------------------------------------------------------------------------
// The clock is the caller's `now`.

/// 2020-01-01T00:00:00Z: the `expired` and `signer-expired` keys are made.
const T_2020_01_01: u64 = 1_577_836_800;
const HOUR: u64 = 60 * 60;
const DAY: u64 = 24 * HOUR;

/// Creation time of the first signature packet of a detached signature.
fn signature_created(sig: &[u8]) -> u64 {
    u64::from(created_secs(&parse_signature(sig).unwrap()[0]))
}

#[test]
fn key_expiry_is_checked_at_the_given_time() {
    // Made 2020-01-01, expiring a day later; signed 2020-01-01T12:00.
    let key = PublicKey::parse(EXPIRED_PUB).unwrap();
    assert_eq!(signature_created(EXPIRED_SIG), T_2020_01_01 + 12 * HOUR);
    let v = key
        .verify_for_terraform(SUMS, EXPIRED_SIG, false, T_2020_01_01 + 13 * HOUR)
        .unwrap();
    assert_eq!(v.key_id, primary_id(EXPIRED_COLONS));
    // The key is valid up to and including its expiry second.
    assert!(
        key.verify_detached(SUMS, EXPIRED_SIG, T_2020_01_01 + DAY)
            .is_ok()
    );
    let expired = Err(SignatureError::KeyExpired {
        key_id: primary_id(EXPIRED_COLONS),
        expired: "2020-01-02".to_string(),
    });
    assert_eq!(
        key.verify_detached(SUMS, EXPIRED_SIG, T_2020_01_01 + DAY + 1),
        expired
    );
    assert_eq!(
        key.verify_detached(SUMS, EXPIRED_SIG, T_2020_01_01 + 2 * DAY),
        expired
    );
    assert_eq!(key.verify_detached(SUMS, EXPIRED_SIG, now()), expired);
}

#[test]
fn future_signature_is_accepted_once_its_time_has_come() {
    const FUTURE_SIG: &[u8] =
        include_bytes!("../../tests/fixtures/signing/SHA256SUMS.rsa.future.sig");
    const T_2099_01_01: u64 = 4_070_908_800;
    let key = PublicKey::parse(RSA_PUB).unwrap();
    assert_eq!(signature_created(FUTURE_SIG), T_2099_01_01);
    let in_future = Err(SignatureError::SignatureInFuture {
        created: "2099-01-01".to_string(),
    });
    assert_eq!(key.verify_detached(SUMS, FUTURE_SIG, now()), in_future);
    let v = key.verify_detached(SUMS, FUTURE_SIG, T_2099_01_01).unwrap();
    assert_eq!(v.key_id, primary_id(RSA_COLONS));
    // Within the allowed clock skew it is accepted; beyond it, refused.
    assert!(
        key.verify_detached(SUMS, FUTURE_SIG, T_2099_01_01 - CLOCK_SKEW_SECS)
            .is_ok()
    );
    assert_eq!(
        key.verify_detached(SUMS, FUTURE_SIG, T_2099_01_01 - CLOCK_SKEW_SECS - 1),
        in_future
    );
}

#[test]
fn a_time_before_the_signature_is_signature_in_future() {
    // SHA256SUMS.rsa.sig was made 2024-01-03.
    let key = PublicKey::parse(RSA_PUB).unwrap();
    let created = signature_created(RSA_SIG);
    assert_eq!(format_date(created), "2024-01-03");
    assert!(
        key.verify_detached(SUMS, RSA_SIG, created - CLOCK_SKEW_SECS)
            .is_ok()
    );
    assert_eq!(
        key.verify_for_terraform(SUMS, RSA_SIG, false, created - CLOCK_SKEW_SECS - 1),
        Err(SignatureError::SignatureInFuture {
            created: "2024-01-03".to_string()
        })
    );
    assert_eq!(
        key.verify_detached(SUMS, RSA_SIG, 0),
        Err(SignatureError::SignatureInFuture {
            created: "2024-01-03".to_string()
        })
    );
}

#[test]
fn public_key_is_shareable_and_prints_only_its_id() {
    fn shareable<T: Send + Sync + Clone + std::fmt::Debug + 'static>() {}
    shareable::<PublicKey>();
    let key = PublicKey::parse(RSA_PUB).unwrap();
    let id = primary_id(RSA_COLONS);
    assert_eq!(
        format!("{key:?}"),
        format!("PublicKey {{ key_id: {id:?}, .. }}")
    );
    let copy = key.clone();
    assert_eq!(copy.info(), key.info());
    assert_eq!(key.info().key_id, id);
}

// ---------------------------------------------------------------------------
// Signing in-process with rPGP (no gpg), with the `signer` test keys.

const SIGNER_COLONS: &str = include_str!("../../tests/fixtures/signing/signer.colons.txt");
const SIGNER_EXPIRED_COLONS: &str =
    include_str!("../../tests/fixtures/signing/signer-expired.colons.txt");

#[test]
fn signatures_made_with_rpgp_verify() {
    let signer = tfreg_testkit::TestSigner::rsa();
    let sig = signer.sign(SUMS);
    let key = PublicKey::parse(signer.public_armor).unwrap();
    let v = key.verify_for_terraform(SUMS, &sig, false, now()).unwrap();
    assert_eq!(v.key_id, primary_id(SIGNER_COLONS));
    assert_eq!(v.signer_key_id, v.key_id);
    assert_eq!(v.algorithm, "RSA 2048");
    assert!(v.legacy_compatible);
    let mut data = SUMS.to_vec();
    data[0] ^= 1;
    assert_eq!(
        key.verify_for_terraform(&data, &sig, false, now()),
        Err(SignatureError::BadSignature)
    );

    // An expired key, signing while it was valid.
    let signer = tfreg_testkit::TestSigner::expired();
    let sig = signer.sign(SUMS);
    assert_eq!(signature_created(&sig), T_2020_01_01 + 6 * HOUR);
    let key = PublicKey::parse(signer.public_armor).unwrap();
    let v = key
        .verify_for_terraform(SUMS, &sig, false, T_2020_01_01 + 12 * HOUR)
        .unwrap();
    assert_eq!(v.key_id, primary_id(SIGNER_EXPIRED_COLONS));
    assert_eq!(
        key.verify_for_terraform(SUMS, &sig, false, now()),
        Err(SignatureError::KeyExpired {
            key_id: primary_id(SIGNER_EXPIRED_COLONS),
            expired: "2020-01-02".to_string()
        })
    );
}

#[test]
fn packet_framing_errors_are_typed() {
    let truncated = "it is truncated (a packet is cut short)";
    let not_openpgp = "it is not OpenPGP data";
    let trailing = "it has trailing bytes that are not an OpenPGP packet";
    let tag0 = "it contains an invalid packet (tag 0)";
    let mut with_trailing = RSA_SIG.to_vec();
    with_trailing.push(0x41);
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("not a packet header", vec![0x00, 1, 2], not_openpgp),
        ("junk after a signature", with_trailing, trailing),
        ("header without length", vec![0xC2], truncated),
        ("two-octet length cut short", vec![0xC2, 0xC0], truncated),
        (
            "huge five-octet length",
            vec![0xC2, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0],
            truncated,
        ),
        (
            "old four-octet huge length",
            vec![0x8A, 0xFF, 0xFF, 0xFF, 0xFF, 1],
            truncated,
        ),
        ("old length cut short", vec![0x89, 0x01], truncated),
        (
            "partial chunk without next length",
            vec![0xC2, 0xE1, 1, 2],
            truncated,
        ),
        ("huge partial chunk", vec![0xC2, 0xFE, 1, 2], truncated),
        ("tag 0, new format", vec![0xC0, 0x00], tag0),
        ("tag 0, old format", vec![0x80, 0x00], tag0),
        ("tag 0 cut short", vec![0xC0, 0x05, 1], truncated),
    ];
    let key = PublicKey::parse(RSA_PUB).unwrap();
    for (name, bytes, message) in &cases {
        assert_eq!(
            key.verify_detached(SUMS, bytes, now()),
            Err(SignatureError::MalformedSignature(message.to_string())),
            "{name}"
        );
        assert_eq!(
            key_info(&armor("PUBLIC KEY BLOCK", bytes)),
            Err(SignatureError::MalformedKey(message.to_string())),
            "{name}"
        );
    }
    // Framing that is fine, around bodies that are no signature: an indeterminate
    // length (the rest of the data) and partial body lengths are followed to the end.
    let framed_ok: [&[u8]; 2] = [
        &[0x8B, 1, 2, 3],
        &[0xC2, 0xE1, 1, 2, 0xE0, 3, 0xFF, 0, 0, 0, 1, 4],
    ];
    for bytes in framed_ok {
        let res = key.verify_detached(SUMS, bytes, now());
        assert!(
            matches!(&res, Err(SignatureError::MalformedSignature(m))
                if ![truncated, not_openpgp, trailing, tag0].contains(&m.as_str())),
            "{bytes:02x?}: {res:?}"
        );
    }
}

#[test]
fn keys_that_can_still_sign_are_usable() {
    for armor in [RSA_PUB, SUB_PUB, ED_PUB, MIXED_PUB] {
        let key = PublicKey::parse(armor).unwrap();
        assert_eq!(key.check_usable(now()), Ok(()), "{}", key.info().key_id);
    }
    // Made 2020-01-01, expired 2020-01-02: usable the day it was made.
    let expired = PublicKey::parse(EXPIRED_PUB).unwrap();
    assert_eq!(expired.check_usable(1_577_880_000), Ok(()));
}

#[test]
fn revoked_expired_and_non_signing_keys_are_not_usable() {
    let revoked = PublicKey::parse(REVOKED_PUB).unwrap();
    assert_eq!(
        revoked.check_usable(now()),
        Err(SignatureError::KeyRevoked {
            key_id: primary_id(REVOKED_COLONS)
        })
    );
    let expired = PublicKey::parse(EXPIRED_PUB).unwrap();
    let err = expired.check_usable(now()).unwrap_err();
    assert_eq!(
        err,
        SignatureError::KeyExpired {
            key_id: primary_id(EXPIRED_COLONS),
            expired: "2020-01-02".into()
        }
    );
    assert!(err.to_string().contains("expired on 2020-01-02"), "{err}");
    let cert_only = PublicKey::parse(CERT_ONLY_PUB).unwrap();
    let err = cert_only.check_usable(now()).unwrap_err();
    assert_eq!(
        err,
        SignatureError::NoSigningKey {
            key_id: primary_id(CERT_ONLY_COLONS)
        }
    );
    assert!(err.to_string().contains("cannot sign"), "{err}");
}

#[test]
fn what_old_terraform_cannot_read_is_named() {
    assert_eq!(PublicKey::parse(RSA_PUB).unwrap().legacy_problem(), None);
    assert_eq!(PublicKey::parse(SUB_PUB).unwrap().legacy_problem(), None);
    assert_eq!(
        PublicKey::parse(ED_PUB).unwrap().legacy_problem(),
        Some("EdDSA (Ed25519)")
    );
    let mixed = PublicKey::parse(MIXED_PUB).unwrap();
    let problem = mixed.legacy_problem().unwrap();
    assert!(
        problem.starts_with("ECDH (Curve25519) (in subkey"),
        "{problem}"
    );
}

#[test]
fn armor_holding_control_or_invisible_characters_is_refused() {
    // An armor header is text a publisher writes that others are served.
    for (bad, code) in [
        ("Comment: \u{1b}[2J\u{1b}[31mtrusted", "U+001B"),
        ("Comment: \u{202e}gpj.exe", "U+202E"),
        ("Comment: zero\u{200b}width", "U+200B"),
        ("Comment: bell\u{7}", "U+0007"),
    ] {
        let armor = RSA_PUB.replacen(PUBLIC_KEY_BEGIN, &format!("{PUBLIC_KEY_BEGIN}\n{bad}"), 1);
        let err = PublicKey::parse(&armor).unwrap_err();
        assert!(
            matches!(&err, SignatureError::MalformedKey(m) if m.contains(code)),
            "{bad:?}: {err}"
        );
    }
    // Line breaks of either kind and a plain comment are fine.
    let crlf = RSA_PUB.replace('\n', "\r\n");
    assert!(PublicKey::parse(&crlf).is_ok());
    let commented = RSA_PUB.replacen(
        PUBLIC_KEY_BEGIN,
        &format!("{PUBLIC_KEY_BEGIN}\nComment: José's key"),
        1,
    );
    assert!(PublicKey::parse(&commented).is_ok());
}

// ---------------------------------------------------------------------------
// As the clients that install check: an expired key's signatures made while
// it was valid are accepted (`verify_as_client`).

const SIGNER_EXPIRED_SECRET: &str =
    include_str!("../../tests/fixtures/signing/signer-expired.secret.asc");

/// A binary detached signature over `data` by the primary key of
/// `secret_armor`, dated `created`, lasting `lifetime` seconds if given:
/// signatures gpg will not make (by a key that had expired, with a short
/// life). RSA signing needs no randomness.
pub(crate) fn sign_at(
    secret_armor: &str,
    data: &[u8],
    created: u32,
    lifetime: Option<u32>,
) -> Vec<u8> {
    use pgp::composed::{Deserializable, DetachedSignature, SignedSecretKey};
    use pgp::crypto::hash::HashAlgorithm;
    use pgp::packet::{SignatureConfig, SignatureType, Subpacket, SubpacketData};
    use pgp::ser::Serialize;
    use pgp::types::{Duration, KeyDetails, Password, Timestamp};

    let (key, _) = SignedSecretKey::from_string(secret_armor).expect("a fixture secret key");
    let key = &key.primary_key;
    let mut config = SignatureConfig::v4(
        SignatureType::Binary,
        key.algorithm(),
        HashAlgorithm::Sha256,
    );
    let packet = |data| Subpacket::regular(data).expect("subpacket");
    config.hashed_subpackets = vec![packet(SubpacketData::SignatureCreationTime(
        Timestamp::from_secs(created),
    ))];
    if let Some(secs) = lifetime {
        config
            .hashed_subpackets
            .push(packet(SubpacketData::SignatureExpirationTime(
                Duration::from_secs(secs),
            )));
    }
    config.unhashed_subpackets = vec![packet(SubpacketData::IssuerKeyId(key.legacy_key_id()))];
    let sig = config.sign(key, &Password::empty(), data).expect("signing");
    DetachedSignature::new(sig)
        .to_bytes()
        .expect("a serialisable signature")
}

#[test]
fn as_a_client_a_key_that_expired_after_signing_is_accepted_and_said_to_be() {
    // gpg's `expired` key: made 2020-01-01, valid up to and including
    // 2020-01-02T00:00:00Z; it signed on 2020-01-01T12:00.
    let key = PublicKey::parse(EXPIRED_PUB).unwrap();
    let expired_at = T_2020_01_01 + DAY;
    let accepted = key.verify_as_client(SUMS, EXPIRED_SIG, now()).unwrap();
    assert_eq!(accepted.key_expired, Some(expired_at));
    assert_eq!(accepted.verified.key_id, primary_id(EXPIRED_COLONS));
    assert_eq!(
        accepted.verified,
        key.verify_detached(SUMS, EXPIRED_SIG, T_2020_01_01 + 13 * HOUR)
            .unwrap(),
        "the same signature as while the key was valid"
    );
    // The publish rule is unchanged: expired means refused.
    assert!(matches!(
        key.verify_detached(SUMS, EXPIRED_SIG, now()),
        Err(SignatureError::KeyExpired { .. })
    ));
    // While the key is valid, nothing is said about expiry.
    for at in [T_2020_01_01 + 13 * HOUR, expired_at] {
        let v = key.verify_as_client(SUMS, EXPIRED_SIG, at).unwrap();
        assert_eq!(v.key_expired, None, "at {at}");
    }
    assert_eq!(
        key.verify_as_client(SUMS, EXPIRED_SIG, expired_at + 1)
            .unwrap()
            .key_expired,
        Some(expired_at)
    );
    // A key that does not expire.
    let rsa = PublicKey::parse(RSA_PUB).unwrap();
    let v = rsa.verify_as_client(SUMS, RSA_SIG, now()).unwrap();
    assert_eq!(v.key_expired, None);
    assert_eq!(
        v.verified,
        rsa.verify_detached(SUMS, RSA_SIG, now()).unwrap()
    );
}

#[test]
fn as_a_client_a_signing_subkey_that_expired_after_signing_is_accepted() {
    // A primary key that never expires; its signing subkey was valid for a
    // day from 2020-01-01 and signed on 2020-01-01T12:00.
    const PUB: &str = include_str!("../../tests/fixtures/signing/subkey-expired.pub.asc");
    const SIG: &[u8] = include_bytes!("../../tests/fixtures/signing/SHA256SUMS.subkey-expired.sig");
    const COLONS: &str = include_str!("../../tests/fixtures/signing/subkey-expired.colons.txt");
    let ids = gpg_ids(COLONS);
    let key = PublicKey::parse(PUB).unwrap();
    let v = key
        .verify_detached(SUMS, SIG, T_2020_01_01 + 13 * HOUR)
        .unwrap();
    assert_eq!(
        (v.key_id.as_str(), v.signer_key_id.as_str()),
        (ids[0].0.as_str(), ids[1].0.as_str())
    );
    assert_eq!(
        key.verify_detached(SUMS, SIG, now()),
        Err(SignatureError::KeyExpired {
            key_id: ids[1].0.clone(),
            expired: "2020-01-02".into()
        })
    );
    let accepted = key.verify_as_client(SUMS, SIG, now()).unwrap();
    assert_eq!(accepted.verified, v);
    assert_eq!(accepted.key_expired, Some(T_2020_01_01 + DAY));
}

#[test]
fn as_a_client_a_signature_made_after_the_key_expired_is_refused() {
    // `signer-expired`: made 2020-01-01T00:00:00Z, valid for a day.
    let key = PublicKey::parse(tfreg_testkit::TestSigner::expired().public_armor).unwrap();
    let key_id = primary_id(SIGNER_EXPIRED_COLONS);
    let last_valid = T_2020_01_01 + DAY;
    let signed_then = |created: u64| {
        let sig = sign_at(SIGNER_EXPIRED_SECRET, SUMS, created as u32, None);
        key.verify_as_client(SUMS, &sig, now())
    };
    assert_eq!(
        signed_then(last_valid).unwrap().key_expired,
        Some(last_valid)
    );
    for created in [last_valid + 1, T_2020_01_01 + 2 * DAY] {
        assert_eq!(
            signed_then(created),
            Err(SignatureError::SignedAfterKeyExpired {
                key_id: key_id.clone(),
                expired: "2020-01-02".into(),
                signed: format_date(created),
            })
        );
    }
    let err = signed_then(T_2020_01_01 + 2 * DAY).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("the signature is dated 2020-01-03, after key {key_id} expired on 2020-01-02")
    );
}

#[test]
fn as_a_client_every_other_fault_is_still_refused() {
    let at_now = |armor: &str, data: &[u8], sig: &[u8]| {
        PublicKey::parse(armor)
            .unwrap()
            .verify_as_client(data, sig, now())
    };
    // An expired key's signature over other bytes.
    let mut data = SUMS.to_vec();
    data[0] ^= 1;
    assert_eq!(
        at_now(EXPIRED_PUB, &data, EXPIRED_SIG),
        Err(SignatureError::BadSignature)
    );
    // An expired key's signature that has expired itself: the key is
    // forgiven, the signature's own expiry is not.
    let short_lived = sign_at(
        SIGNER_EXPIRED_SECRET,
        SUMS,
        (T_2020_01_01 + 6 * HOUR) as u32,
        Some(HOUR as u32),
    );
    let signer_expired = tfreg_testkit::TestSigner::expired().public_armor;
    assert_eq!(
        at_now(signer_expired, SUMS, &short_lived),
        Err(SignatureError::SignatureExpired {
            expired: "2020-01-01".into()
        })
    );
    assert_eq!(
        at_now(REVOKED_PUB, SUMS, REVOKED_SIG),
        Err(SignatureError::KeyRevoked {
            key_id: primary_id(REVOKED_COLONS)
        })
    );
    assert!(matches!(
        at_now(RSA_PUB, SUMS, EXPIRED_SIG),
        Err(SignatureError::UnknownKey { .. })
    ));
    assert!(matches!(
        at_now(CERT_ONLY_PUB, SUMS, CERT_ONLY_SIG),
        Err(SignatureError::UnusableSigningKey { .. })
    ));
    const FUTURE_SIG: &[u8] =
        include_bytes!("../../tests/fixtures/signing/SHA256SUMS.rsa.future.sig");
    assert_eq!(
        at_now(RSA_PUB, SUMS, FUTURE_SIG),
        Err(SignatureError::SignatureInFuture {
            created: "2099-01-01".into()
        })
    );
    assert_eq!(
        at_now(RSA_PUB, SUMS, RSA_SIG_ASC),
        Err(SignatureError::ArmoredSignature)
    );
}
