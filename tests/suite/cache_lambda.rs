//! The pull-through cache on the Lambda functions (issue 22, plan step 3):
//! `cargo lambda watch`, the DynamoDB and S3 emulators, and an origin that
//! is a second `tfreg serve` under a foreign name. A miss in the mirror,
//! cache or blob function invokes the `fill` function (Lambda's Invoke
//! API, `InvocationType: Event`); it fetches, verifies and stores, and the
//! request that missed finds the result in the table, as in `tfreg serve`.

use std::sync::Arc;

use crate::cache_attacks::one_fetch_of_each_file;
use crate::cache_mirror::{Origin, Rig, terraform_through_the_cache};

/// 20 concurrent cold requests for the index, a version and an archive:
/// one request of each file at the origin, across the functions (the
/// fill's lease is a conditional write to DynamoDB).
#[test]
fn lambda_cold_requests_make_one_fetch_of_each_file() {
    let tmp = tempfile::tempdir().unwrap();
    let origin = Origin::start(tmp.path(), "127.0.0.112", "origin-lburst.example.test");
    let rig = Arc::new(Rig::on_lambda(tmp.path(), &origin));
    one_fetch_of_each_file(&origin, rig.clone());
    // Fetched by the fill function alone: the functions that answered
    // Terraform's requests made none.
    let log = rig.server.server_log();
    let filled = log
        .lines()
        .filter(|l| l.contains("\"message\":\"filled\""))
        .count();
    assert!(filled >= 3, "list, version and archive fills:\n{log}");
    // The fill streamed the archive in its own sandbox's temporary
    // directory (`TMPDIR`), which its init clears: never a directory every
    // fill function on the machine shares (`/tmp/tfreg-fill`), where one
    // test's fill starting removed another's archive mid-fill (503 "No such
    // file or directory").
    let own = tmp.path().join("lambda/tmp/fill/tfreg-fill");
    assert!(own.is_dir(), "{} was not made by the fill", own.display());
}

#[test]
fn terraform_1_0_installs_through_the_cache_on_lambda() {
    terraform_through_the_cache(
        "TFREG_TERRAFORM_1_0",
        "127.0.0.113",
        "origin-ltf10.example.test",
        true,
    );
}

#[test]
fn terraform_new_installs_through_the_cache_on_lambda() {
    terraform_through_the_cache(
        "TFREG_TERRAFORM_NEW",
        "127.0.0.114",
        "origin-ltfnew.example.test",
        true,
    );
}
