//! The README as a new user follows it: a fresh copy of the repository in a
//! new directory (no `.tools/`, `target/` or `tfreg-data/`; it builds into
//! the suite's target directory, see `user_env`), a new home, a
//! project directory of their own, and each marked block run as pasted, in
//! the README's order. What a reader fills in (their provider's `dist/`,
//! their module, their stack's table, a token id they looked up) is made or
//! looked up here; nothing else is changed.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use super::blocks::{Readme, commands};
use super::dist::{provider_dist, provider_zip, write_tree};
use super::gpg::Gpg;
use super::shell::{Background, Session, printed_under};
use super::tools::Tools;

/// What `tfreg serve` and `scripts/lambda-local` print above the lines to paste.
const PASTE: &str = "Paste into the shell you run terraform";
const THEN_PUBLISH: &str = "Then publish, from your project's directory:";
/// A first build of the CLI and the functions on 2 cores, with room to spare.
const BUILD: Duration = Duration::from_secs(40 * 60);
const STOP: Duration = Duration::from_secs(30);

/// Records which marked blocks the walk ran.
struct Walk<'a> {
    readme: &'a Readme,
    ran: Vec<String>,
}

impl<'a> Walk<'a> {
    /// A marked block a script of CI runs instead of the walk: the script
    /// must read it from the README by its mark.
    fn elsewhere(&mut self, name: &str, script: &str) {
        let block = self.readme.block(name);
        let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(script))
            .unwrap_or_else(|e| panic!("{script}: {e}"));
        assert!(
            text.contains(&format!("test={name}")),
            "README.md:{}: test={name} is said to run in {script}, which does not read it",
            block.line
        );
        self.ran.push(name.to_string());
    }

    fn block(&mut self, name: &str, lang: &str) -> &'a str {
        let block = self.readme.block(name);
        assert_eq!(
            block.lang, lang,
            "README.md:{}: test={name} should be a {lang} block",
            block.line
        );
        self.ran.push(name.to_string());
        eprintln!("--- README.md:{} test={name}", block.line);
        &block.text
    }
}

pub fn walk(readme: &Readme) {
    let tools = Tools::get();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let tmp = tempfile::Builder::new()
        .prefix("readme-walk")
        .tempdir()
        .unwrap();
    let t = tmp.path();
    let clone = t.join("tfreg");
    fresh_copy(root, &clone);
    let home = t.join("home");
    let bin = t.join("bin");
    for dir in [&home, &bin] {
        std::fs::create_dir_all(dir).unwrap();
    }
    // The reader has Terraform installed.
    std::os::unix::fs::symlink(tools.path("TFREG_TERRAFORM_NEW"), bin.join("terraform")).unwrap();
    let env = user_env(&home, &bin);
    let mut walk = Walk {
        readme,
        ran: Vec::new(),
    };

    // ## Try it
    let project = t.join("project");
    let gpg = Gpg::new("rsa2048");
    readers_files(&project, &gpg);
    let serve = walk.block("serve", "sh");
    let mut serve = Background::start("serve", serve, &clone, &env, &t.join("serve.log"));
    let printed = serve.wait_for(BUILD, |out| out.contains(THEN_PUBLISH));
    let paste = printed_under(&printed, PASTE);
    assert!(
        !paste.is_empty(),
        "serve printed nothing to paste:\n{printed}"
    );
    let shell = Session::new("shell", t, &project, &env);
    shell.run(&paste.join("\n"));
    assert!(
        shell.var("TFREG_TOKEN").starts_with("tfreg_"),
        "the pasted lines set no token"
    );
    for var in ["SSL_CERT_FILE", "TF_CLI_CONFIG_FILE"] {
        let path = shell.var(var);
        assert!(
            Path::new(&path).is_absolute() && Path::new(&path).exists(),
            "{var}={path}"
        );
    }
    shell.run(walk.block("publish", "sh"));
    std::fs::write(project.join("main.tf"), walk.block("main.tf", "hcl")).unwrap();
    let applied = shell.run(walk.block("init", "sh"));
    assert!(
        applied.contains("Apply complete! Resources: 1 added"),
        "{applied}"
    );
    assert!(
        std::fs::read_to_string(project.join(".terraform.lock.hcl"))
            .unwrap()
            .contains("provider \"127.0.0.1:8443/acme/null\""),
        "the lock file names the provider from the registry"
    );

    shell.run(walk.block("mirror-import", "sh"));
    let config = shell.var("TF_CLI_CONFIG_FILE");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text += walk.block("mirror-config", "hcl");
    std::fs::write(&config, text).unwrap();
    // A configuration of the reader's that uses a public provider: through the mirror.
    let elsewhere = project.join("uses-hashicorp-null");
    write_tree(
        &elsewhere,
        &[(
            "main.tf",
            "terraform {\n  required_providers {\n    null = { source = \"hashicorp/null\", version = \"2.1.2\" }\n  }\n}\n",
        )],
    );
    let mirrored = Session::new("shell", t, &elsewhere, &shell.env()).run("terraform init");
    assert!(
        mirrored.contains("Installed hashicorp/null v2.1.2"),
        "{mirrored}"
    );
    let status = serve.interrupt(STOP);
    assert!(status.success(), "serve after Ctrl-C: {status}");

    // ### Run the Lambda functions locally
    let mut local_env = env.clone();
    // The tools the suite installed: one install for both (the issue allows a shared cache).
    local_env.push((
        "TFREG_TOOLS_DIR".into(),
        tools.path("TFREG_TOOLS_DIR").display().to_string(),
    ));
    let local = walk.block("lambda-local", "sh");
    let mut local = Background::start(
        "lambda-local",
        local,
        &clone,
        &local_env,
        &t.join("lambda-local.log"),
    );
    let printed = local.wait_for(BUILD, |out| out.contains("Ctrl-C stops"));
    let url = printed
        .split_whitespace()
        .find(|w| w.starts_with("https://127.0.0.1:"))
        .expect("lambda-local names its URL")
        .to_string();
    let host = url.trim_start_matches("https://").to_string();
    let project2 = t.join("project-2");
    write_tree(
        &project2,
        &[(
            "my-module/main.tf",
            "output \"greeting\" { value = \"hello\" }\n",
        )],
    );
    let shell2 = Session::new("shell-2", t, &project2, &env);
    shell2.run(&printed_under(&printed, PASTE).join("\n"));
    let publish = printed_under(&printed, THEN_PUBLISH);
    assert_eq!(publish.len(), 1, "one publish command: {publish:?}");
    shell2.run(&publish[0]);
    // Terraform with the printed credentials (the functions' reads are private).
    write_tree(
        &project2,
        &[(
            "main.tf",
            &format!(
                "module \"vpc\" {{\n  source  = \"{host}/acme/vpc/aws\"\n  version = \"1.0.0\"\n}}\n"
            ),
        )],
    );
    let init = shell2.run("terraform init");
    assert!(
        init.contains("Terraform has been successfully initialized"),
        "{init}"
    );

    // ## Access control: the admin examples, on the functions' own stores
    // and admin API. What the reader fills in: their stack's table and
    // bucket with their AWS credentials (here the emulators'), their
    // registry's URL, their releases, a key file, and ids they look up.
    let data = clone.join("tfreg-lambda-data");
    let mut aws = read_env_file(&data.join("emulators/emulators.env"));
    aws.extend([
        ("TABLE".to_string(), "tfreg".to_string()),
        ("BUCKET".to_string(), "tfreg".to_string()),
        ("TFREG_S3_FORCE_PATH_STYLE".to_string(), "true".to_string()),
    ]);
    let assignments: String = aws
        .iter()
        .map(|(k, v)| format!("export {k}={}\n", super::shell::quote(v)))
        .collect();
    shell2.run(&assignments);
    let widget = project2.join("widget");
    for version in ["1.2.0", "1.3.0"] {
        let dist = widget.join(version);
        provider_dist(&dist, "widget", version, &["linux_amd64"], &gpg);
        shell2.run(&format!(
            "tfreg publish provider {} --registry {url} --namespace acme --signing-key {}",
            dist.display(),
            dist.join("key.asc").display()
        ));
    }
    write_tree(&project2, &[("old-vpc/main.tf", "# 0.9\n")]);
    shell2.run(&format!(
        "tfreg publish module ./old-vpc --registry {url} --namespace acme --name vpc --system aws --version 0.9.0"
    ));
    let new_key = Gpg::new("rsa2048");
    new_key.export(&project2.join("new-key.asc"));
    let key_id = new_key.fingerprint[new_key.fingerprint.len() - 16..].to_string();
    let admin = walk.block("admin", "sh");
    let mut placeholders = vec![
        ("https://registry.example.com", url.clone()),
        ("0123456789ABCDEF", key_id),
        ("3f2a9c01b7de", String::new()),
    ];
    for (placeholder, _) in &placeholders {
        assert!(
            admin.contains(placeholder),
            "the admin block no longer has {placeholder}: update the walk"
        );
    }
    for command in commands(admin) {
        if command.contains("3f2a9c01b7de") {
            // The reader reads the id off `tfreg token list`.
            let list: serde_json::Value = serde_json::from_str(&shell2.run(&format!(
                "tfreg token list --registry {url} --json 2>/dev/null"
            )))
            .unwrap();
            let id = list["tokens"]
                .as_array()
                .unwrap()
                .iter()
                .find(|t| t["name"] == "laptops")
                .expect("the token the block created")["id"]
                .as_str()
                .unwrap()
                .to_string();
            placeholders[2].1 = id;
        }
        let mut line = command.clone();
        for (placeholder, value) in &placeholders {
            line = line.replace(placeholder, value);
        }
        shell2.run(&line);
    }
    let tokens = shell2.run(&format!("tfreg token list --registry {url}"));
    assert!(
        tokens.contains("ci-acme") && !tokens.contains("laptops"),
        "{tokens}"
    );
    let audit = shell2.run(&format!("tfreg audit --registry {url} --limit 20"));
    for action in ["deprecate", "yank", "delete"] {
        assert!(audit.contains(action), "no {action} in the audit:\n{audit}");
    }
    let status = local.interrupt(STOP);
    assert!(
        matches!(status.code(), Some(0 | 130)),
        "lambda-local after Ctrl-C: {status}"
    );
    for pid_file in ["s3s-fs.pid", "dynalite.pid"] {
        if let Ok(pid) = std::fs::read_to_string(data.join("emulators").join(pid_file)) {
            assert!(
                !Path::new(&format!("/proc/{}", pid.trim())).exists(),
                "{pid_file}: the emulator still runs after Ctrl-C"
            );
        }
    }
    assert!(
        !clone.join(".tools").exists(),
        "lambda-local installed tools into the clone, not TFREG_TOOLS_DIR"
    );

    // Run by CI elsewhere, as pasted: the arm64 build needs the cross
    // toolchain and minutes of its own.
    walk.elsewhere("cargo-lambda-build", "infra/check-cargo-lambda");
    // Against a stack on moto's server, beside the walk.
    walk.elsewhere("cargo-lambda-deploy", "tests/readme/deploy.rs");

    let mut ran = walk.ran.clone();
    ran.sort();
    let mut marked: Vec<String> = readme.names().iter().map(|s| s.to_string()).collect();
    marked.sort();
    assert_eq!(
        ran, marked,
        "every block marked test=NAME is walked, and only those"
    );
}

/// A copy of the repository as a fresh clone has it: the files git knows
/// (committed, or new and not ignored), nothing built or installed.
fn fresh_copy(root: &Path, dest: &Path) {
    let out = Command::new("git")
        .args([
            "ls-files",
            "-z",
            "--cached",
            "--others",
            "--exclude-standard",
        ])
        .current_dir(root)
        .output()
        .unwrap();
    assert!(out.status.success(), "git ls-files in {}", root.display());
    for rel in out.stdout.split(|b| *b == 0).filter(|r| !r.is_empty()) {
        let rel = Path::new(std::str::from_utf8(rel).unwrap());
        let from = root.join(rel);
        if !from.exists() {
            continue; // deleted in the work tree
        }
        let to = dest.join(rel);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(&from, &to).unwrap();
    }
    for built in [
        ".tools",
        "target",
        "tfreg-data",
        "tfreg-lambda-data",
        ".aws-sam",
    ] {
        assert!(!dest.join(built).exists(), "the fresh copy has {built}/");
    }
}

/// A new user's environment: their own home, the system's programs, Rust's
/// toolchain, Terraform.
pub fn user_env(home: &Path, bin: &Path) -> Vec<(String, String)> {
    let real_home = PathBuf::from(std::env::var("HOME").unwrap_or_else(|_| "/root".into()));
    // Where rustup's installer puts cargo and rustup (a reader's PATH has
    // it), else the directory of the cargo running this test.
    let cargo_home = std::env::var("CARGO_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|_| real_home.join(".cargo"));
    let cargo_dir = if cargo_home.join("bin/cargo").exists() {
        cargo_home.join("bin")
    } else {
        let cargo = PathBuf::from(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
        cargo.parent().map(Path::to_path_buf).unwrap_or_default()
    };
    let mut env = vec![
        ("HOME".to_string(), home.display().to_string()),
        (
            "PATH".to_string(),
            format!(
                "{}:{}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                bin.display(),
                cargo_dir.display()
            ),
        ),
        ("LANG".to_string(), "C.UTF-8".to_string()),
        // No calls to HashiCorp's version check from this machine.
        ("CHECKPOINT_DISABLE".to_string(), "1".to_string()),
    ];
    for (var, default) in [("CARGO_HOME", ".cargo"), ("RUSTUP_HOME", ".rustup")] {
        let value =
            std::env::var(var).unwrap_or_else(|_| real_home.join(default).display().to_string());
        env.push((var.to_string(), value));
    }
    if let Ok(jobs) = std::env::var("CARGO_BUILD_JOBS") {
        env.push(("CARGO_BUILD_JOBS".to_string(), jobs));
    }
    // The suite's own target directory: the copy resolves and builds its
    // commands itself and compiles its own crates from its own files, but
    // the dependencies `cargo test --workspace` built with the same features
    // (tests/workspace-hack, tests/suite/shared_build.rs) are not compiled
    // twice. Built earlier in this same run, never kept between runs: CI's
    // clean clone starts it empty.
    let suite_target = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("CARGO_TARGET_TMPDIR is <target>/tmp");
    env.push((
        "CARGO_TARGET_DIR".to_string(),
        suite_target.display().to_string(),
    ));
    env
}

/// What the reader brings to "Try it": a provider built and signed by
/// goreleaser, its public key, a module, and a mirror directory made by
/// `terraform providers mirror` where they have internet.
fn readers_files(project: &Path, gpg: &Gpg) {
    provider_dist(
        &project.join("dist"),
        "null",
        "1.0.0",
        &["linux_amd64"],
        gpg,
    );
    gpg.export(&project.join("signing-key.asc"));
    write_tree(
        project,
        &[(
            "modules/vpc/main.tf",
            "variable \"cidr\" {\n  default = \"10.0.0.0/16\"\n}\n\noutput \"cidr\" {\n  value = var.cidr\n}\n",
        )],
    );
    let mirrored = project.join("mirror/registry.terraform.io/hashicorp/null");
    std::fs::create_dir_all(&mirrored).unwrap();
    provider_zip(
        &mirrored.join("terraform-provider-null_2.1.2_linux_amd64.zip"),
        &Tools::get().path("TFREG_NULL_PROVIDER"),
        "terraform-provider-null_v2.1.2_x4",
    );
}

/// `export NAME=value` lines of a file written for `source`.
fn read_env_file(path: &Path) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .filter_map(|l| l.strip_prefix("export ")?.split_once('='))
        .map(|(k, v)| (k.to_string(), v.trim_matches(['"', '\'']).to_string()))
        .collect()
}
