//! The CloudFront stand-in (`support/cloudfront-edge.py`, issue 37) against
//! URLs made by the reference signer, botocore's `CloudFrontSigner`, so that
//! these tests hold whatever tfreg's own signer does: what CloudFront
//! refuses (expired, tampered path, tampered signature, unknown key id,
//! missing parameters, a method other than GET and HEAD) is refused with
//! CloudFront's 403, what it accepts comes from the bucket, and a key
//! rotated out of the key group stops working while the other keeps on.

use crate::support::edge::{Edge, KeyPair, bucket_with, epoch_in};

const ARCHIVE: &str =
    "archives/0123456789abcdef0123456789abcdef/terraform-provider-null_2.1.2_linux_amd64.zip";
const BYTES: &[u8] = b"PK\x03\x04 not really a zip, but bytes the bucket holds";

/// The stand-in in front of a bucket holding [`ARCHIVE`], its key group
/// `ids`' keys; the keys, and a client trusting its certificate.
fn stand_in(
    dir: &std::path::Path,
    ids: &[&str],
) -> (Edge, Vec<KeyPair>, reqwest::blocking::Client) {
    let bucket = bucket_with(dir, &[(ARCHIVE, BYTES)]);
    let keys: Vec<KeyPair> = ids
        .iter()
        .map(|id| KeyPair::generate(&dir.join("keys"), id))
        .collect();
    let edge = Edge::start(
        &dir.join("edge"),
        0,
        &dir.join("tls"),
        &bucket,
        &keys.iter().collect::<Vec<_>>(),
    );
    let ca = std::fs::read(dir.join("tls/ca.pem")).unwrap();
    let http = reqwest::blocking::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(&ca).unwrap())
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    (edge, keys, http)
}

/// CloudFront's error bodies: (code, message).
const DENIED: (&str, &str) = ("AccessDenied", "Access denied");
const UNKNOWN_KEY: (&str, &str) = ("InvalidKey", "Unknown Key");
const MISSING_KEY: (&str, &str) = (
    "MissingKey",
    "Missing Key-Pair-Id query parameter or cookie value",
);
const METHOD: (&str, &str) = (
    "MethodNotAllowed",
    "This distribution is not configured to allow the HTTP request method that was used for this request.",
);

/// A 403 of the rule `rule`, with CloudFront's error body `(code, message)`.
#[track_caller]
fn refused(resp: reqwest::blocking::Response, rule: &str, (code, message): (&str, &str)) {
    let status = resp.status().as_u16();
    let why = resp
        .headers()
        .get("x-edge-refused")
        .map(|v| v.to_str().unwrap().to_string());
    let body = resp.text().unwrap();
    assert_eq!(
        (status, why.as_deref()),
        (403, Some(rule)),
        "expected a 403 for {rule}: {body}"
    );
    assert_eq!(
        body,
        format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>{code}</Code><Message>{message}</Message></Error>"
        )
    );
}

#[test]
fn stand_in_refuses_what_cloudfront_refuses_and_serves_the_reference_signers_urls() {
    let tmp = tempfile::tempdir().unwrap();
    let (edge, keys, http) = stand_in(tmp.path(), &["K2REFERENCEA1"]);
    let key = &keys[0];
    let url = format!("{}/{ARCHIVE}", edge.url);
    let other = format!(
        "{}/archives/0123456789abcdef0123456789abcdef/other.zip",
        edge.url
    );
    let signed = key.sign(epoch_in(600), &[&url, &other]);
    let (good, of_other) = (&signed[0], &signed[1]);
    let expired = &key.sign(epoch_in(-60), &[&url])[0];

    // The reference signer's URL: GET, HEAD (its length, no body) and a
    // Range come from the bucket, with the behaviour's response headers.
    let resp = http.get(good).send().unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-disposition"], "attachment");
    assert_eq!(resp.headers()["x-content-type-options"], "nosniff");
    assert_eq!(resp.bytes().unwrap().as_ref(), BYTES);
    let resp = http.head(good).send().unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-length"], BYTES.len().to_string());
    let resp = http.get(good).header("Range", "bytes=0-3").send().unwrap();
    assert_eq!(resp.status(), 206);
    assert_eq!(resp.bytes().unwrap().as_ref(), &BYTES[..4]);

    // Expired: a good signature over a policy whose time has passed.
    refused(http.get(expired).send().unwrap(), "expired", DENIED);
    // Tampered path: another object's path under this URL's signature
    // (that object's own URL passes the edge: the bucket has no such object).
    let tampered_path = good.replace("_linux_amd64.zip", "_darwin_arm64.zip");
    refused(
        http.get(&tampered_path).send().unwrap(),
        "signature",
        DENIED,
    );
    assert_eq!(http.get(of_other).send().unwrap().status(), 404);
    // Tampered signature: one character of it changed.
    let at = good.find("Signature=").unwrap() + "Signature=".len() + 10;
    let flipped = if &good[at..=at] == "A" { "B" } else { "A" };
    let tampered_sig = format!("{}{flipped}{}", &good[..at], &good[at + 1..]);
    refused(http.get(&tampered_sig).send().unwrap(), "signature", DENIED);
    // Unknown key id: the same signature under an id not in the key group.
    let unknown = good.replace("Key-Pair-Id=K2REFERENCEA1", "Key-Pair-Id=K2NOTINTHEGROUP");
    refused(
        http.get(&unknown).send().unwrap(),
        "unknown-key",
        UNKNOWN_KEY,
    );
    // Missing parameters: none, or the signature alone taken off.
    refused(
        http.get(&url).send().unwrap(),
        "missing-key-pair-id",
        MISSING_KEY,
    );
    let unsigned =
        good.split("&Signature=").next().unwrap().to_string() + "&Key-Pair-Id=K2REFERENCEA1";
    refused(
        http.get(&unsigned).send().unwrap(),
        "missing-params",
        DENIED,
    );
    // Only GET and HEAD, even with a good signature.
    for method in [reqwest::Method::PUT, reqwest::Method::DELETE] {
        refused(
            http.request(method, good).body("x").send().unwrap(),
            "method",
            METHOD,
        );
    }
    // Only the archive behaviours.
    let resp = http
        .get(format!("{}/v1/providers/a/b/versions", edge.url))
        .send()
        .unwrap();
    assert_eq!(resp.status(), 404);

    // The request log says what each was answered (the e2e runs count on it).
    let log = edge.requests();
    let served = log.iter().filter(|r| r.refused.is_none()).count();
    assert_eq!(served, 4, "{log:#?}");
    assert_eq!(log.len(), 13, "{log:#?}");
}

#[test]
fn stand_in_rotation_keeps_both_keys_until_one_leaves_the_key_group() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut edge, keys, http) = stand_in(tmp.path(), &["K2ROTATIONA01", "K2ROTATIONB01"]);
    let url = format!("{}/{ARCHIVE}", edge.url);
    let by_a = keys[0].sign(epoch_in(600), &[&url]).remove(0);
    let by_b = keys[1].sign(epoch_in(600), &[&url]).remove(0);
    // Both slots in the key group: URLs signed by either are good.
    for signed in [&by_a, &by_b] {
        let resp = http.get(signed).send().unwrap();
        assert_eq!(resp.status(), 200, "{signed}");
        assert_eq!(resp.bytes().unwrap().as_ref(), BYTES);
    }
    // A leaves the key group (its URLs have expired): B's still work, A's
    // are refused as signed by a key the distribution no longer knows.
    edge.trust(&[&keys[1]]);
    assert_eq!(http.get(&by_b).send().unwrap().status(), 200);
    refused(http.get(&by_a).send().unwrap(), "unknown-key", UNKNOWN_KEY);
    // And a key id of the group cannot vouch for another key's signature.
    let forged = by_a.replace("Key-Pair-Id=K2ROTATIONA01", "Key-Pair-Id=K2ROTATIONB01");
    refused(http.get(&forged).send().unwrap(), "signature", DENIED);
}
