//! The `fill` binary at init without its configuration.

#[test]
fn a_missing_setting_stops_init_and_is_named() {
    tfreg_testkit::function_stops_without_settings(env!("CARGO_BIN_EXE_fill"));
}
