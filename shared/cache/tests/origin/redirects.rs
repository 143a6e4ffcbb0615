//! Redirects followed by hand: 3 for discovery (terraform-svchost), 5 for
//! everything else, and the services resolved against the final URL.

use tfreg_cache::origin::{OriginError, SmallFile};
use tfreg_model::address::ProviderName;

use crate::support::{HOST, Rig, Script, at, soon};

/// A chain `prefix0 → prefix1 → … → prefix{hops}` whose last path answers `last`.
fn chain(rig: &Rig, prefix: &str, hops: usize, last: Script) {
    for i in 0..hops {
        rig.origin.script(
            &format!("{prefix}{i}"),
            Script::redirect(302, &format!("{prefix}{}", i + 1)),
        );
    }
    rig.origin.script(&format!("{prefix}{hops}"), last);
}

#[tokio::test]
async fn discovery_follows_three_redirects_not_four() {
    let rig = Rig::new().await;
    let disco = Script::json(r#"{"providers.v1": "/v1/providers/"}"#);
    rig.origin
        .script("/.well-known/terraform.json", Script::redirect(301, "/d0"));
    chain(&rig, "/d", 2, disco.clone());
    let services = rig.client.discover(soon()).await.unwrap();
    assert_eq!(
        services.discovery_url.as_str(),
        format!("https://{HOST}/d2")
    );
    chain(&rig, "/d", 3, disco);
    let err = rig.client.discover(soon()).await.unwrap_err();
    assert!(
        matches!(&err, OriginError::Protocol { reason, .. } if reason == "more than 3 redirects"),
        "{err:?}"
    );
    assert_eq!(rig.origin.count("/d3"), 0, "the 4th hop was followed");
}

#[tokio::test]
async fn other_requests_follow_five_redirects_not_six() {
    let rig = Rig::new().await;
    chain(&rig, "/s", 5, Script::bytes("sums"));
    let sums = rig
        .client
        .fetch_small(&at("/s0"), SmallFile::Shasums, soon())
        .await
        .unwrap();
    assert_eq!(sums, b"sums");
    chain(&rig, "/t", 6, Script::bytes("sums"));
    let err = rig
        .client
        .fetch_small(&at("/t0"), SmallFile::Shasums, soon())
        .await
        .unwrap_err();
    assert!(matches!(err, OriginError::Protocol { .. }), "{err:?}");
    assert_eq!(rig.origin.count("/t5"), 1);
    assert_eq!(rig.origin.count("/t6"), 0, "the 6th hop was followed");
}

/// registry.opentofu.org serves a relative `providers.v1`: it resolves
/// against the final discovery URL, and the versions URL against it.
#[tokio::test]
async fn relative_services_resolve_against_the_final_discovery_url() {
    let rig = Rig::new().await;
    rig.origin
        .script(
            "/.well-known/terraform.json",
            Script::redirect(308, "/moved/terraform.json"),
        )
        .script(
            "/moved/terraform.json",
            Script::json(r#"{"providers.v1": "p/", "modules.v1": "/v1/modules/"}"#),
        )
        .script(
            "/moved/p/acme/null/versions",
            Script::json(r#"{"versions": [{"version": "1.0.0", "protocols": ["5.0"]}]}"#),
        );
    let services = rig.client.discover(soon()).await.unwrap();
    assert_eq!(
        services.providers_v1.as_ref().unwrap().as_str(),
        format!("https://{HOST}/moved/p/")
    );
    assert_eq!(
        services.modules_v1.as_ref().unwrap().as_str(),
        format!("https://{HOST}/v1/modules/")
    );
    let null = ProviderName::parse("acme", "null").unwrap();
    let versions = rig
        .client
        .provider_versions(&services, &null, soon())
        .await
        .unwrap();
    assert_eq!(versions.versions[0].version.to_string(), "1.0.0");
}

/// 404 is a host with no services; a document that is not
/// `application/json` is a protocol error.
#[tokio::test]
async fn discovery_without_services() {
    let rig = Rig::new().await;
    let services = rig.client.discover(soon()).await.unwrap();
    assert_eq!(
        (&services.providers_v1, &services.modules_v1),
        (&None, &None)
    );
    let null = ProviderName::parse("acme", "null").unwrap();
    let err = rig
        .client
        .provider_versions(&services, &null, soon())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("offers no providers.v1"), "{err}");
    rig.origin.script(
        "/.well-known/terraform.json",
        Script::bytes(r#"{"providers.v1": "/v1/providers/"}"#).header("content-type", "text/html"),
    );
    assert!(matches!(
        rig.client.discover(soon()).await,
        Err(OriginError::Protocol { .. })
    ));
}
