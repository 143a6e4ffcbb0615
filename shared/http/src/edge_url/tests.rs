//! The signer's parts against fixed answers: a key made by `openssl genrsa`
//! for these tests only (PKCS#1, and the same key as PKCS#8 by `openssl
//! pkcs8 -topk8 -nocrypt`), and a signature `openssl dgst -sha1 -sign`
//! made of a canned policy. botocore's signer is compared with ours in
//! tests/suite/cloudfront_signer.rs.

use super::*;

use rsa::pkcs1v15::{Signature, VerifyingKey};
use rsa::signature::Verifier;

const PKCS1: &str = include_str!("test-key-2048.pem");
const PKCS8: &str = include_str!("test-key-2048.p8");
const SHORT: &str = include_str!("test-key-1024.pem");
const BASE: &str = "https://d111111abcdef8.cloudfront.net";
const KEY_ID: &str = "K2JCJMDEHXQW5F";

/// `openssl dgst -sha1 -sign test-key-2048.pem` of
/// `canned_policy("https://d111111abcdef8.cloudfront.net/archives/0123/x.zip", 1767225600)`,
/// `base64 -w0 | tr '+=/' '-_~'`.
const OPENSSL_SIGNATURE: &str = "G2OzY5BT6dsJzM5ai09Tut-JjvpgcRF8963wClCBIb~8Po2TyTmLzy7XVzyt9szWIxmQFAi4unYx67NsGgUTMRVG8s1jg-Tg1M4qN4FDjaTcDil1Z7lRzjifNTaUf7CylRyVGuoRsGKrCSKVDwYbt8OV6ToafBubEyYUUjRafeeF7P5tSsURixWAdo0ZP16ncUjuc9hVDrnd2ZJOV72ORmtKI3u5HM8CSciTMFowqEEatiMMY9~OrLL61W561PHPyHa~ppo7PXmU4WvIGgIvX1YZKJA2RMcqd-7u0Nu~rkwwJc5zRE09VC200bW2BKSBGf7-1Gk224fEPmiBJtZwdA__";

fn signer() -> CloudFrontSigner {
    CloudFrontSigner::new(BASE, KEY_ID, PKCS1).unwrap()
}

fn key(text: &str) -> BlobKey {
    BlobKey::parse(text).unwrap()
}

#[test]
fn the_canned_policy_is_botocore_s_json() {
    assert_eq!(
        canned_policy("https://d1.example/archives/a/b.zip", 1767225600),
        r#"{"Statement":[{"Resource":"https://d1.example/archives/a/b.zip","Condition":{"DateLessThan":{"AWS:EpochTime":1767225600}}}]}"#
    );
}

#[test]
fn strings_are_escaped_as_python_s_json_dumps_escapes_them() {
    for (text, json) in [
        ("plain/a-b_c.~", r#""plain/a-b_c.~""#),
        ("q\"b\\", r#""q\"b\\""#),
        (
            "\n\r\t\u{8}\u{c}\u{1}\u{1f}\u{7f}",
            "\"\\n\\r\\t\\b\\f\\u0001\\u001f\u{7f}\"",
        ),
        ("é€😀", r#""\u00e9\u20ac\ud83d\ude00""#),
    ] {
        assert_eq!(json_string(text), json, "{text:?}");
    }
}

#[test]
fn base64_is_cloudfront_s_alphabet() {
    assert_eq!(cloudfront_base64(b""), "");
    assert_eq!(cloudfront_base64(b"f"), "Zg__");
    assert_eq!(cloudfront_base64(b"fo"), "Zm8_");
    assert_eq!(cloudfront_base64(b"foo"), "Zm9v");
    // Standard base64 `+/8=` and `/+/+`.
    assert_eq!(cloudfront_base64(&[0xfb, 0xff]), "-~8_");
    assert_eq!(cloudfront_base64(&[0xff, 0xef, 0xfe]), "~-~-");
    let all: Vec<u8> = (0..=255).collect();
    let ours = cloudfront_base64(&all);
    assert!(
        ours.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-~_".contains(&b))
    );
    assert_eq!(ours.len(), 344);
}

#[test]
fn an_archive_url_carries_openssl_s_signature_of_its_canned_policy() {
    let url = signer().archive_url(&key("archives/0123/x.zip"), 1767225600);
    assert_eq!(
        url,
        format!(
            "{BASE}/archives/0123/x.zip?Expires=1767225600&Signature={OPENSSL_SIGNATURE}&Key-Pair-Id={KEY_ID}"
        )
    );
    // And the public key verifies it (the signature, decoded again).
    let sig = OPENSSL_SIGNATURE
        .replace('-', "+")
        .replace('_', "=")
        .replace('~', "/");
    let bytes = base64_decode(&sig);
    let public = VerifyingKey::<Sha1>::new(parse_private_key(PKCS1).unwrap().to_public_key());
    let policy = canned_policy(&format!("{BASE}/archives/0123/x.zip"), 1767225600);
    public
        .verify(
            policy.as_bytes(),
            &Signature::try_from(bytes.as_slice()).unwrap(),
        )
        .unwrap();
    assert!(
        public
            .verify(
                canned_policy(&format!("{BASE}/archives/0123/y.zip"), 1767225600).as_bytes(),
                &Signature::try_from(bytes.as_slice()).unwrap()
            )
            .is_err(),
        "the signature covers the resource"
    );
}

fn base64_decode(text: &str) -> Vec<u8> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .unwrap()
}

#[test]
fn pkcs1_and_pkcs8_are_the_same_key() {
    let a = signer().sign(&format!("{BASE}/cache/h/p/x"), 42);
    let b = CloudFrontSigner::new(BASE, KEY_ID, PKCS8)
        .unwrap()
        .sign(&format!("{BASE}/cache/h/p/x"), 42);
    assert_eq!(a, b);
    // Surrounding whitespace (a parameter's trailing newline) is no matter.
    let c = CloudFrontSigner::new(BASE, KEY_ID, &format!("\n{PKCS8}\n\n"))
        .unwrap()
        .sign(&format!("{BASE}/cache/h/p/x"), 42);
    assert_eq!(a, c);
}

#[test]
fn a_url_with_a_query_gets_the_parameters_after_an_ampersand() {
    let url = signer().sign("https://d1.example/a?x=1", 7);
    assert!(
        url.starts_with("https://d1.example/a?x=1&Expires=7&Signature="),
        "{url}"
    );
    assert!(url.ends_with("&Key-Pair-Id=K2JCJMDEHXQW5F"), "{url}");
}

#[test]
fn the_expiry_and_resource_are_what_is_signed() {
    let s = signer();
    let k = key("archives/0123/x.zip");
    assert_ne!(s.archive_url(&k, 1), s.archive_url(&k, 2));
    assert_eq!(s.archive_url(&k, 1), s.archive_url(&k, 1), "deterministic");
}

#[test]
fn bad_keys_ids_and_urls_are_refused_without_quoting_the_key() {
    assert_eq!(
        CloudFrontSigner::new(BASE, KEY_ID, SHORT).unwrap_err(),
        EdgeKeyError::TooShort(1024)
    );
    assert_eq!(
        parse_private_key("MIIEvQIBADANBgkqhkiG9w0BAQEFAASC").unwrap_err(),
        EdgeKeyError::NotPem
    );
    assert_eq!(
        parse_private_key(
            "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIF\n-----END ENCRYPTED PRIVATE KEY-----"
        )
        .unwrap_err(),
        EdgeKeyError::Encrypted
    );
    // A PKCS#1 body damaged in its middle: malformed, and the message
    // holds none of the PEM's lines.
    let mut lines: Vec<&str> = PKCS1.lines().collect();
    let middle = lines.len() / 2;
    lines.remove(middle);
    let damaged = lines.join("\n");
    let err = parse_private_key(&damaged).unwrap_err();
    assert!(
        matches!(
            err,
            EdgeKeyError::Malformed {
                format: "PKCS#1",
                ..
            }
        ),
        "{err:?}"
    );
    let text = err.to_string();
    for line in PKCS1.lines().skip(1).filter(|l| !l.starts_with("-----")) {
        assert!(!text.contains(line), "{text}");
    }
    for id in ["", "K2 J", "K2&x=1", &"K".repeat(65)] {
        assert!(matches!(
            CloudFrontSigner::new(BASE, id, PKCS1),
            Err(EdgeKeyError::KeyPairId(_))
        ));
    }
    for url in [
        "d1.example",
        "ftp://d1.example",
        "https://",
        "https://d1.example/",
        "https://d1.example?x=1",
        "https://d1.example/#f",
        "https://u@d1.example",
        "https://d1.example//a",
    ] {
        assert!(
            matches!(
                CloudFrontSigner::new(url, KEY_ID, PKCS1),
                Err(EdgeKeyError::BaseUrl(_))
            ),
            "{url}"
        );
    }
    for url in ["http://127.0.0.1:8443", "https://registry.example.com/edge"] {
        assert!(CloudFrontSigner::new(url, KEY_ID, PKCS1).is_ok(), "{url}");
    }
}

#[test]
fn the_debug_form_leaves_the_key_out() {
    let text = format!("{:?}", signer());
    assert_eq!(
        text,
        format!("CloudFrontSigner {{ base_url: {BASE:?}, key_pair_id: {KEY_ID:?}, .. }}")
    );
}

/// A store whose downloads redirect to S3 (as S3BlobStore's GET) and whose
/// HEADs answer a length.
struct PresignedStore;

#[async_trait]
impl BlobStore for PresignedStore {
    async fn receive(&self, _: &BlobKey, _: ByteStream, _: &Digest) -> Result<(), StoreError> {
        unreachable!()
    }
    async fn claim(&self, _: &BlobKey, _: u64) -> Result<Claimed, StoreError> {
        unreachable!()
    }
    async fn keep(&self, _: &Claimed, _: &BlobKey) -> Result<(), StoreError> {
        unreachable!()
    }
    async fn close_upload(&self, _: &BlobKey) -> Result<(), StoreError> {
        unreachable!()
    }
    async fn delete(&self, _: &BlobKey) -> Result<(), StoreError> {
        unreachable!()
    }
    async fn list(&self, _: &str) -> Result<Vec<BlobKey>, StoreError> {
        unreachable!()
    }
    async fn download(&self, key: &BlobKey, head: bool) -> Result<Download, StoreError> {
        if key.file_name() == "missing.zip" {
            return Err(StoreError::NotFound(key.to_string()));
        }
        Ok(if head {
            Download::Stream {
                len: 3,
                body: Box::pin(futures_util::stream::empty()),
            }
        } else {
            Download::Redirect(format!("https://bucket.s3.example/{key}?X-Amz-Signature=s"))
        })
    }
    async fn upload_via(&self, _: &BlobKey, _: &Digest) -> Result<UploadVia, StoreError> {
        unreachable!()
    }
}

#[tokio::test]
async fn the_blob_function_s_redirects_go_to_the_edge_and_its_heads_stay_its_own() {
    let edge =
        EdgeRedirects::new(Arc::new(PresignedStore), Arc::new(signer()), 300).with_clock(|| 1_000);
    let cached = key(&format!(
        "cache/registry.terraform.io/p/hashicorp/null/{}/terraform-provider-null_3.2.0_linux_amd64.zip",
        "ab".repeat(32)
    ));
    match edge.download(&cached, false).await.unwrap() {
        Download::Redirect(url) => assert_eq!(url, signer().archive_url(&cached, 1_300)),
        _ => panic!("not a redirect"),
    }
    match edge.download(&cached, true).await.unwrap() {
        Download::Stream { len, .. } => assert_eq!(len, 3),
        _ => panic!("HEAD is answered by the store"),
    }
    assert!(matches!(
        edge.download(&key("cache/h/p/n/t/s/missing.zip"), false)
            .await,
        Err(StoreError::NotFound(_))
    ));
}

#[tokio::test]
async fn in_cloudfront_mode_published_files_get_edge_urls_and_cached_ones_the_registry_s() {
    use crate::registry::{ArchiveDelivery, Config, Registry};
    use crate::signed_url::UrlSigner;
    use tfreg_model::address::Hostname;
    use tfreg_store::NoBlobs;
    use tfreg_store::sqlite::SqliteStore;

    let mut config = Config::new(Hostname::parse("registry.test").unwrap());
    config.url_ttl_secs = 120;
    let registry = |config: Config| {
        Registry::new(
            Arc::new(SqliteStore::in_memory().unwrap()),
            Arc::new(NoBlobs),
            UrlSigner::new(vec![7; 32]),
            config,
        )
        .with_clock(|| 1_000)
    };
    let published =
        key("archives/0123456789abcdef0123456789abcdef/terraform-provider-x_1.0.0_linux_amd64.zip");
    let cached = key(&format!(
        "cache/registry.terraform.io/p/hashicorp/null/{}/x.zip",
        "ab".repeat(32)
    ));

    // The default: the registry's own URLs for both.
    let presigned = registry(config.clone());
    for k in [&published, &cached] {
        let url = presigned.read_url(k).await.unwrap();
        assert!(
            url.starts_with(&format!("https://registry.test/v1/blobs/{k}?")),
            "{url}"
        );
    }

    config.archive_delivery = ArchiveDelivery::CloudFront(Arc::new(signer()));
    let edge = registry(config);
    assert_eq!(
        edge.read_url(&published).await.unwrap(),
        signer().archive_url(&published, 1_120),
        "the registry's URL lifetime"
    );
    let url = edge.read_url(&cached).await.unwrap();
    assert!(
        url.starts_with(&format!("https://registry.test/v1/blobs/{cached}?")),
        "{url}"
    );
    assert!(!url.contains("Key-Pair-Id"), "{url}");
}
