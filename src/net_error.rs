//! A request that got no usable answer, told so an operator can act on it:
//! what was being done, every cause in the chain (the TLS reason, DNS, a
//! refused connection, …) and a hint chosen by the cause.

use std::error::Error as StdError;

use rustls::CertificateError;

/// A failed HTTP request: what was being done and reqwest's error.
#[derive(Debug, thiserror::Error)]
#[error("{}", report(what, source, *peer, source.url().and_then(|u| u.host_str()), source.url().and_then(|u| u.port_or_known_default())))]
pub struct NetError {
    what: String,
    source: reqwest::Error,
    peer: Peer,
}

/// Whom the request was to, which decides the hints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Peer {
    /// The registry (the CLI's requests).
    Registry,
    /// An OpenID issuer `tfreg serve` reads: its identity provider
    /// (`--oidc-issuer`) or a CI issuer (`--ci-issuer`).
    Issuer,
}

impl NetError {
    /// `what` was being done (e.g. `cannot reach URL`) when `source` happened.
    pub fn new(what: impl Into<String>, source: reqwest::Error) -> Self {
        Self {
            what: what.into(),
            source,
            peer: Peer::Registry,
        }
    }

    /// [`NetError::new`] for a request `tfreg serve` made to an issuer.
    pub fn issuer(what: impl Into<String>, source: reqwest::Error) -> Self {
        Self {
            peer: Peer::Issuer,
            ..Self::new(what, source)
        }
    }
}

/// What stopped a request, as far as the hint goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cause {
    /// The server's certificate is not one this machine trusts.
    Untrusted,
    /// The certificate is for other names.
    WrongName,
    /// The certificate has expired or is not valid yet.
    Dates,
    /// Nothing accepts connections at the address.
    Refused,
    /// The host name does not resolve.
    Dns,
    /// No answer in time.
    Timeout,
}

/// `e` and its sources, looking inside `io::Error`s (whose `source()` skips
/// the error they wrap, and rustls's reasons arrive wrapped in two of them).
fn chain<'a>(
    e: &'a (dyn StdError + 'static),
) -> impl Iterator<Item = &'a (dyn StdError + 'static)> {
    std::iter::successors(Some(e), |&e| {
        match e
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
        {
            Some(wrapped) => Some(wrapped as &(dyn StdError + 'static)),
            None => e.source(),
        }
    })
}

fn cause_of(e: &(dyn StdError + 'static)) -> Option<Cause> {
    chain(e).find_map(|e| {
        if let Some(rustls::Error::InvalidCertificate(cert)) = e.downcast_ref::<rustls::Error>() {
            return Some(match cert {
                CertificateError::NotValidForName
                | CertificateError::NotValidForNameContext { .. } => Cause::WrongName,
                CertificateError::Expired
                | CertificateError::ExpiredContext { .. }
                | CertificateError::NotValidYet
                | CertificateError::NotValidYetContext { .. } => Cause::Dates,
                _ => Cause::Untrusted,
            });
        }
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            match io.kind() {
                std::io::ErrorKind::ConnectionRefused => return Some(Cause::Refused),
                std::io::ErrorKind::TimedOut => return Some(Cause::Timeout),
                _ => {}
            }
        }
        if e.downcast_ref::<reqwest::Error>()
            .is_some_and(|r| r.is_timeout())
        {
            return Some(Cause::Timeout);
        }
        // hyper-util's (private) connect error names a failed lookup so.
        (e.to_string() == "dns error").then_some(Cause::Dns)
    })
}

fn hint(cause: Cause, peer: Peer, host: &str, port: Option<u16>) -> String {
    let address = port.map_or_else(|| host.to_string(), |p| format!("{host}:{p}"));
    if peer == Peer::Issuer {
        return issuer_hint(cause, host, &address);
    }
    match cause {
        Cause::Untrusted => format!(
            "this machine does not trust the certificate of {host}. For `tfreg serve`'s development certificate, trust the CA it prints: export SSL_CERT_FILE=DATA_DIR/tls/ca.pem (by default {}/tls/ca.pem). For a certificate of your own, pass --ca-cert FILE (or set TFREG_CA_CERT or SSL_CERT_FILE) with that certificate or the CA that signed it.",
            crate::data_dir::DEFAULT
        ),
        Cause::WrongName => format!(
            "the certificate is not made for {host}: use a host name or IP address it names in --registry (for `tfreg serve`, its --hostname), or make a certificate for {host}."
        ),
        Cause::Dates => {
            "the certificate has expired or is not valid yet: check this machine's clock, or renew the certificate.".to_string()
        }
        Cause::Refused => format!(
            "nothing accepts connections at {address}: is `tfreg serve` (or the registry) running, and listening on this port (--listen)?"
        ),
        Cause::Dns => format!(
            "the host name {host} could not be resolved: check its spelling in --registry, and this machine's DNS."
        ),
        Cause::Timeout => format!(
            "{address} did not answer in time: check the address, the network, and any firewall or proxy (HTTPS_PROXY)."
        ),
    }
}

/// The hints for an issuer `tfreg serve` could not read.
fn issuer_hint(cause: Cause, host: &str, address: &str) -> String {
    match cause {
        Cause::Untrusted => format!(
            "tfreg serve does not trust the certificate of {host}. If a private CA signed it, pass --issuer-ca-cert FILE (that CA's certificate, PEM; SSL_CERT_FILE works too)."
        ),
        Cause::WrongName => format!(
            "the certificate of {host} is not made for that name: use a host name it names in the issuer URL (--oidc-issuer, --ci-issuer), exactly as the issuer's tokens name it."
        ),
        Cause::Dates => {
            "the issuer's certificate has expired or is not valid yet: check this machine's clock, or have it renewed.".to_string()
        }
        Cause::Refused => format!(
            "nothing accepts connections at {address}: is the issuer running, and is its URL (--oidc-issuer, --ci-issuer) right?"
        ),
        Cause::Dns => format!(
            "the host name {host} could not be resolved: check the issuer URL (--oidc-issuer, --ci-issuer), and this machine's DNS."
        ),
        Cause::Timeout => format!(
            "{address} did not answer in time: check the issuer URL, the network, and any firewall or proxy (HTTPS_PROXY)."
        ),
    }
}

/// `what: error`, then each distinct cause on its own line, then a hint when
/// the cause suggests one.
fn report(
    what: &str,
    e: &(dyn StdError + 'static),
    peer: Peer,
    host: Option<&str>,
    port: Option<u16>,
) -> String {
    let mut out = format!("{what}: {e}");
    let mut last = e.to_string();
    for cause in chain(e).skip(1) {
        let text = cause.to_string();
        if text != last {
            out += &format!("\n  caused by: {text}");
            last = text;
        }
    }
    if let Some(cause) = cause_of(e) {
        out += &format!(
            "\nhint: {}",
            hint(cause, peer, host.unwrap_or("the registry"), port)
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error with a message and an optional source, as libraries build them.
    #[derive(Debug)]
    struct Layer(&'static str, Option<Box<dyn StdError + Send + Sync>>);

    impl std::fmt::Display for Layer {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }

    impl StdError for Layer {
        fn source(&self) -> Option<&(dyn StdError + 'static)> {
            self.1.as_deref().map(|e| e as _)
        }
    }

    fn wrapped(inner: impl StdError + Send + Sync + 'static) -> Layer {
        Layer(
            "error sending request",
            Some(Box::new(Layer(
                "client error (Connect)",
                Some(Box::new(inner)),
            ))),
        )
    }

    #[test]
    fn the_cause_is_found_anywhere_in_the_chain() {
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        assert_eq!(cause_of(&wrapped(refused)), Some(Cause::Refused));
        let timed_out = std::io::Error::from(std::io::ErrorKind::TimedOut);
        assert_eq!(cause_of(&wrapped(timed_out)), Some(Cause::Timeout));
        let dns = Layer(
            "dns error",
            Some(Box::new(std::io::Error::other("failed to lookup address"))),
        );
        assert_eq!(cause_of(&wrapped(dns)), Some(Cause::Dns));
        assert_eq!(cause_of(&wrapped(Layer("something else", None))), None);
    }

    #[test]
    fn certificate_reasons_are_found_inside_io_errors() {
        let tls = |e: CertificateError| {
            wrapped(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                rustls::Error::InvalidCertificate(e),
            ))
        };
        assert_eq!(
            cause_of(&tls(CertificateError::UnknownIssuer)),
            Some(Cause::Untrusted)
        );
        assert_eq!(
            cause_of(&tls(CertificateError::NotValidForName)),
            Some(Cause::WrongName)
        );
        assert_eq!(
            cause_of(&tls(CertificateError::Expired)),
            Some(Cause::Dates)
        );
    }

    #[test]
    fn the_report_has_every_distinct_cause_and_the_hint() {
        let refused = std::io::Error::new(
            std::io::ErrorKind::ConnectionRefused,
            "Connection refused (os error 111)",
        );
        let text = report(
            "cannot reach https://127.0.0.1:1/",
            &Layer(
                "client error (Connect)",
                Some(Box::new(Layer(
                    "client error (Connect)",
                    Some(Box::new(refused)),
                ))),
            ),
            Peer::Registry,
            Some("127.0.0.1"),
            Some(1),
        );
        assert_eq!(
            text,
            "cannot reach https://127.0.0.1:1/: client error (Connect)\n  caused by: Connection refused (os error 111)\nhint: nothing accepts connections at 127.0.0.1:1: is `tfreg serve` (or the registry) running, and listening on this port (--listen)?"
        );
        let other = report("x", &Layer("no idea", None), Peer::Registry, None, None);
        assert_eq!(other, "x: no idea");
    }

    #[test]
    fn an_issuer_gets_the_hints_of_tfreg_serve_s_flags() {
        let untrusted = wrapped(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer),
        ));
        let text = report(
            "--oidc-issuer https://idp.test",
            &untrusted,
            Peer::Issuer,
            Some("idp.test"),
            Some(443),
        );
        assert_eq!(
            text,
            "--oidc-issuer https://idp.test: error sending request\n  caused by: client error (Connect)\n  caused by: invalid peer certificate: UnknownIssuer\nhint: tfreg serve does not trust the certificate of idp.test. If a private CA signed it, pass --issuer-ca-cert FILE (that CA's certificate, PEM; SSL_CERT_FILE works too)."
        );
        let refused = wrapped(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        let text = report("x", &refused, Peer::Issuer, Some("idp.test"), Some(8443));
        assert!(
            text.ends_with("\nhint: nothing accepts connections at idp.test:8443: is the issuer running, and is its URL (--oidc-issuer, --ci-issuer) right?"),
            "{text}"
        );
    }
}
