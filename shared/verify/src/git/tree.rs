//! A commit's tree as files: the commit must be the one wanted (its id is
//! the hash of its bytes, so the tree, and every blob under it, is bound to
//! it), then its tree is walked, optionally only under a subdirectory.
//! Symlinks and submodules are reported rather than followed: publish
//! refuses symlinks, and go-getter would initialise submodules, so the
//! caller passes such a source on rather than store something else.

use crate::archives::{MAX_MODULE_ENTRIES, MAX_MODULE_UNPACKED};

use super::ObjectId;
use super::pack::{Kind, Pack};

/// One file of a tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeEntry {
    /// `/`-separated, relative to the directory walked.
    pub path: String,
    /// Mode 100755.
    pub executable: bool,
    pub bytes: Vec<u8>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WalkError {
    #[error("the {what} {id} is not in the pack")]
    Missing { what: &'static str, id: String },
    #[error("{id} is a {found}, not a {expected}")]
    WrongKind {
        id: String,
        expected: &'static str,
        found: &'static str,
    },
    #[error("commit {0} names no tree")]
    BadCommit(String),
    #[error("tree {id}: {reason}")]
    BadTree { id: String, reason: String },
    #[error("{path} has mode {mode}")]
    BadMode { path: String, mode: String },
    /// A symlink (mode 120000) in the tree walked.
    #[error("{0} is a symlink")]
    Symlink(String),
    /// A submodule (mode 160000) in the tree walked.
    #[error("{0} is a submodule")]
    Submodule(String),
    #[error("the subdirectory {0:?} is not a directory of the commit")]
    NoSubdir(String),
    #[error("the subdirectory {0:?} is not a relative path")]
    BadSubdir(String),
    #[error("more than {MAX_MODULE_ENTRIES} entries")]
    TooManyEntries,
    #[error("more than {MAX_MODULE_UNPACKED} bytes")]
    TooBig,
}

impl WalkError {
    /// A tree the cache does not store but a client's own go-getter would
    /// fetch (symlinks, submodules), or a subdirectory it reads otherwise
    /// (go-getter expands globs) or fails on with its own message: pass the
    /// source on.
    pub fn is_pass_through(&self) -> bool {
        matches!(
            self,
            WalkError::Symlink(_) | WalkError::Submodule(_) | WalkError::NoSubdir(_)
        )
    }
}

/// What a tree entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    File { executable: bool },
    Dir,
    Symlink,
    Submodule,
}

fn mode(text: &[u8]) -> Option<Mode> {
    Some(match text {
        // 100664: written by git before 2005, read as 100644 by git.
        b"100644" | b"100664" => Mode::File { executable: false },
        b"100755" => Mode::File { executable: true },
        b"40000" | b"040000" => Mode::Dir,
        b"120000" => Mode::Symlink,
        b"160000" => Mode::Submodule,
        _ => return None,
    })
}

struct Item<'a> {
    mode: &'a [u8],
    name: &'a [u8],
    id: ObjectId,
}

/// A tree object's entries: `<mode> <name>\0<20-byte id>`, repeated.
fn entries<'a>(id: &ObjectId, data: &'a [u8]) -> Result<Vec<Item<'a>>, WalkError> {
    let bad = |reason: &str| WalkError::BadTree {
        id: id.to_hex(),
        reason: reason.to_string(),
    };
    let mut items = Vec::new();
    let mut rest = data;
    while !rest.is_empty() {
        let space = rest
            .iter()
            .position(|b| *b == b' ')
            .ok_or_else(|| bad("an entry without a mode"))?;
        let (mode, after) = rest.split_at(space);
        let after = after.get(1..).unwrap_or_default();
        let nul = after
            .iter()
            .position(|b| *b == 0)
            .ok_or_else(|| bad("an entry without a name"))?;
        let (name, after) = after.split_at(nul);
        let oid = after.get(1..21).ok_or_else(|| bad("an entry cut short"))?;
        rest = after.get(21..).unwrap_or_default();
        if name.is_empty() || name == b"." || name == b".." || name.contains(&b'/') {
            return Err(bad("a name that is not one path component"));
        }
        items.push(Item {
            mode,
            name,
            id: ObjectId::from_bytes(oid).ok_or_else(|| bad("an entry cut short"))?,
        });
    }
    Ok(items)
}

fn object<'p>(
    pack: &'p Pack,
    id: &ObjectId,
    kind: Kind,
    what: &'static str,
) -> Result<&'p [u8], WalkError> {
    let object = pack.get(id).ok_or_else(|| WalkError::Missing {
        what,
        id: id.to_hex(),
    })?;
    if object.kind != kind {
        return Err(WalkError::WrongKind {
            id: id.to_hex(),
            expected: kind.name(),
            found: object.kind.name(),
        });
    }
    Ok(&object.data)
}

/// The tree a commit names (its first line, `tree <hex>`).
fn commit_tree(pack: &Pack, commit: &ObjectId) -> Result<ObjectId, WalkError> {
    let data = object(pack, commit, Kind::Commit, "commit")?;
    data.strip_prefix(b"tree ")
        .and_then(|rest| rest.get(..40))
        .and_then(|hex| std::str::from_utf8(hex).ok())
        .and_then(ObjectId::from_hex)
        .filter(|_| data.get(45) == Some(&b'\n'))
        .ok_or_else(|| WalkError::BadCommit(commit.to_hex()))
}

/// The files of `commit`'s tree, or of its `subdir`, sorted by path.
pub fn walk(
    pack: &Pack,
    commit: &ObjectId,
    subdir: Option<&str>,
) -> Result<Vec<TreeEntry>, WalkError> {
    let mut tree = commit_tree(pack, commit)?;
    if let Some(sub) = subdir {
        let mut walked = String::new();
        for part in sub.split('/').filter(|p| !p.is_empty() && *p != ".") {
            if part == ".." {
                return Err(WalkError::BadSubdir(sub.to_string()));
            }
            walked = join(&walked, part);
            let data = object(pack, &tree, Kind::Tree, "tree")?;
            let item = entries(&tree, data)?
                .into_iter()
                .find(|i| i.name == part.as_bytes())
                .ok_or_else(|| WalkError::NoSubdir(sub.to_string()))?;
            match mode(item.mode) {
                Some(Mode::Dir) => tree = item.id,
                Some(Mode::Symlink) => return Err(WalkError::Symlink(walked)),
                Some(Mode::Submodule) => return Err(WalkError::Submodule(walked)),
                _ => return Err(WalkError::NoSubdir(sub.to_string())),
            }
        }
    }
    let mut files = Vec::new();
    let (mut count, mut bytes) = (0usize, 0u64);
    let mut stack = vec![(tree, String::new())];
    while let Some((id, prefix)) = stack.pop() {
        let data = object(pack, &id, Kind::Tree, "tree")?;
        for item in entries(&id, data)? {
            let name = std::str::from_utf8(item.name).map_err(|_| WalkError::BadTree {
                id: id.to_hex(),
                reason: "a name that is not UTF-8".into(),
            })?;
            let path = join(&prefix, name);
            count += 1;
            if count > MAX_MODULE_ENTRIES {
                return Err(WalkError::TooManyEntries);
            }
            match mode(item.mode) {
                Some(Mode::Dir) => stack.push((item.id, path)),
                Some(Mode::File { executable }) => {
                    let data = object(pack, &item.id, Kind::Blob, "blob")?;
                    bytes += data.len() as u64;
                    if bytes > MAX_MODULE_UNPACKED {
                        return Err(WalkError::TooBig);
                    }
                    files.push(TreeEntry {
                        path,
                        executable,
                        bytes: data.to_vec(),
                    });
                }
                Some(Mode::Symlink) => return Err(WalkError::Symlink(path)),
                Some(Mode::Submodule) => return Err(WalkError::Submodule(path)),
                None => {
                    return Err(WalkError::BadMode {
                        path,
                        mode: String::from_utf8_lossy(item.mode).into_owned(),
                    });
                }
            }
        }
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(files)
}

fn join(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_string()
    } else {
        format!("{prefix}/{name}")
    }
}
