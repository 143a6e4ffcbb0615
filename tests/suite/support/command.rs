//! Running commands and checking how they ended.

use std::process::Output;

/// Assert a command succeeded, showing its output when not.
pub fn ok(out: Output, what: &str) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    format!("{stdout}{stderr}")
}

/// Assert a command failed, returning its output.
pub fn fails(out: Output, what: &str) -> String {
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out.status.success(), "{what} should have failed:\n{text}");
    text
}

/// What a command printed: its stdout, then its stderr.
pub fn said(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `infra/smoke-test`, the check an operator runs against a deployed
/// registry, at `https://host` trusting `ca`, with `token` and `args`.
pub fn smoke_test(
    host: &str,
    ca: &std::path::Path,
    token: &str,
    args: &[&str],
) -> std::process::Output {
    std::process::Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/infra/smoke-test"))
        .arg(format!("https://{host}"))
        .args(["--cacert", ca.to_str().unwrap(), "--token", token])
        .args(args)
        .output()
        .unwrap()
}

/// [`smoke_test`] of `provider` and `module` passes every check: the
/// archive's HEAD and GET, its sha256, the mirror and the module's tar.gz.
pub fn smoke_test_passes(
    host: &str,
    ca: &std::path::Path,
    token: &str,
    provider: &str,
    module: &str,
) {
    let out = smoke_test(
        host,
        ca,
        token,
        &["--provider", provider, "--module", module],
    );
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "infra/smoke-test at {host}:\n{said}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for check in [
        "provider archive: HEAD 200",
        "sha256 matches",
        "mirror archive",
        "module archive is a tar.gz",
    ] {
        assert!(said.contains(check), "{check}:\n{said}");
    }
}
