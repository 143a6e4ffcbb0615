//! Git's smart-HTTP protocol v2 and pack format, read by hand
//! (tests/cache/plan.md §4): the pure half of fetching one commit's tree
//! without a `git` binary. The I/O is `tfreg-cache`'s.
//!
//! - [`pktline`]: pkt-lines, the v2 capability advertisement, `ls-refs`
//!   output and the fetch response (side-band demultiplexed).
//! - [`pack`]: a pack read whole: every object inflated, deltas applied,
//!   hashed with collision detection, the trailer checked; all bounded.
//! - [`tree`]: a commit's tree walked into files, the commit's id checked
//!   against the one wanted so that every byte is bound to it.

pub mod pack;
pub mod pktline;
pub mod tree;

use std::fmt;

pub use pack::{Kind, Object, Pack, PackError, read_pack};
pub use pktline::{
    Advertisement, FetchResponse, PktError, RemoteRef, fetch_request, ls_refs_request,
    parse_advertisement, parse_fetch_response, parse_ls_refs,
};
pub use tree::{TreeEntry, WalkError, walk};

/// A SHA-1 object id.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectId(pub [u8; 20]);

impl ObjectId {
    /// 40 hex digits (either case), nothing else.
    pub fn from_hex(s: &str) -> Option<Self> {
        if s.len() != 40 {
            return None;
        }
        let mut id = [0u8; 20];
        hex::decode_to_slice(s, &mut id).ok()?;
        Some(Self(id))
    }

    pub fn from_bytes(b: &[u8]) -> Option<Self> {
        Some(Self(b.try_into().ok()?))
    }

    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }
}

impl fmt::Display for ObjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl fmt::Debug for ObjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ObjectId({})", self.to_hex())
    }
}

#[cfg(test)]
mod tests;
