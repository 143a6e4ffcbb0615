//! The CI examples the README points to (`examples/ci/`) publish as
//! written: the trust policy in each file's header is added with the
//! command shown there, then the job's own publish commands run in bash
//! (the YAML's `run:` of the GitHub step, the GitLab job's `script:` lines
//! after goreleaser), with what the CI system would provide: a goreleaser
//! `dist/` signed with gpg, the job's environment, and its OIDC ID token
//! (GitHub: through `ACTIONS_ID_TOKEN_REQUEST_URL`, a stand-in answering as
//! GitHub documents; GitLab: in `TFREG_ID_TOKEN`, as `id_tokens:` sets it),
//! signed by a real OpenID Provider over HTTPS. Only what installs tools
//! (goreleaser, `cargo install tfreg`, `apk add`) is left out: `tfreg` is
//! the one built here.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::json;
use serde_norway::Value;

use crate::ci_exchange::{GitHubStandIn, github_claims, gitlab_claims, serve_with_ci_issuers};
use crate::login::runtime;
use crate::support::command::said;
use crate::support::dist::provider_dist;
use crate::support::gpg::Gpg;
use crate::support::tools::tfreg_bin;

const EXAMPLE_REGISTRY: &str = "https://registry.example.com";

fn example(name: &str) -> String {
    std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("examples/ci")
            .join(name),
    )
    .unwrap()
}

/// The `tfreg trust add` command of a file's header comment (its lines
/// after `#   `, continued with `\`), as one line.
fn trust_command(text: &str) -> String {
    let mut lines = text
        .lines()
        .map(|l| l.trim_start_matches('#').trim())
        .skip_while(|l| !l.starts_with("tfreg trust add"));
    let mut command = String::new();
    for line in lines.by_ref() {
        match line.strip_suffix('\\') {
            Some(part) => command += part,
            None => {
                command += line;
                break;
            }
        }
    }
    assert!(command.contains("--issuer"), "no trust command in {text}");
    command
}

/// Runs `script` in bash in `dir` with `tfreg` (this build) and gpg first
/// on `PATH` and `env`.
fn bash(dir: &Path, script: &str, env: &[(&str, &str)]) -> Output {
    let bin = tfreg_bin();
    let path = format!(
        "{}:{}",
        bin.parent().unwrap().display(),
        std::env::var("PATH").unwrap()
    );
    let mut command = Command::new("bash");
    command
        .args(["-euo", "pipefail", "-c", script])
        .current_dir(dir)
        .env("PATH", path)
        .env_remove("TFREG_TOKEN")
        .env_remove("ACTIONS_ID_TOKEN_REQUEST_URL")
        .env_remove("ACTIONS_ID_TOKEN_REQUEST_TOKEN")
        .env_remove("TFREG_ID_TOKEN");
    for (k, v) in env {
        command.env(k, v);
    }
    command.output().unwrap()
}

struct Ctx<'a> {
    dir: &'a Path,
    registry: &'a str,
    admin: &'a str,
    ca: &'a str,
}

/// The trust policy of an example's header, added as it says, with the
/// example's URLs and placeholders replaced (`replace`: from → to) and the
/// test issuer's `kind` named (it is not github.com's or gitlab.com's).
fn add_trust(text: &str, replace: &[(&str, &str)], kind: &str, ctx: &Ctx) {
    let mut trust = trust_command(text).replace(EXAMPLE_REGISTRY, ctx.registry);
    for (from, to) in replace {
        assert!(trust.contains(from), "{trust}: no {from}");
        trust = trust.replace(from, to);
    }
    trust += &format!(" --kind {kind}");
    let out = bash(
        ctx.dir,
        &trust,
        &[("TFREG_TOKEN", ctx.admin), ("SSL_CERT_FILE", ctx.ca)],
    );
    assert!(out.status.success(), "{trust}: {}", said(&out));
}

#[test]
fn the_github_and_gitlab_examples_publish_a_goreleaser_release_as_written() {
    let tmp = tempfile::tempdir().unwrap();
    let (github, gitlab, server) = serve_with_ci_issuers(tmp.path());
    let registry = server.url("").trim_end_matches('/').to_string();
    let admin = server.token("admin", None);
    let ca = server.ca.to_str().unwrap().to_string();
    let gpg = Gpg::new("rsa2048");
    let gnupg = gpg.home.path().to_str().unwrap().to_string();
    let rt = runtime();
    let ctx = Ctx {
        dir: tmp.path(),
        registry: &registry,
        admin: &admin,
        ca: &ca,
    };

    // ---- GitHub Actions
    let text = example("github-actions.yml");
    add_trust(
        &text,
        &[
            (
                "https://token.actions.githubusercontent.com",
                &github.op.issuer,
            ),
            ("<your org's numeric id>", "1234"),
        ],
        "github",
        &ctx,
    );

    let workflow: Value = serde_norway::from_str(&text).unwrap();
    let job = &workflow["jobs"]["release"];
    assert_eq!(job["environment"].as_str(), Some("release"));
    assert_eq!(
        workflow["permissions"]["id-token"].as_str(),
        Some("write"),
        "the job may ask for its ID token"
    );
    let step = job["steps"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|s| s["run"].as_str().is_some_and(|r| r.contains("--oidc")))
        .expect("the publish step");
    let run = step["run"].as_str().unwrap();
    let namespace = job["env"]["NAMESPACE"].as_str().unwrap();
    assert_eq!(job["env"]["REGISTRY"].as_str(), Some(EXAMPLE_REGISTRY));

    let gh_dir = tmp.path().join("github");
    provider_dist(
        &gh_dir.join("dist"),
        "widget",
        "1.0.0",
        &["linux_amd64", "darwin_arm64"],
        &gpg,
    );
    std::fs::remove_file(gh_dir.join("dist/key.asc")).unwrap();
    // The job's token, as GitHub mints it for this repository's tag push
    // in the `release` environment, for the audience the job asks for.
    let claims = github_claims(
        &registry,
        json!({
            "repository": "acme/terraform-provider-widget",
            "job_workflow_ref": "acme/terraform-provider-widget/.github/workflows/release.yml@refs/tags/v1.0.0",
            "workflow_ref": "acme/terraform-provider-widget/.github/workflows/release.yml@refs/tags/v1.0.0",
            "ref": "refs/tags/v1.0.0",
        }),
    );
    let jwt = rt.block_on(github.sign(json!({ "claims": claims })));
    let stand_in = GitHubStandIn::start("request-token", jwt.clone());
    let out = bash(
        &gh_dir,
        run,
        &[
            ("REGISTRY", &registry),
            ("NAMESPACE", namespace),
            ("GPG_FINGERPRINT", &gpg.fingerprint),
            ("GNUPGHOME", &gnupg),
            ("ACTIONS_ID_TOKEN_REQUEST_URL", &stand_in.url),
            ("ACTIONS_ID_TOKEN_REQUEST_TOKEN", "request-token"),
            ("SSL_CERT_FILE", &ca),
        ],
    );
    assert!(out.status.success(), "{run}\n{}", said(&out));
    assert_eq!(
        stand_in.seen.lock().unwrap().len(),
        1,
        "one ID token asked for"
    );
    assert!(!said(&out).contains(&jwt), "the job's log shows no token");

    // ---- GitLab CI
    let text = example("gitlab-ci.yml");
    add_trust(
        &text,
        &[
            ("https://gitlab.com", &gitlab.op.issuer),
            ("<the project's numeric id>", "42"),
        ],
        "gitlab",
        &ctx,
    );

    let pipeline: Value = serde_norway::from_str(&text).unwrap();
    let job = &pipeline["release"];
    assert_eq!(
        job["id_tokens"]["TFREG_ID_TOKEN"]["aud"].as_str(),
        Some(EXAMPLE_REGISTRY),
        "the token's audience is the registry's URL"
    );
    let script: Vec<&str> = job["script"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .skip_while(|l| !l.starts_with("goreleaser release"))
        .skip(1)
        .filter(|l| !l.starts_with("cargo install"))
        .collect();
    assert!(script.last().unwrap().contains("--oidc"), "{script:?}");
    let script = script.join("\n");
    let namespace = job["variables"]["NAMESPACE"].as_str().unwrap();

    let gl_dir = tmp.path().join("gitlab");
    provider_dist(
        &gl_dir.join("dist"),
        "widget",
        "1.1.0",
        &["linux_amd64"],
        &gpg,
    );
    std::fs::remove_file(gl_dir.join("dist/key.asc")).unwrap();
    let claims = gitlab_claims(
        &registry,
        json!({
            "project_id": "42",
            "project_path": "acme/terraform-provider-widget",
            "ci_config_ref_uri": "gitlab.com/acme/terraform-provider-widget//.gitlab-ci.yml@refs/tags/v1.1.0",
            "ref": "v1.1.0", "ref_type": "tag", "ref_path": "refs/tags/v1.1.0",
            "environment": "release",
        }),
    );
    let gl_jwt = rt.block_on(gitlab.sign(json!({ "claims": claims })));
    let home = tmp.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let out = bash(
        &gl_dir,
        &script,
        &[
            ("REGISTRY", &registry),
            ("NAMESPACE", namespace),
            ("GNUPGHOME", &gnupg),
            ("GPG_FINGERPRINT", &gpg.fingerprint),
            ("HOME", home.to_str().unwrap()),
            ("TFREG_ID_TOKEN", &gl_jwt),
            ("SSL_CERT_FILE", &ca),
        ],
    );
    assert!(out.status.success(), "{script}\n{}", said(&out));
    assert!(
        !said(&out).contains(&gl_jwt),
        "the job's log shows no token"
    );

    // Both releases are in the registry, each for its platforms.
    let versions: serde_json::Value = server
        .http
        .get(server.url("/v1/providers/acme/widget/versions"))
        .bearer_auth(&admin)
        .send()
        .unwrap()
        .json()
        .unwrap();
    let mut got: Vec<(String, usize)> = versions["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            (
                v["version"].as_str().unwrap().to_string(),
                v["platforms"].as_array().unwrap().len(),
            )
        })
        .collect();
    got.sort();
    assert_eq!(got, [("1.0.0".to_string(), 2), ("1.1.0".to_string(), 1)]);
    // Each through an exchange, audited with the job's subject.
    let log = server.server_log();
    let exchanges = log.lines().filter(|l| l.contains("token.exchange")).count();
    assert_eq!(exchanges, 2, "{log}");
}
