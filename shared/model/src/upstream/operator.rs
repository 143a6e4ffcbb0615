//! What the operator lets an admin's upstream settings reach (issue 35):
//! the secrets the registry may present to an upstream, and the addresses
//! a `connect` hook may name. The admin API can only *name* a credential
//! inside this allow-list; the list itself is the operator's (`tfreg serve`
//! flags, the functions' environment in template.yaml), never the API's.
//!
//! - credentials: one secret per upstream host, named by the host (as
//!   Terraform's own `TF_TOKEN_<host>` variables are), so an admin cannot send
//!   one upstream's credential to another host: the environment variable
//!   [`credential_env_name`] (`TFREG_UPSTREAM_CREDENTIAL_REGISTRY_EXAMPLE_TEST`
//!   for `registry.example.test`), or the file [`credential_file_name`]
//!   (`registry.example.test`) in the directory `tfreg serve
//!   --upstream-credentials-dir` names (none: no files). SSM parameters are
//!   read by no function: refused.
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
/// every refused value, whatever it named: it names only what this host's
/// credentials may be, which follows from the host alone.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "upstream {0}: credentials and connect settings must be among those the operator allows (credentials: the variable {env} or the file {file} in the server's credentials directory; connect: addresses in the networks the server allows)",
    env = credential_env_name(.0),
    file = credential_file_name(.0)
)]
pub struct NotAllowed(pub UpstreamHost);

/// The one environment variable whose value may be sent to `host` as its
/// credentials: [`CREDENTIAL_ENV_PREFIX`] and the host in capitals, `.` as
/// `_`, `-` as `__` and the port's `:` as `___` (Terraform's `TF_TOKEN_`
/// spelling, capitalised). Each host has its own: a variable the operator
/// set for one upstream is never sent to another.
pub fn credential_env_name(host: &UpstreamHost) -> String {
    let mut name = String::from(CREDENTIAL_ENV_PREFIX);
    for c in host.to_string().chars() {
        match c {
            '.' => name.push('_'),
            '-' => name.push_str("__"),
            ':' => name.push_str("___"),
            c => name.push(c.to_ascii_uppercase()),
        }
    }
    name
}

/// The one file of the credentials directory whose content may be sent to
/// `host`: the host's name (a port's `:` as `_`).
pub fn credential_file_name(host: &UpstreamHost) -> String {
    host.to_string().replace(':', "_")
}

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
            .is_none_or(|c| self.credential_ok(host, c));
        let connect_ok = settings.connect.as_ref().is_none_or(|c| self.connect_ok(c));
        if credentials_ok && connect_ok {
            Ok(())
        } else {
            Err(NotAllowed(host.clone()))
        }
    }

    fn credential_ok(&self, host: &UpstreamHost, credentials: &CredentialRef) -> bool {
        match credentials {
            CredentialRef::Env(name) => *name == credential_env_name(host),
            CredentialRef::File(name) => {
                self.credentials_dir.is_some()
                    && is_file_name(name)
                    && *name == credential_file_name(host)
            }
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

    const REFUSED: &str = "upstream registry.example.test: credentials and connect settings must be among those the operator allows (credentials: the variable TFREG_UPSTREAM_CREDENTIAL_REGISTRY_EXAMPLE_TEST or the file registry.example.test in the server's credentials directory; connect: addresses in the networks the server allows)";

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
            &with_credentials(CredentialRef::File("registry.example.test".into())),
        )
        .unwrap();
        OperatorPolicy::default()
            .admits(
                &host(),
                &with_credentials(CredentialRef::Env(format!(
                    "{CREDENTIAL_ENV_PREFIX}REGISTRY_EXAMPLE_TEST"
                ))),
            )
            .unwrap();
    }

    /// A credential the operator set for one upstream is never sent to
    /// another: each host may name only its own variable and its own file.
    #[test]
    fn each_host_names_only_its_own_credential() {
        let dir = OperatorPolicy {
            credentials_dir: Some("/etc/tfreg/upstream".into()),
            ..OperatorPolicy::default()
        };
        let tfc = UpstreamHost::parse("app.terraform.io").unwrap();
        let evil = UpstreamHost::parse("evil.example.test").unwrap();
        let tfc_env = CredentialRef::Env(credential_env_name(&tfc));
        let tfc_file = CredentialRef::File(credential_file_name(&tfc));
        for c in [&tfc_env, &tfc_file] {
            dir.admits(&tfc, &with_credentials(c.clone())).unwrap();
            let err = dir.admits(&evil, &with_credentials(c.clone())).unwrap_err();
            assert_eq!(
                err.to_string(),
                "upstream evil.example.test: credentials and connect settings must be among those the operator allows (credentials: the variable TFREG_UPSTREAM_CREDENTIAL_EVIL_EXAMPLE_TEST or the file evil.example.test in the server's credentials directory; connect: addresses in the networks the server allows)",
                "{c:?}"
            );
        }
        // The names of hosts with hyphens, punycode and a port.
        for (host, env, file) in [
            (
                "app.terraform.io",
                "TFREG_UPSTREAM_CREDENTIAL_APP_TERRAFORM_IO",
                "app.terraform.io",
            ),
            (
                "my-registry.example.test",
                "TFREG_UPSTREAM_CREDENTIAL_MY__REGISTRY_EXAMPLE_TEST",
                "my-registry.example.test",
            ),
            (
                "xn--bcher-kva.example",
                "TFREG_UPSTREAM_CREDENTIAL_XN____BCHER__KVA_EXAMPLE",
                "xn--bcher-kva.example",
            ),
            (
                "registry.example.test:8443",
                "TFREG_UPSTREAM_CREDENTIAL_REGISTRY_EXAMPLE_TEST___8443",
                "registry.example.test_8443",
            ),
        ] {
            let host = UpstreamHost::parse(host).unwrap();
            assert_eq!(credential_env_name(&host), env);
            assert_eq!(credential_file_name(&host), file);
            assert!(is_file_name(file), "{file}");
        }
        // Names alike in case or spelling are still another name.
        for name in [
            "TFREG_UPSTREAM_CREDENTIAL_app_terraform_io",
            "TFREG_UPSTREAM_CREDENTIAL_APP_TERRAFORM_IO_",
            "TFREG_UPSTREAM_CREDENTIAL_APP_TERRAFORM",
        ] {
            assert!(
                dir.admits(&tfc, &with_credentials(CredentialRef::Env(name.into())))
                    .is_err(),
                "{name}"
            );
        }
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
