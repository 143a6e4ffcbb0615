//! End-to-end access control and release lifecycle with the real Terraform
//! CLI against `tfreg serve --private` over HTTPS on port 443: credentials
//! blocks (1.0.3) and `TF_TOKEN_<host>` (1.11, 1.12), refusals without a token
//! and after a revoke, deprecation warnings in `terraform init`, yanked
//! provider and module versions, and the audit trail of it all.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::support::fixtures::*;
use crate::support::*;

/// Not 127.0.0.77, which `e2e_terraform` serves on 443 at the same time in a
/// whole-suite run. `TF_TOKEN_<host>` cannot name a host with a port (no way
/// to spell `:`), hence 443, where the hostname is the bare address.
const LISTEN: &str = "127.0.0.78:443";
/// `TF_TOKEN_` + the hostname with its dots as `_`.
const TF_TOKEN_VAR: &str = "TF_TOKEN_127_0_0_78";

/// The provider version `.terraform.lock.hcl` in `work` pins.
fn locked_version(work: &Path) -> String {
    let lock = lock_file(work);
    lock.lines()
        .find_map(|l| l.trim().strip_prefix("version"))
        .and_then(|v| v.split('"').nth(1))
        .unwrap_or_else(|| panic!("no version in\n{lock}"))
        .to_string()
}

/// The version of module `key` that `terraform init` installed in `work`.
fn installed_module(work: &Path, key: &str) -> String {
    let text = std::fs::read_to_string(work.join(".terraform/modules/modules.json")).unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    json["Modules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["Key"] == key)
        .and_then(|m| m["Version"].as_str())
        .unwrap_or_else(|| panic!("module {key} not in {text}"))
        .to_string()
}

/// Terraform's output with its line wrapping undone (it wraps messages at 78
/// columns), for phrase assertions.
fn flat(out: &str) -> String {
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `tfreg ARGS` through the server's admin API; its stdout.
fn admin(server: &Server, token: &str, args: &[&str]) -> String {
    let out = server.tfreg(token, args);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    ok(out, &format!("tfreg {}", args.join(" ")));
    stdout
}

#[test]
fn private_registry_tokens_deprecate_yank_audit_with_terraform() {
    let tools = Tools::get();
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let server = Server::start_at(&data, LISTEN, &["--private"]);
    let host = server.host.clone();
    assert_eq!(host, "127.0.0.78");
    let admin_token = server.token("admin", None);
    let publish_token = server.token("publish", Some(NS));
    let read_token = server.token("read", None);
    publish_fixture(&server, &publish_token, tmp.path());

    // --- a. credentials reach the registry: 1.0.3 by a credentials block, ---
    // 1.11 and 1.12 by TF_TOKEN_<host>.
    let tf10 = Terraform::new(
        tools.path("TFREG_TERRAFORM_1_0"),
        &server,
        &credentials(&host, &read_token),
    );
    let tf11 = Terraform::new(tools.path("TFREG_TERRAFORM_1_11"), &server, "");
    let tf12 = Terraform::new(tools.path("TFREG_TERRAFORM_NEW"), &server, "");
    let with_read: &[(&str, &str)] = &[(TF_TOKEN_VAR, &read_token)];
    for (dir, label, tf, env) in [
        ("work-1.0", "1.0.3 (credentials block)", &tf10, &[][..]),
        ("work-1.11", "1.11 (TF_TOKEN_)", &tf11, with_read),
        ("work-1.12", "1.12 (TF_TOKEN_)", &tf12, with_read),
    ] {
        let work = tmp.path().join(dir);
        root_config(&work, &host);
        let started = Instant::now();
        let init = ok(
            tf.run_env(&work, &["init", "-no-color"], env),
            &format!("terraform {label} init against the private registry"),
        );
        eprintln!(
            "FIGURE terraform {label} init (private registry): {:.2} s",
            started.elapsed().as_secs_f64()
        );
        assert!(
            init.contains("Terraform has been successfully initialized"),
            "{init}"
        );
        assert_eq!(locked_version(&work), "2.1.2", "{label}");
        assert_eq!(installed_module(&work, "greeting"), "1.1.0", "{label}");
    }

    // Without a token: refused, and Terraform says so. Modules come first in
    // init, and its module registry client shows the HTTP status.
    let work = tmp.path().join("work-anonymous");
    root_config(&work, &host);
    let out = flat(&fails(
        tf12.run(&work, &["init", "-no-color"]),
        "terraform init without a token",
    ));
    assert!(
        out.contains("error looking up module versions: 401 Unauthorized"),
        "{out}"
    );
    // The provider protocol too (a config with no module): Terraform's own words.
    let provider_only = |dir: &Path| {
        write_tree(
            dir,
            &[(
                "main.tf",
                &format!(
                    "terraform {{\n  required_providers {{\n    null = {{ source = \"{host}/{NS}/null\", version = \"~> 2.1\" }}\n  }}\n}}\n"
                ),
            )],
        )
    };
    let work = tmp.path().join("work-anonymous-provider");
    provider_only(&work);
    let out = flat(&fails(
        tf12.run(&work, &["init", "-no-color"]),
        "terraform init (provider only) without a token",
    ));
    assert!(
        out.contains(&format!("host {host} requires authentication credentials")),
        "{out}"
    );

    // A token that works, then is revoked through the admin API: refused at once.
    let doomed = admin(
        &server,
        &admin_token,
        &["token", "create", "--name", "doomed", "--scope", "read"],
    )
    .trim()
    .to_string();
    let with_doomed: &[(&str, &str)] = &[(TF_TOKEN_VAR, &doomed)];
    let work = tmp.path().join("work-doomed");
    provider_only(&work);
    ok(
        tf11.run_env(&work, &["init", "-no-color"], with_doomed),
        "terraform init with the token to revoke",
    );
    let list: serde_json::Value =
        serde_json::from_str(&admin(&server, &admin_token, &["token", "list", "--json"])).unwrap();
    let id = list["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "doomed")
        .and_then(|t| t["id"].as_str())
        .unwrap_or_else(|| panic!("token doomed not listed: {list}"))
        .to_string();
    let versions = server.url(&format!("/v1/providers/{NS}/null/versions"));
    let status = |token: &str| {
        server
            .http
            .get(&versions)
            .bearer_auth(token)
            .send()
            .unwrap()
            .status()
    };
    assert_eq!(status(&doomed), 200, "cached as valid before the revoke");
    let revoked_at = Instant::now();
    admin(&server, &admin_token, &["token", "revoke", &id]);
    let revoke_took = revoked_at.elapsed();
    while status(&doomed) != 401 {
        assert!(
            revoked_at.elapsed() < Duration::from_secs(5),
            "a token revoked through the server's admin API must be refused at once"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    eprintln!(
        "FIGURE revoke through the admin API to first 401: {:.0} ms (the revoke command itself: {:.0} ms)",
        revoked_at.elapsed().as_secs_f64() * 1000.0,
        revoke_took.as_secs_f64() * 1000.0
    );
    let out = flat(&fails(
        tf11.run_env(&work, &["init", "-no-color"], with_doomed),
        "terraform init with a revoked token",
    ));
    assert!(
        out.contains(&format!(
            "host {host} rejected the given authentication credentials"
        )),
        "{out}"
    );
    eprintln!(
        "FIGURE revoke to terraform init refused: {:.2} s",
        revoked_at.elapsed().as_secs_f64()
    );

    // --- b. deprecation: init warns, and still installs the version ----------
    admin(
        &server,
        &admin_token,
        &[
            "deprecate",
            "provider",
            &format!("{NS}/null"),
            "2.1.2",
            "--message",
            "use 3.x",
        ],
    );
    let work11 = tmp.path().join("work-1.11");
    let init = flat(&ok(
        tf11.run_env(&work11, &["init", "-no-color"], with_read),
        "terraform 1.11 init after the deprecation",
    ));
    for line in [
        "Warning: Additional provider information from registry",
        &format!("The remote registry returned warnings for {host}/{NS}/null:"),
        "- version 2.1.2 is deprecated: use 3.x",
    ] {
        assert!(init.contains(line), "{line:?} expected in:\n{init}");
    }
    assert_eq!(locked_version(&work11), "2.1.2");
    // A fresh directory installs the deprecated version too.
    let work = tmp.path().join("work-deprecated-fresh");
    root_config(&work, &host);
    let init = flat(&ok(
        tf11.run_env(&work, &["init", "-no-color"], with_read),
        "terraform 1.11 init (fresh) after the deprecation",
    ));
    assert!(
        init.contains("- version 2.1.2 is deprecated: use 3.x"),
        "{init}"
    );
    assert!(
        init.contains("Installed") && init.contains("v2.1.2"),
        "{init}"
    );
    assert_eq!(locked_version(&work), "2.1.2");

    // --- c. yank: a newer 2.1.3 is published, locked, then yanked -----------
    let dist = tmp.path().join("dist-2.1.3");
    provider_dist(
        &dist,
        "null",
        "2.1.3",
        &["linux_amd64"],
        &Gpg::new("rsa2048"),
    );
    ok(
        server.publish_provider(&publish_token, &dist, NS, &[]),
        "publish provider 2.1.3",
    );
    ok(
        tf11.run_env(&work11, &["init", "-upgrade", "-no-color"], with_read),
        "terraform init -upgrade to 2.1.3",
    );
    assert_eq!(locked_version(&work11), "2.1.3");
    admin(
        &server,
        &admin_token,
        &[
            "yank",
            "provider",
            &format!("{NS}/null"),
            "2.1.3",
            "--message",
            "broken build",
        ],
    );
    admin(
        &server,
        &admin_token,
        &["yank", "module", &format!("{NS}/greeting/null"), "1.1.0"],
    );
    // A fresh configuration skips both yanked versions.
    let work = tmp.path().join("work-yanked-fresh");
    root_config(&work, &host);
    ok(
        tf11.run_env(&work, &["init", "-no-color"], with_read),
        "terraform init (fresh) after the yanks",
    );
    assert_eq!(
        locked_version(&work),
        "2.1.2",
        "~> 2.1 must skip yanked 2.1.3"
    );
    assert_eq!(
        installed_module(&work, "greeting"),
        "1.0.0",
        "~> 1.0 must skip yanked 1.1.0"
    );
    // A directory whose lock file pins the yanked version: Terraform refuses
    // (documented: yank what must not be installed again).
    let out = flat(&fails(
        tf11.run_env(&work11, &["init", "-no-color"], with_read),
        "terraform init with the yanked version in the lock file",
    ));
    assert!(
        out.contains("the previously-selected version 2.1.3 is no longer available"),
        "{out}"
    );
    // An exact download of the yanked version still answers.
    let download = server
        .http
        .get(server.url(&format!(
            "/v1/providers/{NS}/null/2.1.3/download/linux/amd64"
        )))
        .bearer_auth(&read_token)
        .send()
        .unwrap();
    assert_eq!(download.status(), 200);
    admin(
        &server,
        &admin_token,
        &["yank", "provider", &format!("{NS}/null"), "2.1.3", "--undo"],
    );
    ok(
        tf11.run_env(&work11, &["init", "-no-color"], with_read),
        "terraform init after yank --undo",
    );
    assert_eq!(locked_version(&work11), "2.1.3");

    // --- d. the audit trail names the admin token for every change ----------
    let out = std::process::Command::new(crate::support::tools::tfreg_bin())
        .args(["audit", "--json", "--data-dir"])
        .arg(&data)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    ok(out, "tfreg audit --data-dir");
    let audit: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let events = audit["events"].as_array().unwrap();
    for (action, target) in [
        ("token.revoke", format!("token {id}")),
        ("release.deprecate", format!("{NS}/null/2.1.2")),
        ("release.yank", format!("{NS}/null/2.1.3")),
        ("release.yank", format!("{NS}/greeting/null/1.1.0")),
        ("release.unyank", format!("{NS}/null/2.1.3")),
    ] {
        let found = events.iter().any(|e| {
            e["action"] == action
                && e["target"].as_str().unwrap_or("").contains(&target)
                && e["actor"]["token_name"] == "test-admin"
                && e["outcome"] == "ok"
        });
        assert!(
            found,
            "{action} of {target} by test-admin expected in {}",
            serde_json::to_string_pretty(&audit).unwrap()
        );
    }
}
