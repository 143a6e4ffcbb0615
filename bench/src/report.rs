//! What a benchmark hands back, and BENCHMARKS.md made from all of them.

use std::path::Path;

use serde::{Deserialize, Serialize};

/// One benchmark's result: its figures (for later runs and charts) and the
/// Markdown that shows them.
#[derive(Debug, Serialize, Deserialize)]
pub struct Section {
    /// File stem under the output directory, and the order in the report.
    pub name: String,
    pub title: String,
    /// How it was measured, the figures and their ratios, in Markdown.
    pub markdown: String,
    /// The raw figures, for charts and comparisons between runs.
    pub figures: serde_json::Value,
}

impl Section {
    /// Saved as `<name>.json` with when and at which commit it was measured,
    /// so a report made later names them for a file left from another run.
    pub fn save(&self, out: &Path) -> std::io::Result<()> {
        let path = out.join(format!("{}.json", self.name));
        let saved = SavedRef {
            section: self,
            measured: Some(Stamp::now()),
        };
        std::fs::write(path, serde_json::to_vec_pretty(&saved)?)
    }
}

/// When and where a section was measured.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stamp {
    pub date: String,
    pub commit: String,
}

impl Stamp {
    fn now() -> Self {
        Self {
            date: run("date", &["-u", "+%Y-%m-%d %H:%M UTC"]),
            commit: run("git", &["describe", "--always", "--dirty"]),
        }
    }
}

#[derive(Serialize)]
struct SavedRef<'a> {
    #[serde(flatten)]
    section: &'a Section,
    measured: Option<Stamp>,
}

/// A saved section as read back; files from before stamps have none.
#[derive(Deserialize)]
struct Saved {
    #[serde(flatten)]
    section: Section,
    #[serde(default)]
    measured: Option<Stamp>,
}

/// A section read back, its text marked when it was not measured at
/// `current` (a file left in the output directory by an earlier run).
fn as_of(saved: Saved, current: &Stamp) -> Section {
    let mut section = saved.section;
    let note = match &saved.measured {
        Some(stamp) if stamp.commit == current.commit => return section,
        Some(stamp) => format!(
            "*Not re-measured in this run: measured {} at commit {}.*",
            stamp.date, stamp.commit
        ),
        None => {
            "*Not re-measured in this run: left from an earlier run, its date and commit unknown.*"
                .to_string()
        }
    };
    section.markdown = format!("{note}\n\n{}", section.markdown);
    section
}

fn run(cmd: &str, args: &[&str]) -> String {
    std::process::Command::new(cmd)
        .args(args)
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

/// The machine, the date and the commit the figures come from.
fn machine() -> String {
    let read = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
    let cpuinfo = read("/proc/cpuinfo");
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .and_then(|l| l.split(':').nth(1))
        .map_or("unknown CPU".to_string(), |m| m.trim().to_string());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let memory_gib = read("/proc/meminfo")
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|l| l.split_whitespace().next()?.parse::<f64>().ok())
        .map_or(0.0, |kib| kib / 1024.0 / 1024.0);
    let stamp = Stamp::now();
    format!(
        "- Machine: {cores} cores ({model}), {memory_gib:.0} GiB, {} {}, shared with other work (so ratios, not absolutes)\n- Date: {}\n- Commit: {}",
        run("uname", &["-sr"]),
        std::env::consts::ARCH,
        stamp.date,
        stamp.commit,
    )
}

/// The order of sections in the report (others follow, by name).
const ORDER: &[&str] = &["e2e", "cache", "serve", "handlers", "scale", "lambda"];

/// BENCHMARKS.md from every section saved under `out`.
pub fn write(report: &Path, out: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let mut sections = Vec::new();
    let current = Stamp::now();
    for entry in std::fs::read_dir(out)? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "json") {
            let saved: Saved = serde_json::from_slice(&std::fs::read(&path)?)?;
            sections.push(as_of(saved, &current));
        }
    }
    // A section not measured this time keeps its text from the report it
    // replaces, marked as such (with that report's date and commit).
    let previous = std::fs::read_to_string(report).unwrap_or_default();
    sections.extend(kept_sections(&previous, &sections));
    let rank = |name: &str| ORDER.iter().position(|n| *n == name).unwrap_or(ORDER.len());
    sections.sort_by(|a, b| rank(&a.name).cmp(&rank(&b.name)).then(a.name.cmp(&b.name)));
    let mut text = format!(
        "# tfreg benchmarks\n\nEvery figure is measured beside its baseline in the same run, on the machine named below; ratios and medians, not absolute times. Made by `scripts/bench` (all of them) or `target/release/tfreg-bench <name>` then `tfreg-bench report` (one, after `scripts/bench`'s set-up).\n\n{}\n\n",
        machine()
    );
    for section in sections {
        text.push_str(&format!(
            "## {}\n\n{}\n\n",
            section.title,
            section.markdown.trim_end()
        ));
    }
    // Charts go beside the report, under bench/charts/, linked from there.
    let charts = report.parent().unwrap_or(Path::new(".")).join(CHARTS);
    for entry in std::fs::read_dir(out)? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "svg")
            && let Some(name) = path.file_name().and_then(|n| n.to_str())
        {
            std::fs::create_dir_all(&charts)?;
            std::fs::copy(&path, charts.join(name))?;
            text = text.replace(&format!("]({name})"), &format!("]({CHARTS}/{name})"));
        }
    }
    std::fs::write(report, text)?;
    Ok(())
}

/// The sections of a previous report (`## <title>` blocks) whose titles no
/// section of this run has, marked as not re-measured, each named after the
/// benchmark that made it (for [`ORDER`]).
fn kept_sections(previous: &str, measured: &[Section]) -> Vec<Section> {
    let line = |prefix: &str| {
        previous
            .lines()
            .find_map(|l| l.strip_prefix(prefix))
            .unwrap_or("unknown")
            .to_string()
    };
    let (date, commit) = (line("- Date: "), line("- Commit: "));
    let mut kept = Vec::new();
    for block in previous.split("\n## ").skip(1) {
        let (title, body) = block.split_once("\n").unwrap_or((block, ""));
        if measured.iter().any(|s| s.title == title) {
            continue;
        }
        let body = body.trim();
        let body = match body.strip_prefix("*Not re-measured") {
            // Already kept once: its first note stands.
            Some(_) => body.to_string(),
            None => format!(
                "*Not re-measured in this run: as measured for the report of {date} (commit {commit}).*\n\n{body}"
            ),
        };
        let name = match kept_name(title) {
            "" => title.to_string(),
            n => n.to_string(),
        };
        kept.push(Section {
            name,
            title: title.to_string(),
            markdown: body,
            figures: serde_json::Value::Null,
        });
    }
    kept
}

/// The benchmark a report's section title comes from.
fn kept_name(title: &str) -> &'static str {
    match title {
        t if t.starts_with("End to end") => "e2e",
        t if t.starts_with("Pull-through cache") => "cache",
        t if t.starts_with("tfreg serve beside nginx") => "serve",
        t if t.starts_with("Warm per-request cost") => "handlers",
        t if t.starts_with("Versions lists at scale") => "scale",
        t if t.starts_with("Lambda functions") => "lambda",
        _ => "",
    }
}

/// Where charts are kept, relative to the report.
const CHARTS: &str = "bench/charts";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_not_measured_again_are_kept_and_marked() {
        let previous = "# tfreg benchmarks\n\n- Date: 2026-11-23 13:17 UTC\n- Commit: 62d60cf\n\n## End to end: init\n\nold e2e\n\n## Lambda functions: size and cold start\n\nold lambda\n";
        let measured = vec![Section {
            name: "lambda".into(),
            title: "Lambda functions: size and cold start".into(),
            markdown: "new".into(),
            figures: serde_json::Value::Null,
        }];
        let kept = kept_sections(previous, &measured);
        assert_eq!(kept.len(), 1);
        assert_eq!(kept[0].name, "e2e");
        assert_eq!(kept[0].title, "End to end: init");
        assert_eq!(
            kept[0].markdown,
            "*Not re-measured in this run: as measured for the report of 2026-11-23 13:17 UTC (commit 62d60cf).*\n\nold e2e"
        );
        // Kept again later: the first note stands.
        let again = format!(
            "- Date: x\n- Commit: y\n\n## End to end: init\n\n{}\n",
            kept[0].markdown
        );
        assert_eq!(
            kept_sections(&again, &measured)[0].markdown,
            kept[0].markdown
        );
        assert!(kept_sections("", &measured).is_empty());
    }

    #[test]
    fn a_saved_section_from_another_commit_says_so() {
        let section = || Section {
            name: "serve".into(),
            title: "t".into(),
            markdown: "figures".into(),
            figures: serde_json::Value::Null,
        };
        let stamp = |c: &str| Stamp {
            date: "2026-11-27 10:00 UTC".into(),
            commit: c.into(),
        };
        let read = |json: serde_json::Value| -> Saved { serde_json::from_value(json).unwrap() };
        let saved = serde_json::to_value(SavedRef {
            section: &section(),
            measured: Some(stamp("abc")),
        })
        .unwrap();
        assert_eq!(
            as_of(read(saved.clone()), &stamp("abc")).markdown,
            "figures"
        );
        assert_eq!(
            as_of(read(saved), &stamp("def")).markdown,
            "*Not re-measured in this run: measured 2026-11-27 10:00 UTC at commit abc.*\n\nfigures"
        );
        // A file saved before stamps.
        let old = serde_json::to_value(section()).unwrap();
        assert!(
            as_of(read(old), &stamp("def"))
                .markdown
                .starts_with("*Not re-measured in this run: left from an earlier run")
        );
    }
}
