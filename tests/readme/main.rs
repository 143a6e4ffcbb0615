//! The README as a contract (`cargo test --workspace --test readme`, run by
//! `scripts/test` after the suite; not part of a plain `cargo test`, since
//! the walk builds a fresh clone of its own):
//!
//! - every `tfreg` command and flag the README names exists (checked
//!   against `--help` of each subcommand), as do the `scripts/lambda-local`
//!   flags, and the packages and binaries its cargo commands name;
//! - every example in the CLI's help runs;
//! - the walk: a new user's path through the README on a fresh copy of the
//!   repository, every block marked `test=NAME` run as pasted, in order
//!   ([`walk`]).
//!
//! A README block becomes part of the walk by its info string, e.g.
//! ```` ```sh test=publish ````; renaming, dropping or adding a marked block
//! fails the walk until it says how that block is run.

mod blocks;
mod clis;
mod deploy;
mod help;
mod shell;
mod walk;

// The suite's harness for what the reader brings (gpg keys, signed
// releases, the installed tools), shared file by file.
#[allow(dead_code)]
#[path = "../suite/support/command.rs"]
mod command;
#[allow(dead_code)]
#[path = "../suite/support/dist.rs"]
mod dist;
#[allow(dead_code)]
#[path = "../suite/support/gpg.rs"]
mod gpg;

#[allow(dead_code, unused_imports)]
#[path = "../suite/support/tools.rs"]
mod tools;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

use blocks::{Readme, commands, words};
use clis::HelpCli;
use help::Cli;
use shell::{Background, Session};

/// The walk and the help examples both serve on the README's port, 8443.
static PORT_8443: Mutex<()> = Mutex::new(());

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn readme() -> Readme {
    Readme::parse(&std::fs::read_to_string(root().join("README.md")).unwrap())
}

fn tfreg() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_tfreg"))
}

/// `$NAME` replaced by what an earlier `NAME=value` of the block set.
fn expand(command: &str, vars: &BTreeMap<String, String>) -> String {
    let mut out = command.to_string();
    for (name, value) in vars.iter().rev() {
        out = out.replace(&format!("${name}"), value);
    }
    out
}

/// The commands a shell line runs: split at `$(`, `)`, `&&`, `||`, `;`, `|`
/// (outside quotes is close enough for the README's commands).
fn segments(line: &str) -> Vec<String> {
    let mut parts = vec![line.to_string()];
    for sep in ["$(", ")", "&&", "||", ";", " | "] {
        parts = parts
            .iter()
            .flat_map(|p| p.split(sep).map(str::to_string).collect::<Vec<_>>())
            .collect();
    }
    parts
        .into_iter()
        .map(|p| p.trim().to_string())
        .filter(|p| !p.is_empty())
        .collect()
}

/// `cargo metadata --no-deps` of the workspace.
fn workspace_metadata() -> serde_json::Value {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "metadata",
            "--no-deps",
            "--format-version",
            "1",
            "--offline",
        ])
        .current_dir(root())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The workspace's packages and their binaries, from `cargo metadata`.
fn workspace_bins() -> BTreeMap<String, BTreeSet<String>> {
    let meta = workspace_metadata();
    meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let bins = p["targets"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|t| t["kind"].as_array().unwrap().iter().any(|k| k == "bin"))
                .map(|t| t["name"].as_str().unwrap().to_string())
                .collect();
            (p["name"].as_str().unwrap().to_string(), bins)
        })
        .collect()
}

#[test]
fn the_readme_names_only_commands_flags_and_packages_that_exist() {
    let readme = readme();
    let cli = Cli::load(&tfreg());
    let lambda_local = {
        let out = Command::new(root().join("scripts/lambda-local"))
            .arg("--help")
            .output()
            .unwrap();
        assert!(out.status.success(), "scripts/lambda-local --help");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    // infra/smoke-test's usage, its header comment (`[--token TOKEN]`).
    let smoke_test = std::fs::read_to_string(root().join("infra/smoke-test")).unwrap();
    // infra/archive-key's usage lines, in its header comment:
    // `#   infra/archive-key COMMAND --stack NAME ... [--secrets-manager]`.
    let archive_key: Vec<Vec<String>> = std::fs::read_to_string(root().join("infra/archive-key"))
        .unwrap()
        .lines()
        .filter_map(|l| l.strip_prefix("#   infra/archive-key "))
        .map(words)
        .collect();
    let packages = workspace_bins();
    let mut sam = HelpCli::sam();
    let mut cargo_lambda = HelpCli::cargo_lambda();
    // The AWS CLI's checks run at once, at the end (one Python start).
    let mut aws: Vec<(usize, String, Vec<String>)> = Vec::new();
    let mut errors = Vec::new();
    let mut checked = 0;
    let mut check = |line: usize, command: &str, errors: &mut Vec<String>| {
        let w = words(command);
        match w.first().map(String::as_str) {
            Some("sam") => {
                checked += 1;
                if let Err(e) = sam.check(&w[1..]) {
                    errors.push(format!("README.md:{line}: {command}: {e}"));
                }
            }
            Some("aws") => {
                checked += 1;
                aws.push((line, command.to_string(), w[1..].to_vec()));
            }
            Some("tfreg") => {
                checked += 1;
                if let Err(e) = cli.check(&w[1..]) {
                    errors.push(format!("README.md:{line}: {command}: {e}"));
                }
            }
            Some("infra/smoke-test") => {
                checked += 1;
                for flag in w.iter().filter(|w| w.starts_with("--")) {
                    if !smoke_test.contains(&format!("[{flag} ")) {
                        errors.push(format!("README.md:{line}: infra/smoke-test has no {flag}"));
                    }
                }
            }
            Some("infra/archive-key") => {
                checked += 1;
                // Its command, and each flag in that command's usage line.
                match archive_key.iter().find(|u| u.first() == w.get(1)) {
                    None => errors.push(format!(
                        "README.md:{line}: infra/archive-key has no command {:?}",
                        w.get(1)
                    )),
                    Some(usage) => {
                        for flag in w.iter().filter(|w| w.starts_with("--")) {
                            if !usage.iter().any(|u| u.trim_matches(['[', ']']) == flag) {
                                errors.push(format!(
                                    "README.md:{line}: infra/archive-key {} has no {flag}",
                                    usage[0]
                                ));
                            }
                        }
                    }
                }
            }
            Some("scripts/lambda-local") => {
                checked += 1;
                for flag in w.iter().filter(|w| w.starts_with("--")) {
                    if !lambda_local.contains(flag.as_str()) {
                        errors.push(format!(
                            "README.md:{line}: scripts/lambda-local has no {flag}"
                        ));
                    }
                }
            }
            Some("cargo") => {
                checked += 1;
                let values = |flags: &[&str]| -> Vec<String> {
                    w.windows(2)
                        .filter(|p| flags.contains(&p[0].as_str()))
                        .map(|p| p[1].clone())
                        .collect()
                };
                let named = values(&["-p", "--package"]);
                for p in named.iter().filter(|p| !packages.contains_key(*p)) {
                    errors.push(format!("README.md:{line}: no package {p} in the workspace"));
                }
                // `--bin` (build) and `--binary-name` (cargo lambda deploy):
                // a binary of the packages named, or of the workspace.
                for bin in values(&["--bin", "--binary-name"]) {
                    let owners: Vec<&String> = packages
                        .iter()
                        .filter(|(_, bins)| bins.contains(&bin))
                        .map(|(p, _)| p)
                        .filter(|p| named.is_empty() || named.contains(p))
                        .collect();
                    if owners.is_empty() && !bin.contains('$') {
                        errors.push(format!("README.md:{line}: no binary {bin} in {named:?}"));
                    }
                }
                if w.get(1).map(String::as_str) == Some("lambda")
                    && let Err(e) = cargo_lambda.check(&w[2..])
                {
                    errors.push(format!("README.md:{line}: {command}: {e}"));
                }
            }
            _ => {}
        }
    };
    for block in &readme.blocks {
        if !matches!(block.lang.as_str(), "sh" | "bash" | "console") {
            continue;
        }
        let mut vars = BTreeMap::new();
        for (i, command) in commands(&block.text).iter().enumerate() {
            let command = expand(command, &vars);
            for segment in segments(&command) {
                let segment = segment
                    .strip_prefix("export ")
                    .unwrap_or(&segment)
                    .to_string();
                let w = words(&segment);
                let assignments = w
                    .iter()
                    .take_while(|w| w.contains('=') && !w.starts_with('-'))
                    .count();
                for assignment in &w[..assignments] {
                    if let Some((k, v)) = assignment.split_once('=')
                        && k.chars().all(|c| c.is_ascii_uppercase() || c == '_')
                    {
                        vars.insert(k.to_string(), v.to_string());
                    }
                }
                // `AWS_REGION=x tfreg ...`: the command after the assignments.
                let command = if assignments > 0 && assignments < w.len() {
                    w[assignments..].join(" ")
                } else {
                    segment
                };
                check(block.line + 1 + i, &command, &mut errors);
            }
        }
    }
    // The programs whose commands a code span may name.
    let named = |code: &str| {
        [
            "tfreg ",
            "scripts/lambda-local",
            "infra/archive-key",
            "sam ",
            "aws ",
            "cargo lambda ",
        ]
        .iter()
        .any(|p| code.starts_with(p))
    };
    for span in &readme.spans {
        let code = span.code.trim();
        if code.starts_with("--")
            && let Some(lead) = span.lead.as_deref()
            && named(lead)
        {
            // A flag named in a paragraph about a command: that command's.
            let flag = code.split_whitespace().next().unwrap();
            check(span.line, &format!("{lead} {flag}"), &mut errors);
            continue;
        }
        // `export X=$(tfreg ...)`, `A=b tfreg ...`: the commands in it.
        for segment in segments(code) {
            let segment = segment.strip_prefix("export ").unwrap_or(&segment);
            let w = words(segment);
            let start = w
                .iter()
                .take_while(|w| w.contains('=') && !w.starts_with('-'))
                .count();
            let command = w[start..].join(" ");
            if named(&command) {
                check(span.line, &command, &mut errors);
            }
        }
    }
    let answers = clis::check_aws(&aws.iter().map(|(_, _, w)| w.clone()).collect::<Vec<_>>());
    for ((line, command, _), answer) in aws.iter().zip(answers) {
        if let Some(e) = answer {
            errors.push(format!("README.md:{line}: {command}: {e}"));
        }
    }
    // The second of "the two commands" is what CI runs.
    let two = readme
        .blocks
        .iter()
        .find(|b| b.text.contains("cargo run -- serve") && b.text.contains("scripts/test"))
        .expect("README.md shows the two commands");
    let test_command = commands(&two.text)[1].clone();
    let ci = std::fs::read_to_string(root().join(".ci/run")).unwrap();
    assert!(
        ci.contains(&format!("exec {test_command}")),
        ".ci/run does not run `{test_command}`:\n{ci}"
    );
    eprintln!("FIGURE readme: {checked} commands checked against the CLI, scripts and workspace");
    assert!(
        checked > 30,
        "the README names far more commands than {checked}"
    );
    assert!(
        errors.is_empty(),
        "the README drifted from the code:\n{}",
        errors.join("\n")
    );
}

#[test]
fn every_example_in_the_help_runs() {
    let _port = PORT_8443.lock().unwrap_or_else(|e| e.into_inner());
    let cli = Cli::load(&tfreg());
    let examples: Vec<(Vec<String>, String)> = cli
        .nodes
        .iter()
        .flat_map(|(path, help)| help.examples.iter().map(move |e| (path.clone(), e.clone())))
        .collect();
    assert!(examples.len() >= 4, "the help shows examples: {examples:?}");
    let dir = tempfile::tempdir().unwrap();
    let gpg = gpg::Gpg::new("rsa2048");
    // What the examples name that a reader would have: a module, a dist.
    dist::write_tree(dir.path(), &[("vpc/main.tf", "variable \"name\" {}\n")]);
    dist::provider_dist(
        &dir.path().join("dist"),
        "null",
        "1.0.0",
        &["linux_amd64"],
        &gpg,
    );
    gpg.export(&dir.path().join("key.asc"));
    let bin_dir = tfreg().parent().unwrap().display().to_string();
    let mut env = vec![
        ("PATH".to_string(), format!("{bin_dir}:/usr/bin:/bin")),
        ("HOME".to_string(), dir.path().display().to_string()),
    ];
    // The server first: the others need it.
    let (serve, others): (Vec<_>, Vec<_>) = examples
        .into_iter()
        .partition(|(_, e)| e.starts_with("tfreg serve"));
    assert_eq!(serve.len(), 1, "one example starts the server: {serve:?}");
    let mut server = Background::start(
        "tfreg serve",
        &serve[0].1,
        dir.path(),
        &env,
        &dir.path().join("serve.log"),
    );
    server.wait_for(Duration::from_secs(60), |out| {
        out.contains("tfreg is serving")
    });
    env.push((
        "SSL_CERT_FILE".to_string(),
        dir.path()
            .join("tfreg-data/tls/ca.pem")
            .display()
            .to_string(),
    ));
    let shell = Session::new("help", dir.path(), dir.path(), &env);
    for (path, example) in &others {
        eprintln!("example of `tfreg {}`", path.join(" "));
        if example.starts_with("tfreg token create") {
            // The token it prints, as the reader would keep it.
            shell.run(&format!("export TFREG_TOKEN=$({example})"));
        } else {
            shell.run(example);
        }
    }
    let status = server.interrupt(Duration::from_secs(20));
    assert!(status.success(), "{status}");
}

#[test]
fn a_new_user_walks_the_readme_on_a_fresh_clone() {
    let _port = PORT_8443.lock().unwrap_or_else(|e| e.into_inner());
    walk::walk(&readme());
}

/// The README's item table is the code's: every row of it is a row of the
/// schema's own table (`shared/store/src/catalog/schema.rs`), and no row of
/// the schema is missing from it.
#[test]
fn the_item_table_is_the_schema() {
    let rows = |text: &str| -> BTreeSet<(String, String)> {
        text.lines()
            .map(|l| l.trim_start_matches("//!").trim())
            .filter(|l| l.starts_with('|') && l.contains('`'))
            .filter_map(|l| {
                let cells: Vec<&str> = l.trim_matches('|').split('|').map(str::trim).collect();
                (cells.len() == 3).then(|| (cells[1].to_string(), cells[2].to_string()))
            })
            .collect()
    };
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let table = readme
        .split("### Metadata: one item model")
        .nth(1)
        .expect("the README's item model section");
    let table = &table[..table.find("\n\n(").unwrap_or(table.len())];
    let schema =
        std::fs::read_to_string(root().join("shared/store/src/catalog/schema.rs")).unwrap();
    let (documented, code) = (rows(table), rows(&schema));
    assert!(code.len() >= 10, "the schema's table: {code:?}");
    assert_eq!(
        documented, code,
        "README.md's item table vs catalog::schema"
    );
}

/// The README's table of crates (How it works) is the workspace's: each
/// `shared/` crate's row names exactly the crates of ours it depends on
/// (its normal dependencies, optional ones included), each of them in a row
/// above it, and every `shared/` member but the test kit has a row.
#[test]
fn the_crate_table_is_the_workspace() {
    let meta = workspace_metadata();
    let ours = |name: &str| name.starts_with("tfreg-") && name != "tfreg-workspace-hack";
    let workspace: BTreeMap<String, BTreeSet<String>> = meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["manifest_path"].as_str().unwrap().contains("/shared/"))
        .map(|p| {
            let deps = p["dependencies"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|d| d["kind"].is_null())
                .map(|d| d["name"].as_str().unwrap().to_string())
                .filter(|d| ours(d))
                .collect();
            (p["name"].as_str().unwrap().to_string(), deps)
        })
        .filter(|(name, _)| name != "tfreg-testkit")
        .collect();
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let section = readme
        .split("## How it works")
        .nth(1)
        .expect("README.md has How it works");
    let mut above: BTreeSet<String> = BTreeSet::new();
    let mut documented = BTreeMap::new();
    for row in section.lines().take_while(|l| !l.starts_with("## ")) {
        let cells: Vec<&str> = row.trim_matches('|').split('|').map(str::trim).collect();
        let Some(krate) = cells
            .get(1)
            .and_then(|c| c.split('`').find(|w| w.starts_with("tfreg-")))
        else {
            continue;
        };
        let deps: BTreeSet<String> = cells[2]
            .split(|c: char| !c.is_ascii_alphanumeric())
            .filter(|w| workspace.contains_key(&format!("tfreg-{w}")))
            .map(|w| format!("tfreg-{w}"))
            .collect();
        for d in &deps {
            assert!(
                above.contains(d),
                "README.md's crate table: {krate} depends on {d}, which is not in a row above it"
            );
        }
        above.insert(krate.to_string());
        documented.insert(krate.to_string(), deps);
    }
    assert_eq!(
        documented, workspace,
        "README.md's crate table (How it works) vs the workspace's shared crates and their dependencies"
    );
}
