//! Property tests (proptest) of every parser that reads untrusted input: the
//! router, addresses and versions, blob keys, release files, OpenPGP keys and
//! signatures, module and provider archives. Each proves, over generated and
//! mutated inputs, that the parser never panics, answers only with its typed
//! error, and stays within bounded memory and work; valid generated values
//! also round-trip through their printed form.
//!
//! proptest rather than cargo-fuzz: these run in the ordinary `cargo test`
//! (no nightly, no separate fuzz harness or corpus), with a bounded number of
//! cases per property so CI time is fixed, and a failure shrinks to a minimal
//! input that is then kept as a plain unit test next to the fix. For a deeper
//! run by hand: `PROPTEST_CASES=20000 cargo test -p tfreg-testkit --test
//! properties`.
//!
//! Helpers shared by the families: [`config`] (bounded cases, no regression
//! files written), [`mutations`] and [`in_place_mutations`] with [`mutate`]
//! (bit flips, overwritten, inserted and removed bytes, truncations of a valid
//! input), [`tfreg_testkit::alloc::peak_bytes`] (the most heap held at once during one call
//! on this thread) and [`tfreg_testkit::panics::caught`] (whether a panic was raised, even one
//! a guard caught).

mod blob_key;
mod module_archive;
mod names;
mod provider_zip;
mod release_files;
mod router;
mod signing;

use proptest::prelude::*;
use proptest::test_runner::Config;

/// A bounded run of `cases` cases (or `PROPTEST_CASES`, for a deeper run by
/// hand) that writes no regression files into the repository: a case that
/// fails becomes a unit test next to the fix instead.
pub(crate) fn config(cases: u32) -> Config {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(cases);
    Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    }
}

/// One change to a valid input; positions are taken modulo the input's length.
#[derive(Debug, Clone)]
pub(crate) enum Mutation {
    /// Flip one bit of one byte.
    Flip(usize, u8),
    /// Overwrite one byte.
    Set(usize, u8),
    /// Insert bytes before a position.
    Insert(usize, Vec<u8>),
    /// Remove up to this many bytes from a position.
    Remove(usize, usize),
    /// Cut the input at a position.
    Truncate(usize),
}

/// One to eight changes, applied in order.
pub(crate) fn mutations() -> impl Strategy<Value = Vec<Mutation>> {
    let one = prop_oneof![
        4 => (any::<usize>(), 0..8u8).prop_map(|(i, bit)| Mutation::Flip(i, bit)),
        2 => (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Set(i, b)),
        1 => (any::<usize>(), prop::collection::vec(any::<u8>(), 1..32))
            .prop_map(|(i, bytes)| Mutation::Insert(i, bytes)),
        1 => (any::<usize>(), 1..64usize).prop_map(|(i, n)| Mutation::Remove(i, n)),
        1 => any::<usize>().prop_map(Mutation::Truncate),
    ];
    prop::collection::vec(one, 1..=8)
}

/// One to eight bit flips or overwritten bytes: the length stays, so framing
/// (packet lengths, offsets) still holds and the change reaches what is inside.
pub(crate) fn in_place_mutations() -> impl Strategy<Value = Vec<Mutation>> {
    let one = prop_oneof![
        (any::<usize>(), 0..8u8).prop_map(|(i, bit)| Mutation::Flip(i, bit)),
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Set(i, b)),
    ];
    prop::collection::vec(one, 1..=8)
}

/// `base` with `changes` applied.
pub(crate) fn mutate(base: &[u8], changes: &[Mutation]) -> Vec<u8> {
    let mut out = base.to_vec();
    for change in changes {
        // Inserting and truncating may point just past the end.
        let at = |i: &usize, len: usize| i % len.max(1);
        match change {
            Mutation::Flip(i, bit) if !out.is_empty() => {
                let at = at(i, out.len());
                out[at] ^= 1 << bit;
            }
            Mutation::Set(i, b) if !out.is_empty() => {
                let at = at(i, out.len());
                out[at] = *b;
            }
            Mutation::Insert(i, bytes) => {
                let at = at(i, out.len() + 1);
                out.splice(at..at, bytes.iter().copied());
            }
            Mutation::Remove(i, n) if !out.is_empty() => {
                let at = at(i, out.len());
                let end = (at + n).min(out.len());
                out.drain(at..end);
            }
            Mutation::Truncate(i) => {
                let at = at(i, out.len() + 1);
                out.truncate(at);
            }
            _ => {}
        }
    }
    out
}

#[test]
fn mutations_change_the_input_as_described() {
    let base = b"abcdef";
    assert_eq!(mutate(base, &[Mutation::Flip(0, 0)]), b"`bcdef");
    assert_eq!(mutate(base, &[Mutation::Set(5, b'!')]), b"abcde!");
    assert_eq!(
        mutate(base, &[Mutation::Insert(2, b"XY".to_vec())]),
        b"abXYcdef"
    );
    assert_eq!(mutate(base, &[Mutation::Remove(1, 2)]), b"adef");
    assert_eq!(mutate(base, &[Mutation::Truncate(3)]), b"abc");
    assert_eq!(mutate(b"", &[Mutation::Flip(3, 1)]), b"");
}

#[global_allocator]
static ALLOC: tfreg_testkit::alloc::Counting = tfreg_testkit::alloc::Counting;
