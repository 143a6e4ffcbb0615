//! Real OpenPGP keys and signatures, made by gpg.

use std::path::Path;
use std::process::Command;

use super::command::ok;
use super::tools::Tools;

/// A throwaway GnuPG home with one key.
pub struct Gpg {
    pub home: tempfile::TempDir,
    pub fingerprint: String,
}

impl Gpg {
    /// `algo`: `rsa2048`, `ed25519`, ...
    pub fn new(algo: &str) -> Gpg {
        let home = tempfile::tempdir().unwrap();
        let gpg = Gpg {
            home,
            fingerprint: String::new(),
        };
        let uid = format!("tfreg e2e {algo} <e2e-{algo}@example.com>");
        ok(
            gpg.cmd()
                .args([
                    "--passphrase",
                    "",
                    "--quick-gen-key",
                    &uid,
                    algo,
                    "sign",
                    "never",
                ])
                .output()
                .unwrap(),
            "gpg --quick-gen-key",
        );
        let listing = ok(
            gpg.cmd()
                .args(["--with-colons", "--list-keys"])
                .output()
                .unwrap(),
            "gpg --list-keys",
        );
        let fingerprint = listing
            .lines()
            .find(|l| l.starts_with("fpr:"))
            .and_then(|l| l.split(':').nth(9))
            .unwrap()
            .to_string();
        Gpg { fingerprint, ..gpg }
    }

    fn cmd(&self) -> Command {
        let mut c = Command::new(Tools::get().path("TFREG_GPG"));
        c.arg("--homedir").arg(self.home.path()).args([
            "--batch",
            "--yes",
            "--pinentry-mode",
            "loopback",
        ]);
        c
    }

    /// Export the ASCII-armored public key to `path`.
    pub fn export(&self, path: &Path) {
        let out = self
            .cmd()
            .args(["--armor", "--export", &self.fingerprint])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "gpg --export: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::fs::write(path, out.stdout).unwrap();
    }

    /// Binary detached signature of `file` to `sig`.
    pub fn sign(&self, file: &Path, sig: &Path) {
        ok(
            self.cmd()
                .args([
                    "--passphrase",
                    "",
                    "--local-user",
                    &self.fingerprint,
                    "--output",
                ])
                .arg(sig)
                .arg("--detach-sign")
                .arg(file)
                .output()
                .unwrap(),
            "gpg --detach-sign",
        );
    }
}
