//! End-to-end in AWS mode: every Lambda function under `cargo lambda watch`
//! (real Lambda runtime API, HTTPS), DynamoDB and S3 emulators that speak the
//! real wire protocols, and the real Terraform CLI. Archives are uploaded with
//! presigned PUTs and downloaded from S3 through presigned GETs.

use std::time::Instant;

use crate::support::fixtures::*;
use crate::support::log;
use crate::support::*;

#[test]
fn lambda_functions_serve_terraform_through_registry_and_mirror() {
    let tools = Tools::get();
    let tmp = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let server = Server::start_lambda(&tmp.path().join("lambda"));
    eprintln!(
        "FIGURE cargo lambda watch ready: {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let token = server.token("publish", None);
    // A deployed registry is private by default: every read below needs a token.
    let read_token = server.token("read", None);
    let published = publish_fixture(&server, &token, tmp.path());
    let host = server.host.clone();

    // infra/smoke-test, the check an operator runs against a deployed stack,
    // passes against the functions, and fails when asked for what is not there.
    smoke_test_passes(
        &host,
        &server.ca,
        &token,
        &format!("{NS}/null"),
        &format!("{NS}/greeting/null"),
    );
    let out = smoke_test(
        &host,
        &server.ca,
        &token,
        &["--provider", &format!("{NS}/absent")],
    );
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("FAIL provider versions: HTTP 404"));

    // Private by default: without a token the versions list is refused.
    let anonymous = server.get(&format!("/v1/providers/{NS}/null/versions"));
    assert_eq!(
        anonymous.status(),
        401,
        "a deployed registry is private by default"
    );

    // Registry protocol with Terraform 1.0.3 (GET only) and 1.11.4 (HEAD, then GET).
    // Both get the read token from a `credentials` block: TF_TOKEN_<host> cannot
    // name this host, 127.0.0.1:PORT (the variable's name has no way to spell
    // the `:`), so 1.11 cannot use the environment form here (e2e_access does).
    for var in ["TFREG_TERRAFORM_1_0", "TFREG_TERRAFORM_1_11"] {
        let tf = Terraform::new(tools.path(var), &server, &credentials(&host, &read_token));
        let work = tmp.path().join(format!("work-{var}"));
        root_config(&work, &host);
        init_and_apply(&tf, &work, &format!("{var} on Lambda (registry protocol)"));
        let outputs: serde_json::Value =
            serde_json::from_str(&ok(tf.run(&work, &["output", "-json"]), "terraform output"))
                .unwrap();
        assert_eq!(outputs["version"]["value"], "1.1.0");
        assert_eq!(outputs["sub"]["value"], "hello from sub");
        let lock = lock_file(&work);
        assert!(lock.contains(&h1(&published.zips_2_1_2[0])), "{lock}");
        for zip in &published.zips_2_1_2 {
            assert!(lock.contains(&zh(zip)), "{lock}");
        }
    }
    let requests = log::requests(&server.server_log());
    let head_ok = requests
        .iter()
        .any(|r| r.method == "HEAD" && r.endpoint == "blob" && r.status == 200);
    assert!(
        head_ok,
        "Terraform 1.11 sent a HEAD for the archive and the blob function answered 200:\n{requests:#?}"
    );

    // Network mirror: a provider of another origin, imported into DynamoDB + S3.
    let (mirror_dir, imported) = mirror_import_dir(tmp.path(), tools);
    ok(
        server.tfreg(&token, &["mirror", "import", mirror_dir.to_str().unwrap()]),
        "tfreg mirror import",
    );
    let config = network_mirror_config(&host, &read_token);
    let tf = Terraform::new(tools.path("TFREG_TERRAFORM_1_0"), &server, &config);
    let work = tmp.path().join("work-mirror");
    write_tree(
        &work,
        &[(
            "main.tf",
            "terraform {\n  required_providers {\n    null = { source = \"hashicorp/null\", version = \"2.1.2\" }\n  }\n}\nresource \"null_resource\" \"x\" {}\n",
        )],
    );
    ok(
        tf.run(&work, &["init", "-no-color"]),
        "terraform init (network mirror on Lambda)",
    );
    ok(
        tf.run(&work, &["apply", "-auto-approve", "-no-color"]),
        "terraform apply (network mirror on Lambda)",
    );
    let lock = lock_file(&work);
    assert!(
        lock.contains("registry.terraform.io/hashicorp/null") && lock.contains(&h1(&imported)),
        "{lock}"
    );
    let requests = log::assert_no_server_errors(&server.server_log(), 20);
    assert!(
        requests
            .iter()
            .any(|r| r.endpoint == "mirror-version" && r.status == 200),
        "the mirror function answered"
    );
}
