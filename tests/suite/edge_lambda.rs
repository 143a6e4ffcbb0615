//! Archives from the edge, end to end (issue 37): the Lambda functions on the
//! emulators in cloudfront mode (their signing key a SecureString in SSM on
//! moto's server), the CloudFront stand-in in front of their bucket, and the
//! real Terraform 1.0.3 (GET) and 1.11.4 (HEAD, then GET): `terraform init`
//! of a published provider and module whose archives, SHA256SUMS and
//! signature all come from the stand-in through tfreg's signed URLs, never
//! from the blob function; the network mirror's archives likewise; and a
//! pull-through cache's archive, filled by the blob function's miss, then
//! redirected to the stand-in.

use std::time::Instant;

use crate::cache_mirror::{LOOPBACK, Origin, Rig};
use crate::support::edge::{Edge, EdgeRequest, EdgeRig};
use crate::support::fixtures::*;
use crate::support::log;
use crate::support::*;

/// The stand-in's answers from `from` on, each checked: for a path under
/// `prefix`, sent on to the bucket (signature, key and expiry good) and
/// found there.
#[track_caller]
fn served_since(edge: &Edge, from: usize, prefix: &str) -> Vec<EdgeRequest> {
    let served: Vec<EdgeRequest> = edge.requests().split_off(from);
    let bad: Vec<&EdgeRequest> = served
        .iter()
        .filter(|r| r.refused.is_some() || r.status != 200 || !r.path.starts_with(prefix))
        .collect();
    assert!(bad.is_empty(), "the stand-in refused or missed: {bad:#?}");
    served
}

#[test]
fn terraform_installs_through_cloudfront_signed_urls_on_lambda() {
    let tools = Tools::get();
    let tmp = tempfile::tempdir().unwrap();
    let started = Instant::now();
    // The cache's origin, below, lives on loopback: the operator allows it.
    let EdgeRig {
        server,
        edge,
        moto: _moto,
    } = EdgeRig::start(tmp.path(), &[("TFREG_UPSTREAM_CONNECT_ALLOW", LOOPBACK)]);
    eprintln!(
        "FIGURE cloudfront mode ready (moto, functions, stand-in): {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let host = server.host.clone();
    let token = server.token("publish", None);
    let read_token = server.token("read", None);
    let published = publish_fixture(&server, &token, tmp.path());

    for (var, head_first) in [
        ("TFREG_TERRAFORM_1_0", false),
        ("TFREG_TERRAFORM_1_11", true),
    ] {
        let tf = Terraform::new(tools.path(var), &server, &credentials(&host, &read_token));
        let work = tmp.path().join(format!("work-{var}"));
        root_config(&work, &host);
        let before = edge.requests().len();
        let init = Instant::now();
        ok(
            tf.run(&work, &["init", "-no-color"]),
            &format!("{var} init"),
        );
        let served = served_since(&edge, before, "/archives/");
        eprintln!(
            "FIGURE {var} init through the stand-in: {:.2} s, {} requests served ({} HEAD)",
            init.elapsed().as_secs_f64(),
            served.len(),
            served.iter().filter(|r| r.method == "HEAD").count()
        );
        // The provider's zip, SHA256SUMS and its signature, and the two
        // module archives (greeting 1.1.0, and 1.0.0 for `//modules/sub`).
        let got = |suffix: &str, method: &str| {
            served
                .iter()
                .filter(|r| r.method == method && r.path.ends_with(suffix))
                .count()
        };
        assert_eq!(got("_linux_amd64.zip", "GET"), 1, "{served:#?}");
        assert_eq!(got("_SHA256SUMS", "GET"), 1, "{served:#?}");
        assert_eq!(got("_SHA256SUMS.sig", "GET"), 1, "{served:#?}");
        assert_eq!(got(".tar.gz", "GET"), 2, "{served:#?}");
        assert_eq!(
            got("_linux_amd64.zip", "HEAD"),
            usize::from(head_first),
            "Terraform 1.11 sends a HEAD before the GET, 1.0 none: {served:#?}"
        );
        let lock = lock_file(&work);
        assert!(lock.contains(&h1(&published.zips_2_1_2[0])), "{lock}");
        assert!(work.join(".terraform/modules/greeting/main.tf").exists());
    }

    // The network mirror's answer leads to the stand-in too.
    let (mirror_dir, imported) = mirror_import_dir(tmp.path(), tools);
    ok(
        server.tfreg(&token, &["mirror", "import", mirror_dir.to_str().unwrap()]),
        "tfreg mirror import",
    );
    let version: serde_json::Value = server
        .http
        .get(server.url("/v1/mirror/registry.terraform.io/hashicorp/null/2.1.2.json"))
        .bearer_auth(&read_token)
        .send()
        .unwrap()
        .json()
        .unwrap();
    let url = version["archives"]["linux_amd64"]["url"].as_str().unwrap();
    assert!(
        url.starts_with(&format!("{}/archives/", edge.url)),
        "{version}"
    );
    let before = edge.requests().len();
    let resp = server.http.get(url).send().unwrap();
    assert_eq!(resp.status(), 200, "{url}");
    assert_eq!(resp.bytes().unwrap(), std::fs::read(&imported).unwrap());
    assert_eq!(served_since(&edge, before, "/archives/").len(), 1);

    // No archive came from the blob function: every one was the edge's.
    let requests = log::assert_no_server_errors(&server.server_log(), 10);
    let from_blob: Vec<_> = requests
        .iter()
        .filter(|r| r.endpoint == "blob" && r.path.contains("/archives/"))
        .collect();
    assert!(
        from_blob.is_empty(),
        "the blob function served archives: {from_blob:#?}"
    );

    // A pull-through cache's archive: the registry's own URL (the object
    // may not be in the bucket yet), whose miss the blob function fills,
    // then sends on to the stand-in's signed URL.
    let origin = Origin::start(tmp.path(), "127.0.0.116", "origin-edge.example.test");
    let cache = Rig::configured(server, origin.upstream_args());
    let base = format!("/v1/mirror/{}/hashicorp/null", origin.host);
    assert_eq!(cache.get(&format!("{base}/index.json")).0, 200);
    let (status, version) = cache.get(&format!("{base}/1.0.0.json"));
    assert_eq!(status, 200, "{version}");
    let url = version["archives"]["linux_amd64"]["url"].as_str().unwrap();
    let before = edge.requests().len();
    let (status, bytes) = cache.download(url);
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&bytes));
    assert!(bytes == origin.linux_zip, "the origin's zip, byte for byte");
    assert_eq!(served_since(&edge, before, "/cache/").len(), 1);
    eprintln!(
        "FIGURE cloudfront e2e total: {:.1} s",
        started.elapsed().as_secs_f64()
    );
}
