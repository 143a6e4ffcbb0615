//! An export as one file: the export directory as a plain tar (its
//! archives are zips and tar.gz already; compressing again gains nothing).
//! Unpacked, only directories and regular files are taken, each inside
//! the target directory: anything else (a link, a device, a path outside)
//! refuses the archive.

use std::path::Path;

use crate::cli_error::Result;

/// Write `dir` as the tar `file`: to `file.partial` first, renamed into
/// place once whole.
pub fn pack(dir: &Path, file: &Path) -> Result<()> {
    let partial = file.with_extension("tar.partial");
    let out = std::fs::File::create(&partial)
        .map_err(|e| format!("cannot create {}: {e}", partial.display()))?;
    let mut tar = tar::Builder::new(std::io::BufWriter::new(out));
    tar.follow_symlinks(false);
    tar.append_dir_all(".", dir)
        .map_err(|e| format!("writing {}: {e}", partial.display()))?;
    let out = tar
        .into_inner()
        .map_err(|e| format!("writing {}: {e}", partial.display()))?;
    out.into_inner()
        .map_err(|e| format!("writing {}: {e}", partial.display()))?
        .sync_all()
        .map_err(|e| format!("writing {}: {e}", partial.display()))?;
    std::fs::rename(&partial, file).map_err(|e| {
        format!(
            "cannot rename {} to {}: {e}",
            partial.display(),
            file.display()
        )
    })?;
    Ok(())
}

/// Unpack the tar `file` into the empty directory `into`.
pub fn unpack(file: &Path, into: &Path) -> Result<()> {
    let input =
        std::fs::File::open(file).map_err(|e| format!("cannot open {}: {e}", file.display()))?;
    let mut tar = tar::Archive::new(std::io::BufReader::new(input));
    let bad = |why: String| format!("{}: {why}: not an export of tfreg's", file.display());
    for entry in tar.entries().map_err(|e| bad(e.to_string()))? {
        let mut entry = entry.map_err(|e| bad(e.to_string()))?;
        let kind = entry.header().entry_type();
        if !(kind.is_file() || kind.is_dir()) {
            let path = entry.path().map_err(|e| bad(e.to_string()))?;
            return Err(bad(format!(
                "{} is neither a file nor a directory",
                path.display()
            ))
            .into());
        }
        // `unpack_in` refuses a path that would leave `into`.
        if !entry.unpack_in(into).map_err(|e| bad(e.to_string()))? {
            let path = entry.path().map_err(|e| bad(e.to_string()))?;
            return Err(bad(format!("{} leads outside the export", path.display())).into());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_packed_unpacks_the_same() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("export");
        std::fs::create_dir_all(dir.join("files/archives/a")).unwrap();
        std::fs::write(dir.join("manifest.json"), b"{}").unwrap();
        std::fs::write(dir.join("files/archives/a/x.zip"), b"zip bytes").unwrap();
        let file = tmp.path().join("backup.tar");
        pack(&dir, &file).unwrap();
        assert!(!tmp.path().join("backup.tar.partial").exists());
        let out = tmp.path().join("out");
        std::fs::create_dir(&out).unwrap();
        unpack(&file, &out).unwrap();
        assert_eq!(std::fs::read(out.join("manifest.json")).unwrap(), b"{}");
        assert_eq!(
            std::fs::read(out.join("files/archives/a/x.zip")).unwrap(),
            b"zip bytes"
        );
    }

    #[test]
    fn a_link_or_a_path_outside_refuses_the_archive() {
        let tmp = tempfile::tempdir().unwrap();
        for (name, link, why) in [
            (
                "link.tar",
                true,
                "manifest.json is neither a file nor a directory",
            ),
            (
                "escape.tar",
                false,
                "../outside.tx leads outside the export",
            ),
        ] {
            let file = tmp.path().join(name);
            let mut tar = tar::Builder::new(std::fs::File::create(&file).unwrap());
            let mut header = tar::Header::new_gnu();
            if link {
                header.set_entry_type(tar::EntryType::Symlink);
                header.set_size(0);
                tar.append_link(&mut header, "manifest.json", "/etc/passwd")
                    .unwrap();
            } else {
                header.set_size(3);
                header.set_entry_type(tar::EntryType::Regular);
                // The builder refuses `..`: write the name into the header.
                header.as_old_mut().name[..13].copy_from_slice(b"../outside.tx");
                header.set_cksum();
                tar.append(&header, &b"abc"[..]).unwrap();
            }
            tar.finish().unwrap();
            drop(tar);
            let out = tmp.path().join(format!("out-{name}"));
            std::fs::create_dir(&out).unwrap();
            let e = unpack(&file, &out).unwrap_err();
            assert!(
                e.0.contains(why) && e.0.contains("not an export of tfreg's"),
                "{name}: {}",
                e.0
            );
            assert!(!tmp.path().join("outside.tx").exists());
        }
    }
}
