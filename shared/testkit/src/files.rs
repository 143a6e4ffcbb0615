//! Files to publish: provider releases, zips, module archives.

use tfreg_model::protocol::{FileDecl, PublishRequest};

use crate::TestSigner;

/// The declaration of a file.
pub fn decl(name: &str, bytes: &[u8]) -> FileDecl {
    FileDecl {
        name: name.to_string(),
        size: bytes.len() as u64,
        sha256: tfreg_model::hashing::sha256_hex(bytes),
    }
}

/// A zip holding one executable `name` with `content` (files only, as
/// goreleaser makes them).
pub fn zip_with(entries: &[(&str, &[u8])]) -> Vec<u8> {
    use std::io::Write;
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let opts = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated)
        .unix_permissions(0o755);
    for (name, content) in entries {
        zip.start_file(*name, opts).expect("zip entry");
        zip.write_all(content).expect("zip write");
    }
    zip.finish().expect("zip").into_inner()
}

/// A provider package: `terraform-provider-<type>_v<version>` holding `marker`.
pub fn provider_zip(provider_type: &str, version: &str, marker: &str) -> Vec<u8> {
    let binary = format!("terraform-provider-{provider_type}_v{version}");
    zip_with(&[(&binary, format!("#!/bin/sh\n# {marker}\n").as_bytes())])
}

/// A module archive of `files` (path, content), packed like `tfreg publish module`.
pub fn module_archive(files: &[(&str, &str)]) -> Vec<u8> {
    let dir = tempfile::tempdir().expect("temp dir");
    for (path, content) in files {
        let p = dir.path().join(path);
        std::fs::create_dir_all(p.parent().expect("a parent")).expect("mkdir");
        std::fs::write(p, content).expect("write");
    }
    tfreg_verify::archives::module::pack_dir(dir.path(), Vec::new()).expect("pack")
}

/// The goreleaser files of a provider release, signed by `signer`: a zip per
/// platform, a manifest, SHA256SUMS and its signature.
pub fn provider_release(
    provider_type: &str,
    version: &str,
    platforms: &[&str],
    signer: &TestSigner,
) -> Vec<(String, Vec<u8>)> {
    let base = format!("terraform-provider-{provider_type}_{version}");
    let mut files: Vec<(String, Vec<u8>)> = platforms
        .iter()
        .map(|p| {
            (
                format!("{base}_{p}.zip"),
                provider_zip(provider_type, version, p),
            )
        })
        .collect();
    files.push((
        format!("{base}_manifest.json"),
        br#"{"version":1,"metadata":{"protocol_versions":["5.0"]}}"#.to_vec(),
    ));
    let sums: String = files
        .iter()
        .map(|(n, b)| format!("{}  {n}\n", tfreg_model::hashing::sha256_hex(b)))
        .collect();
    let signature = signer.sign(sums.as_bytes());
    files.push((format!("{base}_SHA256SUMS"), sums.into_bytes()));
    files.push((format!("{base}_SHA256SUMS.sig"), signature));
    files
}

/// The publish request of a provider release signed by `signer`.
pub fn provider_request(signer: &TestSigner) -> PublishRequest {
    PublishRequest {
        signing_key: Some(signer.public_armor.to_string()),
        ..Default::default()
    }
}
