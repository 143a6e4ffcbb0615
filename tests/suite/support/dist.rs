//! Files to publish, made as the real tools make them: goreleaser-style
//! provider releases with the real null provider binary, module trees.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::gpg::Gpg;
use super::tools::Tools;

/// A zip holding the real null provider binary (files only, executable).
pub fn provider_zip(path: &Path, binary: &Path, binary_name: &str) {
    use zip::write::SimpleFileOptions;
    let mut zip = zip::ZipWriter::new(std::fs::File::create(path).unwrap());
    let opts = SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated)
        .unix_permissions(0o755);
    zip.start_file(binary_name, opts).unwrap();
    zip.write_all(&std::fs::read(binary).unwrap()).unwrap();
    zip.finish().unwrap();
}

/// Write a goreleaser-style dist directory for `terraform-provider-TYPE` at
/// `version` for `platforms`, signed by `gpg`; returns the zips' paths.
pub fn provider_dist(
    dist: &Path,
    ty: &str,
    version: &str,
    platforms: &[&str],
    gpg: &Gpg,
) -> Vec<PathBuf> {
    let binary = Tools::get().path("TFREG_NULL_PROVIDER");
    provider_dist_of(&binary, dist, ty, version, platforms, gpg)
}

/// [`provider_dist`] with zips holding `binary` instead of the null provider.
pub fn provider_dist_of(
    binary: &Path,
    dist: &Path,
    ty: &str,
    version: &str,
    platforms: &[&str],
    gpg: &Gpg,
) -> Vec<PathBuf> {
    std::fs::create_dir_all(dist).unwrap();
    let mut sums = String::new();
    let mut zips = Vec::new();
    for platform in platforms {
        let name = format!("terraform-provider-{ty}_{version}_{platform}.zip");
        let path = dist.join(&name);
        provider_zip(
            &path,
            binary,
            &format!("terraform-provider-{ty}_v{version}_x4"),
        );
        sums += &format!(
            "{}  {name}\n",
            tfreg_model::hashing::sha256_hex(&std::fs::read(&path).unwrap())
        );
        zips.push(path);
    }
    let manifest = format!("terraform-provider-{ty}_{version}_manifest.json");
    std::fs::write(
        dist.join(&manifest),
        r#"{"version":1,"metadata":{"protocol_versions":["5.0"]}}"#,
    )
    .unwrap();
    sums += &format!(
        "{}  {manifest}\n",
        tfreg_model::hashing::sha256_hex(&std::fs::read(dist.join(&manifest)).unwrap())
    );
    let sums_path = dist.join(format!("terraform-provider-{ty}_{version}_SHA256SUMS"));
    std::fs::write(&sums_path, sums).unwrap();
    gpg.sign(
        &sums_path,
        &sums_path.with_file_name(format!("terraform-provider-{ty}_{version}_SHA256SUMS.sig")),
    );
    gpg.export(&dist.join("key.asc"));
    zips
}

/// Write `files` (relative path → content) under `dir`.
pub fn write_tree(dir: &Path, files: &[(&str, &str)]) {
    for (rel, content) in files {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, content).unwrap();
    }
}
