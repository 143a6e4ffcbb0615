//! The other CLIs the README's deploy sections name, each checked against
//! its own description of itself: `sam` (SAM CLI, `sam <command> --help`),
//! `cargo lambda` (`cargo lambda <command> --help`) and `aws` (the AWS CLI's
//! own command tables, read by `aws_cli.py` with the AWS CLI's Python).
//! All three are the pinned versions `.ci/install-tools` installs.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::tools::Tools;

/// The `--flags` of a click or clap help text: the words starting `--` in
/// the option lines (indented at most 8, starting with `-`), not in their
/// descriptions. `--a / --no-a` and `-t,--template,--template-file` give
/// each name.
pub fn help_flags(text: &str) -> BTreeSet<String> {
    let mut flags = BTreeSet::new();
    // clap's `[alias: --iam-role]`, `[aliases: --a, --b]` in a description.
    for part in text.split("[alias").skip(1) {
        let inside = part.split(']').next().unwrap_or("");
        flags.extend(
            inside
                .split([' ', ',', ':'])
                .filter(|w| w.starts_with("--") && w.len() > 2)
                .map(str::to_string),
        );
    }
    for line in text.lines() {
        let indent = line.len() - line.trim_start().len();
        let trimmed = line.trim();
        if indent > 8 || !trimmed.starts_with('-') {
            continue;
        }
        // The option part ends where the description starts (two spaces).
        let spec = trimmed.split("  ").next().unwrap_or(trimmed);
        flags.extend(
            spec.split([' ', ',', '/', '='])
                .filter(|w| w.starts_with("--") && w.len() > 2)
                .map(|w| w.trim_end_matches(['[', '<']).to_string()),
        );
    }
    flags
}

/// One program whose commands answer `--help`: the help of each command
/// path asked, read once.
pub struct HelpCli {
    program: PathBuf,
    /// Words before the command path (`lambda` for `cargo lambda`).
    prefix: Vec<String>,
    name: String,
    helps: BTreeMap<Vec<String>, Option<BTreeSet<String>>>,
}

impl HelpCli {
    pub fn sam() -> HelpCli {
        HelpCli {
            program: Tools::get().path("TFREG_SAM"),
            prefix: vec![],
            name: "sam".into(),
            helps: BTreeMap::new(),
        }
    }

    pub fn cargo_lambda() -> HelpCli {
        HelpCli {
            program: Tools::get().path("TFREG_CARGO_LAMBDA"),
            prefix: vec!["lambda".into()],
            name: "cargo lambda".into(),
            helps: BTreeMap::new(),
        }
    }

    /// The flags of `path`'s help, or `None` when there is no such command.
    fn flags(&mut self, path: &[String]) -> Option<&BTreeSet<String>> {
        let (program, prefix) = (&self.program, &self.prefix);
        self.helps
            .entry(path.to_vec())
            .or_insert_with(|| {
                let out = Command::new(program)
                    .args(prefix)
                    .args(path)
                    .arg("--help")
                    .env("SAM_CLI_TELEMETRY", "0")
                    .stdin(Stdio::null())
                    .output()
                    .unwrap();
                let text = String::from_utf8_lossy(&out.stdout);
                // A word that is no command is an error (click: "No such
                // command"; clap: "unrecognized subcommand"), or, for clap,
                // taken as a positional argument of the command above: the
                // usage line must name the whole path.
                let usage = format!("{} {}", prefix_name(program, prefix), path.join(" "));
                (out.status.success() && text.contains(usage.trim_end())).then(|| help_flags(&text))
            })
            .as_ref()
    }

    /// Check `words` (after the program's name): the command is the words
    /// before the first flag or argument that is not a command; each
    /// `--flag` must be on it.
    pub fn check(&mut self, words: &[String]) -> Result<(), String> {
        let mut path: Vec<String> = Vec::new();
        let mut rest = words;
        while let Some((first, tail)) = rest.split_first() {
            if first.starts_with('-') || first.contains(['$', '"', '/', '=']) {
                break;
            }
            let mut longer = path.clone();
            longer.push(first.clone());
            if self.flags(&longer).is_none() {
                break;
            }
            path = longer;
            rest = tail;
        }
        if path.is_empty() {
            return Err(format!("`{}`: no command {:?}", self.name, words.first()));
        }
        let name = format!("{} {}", self.name, path.join(" "));
        let known = self.flags(&path).cloned().unwrap_or_default();
        for word in rest.iter().filter(|w| w.starts_with("--")) {
            let flag = word.split('=').next().unwrap_or(word);
            if !known.contains(flag) {
                return Err(format!("`{name}` has no {flag} (see `{name} --help`)"));
            }
        }
        Ok(())
    }
}

/// How a usage line names the program (`sam`, `cargo lambda`).
fn prefix_name(program: &Path, prefix: &[String]) -> String {
    let stem = program.file_name().unwrap().to_string_lossy();
    let base = stem
        .strip_prefix("cargo-")
        .map_or(stem.to_string(), |_| "cargo".to_string());
    std::iter::once(base)
        .chain(prefix.iter().cloned())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Check AWS CLI command lines (words after `aws`) with the AWS CLI's own
/// tables: one answer per line, `None` when it is one the AWS CLI accepts.
pub fn check_aws(lines: &[Vec<String>]) -> Vec<Option<String>> {
    if lines.is_empty() {
        return Vec::new();
    }
    let aws = Tools::get().path("TFREG_AWS");
    let python = aws.parent().unwrap().join("python");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/readme/aws_cli.py");
    let mut child = Command::new(python)
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(serde_json::to_string(lines).unwrap().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "aws_cli.py: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_of_click_and_clap_helps() {
        let click = "Usage: sam deploy [OPTIONS]\n\nRequired Options:\n    --stack-name TEXT               Name of the stack.\n    --resolve-s3 / --no-resolve-s3  Automatically resolve --s3-bucket.\n    -t,--template,--template-file   AWS SAM template\n                                    see --not-a-flag\n";
        let flags = help_flags(click);
        for f in [
            "--stack-name",
            "--resolve-s3",
            "--no-resolve-s3",
            "--template",
            "--template-file",
        ] {
            assert!(flags.contains(f), "{f}: {flags:?}");
        }
        assert!(!flags.contains("--s3-bucket") && !flags.contains("--not-a-flag"));
        let clap = "Usage: cargo lambda deploy [OPTIONS] [NAME]\n\nOptions:\n  -p, --profile <PROFILE>\n          AWS profile; see --region\n      --binary-name <BINARY_NAME>\n          Name\n      --role <ROLE>\n          IAM Role [alias: --iam-role]\n";
        let flags = help_flags(clap);
        assert_eq!(
            flags,
            BTreeSet::from(
                ["--profile", "--binary-name", "--role", "--iam-role"].map(String::from)
            )
        );
    }
}
