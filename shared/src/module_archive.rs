//! Module archives: packing a directory into a reproducible `.tar.gz`, and
//! checking an uploaded one before it is published.

use std::io::{Read, Write};
use std::path::{Component, Path};

use flate2::Compression;
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;

use crate::error::Error;

/// Directories never packed into a module archive.
pub const IGNORED_DIRS: [&str; 2] = [".git", ".terraform"];

/// Largest total size of the files inside a module archive.
pub const MAX_UNPACKED: u64 = 512 * 1024 * 1024;

/// Pack `dir` into a gzip'd tar. Entries are sorted and carry no owner or time,
/// so packing the same tree twice gives the same bytes (a re-publish is a no-op).
/// `.git` and `.terraform` directories are skipped; symlinks are refused.
pub fn pack_dir<W: Write>(dir: &Path, out: W) -> std::io::Result<W> {
    let gz = GzEncoder::new(out, Compression::default());
    let mut tar = tar::Builder::new(gz);
    tar.mode(tar::HeaderMode::Deterministic);
    tar.follow_symlinks(false);
    add_dir(&mut tar, dir, Path::new(""))?;
    tar.into_inner()?.finish()
}

fn add_dir<W: Write>(tar: &mut tar::Builder<W>, root: &Path, rel: &Path) -> std::io::Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(root.join(rel))?.collect::<Result<_, _>>()?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let name = entry.file_name();
        let rel_path = rel.join(&name);
        let ty = entry.file_type()?;
        if ty.is_dir() {
            if IGNORED_DIRS.iter().any(|d| name == *d) {
                continue;
            }
            tar.append_dir(&rel_path, entry.path())?;
            add_dir(tar, root, &rel_path)?;
        } else if ty.is_file() {
            tar.append_path_with_name(entry.path(), &rel_path)?;
        } else {
            return Err(std::io::Error::other(format!(
                "{} is a symlink or special file; module archives hold only regular files",
                rel_path.display()
            )));
        }
    }
    Ok(())
}

/// What a valid module archive holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArchiveSummary {
    pub files: usize,
    pub unpacked_bytes: u64,
}

/// Check an uploaded module archive: a gzip'd tar of regular files and
/// directories only, with relative paths that stay inside the archive, at
/// least one `.tf` file, and at most [`MAX_UNPACKED`] bytes unpacked.
pub fn check_tar_gz<R: Read>(reader: R) -> Result<ArchiveSummary, Error> {
    let bad = |why: String| Error::bad(format!("module archive refused: {why}"));
    let mut archive = tar::Archive::new(GzDecoder::new(reader));
    let mut summary = ArchiveSummary {
        files: 0,
        unpacked_bytes: 0,
    };
    let mut has_tf = false;
    let entries = archive
        .entries()
        .map_err(|e| bad(format!("not a .tar.gz: {e}")))?;
    for entry in entries {
        let entry = entry.map_err(|e| bad(format!("not a .tar.gz: {e}")))?;
        let path = entry
            .path()
            .map_err(|e| bad(format!("bad entry name: {e}")))?
            .into_owned();
        if path
            .components()
            .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
        {
            return Err(bad(format!("entry {} escapes the archive", path.display())));
        }
        match entry.header().entry_type() {
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                summary.files += 1;
                summary.unpacked_bytes += entry.size();
                if summary.unpacked_bytes > MAX_UNPACKED {
                    return Err(bad(format!("more than {MAX_UNPACKED} bytes unpacked")));
                }
                has_tf |= path.extension().is_some_and(|e| e == "tf" || e == "json");
            }
            tar::EntryType::Directory => {}
            tar::EntryType::XGlobalHeader
            | tar::EntryType::XHeader
            | tar::EntryType::GNULongName => {}
            other => {
                return Err(bad(format!(
                    "entry {} is a {other:?}; only regular files and directories are allowed",
                    path.display()
                )));
            }
        }
    }
    if !has_tf {
        return Err(bad("it holds no .tf file".into()));
    }
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("main.tf"), "variable \"x\" {}\n").unwrap();
        std::fs::create_dir_all(dir.path().join("modules/sub")).unwrap();
        std::fs::write(
            dir.path().join("modules/sub/main.tf"),
            "output \"y\" { value = 1 }\n",
        )
        .unwrap();
        std::fs::create_dir_all(dir.path().join(".git")).unwrap();
        std::fs::write(dir.path().join(".git/config"), "secret").unwrap();
        std::fs::create_dir_all(dir.path().join(".terraform/providers")).unwrap();
        std::fs::write(dir.path().join(".terraform/providers/x"), "big").unwrap();
        dir
    }

    fn names(tgz: &[u8]) -> Vec<String> {
        let mut a = tar::Archive::new(GzDecoder::new(tgz));
        a.entries()
            .unwrap()
            .map(|e| e.unwrap().path().unwrap().display().to_string())
            .collect()
    }

    #[test]
    fn packing_skips_git_and_terraform_and_is_reproducible() {
        let dir = tree();
        let a = pack_dir(dir.path(), Vec::new()).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(1100));
        std::fs::write(dir.path().join("main.tf"), "variable \"x\" {}\n").unwrap(); // new mtime, same bytes
        let b = pack_dir(dir.path(), Vec::new()).unwrap();
        assert_eq!(a, b);
        let n = names(&a);
        assert!(n.contains(&"main.tf".to_string()));
        assert!(n.contains(&"modules/sub/main.tf".to_string()));
        assert!(
            n.iter()
                .all(|p| !p.starts_with(".git") && !p.starts_with(".terraform")),
            "{n:?}"
        );
        assert_eq!(check_tar_gz(&a[..]).unwrap().files, 2);
    }

    fn raw_tar(path: &str, ty: tar::EntryType, data: &[u8]) -> Vec<u8> {
        let mut b = tar::Builder::new(GzEncoder::new(Vec::new(), Compression::fast()));
        let mut h = tar::Header::new_gnu();
        // Write the name bytes directly so "../" names reach the archive.
        h.as_old_mut().name[..path.len()].copy_from_slice(path.as_bytes());
        h.set_entry_type(ty);
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        b.append(&h, data).unwrap();
        b.into_inner().unwrap().finish().unwrap()
    }

    #[test]
    fn dangerous_or_empty_archives_are_refused() {
        assert!(check_tar_gz(&raw_tar("main.tf", tar::EntryType::Regular, b"x")[..]).is_ok());
        let cases = [
            (
                raw_tar("../evil.tf", tar::EntryType::Regular, b"x"),
                "escapes",
            ),
            (
                raw_tar("/etc/evil.tf", tar::EntryType::Regular, b"x"),
                "escapes",
            ),
            (
                raw_tar("link.tf", tar::EntryType::Symlink, b""),
                "only regular files",
            ),
            (
                raw_tar("README.md", tar::EntryType::Regular, b"x"),
                "no .tf file",
            ),
            (b"not gzip at all".to_vec(), "not a .tar.gz"),
            (Vec::new(), "not a .tar.gz"),
        ];
        for (bytes, want) in cases {
            let err = check_tar_gz(&bytes[..]).unwrap_err().to_string();
            assert!(err.contains(want), "{err} should contain {want}");
        }
    }
}
