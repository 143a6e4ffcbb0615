//! A command killed with SIGKILL in the middle of its work, again and
//! again, each time a little later, until a run ends by itself: what `tfreg
//! gc`, `tfreg import` and `tfreg sync` must survive (issue 39). No hook in
//! the command: the moments are wall-clock waits from 40 ms, growing by half.

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// What the kills did: the waits after which the command was killed, and
/// the output of the run that ended by itself.
pub struct Killed {
    pub kills: Vec<Duration>,
    pub output: Output,
}

/// Run `command()` until a run ends before it is killed; after each kill,
/// `after_kill(wait)` (the test's checks of what the killed run left).
pub async fn until_done<F: std::future::Future<Output = ()>>(
    command: impl Fn() -> Command,
    mut after_kill: impl FnMut(Duration) -> F,
) -> Killed {
    let mut kills = Vec::new();
    let mut wait = Duration::from_millis(40);
    loop {
        let mut child = command()
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn the command");
        let ended = tokio::task::block_in_place(|| {
            let until = Instant::now() + wait;
            while Instant::now() < until {
                if child.try_wait().expect("wait").is_some() {
                    return true;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            false
        });
        if ended {
            let output = child.wait_with_output().expect("its output");
            return Killed { kills, output };
        }
        child.kill().expect("SIGKILL");
        child.wait().expect("reap");
        kills.push(wait);
        after_kill(wait).await;
        wait = wait * 3 / 2;
        assert!(kills.len() < 40, "the command never ended in {wait:?}");
    }
}

/// Its stdout and stderr, for messages.
pub fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Run `command()` and kill it with SIGKILL as soon as `now()` (polled
/// again and again) says so: `true` if it was killed, `false` if it
/// ended first. For a moment a wall clock cannot aim at (amid one stage of
/// a fast run), seen in the stores.
pub async fn when<F: std::future::Future<Output = bool>>(
    command: impl Fn() -> Command,
    now: impl Fn() -> F,
) -> bool {
    let mut child = command()
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the command");
    loop {
        if child.try_wait().expect("wait").is_some() {
            return false;
        }
        if now().await {
            child.kill().expect("SIGKILL");
            child.wait().expect("reap");
            return true;
        }
        tokio::task::yield_now().await;
    }
}
