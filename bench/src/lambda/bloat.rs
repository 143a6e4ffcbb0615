//! The largest crates in each function's binary, by `cargo bloat --crates`
//! (installed by scripts/bench): the release profile with its symbols kept
//! (`-C strip=none`, in a target directory of its own, so the shipped
//! binaries are not replaced), the code of each crate in the `.text` section.

use super::*;

/// How many crates each binary lists.
const TOP: usize = 8;

#[derive(Serialize, serde::Deserialize)]
pub(super) struct Bloat {
    #[serde(default)]
    binary: String,
    #[serde(rename = "text-section-size")]
    text: u64,
    crates: Vec<CrateSize>,
}

#[derive(Serialize, serde::Deserialize)]
struct CrateSize {
    name: String,
    size: u64,
}

/// `cargo bloat` of each function package alone (as the functions are
/// built), then of the baselines.
pub(super) fn bloat() -> Result<Vec<Bloat>, BoxError> {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("target"))
        .join("bloat");
    let mut packages: Vec<(String, &str)> = binaries(false)
        .into_iter()
        .map(|name| (format!("tfreg-function-{name}"), name))
        .collect();
    packages.extend(BASELINES.map(|(package, binary)| (package.to_string(), binary)));
    let mut out = Vec::new();
    for (package, binary) in packages {
        eprintln!(
            "lambda: cargo bloat -p {package} --bin {binary} (release profile, symbols kept)"
        );
        let output = std::process::Command::new(std::env::var("CARGO").unwrap_or("cargo".into()))
            .current_dir(workspace())
            .env("CARGO_TARGET_DIR", &target)
            // The functions' own profiles strip (Cargo.toml); rustc's last
            // `-C strip` wins, and RUSTFLAGS come last.
            .env("RUSTFLAGS", "-C strip=none")
            .args([
                "bloat",
                "--release",
                "--locked",
                "-p",
                &package,
                "--bin",
                binary,
            ])
            .args([
                "--crates",
                "-n",
                &TOP.to_string(),
                "--message-format",
                "json",
            ])
            .output()?;
        if !output.status.success() {
            return Err(format!(
                "cargo bloat -p {package} failed (scripts/bench installs cargo-bloat): {}",
                String::from_utf8_lossy(&output.stderr)
            )
            .into());
        }
        out.push(parse(binary, &output.stdout)?);
    }
    Ok(out)
}

/// cargo bloat's JSON: the `.text` size and the crates, largest first.
fn parse(binary: &str, json: &[u8]) -> Result<Bloat, BoxError> {
    let line = json
        .split(|b| *b == b'\n')
        .rfind(|l| l.starts_with(b"{"))
        .ok_or("cargo bloat printed no JSON")?;
    let mut bloat: Bloat = serde_json::from_slice(line)?;
    bloat.binary = binary.to_string();
    bloat.crates.truncate(TOP);
    Ok(bloat)
}

/// The table, or a line saying `--no-bloat` left it out.
pub(super) fn bloat_markdown(bloats: Option<&[Bloat]>) -> String {
    let Some(bloats) = bloats else {
        return "\n**The largest crates in each binary**: not measured in this run (`--no-bloat`).\n".into();
    };
    let mut text = format!(
        "\n**The largest crates in each binary** (x86_64; `cargo bloat --crates`, the release profile with symbols kept: each crate's code in `.text`, in KB, the top {TOP}):\n\n| binary | .text (KB) | largest crates (KB) |\n|---|---:|---|\n"
    );
    for b in bloats {
        let crates: Vec<String> = b
            .crates
            .iter()
            .map(|c| format!("{} {:.0}", c.name, c.size as f64 / 1000.0))
            .collect();
        text.push_str(&format!(
            "| `{}` | {:.0} | {} |\n",
            b.binary,
            b.text as f64 / 1000.0,
            crates.join(", ")
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cargo_bloats_json_is_read_after_its_build_lines() {
        let out = b"   Compiling x v0.1.0\n{\"file-size\":100,\"text-section-size\":60,\"crates\":[{\"name\":\"std\",\"size\":30},{\"name\":\"tokio\",\"size\":20}]}\n";
        let b = parse("read", out).unwrap();
        assert_eq!(b.binary, "read");
        assert_eq!(b.text, 60);
        assert_eq!(b.crates.len(), 2);
        assert_eq!(b.crates[0].name, "std");
        let md = bloat_markdown(Some(&[b]));
        assert!(md.contains("| `read` | 0 | std 0, tokio 0 |"), "{md}");
        assert!(parse("read", b"no json here").is_err());
    }
}
