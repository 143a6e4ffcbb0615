//! Issue 35: an admin token must not become the server's principal. An
//! upstream's credentials and `connect` settings may name only what the
//! operator allows (the upstream's own `TFREG_UPSTREAM_CREDENTIAL_<HOST>`
//! variable or its own file of `--upstream-credentials-dir`, addresses in `--upstream-connect-allow` /
//! `TFREG_UPSTREAM_CONNECT_ALLOW`): the server's own secrets (a variable,
//! a 0600 file, the AWS role's keys), a missing file and a present one, an
//! open port and a closed one are all refused when saved, with the same
//! answer, and nothing reaches the origin; so is another upstream's
//! credential. A fill's failure tells the
//! client its kind only; the detail is in the audit trail. On `tfreg serve`
//! and on the Lambda functions (the admin and fill functions).

use std::path::Path;

use serde_json::{Value, json};

use crate::cache_mirror::{Origin, Rig};
use crate::support::command::{fails, ok};
use crate::support::log;
use crate::support::server::Server;

const SERVER_SECRET: &str = "env-secret-value-35";
const FILE_SECRET: &str = "file-secret-value-35";
/// The credential the operator set for another upstream.
const OTHER_UPSTREAM: &str = "app.terraform.io";
const OTHER_SECRET: &str = "other-upstream-secret-35";
const OTHER_VARIABLE: &str = "TFREG_UPSTREAM_CREDENTIAL_APP_TERRAFORM_IO";

/// The variable of `host`'s own credential.
fn own_variable(host: &str) -> String {
    let host = tfreg_model::upstream::UpstreamHost::parse(host).unwrap();
    tfreg_model::upstream::credential_env_name(&host)
}

/// The one answer to every refused credentials or connect value.
fn refused(host: &str) -> String {
    format!(
        "upstream {host}: credentials and connect settings must be among those the operator allows (credentials: the variable {} or the file {host} in the server's credentials directory; connect: addresses in the networks the server allows)",
        own_variable(host)
    )
}

fn operator_cannot_be_impersonated(lambda: bool, ip: &str, name: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let origin = Origin::start_private(tmp.path(), ip, name);
    let origin_token = origin.server.token("read", None);
    let host = origin.host.clone();
    // The server's own secrets: a variable, and a 0600 file.
    let secret_file = tmp.path().join("oidc-client-secret");
    std::fs::write(&secret_file, FILE_SECRET).unwrap();
    std::os::unix::fs::PermissionsExt::set_mode(
        &mut std::fs::metadata(&secret_file).unwrap().permissions(),
        0o600,
    );
    let creds = tmp.path().join("upstream-credentials");
    std::fs::create_dir_all(&creds).unwrap();
    std::fs::write(creds.join(&host), &origin_token).unwrap();
    std::fs::write(creds.join(OTHER_UPSTREAM), OTHER_SECRET).unwrap();
    let own = own_variable(&host);
    // Only the origin's own address may be named in `connect`.
    let allow = format!("{ip}/32");
    let server = if lambda {
        Server::start_lambda_with(
            &tmp.path().join("lambda"),
            &[
                ("TFREG_UPSTREAM_CONNECT_ALLOW", allow.as_str()),
                ("SERVER_SECRET", SERVER_SECRET),
                (own.as_str(), origin_token.as_str()),
                (OTHER_VARIABLE, OTHER_SECRET),
            ],
        )
    } else {
        let listen = format!("127.0.0.1:{}", crate::support::server::free_port());
        Server::start_with_env(
            &tmp.path().join("data"),
            &listen,
            &[
                "--private",
                "--upstream-connect-allow",
                &allow,
                "--upstream-credentials-dir",
                creds.to_str().unwrap(),
            ],
            &[
                ("SERVER_SECRET", Path::new(SERVER_SECRET)),
                (own.as_str(), Path::new(&origin_token)),
                (OTHER_VARIABLE, Path::new(OTHER_SECRET)),
            ],
        )
    };
    let rig = Rig::configured(server, origin.upstream_args());
    let _log = crate::cache_mirror::LogOnFailure(&rig.server);
    let before = log::requests(&origin.server.server_log()).len();
    let shown = |rig: &Rig| -> Value {
        let out = ok(
            rig.server
                .tfreg(&rig.admin, &["upstream", "show", &host, "--json"]),
            "upstream show",
        );
        serde_json::from_str(&out).unwrap()
    };
    let settled = shown(&rig);

    // Every attack, through the CLI: refused with the same words.
    let open_port = rig.server.url("");
    let open_port = open_port
        .trim_end_matches('/')
        .rsplit(':')
        .next()
        .unwrap()
        .to_string();
    let missing = tmp.path().join("no-such-file");
    let attacks: Vec<Vec<String>> = vec![
        vec!["--credentials-env".into(), "SERVER_SECRET".into()],
        vec!["--credentials-env".into(), "AWS_SECRET_ACCESS_KEY".into()],
        vec!["--credentials-env".into(), "AWS_ACCESS_KEY_ID".into()],
        vec!["--credentials-env".into(), "AWS_SESSION_TOKEN".into()],
        vec![
            "--credentials-env".into(),
            "TFREG_OIDC_CLIENT_SECRET".into(),
        ],
        vec![
            "--credentials-file".into(),
            secret_file.display().to_string(),
        ],
        vec!["--credentials-file".into(), missing.display().to_string()],
        vec!["--credentials-file".into(), "../oidc-client-secret".into()],
        vec!["--credentials-file".into(), "/proc/self/environ".into()],
        // Another upstream's credential, as a variable and as a file.
        vec!["--credentials-env".into(), OTHER_VARIABLE.into()],
        vec!["--credentials-file".into(), OTHER_UPSTREAM.into()],
        // An open port of this machine and a closed one: no port scan.
        vec![
            "--connect-to".into(),
            format!("{host}=127.0.0.1:{open_port}"),
        ],
        vec!["--connect-to".into(), format!("{host}=127.0.0.1:1")],
        vec!["--connect-to".into(), format!("{host}=169.254.169.254:80")],
        vec!["--allow-net".into(), "127.0.0.0/8".into()],
    ];
    let mut answers = Vec::new();
    for attack in &attacks {
        let mut args = vec!["upstream", "set", host.as_str()];
        args.extend(attack.iter().map(String::as_str));
        let err = fails(rig.server.tfreg(&rig.admin, &args), &attack.join(" "));
        assert!(err.contains(&refused(&host)), "{attack:?}: {err}");
        answers.push(err);
    }
    assert!(
        answers.iter().all(|a| a == &answers[0]),
        "one answer for all: {answers:#?}"
    );
    // The API itself: exactly 400 and the one message, whatever was named.
    for body in [
        json!({"serves": {"providers": true, "modules": false}, "credentials": {"env": "AWS_SECRET_ACCESS_KEY"}}),
        json!({"serves": {"providers": true, "modules": false}, "credentials": {"file": secret_file}}),
        json!({"serves": {"providers": true, "modules": false}, "credentials": {"file": missing}}),
        json!({"serves": {"providers": true, "modules": false}, "credentials": {"ssm": "/tfreg/oidc"}}),
        json!({"serves": {"providers": true, "modules": false}, "credentials": {"env": OTHER_VARIABLE}}),
        json!({"serves": {"providers": true, "modules": false}, "credentials": {"file": OTHER_UPSTREAM}}),
        json!({"serves": {"providers": true, "modules": false}, "connect": {"to": {&host: [format!("127.0.0.1:{open_port}")]}}}),
        json!({"serves": {"providers": true, "modules": false}, "connect": {"to": {&host: ["127.0.0.1:1"]}}}),
    ] {
        let resp = rig
            .server
            .http
            .put(rig.server.url(&format!("/v1/admin/upstreams/{host}")))
            .bearer_auth(&rig.admin)
            .json(&body)
            .send()
            .unwrap();
        assert_eq!(resp.status().as_u16(), 400, "{body}");
        let answer: Value = resp.json().unwrap();
        assert_eq!(answer, json!({"errors": [refused(&host)]}), "{body}");
    }
    assert_eq!(shown(&rig), settled, "nothing was saved");
    assert_eq!(
        log::requests(&origin.server.server_log()).len(),
        before,
        "nothing reached the origin"
    );
    let index = format!("/v1/mirror/{host}/hashicorp/null/index.json");
    // Without credentials the private origin refuses the cache.
    let (status, body) = rig.get(&index);
    assert_eq!(status, 502, "{body}");

    // The operator's own credential: allowed, and the change said.
    let said = ok(
        rig.server.tfreg(
            &rig.admin,
            &["upstream", "set", &host, "--credentials-env", &own],
        ),
        "the operator's credential",
    );
    assert_eq!(
        said,
        format!("upstream {host} changed:\n  credentials: (none) -> {{\"env\":\"{own}\"}}\n")
    );
    let (status, body) = rig.get(&format!("/v1/mirror/{host}/hashicorp/null/1.0.0.json"));
    assert_eq!(status, 200, "{body}");
    if !lambda {
        // ... or a file of the operator's directory, by name.
        ok(
            rig.server.tfreg(
                &rig.admin,
                &["upstream", "set", &host, "--credentials-file", &host],
            ),
            "a file of the credentials directory",
        );
    }
    let log = rig.server.server_log();
    assert!(
        !log.contains(SERVER_SECRET) && !log.contains(FILE_SECRET) && !log.contains(OTHER_SECRET),
        "no secret in the log"
    );

    // Low: a fill failing on the admin's configuration tells the client
    // its kind, not the variable, file or address; the audit has it. An
    // upstream whose own variable the operator never set:
    let unset_host = "unset.example.test";
    let unset = own_variable(unset_host);
    ok(
        rig.server.tfreg(
            &rig.admin,
            &[
                "upstream",
                "set",
                unset_host,
                "--providers",
                "--credentials-env",
                &unset,
            ],
        ),
        "an unset variable",
    );
    let (status, body) = rig.get(&format!("/v1/mirror/{unset_host}/hashicorp/one/index.json"));
    assert_eq!(status, 502, "{body}");
    assert_eq!(
        body,
        json!({"errors": [format!("{unset_host}: the registry cannot use this upstream's settings (an admin finds why in the audit trail)")]})
    );
    let refusals = rig.audit("cache.refused");
    assert!(
        refusals
            .iter()
            .any(|e| e["detail"]
                == format!("{unset_host}: the credentials variable {unset} is not set")),
        "{refusals:#?}"
    );
    // A closed port of the origin's own (allowed) address: the client
    // hears the origin failed, not how.
    ok(
        rig.server.tfreg(
            &rig.admin,
            &[
                "upstream",
                "set",
                &host,
                "--credentials-env",
                &own,
                "--connect-to",
                &format!("{host}={ip}:1"),
            ],
        ),
        "a closed port",
    );
    let (status, body) = rig.get(&format!("/v1/mirror/{host}/hashicorp/two/index.json"));
    assert_eq!(status, 503, "{body}");
    assert_eq!(
        body,
        json!({"errors": [format!("{host}: the origin did not answer in time or failed; try again later")]})
    );
}

/// `tfreg audit --help` names the cache's actions.
#[test]
fn audit_help_names_the_cache_actions() {
    let out = std::process::Command::new(crate::support::tools::tfreg_bin())
        .args(["audit", "--help"])
        .output()
        .unwrap();
    let help = ok(out, "tfreg audit --help");
    for action in [
        "upstream.set",
        "upstream.remove",
        "cache.refused",
        "cache.key-changed",
        "cache.passthrough",
    ] {
        assert!(help.contains(action), "{action}: {help}");
    }
}

#[test]
fn an_admin_token_cannot_reach_the_servers_secrets_or_network_on_serve() {
    operator_cannot_be_impersonated(false, "127.0.0.150", "origin-operator.example.test");
}

#[test]
fn an_admin_token_cannot_reach_the_servers_secrets_or_network_on_lambda() {
    operator_cannot_be_impersonated(true, "127.0.0.151", "origin-loperator.example.test");
}
