//! The README's two deploys as a newcomer runs them, with no AWS account:
//!
//! - `sam build && sam deploy --guided`, then `sam deploy`: the
//!   configuration both read is the repository's own `samconfig.toml`, as
//!   the SAM CLI itself reads it (its `--debug` log), and every key of it is
//!   an option of the command it configures;
//! - the README's `cargo lambda deploy` loop (`test=cargo-lambda-deploy`),
//!   run as written against a stack created on moto's server from
//!   `template.yaml` (`infra/rehearse`), with the AWS CLI and cargo-lambda
//!   reaching moto through `AWS_ENDPOINT_URL`.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::blocks::{Readme, commands};
use super::clis::HelpCli;
use super::shell::Session;
use super::tools::Tools;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// What `sam COMMAND --debug` says of its configuration: the file it read,
/// the values it loaded (the keys of `{'key': value, ...}`) and the command
/// line it expanded them to. `extra` keeps it from doing anything: with no
/// region `sam deploy` stops before its first request; `sam build` is given
/// a template that is not there.
struct SamConfig {
    file: String,
    keys: BTreeSet<String>,
    expanded: String,
    log: String,
}

fn sam_config(command: &str, extra: &[&str]) -> SamConfig {
    let home = tempfile::tempdir().unwrap();
    let out = Command::new(Tools::get().path("TFREG_SAM"))
        .arg(command)
        .arg("--debug")
        .args(extra)
        .current_dir(root())
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", home.path())
        .env("SAM_CLI_TELEMETRY", "0")
        // No credentials, no region, nowhere to connect to.
        .env("AWS_CONFIG_FILE", "/dev/null")
        .env("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
        .env("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let log = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let after = |marker: &str| -> String {
        log.lines()
            .skip_while(|l| !l.contains(marker))
            .nth(usize::from(marker.ends_with(':')))
            .map(|l| l.split_once(" | ").map_or(l, |(_, m)| m).to_string())
            .unwrap_or_default()
    };
    let file = after("Config file location: ")
        .trim_start_matches("Config file location: ")
        .to_string();
    let values = after("Configuration values are: ");
    // `{'key': value, ...}`: a quoted word followed by a colon is a key.
    let parts: Vec<&str> = values.split('\'').collect();
    let keys = (1..parts.len())
        .step_by(2)
        .filter(|&i| {
            parts
                .get(i + 1)
                .is_some_and(|n| n.trim_start().starts_with(':'))
        })
        .map(|i| parts[i].to_string())
        .collect();
    SamConfig {
        file,
        keys,
        expanded: after("Expand command line arguments to:"),
        log,
    }
}

/// The deploy section's SAM commands read the repository's samconfig.toml,
/// with the settings it means, and each key is an option of its command.
#[test]
fn the_deploy_reads_the_repositorys_samconfig() {
    let readme = Readme::parse(&std::fs::read_to_string(root().join("README.md")).unwrap());
    let first = readme
        .blocks
        .iter()
        .find(|b| b.text.contains("sam deploy --guided"))
        .expect("README.md shows `sam deploy --guided`");
    // The archive signing key first (issue 37), for the stack samconfig.toml
    // names (`--stack_name=tfreg` below): the key's parameter is named after it.
    let first_commands = commands(&first.text);
    assert_eq!(
        first_commands.len(),
        2,
        "README.md:{}: the first deploy",
        first.line
    );
    assert!(
        first_commands[0].starts_with("infra/archive-key new --stack tfreg --slot A"),
        "README.md:{}: the first deploy: {}",
        first.line,
        first_commands[0]
    );
    assert_eq!(
        first_commands[1], "sam build && sam deploy --guided",
        "README.md:{}: the first deploy",
        first.line
    );
    for block in readme.blocks.iter().filter(|b| b.text.contains("sam ")) {
        for command in commands(&block.text) {
            assert!(
                !command.contains("--config-file") && !command.contains("--config-env"),
                "README.md:{}: {command}: the deploy's configuration is the root's samconfig.toml",
                block.line
            );
        }
    }
    let expected = root().join("samconfig.toml").display().to_string();
    let mut sam = HelpCli::sam();
    let deploy = sam_config("deploy", &[]);
    assert_eq!(deploy.file, expected, "{}", deploy.log);
    assert!(
        deploy.log.contains("Unable to resolve a region"),
        "sam deploy went further than reading its configuration:\n{}",
        deploy.log
    );
    for part in [
        "--stack_name=tfreg",
        "--capabilities=['CAPABILITY_IAM']",
        "--resolve_s3",
        "--s3_prefix=tfreg",
        "--confirm_changeset",
    ] {
        assert!(
            deploy.expanded.contains(part),
            "sam deploy's arguments from samconfig.toml lack {part}: {}\n{}",
            deploy.expanded,
            deploy.log
        );
    }
    // A deploy with nothing to change succeeds (`sam build && sam deploy`
    // run again).
    assert!(
        !deploy.expanded.contains("--fail_on_empty_changeset"),
        "{}",
        deploy.expanded
    );
    let no_template = root().join("no-such-template.yaml").display().to_string();
    let build = sam_config("build", &["--template-file", &no_template]);
    assert_eq!(build.file, expected, "{}", build.log);
    assert!(
        build.keys.contains("beta_features"),
        "sam build needs the beta flag of its Rust builder: {:?}\n{}",
        build.keys,
        build.log
    );
    assert!(deploy.keys.contains("stack_name"), "{:?}", deploy.keys);
    // A key both commands load is the global table's, which SAM gives every
    // command and each takes what it has an option for: some command must
    // have it. A key one command alone loads is its own table's: an option
    // of that command.
    for (command, config, other) in [("deploy", &deploy, &build), ("build", &build, &deploy)] {
        for key in &config.keys {
            let flag = format!("--{}", key.replace('_', "-"));
            let mine = sam.check(&[command.to_string(), flag.clone()]);
            if other.keys.contains(key) {
                let theirs = sam.check(&[
                    if command == "build" {
                        "deploy"
                    } else {
                        "build"
                    }
                    .to_string(),
                    flag,
                ]);
                assert!(
                    mine.is_ok() || theirs.is_ok(),
                    "samconfig.toml's global {key}: neither sam build nor sam deploy has it"
                );
            } else {
                mine.unwrap_or_else(|e| panic!("samconfig.toml's {key} for sam {command}: {e}"));
            }
        }
    }
    eprintln!(
        "FIGURE samconfig: sam deploy reads {:?}, sam build {:?}",
        deploy.keys, build.keys
    );
}

/// The functions the README's loop names (`Discovery:read` → the logical
/// id `DiscoveryFunction` and the binary `read`), from its `for` line.
fn loop_functions(script: &str) -> Vec<(String, String)> {
    let first = commands(script)
        .into_iter()
        .find(|c| c.starts_with("for f in "))
        .expect("the deploy block loops `for f in ...`");
    first
        .trim_start_matches("for f in ")
        .split(';')
        .next()
        .unwrap()
        .split_whitespace()
        .map(|pair| {
            let (id, bin) = pair.split_once(':').expect("Logical:binary");
            (format!("{id}Function"), bin.to_string())
        })
        .collect()
}

/// `cargo lambda build --output-format zip`'s layout, of the functions'
/// own binaries: `<dir>/lambda/<binary>/bootstrap.zip`, one executable
/// `bootstrap`. The binaries are this checkout's debug build (`cargo build
/// --bins`, as `scripts/lambda-local` builds them: after the suite or the
/// walk, nothing to compile), stripped (a tenth of the bytes to upload).
/// Returns each binary's zip sha256, base64, as Lambda's `CodeSha256`.
fn function_zips(dir: &Path, binaries: &BTreeSet<String>) -> BTreeMap<String, String> {
    let started = Instant::now();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .args(["build", "--locked", "--bins"])
        .current_dir(root())
        .status()
        .unwrap();
    assert!(status.success(), "cargo build --bins");
    let target =
        std::env::var("CARGO_TARGET_DIR").map_or_else(|_| root().join("target"), Into::into);
    let mut sums = BTreeMap::new();
    for bin in binaries {
        let out = dir.join("lambda").join(bin);
        std::fs::create_dir_all(&out).unwrap();
        let stripped = out.join("bootstrap");
        let status = Command::new("strip")
            .arg("-o")
            .arg(&stripped)
            .arg(target.join("debug").join(bin))
            .status()
            .unwrap();
        assert!(status.success(), "strip {bin}");
        let mut zip =
            zip::ZipWriter::new(std::fs::File::create(out.join("bootstrap.zip")).unwrap());
        let options = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated)
            .unix_permissions(0o755);
        zip.start_file("bootstrap", options).unwrap();
        zip.write_all(&std::fs::read(&stripped).unwrap()).unwrap();
        zip.finish().unwrap();
        std::fs::remove_file(&stripped).unwrap();
        let bytes = std::fs::read(out.join("bootstrap.zip")).unwrap();
        sums.insert(bin.clone(), BASE64.encode(Sha256::digest(&bytes)));
    }
    eprintln!(
        "FIGURE cargo-lambda deploy: {} zips made in {:.1} s",
        sums.len(),
        started.elapsed().as_secs_f64()
    );
    sums
}

/// Stops the moto server `infra/rehearse up` started, however the test ends.
struct Rehearsed {
    out: PathBuf,
}

impl Rehearsed {
    fn up(out: &Path) -> (Rehearsed, Value) {
        let status = Command::new(root().join("infra/rehearse"))
            .args(["up", "--config", "guided", "--out"])
            .arg(out)
            // AWS's managed policies in moto's IAM: cargo-lambda attaches
            // AWSLambdaBasicExecutionRole to a role it makes.
            .env("MOTO_IAM_LOAD_MANAGED_POLICIES", "true")
            .status()
            .unwrap();
        let guard = Rehearsed {
            out: out.to_path_buf(),
        };
        assert!(
            status.success(),
            "infra/rehearse up --config guided: {status}"
        );
        let facts =
            serde_json::from_slice(&std::fs::read(out.join("facts.json")).unwrap()).unwrap();
        (guard, facts)
    }
}

impl Drop for Rehearsed {
    fn drop(&mut self) {
        let _ = Command::new(root().join("infra/rehearse"))
            .args(["down", "--out"])
            .arg(&self.out)
            .status();
    }
}

/// The README's `cargo lambda deploy` loop, run as written against the
/// stack the README's first deploy makes (rehearsed on moto): every
/// function the template has gets its own binary's zip, and keeps the
/// role, environment, memory and timeout the template gave it. Then what
/// the README says it cannot do: a name that is no function of the stack
/// becomes a lone function with none of the template's environment.
#[test]
fn the_cargo_lambda_deploy_loop_updates_the_stacks_functions() {
    let started = Instant::now();
    let readme = Readme::parse(&std::fs::read_to_string(root().join("README.md")).unwrap());
    let block = readme.block("cargo-lambda-deploy");
    assert_eq!(block.lang, "sh", "README.md:{}", block.line);
    let dir = tempfile::Builder::new()
        .prefix("cargo-lambda-deploy")
        .tempdir()
        .unwrap();
    let (_stack, facts) = Rehearsed::up(&dir.path().join("stack"));
    eprintln!(
        "FIGURE cargo-lambda deploy: stack rehearsed in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let functions = facts["functions"].as_object().unwrap();

    // The loop names every function of the stack, each with its binary.
    let named = loop_functions(&block.text);
    let stack: BTreeMap<String, String> = functions
        .iter()
        .map(|(id, f)| (id.clone(), f["binary"].as_str().unwrap().to_string()))
        .collect();
    assert_eq!(
        named.iter().cloned().collect::<BTreeMap<_, _>>(),
        stack,
        "README.md:{}: the loop's functions and binaries vs the stack's",
        block.line
    );
    // The rehearsed stack is named as `sam deploy` names it from samconfig.toml.
    let sam_deploy = sam_config("deploy", &[]);
    assert!(
        sam_deploy.expanded.contains(&format!(
            "--stack_name={}",
            facts["stack_name"].as_str().unwrap()
        )),
        "the rehearsed stack {} vs sam deploy's {}",
        facts["stack_name"],
        sam_deploy.expanded
    );
    assert!(
        block
            .text
            .contains(&format!("STACK={}", facts["stack_name"].as_str().unwrap())),
        "README.md:{}: the loop's stack is samconfig.toml's ({})",
        block.line,
        facts["stack_name"]
    );

    let binaries: BTreeSet<String> = stack.values().cloned().collect();
    let target = dir.path().join("target");
    let sums = function_zips(&target, &binaries);

    let tools = Tools::get();
    let creds = &facts["credentials"];
    let region = facts["region"].as_str().unwrap();
    // A reader's shell (tests/readme/walk.rs), with cargo-lambda and the
    // AWS CLI on PATH, the zips' target directory and moto's endpoint.
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let mut env: Vec<(String, String)> =
        super::walk::user_env(&home, &tools.path("TFREG_VENV_BIN"))
            .into_iter()
            .filter(|(k, _)| k != "CARGO_TARGET_DIR")
            .map(|(k, v)| {
                if k == "PATH" {
                    let aws = tools.path("TFREG_AWS");
                    (k, format!("{}:{v}", aws.parent().unwrap().display()))
                } else {
                    (k, v)
                }
            })
            .collect();
    env.extend([
        ("CARGO_TARGET_DIR".to_string(), target.display().to_string()),
        ("CARGO_NET_OFFLINE".to_string(), "true".to_string()),
        (
            "AWS_ACCESS_KEY_ID".to_string(),
            creds["AccessKeyId"].as_str().unwrap().to_string(),
        ),
        (
            "AWS_SECRET_ACCESS_KEY".to_string(),
            creds["SecretAccessKey"].as_str().unwrap().to_string(),
        ),
        ("AWS_REGION".to_string(), region.to_string()),
        ("AWS_DEFAULT_REGION".to_string(), region.to_string()),
        (
            "AWS_ENDPOINT_URL".to_string(),
            facts["moto"]["url"].as_str().unwrap().to_string(),
        ),
        ("AWS_EC2_METADATA_DISABLED".to_string(), "true".to_string()),
    ]);
    let shell = Session::new("deploy", dir.path(), root(), &env);
    // Two of moto's (5.2.5) own faults, which real AWS does not have, made
    // good before the loop. Under IAM enforcement it refuses every signed
    // request with an empty body (GetFunction, ...) unless it carries a
    // signed X-Amz-Content-SHA256, which neither the AWS CLI nor the Rust
    // SDK sends to Lambda: enforcement off (the rehearsal proves the roles;
    // this, the deploy). And its CloudFormation keeps a `Number`
    // parameter's value in a function's environment as a JSON number,
    // which Lambda never returns and the SDK refuses to parse: the same
    // environment written back as the strings it is in AWS.
    let reset = reqwest::blocking::Client::new()
        .post(format!(
            "{}/moto-api/reset-auth",
            facts["moto"]["url"].as_str().unwrap()
        ))
        .header("Content-Type", "text/plain")
        .body("1000000000")
        .send()
        .unwrap();
    assert!(
        reset.status().is_success(),
        "moto reset-auth: {}",
        reset.status()
    );
    for f in functions.values() {
        let file = dir.path().join("environment.json");
        std::fs::write(&file, json!({ "Variables": f["environment"] }).to_string()).unwrap();
        shell.run(&format!(
            "aws lambda update-function-configuration --function-name {} --environment file://{} > /dev/null",
            f["name"].as_str().unwrap(),
            file.display()
        ));
    }
    let deployed = Instant::now();
    shell.run(&block.text);
    eprintln!(
        "FIGURE cargo-lambda deploy: the README's loop, {} functions, {:.1} s",
        named.len(),
        deployed.elapsed().as_secs_f64()
    );

    let configuration = |name: &str| -> Value {
        let out = shell.run(&format!(
            "aws lambda get-function-configuration --function-name {name} --output json"
        ));
        let json = &out[out.find('{').expect("JSON")..];
        serde_json::from_str(json).unwrap()
    };
    for (id, f) in functions {
        let name = f["name"].as_str().unwrap();
        let now = configuration(name);
        let bin = f["binary"].as_str().unwrap();
        assert_eq!(
            now["CodeSha256"].as_str(),
            Some(sums[bin].as_str()),
            "{id}: its code is {bin}'s zip"
        );
        assert_eq!(now["Role"], f["role_arn"], "{id}: its role");
        assert_eq!(now["MemorySize"], f["memory"], "{id}: its memory");
        assert_eq!(now["Timeout"], f["timeout"], "{id}: its timeout");
        assert_eq!(
            now["Environment"]["Variables"], f["environment"],
            "{id}: the template's environment, whole"
        );
    }

    // Not a function of the stack: a lone one, none of the template's
    // environment, a role of its own making (cargo-lambda's: logs only).
    let lone = "tfreg-not-in-the-stack";
    shell.run(&format!("cargo lambda deploy --binary-name read {lone}"));
    let made = configuration(lone);
    assert!(
        made["Environment"]["Variables"]
            .get("TFREG_TABLE")
            .is_none(),
        "a function cargo lambda deploy creates has no TFREG_TABLE: {made}"
    );
    let roles: BTreeSet<&str> = functions
        .values()
        .filter_map(|f| f["role_arn"].as_str())
        .collect();
    let role = made["Role"].as_str().unwrap_or_default();
    assert!(!roles.contains(role), "{made}: not a role of the stack");
    let attached = shell.run(&format!(
        "aws iam list-attached-role-policies --role-name {} --query 'AttachedPolicies[].PolicyName' --output text",
        role.rsplit('/').next().unwrap()
    ));
    assert_eq!(
        attached.split_whitespace().collect::<Vec<_>>(),
        ["AWSLambdaBasicExecutionRole"],
        "the role cargo-lambda made for {lone}"
    );
    eprintln!(
        "FIGURE cargo-lambda deploy: whole test {:.1} s",
        started.elapsed().as_secs_f64()
    );
}
