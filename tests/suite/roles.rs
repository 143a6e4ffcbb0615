//! Every function under its own role (issue 36): the rehearsed stack
//! (`infra/rehearse`, moto's server with IAM enforcement on), each
//! function's real binary under `cargo lambda watch`'s runtime API with the
//! environment the stack gave it and credentials from STS AssumeRole into
//! its own role (support/rehearsed.rs says what differs from AWS, and why),
//! and the user path through them with the real Terraform 1.0.3 and
//! 1.11.4. One test per configuration:
//!
//! - guided (a first `sam deploy --guided`): the first admin token as the
//!   stack's TokenCommand output makes it, publish a provider and a module,
//!   `terraform init`, deprecate and yank, revoke a token; a read function
//!   that tries to write is refused AccessDenied.
//! - full (every option on): `terraform login`, the CI token exchange and a
//!   cache fill, through the auth, fill and cache functions.
//!
//! Each ends with the calls its functions made (recorded by the SDK
//! interceptor) held against infra/aws-calls.json, and the transformed
//! template's roles against that list (`least_privilege`'s checker).

use std::collections::BTreeSet;
use std::time::Instant;

use serde_json::{Value, json};

use crate::support::cfn::Stack;
use crate::support::edge::{Edge, KeyPair, epoch_in};
use crate::support::fixtures::*;
use crate::support::iam::{CallsList, check, transformed_roles};
use crate::support::rehearsed::{Rehearsed, python};
use crate::support::*;

/// `tfreg ARGS` through the admin function; its stdout.
fn admin(r: &Rehearsed, token: &str, args: &[&str]) -> String {
    stdout(
        r.server.tfreg(token, args),
        &format!("tfreg {}", args.join(" ")),
    )
}

/// A command's stdout, once it succeeded.
fn stdout(out: std::process::Output, what: &str) -> String {
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    ok(out, what);
    text
}

/// The stack's first admin token, made as the README says: its
/// `TokenCommand` output, run with the deployer's AWS credentials.
fn first_admin_token(r: &Rehearsed) -> String {
    let command = r.facts["outputs"]["TokenCommand"]
        .as_str()
        .unwrap()
        .to_string();
    let words: Vec<&str> = command.split_whitespace().collect();
    // AWS_REGION=... tfreg token create ...
    let (assignments, rest): (Vec<&str>, Vec<&str>) =
        words.into_iter().partition(|w: &&str| w.contains('='));
    assert_eq!(rest[0], "tfreg", "{command}");
    let mut cmd = std::process::Command::new(crate::support::tools::tfreg_bin());
    cmd.args(&rest[1..])
        // moto on an IP address: no bucket hostnames.
        .arg("--s3-force-path-style")
        .envs(r.server.store_env.iter().map(|(k, v)| (k, v)));
    for a in assignments {
        let (k, v) = a.split_once('=').unwrap();
        cmd.env(k, v);
    }
    let token = stdout(cmd.output().unwrap(), "the stack's TokenCommand");
    assert_eq!(token.lines().count(), 1, "{token}");
    token.trim().to_string()
}

/// The calls the functions made against infra/aws-calls.json: none
/// missing from it, and each it says `run` makes was made; then the
/// transformed template's roles against it.
fn calls_are_the_list(r: &Rehearsed, run: &str) {
    let list = CallsList::read();
    let recorded = r.recorded();
    let mut findings = vec![];
    for (lid, calls) in &recorded {
        let listed: BTreeSet<_> = list
            .functions
            .get(lid)
            .into_iter()
            .flatten()
            .map(|l| l.call.clone())
            .collect();
        for c in calls.difference(&listed) {
            findings.push(format!("{lid} made a call the list lacks: {}", json!(c)));
        }
        for l in list.functions.get(lid).into_iter().flatten() {
            if l.made_in.iter().any(|m| m == run) && !calls.contains(&l.call) {
                findings.push(format!(
                    "{lid}: the list says {run} makes {}; it did not",
                    json!(l.call)
                ));
            }
        }
    }
    // The transformed template (as `sam deploy` sends it), statically.
    let transformed: Value = serde_json::from_str(
        &std::fs::read_to_string(r.facts["transformed"]["path"].as_str().unwrap()).unwrap(),
    )
    .unwrap();
    let params = r.role_parameters();
    let given: Vec<(&str, &str)> = params
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let stack = Stack::at(
        &transformed,
        &given,
        r.facts["region"].as_str().unwrap(),
        r.facts["account"].as_str().unwrap(),
    );
    for (lid, role) in transformed_roles(&stack) {
        findings.extend(check(&lid, &role, &list.of(&lid, &stack), &stack));
    }
    assert!(findings.is_empty(), "{run}:\n{}", findings.join("\n"));
}

/// A read function's own credentials, against moto: it may read the table
/// but not write it or the bucket (PutItem, DeleteItem, PutObject refused
/// AccessDenied), while the deployer may.
fn read_function_cannot_write(r: &Rehearsed, lid: &str) {
    let code = r#"
import boto3, json, sys
f = json.load(open(sys.argv[1])); c = json.loads(sys.argv[2])
kw = dict(endpoint_url=f["moto"]["url"], region_name=f["region"], aws_access_key_id=c["AccessKeyId"],
          aws_secret_access_key=c["SecretAccessKey"], aws_session_token=c["SessionToken"])
ddb = boto3.client("dynamodb", **kw); s3 = boto3.client("s3", **kw)
key = {"pk": {"S": "TOKENS"}, "sk": {"S": "roles-test"}}
out = {}
def attempt(name, call):
    try:
        call(); out[name] = "allowed"
    except Exception as e:
        # moto's S3 answers a denied write 403 with no error code.
        denied = "AccessDenied" in str(e) or "(403)" in str(e)
        out[name] = "AccessDenied" if denied else str(e)
attempt("GetItem", lambda: ddb.get_item(TableName=f["table"], Key=key))
attempt("PutItem", lambda: ddb.put_item(TableName=f["table"], Item=key))
attempt("DeleteItem", lambda: ddb.delete_item(TableName=f["table"], Key=key))
attempt("PutObject", lambda: s3.put_object(Bucket=f["bucket"], Key="archives/roles-test", Body=b"x"))
print(json.dumps(out))
"#;
    let python = Tools::get().path("TFREG_VENV_BIN").join("python");
    let facts = &r.facts_path;
    let out = ok(
        std::process::Command::new(python)
            .arg("-c")
            .arg(code)
            .arg(facts)
            .arg(r.credentials[lid].to_string())
            .output()
            .unwrap(),
        "a read function's writes",
    );
    let got: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        got,
        json!({"GetItem": "allowed", "PutItem": "AccessDenied", "DeleteItem": "AccessDenied",
               "PutObject": "AccessDenied"}),
        "{lid}'s role on moto"
    );
}

#[test]
fn guided_stack_serves_the_user_path_under_each_functions_role() {
    let started = Instant::now();
    let tools = Tools::get();
    let tmp = tempfile::tempdir().unwrap();
    let r = Rehearsed::start(tmp.path(), "guided");
    eprintln!(
        "FIGURE guided stack rehearsed, roles assumed, functions up: {:.1} s",
        started.elapsed().as_secs_f64()
    );
    read_function_cannot_write(&r, "ProviderVersionsFunction");

    let admin_token = first_admin_token(&r);
    let new_token = |name: &str, scope: &str| {
        admin(
            &r,
            &admin_token,
            &["token", "create", "--name", name, "--scope", scope],
        )
        .trim()
        .to_string()
    };
    let publish = new_token("ci", "publish");
    let read = new_token("laptops", "read");
    let published = publish_fixture(&r.server, &publish, tmp.path());
    let host = r.server.host.clone();
    for var in ["TFREG_TERRAFORM_1_0", "TFREG_TERRAFORM_NEW"] {
        let tf = Terraform::new(tools.path(var), &r.server, &credentials(&host, &read));
        let work = tmp.path().join(format!("work-{var}"));
        root_config(&work, &host);
        init_and_apply(&tf, &work, &format!("{var} under the functions' roles"));
        let lock = lock_file(&work);
        assert!(lock.contains(&h1(&published.zips_2_1_2[0])), "{lock}");
    }
    // Both inits were counted under the download functions' roles (the
    // RecordUsage statement: an add to a USAGE# item), and the admin
    // function reads them under its own: `tfreg usage` names the read token.
    let deadline = Instant::now() + std::time::Duration::from_secs(30);
    let usage = loop {
        let usage: Value = serde_json::from_str(&admin(
            &r,
            &admin_token,
            &[
                "usage",
                &format!("{NS}/null"),
                "--version",
                "2.1.2",
                "--json",
            ],
        ))
        .unwrap();
        if usage["versions"][0]["downloads"].as_u64() >= Some(2) {
            break usage;
        }
        assert!(Instant::now() < deadline, "not counted: {usage}");
        std::thread::sleep(std::time::Duration::from_millis(500));
    };
    assert_eq!(usage["versions"][0]["downloads"], 2, "{usage}");
    let consumers = usage["versions"][0]["consumers"].as_array().unwrap();
    assert_eq!(consumers.len(), 1, "{usage}");
    assert!(
        consumers[0]["consumer"]["label"]
            .as_str()
            .unwrap()
            .starts_with("laptops ("),
        "{usage}"
    );
    // infra/smoke-test, the check the README tells an operator to run after
    // `sam deploy`, at the address that stands in for the stack's registry
    // URL (its RegistryUrl output is the CloudFront domain), with a read
    // token: every check passes under the functions' own roles.
    assert!(
        r.facts["outputs"]["RegistryUrl"]
            .as_str()
            .is_some_and(|u| u.starts_with("https://")),
        "{}",
        r.facts["outputs"]
    );
    smoke_test_passes(
        &host,
        &r.server.ca,
        &read,
        &format!("{NS}/null"),
        &format!("{NS}/greeting/null"),
    );
    // The guided stack hands out CloudFront signed URLs (ArchiveDelivery
    // cloudfront): the stand-in for the distribution's archive behaviours
    // serves a published archive from the stack's bucket to a URL the
    // reference signer (botocore) signs with the key the functions read
    // (slot A's, from SSM), and refuses it once its signature is changed;
    // whatever else reached it passed CloudFront's rules.
    let edge = r
        .edge
        .as_ref()
        .expect("the guided stack signs with CloudFront");
    let refused: Vec<_> = edge
        .requests()
        .into_iter()
        .filter(|q| q.refused.is_some())
        .collect();
    assert!(refused.is_empty(), "refused at the edge: {refused:?}");
    eprintln!(
        "FIGURE guided: the CloudFront stand-in served {} archive requests",
        edge.requests().len()
    );
    edge_serves_the_stacks_archives(&r, edge, tmp.path());

    // Deprecate and yank through the admin function.
    admin(
        &r,
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
    admin(
        &r,
        &admin_token,
        &["yank", "provider", &format!("{NS}/null"), "3.0.0"],
    );
    let versions = |token: &str| {
        r.server
            .http
            .get(r.server.url(&format!("/v1/providers/{NS}/null/versions")))
            .bearer_auth(token)
            .send()
            .unwrap()
    };
    let listed: Value = versions(&read).json().unwrap();
    let names: Vec<&str> = listed["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["version"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["2.1.2"], "3.0.0 yanked: {listed}");
    let tf = Terraform::new(
        tools.path("TFREG_TERRAFORM_NEW"),
        &r.server,
        &credentials(&host, &read),
    );
    let work = tmp.path().join("work-deprecated");
    root_config(&work, &host);
    let init = ok(
        tf.run(&work, &["init", "-no-color"]),
        "terraform init after the deprecation",
    );
    assert!(
        init.contains("version 2.1.2 is deprecated: use 3.x"),
        "{init}"
    );

    // Revoke a token: refused from then on (the cache holds a verdict for
    // TokenCacheSeconds at most).
    let list: Value =
        serde_json::from_str(&admin(&r, &admin_token, &["token", "list", "--json"])).unwrap();
    let id = list["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "laptops")
        .and_then(|t| t["id"].as_str())
        .unwrap()
        .to_string();
    admin(&r, &admin_token, &["token", "revoke", &id]);
    let deadline = Instant::now() + std::time::Duration::from_secs(15);
    while versions(&read).status() != 401 {
        assert!(Instant::now() < deadline, "a revoked token still reads");
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    crate::support::log::assert_no_server_errors(&r.server.server_log(), 20);
    calls_are_the_list(&r, "guided");
    eprintln!(
        "FIGURE roles guided: {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

/// Every option on: sign-in (`terraform login` through the auth function,
/// its client secret read from Secrets Manager under its role), the CI
/// token exchange publishing a module, and a cache fill (the mirror and
/// blob functions invoking the fill function, which fetches from an
/// origin and stores under `cache/`), with Terraform 1.11.4.
#[test]
fn full_stack_signs_in_exchanges_and_fills_under_each_functions_role() {
    use crate::cache_mirror::{LOOPBACK, Origin};
    use crate::ci_exchange::{Issuer, github_claims};
    use crate::support::rehearsed::Rehearsal;
    use crate::support::server::free_port_pair;
    use tfreg_lambda::config as c;
    let started = Instant::now();
    let tools = Tools::get();
    let tmp = tempfile::tempdir().unwrap();
    let stack = Rehearsal::up(tmp.path(), "full");
    // The identity provider knows the client secret the stack holds.
    let secret = stack.as_deployer(
        r#"sm = boto3.client("secretsmanager", **kw)
arn = f["functions"]["AuthFunction"]["environment"]["TFREG_OIDC_CLIENT_SECRET"]
print(sm.get_secret_value(SecretId=arn)["SecretString"])"#,
    );
    let port = free_port_pair();
    let login_port = free_port_pair();
    let op = tfreg_testkit::oidc::Provider::start(json!({
        "clients": [{"client_id": "tfreg", "client_secret": secret,
                     "redirect_uris": [format!("https://127.0.0.1:{port}/oauth/callback")]}],
        "users": [{"sub": "alice", "email": "alice@example.com", "groups": ["acme-readers"]}],
        "skip_consent": true,
    }));
    let ci = Issuer::start(tmp.path());
    let audience = stack.facts["functions"]["AuthFunction"]["environment"]["TFREG_CI_AUDIENCE"]
        .as_str()
        .unwrap()
        .to_string();
    let origin = Origin::start(tmp.path(), "127.0.0.131", "origin-roles.example.test");
    // The test's stand-ins for what the stack names outside this machine:
    // the identity provider and CI issuer on loopback (their issuers, and
    // the loopback exception the tests' settings allow), the origin on
    // loopback (the upstream's connect setting names it).
    let (issuer, ci_issuer, ci_ca) = (op.issuer.clone(), ci.op.issuer.clone(), ci.ca.clone());
    let ports = format!("{login_port}-{}", login_port + 1);
    let r = stack.serve(port, move |lid| {
        let mut extra: Vec<(&str, String)> = vec![
            (c::ORIGIN_ALLOW_LOOPBACK, "true".into()),
            ("TFREG_UPSTREAM_CONNECT_ALLOW", LOOPBACK.into()),
            (c::LOGIN_PORTS, ports.clone()),
        ];
        match lid {
            "AuthFunction" => extra.extend([
                (c::OIDC_ISSUER, issuer.clone()),
                (c::OIDC_ALLOW_LOOPBACK, "true".into()),
                (c::CI_ISSUERS, ci_issuer.clone()),
                ("SSL_CERT_FILE", ci_ca.display().to_string()),
            ]),
            "AdminFunction" => extra.push((c::CI_ISSUERS, ci_issuer.clone())),
            _ => {}
        }
        extra.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
    });
    eprintln!(
        "FIGURE full stack rehearsed, roles assumed, functions up: {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let admin_token = first_admin_token(&r);

    // The CI exchange: a GitHub-shaped job token for a trusted workflow
    // becomes a publish token for acme, which publishes a module.
    admin(
        &r,
        &admin_token,
        &[
            "trust",
            "add",
            "acme",
            "--issuer",
            &ci.op.issuer,
            "--kind",
            "github",
            "--claim",
            "repository_owner_id=1234",
            "--claim",
            "job_workflow_ref=acme/app/.github/workflows/release.yml@refs/tags/v*",
        ],
    );
    let jwt = crate::login::runtime()
        .block_on(ci.sign(json!({"claims": github_claims(&audience, json!({}))})));
    let resp = r
        .server
        .http
        .post(r.server.url("/v1/auth/exchange"))
        .json(&json!({"token": jwt}))
        .send()
        .unwrap();
    assert_eq!(resp.status(), 200, "{}", resp.text().unwrap_or_default());
    let exchanged: Value = resp.json().unwrap();
    let src = tmp.path().join("module");
    write_tree(&src, &[("main.tf", "output \"x\" { value = 1 }\n")]);
    ok(
        r.server.publish_module(
            exchanged["token"].as_str().unwrap(),
            &src,
            "acme/net/aws",
            "1.0.0",
        ),
        "publish with the exchanged token",
    );

    // terraform login: alice's group maps to read on acme; her token reads it.
    r.server.cli_on_store(&[
        "sso",
        "map",
        "acme-readers",
        "--scope",
        "read",
        "--namespace",
        "acme",
    ]);
    let home = tmp.path().join("home");
    let tf = tools.path("TFREG_TERRAFORM_NEW");
    let out = crate::login_cli::terraform_login(&tf, &r.server, &home, "alice");
    assert!(
        out.status.success(),
        "{}",
        crate::login_cli::said(&out, &home)
    );
    let creds: Value = serde_json::from_str(
        &std::fs::read_to_string(home.join(".terraform.d/credentials.tfrc.json")).unwrap(),
    )
    .unwrap();
    let token = creds["credentials"][&r.server.host]["token"]
        .as_str()
        .unwrap();
    let status = r
        .server
        .http
        .get(r.server.url("/v1/modules/acme/net/aws/versions"))
        .bearer_auth(token)
        .send()
        .unwrap()
        .status();
    assert_eq!(status, 200, "the signed-in token reads acme");

    // A cache fill: Terraform through the mirror of the origin.
    admin(
        &r,
        &admin_token,
        &origin
            .upstream_args()
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    );
    let fill = admin(
        &r,
        &admin_token,
        &[
            "token", "create", "--name", "f", "--scope", "read", "--fill",
        ],
    )
    .trim()
    .to_string();
    let tf = Terraform::new(tf, &r.server, &network_mirror_config(&r.server.host, &fill));
    let work = tmp.path().join("work-cache");
    write_tree(
        &work,
        &[(
            "main.tf",
            &format!(
                "terraform {{\n  required_providers {{\n    null = {{ source = \"{}/hashicorp/null\", version = \"1.0.0\" }}\n  }}\n}}\n",
                origin.host
            ),
        )],
    );
    ok(
        tf.run(&work, &["init", "-no-color"]),
        "terraform init through the cache",
    );
    let lock = lock_file(&work);
    assert!(
        lock.contains(&format!("{}/hashicorp/null", origin.host)),
        "{lock}"
    );
    calls_are_the_list(&r, "full");
    eprintln!(
        "FIGURE roles full: {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

/// A signed URL of a published archive, made by the reference signer with
/// the signing key as the stack stores it, through the stand-in: 200 with
/// the object's bytes; the same URL with another signature: 403.
fn edge_serves_the_stacks_archives(r: &Rehearsed, edge: &Edge, dir: &std::path::Path) {
    let code = r#"
import boto3, json, sys
f = json.load(open(sys.argv[1])); c = f["credentials"]
kw = dict(endpoint_url=f["moto"]["url"], region_name=f["region"],
          aws_access_key_id=c["AccessKeyId"], aws_secret_access_key=c["SecretAccessKey"])
pem = boto3.client("ssm", **kw).get_parameter(
    Name=f["archives"]["signing"]["key_reference"], WithDecryption=True)["Parameter"]["Value"]
objects = boto3.client("s3", **kw).list_objects_v2(Bucket=f["bucket"], Prefix="archives/")["Contents"]
zip = next(o for o in objects if o["Key"].endswith(".zip"))
print(json.dumps({"pem": pem, "key": zip["Key"], "size": zip["Size"]}))
"#;
    let got: Value =
        serde_json::from_str(&python(code, &[r.facts_path.to_str().unwrap()])).unwrap();
    let private = dir.join("archive-signing-key-a.pem");
    std::fs::write(&private, got["pem"].as_str().unwrap()).unwrap();
    let key = KeyPair {
        id: r.facts["archives"]["signing"]["key_pair_id"]
            .as_str()
            .unwrap()
            .to_string(),
        private,
        public_pem: String::new(),
    };
    let url = format!("{}/{}", edge.url, got["key"].as_str().unwrap());
    let signed = key.sign(epoch_in(300), &[&url]).remove(0);
    let resp = r.server.http.get(&signed).send().unwrap();
    assert_eq!(resp.status(), 200, "{signed}");
    assert_eq!(
        resp.bytes().unwrap().len() as u64,
        got["size"].as_u64().unwrap()
    );
    let (head, _) = signed.split_once("&Signature=").unwrap();
    let tampered = format!("{head}&Signature=AAAA&Key-Pair-Id={}", key.id);
    let resp = r.server.http.get(&tampered).send().unwrap();
    assert_eq!(resp.status(), 403, "{tampered}");
}
