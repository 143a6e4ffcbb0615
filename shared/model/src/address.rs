//! Provider and module addresses: validation and normalisation.
//!
//! Rules follow Terraform's own parsers (terraform-registry-address):
//! provider namespaces and types are letters, digits and dashes, no leading or
//! trailing dash, compared case-insensitively (we store them lowercase); module
//! namespaces and names also allow underscores; a module's target system is
//! lowercase letters and digits. Every part is 1..=64 characters, so no path
//! tricks (`..`, `/`, `%`, spaces) can get through.

use std::fmt;

use crate::error::Invalid;

const MAX_PART: usize = 64;

fn check_part(kind: &str, s: &str, allow_underscore: bool) -> Result<String, Invalid> {
    if s.is_empty() || s.len() > MAX_PART {
        return Err(Invalid::bad(format!(
            "invalid {kind} {s:?}: must be 1 to {MAX_PART} characters"
        )));
    }
    let ok_char = |c: char| c.is_ascii_alphanumeric() || c == '-' || (allow_underscore && c == '_');
    if !s.chars().all(ok_char) {
        let extra = if allow_underscore {
            ", underscores"
        } else {
            ""
        };
        return Err(Invalid::bad(format!(
            "invalid {kind} {s:?}: only letters, digits{extra} and dashes are allowed"
        )));
    }
    let first_last_ok = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    if !first_last_ok(s.chars().next()) || !first_last_ok(s.chars().last()) {
        return Err(Invalid::bad(format!(
            "invalid {kind} {s:?}: must start and end with a letter or digit"
        )));
    }
    Ok(s.to_ascii_lowercase())
}

/// A provider namespace (`hashicorp`), lowercase.
pub fn namespace(s: &str) -> Result<String, Invalid> {
    check_part("namespace", s, false)
}

/// A module namespace, which may also hold underscores, lowercase.
pub fn module_namespace(s: &str) -> Result<String, Invalid> {
    check_part("namespace", s, true)
}

/// A provider type (`aws`, `null`), lowercase.
pub fn provider_type(s: &str) -> Result<String, Invalid> {
    check_part("provider type", s, false)
}

/// A module name (`vpc`), lowercase.
pub fn module_name(s: &str) -> Result<String, Invalid> {
    check_part("module name", s, true)
}

/// A module's target system (`aws`): lowercase letters and digits only.
pub fn module_system(s: &str) -> Result<String, Invalid> {
    if s.is_empty()
        || s.len() > MAX_PART
        || !s
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
    {
        return Err(Invalid::bad(format!(
            "invalid module system {s:?}: must be 1 to {MAX_PART} lowercase letters or digits"
        )));
    }
    Ok(s.to_string())
}

/// An operating system or architecture name of a provider platform (`linux`, `amd64`).
pub fn platform_part(kind: &str, s: &str) -> Result<String, Invalid> {
    if s.is_empty()
        || s.len() > 32
        || !s
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
    {
        return Err(Invalid::bad(format!(
            "invalid {kind} {s:?}: must be 1 to 32 lowercase letters or digits"
        )));
    }
    Ok(s.to_string())
}

/// Longest hostname (DNS, in its ASCII form), without the port.
const MAX_HOST: usize = 253;

/// A registry hostname, normalised for comparison: IDNA to ASCII, lowercase,
/// and the default HTTPS port removed (`Example.COM:443` → `example.com`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Hostname(String);

impl Hostname {
    /// Parse and normalise `host[:port]`.
    pub fn parse(s: &str) -> Result<Self, Invalid> {
        let bad = || Invalid::bad(format!("invalid hostname {s:?}"));
        if s.is_empty() || s.len() > MAX_HOST + 6 {
            return Err(bad());
        }
        let (host, port) = match s.rsplit_once(':') {
            Some((h, p)) => {
                let port: u16 = p.parse().map_err(|_| bad())?;
                if port == 0 {
                    return Err(bad());
                }
                (h, Some(port))
            }
            None => (s, None),
        };
        if host.is_empty() || host.contains(['/', '@', '[', ']', '%', '\\', '?', '#', ' ']) {
            return Err(bad());
        }
        let host = match url::Host::parse(host).map_err(|_| bad())? {
            url::Host::Domain(d) => d,
            url::Host::Ipv4(ip) => ip.to_string(),
            url::Host::Ipv6(_) => return Err(bad()),
        };
        // Checked again after IDNA: `ä` (2 bytes) becomes `xn--4ca` (7).
        if host.len() > MAX_HOST
            || !host
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-')
            || host.split('.').any(|label| {
                label.is_empty()
                    || label.starts_with('-')
                    || label.ends_with('-')
                    || label.len() > 63
            })
        {
            return Err(bad());
        }
        Ok(Hostname(match port {
            Some(443) | None => host,
            Some(p) => format!("{host}:{p}"),
        }))
    }

    /// The normalised form.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Hostname {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// `namespace/type` of a provider, both validated and lowercase.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ProviderName {
    pub namespace: String,
    pub r#type: String,
}

impl ProviderName {
    pub fn parse(namespace: &str, r#type: &str) -> Result<Self, Invalid> {
        Ok(Self {
            namespace: self::namespace(namespace)?,
            r#type: provider_type(r#type)?,
        })
    }
}

impl fmt::Display for ProviderName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.r#type)
    }
}

/// `namespace/name/system` of a module, validated and lowercase.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ModuleName {
    pub namespace: String,
    pub name: String,
    pub system: String,
}

impl ModuleName {
    pub fn parse(namespace: &str, name: &str, system: &str) -> Result<Self, Invalid> {
        Ok(Self {
            namespace: module_namespace(namespace)?,
            name: module_name(name)?,
            system: module_system(&system.to_ascii_lowercase())?,
        })
    }
}

impl fmt::Display for ModuleName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}/{}", self.namespace, self.name, self.system)
    }
}

/// A provider platform such as `linux_amd64`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Platform {
    pub os: String,
    pub arch: String,
}

impl Platform {
    pub fn parse(os: &str, arch: &str) -> Result<Self, Invalid> {
        Ok(Self {
            os: platform_part("os", os)?,
            arch: platform_part("arch", arch)?,
        })
    }

    /// `os_arch`, as [`Display`](fmt::Display) writes it (an os has no `_`).
    pub fn parse_joined(text: &str) -> Result<Self, Invalid> {
        let (os, arch) = text.split_once('_').ok_or_else(|| {
            Invalid::bad(format!("{text:?} is not a platform such as linux_amd64"))
        })?;
        Self::parse(os, arch)
    }
}

impl fmt::Display for Platform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}_{}", self.os, self.arch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_parts_follow_terraform_rules() {
        assert_eq!(namespace("HashiCorp").unwrap(), "hashicorp");
        assert_eq!(provider_type("null").unwrap(), "null");
        assert_eq!(provider_type("google-beta").unwrap(), "google-beta");
        for bad in [
            "",
            "-x",
            "x-",
            "a_b",
            "a/b",
            "..",
            "a.b",
            "ä",
            "a b",
            "%2e",
            &"a".repeat(65),
        ] {
            assert!(provider_type(bad).is_err(), "{bad:?} must be refused");
        }
    }

    #[test]
    fn module_parts_allow_underscores_but_system_is_strict() {
        assert_eq!(module_name("my_vpc").unwrap(), "my_vpc");
        assert_eq!(module_namespace("Team_A").unwrap(), "team_a");
        assert!(module_system("aws").is_ok());
        assert!(module_system("a-b").is_err());
        assert!(module_system("AWS").is_err());
        assert!(ModuleName::parse("ns", "n", "AWS").is_ok());
        assert!(module_name("../etc").is_err());
    }

    #[test]
    fn hostnames_normalise_for_comparison() {
        let a = Hostname::parse("Registry.Example.COM:443").unwrap();
        assert_eq!(a.as_str(), "registry.example.com");
        assert_eq!(
            Hostname::parse("localhost:8443").unwrap().as_str(),
            "localhost:8443"
        );
        assert_eq!(
            Hostname::parse("127.0.0.1:8443").unwrap().as_str(),
            "127.0.0.1:8443"
        );
        assert_eq!(
            Hostname::parse("bücher.example").unwrap().as_str(),
            "xn--bcher-kva.example"
        );
        for bad in [
            "",
            "a/b",
            "bad_host!",
            "a_b.com",
            "host:",
            "host:x",
            "host:0",
            "-a.com",
            "a..b",
            "user@host",
            "[::1]",
        ] {
            assert!(Hostname::parse(bad).is_err(), "{bad:?} must be refused");
        }
    }

    #[test]
    fn internationalised_hostnames_are_bounded_in_their_ascii_form() {
        // Found by the round-trip property: 80 labels `ä` are 239 bytes as
        // typed but 639 as `xn--4ca` labels, which then did not parse back.
        let typed = ["ä"; 80].join(".");
        assert!(typed.len() <= MAX_HOST);
        assert!(Hostname::parse(&typed).is_err());
        let fits = ["ä"; 31].join(".");
        let host = Hostname::parse(&fits).unwrap();
        assert!(host.as_str().len() <= MAX_HOST);
        assert_eq!(Hostname::parse(host.as_str()).unwrap(), host);
    }

    #[test]
    fn platforms_are_lowercase_alnum() {
        assert_eq!(
            Platform::parse("linux", "amd64").unwrap().to_string(),
            "linux_amd64"
        );
        assert!(Platform::parse("Linux", "amd64").is_err());
        assert!(Platform::parse("linux", "amd_64").is_err());
    }
}
