//! The CloudFront signer (`tfreg_http::edge_url`, issue 37) against a
//! reference no one here wrote: botocore's `CloudFrontSigner` (with
//! `cryptography`'s RSA-SHA1 PKCS#1 v1.5 signature, as botocore's own
//! documentation signs), in moto's Python. For keys of 2048 and 4096 bits
//! made by `openssl genrsa` and by `cryptography` (PKCS#1 and PKCS#8),
//! archive URLs of every kind of blob key (every character a key may hold,
//! the longest file name), raw resources with characters a URL must
//! escape (botocore signs what it is given), and expiries from 1 to 2100:
//! byte-identical URLs.
//!
//! Then the key as the signing functions read it at init (SSM by name and
//! ARN, Secrets Manager by ARN, on moto), and the `read` and `blob`
//! binaries at init: a missing or unusable key stops them, naming its
//! reference (as a missing OIDC client secret stops the auth function),
//! and a good one starts them; the key itself never in their output.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};
use tfreg_http::edge_url::CloudFrontSigner;
use tfreg_lambda::edge::read_key;
use tfreg_lambda::signin::SecretRef;
use tfreg_model::blob_key::BlobKey;

use crate::support::moto::Moto;
use crate::support::tools::{Tools, require_emulators};

/// moto's Python: botocore and cryptography are installed beside it.
fn python() -> PathBuf {
    Tools::get()
        .path("TFREG_MOTO_SERVER")
        .parent()
        .unwrap()
        .join("python3")
}

/// botocore's URL for each case (`pem`, `key_id`, `url`, `expires`).
const BOTOCORE: &str = r#"
import datetime, json, sys
from botocore.signers import CloudFrontSigner
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding

keys = {}
out = []
for case in json.load(sys.stdin):
    if case["pem"] not in keys:
        with open(case["pem"], "rb") as f:
            keys[case["pem"]] = serialization.load_pem_private_key(f.read(), password=None)
    key = keys[case["pem"]]
    signer = CloudFrontSigner(
        case["key_id"], lambda message, key=key: key.sign(message, padding.PKCS1v15(), hashes.SHA1())
    )
    when = datetime.datetime.fromtimestamp(case["expires"], tz=datetime.timezone.utc)
    out.append(signer.generate_presigned_url(case["url"], date_less_than=when))
json.dump(out, sys.stdout)
"#;

/// `python -c BOTOCORE` on `cases`.
fn botocore(cases: &[Value]) -> Vec<String> {
    let mut child = Command::new(python())
        .args(["-c", BOTOCORE])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("moto's python runs");
    serde_json::to_writer(child.stdin.take().unwrap(), cases).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "botocore: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Keys for the tests, in `dir`: (path, what made it).
fn keys(dir: &Path) -> Vec<(PathBuf, &'static str)> {
    // `openssl genrsa [options] -out FILE BITS`: the size comes last.
    let openssl = |name: &str, args: &[&str]| {
        let path = dir.join(name);
        let (bits, options) = args.split_last().unwrap();
        let out = Command::new("openssl")
            .args(options)
            .arg("-out")
            .arg(&path)
            .arg(bits)
            .output()
            .expect("openssl runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        path
    };
    let pkcs1_2048 = openssl(
        "openssl-2048-pkcs1.pem",
        &["genrsa", "-traditional", "2048"],
    );
    let pkcs8_4096 = openssl("openssl-4096-pkcs8.pem", &["genrsa", "4096"]);
    let python_key = dir.join("cryptography-2048-pkcs8.pem");
    let python_pkcs1 = dir.join("cryptography-3072-pkcs1.pem");
    let made = Command::new(python())
        .arg("-c")
        .arg(
            r#"
import sys
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
for path, bits, fmt in [(sys.argv[1], 2048, serialization.PrivateFormat.PKCS8),
                        (sys.argv[2], 3072, serialization.PrivateFormat.TraditionalOpenSSL)]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=bits)
    with open(path, "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM, fmt, serialization.NoEncryption()))
"#,
        )
        .arg(&python_key)
        .arg(&python_pkcs1)
        .output()
        .unwrap();
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let keys = vec![
        (pkcs1_2048, "openssl genrsa -traditional 2048"),
        (pkcs8_4096, "openssl genrsa 4096"),
        (python_key, "cryptography, 2048 bits, PKCS#8"),
        (python_pkcs1, "cryptography, 3072 bits, PKCS#1"),
    ];
    for (path, made_by) in &keys {
        let head = std::fs::read_to_string(path).unwrap();
        let first = head.lines().next().unwrap();
        let want = if made_by.contains("PKCS#1") || made_by.contains("traditional") {
            "-----BEGIN RSA PRIVATE KEY-----"
        } else {
            "-----BEGIN PRIVATE KEY-----"
        };
        assert_eq!(first, want, "{made_by}");
    }
    keys
}

/// A blob key of each kind: a published file, a cached one (a host with a
/// port), and the longest file name of every character a key may hold.
fn blob_keys() -> Vec<BlobKey> {
    let id = "0123456789abcdef0123456789abcdef";
    let sha = "ab".repeat(32);
    let all = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.";
    let longest: String = all.chars().cycle().take(128).collect();
    [
        format!("archives/{id}/terraform-provider-acme_1.2.3_linux_amd64.zip"),
        format!("archives/{id}/terraform-provider-acme_1.2.3_SHA256SUMS.sig"),
        format!("archives/{id}/module.tar.gz"),
        format!("cache/registry.example.test_8443/p/hashicorp/null/{sha}/terraform-provider-null_3.2.0_darwin_arm64.zip"),
        format!("cache/registry.terraform.io/m/hashicorp/consul/aws/0.1.0/{sha}.tar.gz"),
        format!("archives/{id}/{longest}"),
    ]
    .iter()
    .map(|k| BlobKey::parse(k).unwrap_or_else(|e| panic!("{k}: {e}")))
    .collect()
}

const BASES: [&str; 3] = [
    "https://d111111abcdef8.cloudfront.net",
    "https://registry.example.com",
    "http://127.0.0.1:8443/edge",
];

/// Resources botocore signs as given: characters a URL escapes, a query
/// (the parameters then follow `&`), non-ASCII (JSON `\u` escapes, UTF-16).
const RAW: [&str; 4] = [
    "https://d1.example/a b/\"quoted\"\\back<>{}|^`",
    "https://d1.example/archives/x.zip?response-content-type=application%2Fzip&x=1",
    "https://d1.example/é/€/😀/\u{7f}\t",
    "https://d1.example/*",
];

const EXPIRIES: [u64; 5] = [
    1,
    1_767_225_600,
    1_767_225_600 + 86_400,
    2_147_483_647,
    4_102_444_800,
];

#[test]
fn signed_urls_are_byte_identical_to_botocore_s() {
    let tmp = tempfile::tempdir().unwrap();
    let keys = keys(tmp.path());
    let key_ids = ["K2JCJMDEHXQW5F", "APKAEIBAERJR2EXAMPLE", "K1"];
    // (case for botocore, ours)
    let mut cases = Vec::new();
    for (i, (pem_path, made_by)) in keys.iter().enumerate() {
        let pem = std::fs::read_to_string(pem_path).unwrap();
        let key_id = key_ids[i % key_ids.len()];
        for base in BASES {
            let signer = CloudFrontSigner::new(base, key_id, &pem)
                .unwrap_or_else(|e| panic!("{made_by}: {e}"));
            for (j, blob) in blob_keys().iter().enumerate() {
                let expires = EXPIRIES[(i + j) % EXPIRIES.len()];
                cases.push((
                    json!({"pem": pem_path, "key_id": key_id, "url": format!("{base}/{blob}"), "expires": expires}),
                    signer.archive_url(blob, expires),
                ));
            }
        }
        let signer = CloudFrontSigner::new(BASES[0], key_id, &pem).unwrap();
        for resource in RAW {
            for expires in EXPIRIES {
                cases.push((
                    json!({"pem": pem_path, "key_id": key_id, "url": resource, "expires": expires}),
                    signer.sign(resource, expires),
                ));
            }
        }
    }
    let theirs = botocore(&cases.iter().map(|(c, _)| c.clone()).collect::<Vec<_>>());
    assert_eq!(theirs.len(), cases.len());
    let mut differ = Vec::new();
    for ((case, ours), theirs) in cases.iter().zip(&theirs) {
        if ours != theirs {
            differ.push(format!("{case}\n  ours:     {ours}\n  botocore: {theirs}"));
        }
    }
    assert!(
        differ.is_empty(),
        "{} of {} differ:\n{}",
        differ.len(),
        cases.len(),
        differ.join("\n")
    );
    // Distinct keys, resources and expiries sign differently: the
    // comparison could fail.
    let distinct: std::collections::BTreeSet<&String> = theirs.iter().collect();
    assert_eq!(distinct.len(), theirs.len());
    assert!(cases.len() >= 4 * (3 * 6 + 4 * 5), "{}", cases.len());
}

/// The signing key as the read and blob functions read it at init.
#[test]
fn the_signing_key_is_read_from_ssm_and_secrets_manager() {
    require_emulators();
    let tmp = tempfile::tempdir().unwrap();
    let moto = Moto::start(&tmp.path().join("moto.log"));
    let pem = std::fs::read_to_string(&keys(tmp.path())[0].0).unwrap();
    let parameter_arn = moto.put_parameter("/tfreg/archive-signing-key-a", &pem);
    let secret_arn = moto.create_secret("tfreg/archive-signing-key-b", &pem);
    let (sdk, get) = moto.function_view();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        for text in [
            "/tfreg/archive-signing-key-a",
            parameter_arn.as_str(),
            secret_arn.as_str(),
        ] {
            let reference = SecretRef::parse(text).unwrap();
            let value = read_key(&sdk, &reference, &*get)
                .await
                .unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(value.as_str(), pem, "{text}");
            CloudFrontSigner::new(BASES[0], "K1", &value).unwrap();
        }
        for missing in [
            "/tfreg/no-such-key".to_string(),
            secret_arn.replace("archive-signing-key-b", "none"),
        ] {
            let err = read_key(&sdk, &SecretRef::parse(&missing).unwrap(), &*get)
                .await
                .err()
                .unwrap_or_else(|| panic!("{missing} exists?"));
            let text = err.to_string();
            assert!(text.contains(&missing), "{text}");
            assert!(text.contains("NotFound"), "{text}");
        }
    });
}

/// Where `cargo build --workspace --bins` put the function binaries.
fn function_binary(name: &str) -> PathBuf {
    let dir = std::env::current_exe()
        .unwrap()
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .to_path_buf();
    let bin = dir.join(name);
    assert!(
        bin.exists(),
        "{} is missing: cargo build --workspace --bins",
        bin.display()
    );
    bin
}

/// `function` started in the `cloudfront` mode with the key at `reference`
/// (moto at `moto`), until it exits: whether it did so in init, and what
/// it printed. Outside Lambda (no runtime API) it exits once init is done.
fn start(function: &str, moto: &str, reference: &str) -> (bool, String) {
    let out = Command::new(function_binary(function))
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .envs([
            ("TFREG_TABLE", "t"),
            ("TFREG_BUCKET", "b"),
            ("TFREG_HOSTNAME", "registry.example.test"),
            ("TFREG_ARCHIVE_DELIVERY", "cloudfront"),
            ("TFREG_ARCHIVE_URL", "https://registry.example.test"),
            ("TFREG_CLOUDFRONT_KEY_PAIR_ID", "K2JCJMDEHXQW5F"),
            ("TFREG_ARCHIVE_SIGNING_KEY", reference),
            ("AWS_REGION", "us-east-1"),
            ("AWS_ACCESS_KEY_ID", "tfregtest"),
            ("AWS_SECRET_ACCESS_KEY", "tfregtest"),
            ("AWS_ENDPOINT_URL_SSM", moto),
            ("AWS_ENDPOINT_URL_SECRETS_MANAGER", moto),
        ])
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (text.contains("init failed"), text)
}

#[test]
fn a_signing_function_without_a_usable_key_stops_at_init_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    let moto = Moto::start(&tmp.path().join("moto.log"));
    let pem = std::fs::read_to_string(&keys(tmp.path())[0].0).unwrap();
    moto.put_parameter("/tfreg/archive-signing-key-a", &pem);
    moto.put_parameter("/tfreg/not-a-key", "s3cr3t-but-not-a-pem");
    let short = Command::new("openssl")
        .args(["genrsa", "1024"])
        .output()
        .unwrap();
    moto.put_parameter(
        "/tfreg/short-key",
        &String::from_utf8(short.stdout).unwrap(),
    );
    let secret_lines: Vec<&str> = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    for function in ["read", "blob"] {
        for (reference, expected) in [
            ("/tfreg/no-such-key", "ParameterNotFound"),
            ("/tfreg/not-a-key", "not a PEM RSA private key"),
            ("/tfreg/short-key", "has 1024 bits"),
        ] {
            let (failed, text) = start(function, &moto.url, reference);
            assert!(failed, "{function} {reference}: {text}");
            assert!(
                text.contains(&format!(
                    "the archive signing key (SSM parameter {reference})"
                )) && text.contains(expected),
                "{function} {reference}: {text}"
            );
            assert!(!text.contains("s3cr3t"), "{text}");
        }
        let (failed, text) = start(function, &moto.url, "/tfreg/archive-signing-key-a");
        assert!(!failed, "{function}: {text}");
        assert!(
            text.contains("archive URLs are CloudFront signed URLs")
                && text.contains("K2JCJMDEHXQW5F"),
            "{function}: {text}"
        );
        for line in &secret_lines {
            assert!(!text.contains(line), "{function} printed its key: {text}");
        }
    }
}
