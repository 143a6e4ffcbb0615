//! The development certificate `tfreg serve` makes when given no TLS flags:
//! a local CA (trusted by pointing `SSL_CERT_FILE` at it) and a server
//! certificate it signs for localhost, 127.0.0.1, ::1 and the registry hostname.

use std::path::{Path, PathBuf};

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose, SanType};

use crate::cli_error::Result;
use crate::data_dir::write_private;

/// Paths of a certificate chain and its key.
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
    /// The CA to trust, when tfreg made the certificate itself.
    pub ca: Option<PathBuf>,
}

/// Make (or reuse) the development CA and a server certificate for `host`.
pub fn dev_certificate(dir: &Path, host: &str) -> Result<TlsFiles> {
    let dir = dir.join("tls");
    std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let (ca_pem, ca_key_pem) = (dir.join("ca.pem"), dir.join("ca.key"));
    let (cert, key, names) = (
        dir.join("server.pem"),
        dir.join("server.key"),
        dir.join("server.names"),
    );

    let mut sans = vec![
        "localhost".to_string(),
        "127.0.0.1".to_string(),
        "::1".to_string(),
    ];
    if !sans.iter().any(|s| s == host) {
        sans.push(host.to_string());
    }
    let wanted_names = sans.join("\n");

    let ca_exists = ca_pem.exists() && ca_key_pem.exists();
    if ca_exists
        && cert.exists()
        && key.exists()
        && std::fs::read_to_string(&names).ok().as_deref() == Some(&wanted_names)
    {
        return Ok(TlsFiles {
            cert,
            key,
            ca: Some(ca_pem),
        });
    }

    let err = |e: rcgen::Error| format!("making the development certificate: {e}");
    // The CA is re-made from its saved key with the same name, so a ca.pem
    // the user already trusts keeps validating new server certificates.
    let mut ca_params = CertificateParams::default();
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "tfreg development CA");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_key = if ca_exists {
        let key_pem = std::fs::read_to_string(&ca_key_pem).map_err(|e| e.to_string())?;
        KeyPair::from_pem(&key_pem).map_err(err)?
    } else {
        KeyPair::generate().map_err(err)?
    };
    let ca_cert = ca_params.self_signed(&ca_key).map_err(err)?;
    if !ca_exists {
        std::fs::write(&ca_pem, ca_cert.pem()).map_err(|e| e.to_string())?;
        write_private(&ca_key_pem, ca_key.serialize_pem().as_bytes())?;
    }

    let mut params = CertificateParams::default();
    params.distinguished_name.push(DnType::CommonName, host);
    params.subject_alt_names = sans
        .iter()
        .map(|s| match s.parse::<std::net::IpAddr>() {
            Ok(ip) => Ok(SanType::IpAddress(ip)),
            Err(_) => s.clone().try_into().map(SanType::DnsName),
        })
        .collect::<std::result::Result<_, _>>()
        .map_err(err)?;
    params.is_ca = IsCa::ExplicitNoCa;
    let server_key = KeyPair::generate().map_err(err)?;
    let server_cert = params
        .signed_by(&server_key, &ca_cert, &ca_key)
        .map_err(err)?;
    std::fs::write(&cert, server_cert.pem()).map_err(|e| e.to_string())?;
    write_private(&key, server_key.serialize_pem().as_bytes())?;
    std::fs::write(&names, wanted_names).map_err(|e| e.to_string())?;
    Ok(TlsFiles {
        cert,
        key,
        ca: Some(ca_pem),
    })
}

/// The server's TLS configuration from a PEM certificate chain and key
/// (HTTP/2 and HTTP/1.1 offered by ALPN).
pub fn server_config(cert: &Path, key: &Path) -> Result<std::sync::Arc<rustls::ServerConfig>> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let chain = CertificateDer::pem_file_iter(cert)
        .and_then(|certs| certs.collect::<std::result::Result<Vec<_>, _>>())
        .map_err(|e| format!("reading the TLS certificate {}: {e}", cert.display()))?;
    if chain.is_empty() {
        return Err(format!("no certificate in {}", cert.display()).into());
    }
    let key_der = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| format!("reading the TLS key {}: {e}", key.display()))?;
    let mut config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(chain, key_der)
        .map_err(|e| {
            format!(
                "the TLS certificate {} and key {} do not fit: {e}",
                cert.display(),
                key.display()
            )
        })?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(std::sync::Arc::new(config))
}
