//! What `tfreg serve` prints once it listens: where it is, who may read, and
//! lines to paste into another shell that work from any directory (absolute
//! paths, the `tfreg` binary on `PATH`, a token, Terraform's credentials).
//! Pure: the README's walk-through pastes exactly this (tests/readme).

use std::path::{Path, PathBuf};

/// What the welcome names.
pub struct Welcome<'a> {
    /// What users write in addresses (`HOST[:PORT]`).
    pub host: &'a str,
    pub listen: std::net::SocketAddr,
    /// The development CA to trust, when serving the development certificate.
    pub ca: Option<&'a Path>,
    /// The data directory, absolute.
    pub data_dir: &'a Path,
    pub anonymous_reads: bool,
    /// The directory of the running `tfreg`, when `tfreg` on `PATH` is not it.
    pub bin_dir: Option<&'a Path>,
}

/// The line a user pastes before the lines below it: the heading's text.
pub const PASTE_HEADING: &str =
    "Paste into the shell you run terraform, tofu and tfreg in (works from any directory):";

impl Welcome<'_> {
    pub fn render(&self) -> String {
        let host = self.host;
        let url = format!("https://{host}");
        let mut out = format!("\ntfreg is serving {url}/ (listening on {})\n", self.listen);
        out += &format!("  discovery:  {url}/.well-known/terraform.json\n");
        out += &format!(
            "  web UI:     {url}/ui/home{}\n",
            if self.anonymous_reads {
                ""
            } else {
                " (sign in with a token)"
            }
        );
        out += if self.anonymous_reads {
            "  access:     reads are OPEN to anyone who reaches this port; --private requires a token\n"
        } else {
            "  access:     private: every read needs a token\n"
        };
        let data = self.data_dir;
        let config = data.join("terraform.tfrc");
        out += &format!("\n{PASTE_HEADING}\n\n");
        if let Some(ca) = self.ca {
            out += &format!(
                "export SSL_CERT_FILE={}   # trust tfreg's development CA\n",
                quote(ca)
            );
        }
        if let Some(bin) = self.bin_dir {
            out += &format!("export PATH={}:\"$PATH\"   # this tfreg\n", quote(bin));
        }
        out += &format!(
            "export TFREG_TOKEN=$(tfreg token create --data-dir {} --name me --scope admin)\n",
            quote(data)
        );
        out += &format!(
            "export TF_CLI_CONFIG_FILE={}   # Terraform's CLI configuration in this shell (instead of ~/.terraformrc)\n",
            quote(&config)
        );
        out += &format!(
            "printf 'credentials \"{host}\" {{\\n  token = \"%s\"\\n}}\\n' \"$TFREG_TOKEN\" > \"$TF_CLI_CONFIG_FILE\"\n"
        );
        out += &format!(
            r#"
Then publish, from your project's directory:
  tfreg publish provider ./dist --registry {url} --namespace NS --signing-key key.asc
  tfreg publish module ./my-module --registry {url} --namespace NS --name NAME --system SYSTEM --version 1.0.0
and use them as source = "{host}/NS/TYPE" (providers) and "{host}/NS/NAME/SYSTEM" (modules).
The web UI needs the CA too: import {ca} as an authority in your browser, or accept its warning.
"#,
            ca = self
                .ca
                .map_or_else(|| "your certificate's CA".to_string(), quote),
        );
        out
    }
}

/// The directory of the running executable, unless the first `tfreg` on
/// `PATH` already is it (an installed one).
pub fn bin_dir_unless_on_path() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?.canonicalize().ok()?;
    let on_path = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join("tfreg"))
            .find(|candidate| candidate.is_file())
    });
    match on_path.and_then(|p| p.canonicalize().ok()) {
        Some(found) if found == exe => None,
        _ => exe.parent().map(Path::to_path_buf),
    }
}

/// `path` as one shell word: as it is when it needs no quoting, else in
/// single quotes.
fn quote(path: &Path) -> String {
    let s = path.display().to_string();
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+:@%,=".contains(c));
    if plain {
        s
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn welcome<'a>(data: &'a Path, ca: &'a Path, bin: Option<&'a Path>) -> String {
        Welcome {
            host: "127.0.0.1:8443",
            listen: "127.0.0.1:8443".parse().unwrap(),
            ca: Some(ca),
            data_dir: data,
            anonymous_reads: true,
            bin_dir: bin,
        }
        .render()
    }

    /// The lines under the paste heading, up to the blank line after them.
    fn paste_lines(text: &str) -> Vec<&str> {
        text.lines()
            .skip_while(|l| *l != PASTE_HEADING)
            .skip(2)
            .take_while(|l| !l.is_empty())
            .collect()
    }

    #[test]
    fn the_paste_lines_name_absolute_paths_only() {
        let text = welcome(
            Path::new("/home/me/tfreg/tfreg-data"),
            Path::new("/home/me/tfreg/tfreg-data/tls/ca.pem"),
            Some(Path::new("/home/me/tfreg/target/debug")),
        );
        let lines = paste_lines(&text);
        assert_eq!(lines.len(), 5, "{text}");
        assert!(lines[0].starts_with("export SSL_CERT_FILE=/home/me/tfreg/tfreg-data/tls/ca.pem "));
        assert!(lines[1].starts_with("export PATH=/home/me/tfreg/target/debug:\"$PATH\" "));
        assert!(lines[2].contains("--data-dir /home/me/tfreg/tfreg-data "));
        assert!(
            lines[3]
                .starts_with("export TF_CLI_CONFIG_FILE=/home/me/tfreg/tfreg-data/terraform.tfrc ")
        );
        assert!(lines[4].contains(r#"credentials "127.0.0.1:8443""#));
        for line in &lines {
            assert!(!line.contains(" tfreg-data"), "a relative path: {line}");
        }
    }

    #[test]
    fn an_installed_tfreg_needs_no_path_line() {
        let text = welcome(Path::new("/d"), Path::new("/d/tls/ca.pem"), None);
        assert!(!text.contains("export PATH"), "{text}");
        assert_eq!(paste_lines(&text).len(), 4);
    }

    #[test]
    fn paths_with_spaces_or_quotes_stay_one_shell_word() {
        assert_eq!(quote(Path::new("/a b/c")), "'/a b/c'");
        assert_eq!(quote(Path::new("/it's")), r"'/it'\''s'");
        assert_eq!(quote(Path::new("/plain/path-1.2")), "/plain/path-1.2");
    }
}
