//! The deployed architecture's zip, when infra/check-cargo-lambda built it
//! with the full release profile.

use super::*;

/// Where `TFREG_SAM_FULL=1 infra/check-build arm64` and then
/// `TFREG_CARGO_LAMBDA_FULL=1 infra/check-cargo-lambda arm64` leave the
/// deployed architecture's zip, built with the full release profile.
const ARM64_ZIP: &str = "target/sam-arm64-full/cargo-lambda/zips/lambda/bootstrap.zip";
const ARM64_SAM_BOOTSTRAP: &str = "target/sam-arm64-full/build";

#[derive(Serialize)]
pub(super) struct Arm64 {
    zip: u64,
    bootstrap: u64,
    /// The zip's age when this ran, in hours (it may be older than the code).
    age_hours: f64,
}

/// The arm64 zip's size, if infra/check-cargo-lambda has built it with the full profile.
pub(super) fn arm64_zip() -> Result<Option<Arm64>, BoxError> {
    let zip = workspace().join(ARM64_ZIP);
    let Ok(meta) = std::fs::metadata(&zip) else {
        return Ok(None);
    };
    let mut bootstrap = 0;
    if let Ok(dirs) = std::fs::read_dir(workspace().join(ARM64_SAM_BOOTSTRAP)) {
        for dir in dirs.flatten() {
            if let Ok(m) = std::fs::metadata(dir.path().join("bootstrap")) {
                bootstrap = m.len();
            }
        }
    }
    let age_hours = meta
        .modified()?
        .elapsed()
        .map_or(0.0, |d| d.as_secs_f64() / 3600.0);
    Ok(Some(Arm64 {
        zip: meta.len(),
        bootstrap,
        age_hours,
    }))
}

pub(super) fn arm64_markdown(arm64: Option<&Arm64>) -> String {
    let how = "`TFREG_SAM_FULL=1 infra/check-build arm64` (sam build, which asserts that the ten functions share one compile) and then `TFREG_CARGO_LAMBDA_FULL=1 infra/check-cargo-lambda arm64` (cargo lambda's zip from the same compile, every function started from it through qemu-aarch64)";
    match arm64 {
        Some(a) => format!(
            "\n**arm64, as deployed** (full release profile, zig-linked by cargo lambda): `bootstrap` {:.2} MB from `sam build`, cargo lambda's zip {:.2} MB; built {:.1} h before this run by {how}.\n",
            mb(a.bootstrap),
            mb(a.zip),
            a.age_hours,
        ),
        None => format!("\n**arm64, as deployed**: not measured in this run; {how} build it.\n"),
    }
}
