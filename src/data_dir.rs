//! The local data directory: `registry.db` (SQLite; also holds the URL-signing
//! secret and the token hashes), `blobs/` and the development TLS certificates.
//!
//! Private to its owner: the directory is 0700 and everything tfreg creates
//! in it 0600 (0700 for directories), also in a directory made by an older
//! version (its modes are tightened on open).

use std::io::Write;
use std::path::{Path, PathBuf};

use tfreg_store::fs::FsBlobStore;
use tfreg_store::sqlite::SqliteStore;

use crate::cli_error::Result;

/// Default data directory, relative to where tfreg runs.
pub const DEFAULT: &str = "tfreg-data";

/// Where `tfreg serve` records the hostname it answers as.
const HOSTNAME_FILE: &str = "hostname";

#[derive(Clone)]
pub struct DataDir {
    pub root: PathBuf,
}

impl DataDir {
    /// Open (creating) a data directory. From here on, what this process
    /// creates is readable by its owner only (umask 077).
    pub fn open(root: &Path) -> Result<Self> {
        private_umask();
        std::fs::create_dir_all(root)
            .map_err(|e| format!("cannot create data directory {}: {e}", root.display()))?;
        set_mode(root, 0o700)?;
        // Absolute from here on: what `serve` prints must work when pasted
        // in any directory.
        let root = std::fs::canonicalize(root)
            .map_err(|e| format!("cannot resolve data directory {}: {e}", root.display()))?;
        Ok(Self { root })
    }

    /// Record the hostname `tfreg serve` answers as, so that the commands on
    /// this directory find its packages' downloads without `--hostname`.
    pub fn remember_hostname(&self, hostname: &str) -> Result<()> {
        let path = self.root.join(HOSTNAME_FILE);
        std::fs::write(&path, format!("{hostname}\n"))
            .map_err(|e| format!("cannot write {}: {e}", path.display()).into())
    }

    /// The hostname the last `tfreg serve` on `root` answered as, if any.
    pub fn served_hostname(root: &Path) -> Option<String> {
        let text = std::fs::read_to_string(root.join(HOSTNAME_FILE)).ok()?;
        Some(text.trim().to_string()).filter(|h| !h.is_empty())
    }

    pub fn db_path(&self) -> PathBuf {
        self.root.join("registry.db")
    }

    pub fn item_store(&self) -> Result<SqliteStore> {
        let db = self.db_path();
        // SQLite gives its journal the database file's mode: set it first.
        // Not fatal: an immutable file (chattr +i) refuses even that, and
        // still serves reads.
        if db.exists()
            && let Err(e) = set_mode(&db, 0o600)
        {
            tracing::warn!("{}", e.0);
        }
        SqliteStore::open(&db)
            .map_err(|e| format!("cannot open the database {}: {e}", db.display()).into())
    }

    /// Claim the directory for one `tfreg serve`: a second one would sweep
    /// the first one's temporary files. Held until the guard drops (or the
    /// process dies: the kernel releases the lock).
    pub fn lock_for_serving(&self) -> Result<ServeLock> {
        let path = self.root.join("serve.lock");
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                let holder = std::fs::read_to_string(&path).unwrap_or_default();
                return Err(format!(
                    "another tfreg serve (pid {}) is using the data directory {}",
                    holder.trim(),
                    self.root.display()
                )
                .into());
            }
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(format!("cannot lock {}: {e}", path.display()).into());
            }
        }
        file.set_len(0)
            .and_then(|()| write!(file, "{}", std::process::id()))
            .map_err(|e| format!("writing {}: {e}", path.display()))?;
        Ok(ServeLock { _file: file })
    }

    pub fn blob_store(&self) -> Result<FsBlobStore> {
        Ok(FsBlobStore::open(&self.root.join("blobs"))?)
    }
}

/// The data directory's lock, held by the `tfreg serve` that uses it.
pub struct ServeLock {
    _file: std::fs::File,
}

/// New files and directories of this process: owner only.
fn private_umask() {
    #[cfg(unix)]
    // SAFETY: umask only sets the process's file creation mask; it cannot fail.
    unsafe {
        libc::umask(0o077);
    }
}

fn set_mode(path: &Path, mode: u32) -> Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let current =
            std::fs::metadata(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        if current.permissions().mode() & 0o777 == mode {
            return Ok(());
        }
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
            .map_err(|e| format!("cannot make {} private: {e}", path.display()))?;
    }
    #[cfg(not(unix))]
    let _ = (path, mode);
    Ok(())
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
