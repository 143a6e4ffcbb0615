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
    pub fn save(&self, out: &Path) -> std::io::Result<()> {
        let path = out.join(format!("{}.json", self.name));
        std::fs::write(path, serde_json::to_vec_pretty(self)?)
    }
}

/// The order of sections in the report (others follow, by name).
const ORDER: &[&str] = &[];

/// BENCHMARKS.md from every section saved under `out`.
pub fn write(report: &Path, out: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let mut sections = Vec::new();
    for entry in std::fs::read_dir(out)? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "json") {
            let section: Section = serde_json::from_slice(&std::fs::read(&path)?)?;
            sections.push(section);
        }
    }
    let rank = |name: &str| ORDER.iter().position(|n| *n == name).unwrap_or(ORDER.len());
    sections.sort_by(|a, b| rank(&a.name).cmp(&rank(&b.name)).then(a.name.cmp(&b.name)));
    let mut text = String::from(
        "# tfreg benchmarks\n\nEvery figure is measured beside its baseline in the same run, on the machine named below; ratios and medians, not absolute times. Made by `scripts/bench`.\n\n",
    );
    for section in sections {
        text.push_str(&format!(
            "## {}\n\n{}\n\n",
            section.title,
            section.markdown.trim_end()
        ));
    }
    std::fs::write(report, text)?;
    Ok(())
}
