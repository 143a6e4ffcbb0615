//! The local data directory: `registry.db` (SQLite), `blobs/`, the URL-signing
//! secret and the development TLS certificates.

use std::io::Write;
use std::path::{Path, PathBuf};

use tfreg::storage::fs::FsBlobStore;
use tfreg::storage::sqlite::SqliteStore;

use crate::cli_error::Result;

/// Default data directory, relative to where tfreg runs.
pub const DEFAULT: &str = "tfreg-data";

pub struct DataDir {
    pub root: PathBuf,
}

impl DataDir {
    /// Open (creating) a data directory.
    pub fn open(root: &Path) -> Result<Self> {
        std::fs::create_dir_all(root)
            .map_err(|e| format!("cannot create data directory {}: {e}", root.display()))?;
        Ok(Self {
            root: root.to_path_buf(),
        })
    }

    pub fn item_store(&self) -> Result<SqliteStore> {
        Ok(SqliteStore::open(&self.root.join("registry.db"))?)
    }

    pub fn blob_store(&self) -> Result<FsBlobStore> {
        Ok(FsBlobStore::open(&self.root.join("blobs"))?)
    }

    /// The secret archive URLs are signed with: 32 random bytes, made once, mode 0600.
    pub fn url_signing_secret(&self) -> Result<Vec<u8>> {
        let path = self.root.join("url-signing.key");
        match std::fs::read(&path) {
            Ok(secret) if secret.len() >= 32 => Ok(secret),
            Ok(_) => Err(format!(
                "{} is too short; delete it to make a new one",
                path.display()
            )
            .into()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let secret: [u8; 32] = rand::random();
                write_private(&path, &secret)?;
                Ok(secret.to_vec())
            }
            Err(e) => Err(format!("reading {}: {e}", path.display()).into()),
        }
    }
}

/// Write a file readable only by its owner.
pub fn write_private(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    let mut f = opts
        .open(path)
        .map_err(|e| format!("writing {}: {e}", path.display()))?;
    f.write_all(bytes)
        .map_err(|e| format!("writing {}: {e}", path.display()))?;
    Ok(())
}
