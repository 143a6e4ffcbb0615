//! End-to-end: the real Terraform CLI against `tfreg serve` over HTTPS, with
//! GPG-signed releases of the real null provider and a module with a submodule.

use std::time::Instant;

use crate::support::fixtures::*;
use crate::support::log;
use crate::support::*;

#[test]
fn terraform_1_0_registry_protocol_mirror_and_lock() {
    let tools = Tools::get();
    let tmp = tempfile::tempdir().unwrap();
    // Terraform cannot use a network mirror for a provider whose hostname has a
    // port ("first path segment in URL cannot contain colon"), so this registry
    // is served as in production, on 443, at its own loopback address.
    // Reads need a token here, so the whole flow also proves Terraform's credentials reach us.
    let server = Server::start_at(&tmp.path().join("data"), "127.0.0.77:443", &["--private"]);
    let publish_token = server.token("publish", None);
    let read_token = server.token("read", None);
    let published = publish_fixture(&server, &publish_token, tmp.path());
    let host = server.host.clone();

    // The download answer carries every platform's zh: and h1: (OpenTofu 1.12 `packages`).
    let download: serde_json::Value = server
        .http
        .get(server.url(&format!(
            "/v1/providers/{NS}/null/2.1.2/download/linux/amd64"
        )))
        .bearer_auth(&read_token)
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(
        download["protocols"],
        serde_json::json!(["5.0"]),
        "from the release manifest"
    );
    for (zip, platform) in published
        .zips_2_1_2
        .iter()
        .zip(["linux_amd64", "darwin_arm64"])
    {
        let hashes = &download["packages"][platform]["hashes"];
        // The same order as the mirror and the UI give: h1:, then zh:.
        assert_eq!(hashes, &serde_json::json!([h1(zip), zh(zip)]), "{platform}");
        assert_eq!(
            download["packages"][platform]["package_size"],
            std::fs::metadata(zip).unwrap().len()
        );
    }

    // --- registry protocol: init + apply with version constraints --------------
    let tf = Terraform::new(
        tools.path("TFREG_TERRAFORM_1_0"),
        &server,
        &credentials(&host, &read_token),
    );
    let work = tmp.path().join("work");
    root_config(&work, &host);
    let started = Instant::now();
    let init = ok(tf.run(&work, &["init", "-no-color"]), "terraform init");
    eprintln!(
        "FIGURE terraform 1.0.3 init (registry protocol, provider + 2 modules): {:.2} s",
        started.elapsed().as_secs_f64()
    );
    assert!(
        init.contains("Installed") && init.contains("2.1.2"),
        "{init}"
    );
    let lock = lock_file(&work);
    assert!(
        lock.contains(&format!("provider \"{host}/{NS}/null\"")),
        "{lock}"
    );
    assert!(
        lock.contains("version     = \"2.1.2\""),
        "~> 2.1 must pick 2.1.2, not 3.0.0:\n{lock}"
    );
    // Terraform verified the signature and recorded the zh: of every platform from SHA256SUMS.
    for zip in &published.zips_2_1_2 {
        assert!(lock.contains(&zh(zip)), "{lock}");
    }
    assert!(
        lock.contains(&h1(&published.zips_2_1_2[0])),
        "h1 of linux_amd64 expected in\n{lock}"
    );
    ok(
        tf.run(&work, &["apply", "-auto-approve", "-no-color"]),
        "terraform apply",
    );
    let outputs: serde_json::Value =
        serde_json::from_str(&ok(tf.run(&work, &["output", "-json"]), "terraform output")).unwrap();
    assert_eq!(
        outputs["version"]["value"], "1.1.0",
        "~> 1.0 must pick 1.1.0"
    );
    assert_eq!(outputs["sub"]["value"], "hello from sub");
    assert_eq!(outputs["sub_only"]["value"], "hi from sub");
    // .git and .terraform were not packed.
    assert!(!work.join(".terraform/modules/greeting/.git").exists());
    assert!(!work.join(".terraform/modules/greeting/.terraform").exists());

    // --- providers lock for two platforms -------------------------------------
    std::fs::remove_file(work.join(".terraform.lock.hcl")).unwrap();
    ok(
        tf.run(
            &work,
            &[
                "providers",
                "lock",
                "-no-color",
                "-platform=linux_amd64",
                "-platform=darwin_arm64",
            ],
        ),
        "terraform providers lock",
    );
    let lock = lock_file(&work);
    for zip in &published.zips_2_1_2 {
        assert!(lock.contains(&h1(zip)), "missing {} in\n{lock}", h1(zip));
        assert!(lock.contains(&zh(zip)), "missing {} in\n{lock}", zh(zip));
    }

    // --- network mirror: our own provider and an imported registry.terraform.io one
    let (mirror_dir, imported) = mirror_import_dir(tmp.path(), tools);
    // The JSON beside the zips is never trusted: a lying index must not matter.
    std::fs::write(
        imported.with_file_name("index.json"),
        r#"{"versions":{"9.9.9":{}}}"#,
    )
    .unwrap();
    ok(
        server.tfreg(
            &publish_token,
            &["mirror", "import", mirror_dir.to_str().unwrap()],
        ),
        "tfreg mirror import",
    );
    let mirror_config = network_mirror_config(&host, &read_token);
    let tf = Terraform::new(tools.path("TFREG_TERRAFORM_1_0"), &server, &mirror_config);
    let work = tmp.path().join("work-mirror");
    write_tree(
        &work,
        &[(
            "main.tf",
            &format!(
                r#"terraform {{
  required_providers {{
    null  = {{ source = "{host}/{NS}/null", version = "2.1.2" }}
    hnull = {{ source = "hashicorp/null", version = "2.1.2" }}
  }}
}}
resource "null_resource" "ours" {{}}
resource "null_resource" "theirs" {{ provider = hnull }}
"#
            ),
        )],
    );
    let started = Instant::now();
    ok(
        tf.run(&work, &["init", "-no-color"]),
        "terraform init (network mirror)",
    );
    eprintln!(
        "FIGURE terraform 1.0.3 init (network mirror, 2 providers): {:.2} s",
        started.elapsed().as_secs_f64()
    );
    ok(
        tf.run(&work, &["apply", "-auto-approve", "-no-color"]),
        "terraform apply (network mirror)",
    );
    let lock = lock_file(&work);
    assert!(
        lock.contains("provider \"registry.terraform.io/hashicorp/null\""),
        "{lock}"
    );
    assert!(lock.contains(&h1(&imported)), "{lock}");
    let requests = log::assert_no_server_errors(&server.server_log(), 20);
    assert!(
        requests
            .iter()
            .any(|r| r.endpoint == "mirror-version" && r.status == 200),
        "the mirror protocol was used"
    );
}

/// Terraform 1.11.x sends HEAD before GET for provider archives; 1.12 does not.
/// Both must install from the registry protocol and the archive URLs must answer both.
#[test]
fn newer_terraform_head_then_get_and_apply() {
    let tools = Tools::get();
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("data"), &[]);
    let token = server.token("publish", Some(NS));
    publish_fixture(&server, &token, tmp.path());
    for var in ["TFREG_TERRAFORM_1_11", "TFREG_TERRAFORM_NEW"] {
        let tf = Terraform::new(tools.path(var), &server, "");
        let work = tmp.path().join(format!("work-{var}"));
        root_config(&work, &server.host);
        init_and_apply(&tf, &work, &format!("{var} (registry protocol)"));
    }
    let requests = log::assert_no_server_errors(&server.server_log(), 20);
    let head_ok = requests.iter().any(|r| {
        r.method == "HEAD" && r.path.starts_with("/v1/blobs/archives/") && r.status == 200
    });
    assert!(
        head_ok,
        "Terraform 1.11 should have sent a HEAD for the provider archive, answered 200:\n{requests:#?}"
    );
}
