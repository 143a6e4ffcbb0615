//! A counting global allocator for test binaries, to prove bounded memory:
//! it forwards every call to the system allocator (what Rust uses anyway)
//! and, only on a thread inside [`peak_bytes`], adds up the bytes allocated
//! minus the bytes freed. Other threads and other tests are not affected
//! beyond one thread-local read per allocation.
//!
//! A test binary installs it itself (never a library: the benchmarks must
//! not pay for it):
//!
//! ```ignore
//! #[global_allocator]
//! static ALLOC: tfreg_testkit::alloc::Counting = tfreg_testkit::alloc::Counting;
//! ```

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

#[derive(Clone, Copy)]
struct Tally {
    on: bool,
    /// Bytes allocated minus bytes freed since measuring began (negative when
    /// memory from before is freed).
    live: isize,
    peak: isize,
}

thread_local! {
    // Const-initialised and without destructor: reading it never allocates.
    static TALLY: Cell<Tally> = const { Cell::new(Tally { on: false, live: 0, peak: 0 }) };
}

fn note(delta: isize) {
    let _ = TALLY.try_with(|t| {
        let mut tally = t.get();
        if tally.on {
            tally.live += delta;
            tally.peak = tally.peak.max(tally.live);
            t.set(tally);
        }
    });
}

/// The counting allocator.
pub struct Counting;

// SAFETY: every call is forwarded unchanged to `System`; the tally is
// bookkeeping on the side.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract is passed on.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            note(layout.size() as isize);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract is passed on.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            note(layout.size() as isize);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract is passed on.
        unsafe { System.dealloc(ptr, layout) };
        note(-(layout.size() as isize));
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract is passed on.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            note(new_size as isize - layout.size() as isize);
        }
        p
    }
}

/// Stops measuring when dropped, also when `f` panics.
struct Measuring;

impl Drop for Measuring {
    fn drop(&mut self) {
        TALLY.with(|t| {
            t.set(Tally {
                on: false,
                ..t.get()
            })
        });
    }
}

/// Run `f` and return its result with the largest number of heap bytes it held
/// at once on this thread (allocated during the call and not yet freed).
/// Panics unless [`Counting`] is the binary's global allocator: a peak of
/// zero must never pass for "bounded".
pub fn peak_bytes<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let ((), probe) = measure(|| drop(std::hint::black_box(vec![0u8; 4096])));
    assert!(
        probe >= 4096,
        "the counting allocator is not installed: declare #[global_allocator] static A: tfreg_testkit::alloc::Counting"
    );
    measure(f)
}

fn measure<T>(f: impl FnOnce() -> T) -> (T, usize) {
    TALLY.with(|t| {
        assert!(!t.get().on, "peak_bytes does not nest");
        t.set(Tally {
            on: true,
            live: 0,
            peak: 0,
        });
    });
    let guard = Measuring;
    let out = f();
    drop(guard);
    let peak = TALLY.with(|t| t.get().peak);
    (out, peak.max(0) as usize)
}

/// One MiB, for limits.
pub const MIB: usize = 1024 * 1024;

#[cfg(test)]
#[test]
fn the_peak_counts_what_is_held_at_once_on_this_thread() {
    let (_, peak) = peak_bytes(|| {
        let a = vec![1u8; 3 * MIB];
        drop(a);
        let b = vec![1u8; 2 * MIB];
        std::hint::black_box(b).len()
    });
    assert!((3 * MIB..4 * MIB).contains(&peak), "{peak}");
    // Another thread's allocations are not counted.
    let (_, peak) = peak_bytes(|| {
        std::thread::scope(|s| {
            s.spawn(|| std::hint::black_box(vec![1u8; 8 * MIB]).len())
                .join()
        })
    });
    assert!(peak < MIB, "{peak}");
    // Growing a vector counts its final capacity once.
    let (_, peak) = peak_bytes(|| {
        let mut v = Vec::new();
        for i in 0..(5 * MIB) {
            v.push(i as u8);
        }
        std::hint::black_box(v).len()
    });
    assert!((5 * MIB..9 * MIB).contains(&peak), "{peak}");
}
