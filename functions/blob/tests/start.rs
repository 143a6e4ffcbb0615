//! The `blob` binary at init without its configuration: it stops at once,
//! naming the variable to set (a Lambda init error the operator can read),
//! and never reaches for the network.

#[test]
fn a_missing_setting_stops_init_and_is_named() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_blob"))
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .output()
        .expect("the function binary runs");
    assert!(!out.status.success(), "init must fail without its settings");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("init failed") && text.contains("is not set (it is required)"),
        "{text}"
    );
}
