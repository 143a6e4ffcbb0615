//! Which registries the CLI trusts: certificates that chain to the system's
//! roots (which honour `SSL_CERT_FILE` and `SSL_CERT_DIR`) or to `--ca-cert`,
//! as before; and also a server certificate the operator listed explicitly
//! (in `SSL_CERT_FILE` or `--ca-cert`) even when it says `CA:TRUE`, as the
//! classic `openssl req -x509` self-signed certificate does. curl and
//! Terraform accept that one; webpki alone refuses a CA certificate as the
//! server's own.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, Error, RootCertStore, SignatureScheme};

/// A certificate file that could not be used.
#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    #[error("reading certificates from {what} {}: {source}", path.display())]
    Read {
        what: &'static str,
        path: PathBuf,
        source: rustls::pki_types::pem::Error,
    },
    #[error("{what} {} holds no PEM certificate", path.display())]
    Empty { what: &'static str, path: PathBuf },
    #[error(
        "no trusted certificates: none in the system's store; point SSL_CERT_FILE or --ca-cert at the registry's certificate or its CA"
    )]
    NoRoots,
    #[error("setting up TLS: {0}")]
    Tls(String),
}

/// The PEM certificates in `path` (named `what` in errors); at least one.
fn certificates_in(
    what: &'static str,
    path: &Path,
) -> Result<Vec<CertificateDer<'static>>, TrustError> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|source| TrustError::Read {
            what,
            path: path.to_path_buf(),
            source,
        })?;
    if certs.is_empty() {
        return Err(TrustError::Empty {
            what,
            path: path.to_path_buf(),
        });
    }
    Ok(certs)
}

/// The CLI's TLS configuration: the system's roots (honouring `SSL_CERT_FILE`
/// and `SSL_CERT_DIR`) and `ca_cert`, with the certificates of `SSL_CERT_FILE`
/// and `ca_cert` also trusted as the server's own.
pub fn client_config(ca_cert: Option<&Path>) -> Result<rustls::ClientConfig, TrustError> {
    client_config_named("--ca-cert", ca_cert)
}

/// [`client_config`], the file `ca_cert` named `flag` in errors.
pub fn client_config_named(
    flag: &'static str,
    ca_cert: Option<&Path>,
) -> Result<rustls::ClientConfig, TrustError> {
    let mut listed = Vec::new();
    if let Some(file) = std::env::var_os("SSL_CERT_FILE") {
        listed.extend(certificates_in("SSL_CERT_FILE", Path::new(&file))?);
    }
    if let Some(file) = ca_cert {
        listed.extend(certificates_in(flag, file)?);
    }
    // Like reqwest's own native roots: certificates the system store cannot
    // parse are skipped (a missing SSL_CERT_FILE was reported just above).
    let native = rustls_native_certs::load_native_certs();
    for e in &native.errors {
        tracing::debug!(error = %e, "skipping part of the system's certificate store");
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = ListedOrChained::new(native.certs, listed, provider.clone())?;
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| TrustError::Tls(e.to_string()))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth();
    // What reqwest offers when it builds the TLS configuration itself.
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

/// webpki's verification against the roots and the listed certificates, which
/// also accepts a listed certificate used as the server's own when webpki's
/// only objection is that it is a CA certificate.
#[derive(Debug)]
pub struct ListedOrChained {
    webpki: Arc<WebPkiServerVerifier>,
    listed: Vec<CertificateDer<'static>>,
}

impl ListedOrChained {
    /// Trust anchors: `roots` and `listed`; accepted as is: `listed`.
    pub fn new(
        roots: Vec<CertificateDer<'static>>,
        listed: Vec<CertificateDer<'static>>,
        provider: Arc<CryptoProvider>,
    ) -> Result<Self, TrustError> {
        let mut store = RootCertStore::empty();
        store.add_parsable_certificates(roots.into_iter().chain(listed.iter().cloned()));
        if store.is_empty() {
            return Err(TrustError::NoRoots);
        }
        let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(store), provider)
            .build()
            .map_err(|e| TrustError::Tls(e.to_string()))?;
        Ok(Self { webpki, listed })
    }
}

/// webpki's refusal of a CA certificate presented as the server's own.
fn is_ca_used_as_end_entity(e: &Error) -> bool {
    matches!(e, Error::InvalidCertificate(CertificateError::Other(other))
        if other.0.downcast_ref::<webpki::Error>() == Some(&webpki::Error::CaUsedAsEndEntity))
}

impl ServerCertVerifier for ListedOrChained {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        match self.webpki.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        ) {
            Err(e)
                if is_ca_used_as_end_entity(&e) && self.listed.iter().any(|c| c == end_entity) =>
            {
                // webpki checks the validity dates before it objects to a CA
                // certificate (the tests below hold it to that), so the name
                // is what is left to check.
                let cert = rustls::server::ParsedCertificate::try_from(end_entity)?;
                rustls::client::verify_server_name(&cert, server_name)?;
                Ok(ServerCertVerified::assertion())
            }
            result => result,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.webpki.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.webpki.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.webpki.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};

    const DAY: i64 = 86_400;

    /// A self-signed certificate for 127.0.0.1, valid from `from` to `to`
    /// (seconds from now), `CA:TRUE` when `ca`.
    fn self_signed(ca: bool, from: i64, to: i64) -> CertificateDer<'static> {
        let mut params = CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
        params.is_ca = if ca {
            IsCa::Ca(BasicConstraints::Unconstrained)
        } else {
            IsCa::ExplicitNoCa
        };
        let now = rcgen::date_time_ymd(1970, 1, 1)
            + std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap();
        let at = |secs: i64| {
            let offset = std::time::Duration::from_secs(secs.unsigned_abs());
            if secs >= 0 {
                now + offset
            } else {
                now - offset
            }
        };
        params.not_before = at(from);
        params.not_after = at(to);
        params
            .self_signed(&KeyPair::generate().unwrap())
            .unwrap()
            .der()
            .clone()
    }

    fn verifier(
        roots: Vec<CertificateDer<'static>>,
        listed: Vec<CertificateDer<'static>>,
    ) -> ListedOrChained {
        ListedOrChained::new(
            roots,
            listed,
            Arc::new(rustls::crypto::ring::default_provider()),
        )
        .unwrap()
    }

    fn verify(v: &ListedOrChained, cert: &CertificateDer<'_>, name: &str) -> Result<(), Error> {
        v.verify_server_cert(
            cert,
            &[],
            &ServerName::try_from(name.to_string()).unwrap(),
            &[],
            UnixTime::now(),
        )
        .map(|_| ())
    }

    #[test]
    fn a_listed_ca_certificate_is_accepted_as_the_servers_own() {
        let cert = self_signed(true, -DAY, DAY);
        assert_eq!(
            verify(&verifier(vec![], vec![cert.clone()]), &cert, "127.0.0.1"),
            Ok(())
        );
    }

    #[test]
    fn a_ca_certificate_only_among_the_roots_is_refused_as_webpki_refuses_it() {
        let cert = self_signed(true, -DAY, DAY);
        let other = self_signed(true, -DAY, DAY);
        let err = verify(
            &verifier(vec![cert.clone()], vec![other]),
            &cert,
            "127.0.0.1",
        )
        .unwrap_err();
        assert!(is_ca_used_as_end_entity(&err), "{err:?}");
    }

    /// Why `cert`, listed alone, is refused for `name`.
    fn refusal(cert: &CertificateDer<'static>, name: &str) -> CertificateError {
        match verify(&verifier(vec![], vec![cert.clone()]), cert, name) {
            Err(Error::InvalidCertificate(e)) => e,
            other => panic!("expected a certificate error, got {other:?}"),
        }
    }

    #[test]
    fn a_listed_certificate_must_be_for_the_host() {
        let cert = self_signed(true, -DAY, DAY);
        let e = refusal(&cert, "example.com");
        assert!(
            matches!(e, CertificateError::NotValidForNameContext { .. }),
            "{e:?}"
        );
    }

    #[test]
    fn a_listed_certificate_must_be_within_its_dates() {
        let e = refusal(&self_signed(true, -2 * DAY, -DAY), "127.0.0.1");
        assert!(
            matches!(e, CertificateError::ExpiredContext { .. }),
            "{e:?}"
        );
        let e = refusal(&self_signed(true, DAY, 2 * DAY), "127.0.0.1");
        assert!(
            matches!(e, CertificateError::NotValidYetContext { .. }),
            "{e:?}"
        );
    }

    #[test]
    fn other_certificates_are_verified_by_webpki_alone() {
        // A self-signed non-CA certificate among the roots: webpki accepts it.
        let plain = self_signed(false, -DAY, DAY);
        let v = verifier(vec![plain.clone()], vec![]);
        assert_eq!(verify(&v, &plain, "127.0.0.1"), Ok(()));
        // One that is neither listed nor a root is refused (its issuer's name
        // is the root's, as rcgen names both alike: the signature is wrong).
        let stranger = self_signed(false, -DAY, DAY);
        assert_eq!(
            verify(&v, &stranger, "127.0.0.1"),
            Err(Error::InvalidCertificate(CertificateError::BadSignature))
        );
    }

    #[test]
    fn certificate_files_are_read_and_checked() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let err = certificates_in("--ca-cert", &empty)
            .unwrap_err()
            .to_string();
        assert!(err.contains("holds no PEM certificate"), "{err}");
        let missing = dir.path().join("missing.pem");
        let err = certificates_in("SSL_CERT_FILE", &missing)
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("reading certificates from SSL_CERT_FILE"),
            "{err}"
        );
        let err = ListedOrChained::new(
            vec![],
            vec![],
            Arc::new(rustls::crypto::ring::default_provider()),
        )
        .unwrap_err();
        assert!(matches!(err, TrustError::NoRoots), "{err}");
    }
}
