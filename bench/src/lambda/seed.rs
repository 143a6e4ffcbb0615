//! What the functions read in the benchmark's table: one provider and one
//! module, published in-process through the registry's own publish routes
//! (signed with the test key, uploaded to the bucket), so each read route
//! answers what a user gets, not its not-found path (which for the version
//! lists also queries the releases: `catalog/indexing.rs`).

use tfreg_model::router::PublishTarget;
use tfreg_model::token::Scope;
use tfreg_testkit::{TestRegistry, TestSigner, module_archive, provider_release, provider_request};

use super::*;

/// The provider the read routes ask for (`acme/widget` 1.0.0, linux_amd64),
/// and the module (`acme/net/aws` 1.0.0).
pub(super) const PROVIDER: &str = "providers/acme/widget/1.0.0";
pub(super) const MODULE: &str = "modules/acme/net/aws/1.0.0";

/// Publish [`PROVIDER`] and [`MODULE`] into `backends`' table and bucket.
pub(super) async fn seed(backends: &Backends) -> Result<(), BoxError> {
    let registry = TestRegistry::aws_existing(&backends.table).await;
    let token = registry.token(Scope::Publish, Some("acme")).await;
    let signer = TestSigner::rsa();
    let provider = provider_release("widget", "1.0.0", &["linux_amd64"], &signer);
    let module = module_archive(&[("main.tf", "# acme/net/aws\n")]);
    for (target, files, request) in [
        (PROVIDER, provider, provider_request(&signer)),
        (
            MODULE,
            vec![("net.tar.gz".to_string(), module)],
            Default::default(),
        ),
    ] {
        let target = PublishTarget::try_from(target.to_string())?;
        let answer = registry.publish(&target, &token, &files, request).await;
        if !answer.status.is_success() {
            return Err(format!(
                "publishing {target:?} for the benchmark: {} {}",
                answer.status,
                answer.text()
            )
            .into());
        }
    }
    Ok(())
}
