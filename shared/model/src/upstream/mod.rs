//! Other registries the pull-through cache reads from (issue 22), and where
//! it may connect: pure rules, no I/O. `tests/cache/plan.md` §1–2 has the
//! design. [`settings`]: an upstream as an admin configures it; here: its
//! hostname, and the addresses ([`refused_range`]) and URLs
//! ([`check_origin_url`]) an origin may never make the registry connect to.

mod operator;
mod settings;

pub use operator::*;
pub use settings::*;

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use serde::{Deserialize, Serialize};

use crate::Invalid;
use crate::address::Hostname;

/// An upstream's hostname: a DNS name with at least one dot, in the form
/// [`Hostname::parse`] gives (lowercase, IDNA to ASCII, no default port),
/// never an IP address or `localhost`. An admin may type it in any case;
/// a mirror path must name it exactly as stored ([`UpstreamHost::matches`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct UpstreamHost(Hostname);

impl UpstreamHost {
    pub fn parse(s: &str) -> Result<Self, Invalid> {
        let host = Hostname::parse(s)?;
        let name = host.as_str().split(':').next().unwrap_or_default();
        let bad = |why: &str| Invalid::bad(format!("upstream hostname {s:?}: {why}"));
        if name.parse::<Ipv4Addr>().is_ok() {
            return Err(bad("an IP address, not a registry's name"));
        }
        if name == "localhost" || name.ends_with(".localhost") {
            return Err(bad("names this machine"));
        }
        if !name.contains('.') {
            return Err(bad("needs a domain (a dot)"));
        }
        // A last label of digits only is no top-level domain (`10.0.0.1`
        // read as a name by a lenient parser, `0x7f.1`, …).
        if name
            .rsplit('.')
            .next()
            .is_some_and(|tld| tld.chars().all(|c| c.is_ascii_digit()))
        {
            return Err(bad("its last label is a number"));
        }
        Ok(Self(host))
    }

    /// Is `segment` (a mirror path's hostname segment, as received) exactly
    /// this upstream? No normalising here: a client that means this
    /// upstream writes it as Terraform does (`svchost.ForComparison`:
    /// lowercase, punycode), so any other spelling (`REGISTRY.EXAMPLE.TEST.`,
    /// `%2e%2e`) is another, unconfigured host: 404, and no connection.
    pub fn matches(&self, segment: &str) -> bool {
        self.0.as_str() == segment
    }

    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }

    pub fn hostname(&self) -> &Hostname {
        &self.0
    }

    /// The name alone, without a port.
    pub fn name(&self) -> &str {
        let s = self.0.as_str();
        s.rsplit_once(':').map_or(s, |(name, _)| name)
    }
}

impl fmt::Display for UpstreamHost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl TryFrom<String> for UpstreamHost {
    type Error = Invalid;
    fn try_from(s: String) -> Result<Self, Invalid> {
        Self::parse(&s)
    }
}

impl From<UpstreamHost> for String {
    fn from(h: UpstreamHost) -> String {
        h.as_str().to_string()
    }
}

/// Address ranges an origin may never make us connect to: this machine,
/// private networks, link-local (where Lambda's Runtime API and the instance
/// metadata service live), and ranges that are not routed on the internet.
/// IANA's special-purpose registries for IPv4 and IPv6, by name.
const REFUSED_V4: &[(Ipv4Addr, u8, &str)] = &[
    (Ipv4Addr::new(0, 0, 0, 0), 8, "this network"),
    (Ipv4Addr::new(10, 0, 0, 0), 8, "private"),
    (
        Ipv4Addr::new(100, 64, 0, 0),
        10,
        "shared address space (CGNAT)",
    ),
    (Ipv4Addr::new(127, 0, 0, 0), 8, "loopback"),
    (Ipv4Addr::new(169, 254, 0, 0), 16, "link-local"),
    (Ipv4Addr::new(172, 16, 0, 0), 12, "private"),
    (Ipv4Addr::new(192, 0, 0, 0), 24, "IETF protocol assignments"),
    (Ipv4Addr::new(192, 0, 2, 0), 24, "documentation"),
    (Ipv4Addr::new(192, 88, 99, 0), 24, "6to4 relay anycast"),
    (Ipv4Addr::new(192, 168, 0, 0), 16, "private"),
    (Ipv4Addr::new(198, 18, 0, 0), 15, "benchmarking"),
    (Ipv4Addr::new(198, 51, 100, 0), 24, "documentation"),
    (Ipv4Addr::new(203, 0, 113, 0), 24, "documentation"),
    (Ipv4Addr::new(224, 0, 0, 0), 4, "multicast"),
    (Ipv4Addr::new(240, 0, 0, 0), 4, "reserved"),
];

const REFUSED_V6: &[(Ipv6Addr, u8, &str)] = &[
    (Ipv6Addr::UNSPECIFIED, 128, "unspecified"),
    (Ipv6Addr::LOCALHOST, 128, "loopback"),
    (
        Ipv6Addr::new(0x64, 0xff9b, 1, 0, 0, 0, 0, 0),
        48,
        "local-use NAT64",
    ),
    (
        Ipv6Addr::new(0x100, 0, 0, 0, 0, 0, 0, 0),
        64,
        "discard-only",
    ),
    (
        Ipv6Addr::new(0x2001, 0, 0, 0, 0, 0, 0, 0),
        23,
        "IETF protocol assignments (Teredo)",
    ),
    (
        Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0),
        32,
        "documentation",
    ),
    (Ipv6Addr::new(0x2002, 0, 0, 0, 0, 0, 0, 0), 16, "6to4"),
    (
        Ipv6Addr::new(0x3fff, 0, 0, 0, 0, 0, 0, 0),
        20,
        "documentation",
    ),
    (
        Ipv6Addr::new(0xfc00, 0, 0, 0, 0, 0, 0, 0),
        7,
        "unique local",
    ),
    (Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 0), 10, "link-local"),
    (Ipv6Addr::new(0xfec0, 0, 0, 0, 0, 0, 0, 0), 10, "site-local"),
    (Ipv6Addr::new(0xff00, 0, 0, 0, 0, 0, 0, 0), 8, "multicast"),
];

pub(super) fn in_v4(ip: Ipv4Addr, net: Ipv4Addr, prefix: u8) -> bool {
    let mask = u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
    u32::from(ip) & mask == u32::from(net) & mask
}

pub(super) fn in_v6(ip: Ipv6Addr, net: Ipv6Addr, prefix: u8) -> bool {
    let mask = u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0);
    u128::from(ip) & mask == u128::from(net) & mask
}

/// The IPv4 address an IPv6 address carries, where a connection to it
/// would reach that IPv4 address: mapped (`::ffff:a.b.c.d`), the old
/// compatible form (`::a.b.c.d`) and the well-known NAT64 prefix
/// (`64:ff9b::/96`).
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let bits = u128::from(ip);
    let low = Ipv4Addr::from((bits & 0xffff_ffff) as u32);
    let high = bits >> 32;
    if high == 0xffff || (high == 0 && bits > 1) || high == 0x0064_ff9b_0000_0000_0000_0000 {
        return Some(low);
    }
    None
}

/// Why an origin may not make us connect to `ip`: the name of its range,
/// or `None` for a public address. For IPv6 only global unicast
/// (`2000::/3`) outside the special ranges is public; an address that
/// carries an IPv4 address is judged by that.
pub fn refused_range(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => REFUSED_V4
            .iter()
            .find(|(net, prefix, _)| in_v4(v4, *net, *prefix))
            .map(|(_, _, name)| *name),
        IpAddr::V6(v6) => {
            if let Some(v4) = embedded_v4(v6) {
                return refused_range(IpAddr::V4(v4));
            }
            if let Some((_, _, name)) = REFUSED_V6
                .iter()
                .find(|(net, prefix, _)| in_v6(v6, *net, *prefix))
            {
                return Some(name);
            }
            (!in_v6(v6, Ipv6Addr::new(0x2000, 0, 0, 0, 0, 0, 0, 0), 3))
                .then_some("not global unicast")
        }
    }
}

/// Why a URL an origin gave us (discovery, a download or checksums URL, a
/// module location, a redirect) is refused before any lookup.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OriginUrlError {
    #[error("{0}: only https")]
    NotHttps(String),
    #[error("{0}: credentials in a URL")]
    UserInfo(String),
    #[error("{0}: no host")]
    NoHost(String),
    #[error("{url}: {ip} is {range}")]
    RefusedAddress {
        url: String,
        ip: IpAddr,
        range: &'static str,
    },
    #[error("{0}: names this machine")]
    Localhost(String),
}

/// The rules for a URL before the client resolves or connects: `https`
/// only, no user or password, and a host that is a name (left to the
/// resolver, which returns only addresses [`refused_range`] allows) or an
/// IP address that is public. `url`'s WHATWG parser has already read
/// `2130706433` and `0x7f.1` as the IPv4 addresses they mean.
pub fn check_origin_url(url: &url::Url) -> Result<(), OriginUrlError> {
    let text = || url.as_str().to_string();
    if url.scheme() != "https" {
        return Err(OriginUrlError::NotHttps(text()));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(OriginUrlError::UserInfo(text()));
    }
    let ip = match url.host() {
        None => return Err(OriginUrlError::NoHost(text())),
        Some(url::Host::Domain(name)) => {
            let name = name.trim_end_matches('.');
            if name == "localhost" || name.ends_with(".localhost") {
                return Err(OriginUrlError::Localhost(text()));
            }
            return Ok(());
        }
        Some(url::Host::Ipv4(v4)) => IpAddr::V4(v4),
        Some(url::Host::Ipv6(v6)) => IpAddr::V6(v6),
    };
    match refused_range(ip) {
        Some(range) => Err(OriginUrlError::RefusedAddress {
            url: text(),
            ip,
            range,
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn refused(s: &str) -> Option<&'static str> {
        refused_range(s.parse().unwrap())
    }

    /// One address inside (and the first one after, where that is public)
    /// every refused range: the table is what the tests walk.
    #[test]
    fn every_special_range_is_refused_and_named() {
        for (net, prefix, name) in REFUSED_V4 {
            assert_eq!(
                refused_range(IpAddr::V4(*net)),
                Some(*name),
                "{net}/{prefix}"
            );
            let last = u32::from(*net) | (u32::MAX.checked_shr(u32::from(*prefix)).unwrap_or(0));
            assert_eq!(
                refused_range(IpAddr::V4(last.into())),
                Some(*name),
                "{net}/{prefix} last"
            );
        }
        for (net, prefix, name) in REFUSED_V6 {
            assert_eq!(
                refused_range(IpAddr::V6(*net)),
                Some(*name),
                "{net}/{prefix}"
            );
        }
    }

    #[test]
    fn the_addresses_an_attacker_would_aim_at() {
        for (ip, range) in [
            ("127.0.0.1", "loopback"),
            ("169.254.169.254", "link-local"), // instance metadata
            ("169.254.100.1", "link-local"),
            ("10.0.0.1", "private"),
            ("172.31.255.255", "private"),
            ("192.168.1.1", "private"),
            ("100.100.100.200", "shared address space (CGNAT)"),
            ("0.0.0.0", "this network"),
            ("::1", "loopback"),
            ("::", "unspecified"),
            ("fd00:ec2::254", "unique local"), // instance metadata over IPv6
            ("fe80::1", "link-local"),
            ("::ffff:127.0.0.1", "loopback"),
            ("::ffff:169.254.169.254", "link-local"),
            ("::127.0.0.1", "loopback"),
            ("64:ff9b::10.0.0.1", "private"),
            ("64:ff9b::a9fe:a9fe", "link-local"),
            ("2002:7f00:1::", "6to4"),
            ("ff02::1", "multicast"),
            ("3fff::1", "documentation"),
            ("4000::1", "not global unicast"),
        ] {
            assert_eq!(refused(ip), Some(range), "{ip}");
        }
    }

    #[test]
    fn public_addresses_are_allowed() {
        for ip in [
            "1.1.1.1",
            "8.8.8.8",
            "140.82.112.3",  // github.com
            "151.101.1.194", // a CDN
            "172.32.0.1",    // just past 172.16/12
            "100.128.0.1",   // just past 100.64/10
            "2606:4700::1111",
            "2a04:4e42::223",
            "64:ff9b::8.8.8.8", // NAT64 of a public address
        ] {
            assert_eq!(refused(ip), None, "{ip}");
        }
    }

    #[test]
    fn origin_urls() {
        let check = |s: &str| check_origin_url(&url::Url::parse(s).unwrap());
        assert_eq!(check("https://registry.terraform.io/v1/providers/"), Ok(()));
        assert_eq!(check("https://objects.githubusercontent.com/x.zip"), Ok(()));
        assert_eq!(check("https://1.1.1.1/x"), Ok(()));
        assert!(matches!(
            check("http://registry.terraform.io/"),
            Err(OriginUrlError::NotHttps(_))
        ));
        assert!(matches!(
            check("file:///etc/passwd"),
            Err(OriginUrlError::NotHttps(_))
        ));
        assert!(matches!(
            check("https://u:p@registry.terraform.io/"),
            Err(OriginUrlError::UserInfo(_))
        ));
        assert!(matches!(
            check("https://localhost/"),
            Err(OriginUrlError::Localhost(_))
        ));
        assert!(matches!(
            check("https://a.localhost./"),
            Err(OriginUrlError::Localhost(_))
        ));
        for (u, range) in [
            ("https://127.0.0.1/", "loopback"),
            ("https://2130706433/", "loopback"), // 127.0.0.1 as one number
            ("https://0x7f.1/", "loopback"),
            ("https://169.254.169.254/latest/meta-data/", "link-local"),
            ("https://[::ffff:7f00:1]/", "loopback"),
            ("https://[fd00:ec2::254]/", "unique local"),
            ("https://10.0.0.1:8443/", "private"),
        ] {
            match check(u) {
                Err(OriginUrlError::RefusedAddress { range: r, .. }) => assert_eq!(r, range, "{u}"),
                other => panic!("{u}: {other:?}"),
            }
        }
    }

    #[test]
    fn upstream_hostnames() {
        for ok in [
            "registry.terraform.io",
            "Registry.OpenTofu.org",
            "registry.example.test:8443",
        ] {
            UpstreamHost::parse(ok).unwrap_or_else(|e| panic!("{ok}: {e:?}"));
        }
        assert_eq!(
            UpstreamHost::parse("Registry.OpenTofu.org")
                .unwrap()
                .as_str(),
            "registry.opentofu.org"
        );
        for bad in [
            "127.0.0.1",
            "10.0.0.1",
            "169.254.169.254",
            "localhost",
            "registry.localhost",
            "intranet",
            "registry.example.test.",
            "[::1]",
            "a/b.com",
            "..",
            "%2e%2e",
            "2130706433",
            "example.123",
        ] {
            assert!(UpstreamHost::parse(bad).is_err(), "{bad}");
        }
    }

    /// A mirror path names an upstream only byte for byte: the attack list
    /// of issue 22 (and any other spelling) matches no configured host.
    #[test]
    fn only_the_exact_stored_name_matches() {
        let host = UpstreamHost::parse("registry.example.test").unwrap();
        assert!(host.matches("registry.example.test"));
        for other in [
            "REGISTRY.EXAMPLE.TEST.",
            "REGISTRY.EXAMPLE.TEST",
            "registry.example.test.",
            "registry.example.test:443",
            "%2e%2e",
            "xn--rgistry-fya.example.test", // a punycode look-alike
            "registry.example.test%00",
            "169.254.169.254",
        ] {
            assert!(!host.matches(other), "{other}");
        }
    }

    proptest! {
        #![proptest_config(crate::property_config())]

        /// An IPv4 address and every IPv6 form that carries it are judged alike.
        #[test]
        fn embedded_ipv4_is_judged_as_itself(bits in any::<u32>()) {
            let v4 = Ipv4Addr::from(bits);
            let expected = refused_range(IpAddr::V4(v4));
            prop_assert_eq!(refused_range(IpAddr::V6(v4.to_ipv6_mapped())), expected);
            let nat64 = Ipv6Addr::from((0x0064_ff9b_u128 << 96) | u128::from(bits));
            prop_assert_eq!(refused_range(IpAddr::V6(nat64)), expected);
        }

        /// Every private IPv4 address is refused, whatever its host bits.
        #[test]
        fn private_ranges_are_refused_whole(host in any::<u32>()) {
            for (net, prefix) in [([10, 0, 0, 0], 8u8), ([172, 16, 0, 0], 12), ([192, 168, 0, 0], 16), ([127, 0, 0, 0], 8), ([169, 254, 0, 0], 16)] {
                let base = u32::from(Ipv4Addr::from(net));
                let ip = Ipv4Addr::from(base | (host & (u32::MAX >> prefix)));
                prop_assert!(refused_range(IpAddr::V4(ip)).is_some(), "{}", ip);
            }
        }
    }
}
