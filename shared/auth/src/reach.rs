//! Where the registry may connect to reach the identity provider. In AWS a
//! provider's URLs (its issuer, and the token endpoint and JWKS its
//! discovery document names) must never lead a function to loopback (the
//! Lambda Runtime API), link-local (169.254.169.254, the credentials and
//! metadata endpoints) or any other special-purpose address
//! ([`tfreg_model::upstream::refused_range`]): every URL is checked before
//! it is fetched ([`Reach::check`]: an IP literal never reaches a resolver)
//! and every name is resolved by [`GuardedResolver`], which hands the
//! connector only the addresses allowed (so a name that resolves to a
//! refused address, or is re-pointed at one later, is never connected to).

use std::net::IpAddr;
use std::sync::Arc;

use tfreg_model::upstream::check_origin_url;
use tfreg_outbound::Policy;

use crate::error::AuthError;
use crate::jwt::UPSTREAM_TIMEOUT;

/// Which addresses the provider's URLs may lead to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// Anything the URL names (`tfreg serve`, where the operator's machine
    /// is the only one at stake): `https://`, or `http://` to loopback.
    Any,
    /// Public addresses only, over `https://` (the Lambda functions).
    Public,
    /// Public addresses and loopback (`http://` allowed there): only for
    /// the tests, whose provider runs on this machine
    /// (`TFREG_OIDC_ALLOW_LOOPBACK`).
    PublicAndLoopback,
}

fn is_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => {
            v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    }
}

impl Reach {
    /// The address rules of `tfreg-outbound` this setting stands for.
    pub fn policy(self) -> Policy {
        match self {
            Reach::Any => Policy::unrestricted(),
            Reach::Public => Policy::public(),
            Reach::PublicAndLoopback => Policy::public().with_loopback(),
        }
    }

    /// Why `ip` may not be connected to, or `None`.
    pub fn refuses(self, ip: IpAddr) -> Option<&'static str> {
        self.policy()
            .allows(&ip.to_string(), ip)
            .err()
            .map(|r| r.range)
    }

    /// May `url` be fetched? Scheme, user info, and a host that is a public
    /// IP address or a name (left to [`GuardedResolver`]).
    pub fn check(self, url: &url::Url, what: &str) -> Result<(), AuthError> {
        let refused = |why: String| Err(AuthError::Upstream(format!("{what} {url}: {why}")));
        match self {
            Reach::Any => Ok(()),
            Reach::Public => match check_origin_url(url) {
                Ok(()) => Ok(()),
                Err(e) => refused(format!("refused ({e})")),
            },
            Reach::PublicAndLoopback => {
                let loopback = match url.host() {
                    Some(url::Host::Domain(d)) => d == "localhost",
                    Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
                    Some(url::Host::Ipv6(ip)) => is_loopback(IpAddr::V6(ip)),
                    None => false,
                };
                if loopback && url.username().is_empty() && url.password().is_none() {
                    return Ok(());
                }
                match check_origin_url(url) {
                    Ok(()) => Ok(()),
                    Err(e) => refused(format!("refused ({e})")),
                }
            }
        }
    }
}

/// The provider's names resolved by the system (`getaddrinfo`, as reqwest's
/// own resolver does), keeping only the addresses [`Reach`] allows
/// (`tfreg_outbound::GuardedResolver`): none left is an error naming the
/// range, and no connection is made.
#[derive(Debug, Clone, Copy)]
pub struct GuardedResolver(pub Reach);

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let inner = tfreg_outbound::GuardedResolver::system(self.0.policy());
        reqwest::dns::Resolve::resolve(&inner, name)
    }
}

/// An HTTP client for the provider as [`crate::jwt::http_client`] makes
/// one (`tls`, no redirects, [`UPSTREAM_TIMEOUT`]), its names resolved by
/// [`GuardedResolver`].
pub fn guarded_client(
    tls: rustls::ClientConfig,
    reach: Reach,
) -> Result<reqwest::Client, AuthError> {
    reqwest::Client::builder()
        .use_preconfigured_tls(tls)
        .redirect(reqwest::redirect::Policy::none())
        .timeout(UPSTREAM_TIMEOUT)
        // No proxy from the environment: the guard must see the provider's
        // own names and addresses.
        .no_proxy()
        .dns_resolver(Arc::new(tfreg_outbound::GuardedResolver::system(
            reach.policy(),
        )))
        .build()
        .map_err(|e| AuthError::Upstream(format!("cannot make an HTTP client: {e}")))
}

/// TLS trusting the system's roots (as `rustls-native-certs` finds them:
/// Amazon Linux's bundle on Lambda; `SSL_CERT_FILE` / `SSL_CERT_DIR`
/// honoured), with *ring*.
pub fn system_tls() -> Result<rustls::ClientConfig, AuthError> {
    tfreg_outbound::tls::system_tls().map_err(|e| AuthError::Upstream(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(s: &str) -> url::Url {
        url::Url::parse(s).unwrap()
    }

    #[test]
    fn in_aws_only_public_https_urls_are_fetched() {
        for bad in [
            "http://127.0.0.1:9001/2018-06-01/runtime/invocation/next",
            "https://127.0.0.1/jwks",
            "https://169.254.169.254/latest/meta-data/",
            "https://[fd00:ec2::254]/latest/api/token",
            "https://[::ffff:169.254.170.2]/v2/credentials",
            "https://10.0.0.1/token",
            "https://localhost/token",
            "https://user:pw@idp.example.com/token",
            "http://idp.example.com/token",
            "https://2130706433/token",
        ] {
            assert!(
                Reach::Public.check(&url(bad), "token endpoint").is_err(),
                "{bad}"
            );
        }
        for good in [
            "https://idp.example.com/.well-known/openid-configuration",
            "https://8.8.8.8/jwks",
        ] {
            Reach::Public.check(&url(good), "JWKS").unwrap();
        }
    }

    #[test]
    fn the_test_setting_allows_loopback_and_nothing_more() {
        let r = Reach::PublicAndLoopback;
        r.check(&url("http://127.0.0.1:4000/jwks"), "JWKS").unwrap();
        r.check(&url("http://localhost:4000/jwks"), "JWKS").unwrap();
        for bad in [
            "http://169.254.169.254/latest/meta-data/",
            "https://192.168.1.1/x",
            "http://idp.example.com/x",
        ] {
            assert!(r.check(&url(bad), "JWKS").is_err(), "{bad}");
        }
        assert_eq!(r.refuses("127.0.0.1".parse().unwrap()), None);
        assert!(r.refuses("169.254.169.254".parse().unwrap()).is_some());
        assert!(
            Reach::Public
                .refuses("127.0.0.1".parse().unwrap())
                .is_some()
        );
        assert_eq!(Reach::Any.refuses("169.254.169.254".parse().unwrap()), None);
    }

    /// A name that resolves to loopback (as an attacker's DNS would point
    /// one at the Runtime API) is never connected to in AWS mode.
    #[tokio::test]
    async fn a_name_that_resolves_to_loopback_is_refused_before_connecting() {
        use reqwest::dns::Resolve as _;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let name: reqwest::dns::Name = "localhost".parse().unwrap();
        let err = GuardedResolver(Reach::Public)
            .resolve(name)
            .await
            .err()
            .expect("refused");
        assert!(err.to_string().contains("refused"), "{err}");
        // Through a client: the request fails and nothing reached the listener.
        let client = guarded_client(test_tls(), Reach::Public).unwrap();
        let sent = client
            .get(format!("http://localhost:{port}/token"))
            .send()
            .await;
        assert!(sent.is_err());
        let accepted =
            tokio::time::timeout(std::time::Duration::from_millis(200), listener.accept()).await;
        assert!(accepted.is_err(), "a connection reached loopback");
        // The test setting does connect there.
        let client = guarded_client(test_tls(), Reach::PublicAndLoopback).unwrap();
        let serve = tokio::spawn(async move { listener.accept().await.map(|_| ()) });
        let _ = client
            .get(format!("http://localhost:{port}/token"))
            .timeout(std::time::Duration::from_millis(300))
            .send()
            .await;
        serve
            .await
            .unwrap()
            .expect("connected with loopback allowed");
    }

    fn test_tls() -> rustls::ClientConfig {
        rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_no_client_auth()
    }
}
