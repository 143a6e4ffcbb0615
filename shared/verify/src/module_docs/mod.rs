//! What a module's page shows, read from its files once, at publish time, and
//! stored with the version: its README as sanitised HTML, and for the root
//! module, each submodule (`modules/<name>/`) and each example
//! (`examples/<name>/`) the inputs, outputs, resources, data sources, module
//! calls and requirements that its `.tf` files declare, parsed with an HCL
//! parser (`hcl-edit`), as HashiCorp's terraform-config-inspect reads them.
//!
//! Nothing here can fail a publish: a file that does not parse is named in
//! [`ModuleDocs::notes`] and the rest is still shown.
//!
//! What one module's docs may cost is bounded ([`MAX_DOCS_BYTES`],
//! [`MAX_DOCS_FILES`], [`MAX_DOCS_TIME`]): found from outside, an 8.9 MB
//! module expanding to 479 MB of `.tf` cost 5.1 s of CPU and 72 MB at
//! publish. Past a bound the version is published without its interface
//! (inputs, outputs, resources...), and [`Extracted::unread`] says why.

mod hcl_summary;
mod readme;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

pub use tfreg_model::docs::*;

pub use hcl_summary::summarise;
pub use readme::{first_paragraph, render_markdown};

/// Largest `.tf` or README file read; bigger ones are named in the notes.
pub const MAX_FILE_BYTES: usize = 512 * 1024;

/// Most bytes of the `.tf` files docs are read from, of one module, in all
/// (its README, at most [`MAX_FILE_BYTES`], comes besides). Real modules'
/// come to well under 1 MiB.
pub const MAX_DOCS_BYTES: usize = 2 * 1024 * 1024;

/// Most `.tf` files docs are read from, of one module.
pub const MAX_DOCS_FILES: usize = 500;

/// Longest time reading one module's docs may take (checked before each
/// file: one file of at most [`MAX_FILE_BYTES`] is parsed whole).
pub const MAX_DOCS_TIME: Duration = Duration::from_secs(2);

/// Why a module's interface was not read: a bound was passed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unread {
    #[error(
        "its .tf files pass {MAX_DOCS_BYTES} bytes in all; the inputs, outputs and resources are not shown"
    )]
    Bytes,
    #[error(
        "it has more than {MAX_DOCS_FILES} .tf files; the inputs, outputs and resources are not shown"
    )]
    Files,
    #[error(
        "reading its .tf files took longer than {MAX_DOCS_TIME:?}; the inputs, outputs and resources are not shown"
    )]
    Time,
}

/// A module's docs, and why its interface is missing when a bound stopped it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Extracted {
    pub docs: ModuleDocs,
    pub unread: Option<Unread>,
}

/// Is the archive file `path` one that [`extract`] reads (a `.tf` file of
/// the root module, a submodule or an example, or the root README)? The
/// archive check keeps only those files' bytes.
pub fn reads(path: &str) -> bool {
    let path = path.trim_start_matches("./");
    let (dir, file) = path.rsplit_once('/').unwrap_or(("", path));
    match place_of(dir) {
        Some((Place::Root, _)) => file.ends_with(".tf") || is_readme_name(file),
        Some(_) => file.ends_with(".tf"),
        None => false,
    }
}

/// Read a module's docs from its files: `(path in the archive, bytes)`,
/// with no time bound (what was kept is bounded in bytes and files).
pub fn extract<'a>(files: impl IntoIterator<Item = (&'a str, &'a [u8])>) -> ModuleDocs {
    extract_within(files, None).docs
}

/// [`extract`], giving up on the interface when `unread` already says a
/// bound was passed (by the archive check, which keeps the files), or when
/// parsing takes longer than [`MAX_DOCS_TIME`]: then the docs are the
/// README only, and a note says why.
pub fn extract_bounded<'a>(
    files: impl IntoIterator<Item = (&'a str, &'a [u8])>,
    unread: Option<Unread>,
) -> Extracted {
    extract_until(files, unread, Instant::now() + MAX_DOCS_TIME)
}

/// [`extract_bounded`] with the time bound at `deadline`.
pub fn extract_until<'a>(
    files: impl IntoIterator<Item = (&'a str, &'a [u8])>,
    unread: Option<Unread>,
    deadline: Instant,
) -> Extracted {
    let budget = match unread {
        Some(unread) => Budget::Unread(unread),
        None => Budget::Until(deadline),
    };
    extract_within(files, Some(budget))
}

/// How much of the interface may be read.
enum Budget {
    /// Parse until this moment.
    Until(Instant),
    /// Parse nothing: a bound was passed already.
    Unread(Unread),
}

fn extract_within<'a>(
    files: impl IntoIterator<Item = (&'a str, &'a [u8])>,
    budget: Option<Budget>,
) -> Extracted {
    let mut docs = ModuleDocs::default();
    let mut dirs: BTreeMap<(Place, String), Vec<(String, String)>> = BTreeMap::new();
    let mut readme: Option<(String, String)> = None;
    for (path, bytes) in files {
        let path = path.trim_start_matches("./");
        let (dir, file) = path.rsplit_once('/').unwrap_or(("", path));
        let Some(place) = place_of(dir) else {
            continue;
        };
        let is_tf = file.ends_with(".tf");
        let is_readme = place.0 == Place::Root && is_readme_name(file);
        if !is_tf && !is_readme {
            continue;
        }
        if bytes.len() > MAX_FILE_BYTES {
            docs.notes.push(format!(
                "{path}: not read ({} bytes; at most {MAX_FILE_BYTES})",
                bytes.len()
            ));
            continue;
        }
        let Ok(text) = std::str::from_utf8(bytes) else {
            docs.notes.push(format!("{path}: not read (not UTF-8)"));
            continue;
        };
        if is_readme {
            // README.md before README, and the first of equal names.
            let better = readme
                .as_ref()
                .is_none_or(|(current, _)| readme_rank(file) < readme_rank(current));
            if better {
                readme = Some((file.to_string(), text.to_string()));
            }
            continue;
        }
        if file == "override.tf" || file.ends_with("_override.tf") {
            docs.notes.push(format!(
                "{path}: an override file, not shown (it changes other files' blocks)"
            ));
            continue;
        }
        dirs.entry(place)
            .or_default()
            .push((file.to_string(), text.to_string()));
    }
    if let Some((_, text)) = readme {
        docs.description = first_paragraph(&text);
        docs.readme_html = Some(render_markdown(&text));
    }
    let deadline = match budget {
        Some(Budget::Unread(unread)) => return without_interface(docs, unread),
        Some(Budget::Until(deadline)) => Some(deadline),
        None => None,
    };
    for ((place, name), files) in dirs {
        let Ok((summary, notes)) = hcl_summary::summarise_until(
            files.iter().map(|(f, t)| (f.as_str(), t.as_str())),
            deadline,
        ) else {
            return without_interface(docs, Unread::Time);
        };
        let prefix = match place {
            Place::Root => String::new(),
            Place::Submodule => format!("modules/{name}/"),
            Place::Example => format!("examples/{name}/"),
        };
        docs.notes
            .extend(notes.into_iter().map(|n| format!("{prefix}{n}")));
        match place {
            Place::Root => docs.root = summary,
            Place::Submodule => {
                docs.submodules.insert(name, summary);
            }
            Place::Example => {
                docs.examples.insert(name, summary);
            }
        }
    }
    Extracted { docs, unread: None }
}

/// `docs` (its README) without any interface, and a note why.
fn without_interface(docs: ModuleDocs, unread: Unread) -> Extracted {
    let docs = ModuleDocs {
        notes: vec![format!(
            "The module's docs were not read in full: {unread}."
        )],
        description: docs.description,
        readme_html: docs.readme_html,
        ..ModuleDocs::default()
    };
    Extracted {
        docs,
        unread: Some(unread),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Place {
    Root,
    Submodule,
    Example,
}

/// Which module directory `dir` is, by the registry's standard layout.
fn place_of(dir: &str) -> Option<(Place, String)> {
    match dir.split('/').collect::<Vec<_>>().as_slice() {
        [""] => Some((Place::Root, String::new())),
        ["modules", name] if !name.is_empty() => Some((Place::Submodule, name.to_string())),
        ["examples", name] if !name.is_empty() => Some((Place::Example, name.to_string())),
        _ => None,
    }
}

/// The rank of `path` as the module's README (0 is best), if it is one of
/// the root module's README names.
pub fn readme_rank_of(path: &str) -> Option<u8> {
    let path = path.trim_start_matches("./");
    (!path.contains('/') && is_readme_name(path)).then(|| readme_rank(path))
}

fn is_readme_name(file: &str) -> bool {
    readme_rank(file) < 2
}

fn readme_rank(file: &str) -> u8 {
    match file.to_ascii_lowercase().as_str() {
        "readme.md" => 0,
        "readme" | "readme.markdown" => 1,
        _ => 2,
    }
}

#[cfg(test)]
mod tests;
