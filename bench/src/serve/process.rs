//! What a server process used over a run: CPU time (`/proc/<pid>/stat`, its
//! children's too: nginx's workers), the most threads seen, and the bytes its
//! log grew by.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::Error;

pub struct Watched {
    pid: u32,
    log: PathBuf,
}

#[derive(Debug, Clone, Copy)]
pub struct Usage {
    pub cpu_us: f64,
    pub log_bytes: u64,
    pub max_threads: usize,
}

/// The process and its children.
fn family(pid: u32) -> Vec<u32> {
    let children =
        std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
    std::iter::once(pid)
        .chain(children.split_whitespace().filter_map(|c| c.parse().ok()))
        .collect()
}

/// User + system time of `pid`, in clock ticks (`utime`, `stime`: the 14th
/// and 15th fields, counted after the parenthesised name).
fn ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let at = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    at(11) + at(12)
}

fn threads(pid: u32) -> usize {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("Threads:")?.trim().parse().ok())
        .unwrap_or(0)
}

fn cpu_us(pid: u32) -> f64 {
    // SAFETY: sysconf only reads a constant of the system.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    family(pid).into_iter().map(ticks).sum::<u64>() as f64 * 1e6 / hz
}

impl Watched {
    pub fn new(pid: u32, log: PathBuf) -> Self {
        Self { pid, log }
    }

    fn log_size(&self) -> u64 {
        std::fs::metadata(&self.log).map(|m| m.len()).unwrap_or(0)
    }

    /// Run `f` (the load), sampling the threads meanwhile.
    pub fn measure<T>(&self, f: impl FnOnce() -> Result<T, Error>) -> Result<(T, Usage), Error> {
        let (cpu, log) = (cpu_us(self.pid), self.log_size());
        let done = AtomicBool::new(false);
        let (result, max_threads) = std::thread::scope(|s| {
            let sampler = s.spawn(|| {
                let mut most = 0;
                while !done.load(Ordering::Relaxed) {
                    most = most.max(family(self.pid).into_iter().map(threads).sum());
                    std::thread::sleep(Duration::from_millis(50));
                }
                most
            });
            let result = f();
            done.store(true, Ordering::Relaxed);
            (result, sampler.join().unwrap_or(0))
        });
        let usage = Usage {
            cpu_us: cpu_us(self.pid) - cpu,
            log_bytes: self.log_size() - log,
            max_threads,
        };
        Ok((result?, usage))
    }
}
