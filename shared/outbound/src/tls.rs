//! Client TLS with *ring*: the tree's one crypto provider (no aws-lc-rs,
//! no OpenSSL), set explicitly so that no process-wide default is needed.

use std::sync::Arc;

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

/// Which roots a client trusts besides an optional extra CA.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Roots {
    /// The system's (as `rustls-native-certs` finds them: Amazon Linux's
    /// bundle on Lambda; `SSL_CERT_FILE` / `SSL_CERT_DIR` honoured).
    System,
    /// Only the extra CA given (tests, and an origin with its own CA).
    ExtraOnly,
}

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("no trusted certificates in the system's store")]
    NoRoots,
    #[error("the extra CA certificate: {0}")]
    ExtraCa(String),
    #[error("TLS: {0}")]
    Rustls(#[from] rustls::Error),
}

/// A client configuration trusting `roots` and every certificate in
/// `extra_ca_pem`. No ALPN: a caller wanting HTTP/2 sets it.
pub fn client_config(
    roots: Roots,
    extra_ca_pem: Option<&[u8]>,
) -> Result<rustls::ClientConfig, TlsError> {
    let mut store = rustls::RootCertStore::empty();
    if roots == Roots::System {
        let native = rustls_native_certs::load_native_certs();
        store.add_parsable_certificates(native.certs);
    }
    if let Some(pem) = extra_ca_pem {
        let certs = CertificateDer::pem_slice_iter(pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| TlsError::ExtraCa(e.to_string()))?;
        if certs.is_empty() {
            return Err(TlsError::ExtraCa("no certificate in the PEM text".into()));
        }
        for cert in certs {
            store
                .add(cert)
                .map_err(|e| TlsError::ExtraCa(e.to_string()))?;
        }
    }
    if store.is_empty() {
        return Err(TlsError::NoRoots);
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(store)
        .with_no_client_auth())
}

/// TLS trusting the system's roots only.
pub fn system_tls() -> Result<rustls::ClientConfig, TlsError> {
    client_config(Roots::System, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_extra_ca_must_hold_a_certificate() {
        assert!(matches!(
            client_config(Roots::ExtraOnly, None),
            Err(TlsError::NoRoots)
        ));
        assert!(matches!(
            client_config(Roots::ExtraOnly, Some(b"not pem")),
            Err(TlsError::ExtraCa(_))
        ));
    }
}
