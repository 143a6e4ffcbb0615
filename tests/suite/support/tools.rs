//! The real tools the suite drives, installed by `.ci/install-tools`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Paths of the external tools, from `.tools/env` (written by `.ci/install-tools`)
/// or the same variables in the environment. Missing tools fail the test.
pub struct Tools {
    vars: HashMap<String, String>,
}

impl Tools {
    pub fn get() -> &'static Tools {
        static TOOLS: OnceLock<Tools> = OnceLock::new();
        TOOLS.get_or_init(|| {
            let mut vars = HashMap::new();
            let env_file = Path::new(env!("CARGO_MANIFEST_DIR")).join(".tools/env");
            if let Ok(text) = std::fs::read_to_string(&env_file) {
                for line in text.lines() {
                    if let Some((k, v)) =
                        line.strip_prefix("export ").and_then(|l| l.split_once('='))
                    {
                        vars.insert(k.to_string(), v.trim_matches('"').to_string());
                    }
                }
            }
            for (k, v) in std::env::vars() {
                if k.starts_with("TFREG_") {
                    vars.insert(k, v);
                }
            }
            Tools { vars }
        })
    }

    /// A tool's path; panics (failing the test) when it is not installed.
    pub fn path(&self, var: &str) -> PathBuf {
        let p = self.vars.get(var).map(PathBuf::from).unwrap_or_else(|| {
            panic!("{var} is not set: run .ci/install-tools (scripts/test does) to install the test tools")
        });
        assert!(
            p.exists(),
            "{var}={} does not exist: run .ci/install-tools",
            p.display()
        );
        p
    }
}

pub use tfreg_testkit::require_emulators;

/// Path of the `tfreg` binary under test.
pub fn tfreg_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_tfreg"))
}

/// `tfreg ARGS` on `r`'s stores (its data directory, or its table and
/// bucket on the emulators), from a test on the tokio runtime: whether it
/// succeeded, and its stdout and stderr.
pub fn tfreg_on_stores(r: &tfreg_testkit::TestRegistry, args: &[&str]) -> (bool, String) {
    let out = tokio::task::block_in_place(|| {
        std::process::Command::new(tfreg_bin())
            .args(args)
            .args(r.store_args())
            .output()
            .expect("run tfreg")
    });
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}
