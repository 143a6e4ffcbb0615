//! Which addresses an outbound fetch may connect to, and which URLs it may
//! fetch: pure rules, no I/O. The resolver ([`crate::resolve`]) applies
//! [`Policy::allows`] to every address it is about to hand the connector;
//! the fetching code applies [`Policy::check_url`] to every URL and redirect
//! hop before sending (an IP literal is connected to without any lookup).

use std::fmt;
use std::net::{IpAddr, Ipv6Addr};

use ipnet::IpNet;
use tfreg_model::upstream::{OriginUrlError, UpstreamHost, check_origin_url, refused_range};

/// Where the process runs. In AWS, loopback holds the Lambda Runtime API
/// and link-local the credentials and metadata endpoints, so no exception
/// an admin writes may ever open them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Deployment {
    /// `tfreg serve`: the operator's own machine is the only one at stake.
    #[default]
    Serve,
    /// The Lambda functions.
    Aws,
}

/// Addresses one named host may use although they are special-purpose:
/// a cache upstream's `connect` hook (a registry inside the VPC, or a test
/// origin on loopback). It covers that hostname only, so an origin cannot
/// lend it to a download URL or redirect on another name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exception {
    /// The name as a resolver is asked it: lowercase, no port.
    host: String,
    /// The port URLs of this host may name (`registry.example.test:8443`).
    port: Option<u16>,
    addrs: Vec<IpAddr>,
    nets: Vec<IpNet>,
}

impl Exception {
    /// An exception for `host`'s own name (and its port, if it has one),
    /// covering nothing until [`Exception::addrs`] or [`Exception::nets`].
    pub fn for_upstream(host: &UpstreamHost) -> Self {
        let (name, port) = match host.as_str().rsplit_once(':') {
            Some((name, port)) => (name, port.parse().ok()),
            None => (host.as_str(), None),
        };
        Self {
            host: name.to_string(),
            port,
            addrs: Vec::new(),
            nets: Vec::new(),
        }
    }

    /// The addresses the host is pinned to (`connect.to`).
    pub fn addrs(mut self, addrs: impl IntoIterator<Item = IpAddr>) -> Self {
        self.addrs
            .extend(addrs.into_iter().map(|ip| ip.to_canonical()));
        self
    }

    /// Networks the host's DNS answers may fall in (`connect.allow_nets`).
    pub fn nets(mut self, nets: impl IntoIterator<Item = IpNet>) -> Self {
        self.nets.extend(nets);
        self
    }

    fn names(&self, host: &str) -> bool {
        self.host.eq_ignore_ascii_case(host)
    }

    fn covers(&self, host: &str, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        self.names(host) && (self.addrs.contains(&ip) || self.nets.iter().any(|n| n.contains(&ip)))
    }
}

/// Why `host`'s address `ip` is not connected to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct Refused {
    /// The name asked, or the IP literal's text.
    pub host: String,
    pub ip: IpAddr,
    /// The special-purpose range's name (`loopback`, `link-local`, …).
    pub range: &'static str,
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Refused { host, ip, range } = self;
        if *host == ip.to_string() {
            write!(f, "{ip} is {range}: refused")
        } else {
            write!(f, "{host} resolves to {ip} ({range}): refused")
        }
    }
}

/// Why a URL is not fetched, before any lookup. The URL itself is left to
/// the caller's message: a signed download URL's query is a credential.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlRefused {
    #[error("only https")]
    NotHttps,
    #[error("credentials in a URL")]
    UserInfo,
    #[error("no host")]
    NoHost,
    #[error("names this machine")]
    Localhost,
    #[error("port {0}: only the default port, or the upstream's own")]
    Port(u16),
    #[error("{0}")]
    Address(Refused),
}

/// The decision for one fetcher: built once by its entry point.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// Every address allowed (`tfreg serve`'s sign-in: `Reach::Any`).
    open: bool,
    /// Loopback allowed for any host (the sign-in tests' setting).
    loopback: bool,
    deployment: Deployment,
    exceptions: Vec<Exception>,
}

impl Policy {
    /// Public addresses only.
    pub fn public() -> Self {
        Self {
            open: false,
            loopback: false,
            deployment: Deployment::Serve,
            exceptions: Vec::new(),
        }
    }

    /// Every address (the operator's own machine is the only one at stake).
    pub fn unrestricted() -> Self {
        Self {
            open: true,
            ..Self::public()
        }
    }

    /// Loopback too, for any host: only for tests whose server runs here.
    pub fn with_loopback(mut self) -> Self {
        self.loopback = true;
        self
    }

    pub fn in_deployment(mut self, deployment: Deployment) -> Self {
        self.deployment = deployment;
        self
    }

    pub fn with_exception(mut self, exception: Exception) -> Self {
        self.exceptions.push(exception);
        self
    }

    /// May a connection be opened to `ip`, as an address of `host`?
    pub fn allows(&self, host: &str, ip: IpAddr) -> Result<(), Refused> {
        let refused = |range| {
            Err(Refused {
                host: host.to_string(),
                ip,
                range,
            })
        };
        if self.open {
            return Ok(());
        }
        let Some(range) = refused_range(ip) else {
            return Ok(());
        };
        if self.loopback && range == "loopback" {
            return Ok(());
        }
        if self.exceptions.iter().any(|e| e.covers(host, ip)) {
            return match (self.deployment, aws_reserved(ip)) {
                (Deployment::Aws, Some(reserved)) => refused(reserved),
                _ => Ok(()),
            };
        }
        refused(range)
    }

    /// May `url` be fetched? `https` only, no user info, not `localhost`,
    /// the default port (or an excepted host's own), and an IP literal only
    /// where [`Policy::allows`] it. A name is left to the resolver, which
    /// hands the connector only allowed addresses. `url`'s WHATWG parser has
    /// already read `2130706433` and `0x7f.1` as the IPv4 addresses they are.
    pub fn check_url(&self, url: &url::Url) -> Result<(), UrlRefused> {
        if let Err(e) = check_origin_url(url) {
            match e {
                OriginUrlError::RefusedAddress { ip, .. } => {
                    self.allows(&ip.to_string(), ip)
                        .map_err(UrlRefused::Address)?;
                }
                OriginUrlError::NotHttps(_) => return Err(UrlRefused::NotHttps),
                OriginUrlError::UserInfo(_) => return Err(UrlRefused::UserInfo),
                OriginUrlError::NoHost(_) => return Err(UrlRefused::NoHost),
                OriginUrlError::Localhost(_) => return Err(UrlRefused::Localhost),
            }
        }
        if let Some(port) = url.port() {
            let host = url.host_str().unwrap_or_default();
            let own = self
                .exceptions
                .iter()
                .any(|e| e.names(host) && e.port == Some(port));
            if !own {
                return Err(UrlRefused::Port(port));
            }
        }
        Ok(())
    }
}

/// EC2's IPv6 services: metadata (`fd00:ec2::254`), DNS, NTP. Unique-local
/// by range, link-local in purpose.
const EC2_V6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x0ec2, 0, 0, 0, 0, 0, 0);

/// In AWS, what no exception may open, by name: where the Runtime API,
/// the credentials and the metadata service live.
fn aws_reserved(ip: IpAddr) -> Option<&'static str> {
    if let IpAddr::V6(v6) = ip
        && u128::from(v6) >> 96 == u128::from(EC2_V6) >> 96
    {
        return Some("EC2's IPv6 link services (fd00:ec2::/32)");
    }
    match refused_range(ip) {
        Some(r @ ("loopback" | "link-local" | "this network" | "unspecified")) => Some(r),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn upstream() -> UpstreamHost {
        UpstreamHost::parse("registry.example.test").unwrap()
    }

    /// The cache's policy for `registry.example.test` pinned to
    /// `127.0.0.50` and `169.254.169.254` (an admin's mistake, or worse),
    /// with `10.1.0.0/16` and `fd00:ec2::/32` allowed.
    fn cache_policy(deployment: Deployment) -> Policy {
        Policy::public().in_deployment(deployment).with_exception(
            Exception::for_upstream(&upstream())
                .addrs([ip("127.0.0.50"), ip("169.254.169.254")])
                .nets([
                    "10.1.0.0/16".parse().unwrap(),
                    "fd00:ec2::/32".parse().unwrap(),
                ]),
        )
    }

    /// Every row: (host, address, public, loopback-for-tests, cache in
    /// serve, cache in AWS), `true` = allowed.
    #[test]
    fn the_table() {
        const OWN: &str = "registry.example.test";
        const OTHER: &str = "files.example.test";
        #[rustfmt::skip]
        let rows: &[(&str, &str, bool, bool, bool, bool)] = &[
            // instance metadata, v4 and v6, and carried in IPv6
            (OTHER, "169.254.169.254", false, false, false, false),
            (OWN,   "169.254.169.254", false, false, true,  false),
            (OTHER, "fd00:ec2::254",   false, false, false, false),
            (OWN,   "fd00:ec2::254",   false, false, true,  false),
            (OTHER, "::ffff:169.254.169.254", false, false, false, false),
            // loopback, plain and carried in IPv6
            (OTHER, "127.0.0.1",        false, true,  false, false),
            (OTHER, "::ffff:127.0.0.1", false, true,  false, false),
            (OTHER, "::1",              false, true,  false, false),
            (OWN,   "127.0.0.50",       false, true,  true,  false),
            (OWN,   "::ffff:127.0.0.50", false, true, true,  false),
            (OWN,   "127.0.0.51",       false, true,  false, false),
            // private and shared ranges
            (OTHER, "10.0.0.1",      false, false, false, false),
            (OWN,   "10.0.0.1",      false, false, false, false),
            (OWN,   "10.1.2.3",      false, false, true,  true),
            (OTHER, "10.1.2.3",      false, false, false, false),
            (OTHER, "100.64.0.1",    false, false, false, false),
            (OTHER, "192.168.1.1",   false, false, false, false),
            (OTHER, "0.0.0.0",       false, false, false, false),
            (OTHER, "fe80::1",       false, false, false, false),
            // public addresses, for any host
            (OTHER, "1.1.1.1",         true, true, true, true),
            (OWN,   "140.82.112.3",    true, true, true, true),
            (OTHER, "2606:4700::1111", true, true, true, true),
            (OTHER, "100.128.0.1",     true, true, true, true),
        ];
        let policies = [
            Policy::public(),
            Policy::public().with_loopback(),
            cache_policy(Deployment::Serve),
            cache_policy(Deployment::Aws),
        ];
        for (host, addr, public, loopback, serve, aws) in rows {
            let expected = [*public, *loopback, *serve, *aws];
            for (policy, allowed) in policies.iter().zip(expected) {
                let got = policy.allows(host, ip(addr));
                assert_eq!(got.is_ok(), allowed, "{host} {addr}: {policy:?}: {got:?}");
                if let Err(refused) = got {
                    assert_eq!(refused.ip, ip(addr));
                    assert!(refused.to_string().contains(addr), "{refused}");
                }
            }
            assert!(Policy::unrestricted().allows(host, ip(addr)).is_ok());
        }
    }

    #[test]
    fn in_aws_the_refusal_names_what_lives_there() {
        let aws = cache_policy(Deployment::Aws);
        let r = aws
            .allows("registry.example.test", ip("fd00:ec2::254"))
            .unwrap_err();
        assert!(r.range.contains("fd00:ec2::/32"), "{r}");
        let r = aws
            .allows("registry.example.test", ip("169.254.169.254"))
            .unwrap_err();
        assert_eq!(r.range, "link-local");
        assert_eq!(
            r.to_string(),
            "registry.example.test resolves to 169.254.169.254 (link-local): refused"
        );
    }

    #[test]
    fn urls() {
        let policy = cache_policy(Deployment::Serve);
        let check = |s: &str| policy.check_url(&url::Url::parse(s).unwrap());
        for ok in [
            "https://registry.example.test/.well-known/terraform.json",
            "https://objects.example.com/x.zip?X-Amz-Signature=abc",
            "https://1.1.1.1/x",
            "https://[2606:4700::1111]/x",
            "https://registry.example.test:443/x",
        ] {
            assert_eq!(check(ok), Ok(()), "{ok}");
        }
        for (bad, why) in [
            ("http://registry.example.test/x", UrlRefused::NotHttps),
            ("file:///etc/passwd", UrlRefused::NotHttps),
            ("https://u:p@registry.example.test/x", UrlRefused::UserInfo),
            ("https://localhost/x", UrlRefused::Localhost),
            (
                "https://registry.example.test:8443/x",
                UrlRefused::Port(8443),
            ),
            ("https://objects.example.com:22/x", UrlRefused::Port(22)),
        ] {
            assert_eq!(check(bad), Err(why), "{bad}");
        }
        // IP literals are judged as the resolver would judge their address;
        // an exception names a host, never an IP literal.
        for (bad, addr, range) in [
            ("https://127.0.0.1/x", "127.0.0.1", "loopback"),
            ("https://127.0.0.50/x", "127.0.0.50", "loopback"),
            ("https://2130706433/x", "127.0.0.1", "loopback"),
            ("https://0x7f.1/x", "127.0.0.1", "loopback"),
            (
                "https://169.254.169.254/latest/meta-data/",
                "169.254.169.254",
                "link-local",
            ),
            (
                "https://[fd00:ec2::254]/latest/api/token",
                "fd00:ec2::254",
                "unique local",
            ),
            (
                "https://[::ffff:127.0.0.1]/x",
                "::ffff:127.0.0.1",
                "loopback",
            ),
            ("https://10.0.0.1/x", "10.0.0.1", "private"),
            (
                "https://100.64.0.1/x",
                "100.64.0.1",
                "shared address space (CGNAT)",
            ),
        ] {
            match check(bad) {
                Err(UrlRefused::Address(r)) => {
                    assert_eq!((r.ip, r.range), (ip(addr), range), "{bad}")
                }
                other => panic!("{bad}: {other:?}"),
            }
        }
        // The upstream's own port, and only for its own name.
        let with_port = Policy::public().with_exception(Exception::for_upstream(
            &UpstreamHost::parse("registry.example.test:8443").unwrap(),
        ));
        let url = |s: &str| url::Url::parse(s).unwrap();
        assert_eq!(
            with_port.check_url(&url("https://registry.example.test:8443/x")),
            Ok(())
        );
        assert_eq!(
            with_port.check_url(&url("https://files.example.test:8443/x")),
            Err(UrlRefused::Port(8443))
        );
        // The tests' loopback setting lets an IP literal on loopback through.
        let loopback = Policy::public().with_loopback();
        assert_eq!(loopback.check_url(&url("https://127.0.0.1/x")), Ok(()));
        assert!(
            loopback
                .check_url(&url("https://169.254.169.254/x"))
                .is_err()
        );
    }
}
