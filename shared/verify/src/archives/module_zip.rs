//! A checked module archive as a zip (issue 40): OpenTofu reads an `oci://`
//! module source as one `archive/zip` layer, and a module is published as
//! a `.tar.gz`. The zip is made once per version (at publish, or by `tfreg
//! reindex` for a version published before), kept, and never made again,
//! so its digest never changes.
//!
//! It is also the same bytes whenever it is made from the same archive: its
//! entries in the archive's order, stored (no compressor whose output could
//! change with a crate's version), with no times (1980-01-01, zip's
//! earliest) and the archive's permission bits. A test pins the bytes.
//!
//! Only call this on an archive [`super::module::check_tar_gz`] accepted:
//! the checks (paths, entry kinds, sizes, extension headers) are its.

use std::io::{Read, Seek, Write};

use flate2::read::MultiGzDecoder;
use zip::write::SimpleFileOptions;

use super::ArchiveError;

/// Write the zip of the checked module archive `tar_gz` to `out`.
pub fn zip_of<W: Write + Seek>(tar_gz: impl Read, out: W) -> Result<W, ArchiveError> {
    let corrupt = |e: std::io::Error| ArchiveError::NotTarGz(e.to_string());
    let written = |name: &str| {
        let name = name.to_string();
        move |e: zip::result::ZipError| ArchiveError::Corrupt {
            name: name.clone(),
            reason: format!("cannot be written to a zip: {e}"),
        }
    };
    let mut archive = tar::Archive::new(MultiGzDecoder::new(tar_gz));
    let mut zip = zip::ZipWriter::new(out);
    for entry in archive.entries().map_err(corrupt)? {
        let mut entry = entry.map_err(corrupt)?;
        let path = entry.path().map_err(corrupt)?;
        // `./a/b` and `a/b` are one path (the check refused both at once).
        let name: Vec<String> = path
            .components()
            .filter_map(|c| match c {
                std::path::Component::Normal(part) => Some(part.to_string_lossy().into_owned()),
                _ => None,
            })
            .collect();
        let name = name.join("/");
        if name.is_empty() {
            continue;
        }
        let mode = entry.header().mode().unwrap_or(0o644) & 0o777;
        let options = SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Stored)
            .last_modified_time(zip::DateTime::default())
            .unix_permissions(mode)
            .large_file(entry.size() >= u64::from(u32::MAX));
        match entry.header().entry_type() {
            tar::EntryType::Directory => zip
                .add_directory(format!("{name}/"), options)
                .map_err(written(&name))?,
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                zip.start_file(name.as_str(), options)
                    .map_err(written(&name))?;
                std::io::copy(&mut entry, &mut zip).map_err(corrupt)?;
            }
            other => {
                return Err(ArchiveError::NotRegular {
                    name,
                    kind: format!("{other:?}"),
                });
            }
        }
    }
    zip.finish().map_err(written("the zip"))
}

/// The zip of the checked module archive `tar_gz` as a new file in `dir`
/// (its path), for the store to keep (`tfreg_store::MakeZip`).
pub fn zip_file(
    tar_gz: std::fs::File,
    dir: &std::path::Path,
) -> Result<std::path::PathBuf, String> {
    let io = |e: std::io::Error| ArchiveError::Corrupt {
        name: "the zip".into(),
        reason: e.to_string(),
    };
    let path = dir.join(format!("tfreg-module-{:016x}.zip", rand::random::<u64>()));
    let out = std::fs::File::create(&path).map_err(|e| io(e).to_string())?;
    let made = zip_of(
        std::io::BufReader::new(tar_gz),
        std::io::BufWriter::new(out),
    )
    .and_then(|w| w.into_inner().map_err(|e| io(e.into_error())));
    match made {
        Ok(_) => Ok(path),
        Err(e) => {
            let _ = std::fs::remove_file(&path);
            Err(e.to_string())
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Cursor;

    use super::*;
    use crate::archives::module::check_tar_gz;

    fn archive() -> Vec<u8> {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("main.tf"), "variable \"name\" {}\n").unwrap();
        std::fs::create_dir(dir.path().join("modules")).unwrap();
        std::fs::write(
            dir.path().join("modules/inner.tf"),
            "output \"x\" { value = 1 }\n",
        )
        .unwrap();
        crate::archives::module::pack_dir(dir.path(), Vec::new()).unwrap()
    }

    #[test]
    fn a_module_becomes_the_same_zip_every_time() {
        let tar_gz = archive();
        check_tar_gz(&tar_gz[..]).unwrap();
        let zip = zip_of(&tar_gz[..], Cursor::new(Vec::new()))
            .unwrap()
            .into_inner();
        let again = zip_of(&tar_gz[..], Cursor::new(Vec::new()))
            .unwrap()
            .into_inner();
        assert_eq!(zip, again);
        let mut read = zip::ZipArchive::new(Cursor::new(&zip)).unwrap();
        let names: Vec<String> = read.file_names().map(String::from).collect();
        assert!(names.contains(&"main.tf".to_string()), "{names:?}");
        assert!(names.contains(&"modules/inner.tf".to_string()), "{names:?}");
        let mut main = String::new();
        read.by_name("main.tf")
            .unwrap()
            .read_to_string(&mut main)
            .unwrap();
        assert_eq!(main, "variable \"name\" {}\n");
        // The bytes are pinned: a `?digest=` pin of an existing module must
        // keep meaning the same zip when another registry (an import, a
        // reindex) makes it again.
        assert_eq!(
            tfreg_model::hashing::sha256_hex(&zip),
            "dd58f6fa3f2b95996a535fa1857c3f6570e95776b4b5eef055d8b494e392f46e",
            "the module zip's bytes changed"
        );
    }

    #[test]
    fn garbage_is_refused() {
        assert!(zip_of(&b"not a tar.gz"[..], Cursor::new(Vec::new())).is_err());
    }
}
