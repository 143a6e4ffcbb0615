//! The OpenID Provider the sign-in tests stand on (npm `oidc-provider`,
//! started by `tests/oidc/provider.mjs`), proved end to end with curl by
//! `tests/oidc/drive.sh`: a code flow with PKCE S256 and a nonce through its
//! login and consent forms, the ID token's groups and nonce, a used code and
//! a wrong verifier refused, unknown users refused, a key rotation seen in
//! the next ID token. The script fails on the first thing that is not so.

use std::process::Command;

use crate::support::tools::Tools;

#[test]
fn the_openid_provider_fixture_signs_users_in_and_refuses_what_it_must() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let provider = Tools::get().path("TFREG_OIDC_PROVIDER");
    let out = Command::new("bash")
        .arg(root.join("tests/oidc/drive.sh"))
        .env("TFREG_OIDC_PROVIDER", provider)
        .output()
        .expect("bash runs tests/oidc/drive.sh");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "drive.sh failed: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    for seen in [
        "POST /token -> 200",
        "\"groups\":[",
        "invalid_grant",
        "\"kid\":\"rsa-2\"",
    ] {
        assert!(stdout.contains(seen), "{seen} not in:\n{stdout}");
    }
}
