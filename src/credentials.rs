//! The registry tokens Terraform and OpenTofu keep, read and written as they
//! do, so one `terraform login` (or `tfreg login`) serves `tfreg` too:
//!
//! 1. `TF_TOKEN_<host>` (Terraform 1.2+, OpenTofu): `_` for `.`, `__` for `-`;
//! 2. `credentials "<host>" { token = "..." }` in the CLI configuration file
//!    (`TF_CLI_CONFIG_FILE`, else `~/.terraformrc`);
//! 3. `~/.terraform.d/credentials.tfrc.json`, which `terraform login` writes.
//!
//! Hosts are compared as Terraform's `svchost` compares them: lower case,
//! Punycode, the port kept unless it is 443.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

/// Why stored credentials could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum CredentialsError {
    #[error("reading {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not a credentials file Terraform could read: {detail}")]
    Malformed { path: PathBuf, detail: String },
    #[error("writing {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("no home directory: set HOME")]
    NoHome,
}

/// `host[:port]` of a registry URL or hostname, as Terraform compares hosts.
pub fn comparison_host(registry: &str) -> Option<String> {
    let with_scheme = if registry.contains("://") {
        registry.to_string()
    } else {
        format!("https://{registry}")
    };
    let url = url::Url::parse(&with_scheme).ok()?;
    let host = url.host_str()?.to_ascii_lowercase();
    Some(match url.port() {
        Some(port) if port != 443 => format!("{host}:{port}"),
        _ => host,
    })
}

/// The token a `TF_TOKEN_…` variable gives `host` (sorted by name, the first
/// wins, as Terraform does since it folds several spellings to one host).
pub fn from_env(vars: impl IntoIterator<Item = (String, String)>, host: &str) -> Option<String> {
    let sorted: BTreeMap<String, String> = vars
        .into_iter()
        .filter(|(name, _)| name.starts_with("TF_TOKEN_"))
        .collect();
    sorted.into_iter().find_map(|(name, value)| {
        let raw = name["TF_TOKEN_".len()..]
            .replace("__", "-")
            .replace('_', ".");
        (comparison_host(&raw).as_deref() == Some(host) && !value.is_empty()).then_some(value)
    })
}

/// The token of `host` in a CLI configuration file's `credentials` blocks.
pub fn from_cli_config(
    text: &str,
    host: &str,
    path: &Path,
) -> Result<Option<String>, CredentialsError> {
    let body: hcl::Body = hcl::from_str(text).map_err(|e| CredentialsError::Malformed {
        path: path.to_path_buf(),
        detail: e.to_string(),
    })?;
    for block in body.blocks().filter(|b| b.identifier() == "credentials") {
        let Some(label) = block.labels().first() else {
            continue;
        };
        if comparison_host(label.as_str()).as_deref() != Some(host) {
            continue;
        }
        let token = block
            .body()
            .attributes()
            .find(|a| a.key() == "token")
            .and_then(|a| match a.expr() {
                hcl::Expression::String(s) => Some(s.clone()),
                _ => None,
            });
        return Ok(token.filter(|t| !t.is_empty()));
    }
    Ok(None)
}

/// The token of `host` in `credentials.tfrc.json`'s text.
pub fn from_json(text: &str, host: &str, path: &Path) -> Result<Option<String>, CredentialsError> {
    let file: Value = serde_json::from_str(text).map_err(|e| CredentialsError::Malformed {
        path: path.to_path_buf(),
        detail: e.to_string(),
    })?;
    let Some(hosts) = file.get("credentials").and_then(Value::as_object) else {
        return Ok(None);
    };
    Ok(hosts.iter().find_map(|(name, entry)| {
        (comparison_host(name).as_deref() == Some(host))
            .then(|| entry.get("token")?.as_str().map(str::to_string))
            .flatten()
            .filter(|t| !t.is_empty())
    }))
}

/// `credentials.tfrc.json`'s text with `host`'s token set (other hosts and
/// other keys kept as they were).
pub fn with_token(
    text: Option<&str>,
    host: &str,
    token: &str,
    path: &Path,
) -> Result<String, CredentialsError> {
    let mut file: Value = match text {
        Some(t) if !t.trim().is_empty() => {
            serde_json::from_str(t).map_err(|e| CredentialsError::Malformed {
                path: path.to_path_buf(),
                detail: e.to_string(),
            })?
        }
        _ => Value::Object(Map::new()),
    };
    let malformed = |detail: &str| CredentialsError::Malformed {
        path: path.to_path_buf(),
        detail: detail.to_string(),
    };
    let root = file
        .as_object_mut()
        .ok_or_else(|| malformed("not a JSON object"))?;
    let hosts = root
        .entry("credentials")
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()
        .ok_or_else(|| malformed("\"credentials\" is not an object"))?;
    hosts.insert(host.to_string(), serde_json::json!({ "token": token }));
    let mut out = serde_json::to_string_pretty(&file).expect("JSON values serialise");
    out.push('\n');
    Ok(out)
}

/// Where Terraform keeps `credentials.tfrc.json`: `~/.terraform.d`.
pub fn config_dir() -> Result<PathBuf, CredentialsError> {
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .ok_or(CredentialsError::NoHome)?;
    Ok(PathBuf::from(home).join(".terraform.d"))
}

/// The stored token for `host` (see the module's order), if any.
pub fn lookup(host: &str) -> Result<Option<String>, CredentialsError> {
    if let Some(token) = from_env(std::env::vars(), host) {
        return Ok(Some(token));
    }
    let cli_config = match std::env::var_os("TF_CLI_CONFIG_FILE").filter(|p| !p.is_empty()) {
        Some(path) => Some(PathBuf::from(path)),
        None => config_dir()
            .ok()
            .and_then(|d| Some(d.parent()?.join(".terraformrc"))),
    };
    if let Some(path) = cli_config
        && let Some(text) = read_if_present(&path)?
        && let Some(token) = from_cli_config(&text, host, &path)?
    {
        return Ok(Some(token));
    }
    let Ok(dir) = config_dir() else {
        return Ok(None);
    };
    let path = dir.join("credentials.tfrc.json");
    match read_if_present(&path)? {
        Some(text) => from_json(&text, host, &path),
        None => Ok(None),
    }
}

/// Store `token` for `host` in `credentials.tfrc.json` (made private to its
/// owner, written whole and renamed into place); returns the file's path.
pub fn store(host: &str, token: &str) -> Result<PathBuf, CredentialsError> {
    use std::io::Write as _;
    use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
    let dir = config_dir()?;
    let write_err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| CredentialsError::Write { path, source }
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .map_err(write_err(&dir))?;
    let path = dir.join("credentials.tfrc.json");
    let text = with_token(read_if_present(&path)?.as_deref(), host, token, &path)?;
    let temp = dir.join(format!(".credentials.tfrc.json.{}", std::process::id()));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&temp)
        .map_err(write_err(&temp))?;
    file.write_all(text.as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(write_err(&temp))?;
    std::fs::rename(&temp, &path).map_err(write_err(&path))?;
    Ok(path)
}

fn read_if_present(path: &Path) -> Result<Option<String>, CredentialsError> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(CredentialsError::Read {
            path: path.to_path_buf(),
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn hosts_compare_as_terraform_compares_them() {
        assert_eq!(
            comparison_host("https://Registry.Example.com/").as_deref(),
            Some("registry.example.com")
        );
        assert_eq!(
            comparison_host("https://registry.example.com:443").as_deref(),
            Some("registry.example.com")
        );
        assert_eq!(
            comparison_host("127.0.0.1:8443").as_deref(),
            Some("127.0.0.1:8443")
        );
        assert_eq!(
            comparison_host("https://café.fr").as_deref(),
            Some("xn--caf-dma.fr")
        );
        assert_eq!(comparison_host("https://"), None);
    }

    #[test]
    fn tf_token_variables_spell_dots_and_hyphens() {
        let env = vars(&[
            ("TF_TOKEN_my__registry_example_com", "hyphen"),
            ("TF_TOKEN_other_example_com", "other"),
            ("PATH", "/bin"),
        ]);
        assert_eq!(
            from_env(env.clone(), "my-registry.example.com").as_deref(),
            Some("hyphen")
        );
        assert_eq!(from_env(env.clone(), "registry.example.com"), None);
        // A port, as `env` can set it; upper case folds away.
        let env = vars(&[
            ("TF_TOKEN_127_0_0_1:8443", "p"),
            ("TF_TOKEN_REG_EXAMPLE_COM", "u"),
        ]);
        assert_eq!(
            from_env(env.clone(), "127.0.0.1:8443").as_deref(),
            Some("p")
        );
        assert_eq!(from_env(env, "reg.example.com").as_deref(), Some("u"));
        // Two spellings of one host: the first by name wins; empty is none.
        let env = vars(&[
            ("TF_TOKEN_b_example_com", "second"),
            ("TF_TOKEN_B_EXAMPLE_COM", "first"),
        ]);
        assert_eq!(from_env(env, "b.example.com").as_deref(), Some("first"));
        assert_eq!(
            from_env(vars(&[("TF_TOKEN_c_example_com", "")]), "c.example.com"),
            None
        );
    }

    #[test]
    fn credentials_blocks_and_the_json_file_are_read() {
        let path = Path::new("x");
        let hcl = "plugin_cache_dir = \"/tmp\"\ncredentials \"Reg.Example.com\" {\n  token = \"from-hcl\"\n}\ncredentials \"b.example.com\" {\n  token = \"b\"\n}\n";
        assert_eq!(
            from_cli_config(hcl, "reg.example.com", path)
                .unwrap()
                .as_deref(),
            Some("from-hcl")
        );
        assert_eq!(from_cli_config(hcl, "c.example.com", path).unwrap(), None);
        assert!(from_cli_config("credentials {", "a", path).is_err());

        let json = r#"{"credentials": {"reg.example.com:443": {"token": "from-json"}, "e.example.com": {}}}"#;
        assert_eq!(
            from_json(json, "reg.example.com", path).unwrap().as_deref(),
            Some("from-json")
        );
        assert_eq!(from_json(json, "e.example.com", path).unwrap(), None);
        assert_eq!(from_json("{}", "reg.example.com", path).unwrap(), None);
        assert!(from_json("[", "a", path).is_err());
    }

    #[test]
    fn a_new_token_keeps_the_other_hosts() {
        let path = Path::new("x");
        let before = r#"{"credentials": {"app.terraform.io": {"token": "tfc"}}, "other": 1}"#;
        let after = with_token(Some(before), "reg.example.com", "t1", path).unwrap();
        assert_eq!(
            from_json(&after, "reg.example.com", path)
                .unwrap()
                .as_deref(),
            Some("t1")
        );
        assert_eq!(
            from_json(&after, "app.terraform.io", path)
                .unwrap()
                .as_deref(),
            Some("tfc")
        );
        assert!(after.contains("\"other\": 1"), "{after}");
        let again = with_token(Some(&after), "reg.example.com", "t2", path).unwrap();
        assert_eq!(
            from_json(&again, "reg.example.com", path)
                .unwrap()
                .as_deref(),
            Some("t2")
        );
        assert_eq!(
            from_json(
                &with_token(None, "h.example.com", "t", path).unwrap(),
                "h.example.com",
                path
            )
            .unwrap()
            .as_deref(),
            Some("t")
        );
        assert!(with_token(Some("[1]"), "h", "t", path).is_err());
    }
}
