//! What the operator lets an admin's upstream settings reach (issue 35):
//! the secrets the registry may present to an upstream, and the addresses
//! a `connect` hook may name. The admin API can only *name* a credential
//! inside this allow-list; the list itself is the operator's (`tfreg serve`
//! flags, the functions' environment in template.yaml), never the API's.
//!
//! - credentials: an environment variable whose name starts with
//!   [`CREDENTIAL_ENV_PREFIX`], or the name of a file in the directory
//!   `tfreg serve --upstream-credentials-dir` names (none: no files). SSM
//!   parameters are read by no function: refused.
//! - `connect.to` addresses and `connect.allow_nets` networks: only inside
//!   the networks of `--upstream-connect-allow` / [`CONNECT_ALLOW_ENV`]
//!   (default none). `connect.ca_pem` widens trust for this upstream's own
//!   connections only, which go nowhere the rules above do not allow.
//!
//! Every refused value is answered with the same words ([`NotAllowed`]),
//! and nothing here touches the file system or the network, so a refusal
//! tells nothing about the server: no existence oracle, no port scan.

use std::path::PathBuf;

use super::{Connect, CredentialRef, Net, UpstreamHost, UpstreamSettings};

/// The only environment variables an upstream's credentials may name.
pub const CREDENTIAL_ENV_PREFIX: &str = "TFREG_UPSTREAM_CREDENTIAL_";
/// The networks `connect` may name, comma-separated (`tfreg serve
/// --upstream-connect-allow`, the functions' environment).
pub const CONNECT_ALLOW_ENV: &str = "TFREG_UPSTREAM_CONNECT_ALLOW";

/// The operator's allow-list. The default allows no file, no `connect`
/// address and no network; variables under the prefix only.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OperatorPolicy {
    /// Networks `connect.to` addresses and `connect.allow_nets` may fall in.
    pub connect_allow: Vec<Net>,
    /// The directory credential files are read from (none: no files).
    pub credentials_dir: Option<PathBuf>,
}

/// An upstream setting outside the operator's allow-list. One message for
/// every refused value, whatever it named.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "upstream {0}: credentials and connect settings must be among those the operator allows (credentials: a {CREDENTIAL_ENV_PREFIX}* variable or a file name in the server's credentials directory; connect: addresses in the networks the server allows)"
)]
pub struct NotAllowed(pub String);

impl OperatorPolicy {
    /// The networks of a comma-separated list (`10.1.0.0/16,127.0.0.0/8`).
    pub fn parse_nets(text: &str) -> Result<Vec<Net>, crate::Invalid> {
        text.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(Net::parse)
            .collect()
    }

    /// May `settings` (of upstream `host`) be saved and used here?
    pub fn admits(
        &self,
        host: &UpstreamHost,
        settings: &UpstreamSettings,
    ) -> Result<(), NotAllowed> {
        let credentials_ok = settings
            .credentials
            .as_ref()
            .is_none_or(|c| self.credential_ok(c));
        let connect_ok = settings.connect.as_ref().is_none_or(|c| self.connect_ok(c));
        if credentials_ok && connect_ok {
            Ok(())
        } else {
            Err(NotAllowed(host.to_string()))
        }
    }

    fn credential_ok(&self, credentials: &CredentialRef) -> bool {
        match credentials {
            CredentialRef::Env(name) => {
                name.strip_prefix(CREDENTIAL_ENV_PREFIX)
                    .is_some_and(|rest| {
                        !rest.is_empty()
                            && rest.len() <= 100
                            && rest
                                .chars()
                                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
                    })
            }
            CredentialRef::File(name) => self.credentials_dir.is_some() && is_file_name(name),
            CredentialRef::Ssm(_) => false,
        }
    }

    fn connect_ok(&self, connect: &Connect) -> bool {
        let addrs_ok = connect
            .to
            .values()
            .flatten()
            .all(|a| self.connect_allow.iter().any(|n| n.contains(a.ip())));
        let nets_ok = connect
            .allow_nets
            .iter()
            .all(|inner| self.connect_allow.iter().any(|n| n.covers(inner)));
        addrs_ok && nets_ok
    }
}

/// A plain file name: no directory, not hidden, short, printable.
pub fn is_file_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 255
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upstream::Serves;

    fn host() -> UpstreamHost {
        UpstreamHost::parse("registry.example.test").unwrap()
    }

    fn with_credentials(c: CredentialRef) -> UpstreamSettings {
        let mut s = UpstreamSettings::new(Serves {
            providers: true,
            modules: false,
        });
        s.credentials = Some(c);
        s
    }

    fn with_connect(to: &[&str], nets: &[&str]) -> UpstreamSettings {
        let mut s = UpstreamSettings::new(Serves {
            providers: true,
            modules: false,
        });
        let mut connect = Connect::default();
        for addr in to {
            connect
                .to
                .entry(host())
                .or_default()
                .push(addr.parse().unwrap());
        }
        connect.allow_nets = nets.iter().map(|n| Net::parse(n).unwrap()).collect();
        s.connect = Some(connect);
        s
    }

    const REFUSED: &str = "upstream registry.example.test: credentials and connect settings must be among those the operator allows (credentials: a TFREG_UPSTREAM_CREDENTIAL_* variable or a file name in the server's credentials directory; connect: addresses in the networks the server allows)";

    /// The server's own secrets (its AWS role's keys, the sign-in's client
    /// secret, any file) are refused with the same words as any other value.
    #[test]
    fn the_servers_own_secrets_are_refused_alike() {
        let dir = OperatorPolicy {
            credentials_dir: Some("/etc/tfreg/upstream".into()),
            ..OperatorPolicy::default()
        };
        for c in [
            CredentialRef::Env("AWS_SECRET_ACCESS_KEY".into()),
            CredentialRef::Env("AWS_SESSION_TOKEN".into()),
            CredentialRef::Env("TFREG_OIDC_CLIENT_SECRET".into()),
            CredentialRef::Env("HOME".into()),
            CredentialRef::Env(CREDENTIAL_ENV_PREFIX.into()),
            CredentialRef::Env(format!("{CREDENTIAL_ENV_PREFIX}a")),
            CredentialRef::File("/etc/shadow".into()),
            CredentialRef::File("/proc/self/environ".into()),
            CredentialRef::File("../oidc-secret".into()),
            CredentialRef::File("a/b".into()),
            CredentialRef::File(".hidden".into()),
            CredentialRef::File("..".into()),
            CredentialRef::Ssm("/tfreg/oidc".into()),
        ] {
            let err = dir
                .admits(&host(), &with_credentials(c.clone()))
                .unwrap_err();
            assert_eq!(err.to_string(), REFUSED, "{c:?}");
        }
        // No directory: no file at all.
        let err = OperatorPolicy::default()
            .admits(
                &host(),
                &with_credentials(CredentialRef::File("token".into())),
            )
            .unwrap_err();
        assert_eq!(err.to_string(), REFUSED);
        dir.admits(
            &host(),
            &with_credentials(CredentialRef::File("token".into())),
        )
        .unwrap();
        OperatorPolicy::default()
            .admits(
                &host(),
                &with_credentials(CredentialRef::Env(format!("{CREDENTIAL_ENV_PREFIX}TFC"))),
            )
            .unwrap();
    }

    #[test]
    fn connect_stays_inside_the_operators_networks() {
        let none = OperatorPolicy::default();
        for (to, nets) in [
            (&["127.0.0.1:22"][..], &[][..]),
            (&["10.0.0.5:443"][..], &[][..]),
            (&["1.1.1.1:443"][..], &[][..]),
            (&[][..], &["10.0.0.0/8"][..]),
        ] {
            let err = none.admits(&host(), &with_connect(to, nets)).unwrap_err();
            assert_eq!(err.to_string(), REFUSED, "{to:?} {nets:?}");
        }
        let some = OperatorPolicy {
            connect_allow: OperatorPolicy::parse_nets("127.0.0.64/26, 10.1.0.0/16").unwrap(),
            ..OperatorPolicy::default()
        };
        some.admits(
            &host(),
            &with_connect(&["127.0.0.100:443"], &["10.1.2.0/24"]),
        )
        .unwrap();
        for (to, nets) in [
            (&["127.0.0.1:22"][..], &[][..]),
            (&["127.0.0.100:443", "127.0.0.1:443"][..], &[][..]),
            (&[][..], &["10.0.0.0/8"][..]),
            (&[][..], &["10.1.0.0/15"][..]),
        ] {
            let err = some.admits(&host(), &with_connect(to, nets)).unwrap_err();
            assert_eq!(err.to_string(), REFUSED, "{to:?} {nets:?}");
        }
        assert!(OperatorPolicy::parse_nets("10.0.0.0/33").is_err());
        assert_eq!(OperatorPolicy::parse_nets("").unwrap(), []);
    }
}
