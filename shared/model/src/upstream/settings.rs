//! An upstream registry as an admin configures it (`PUT
//! /v1/admin/upstreams/<host>`, `tfreg upstream set`): what it serves,
//! whether the cache may fetch from it, for how long its lists are fresh,
//! who may cause a fetch, what its releases must prove, and (admin-only)
//! where to connect to reach it. Never a secret: [`CredentialRef`] says
//! where the credentials are read from, the way the sign-in's client secret
//! is referenced.
//!
//! A body is checked whole ([`UpstreamSettings::validate`]) and unknown
//! fields are refused, so a typo in a setting is a 400, not a default.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};

use serde::{Deserialize, Serialize};

use super::{UpstreamHost, in_v4, in_v6};
use crate::Invalid;

/// Most upstreams one registry keeps (each is read on every cached request).
pub const MAX_UPSTREAMS: usize = 50;
pub const METADATA_TTL_DEFAULT: u32 = 3600;
pub const METADATA_TTL_MIN: u32 = 60;
pub const METADATA_TTL_MAX: u32 = 7 * 24 * 3600;
/// An origin's 404 is remembered this long (a 5xx never is).
pub const NEGATIVE_TTL_DEFAULT: u32 = 60;
pub const NEGATIVE_TTL_MAX: u32 = 600;
/// One archive or module fill may take this long.
pub const FILL_TIMEOUT_DEFAULT: u32 = 600;
pub const FILL_TIMEOUT_MIN: u32 = 10;
/// The fill function's own limit (Lambda's 15 minutes).
pub const FILL_TIMEOUT_MAX: u32 = 900;
/// The source host of public modules, by default the only one fetched.
pub const DEFAULT_MODULE_HOST: &str = "github.com";
pub const MAX_MODULE_HOSTS: usize = 32;
/// Most addresses `connect.to` may give one host.
pub const MAX_CONNECT_ADDRS: usize = 8;
pub const MAX_ALLOW_NETS: usize = 16;
/// Largest extra CA bundle (PEM).
pub const MAX_CA_PEM: usize = 64 * 1024;

/// What an upstream is used for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Serves {
    pub providers: bool,
    pub modules: bool,
}

/// `online` fetches on a miss; `sealed` answers only from the cache
/// (air-gapped registries), so it never opens a connection.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    #[default]
    Online,
    Sealed,
}

/// Whose request may make the cache fetch from the origin. An anonymous
/// read never does.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FillBy {
    /// Tokens created with `fill` (`tfreg token create --fill`) and admin
    /// tokens.
    #[default]
    MarkedTokens,
    /// Any valid token that may read.
    AnyToken,
}

/// A provider release signed by a key the cache has not seen for that
/// provider before.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KeyChange {
    /// Stored, and audited (`cache.key-changed`).
    #[default]
    Audit,
    /// Refused (502), audited.
    Refuse,
}

/// A provider release with no signing keys at all.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Unsigned {
    /// Refused, as Terraform refuses it.
    #[default]
    Refuse,
    /// Accepted on its checksums alone, as OpenTofu accepts keyless
    /// providers from registry.opentofu.org only; shown as unsigned.
    ChecksumsOnly,
}

/// Where the credentials the registry presents to the upstream's API are
/// read from (a bearer token); never the value itself. Only names inside
/// the operator's allow-list are accepted ([`super::OperatorPolicy`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", deny_unknown_fields)]
pub enum CredentialRef {
    /// An environment variable of `tfreg serve` or the fill function,
    /// named `TFREG_UPSTREAM_CREDENTIAL_*`.
    Env(String),
    /// A file name in the directory `tfreg serve --upstream-credentials-dir`
    /// names.
    File(String),
    /// An SSM Parameter Store SecureString: read by no function yet, so
    /// refused.
    Ssm(String),
}

/// An admin-only way to reach an origin that is not on the public
/// internet (a registry inside the VPC, the tests' origins): these
/// addresses for these hosts, these networks allowed, this CA trusted. In
/// AWS the functions still never connect to loopback or link-local.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Connect {
    /// Host (the upstream's own name, or one of its module hosts; a port
    /// here is ignored) → the addresses to connect to instead of asking DNS.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub to: BTreeMap<UpstreamHost, Vec<SocketAddr>>,
    /// Networks (`10.1.0.0/16`) the upstream's names may resolve into,
    /// though special-purpose.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_nets: Vec<Net>,
    /// Certificates (PEM) trusted besides the system's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_pem: Option<String>,
}

/// An IP network, `address/prefix`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Net {
    pub addr: IpAddr,
    pub prefix: u8,
}

impl Net {
    pub fn parse(text: &str) -> Result<Net, Invalid> {
        let bad = || Invalid::bad(format!("{text:?} is not a network such as 10.1.0.0/16"));
        let (addr, prefix) = text.split_once('/').ok_or_else(bad)?;
        let addr: IpAddr = addr.parse().map_err(|_| bad())?;
        let prefix: u8 = prefix.parse().map_err(|_| bad())?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        if prefix > max {
            return Err(bad());
        }
        Ok(Net { addr, prefix })
    }

    /// Is `ip` in this network (same family)?
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => in_v4(ip, net, self.prefix),
            (IpAddr::V6(net), IpAddr::V6(ip)) => in_v6(ip, net, self.prefix),
            _ => false,
        }
    }
}

impl Net {
    /// Is every address of `inner` in this network?
    pub fn covers(&self, inner: &Net) -> bool {
        inner.prefix >= self.prefix && self.contains(inner.addr)
    }
}

impl TryFrom<String> for Net {
    type Error = Invalid;
    fn try_from(s: String) -> Result<Self, Invalid> {
        Self::parse(&s)
    }
}

impl From<Net> for String {
    fn from(n: Net) -> String {
        format!("{}/{}", n.addr, n.prefix)
    }
}

fn default_metadata_ttl() -> u32 {
    METADATA_TTL_DEFAULT
}
fn default_negative_ttl() -> u32 {
    NEGATIVE_TTL_DEFAULT
}
fn default_fill_timeout() -> u32 {
    FILL_TIMEOUT_DEFAULT
}
fn default_module_hosts() -> Vec<UpstreamHost> {
    vec![UpstreamHost::parse(DEFAULT_MODULE_HOST).expect("a valid host")]
}

/// An upstream's settings: the admin API's body. Only `serves` is
/// required; everything else has the default a security team would pick.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpstreamSettings {
    pub serves: Serves,
    #[serde(default)]
    pub mode: Mode,
    /// How long a fetched version list is answered without asking again.
    #[serde(default = "default_metadata_ttl")]
    pub metadata_ttl_secs: u32,
    /// How long an origin's 404 is remembered.
    #[serde(default = "default_negative_ttl")]
    pub negative_ttl_secs: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials: Option<CredentialRef>,
    #[serde(default)]
    pub fill_by: FillBy,
    #[serde(default)]
    pub on_key_change: KeyChange,
    #[serde(default)]
    pub unsigned: Unsigned,
    /// Hosts module sources may be fetched from (git or archives over
    /// https); a source elsewhere is passed through (online) or refused
    /// (sealed).
    #[serde(default = "default_module_hosts")]
    pub module_hosts: Vec<UpstreamHost>,
    /// Largest archive fetched; none: the registry's own limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_archive_bytes: Option<u64>,
    #[serde(default = "default_fill_timeout")]
    pub fill_timeout_secs: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connect: Option<Connect>,
}

impl UpstreamSettings {
    /// Serving `serves`, every other setting its default.
    pub fn new(serves: Serves) -> Self {
        UpstreamSettings {
            serves,
            mode: Mode::default(),
            metadata_ttl_secs: METADATA_TTL_DEFAULT,
            negative_ttl_secs: NEGATIVE_TTL_DEFAULT,
            credentials: None,
            fill_by: FillBy::default(),
            on_key_change: KeyChange::default(),
            unsigned: Unsigned::default(),
            module_hosts: default_module_hosts(),
            max_archive_bytes: None,
            fill_timeout_secs: FILL_TIMEOUT_DEFAULT,
            connect: None,
        }
    }

    /// The settings' own rules, for the upstream `host`: every problem
    /// named, the first one returned.
    pub fn validate(&self, host: &UpstreamHost) -> Result<(), Invalid> {
        let bad = |why: String| Err(Invalid::bad(format!("upstream {host}: {why}")));
        if !self.serves.providers && !self.serves.modules {
            return bad("serves neither providers nor modules".into());
        }
        if !(METADATA_TTL_MIN..=METADATA_TTL_MAX).contains(&self.metadata_ttl_secs) {
            return bad(format!(
                "metadata_ttl_secs must be {METADATA_TTL_MIN} to {METADATA_TTL_MAX}"
            ));
        }
        if self.negative_ttl_secs > NEGATIVE_TTL_MAX {
            return bad(format!(
                "negative_ttl_secs must be at most {NEGATIVE_TTL_MAX}"
            ));
        }
        if !(FILL_TIMEOUT_MIN..=FILL_TIMEOUT_MAX).contains(&self.fill_timeout_secs) {
            return bad(format!(
                "fill_timeout_secs must be {FILL_TIMEOUT_MIN} to {FILL_TIMEOUT_MAX}"
            ));
        }
        if self.max_archive_bytes == Some(0) {
            return bad("max_archive_bytes must be more than 0".into());
        }
        if self.module_hosts.len() > MAX_MODULE_HOSTS {
            return bad(format!("at most {MAX_MODULE_HOSTS} module_hosts"));
        }
        if let Some(connect) = &self.connect {
            for (to, addrs) in &connect.to {
                let same = |h: &UpstreamHost| h.name() == to.name();
                if !same(host) && !self.module_hosts.iter().any(same) {
                    return bad(format!(
                        "connect.to names {to}, neither this upstream nor one of its module_hosts"
                    ));
                }
                if addrs.is_empty() || addrs.len() > MAX_CONNECT_ADDRS {
                    return bad(format!(
                        "connect.to {to}: 1 to {MAX_CONNECT_ADDRS} addresses"
                    ));
                }
            }
            if connect.allow_nets.len() > MAX_ALLOW_NETS {
                return bad(format!("at most {MAX_ALLOW_NETS} connect.allow_nets"));
            }
            if let Some(pem) = &connect.ca_pem
                && (pem.len() > MAX_CA_PEM || !pem.contains("-----BEGIN CERTIFICATE-----"))
            {
                return bad(format!(
                    "connect.ca_pem: PEM certificates, at most {MAX_CA_PEM} bytes"
                ));
            }
        }
        Ok(())
    }
}

/// A configured upstream as stored and listed: its settings, and who set
/// them when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpstreamRecord {
    pub hostname: UpstreamHost,
    pub settings: UpstreamSettings,
    pub created_at: u64,
    pub created_by: String,
    pub updated_at: u64,
    pub updated_by: String,
}

/// What a `PUT` of an upstream answers: the record, and the settings it
/// replaced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetUpstream {
    pub upstream: UpstreamRecord,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaced: Option<UpstreamSettings>,
}

/// Every configured upstream, by hostname.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpstreamList {
    pub upstreams: Vec<UpstreamRecord>,
}

/// What a `DELETE` of an upstream answers. Its cached data stays (an
/// upstream set again finds it); only fetching from it stops.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemovedUpstream {
    pub removed: UpstreamRecord,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn host(s: &str) -> UpstreamHost {
        UpstreamHost::parse(s).unwrap()
    }

    fn settings(body: serde_json::Value) -> Result<UpstreamSettings, String> {
        let s: UpstreamSettings = serde_json::from_value(body).map_err(|e| e.to_string())?;
        s.validate(&host("registry.example.test"))
            .map_err(|e| e.0)?;
        Ok(s)
    }

    #[test]
    fn only_serves_is_required_and_the_defaults_are_the_careful_ones() {
        let s = settings(json!({"serves": {"providers": true, "modules": false}})).unwrap();
        assert_eq!(
            s,
            UpstreamSettings::new(Serves {
                providers: true,
                modules: false
            })
        );
        assert_eq!(s.mode, Mode::Online);
        assert_eq!(s.fill_by, FillBy::MarkedTokens, "not any token");
        assert_eq!(s.unsigned, Unsigned::Refuse);
        assert_eq!(s.on_key_change, KeyChange::Audit);
        assert_eq!(s.module_hosts, [host("github.com")]);
        // What is stored reads back the same.
        let text = serde_json::to_string(&s).unwrap();
        assert_eq!(serde_json::from_str::<UpstreamSettings>(&text).unwrap(), s);
    }

    #[test]
    fn every_setting_reads_from_its_documented_form() {
        let s = settings(json!({
            "serves": {"providers": true, "modules": true},
            "mode": "sealed",
            "metadata_ttl_secs": 600,
            "negative_ttl_secs": 0,
            "credentials": {"env": "TFREG_UPSTREAM_CREDENTIAL_TOKEN"},
            "fill_by": "any_token",
            "on_key_change": "refuse",
            "unsigned": "checksums_only",
            "module_hosts": ["github.com", "git.example.test"],
            "max_archive_bytes": 1048576,
            "fill_timeout_secs": 60,
            "connect": {
                "to": {"registry.example.test": ["127.0.0.78:443"], "git.example.test": ["[::1]:8443"]},
                "allow_nets": ["10.1.0.0/16", "fd00::/8"],
                "ca_pem": "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
            }
        }))
        .unwrap();
        assert_eq!(s.mode, Mode::Sealed);
        assert_eq!(s.fill_by, FillBy::AnyToken);
        assert_eq!(
            s.credentials,
            Some(CredentialRef::Env("TFREG_UPSTREAM_CREDENTIAL_TOKEN".into()))
        );
        let connect = s.connect.unwrap();
        assert_eq!(
            connect.to[&host("registry.example.test")],
            ["127.0.0.78:443".parse::<SocketAddr>().unwrap()]
        );
        assert!(connect.allow_nets[0].contains("10.1.2.3".parse().unwrap()));
        assert!(!connect.allow_nets[0].contains("10.2.0.1".parse().unwrap()));
        assert!(connect.allow_nets[1].contains("fd00:ec2::254".parse().unwrap()));
        assert!(!connect.allow_nets[1].contains("10.1.2.3".parse().unwrap()));
    }

    #[test]
    fn a_bad_setting_is_refused_with_its_name() {
        let serves = json!({"providers": true, "modules": false});
        for (body, says) in [
            (
                json!({"serves": {"providers": false, "modules": false}}),
                "serves neither",
            ),
            (
                json!({"serves": serves, "metdata_ttl_secs": 60}),
                "unknown field",
            ),
            (
                json!({"serves": serves, "metadata_ttl_secs": 59}),
                "metadata_ttl_secs",
            ),
            (
                json!({"serves": serves, "negative_ttl_secs": 601}),
                "negative_ttl_secs",
            ),
            (
                json!({"serves": serves, "fill_timeout_secs": 901}),
                "fill_timeout_secs",
            ),
            (
                json!({"serves": serves, "max_archive_bytes": 0}),
                "max_archive_bytes",
            ),
            (
                json!({"serves": serves, "mode": "offline"}),
                "unknown variant",
            ),
            (
                json!({"serves": serves, "credentials": "s3cret"}),
                "unknown variant",
            ),
            (
                json!({"serves": serves, "module_hosts": ["127.0.0.1"]}),
                "IP address",
            ),
            (
                json!({"serves": serves, "connect": {"to": {"elsewhere.example": ["10.0.0.1:443"]}}}),
                "neither this upstream",
            ),
            (
                json!({"serves": serves, "connect": {"to": {"registry.example.test": []}}}),
                "1 to 8 addresses",
            ),
            (
                json!({"serves": serves, "connect": {"allow_nets": ["10.0.0.0/33"]}}),
                "network",
            ),
            (
                json!({"serves": serves, "connect": {"ca_pem": "not a pem"}}),
                "ca_pem",
            ),
        ] {
            let err = settings(body.clone()).unwrap_err();
            assert!(err.contains(says), "{body}: {err}");
        }
    }
}
