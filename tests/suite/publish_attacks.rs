//! The publish path stores exactly what it verified. Each test makes one of
//! the attacks a probe of a release build got through, and shows it refused,
//! on both backends (in-process; S3 uploads go to s3s-fs over HTTP with the
//! presigned URLs, as a real client's would).

use bytes::Bytes;
use http::{Method, StatusCode};
use tfreg_model::protocol::{BeginStatus, PublishBegin, PublishRequest};
use tfreg_model::router::{PublishStep, PublishTarget};
use tfreg_model::token::Scope;
use tfreg_testkit::{
    TestRegistry, TestResponse, TestSigner, decl, module_archive, provider_release,
    provider_request, provider_zip, zip_with,
};

use crate::backend_contract::{contract, module, publish_module};

pub fn provider(address: &str, version: &str) -> PublishTarget {
    PublishTarget::try_from(format!("providers/{address}/{version}")).unwrap()
}

/// Every object under `archives/`, downloaded.
async fn archive_contents(r: &TestRegistry) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for key in r.registry.blobs.list("archives/").await.unwrap() {
        let url = r.registry.read_url(&key).await.unwrap();
        let got = r.download(&url).await;
        assert_eq!(got.status, StatusCode::OK, "{}: {key}", r.name);
        out.push(got.body.to_vec());
    }
    out
}

/// How a second upload to a slot (or one after its publish ended) is
/// refused: 409 by the registry; 412 by S3, whose presigned PUT carries
/// `If-None-Match: *`.
fn slot_taken(r: &TestRegistry) -> StatusCode {
    match r.name {
        "embedded" => StatusCode::CONFLICT,
        _ => StatusCode::PRECONDITION_FAILED,
    }
}

/// How an upload larger than declared is refused: 413 by the registry; 403
/// by S3, whose presigned PUT signs the declared Content-Length.
fn oversized(r: &TestRegistry) -> StatusCode {
    match r.name {
        "embedded" => StatusCode::PAYLOAD_TOO_LARGE,
        _ => StatusCode::FORBIDDEN,
    }
}

/// A publish answered 400 naming `needle`, with no version visible at
/// `versions` and no archive kept.
async fn refused_leaving_nothing(
    r: &TestRegistry,
    resp: &TestResponse,
    needle: &str,
    versions: &str,
) {
    resp.expect(StatusCode::BAD_REQUEST, r.name);
    assert!(resp.error().contains(needle), "{}", resp.error());
    assert_eq!(r.get(versions).await.status, StatusCode::NOT_FOUND);
    assert!(
        archive_contents(r).await.is_empty(),
        "{}: nothing kept",
        r.name
    );
}

/// begin, returning the parsed answer.
pub async fn begin(
    r: &TestRegistry,
    target: &PublishTarget,
    token: &str,
    request: &PublishRequest,
) -> PublishBegin {
    let resp = r
        .publish_step(target, PublishStep::Begin, token, request)
        .await;
    assert_eq!(
        resp.status,
        StatusCode::OK,
        "{}: begin: {}",
        r.name,
        resp.text()
    );
    let answer: PublishBegin = serde_json::from_slice(&resp.body).unwrap();
    assert_eq!(answer.status, BeginStatus::Upload);
    answer
}

pub async fn put(
    r: &TestRegistry,
    answer: &PublishBegin,
    name: &str,
    bytes: &[u8],
) -> TestResponse {
    let upload = answer.uploads.iter().find(|u| u.name == name).unwrap();
    r.send_url(
        Method::PUT,
        &upload.url,
        &upload.headers,
        Bytes::copy_from_slice(bytes),
    )
    .await
}

/// A token limited to namespace `nsa` took an upload of its own publish,
/// re-sent the upload URL with other bytes during `complete`, and replaced the
/// archive `nsb/victim 1.0.0` serves. Now: upload URLs are single-use, complete
/// keeps exactly the bytes it hashed under a key of its own, and the victim's
/// bytes never change.
async fn cross_namespace_overwrite_is_refused(r: TestRegistry) {
    let signer = TestSigner::rsa();
    let victim_token = r.token(Scope::Publish, Some("nsb")).await;
    let attacker = r.token(Scope::Publish, Some("nsa")).await;
    let files = provider_release("victim", "1.0.0", &["linux_amd64"], &signer);
    let resp = r
        .publish(
            &provider("nsb/victim", "1.0.0"),
            &victim_token,
            &files,
            provider_request(&signer),
        )
        .await;
    resp.expect(StatusCode::CREATED, r.name);
    let zip_name = "terraform-provider-victim_1.0.0_linux_amd64.zip";
    let genuine = files.iter().find(|(n, _)| n == zip_name).unwrap().1.clone();
    // Other bytes of the declared size: only the slot's being taken refuses
    // them (not their length, nor, in S3, the signed Content-Length).
    let mut evil = provider_zip("victim", "1.0.0", "EVIL");
    evil.resize(genuine.len(), b' ');
    assert_ne!(evil, genuine);

    // The attacker publishes the same files (same names and digests) into nsa…
    let target = provider("nsa/victim", "1.0.0");
    let mut request = provider_request(&signer);
    request.files = files.iter().map(|(n, b)| decl(n, b)).collect();
    let answer = begin(&r, &target, &attacker, &request).await;
    for (name, bytes) in &files {
        let resp = put(&r, &answer, name, bytes).await;
        assert_eq!(
            resp.status,
            StatusCode::OK,
            "{}: {name}: {}",
            r.name,
            resp.text()
        );
    }
    // …re-sends the zip's upload URL with other bytes before complete…
    let again = put(&r, &answer, zip_name, &evil).await;
    again.expect(
        slot_taken(&r),
        &format!("{}: a second upload to a slot", r.name),
    );
    // …and during complete, many times over.
    request.upload_id = answer.upload_id.clone();
    let complete = r.publish_step(&target, PublishStep::Complete, &attacker, &request);
    let resend = async {
        let mut statuses = Vec::new();
        for _ in 0..20 {
            statuses.push(put(&r, &answer, zip_name, &evil).await.status);
            tokio::task::yield_now().await;
        }
        statuses
    };
    let (completed, statuses) = tokio::join!(complete, resend);
    assert!(
        statuses.iter().all(|s| *s == slot_taken(&r)),
        "{}: every re-sent upload is refused: {statuses:?}",
        r.name
    );
    completed.expect(StatusCode::CREATED, r.name);
    // And after complete.
    let late = put(&r, &answer, zip_name, &evil).await;
    late.expect(
        slot_taken(&r),
        &format!("{}: an upload after complete", r.name),
    );

    // Both releases serve the genuine bytes; no stored object holds the evil ones.
    for ns in ["nsb", "nsa"] {
        let resp = r
            .get(&format!(
                "/v1/providers/{ns}/victim/1.0.0/download/linux/amd64"
            ))
            .await;
        assert_eq!(resp.status, StatusCode::OK);
        let url = resp.json()["download_url"].as_str().unwrap().to_string();
        let got = r.download(&url).await;
        assert_eq!(got.body.as_ref(), genuine.as_slice(), "{}: {ns}", r.name);
    }
    let stored = archive_contents(&r).await;
    assert!(!stored.is_empty());
    assert!(
        stored.iter().all(|b| *b != evil),
        "{}: the evil bytes were stored",
        r.name
    );
}

/// Upload slots take exactly the declared bytes, once, only while their
/// publish is open; a publish whose upload is wrong is refused at complete.
async fn upload_slots_take_the_declared_bytes_once(r: TestRegistry) {
    let token = r.token(Scope::Publish, None).await;
    let archive = module_archive(&[("main.tf", "output \"x\" { value = 1 }\n")]);
    let target = module("acme/slots/aws", "1.0.0");
    let mut request = PublishRequest {
        files: vec![decl("m.tar.gz", &archive)],
        ..Default::default()
    };
    let answer = begin(&r, &target, &token, &request).await;
    // 100 times the declared size: refused, nothing kept (S3: the signed
    // Content-Length does not match).
    let big = vec![7u8; archive.len() * 100];
    let resp = put(&r, &answer, "m.tar.gz", &big).await;
    resp.expect(oversized(&r), &format!("{}: 100 times the size", r.name));
    let resp = put(&r, &answer, "m.tar.gz", &archive).await;
    resp.expect(StatusCode::OK, r.name);
    let twice = put(&r, &answer, "m.tar.gz", &archive).await;
    twice.expect(
        slot_taken(&r),
        &format!("{}: the same upload twice", r.name),
    );
    if r.name == "embedded" {
        assert!(twice.error().contains("single-use"), "{}", twice.error());
    }
    request.upload_id = answer.upload_id.clone();
    let done = r
        .publish_step(&target, PublishStep::Complete, &token, &request)
        .await;
    done.expect(StatusCode::CREATED, r.name);
    // After complete the slot refuses uploads, and the publish cannot be completed again.
    let late = put(&r, &answer, "m.tar.gz", &archive).await;
    late.expect(
        slot_taken(&r),
        &format!("{}: an upload after complete", r.name),
    );
    let again = r
        .publish_step(&target, PublishStep::Complete, &token, &request)
        .await;
    assert_eq!(again.status, StatusCode::BAD_REQUEST);
    assert!(
        again.error().contains("already completed"),
        "{}",
        again.error()
    );

    // The declared size but other bytes: the upload is refused (S3: BadDigest)
    // and the publish with it.
    let target = module("acme/slots/aws", "2.0.0");
    let mut request = PublishRequest {
        files: vec![decl("m.tar.gz", &archive)],
        ..Default::default()
    };
    let answer = begin(&r, &target, &token, &request).await;
    let mut other = archive.clone();
    other[10] ^= 1;
    let resp = put(&r, &answer, "m.tar.gz", &other).await;
    resp.expect(StatusCode::BAD_REQUEST, r.name);
    request.upload_id = answer.upload_id.clone();
    let done = r
        .publish_step(&target, PublishStep::Complete, &token, &request)
        .await;
    // (s3s-fs keeps an object it answered BadDigest for, real S3 does not:
    // complete re-hashes what it claims either way.)
    done.expect(StatusCode::BAD_REQUEST, r.name);
    // Locally the refused upload left nothing; on s3s-fs it left the bad bytes.
    let why = match r.name {
        "embedded" => "was not uploaded",
        _ => "sha256",
    };
    assert!(done.error().contains(why), "{}", done.error());
    let versions = r.get("/v1/modules/acme/slots/aws/versions").await.json();
    assert_eq!(
        versions["modules"][0]["versions"].as_array().unwrap().len(),
        1
    );
}

/// `begin` signed upload URLs for any file name.
async fn file_names_are_checked_at_begin(r: TestRegistry) {
    let token = r.token(Scope::Publish, None).await;
    let archive = module_archive(&[("main.tf", "")]);
    let long = format!("{}.tar.gz", "x".repeat(10_000));
    for name in [
        "../../x.tar.gz",
        "a\nb.tar.gz",
        long.as_str(),
        "a/b.tar.gz",
        ".tar.gz",
    ] {
        let request = PublishRequest {
            files: vec![decl(name, &archive)],
            ..Default::default()
        };
        let resp = r
            .publish_step(
                &module("acme/names/aws", "1.0.0"),
                PublishStep::Begin,
                &token,
                &request,
            )
            .await;
        assert_eq!(resp.status, StatusCode::BAD_REQUEST, "{}: {name:?}", r.name);
        let msg = resp.error();
        assert!(
            msg.contains("invalid file name") && msg.len() < 300,
            "{msg}"
        );
    }
    assert!(
        r.registry.blobs.list("uploads/").await.unwrap().is_empty(),
        "{}: nothing staged",
        r.name
    );
}

/// A gzip member after the first one carried a symlink and `../escape.tf`.
async fn a_second_gzip_member_is_read_and_refused(r: TestRegistry) {
    let token = r.token(Scope::Publish, None).await;
    let evil = two_member_gzip();
    let resp = publish_module(&r, &token, "acme/gz/aws", "1.0.0", &evil).await;
    refused_leaving_nothing(&r, &resp, "m.tar.gz", "/v1/modules/acme/gz/aws/versions").await;
}

/// Provider zips were not inspected: paths out of the archive, symlinks, a
/// symlinked provider binary, bombs.
async fn dangerous_provider_zips_are_refused(r: TestRegistry) {
    let signer = TestSigner::rsa();
    let token = r.token(Scope::Publish, None).await;
    let binary = "terraform-provider-zips_v1.0.0";
    let bin: &[u8] = b"#!/bin/sh\n";
    let zeros = vec![0u8; 64 << 20];
    let cases: Vec<(&str, Vec<u8>)> = vec![
        (
            "relative escape",
            zip_with(&[(binary, bin), ("../../evil.sh", bin)]),
        ),
        (
            "absolute path",
            zip_with(&[(binary, bin), ("/etc/cron.d/evil", bin)]),
        ),
        (
            "symlink",
            symlink_zip(&[(binary, None), ("evil", Some("/etc/passwd"))]),
        ),
        (
            "symlinked binary",
            symlink_zip(&[(binary, Some("/bin/sh"))]),
        ),
        ("no binary", zip_with(&[("README.md", bin)])),
        (
            "compression bomb",
            zip_with(&[(binary, bin), ("zeros", &zeros)]),
        ),
        ("not a zip", b"PK\x03\x04 not really".to_vec()),
    ];
    for (i, (what, zip)) in cases.into_iter().enumerate() {
        let version = format!("1.0.{i}");
        let mut files = provider_release("zips", &version, &["linux_amd64"], &signer);
        let name = format!("terraform-provider-zips_{version}_linux_amd64.zip");
        // Replace the zip and re-sign SHA256SUMS over it, so only the zip's
        // contents are wrong.
        files.retain(|(n, _)| !n.contains("SHA256SUMS"));
        for f in files.iter_mut().filter(|(n, _)| *n == name) {
            f.1 = zip.clone();
        }
        let sums: String = files
            .iter()
            .map(|(n, b)| format!("{}  {n}\n", tfreg_model::hashing::sha256_hex(b)))
            .collect();
        let base = format!("terraform-provider-zips_{version}");
        files.push((
            format!("{base}_SHA256SUMS.sig"),
            signer.sign(sums.as_bytes()),
        ));
        files.push((format!("{base}_SHA256SUMS"), sums.into_bytes()));
        let resp = r
            .publish(
                &provider("acme/zips", &version),
                &token,
                &files,
                provider_request(&signer),
            )
            .await;
        eprintln!("{what}: {}", resp.text());
        refused_leaving_nothing(&r, &resp, &name, "/v1/providers/acme/zips/versions").await;
    }
}

/// A complete for another publish's upload id, or with other files, is refused.
async fn an_upload_id_finishes_only_its_own_publish(r: TestRegistry) {
    let token = r.token(Scope::Publish, None).await;
    let archive = module_archive(&[("main.tf", "")]);
    let mut request = PublishRequest {
        files: vec![decl("m.tar.gz", &archive)],
        ..Default::default()
    };
    let answer = begin(&r, &module("acme/one/aws", "1.0.0"), &token, &request).await;
    assert_eq!(
        put(&r, &answer, "m.tar.gz", &archive).await.status,
        StatusCode::OK
    );
    request.upload_id = answer.upload_id.clone();
    let other = r
        .publish_step(
            &module("acme/other/aws", "1.0.0"),
            PublishStep::Complete,
            &token,
            &request,
        )
        .await;
    assert_eq!(other.status, StatusCode::BAD_REQUEST);
    assert!(
        other.error().contains("another publish"),
        "{}",
        other.error()
    );
    assert_eq!(
        r.get("/v1/modules/acme/other/aws/versions").await.status,
        StatusCode::NOT_FOUND
    );
    // The refused complete spoiled nothing: the publish it named still completes.
    let own = r
        .publish_step(
            &module("acme/one/aws", "1.0.0"),
            PublishStep::Complete,
            &token,
            &request,
        )
        .await;
    own.expect(StatusCode::CREATED, r.name);
    // Beside the archive, the zip the OCI view serves, made of it (a
    // module's archive is a .tar.gz: no zip's `PK` magic).
    let tars: Vec<Vec<u8>> = archive_contents(&r)
        .await
        .into_iter()
        .filter(|b| !b.starts_with(b"PK"))
        .collect();
    assert_eq!(tars, [archive], "{}", r.name);
}

/// Two gzip members: the first a tar of `main.tf` without its end marker, the
/// second a tar holding `evil -> /etc/passwd` and `../escape.tf`.
fn two_member_gzip() -> Vec<u8> {
    fn entry(path: &str, ty: tar::EntryType, link: Option<&str>, data: &[u8]) -> Vec<u8> {
        let mut h = tar::Header::new_gnu();
        h.as_old_mut().name[..path.len()].copy_from_slice(path.as_bytes());
        if let Some(link) = link {
            h.as_old_mut().linkname[..link.len()].copy_from_slice(link.as_bytes());
        }
        h.set_entry_type(ty);
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        let mut out = h.as_bytes().to_vec();
        out.extend_from_slice(data);
        out.resize(out.len().div_ceil(512) * 512, 0);
        out
    }
    fn gzip(bytes: &[u8]) -> Vec<u8> {
        use std::io::Write;
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(bytes).unwrap();
        gz.finish().unwrap()
    }
    let mut out = gzip(&entry("main.tf", tar::EntryType::Regular, None, b"# ok\n"));
    let mut second = entry("evil", tar::EntryType::Symlink, Some("/etc/passwd"), b"");
    second.extend(entry(
        "../escape.tf",
        tar::EntryType::Regular,
        None,
        b"# out\n",
    ));
    second.extend([0u8; 1024]);
    out.extend(gzip(&second));
    out
}

/// A zip whose entries are files (`None`) or symlinks to a target.
fn symlink_zip(entries: &[(&str, Option<&str>)]) -> Vec<u8> {
    use std::io::Write;
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let opts = zip::write::SimpleFileOptions::default().unix_permissions(0o755);
    for (name, target) in entries {
        match target {
            None => {
                zip.start_file(*name, opts).unwrap();
                zip.write_all(b"#!/bin/sh\n").unwrap();
            }
            Some(target) => zip.add_symlink(*name, *target, opts).unwrap(),
        }
    }
    zip.finish().unwrap().into_inner()
}

contract!(
    cross_namespace_overwrite_is_refused,
    upload_slots_take_the_declared_bytes_once,
    file_names_are_checked_at_begin,
    a_second_gzip_member_is_read_and_refused,
    dangerous_provider_zips_are_refused,
    an_upload_id_finishes_only_its_own_publish,
);
