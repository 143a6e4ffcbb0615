//! The local data directory: `registry.db` (SQLite; also holds the URL-signing
//! secret), `blobs/` and the development TLS certificates.

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
