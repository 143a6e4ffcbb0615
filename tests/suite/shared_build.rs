//! One debug build for the suite and the README walk: `cargo test
//! --workspace` resolves every dependency over all members and their
//! dev-dependencies, while the walk's `cargo run -- serve` and
//! `scripts/lambda-local` (`cargo build --bins`) resolve them over the
//! default members only. A dependency resolved with other features is
//! another build of it and of everything above it, so without
//! `tests/workspace-hack` (a member of the CLI's graph that names the
//! union's features) the walk compiled nearly the whole graph a second time
//! (about 12 of CI's minutes). This proves the two resolutions agree.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// `cargo tree` over `selection`: each package (name and version) with the
/// union of the features it is built with, host and target alike.
fn features(selection: &[&str], edges: &str) -> BTreeMap<String, Vec<String>> {
    let out = Command::new(env!("CARGO"))
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")))
        .args(["tree", "--locked", "--offline"])
        .args(selection)
        .args(["-e", edges, "--prefix", "none", "--format", "{p} {f}"])
        .output()
        .expect("cargo tree runs");
    assert!(
        out.status.success(),
        "cargo tree {selection:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut found: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        let mut words = line.split_whitespace();
        let (Some(name), Some(version)) = (words.next(), words.next()) else {
            continue;
        };
        let entry = found.entry(format!("{name} {version}")).or_default();
        // `{f}` is one comma-separated word; "(*)" and the path of a
        // workspace member are not features.
        if let Some(list) = words.find(|w| !w.starts_with('(')) {
            entry.extend(list.split(',').map(str::to_string));
        }
        entry.sort();
        entry.dedup();
    }
    found
}

/// The default members' package names (`cargo metadata`).
fn default_members() -> Vec<String> {
    let out = Command::new(env!("CARGO"))
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")))
        .args([
            "metadata",
            "--locked",
            "--offline",
            "--no-deps",
            "--format-version",
            "1",
        ])
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let ids = meta["workspace_default_members"].as_array().unwrap();
    meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| ids.contains(&p["id"]))
        .map(|p| p["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn the_default_members_build_the_dependencies_as_the_workspace_does() {
    let members = default_members();
    assert!(members.len() > 1, "{members:?}");
    let mut selection = Vec::new();
    for name in members {
        selection.push("-p".to_string());
        selection.push(name);
    }
    let selection: Vec<&str> = selection.iter().map(String::as_str).collect();
    let walk = features(&selection, "normal,build");
    let suite = features(&["--workspace"], "normal,build,dev");
    assert!(walk.len() > 100, "the graph was read: {walk:?}");
    let differ: Vec<String> = walk
        .iter()
        .filter_map(|(package, used)| {
            let all = suite.get(package)?;
            (used != all).then(|| {
                let missing: Vec<&String> = all.iter().filter(|f| !used.contains(f)).collect();
                format!("{package}: the default members lack {missing:?}")
            })
        })
        .collect();
    assert!(
        differ.is_empty(),
        "the README walk would build these (and all above them) a second time; add the \
         features to tests/workspace-hack/Cargo.toml (or run `cargo hakari generate`):\n{}",
        differ.join("\n")
    );
}
