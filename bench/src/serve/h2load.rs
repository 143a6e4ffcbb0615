//! One h2load run (`$TFREG_H2LOAD`): HTTP/2 over TLS, one request in flight
//! per connection; req/s from its summary, p99 from its per-request log.

use std::path::PathBuf;
use std::process::Command;

use super::Error;

pub struct Run<'a> {
    pub url: String,
    pub method: &'a str,
    pub token: &'a str,
    pub requests: usize,
    pub clients: usize,
    pub log: PathBuf,
}

#[derive(Debug, Clone)]
pub struct Outcome {
    pub requests: usize,
    pub req_per_s: f64,
    pub p99_ms: f64,
}

/// The `N req/s` of h2load's `finished in ...` line.
fn req_per_s(stdout: &str) -> Option<f64> {
    let line = stdout.lines().find(|l| l.starts_with("finished in"))?;
    let at = line.find(" req/s")?;
    line[..at].rsplit(' ').next()?.parse().ok()
}

/// `succeeded` and `failed` of h2load's `requests:` line.
fn succeeded_failed(stdout: &str) -> Option<(usize, usize)> {
    let line = stdout.lines().find(|l| l.starts_with("requests:"))?;
    let count = |what: &str| {
        line.split(',')
            .find(|part| part.trim().ends_with(what))?
            .split_whitespace()
            .find_map(|w| w.trim_start_matches("requests:").parse().ok())
    };
    Some((count("succeeded")?, count("failed")?))
}

/// The 99th percentile (ms) of the latencies (µs, third column) of h2load's log.
fn p99_ms(log: &str) -> Option<f64> {
    let mut us: Vec<f64> = log
        .lines()
        .filter_map(|l| l.split('\t').nth(2)?.trim().parse().ok())
        .collect();
    if us.is_empty() {
        return None;
    }
    us.sort_by(f64::total_cmp);
    let at = ((us.len() as f64 * 0.99).ceil() as usize).clamp(1, us.len()) - 1;
    Some(us[at] / 1000.0)
}

impl Run<'_> {
    pub fn go(&self) -> Result<Outcome, Error> {
        // h2load appends to its log: start each run with an empty one.
        let _ = std::fs::remove_file(&self.log);
        let h2load = std::env::var("TFREG_H2LOAD").unwrap_or_else(|_| "h2load".into());
        let mut cmd = Command::new(h2load);
        cmd.args(["-n", &self.requests.to_string()])
            .args(["-c", &self.clients.to_string(), "-m", "1", "-t", "1"])
            .arg("--log-file")
            .arg(&self.log)
            .args(["-H", &format!("authorization: Bearer {}", self.token)]);
        if self.method != "GET" {
            cmd.args(["-H", &format!(":method: {}", self.method)]);
        }
        let out = cmd.arg(&self.url).output()?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        let fail = |why: &str| format!("h2load {} {}: {why}\n{stdout}", self.method, self.url);
        if !out.status.success() {
            return Err(fail(&format!("{}", out.status)).into());
        }
        let (succeeded, failed) =
            succeeded_failed(&stdout).ok_or_else(|| fail("no requests line"))?;
        if failed > 0 || succeeded != self.requests {
            return Err(fail("requests failed").into());
        }
        let log = std::fs::read_to_string(&self.log)?;
        Ok(Outcome {
            requests: succeeded,
            req_per_s: req_per_s(&stdout).ok_or_else(|| fail("no req/s"))?,
            p99_ms: p99_ms(&log).ok_or_else(|| fail("an empty log"))?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn h2load_output_is_read() {
        let out = "finished in 1.02s, 9803.92 req/s, 2.10MB/s\n\
                   requests: 10000 total, 10000 started, 10000 done, 9990 succeeded, 10 failed, 0 errored, 0 timeout\n";
        assert_eq!(req_per_s(out), Some(9803.92));
        assert_eq!(succeeded_failed(out), Some((9990, 10)));
        let log: String = (1..=100)
            .map(|i| format!("1\t200\t{}\n", i * 1000))
            .collect();
        assert_eq!(p99_ms(&log), Some(99.0));
        assert_eq!(p99_ms(""), None);
    }
}
