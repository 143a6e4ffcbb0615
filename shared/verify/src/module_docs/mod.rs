//! What a module's page shows, read from its files once, at publish time, and
//! stored with the version: its README as sanitised HTML, and for the root
//! module, each submodule (`modules/<name>/`) and each example
//! (`examples/<name>/`) the inputs, outputs, resources, data sources, module
//! calls and requirements that its `.tf` files declare, parsed with an HCL
//! parser (`hcl-edit`), as HashiCorp's terraform-config-inspect reads them.
//!
//! Nothing here can fail a publish: a file that does not parse is named in
//! [`ModuleDocs::notes`] and the rest is still shown.

mod hcl_summary;
mod readme;

use std::collections::BTreeMap;

pub use tfreg_model::docs::*;

pub use hcl_summary::summarise;
pub use readme::{first_paragraph, render_markdown};

/// Largest `.tf` or README file read; bigger ones are named in the notes.
pub const MAX_FILE_BYTES: usize = 512 * 1024;

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

/// Read a module's docs from its files: `(path in the archive, bytes)`.
pub fn extract<'a>(files: impl IntoIterator<Item = (&'a str, &'a [u8])>) -> ModuleDocs {
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
    for ((place, name), files) in dirs {
        let (summary, notes) = summarise(files.iter().map(|(f, t)| (f.as_str(), t.as_str())));
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
    docs
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
