//! The registry protocol over the wire: a download answer read at its final
//! URL and passed on with its keys byte for byte, and a module's location.

use tfreg_cache::origin::getter::{self, ArchiveFormat, ModuleSource};
use tfreg_cache::origin::{OriginError, SmallFile};
use tfreg_model::address::ModuleName;
use tfreg_model::version::Version;

use crate::support::{HOST, Rig, Script, download_answer, soon};

const KEYS: &str = r#"{"gpg_public_keys":[{"key_id":"ABCDEF0123456789","ascii_armor":"-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nxx\n-----END PGP PUBLIC KEY BLOCK-----","trust_signature":"","source":"Acme","source_url":null}]}"#;

fn answer(os: &str) -> String {
    format!(
        r#"{{"protocols":["5.0","6.0"],"os":"{os}","arch":"amd64","filename":"p_1.0.0_linux_amd64.zip",
            "download_url":"p.zip","shasum":"{}","shasums_url":"sums/SHA256SUMS",
            "shasums_signature_url":"sums/SHA256SUMS.sig","signing_keys":{KEYS}}}"#,
        "c".repeat(64)
    )
}

#[tokio::test]
async fn a_download_answer_resolves_against_its_final_url() {
    let rig = Rig::new().await;
    rig.serve_discovery();
    rig.origin
        .script(
            "/v1/providers/acme/p/1.0.0/download/linux/amd64",
            Script::redirect(302, "/mirror/acme/answer.json"),
        )
        .script("/mirror/acme/answer.json", Script::json(answer("linux")))
        .script(
            "/mirror/acme/sums/SHA256SUMS",
            Script::bytes("c  p_1.0.0_linux_amd64.zip\n"),
        );
    let services = rig.client.discover(soon()).await.unwrap();
    let a = download_answer(&rig, &services, "amd64").await.unwrap();
    assert_eq!(
        a.download_url.as_str(),
        format!("https://{HOST}/mirror/acme/p.zip")
    );
    assert_eq!(
        a.shasums_url.as_str(),
        format!("https://{HOST}/mirror/acme/sums/SHA256SUMS")
    );
    assert_eq!(a.protocols, ["5.0", "6.0"]);
    assert_eq!(
        a.signing_keys.get(),
        KEYS,
        "signing_keys passed on byte for byte"
    );
    assert_eq!(a.keys[0].key_id.as_deref(), Some("ABCDEF0123456789"));
    let sums = rig
        .client
        .fetch_small(&a.shasums_url, SmallFile::Shasums, soon())
        .await
        .unwrap();
    assert_eq!(sums, b"c  p_1.0.0_linux_amd64.zip\n");

    // The answer must be for the platform asked.
    rig.origin
        .script("/mirror/acme/answer.json", Script::json(answer("darwin")));
    let err = download_answer(&rig, &services, "amd64").await.unwrap_err();
    assert!(
        matches!(&err, OriginError::Protocol { reason, .. } if reason.contains("answered darwin_amd64")),
        "{err:?}"
    );
    // A platform the origin does not have.
    assert!(matches!(
        download_answer(&rig, &services, "arm64").await,
        Err(OriginError::NotFound { .. })
    ));
}

#[tokio::test]
async fn module_locations_over_the_wire() {
    let rig = Rig::new().await;
    rig.serve_discovery();
    rig.origin
        .script(
            "/v1/modules/acme/vpc/aws/1.0.0/download",
            Script::status(204).header(
                "x-terraform-get",
                "git::https://github.com/acme/vpc?ref=v1.0.0",
            ),
        )
        .script(
            "/v1/modules/acme/vpc/aws/2.0.0/download",
            Script::json(r#"{"location": "./vpc-2.0.0.tar.gz"}"#),
        );
    let services = rig.client.discover(soon()).await.unwrap();
    let vpc = ModuleName::parse("acme", "vpc", "aws").unwrap();
    let hosts = ["github.com", HOST];
    let one = rig
        .client
        .module_location(&services, &vpc, &Version::parse("1.0.0").unwrap(), soon())
        .await
        .unwrap();
    assert_eq!(
        getter::parse(&one.source, &hosts),
        ModuleSource::Git {
            repo_url: url::Url::parse("https://github.com/acme/vpc").unwrap(),
            reference: Some("v1.0.0".into()),
            subdir: None,
        }
    );
    let two = rig
        .client
        .module_location(&services, &vpc, &Version::parse("2.0.0").unwrap(), soon())
        .await
        .unwrap();
    assert_eq!(
        getter::parse(&two.source, &hosts),
        ModuleSource::Archive {
            url: url::Url::parse(&format!(
                "https://{HOST}/v1/modules/acme/vpc/aws/2.0.0/vpc-2.0.0.tar.gz"
            ))
            .unwrap(),
            format: ArchiveFormat::TarGz,
            subdir: None,
        }
    );
    assert!(matches!(
        rig.client
            .module_location(&services, &vpc, &Version::parse("3.0.0").unwrap(), soon())
            .await,
        Err(OriginError::NotFound { .. })
    ));
}
