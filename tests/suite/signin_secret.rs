//! The auth function's client secret, read at init (`tfreg_lambda::auth`)
//! from SSM Parameter Store (a SecureString, by name and by ARN) and from
//! Secrets Manager (by ARN) over their wire protocols, on moto's server:
//! the SDK clients the function links, with the SDK configuration and
//! HTTPS client of the store's own clients. The value is never printed.

use tfreg_lambda::auth::read_secret;
use tfreg_lambda::signin::SecretRef;

use crate::support::moto::Moto;
use crate::support::tools::require_emulators;

const VALUE: &str = "the-client-secret-0f3a9";

#[test]
fn the_client_secret_is_read_from_ssm_and_secrets_manager_and_never_shown() {
    // The emulators' environment: a region and credentials to sign with.
    require_emulators();
    let tmp = tempfile::tempdir().unwrap();
    let moto = Moto::start(&tmp.path().join("moto.log"));
    let parameter_arn = moto.put_parameter("/tfreg/oidc-client-secret", VALUE);
    let secret_arn = moto.create_secret("tfreg/oidc-client-secret", &format!("{VALUE}\n"));
    assert!(
        secret_arn.starts_with("arn:aws:secretsmanager:"),
        "{secret_arn}"
    );
    let (sdk, get) = moto.function_view();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        for text in [
            "/tfreg/oidc-client-secret",
            parameter_arn.as_str(),
            secret_arn.as_str(),
        ] {
            let reference = SecretRef::parse(text).unwrap();
            let secret = read_secret(&sdk, &reference, &*get)
                .await
                .unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(
                secret.expose(),
                VALUE,
                "{text}: the value, without its newline"
            );
            assert_eq!(format!("{secret:?}"), "Secret(..)");
        }
        assert!(matches!(
            SecretRef::parse(&secret_arn).unwrap(),
            SecretRef::SecretsManager(_)
        ));
        // A reference to nothing: init fails naming it (and the service's
        // answer), never a value.
        for missing in [
            "/tfreg/no-such-parameter".to_string(),
            secret_arn.replace("oidc-client-secret", "none"),
        ] {
            let err = read_secret(&sdk, &SecretRef::parse(&missing).unwrap(), &*get)
                .await
                .err()
                .unwrap_or_else(|| panic!("{missing} exists?"));
            let text = err.to_string();
            assert!(text.contains(&missing), "{text}");
            assert!(text.contains("NotFound"), "{text}");
            assert!(!text.contains(VALUE), "{text}");
        }
    });
}
