//! What the origin client is told about one upstream. Its own types, not
//! the stored `tfreg_model::upstream::Upstream`: the entry point maps the
//! stored settings (and reads the secret their `credentials` name) onto
//! these.

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;

use ipnet::IpNet;
use tfreg_model::upstream::UpstreamHost;
use tfreg_outbound::{Deployment, Exception, Policy, Refused};

/// One origin registry.
#[derive(Debug, Clone)]
pub struct OriginSettings {
    /// Its hostname as clients write it (`host[:port]`).
    pub hostname: UpstreamHost,
    /// Sent as `Authorization: Bearer` on discovery, versions and download
    /// answers to `hostname` only, never on a redirect hop or a file.
    pub credentials: Option<Bearer>,
    /// The admin-only test/VPC hook.
    pub connect: Option<Connect>,
    pub caps: Caps,
    pub timeouts: Timeouts,
    /// In AWS no `connect` entry can open loopback or link-local.
    pub deployment: Deployment,
    /// Trust the system's roots (besides `connect.ca_pem`). Tests whose
    /// origin has its own CA turn it off.
    pub system_roots: bool,
}

impl OriginSettings {
    /// The defaults of tests/cache/plan.md §2 for `hostname`.
    pub fn new(hostname: UpstreamHost) -> Self {
        Self {
            hostname,
            credentials: None,
            connect: None,
            caps: Caps::default(),
            timeouts: Timeouts::default(),
            deployment: Deployment::default(),
            system_roots: true,
        }
    }

    /// The address policy: public addresses, plus the `connect` hook's:
    /// each name of `connect.to` (the upstream's own, or a module host's)
    /// its pinned addresses, and the upstream's own name `allow_nets`. The
    /// operator's allow-list has bounded both when they were saved.
    pub fn policy(&self) -> Policy {
        let mut policy = Policy::public().in_deployment(self.deployment);
        let Some(connect) = &self.connect else {
            return policy;
        };
        let own = self.hostname.name();
        let mut own_pinned = Vec::new();
        for (host, addrs) in &connect.to {
            let ips = addrs.iter().map(|a| a.ip());
            if host.eq_ignore_ascii_case(own) {
                own_pinned.extend(ips);
            } else if let Ok(other) = UpstreamHost::parse(host) {
                policy = policy.with_exception(Exception::for_upstream(&other).addrs(ips));
            }
        }
        policy.with_exception(
            Exception::for_upstream(&self.hostname)
                .addrs(own_pinned)
                .nets(connect.allow_nets.iter().copied()),
        )
    }

    /// Refuse, before any fetch, a `connect` hook the policy would refuse
    /// at connect time anyway (an address of loopback or link-local in
    /// AWS): the admin hears it when saving, not at the first miss.
    pub fn check(&self) -> Result<(), Refused> {
        let policy = self.policy();
        let Some(connect) = &self.connect else {
            return Ok(());
        };
        for (host, addrs) in &connect.to {
            for addr in addrs {
                policy.allows(host, addr.ip())?;
            }
        }
        Ok(())
    }
}

/// The upstream's token. Its `Debug` shows no secret.
#[derive(Clone, PartialEq, Eq)]
pub struct Bearer(String);

impl Bearer {
    pub fn new(token: impl Into<String>) -> Self {
        Self(token.into())
    }

    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Bearer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Bearer(…)")
    }
}

/// An admin's test/VPC hook: where some names connect, a CA to trust and
/// networks the upstream's own name may resolve into.
#[derive(Debug, Clone, Default)]
pub struct Connect {
    /// Names (lowercase, no port) answered from here instead of DNS: the
    /// upstream's own and its module hosts'; each may use its addresses
    /// here though special-purpose (bounded by the operator when saved).
    pub to: BTreeMap<String, Vec<SocketAddr>>,
    /// One more CA (PEM) trusted for every connection of this upstream.
    pub ca_pem: Option<Vec<u8>>,
    /// Networks the upstream's own name may resolve into.
    pub allow_nets: Vec<IpNet>,
}

/// Body size caps, in bytes. A `Content-Length` over the cap is refused
/// before reading; a stream is cut at the cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caps {
    /// terraform-svchost's `maxDiscoDocBytes`.
    pub discovery: u64,
    pub versions: u64,
    /// A provider download answer or a module download answer.
    pub answer: u64,
    pub shasums: u64,
    pub signature: u64,
    /// The default for archives (`max_archive_bytes`); a fetch may pass less.
    pub archive: u64,
    /// A git server's advertisement or `ls-refs` answer.
    pub git_refs: u64,
    /// A git fetch answer (the pack of one commit).
    pub git_pack: u64,
}

const MIB: u64 = 1024 * 1024;

impl Default for Caps {
    fn default() -> Self {
        Self {
            discovery: MIB,
            versions: 8 * MIB,
            answer: 256 * 1024,
            shasums: MIB,
            signature: 64 * 1024,
            archive: 2048 * MIB,
            git_refs: 8 * MIB,
            git_pack: 256 * MIB,
        }
    }
}

/// Per connection and per read; the overall deadline is each call's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    pub connect: Duration,
    /// Longest wait for the next bytes of an answer.
    pub read: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            connect: Duration::from_secs(3),
            read: Duration::from_secs(10),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(deployment: Deployment) -> OriginSettings {
        let mut s = OriginSettings::new(UpstreamHost::parse("registry.example.test").unwrap());
        s.deployment = deployment;
        s.connect = Some(Connect {
            to: BTreeMap::from([
                (
                    "registry.example.test".into(),
                    vec!["127.0.0.50:8443".parse().unwrap()],
                ),
                (
                    "files.example.test".into(),
                    vec!["127.0.0.50:8443".parse().unwrap()],
                ),
            ]),
            ca_pem: None,
            allow_nets: vec!["10.1.0.0/16".parse().unwrap()],
        });
        s
    }

    #[test]
    fn the_hook_covers_each_pinned_name_and_its_own_addresses() {
        let policy = settings(Deployment::Serve).policy();
        let loopback = "127.0.0.50".parse().unwrap();
        assert!(policy.allows("registry.example.test", loopback).is_ok());
        // A module host pinned to an address may use that one (issue 35:
        // `--connect-to` for a module host was saved and never worked) ...
        assert!(policy.allows("files.example.test", loopback).is_ok());
        // ... and no other special-purpose one, nor the upstream's nets.
        let other = "127.0.0.51".parse().unwrap();
        assert!(policy.allows("files.example.test", other).is_err());
        assert!(
            policy
                .allows("files.example.test", "10.1.0.9".parse().unwrap())
                .is_err()
        );
        assert!(policy.allows("elsewhere.example.test", loopback).is_err());
        assert!(
            policy
                .allows("registry.example.test", "10.1.0.9".parse().unwrap())
                .is_ok()
        );
        assert!(
            policy
                .allows("registry.example.test", "10.2.0.9".parse().unwrap())
                .is_err()
        );
        settings(Deployment::Serve).check().unwrap();
    }

    #[test]
    fn in_aws_the_hook_never_opens_loopback() {
        let mut s = settings(Deployment::Aws);
        s.connect.as_mut().unwrap().to.remove("files.example.test");
        let err = s.check().unwrap_err();
        assert_eq!(err.range, "loopback");
        s.deployment = Deployment::Serve;
        s.check().unwrap();
    }

    #[test]
    fn debug_shows_no_token() {
        let mut s = settings(Deployment::Serve);
        s.credentials = Some(Bearer::new("s3cret"));
        assert!(!format!("{s:?}").contains("s3cret"));
    }
}
