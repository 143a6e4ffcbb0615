//! The AWS SDK's one HTTPS client (hyper 1 and rustls with *ring*: the SDK's
//! default features would link a second stack, hyper 0.14 and rustls 0.21,
//! and aws-lc) and the certificate authorities it trusts.

use aws_sdk_dynamodb::config::SharedHttpClient;
use aws_smithy_http_client::tls::rustls_provider::CryptoMode;
use aws_smithy_http_client::tls::{Provider, TlsContext, TrustStore};

/// The roots AWS's endpoints chain to (Amazon Trust Services, the Starfield
/// root that cross-signs them, DigiCert's global roots), compiled in.
pub const AWS_ROOTS_PEM: &str = include_str!("aws-roots.pem");

/// Which certificate authorities the SDK's TLS client trusts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Roots {
    /// The system's bundle, as `rustls-native-certs` finds it: every
    /// certificate of it read and parsed at the first connection (a few
    /// milliseconds of a Lambda cold start).
    System,
    /// [`AWS_ROOTS_PEM`]: seven certificates, nothing read from disk.
    Aws,
}

/// Environment variables that send the SDK's requests somewhere other than
/// AWS's own endpoints, or name the certificates to trust: with any of them
/// set, a function trusts the system's roots.
const ELSEWHERE: [&str; 5] = [
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_DYNAMODB",
    "AWS_ENDPOINT_URL_S3",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
];

impl Roots {
    /// A Lambda function's roots, from its environment read through `get`:
    /// AWS's when its requests go to AWS, else the system's.
    pub fn for_function(get: impl Fn(&str) -> Option<String>) -> Roots {
        let elsewhere = ELSEWHERE
            .iter()
            .any(|name| get(name).is_some_and(|v| !v.trim().is_empty()));
        if elsewhere { Roots::System } else { Roots::Aws }
    }
}

/// The HTTPS client every SDK client of tfreg uses.
pub fn https_client(roots: Roots) -> SharedHttpClient {
    let trust = match roots {
        Roots::System => TrustStore::default(),
        Roots::Aws => TrustStore::empty().with_pem_certificate(AWS_ROOTS_PEM.as_bytes()),
    };
    let context = TlsContext::builder()
        .with_trust_store(trust)
        .build()
        .expect("a TLS context is built from any trust store");
    aws_smithy_http_client::Builder::new()
        .tls_provider(Provider::Rustls(CryptoMode::Ring))
        .tls_context(context)
        .build_https()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls_pki_types::CertificateDer;
    use rustls_pki_types::pem::PemObject;

    /// Amazon Root CA 1-4, Starfield Services Root G2 (which cross-signs
    /// them), DigiCert Global Root CA and G2: each a trust anchor.
    #[test]
    fn the_compiled_in_roots_are_seven_parsable_certificates() {
        let certs: Vec<CertificateDer> = CertificateDer::pem_slice_iter(AWS_ROOTS_PEM.as_bytes())
            .collect::<Result<_, _>>()
            .expect("valid PEM");
        assert!(!certs.is_empty(), "no certificate in aws-roots.pem");
        assert_eq!(certs.len(), 7);
        for cert in &certs {
            webpki::anchor_from_trusted_cert(cert).expect("a trust anchor");
        }
    }

    /// The emulators are plain HTTP: the client reaches them whichever roots
    /// it trusts (a function sent to them trusts the system's, see below).
    /// The SDK reads the roots when it makes its connector, at the first
    /// request (aws-smithy-http-client's `rustls_root_certs`: each PEM item
    /// added as an anchor, a panic on one that does not parse), so with
    /// `Roots::Aws` this also runs the SDK's own parse of aws-roots.pem.
    #[tokio::test]
    async fn the_emulators_answer_over_plain_http_with_either_roots() {
        crate::testing::require_emulators();
        for roots in [Roots::Aws, Roots::System] {
            let (dynamodb, s3) = crate::aws::lambda::clients_trusting(
                &crate::aws::lambda::Endpoints::default(),
                true,
                roots,
            )
            .await
            .expect("clients");
            dynamodb
                .list_tables()
                .send()
                .await
                .unwrap_or_else(|e| panic!("{roots:?}: DynamoDB ListTables: {e:?}"));
            s3.list_buckets()
                .send()
                .await
                .unwrap_or_else(|e| panic!("{roots:?}: S3 ListBuckets: {e:?}"));
        }
    }

    #[test]
    fn a_function_trusts_aws_roots_unless_sent_elsewhere() {
        assert_eq!(Roots::for_function(|_| None), Roots::Aws);
        assert_eq!(
            Roots::for_function(|n| (n == "AWS_REGION").then(|| "eu-west-1".into())),
            Roots::Aws
        );
        for name in ELSEWHERE {
            let get = |n: &str| (n == name).then(|| "http://127.0.0.1:8000".to_string());
            assert_eq!(Roots::for_function(get), Roots::System, "{name}");
            assert_eq!(
                Roots::for_function(|n| (n == name).then(String::new)),
                Roots::Aws
            );
        }
    }
}
