//! What every benchmark needs: the tools it runs, ports, medians.

use std::path::PathBuf;

pub type Error = Box<dyn std::error::Error>;

/// The path an environment variable names (`.tools/env` exports them): a
/// missing tool is an error, never a benchmark skipped.
pub fn require_env(name: &str) -> Result<PathBuf, Error> {
    std::env::var_os(name)
        .map(PathBuf::from)
        .ok_or_else(|| format!("{name} is not set: run `.ci/install-tools` and `source .tools/env` (scripts/bench does both)").into())
}

/// A binary built beside this one (`cargo build --release` puts every binary
/// of the workspace in one directory).
pub fn sibling_binary(name: &str) -> Result<PathBuf, Error> {
    let exe = std::env::current_exe()?;
    let path = exe.with_file_name(name);
    if !path.exists() {
        return Err(format!(
            "{} not found: build it with the same profile (scripts/bench builds every binary first)",
            path.display()
        )
        .into());
    }
    Ok(path)
}

/// A loopback port nothing listens on now.
pub fn free_port() -> Result<u16, Error> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// A loopback port `p` such that `p` .. `p + count` are free now, below the
/// kernel's ephemeral range (where outgoing connections take ports):
/// `cargo lambda watch --tls-*` serves on `p`, its runtime API on `p + 1`,
/// and scripts/lambda-local --cloudfront its CloudFront stand-in on `p + 2`.
pub fn free_ports(count: u16) -> Result<u16, Error> {
    let low: u16 = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(32768);
    let start = 20000 + (std::process::id() % 2000) as u16 * 4;
    (start..low.saturating_sub(count))
        .step_by(4)
        .find(|p| (0..count).all(|i| std::net::TcpListener::bind(("127.0.0.1", p + i)).is_ok()))
        .ok_or_else(|| format!("no {count} adjacent free ports below the ephemeral range").into())
}

/// The median (the mean of the middle two for an even count); 0 when empty.
pub fn median(values: &[f64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    if sorted.len().is_multiple_of(2) {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    } else {
        sorted[mid]
    }
}

/// Whether this process runs as root (nginx then needs `user root;` to read
/// files in private temporary directories).
pub fn running_as_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|l| l.split_whitespace().nth(1).map(|uid| uid == "0"))
        })
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(median(&[]), 0.0);
    }
}
