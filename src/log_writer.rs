//! Where `tfreg serve`'s log lines go: formatted on the request's thread,
//! appended to one shared buffer, and written to stderr by one thread that
//! gathers them for a few milliseconds and writes them with one `write(2)`.
//!
//! `tracing-appender`'s non-blocking writer, used before, woke its thread for
//! every line that found it idle: under load on two cores that was one futex
//! wake and two context switches per request, with the thread's spinning and
//! its write of one or two lines, about a sixth of the CPU of a request that
//! reads no store (`perf`, BENCHMARKS.md's serve section). Here the first line
//! into an empty buffer wakes the thread, which waits [`GATHER`] for the
//! lines that follow: under load one wake and one write per few hundred
//! lines; an idle server's line still appears within [`GATHER`], and an idle
//! server's thread sleeps until there is a line.
//!
//! Nothing is dropped: a line that would take the buffer past [`MOST_BYTES`]
//! (stderr stuck) waits for the thread to write. Dropping the [`Guard`]
//! writes what is left and ends the thread.

use std::io::Write;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

/// How long the writing thread gathers lines after the first one.
pub const GATHER: Duration = Duration::from_millis(5);
/// Most bytes waiting to be written before a new line waits for room.
pub const MOST_BYTES: usize = 4 * 1024 * 1024;

#[derive(Default)]
struct State {
    lines: Vec<u8>,
    closing: bool,
}

struct Shared {
    /// Most bytes waiting before a line waits for room ([`MOST_BYTES`]).
    most_bytes: usize,
    state: Mutex<State>,
    /// The writing thread waits here for a first line (or the end).
    line: Condvar,
    /// A line waits here for room.
    room: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A thread that panicked holding the lock left whole lines or none.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Hands the log's formatter a writer into the shared buffer.
#[derive(Clone)]
pub struct Batched {
    shared: Arc<Shared>,
}

/// Writes what is left and ends the writing thread when dropped.
pub struct Guard {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

/// A batched writer of lines into `out`, and the guard that flushes it;
/// an error if its thread cannot start.
pub fn start(
    out: impl Write + Send + 'static,
    most_bytes: usize,
) -> std::io::Result<(Batched, Guard)> {
    let shared = Arc::new(Shared {
        most_bytes,
        state: Mutex::default(),
        line: Condvar::new(),
        room: Condvar::new(),
    });
    let writer = shared.clone();
    let thread = std::thread::Builder::new()
        .name("tfreg-log".into())
        .spawn(move || write_batches(&writer, out))?;
    let guard = Guard {
        shared: shared.clone(),
        thread: Some(thread),
    };
    Ok((Batched { shared }, guard))
}

fn write_batches(shared: &Shared, mut out: impl Write) {
    let mut batch = Vec::new();
    loop {
        let mut state = shared.lock();
        while state.lines.is_empty() && !state.closing {
            state = shared.line.wait(state).unwrap_or_else(|e| e.into_inner());
        }
        if state.lines.is_empty() {
            return; // closing, and all written
        }
        if !state.closing && state.lines.len() < shared.most_bytes {
            drop(state);
            std::thread::sleep(GATHER);
            state = shared.lock();
        }
        // The emptied buffer of the last batch takes the lines' place.
        std::mem::swap(&mut batch, &mut state.lines);
        drop(state);
        shared.room.notify_all();
        // stderr closed or full: the lines are lost, the server goes on.
        let _ = out.write_all(&batch).and_then(|()| out.flush());
        batch.clear();
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.shared.lock().closing = true;
        self.shared.line.notify_all();
        self.shared.room.notify_all();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// One event's line (the formatter writes it whole).
pub struct Line<'a> {
    shared: &'a Shared,
}

impl Write for Line<'_> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        let mut state = self.shared.lock();
        while !state.lines.is_empty() && state.lines.len() + bytes.len() > self.shared.most_bytes {
            if state.closing {
                break;
            }
            state = self
                .shared
                .room
                .wait(state)
                .unwrap_or_else(|e| e.into_inner());
        }
        let first = state.lines.is_empty();
        state.lines.extend_from_slice(bytes);
        drop(state);
        if first {
            self.shared.line.notify_one();
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Batched {
    type Writer = Line<'a>;

    fn make_writer(&'a self) -> Self::Writer {
        Line {
            shared: &self.shared,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An output that keeps what it was given, and how many writes.
    #[derive(Clone, Default)]
    struct Kept(Arc<Mutex<(Vec<u8>, usize)>>);

    impl Write for Kept {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            let mut kept = self.0.lock().unwrap();
            kept.0.extend_from_slice(bytes);
            kept.1 += 1;
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn line(batched: &Batched, text: &str) {
        use tracing_subscriber::fmt::MakeWriter;
        batched.make_writer().write_all(text.as_bytes()).unwrap();
    }

    #[test]
    fn every_line_is_written_in_order_and_gathered_into_few_writes() {
        let out = Kept::default();
        let (batched, guard) = start(out.clone(), MOST_BYTES).unwrap();
        let expected: String = (0..2000).map(|i| format!("line {i}\n")).collect();
        for i in 0..2000 {
            line(&batched, &format!("line {i}\n"));
        }
        drop(guard);
        let kept = out.0.lock().unwrap();
        assert_eq!(String::from_utf8_lossy(&kept.0), expected);
        // 2,000 lines in well under GATHER: a few writes, not 2,000.
        assert!(kept.1 <= 20, "{} writes", kept.1);
    }

    #[test]
    fn a_line_into_an_idle_log_is_written_without_waiting_for_more() {
        let out = Kept::default();
        let (batched, _guard) = start(out.clone(), MOST_BYTES).unwrap();
        line(&batched, "alone\n");
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while out.0.lock().unwrap().0.is_empty() {
            assert!(std::time::Instant::now() < deadline, "never written");
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(out.0.lock().unwrap().0, b"alone\n");
    }

    #[test]
    fn lines_from_many_threads_stay_whole_when_the_buffer_is_full() {
        /// Slow: the buffer fills and lines wait for room.
        #[derive(Clone, Default)]
        struct Slow(Kept);
        impl Write for Slow {
            fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
                std::thread::sleep(Duration::from_millis(1));
                self.0.write(bytes)
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let out = Slow::default();
        // Room for a few lines only.
        let (batched, guard) = start(out.clone(), 64).unwrap();
        std::thread::scope(|s| {
            for t in 0..4 {
                let batched = batched.clone();
                s.spawn(move || {
                    for i in 0..200 {
                        line(&batched, &format!("thread {t} line {i}\n"));
                    }
                });
            }
        });
        drop(guard);
        let kept = out.0.0.lock().unwrap();
        let text = String::from_utf8_lossy(&kept.0);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 800);
        for t in 0..4 {
            let mine: Vec<&str> = lines
                .iter()
                .copied()
                .filter(|l| l.starts_with(&format!("thread {t} ")))
                .collect();
            let expected: Vec<String> = (0..200).map(|i| format!("thread {t} line {i}")).collect();
            assert_eq!(mine, expected);
        }
    }
}
