//! A reader's shells: a session whose variables carry from one pasted block
//! to the next (as in one terminal), and a long-running command in a
//! terminal of its own, stopped with Ctrl-C.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// One terminal: commands run in `cwd`, and what a block exports or sets
/// is there for the next block.
pub struct Session {
    state: PathBuf,
    pub cwd: PathBuf,
    name: String,
}

impl Session {
    /// A new terminal with exactly `env`, in `cwd`; `dir` keeps its files.
    pub fn new(name: &str, dir: &Path, cwd: &Path, env: &[(String, String)]) -> Session {
        let state = dir.join(format!("{name}.env"));
        let mut text = String::new();
        for (k, v) in env {
            text += &format!("export {k}={}\n", quote(v));
        }
        std::fs::write(&state, text).unwrap();
        Session {
            state,
            cwd: cwd.to_path_buf(),
            name: name.to_string(),
        }
    }

    /// Run `script` as pasted (bash, stopping at the first failing
    /// command); its output. A failure fails the test with the output.
    pub fn run(&self, script: &str) -> String {
        let (ok, output) = self.try_run(script);
        assert!(
            ok,
            "[{}] in {}:\n{script}\nfailed:\n{output}",
            self.name,
            self.cwd.display()
        );
        output
    }

    /// [`Session::run`] that reports a failure instead.
    pub fn try_run(&self, script: &str) -> (bool, String) {
        let state = self.state.display();
        // Variables a block sets are kept (allexport) as a terminal keeps
        // them; the state is written back only when every command succeeded.
        let wrapped = format!(
            "set -euo pipefail\nsource {state}\nset -a\ncd {cwd}\n{script}\nexport -p > {state}.new && mv {state}.new {state}\n",
            cwd = quote(&self.cwd.display().to_string()),
        );
        let out = Command::new("/bin/bash")
            .arg("-c")
            .arg(&wrapped)
            .env_clear()
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        eprintln!("[{}] $ {}\n{text}", self.name, script.trim_end());
        (out.status.success(), text)
    }

    /// A variable of the session, as `echo "$NAME"` prints it.
    pub fn var(&self, name: &str) -> String {
        let out = Command::new("/bin/bash")
            .arg("-c")
            .arg(format!(
                "source {}; printf %s \"${{{name}:-}}\"",
                self.state.display()
            ))
            .env_clear()
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The session's variables as (name, value), for a terminal beside it.
    pub fn env(&self) -> Vec<(String, String)> {
        let out = Command::new("/bin/bash")
            .arg("-c")
            .arg(format!("source {}; env -0", self.state.display()))
            .env_clear()
            .output()
            .unwrap();
        out.stdout
            .split(|b| *b == 0)
            .filter_map(|kv| {
                let kv = String::from_utf8_lossy(kv);
                let (k, v) = kv.split_once('=')?;
                (!matches!(k, "PWD" | "OLDPWD" | "SHLVL" | "_"))
                    .then(|| (k.to_string(), v.to_string()))
            })
            .collect()
    }
}

/// A command left running in a terminal of its own (its own process
/// group, as a shell's job), its output kept in a file.
pub struct Background {
    child: Option<Child>,
    log: PathBuf,
    what: String,
}

impl Background {
    pub fn start(
        what: &str,
        script: &str,
        cwd: &Path,
        env: &[(String, String)],
        log: &Path,
    ) -> Background {
        let file = std::fs::File::create(log).unwrap();
        let child = Command::new("/bin/bash")
            .arg("-c")
            .arg(script)
            .current_dir(cwd)
            .env_clear()
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .process_group(0)
            .spawn()
            .unwrap();
        eprintln!("[{what}] started in {}: {script}", cwd.display());
        Background {
            child: Some(child),
            log: log.to_path_buf(),
            what: what.to_string(),
        }
    }

    pub fn output(&self) -> String {
        let mut text = String::new();
        if let Ok(mut f) = std::fs::File::open(&self.log) {
            let _ = f.read_to_string(&mut text);
        }
        text
    }

    /// Wait until its output satisfies `ready`; fails the test if it exits
    /// first or `timeout` passes.
    pub fn wait_for(&mut self, timeout: Duration, ready: impl Fn(&str) -> bool) -> String {
        let started = Instant::now();
        loop {
            let text = self.output();
            if ready(&text) {
                eprintln!(
                    "[{}] ready after {:.0} s",
                    self.what,
                    started.elapsed().as_secs_f64()
                );
                return text;
            }
            let child = self.child.as_mut().unwrap();
            if let Some(status) = child.try_wait().unwrap() {
                panic!(
                    "[{}] exited ({status}) before it was ready:\n{}",
                    self.what,
                    tail(&text)
                );
            }
            assert!(
                started.elapsed() < timeout,
                "[{}] not ready after {timeout:?}:\n{}",
                self.what,
                tail(&text)
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// Ctrl-C: SIGINT to its process group; how it ended (fails the test if
    /// it is still running after `timeout`).
    pub fn interrupt(mut self, timeout: Duration) -> ExitStatus {
        let mut child = self.child.take().unwrap();
        signal_group(&child, libc::SIGINT);
        let started = Instant::now();
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                eprintln!("[{}] stopped by Ctrl-C: {status}", self.what);
                return status;
            }
            if started.elapsed() > timeout {
                signal_group(&child, libc::SIGKILL);
                let _ = child.wait();
                panic!(
                    "[{}] still running {timeout:?} after Ctrl-C:\n{}",
                    self.what,
                    tail(&self.output())
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            signal_group(&child, libc::SIGINT);
            std::thread::sleep(Duration::from_secs(2));
            signal_group(&child, libc::SIGKILL);
            let _ = child.wait();
        }
    }
}

fn signal_group(child: &Child, signal: i32) {
    let pgid = child.id() as i32;
    // SAFETY: kill(2) on the process group this test created; no memory involved.
    unsafe {
        libc::kill(-pgid, signal);
    }
}

fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(60)..].join("\n")
}

/// `s` as one shell word.
pub fn quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+:@%,=".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// The lines a program printed under a line starting with `heading`, up to
/// the first blank line after them.
pub fn printed_under(output: &str, heading: &str) -> Vec<String> {
    let lines: Vec<&str> = output.lines().collect();
    let Some(at) = lines.iter().rposition(|l| l.starts_with(heading)) else {
        return Vec::new();
    };
    lines[at + 1..]
        .iter()
        .skip_while(|l| l.trim().is_empty())
        .take_while(|l| !l.trim().is_empty())
        .map(|l| l.to_string())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printed_lines_under_a_heading() {
        let out = "log line\nPaste into the shell:\n\nexport A=1\nexport B=2\n\nThen publish:\n  tfreg x\n";
        assert_eq!(
            printed_under(out, "Paste into"),
            ["export A=1", "export B=2"]
        );
        assert_eq!(printed_under(out, "Then publish"), ["  tfreg x"]);
        assert!(printed_under(out, "Nothing").is_empty());
    }

    #[test]
    fn a_session_keeps_what_a_block_sets_and_stops_at_a_failure() {
        let dir = tempfile::tempdir().unwrap();
        let s = Session::new(
            "t",
            dir.path(),
            dir.path(),
            &[
                ("PATH".into(), "/usr/bin:/bin".into()),
                ("X".into(), "a b".into()),
            ],
        );
        s.run("export Y=\"$X!\"\nZ=plain");
        assert_eq!(s.var("Y"), "a b!");
        assert_eq!(s.var("Z"), "plain");
        let (ok, _) = s.try_run("false\nexport Y=lost");
        assert!(!ok);
        assert_eq!(s.var("Y"), "a b!", "a failed block changes nothing");
        assert!(s.env().contains(&("Z".to_string(), "plain".to_string())));
    }
}
