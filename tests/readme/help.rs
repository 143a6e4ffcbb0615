//! The CLI as its `--help` describes it: every subcommand, its flags and the
//! examples its help shows; and a check of a command line against it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

/// What one `--help` says.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Help {
    pub flags: BTreeSet<String>,
    pub subcommands: Vec<String>,
    /// The commands under an `Examples:` heading, comments dropped.
    pub examples: Vec<String>,
}

/// Parse clap's long help: option lines (`  -s, --long <V>`, indented less
/// than their descriptions), command lines, and the `Examples:` section.
pub fn parse(text: &str) -> Help {
    let mut help = Help::default();
    let mut section = "";
    for line in text.lines() {
        if !line.starts_with(' ') && line.ends_with(':') {
            section = line;
            continue;
        }
        let indent = line.len() - line.trim_start().len();
        let trimmed = line.trim();
        match section {
            "Options:" | "Arguments:" if indent < 8 && trimmed.starts_with('-') => {
                help.flags.extend(
                    trimmed
                        .split([' ', ',', '='])
                        .filter(|w| w.starts_with("--"))
                        .map(str::to_string),
                );
            }
            "Commands:" if indent == 2 => {
                let name = trimmed.split_whitespace().next().unwrap_or("");
                if !name.is_empty() && name != "help" {
                    help.subcommands.push(name.to_string());
                }
            }
            "Examples:" if !trimmed.is_empty() => {
                let command = super::blocks::strip_comment(trimmed).trim();
                if !command.is_empty() {
                    help.examples.push(command.to_string());
                }
            }
            _ => {}
        }
    }
    help
}

/// Every subcommand's help, by its path of names (`[]` is `tfreg` itself).
pub struct Cli {
    pub nodes: BTreeMap<Vec<String>, Help>,
}

impl Cli {
    /// Read `bin --help` and every subcommand's, recursively.
    pub fn load(bin: &Path) -> Cli {
        let mut nodes = BTreeMap::new();
        let mut todo = vec![Vec::<String>::new()];
        while let Some(path) = todo.pop() {
            let out = Command::new(bin)
                .args(&path)
                .arg("--help")
                .env_remove("TFREG_TOKEN")
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "tfreg {} --help failed",
                path.join(" ")
            );
            let help = parse(&String::from_utf8_lossy(&out.stdout));
            for sub in &help.subcommands {
                let mut child = path.clone();
                child.push(sub.clone());
                todo.push(child);
            }
            nodes.insert(path, help);
        }
        Cli { nodes }
    }

    /// The flags of `path` and of every subcommand under it.
    fn flags_under(&self, path: &[String]) -> BTreeSet<&str> {
        self.nodes
            .iter()
            .filter(|(p, _)| p.starts_with(path))
            .flat_map(|(_, h)| h.flags.iter().map(String::as_str))
            .collect()
    }

    /// Check `words` (after `tfreg`) as the README writes them: each
    /// subcommand exists (`a|b` names several), and every `--flag` exists on
    /// the command reached or, when the command is not named whole, under
    /// it. Returns the command's path, or what is wrong.
    pub fn check(&self, words: &[String]) -> Result<Vec<String>, String> {
        let mut path: Vec<String> = Vec::new();
        let mut whole = true;
        let mut descending = true;
        let mut flags = Vec::new();
        for word in words {
            if word.starts_with("--") {
                descending = false;
                flags.push(word.split('=').next().unwrap_or(word).to_string());
                continue;
            }
            if !descending || word.starts_with('-') {
                descending = false;
                continue;
            }
            let subs = &self.nodes[&path].subcommands;
            if subs.is_empty() {
                descending = false;
                continue;
            }
            let alternatives: Vec<&str> = word.split('|').collect();
            if let Some(bad) = alternatives.iter().find(|a| !subs.iter().any(|s| s == *a)) {
                return Err(format!(
                    "`tfreg {} {bad}`: no such command (`tfreg {} --help` lists {})",
                    path.join(" "),
                    path.join(" "),
                    subs.join(", ")
                ));
            }
            if alternatives.len() > 1 {
                whole = false;
                descending = false;
                continue;
            }
            path.push(word.clone());
        }
        if whole && !self.nodes[&path].subcommands.is_empty() {
            whole = false;
        }
        let known = if whole {
            self.nodes[&path].flags.iter().map(String::as_str).collect()
        } else {
            self.flags_under(&path)
        };
        for flag in flags {
            if !known.contains(flag.as_str()) {
                return Err(format!(
                    "`tfreg {}` has no {flag} (see `tfreg {} --help`)",
                    path.join(" "),
                    path.join(" ")
                ));
            }
        }
        Ok(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROOT: &str = "A private registry\n\nUsage: tfreg <COMMAND>\n\nCommands:\n  serve    Run it\n  token    Tokens\n  help     Print this message\n\nOptions:\n  -h, --help\n          Print help\n\nExamples:\n  tfreg serve --private   # reads need a token\n  tfreg token create --name me\n";
    const SERVE: &str = "Run it\n\nUsage: tfreg serve [OPTIONS]\n\nOptions:\n      --data-dir <DATA_DIR>\n          Where it lives; see --listen too\n\n      --private\n          Require a token\n";
    const TOKEN: &str = "Tokens\n\nCommands:\n  create  Create one\n";
    const CREATE: &str = "Create one\n\nOptions:\n      --name <NAME>\n  -s, --scope <SCOPE>\n";

    fn cli() -> Cli {
        let mut nodes = BTreeMap::new();
        nodes.insert(vec![], parse(ROOT));
        nodes.insert(vec!["serve".to_string()], parse(SERVE));
        nodes.insert(vec!["token".to_string()], parse(TOKEN));
        nodes.insert(
            vec!["token".to_string(), "create".to_string()],
            parse(CREATE),
        );
        Cli { nodes }
    }

    fn words(s: &str) -> Vec<String> {
        super::super::blocks::words(s)
    }

    #[test]
    fn help_gives_flags_commands_and_examples() {
        let root = parse(ROOT);
        assert_eq!(root.subcommands, ["serve", "token"]);
        assert_eq!(root.flags, BTreeSet::from(["--help".to_string()]));
        assert_eq!(
            root.examples,
            ["tfreg serve --private", "tfreg token create --name me"]
        );
        let serve = parse(SERVE);
        assert_eq!(
            serve.flags,
            BTreeSet::from(["--data-dir".to_string(), "--private".to_string()]),
            "a flag named in a description is not one of the command's"
        );
    }

    #[test]
    fn commands_and_flags_are_checked_where_they_are_named() {
        let cli = cli();
        assert_eq!(
            cli.check(&words("serve --private --data-dir=x")),
            Ok(vec!["serve".into()])
        );
        assert!(
            cli.check(&words("serve --listen 1"))
                .unwrap_err()
                .contains("no --listen")
        );
        assert!(
            cli.check(&words("tokens create"))
                .unwrap_err()
                .contains("no such command")
        );
        assert!(
            cli.check(&words("token create --name a --scope read|admin"))
                .is_ok()
        );
        // `a|b` names several commands: their flags count together.
        assert!(cli.check(&words("serve|token --name")).is_ok());
        assert!(cli.check(&words("serve|tokens")).is_err());
        // A command named only in part: the flags of what is under it.
        assert!(cli.check(&words("token --scope")).is_ok());
        assert!(cli.check(&words("token --port")).is_err());
    }
}
