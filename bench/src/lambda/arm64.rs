//! The deployed architecture's zips, when infra/check-cargo-lambda built
//! them with the full release profile: each function's, and the
//! baselines' from the same `cargo lambda build`.

use super::*;

/// Where `TFREG_CARGO_LAMBDA_FULL=1 infra/check-cargo-lambda arm64` leaves
/// cargo lambda's zips (`<name>/bootstrap.zip`), the binaries it extracted
/// from them (`<name>/bootstrap`) and the baseline it built beside the
/// panic probe (`lambda-hello/bootstrap`, `lambda-hello-dynamodb/bootstrap`).
const ARM64: &str = "target/sam-arm64-full/cargo-lambda";

#[derive(Serialize)]
pub(super) struct Arm64 {
    /// Each function's binary and zip, then the baselines'.
    sizes: Vec<Size>,
    /// The oldest zip's age when this ran, in hours (it may be older than the code).
    age_hours: f64,
}

/// The arm64 sizes, if infra/check-cargo-lambda has built them with the full profile.
pub(super) fn arm64_zip() -> Result<Option<Arm64>, BoxError> {
    let dir = workspace().join(ARM64);
    let mut sizes = Vec::new();
    let mut age_hours: f64 = 0.0;
    for name in binaries(false) {
        let zip = dir.join("zips").join(name).join("bootstrap.zip");
        let Ok(meta) = std::fs::metadata(&zip) else {
            return Ok(None);
        };
        let age = meta
            .modified()?
            .elapsed()
            .map_or(0.0, |d| d.as_secs_f64() / 3600.0);
        age_hours = age_hours.max(age);
        sizes.push(Size {
            binary: name.to_string(),
            bytes: std::fs::metadata(dir.join("bin").join(name).join("bootstrap"))?.len(),
            zipped: meta.len(),
        });
    }
    for (_, name) in BASELINES {
        match std::fs::read(dir.join("probe").join(name).join("bootstrap")) {
            Ok(bytes) => sizes.push(Size {
                binary: name.to_string(),
                bytes: bytes.len() as u64,
                zipped: zipped_size(&bytes)?,
            }),
            // The hello-world is the ratios' base; the DynamoDB baseline
            // may be missing from a build older than it.
            Err(_) if name == HELLO => return Ok(None),
            Err(_) => {}
        }
    }
    Ok(Some(Arm64 { sizes, age_hours }))
}

pub(super) fn arm64_markdown(arm64: Option<&Arm64>) -> String {
    let how = "`TFREG_CARGO_LAMBDA_FULL=1 infra/check-cargo-lambda arm64` (the README's `cargo lambda build --release --arm64 --output-format zip` of the seven function packages in one compile, zig-linked, every function then started from its zip through qemu-aarch64; the baselines built by the same command beside the panic probe)";
    match arm64 {
        Some(a) => {
            let mut text = format!(
                "\n**arm64, as deployed** (full release profile), built {:.1} h before this run by {how}. Zipped: cargo lambda's zip for the functions, deflate level 9 of the same `bootstrap` for the baselines.\n\n{SIZE_HEADER}",
                a.age_hours,
            );
            text.push_str(&size_rows(&a.sizes));
            text
        }
        None => format!("\n**arm64, as deployed**: not measured in this run; {how} builds it.\n"),
    }
}
