//! The upstream's token goes where Terraform sends its credentials: the
//! registry API on the upstream's own host, first hop only. Checked at the
//! origin, request by request.

use tfreg_cache::origin::{Bearer, OriginError, SmallFile, USER_AGENT};
use tfreg_model::address::{ModuleName, ProviderName};
use tfreg_model::version::Version;

use crate::support::{Rig, Script, at, download_answer, soon};

fn answer() -> String {
    format!(
        r#"{{"protocols": ["5.0"], "os": "linux", "arch": "amd64", "filename": "p.zip",
            "download_url": "/files/p.zip", "shasum": "{}",
            "shasums_url": "/files/SHA256SUMS", "shasums_signature_url": "/files/SHA256SUMS.sig",
            "signing_keys": {{"gpg_public_keys": []}}}}"#,
        "0".repeat(64)
    )
}

#[tokio::test]
async fn credentials_go_to_the_api_host_only() {
    let rig = Rig::with(|s| s.credentials = Some(Bearer::new("s3cret"))).await;
    rig.serve_discovery();
    rig.origin
        .script(
            "/v1/providers/acme/p/versions",
            Script::redirect(307, "/v1/providers/acme/p/versions2"),
        )
        .script(
            "/v1/providers/acme/p/versions2",
            Script::json(r#"{"versions": []}"#),
        )
        .script(
            "/v1/providers/acme/p/1.0.0/download/linux/amd64",
            Script::json(answer()),
        )
        .script("/files/SHA256SUMS", Script::bytes("sums"))
        .script("/files/SHA256SUMS.sig", Script::bytes("sig"))
        .script("/files/p.zip", Script::redirect(302, "/files/p2.zip"))
        .script("/files/p2.zip", Script::bytes("zip"))
        .script(
            "/v1/modules/acme/vpc/aws/1.0.0/download",
            Script::status(204).header("x-terraform-get", "./vpc.tar.gz"),
        );
    let p = ProviderName::parse("acme", "p").unwrap();
    let services = rig.client.discover(soon()).await.unwrap();
    rig.client
        .provider_versions(&services, &p, soon())
        .await
        .unwrap();
    let a = download_answer(&rig, &services, "amd64").await.unwrap();
    rig.client
        .fetch_small(&a.shasums_url, SmallFile::Shasums, soon())
        .await
        .unwrap();
    let sig = a.shasums_signature_url.as_ref().unwrap();
    rig.client
        .fetch_small(sig, SmallFile::Signature, soon())
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    rig.client
        .fetch_archive(&a.download_url, &dir.path().join("p.zip"), 1 << 20, soon())
        .await
        .unwrap();
    let vpc = ModuleName::parse("acme", "vpc", "aws").unwrap();
    rig.client
        .module_location(&services, &vpc, &Version::parse("1.0.0").unwrap(), soon())
        .await
        .unwrap();

    let bearer = Some("Bearer s3cret".to_string());
    let expected = [
        ("/.well-known/terraform.json", bearer.clone()),
        ("/v1/providers/acme/p/versions", bearer.clone()),
        ("/v1/providers/acme/p/versions2", None), // a redirect hop
        (
            "/v1/providers/acme/p/1.0.0/download/linux/amd64",
            bearer.clone(),
        ),
        ("/files/SHA256SUMS", None),
        ("/files/SHA256SUMS.sig", None),
        ("/files/p.zip", None),
        ("/files/p2.zip", None),
        ("/v1/modules/acme/vpc/aws/1.0.0/download", bearer),
    ];
    let hits = rig.origin.hits();
    let seen: Vec<(&str, Option<String>)> = hits
        .iter()
        .map(|h| (h.path.as_str(), h.authorization.clone()))
        .collect();
    assert_eq!(seen, expected);
    assert!(
        hits.iter()
            .all(|h| h.user_agent.as_deref() == Some(USER_AGENT)),
        "{hits:?}"
    );
}

/// A redirect to another path of the same host carries none either.
#[tokio::test]
async fn a_redirect_never_carries_credentials() {
    let rig = Rig::with(|s| s.credentials = Some(Bearer::new("s3cret"))).await;
    rig.origin
        .script(
            "/.well-known/terraform.json",
            Script::redirect(302, "/again"),
        )
        .script("/again", Script::json("{}"));
    rig.client.discover(soon()).await.unwrap();
    let auth: Vec<_> = rig
        .origin
        .hits()
        .into_iter()
        .map(|h| h.authorization)
        .collect();
    assert_eq!(auth, [Some("Bearer s3cret".to_string()), None]);
}

#[tokio::test]
async fn refused_credentials_are_named() {
    let rig = Rig::with(|s| s.credentials = Some(Bearer::new("wrong"))).await;
    rig.serve_discovery();
    rig.origin
        .script("/v1/providers/acme/p/versions", Script::status(401));
    let services = rig.client.discover(soon()).await.unwrap();
    let p = ProviderName::parse("acme", "p").unwrap();
    let err = rig
        .client
        .provider_versions(&services, &p, soon())
        .await
        .unwrap_err();
    assert!(
        matches!(err, OriginError::CredentialsRefused { status: 401, .. }),
        "{err:?}"
    );
    // A 403 on a file (an expired signed URL, say) is no credentials
    // problem: worth asking again.
    rig.origin.script("/files/SHA256SUMS", Script::status(403));
    let err = rig
        .client
        .fetch_small(&at("/files/SHA256SUMS"), SmallFile::Shasums, soon())
        .await
        .unwrap_err();
    assert!(err.is_transient(), "{err:?}");
}
