//! A git pack (gitformat-pack), read whole from memory: `PACK`, version 2,
//! every object inflated and bounded, OFS_DELTA and REF_DELTA applied with
//! a bounded chain depth and result size, each object's id computed with
//! SHA-1 collision detection, and the pack's trailing SHA-1 checked. No
//! input can make it panic, allocate past its bounds or loop forever.

use std::collections::HashMap;
use std::sync::Arc;

use flate2::{Decompress, FlushDecompress, Status};
use sha1_checked::{Digest, Sha1};

use super::ObjectId;

/// Most objects one pack may hold.
pub const MAX_OBJECTS: u32 = 500_000;
/// Most bytes all objects of one pack may unpack to, deltas and their
/// results included.
pub const MAX_UNPACKED: u64 = 1024 * 1024 * 1024;
/// Largest single object (a delta's result included).
pub const MAX_OBJECT: u64 = 512 * 1024 * 1024;
/// Longest delta chain (git's own limit for `--depth`).
pub const MAX_DELTA_DEPTH: usize = 4095;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PackError {
    #[error("not a pack: {0}")]
    NotPack(&'static str),
    #[error("pack version {0} is not 2")]
    Version(u32),
    #[error("more than {MAX_OBJECTS} objects")]
    TooManyObjects,
    #[error("more than {MAX_UNPACKED} bytes unpacked")]
    TooBig,
    #[error("the pack is cut short")]
    Truncated,
    #[error("object at {offset}: {reason}")]
    Corrupt { offset: usize, reason: String },
    #[error("data between the last object and the trailer")]
    Trailing,
    #[error("the pack's checksum is wrong")]
    Checksum,
    #[error("object {0} is a SHA-1 collision attack")]
    Collision(String),
    #[error("a delta's base {0} is not in the pack")]
    MissingBase(String),
    #[error("a delta chain longer than {MAX_DELTA_DEPTH}")]
    TooDeep,
    #[error("object {0} appears twice with different content")]
    Duplicate(String),
}

/// An object's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Commit,
    Tree,
    Blob,
    Tag,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Commit => "commit",
            Kind::Tree => "tree",
            Kind::Blob => "blob",
            Kind::Tag => "tag",
        }
    }
}

/// One object of a pack, its id checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Object {
    pub kind: Kind,
    pub data: Arc<Vec<u8>>,
}

/// A pack's objects by id.
#[derive(Debug, Default)]
pub struct Pack {
    objects: HashMap<ObjectId, Object>,
}

impl Pack {
    pub fn get(&self, id: &ObjectId) -> Option<&Object> {
        self.objects.get(id)
    }

    pub fn len(&self) -> usize {
        self.objects.len()
    }

    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }
}

/// An object's id: SHA-1 of `<type> <len>\0<data>`.
pub fn object_id(kind: Kind, data: &[u8]) -> Result<ObjectId, PackError> {
    let mut h = Sha1::new();
    h.update(format!("{} {}\0", kind.name(), data.len()).as_bytes());
    h.update(data);
    let result = h.try_finalize();
    let id = ObjectId(result.hash().as_slice().try_into().unwrap_or([0; 20]));
    if result.has_collision() {
        return Err(PackError::Collision(id.to_hex()));
    }
    Ok(id)
}

enum Stored {
    Whole(Kind),
    /// Offset of the base in the pack.
    Ofs(usize),
    Ref(ObjectId),
}

struct Entry {
    offset: usize,
    stored: Stored,
    data: Vec<u8>,
}

/// Read a whole pack.
pub fn read_pack(bytes: &[u8]) -> Result<Pack, PackError> {
    let body_len = bytes.len().checked_sub(20).ok_or(PackError::Truncated)?;
    let (body, trailer) = bytes.split_at(body_len);
    let header = body.get(..12).ok_or(PackError::Truncated)?;
    if &header[..4] != b"PACK" {
        return Err(PackError::NotPack("no PACK signature"));
    }
    let word =
        |i: usize| u32::from_be_bytes([header[i], header[i + 1], header[i + 2], header[i + 3]]);
    if word(4) != 2 {
        return Err(PackError::Version(word(4)));
    }
    let count = word(8);
    if count > MAX_OBJECTS {
        return Err(PackError::TooManyObjects);
    }
    let sum = Sha1::try_digest(body);
    if sum.has_collision() || sum.hash().as_slice() != trailer {
        return Err(PackError::Checksum);
    }

    let mut budget = Budget(MAX_UNPACKED);
    let mut entries: Vec<Entry> = Vec::new();
    let mut by_offset: HashMap<usize, usize> = HashMap::new();
    let mut pos = 12;
    let mut z = Decompress::new(true);
    for _ in 0..count {
        let offset = pos;
        let (entry, next) = read_entry(body, pos, &mut budget, &mut z)?;
        by_offset.insert(offset, entries.len());
        entries.push(entry);
        pos = next;
    }
    if pos != body.len() {
        return Err(PackError::Trailing);
    }
    resolve(entries, &by_offset, &mut budget)
}

struct Budget(u64);

impl Budget {
    fn take(&mut self, n: u64) -> Result<(), PackError> {
        self.0 = self.0.checked_sub(n).ok_or(PackError::TooBig)?;
        Ok(())
    }
}

fn corrupt(offset: usize, reason: impl Into<String>) -> PackError {
    PackError::Corrupt {
        offset,
        reason: reason.into(),
    }
}

/// One entry at `pos`: its header, base reference and inflated data.
fn read_entry(
    body: &[u8],
    pos: usize,
    budget: &mut Budget,
    z: &mut Decompress,
) -> Result<(Entry, usize), PackError> {
    let offset = pos;
    let byte = |i: usize| body.get(i).copied().ok_or(PackError::Truncated);
    let mut c = byte(pos)?;
    let mut i = pos + 1;
    let ty = (c >> 4) & 7;
    let mut size = u64::from(c & 15);
    let mut shift = 4;
    while c & 0x80 != 0 {
        c = byte(i)?;
        i += 1;
        if shift > 60 {
            return Err(corrupt(offset, "an object size too long"));
        }
        size |= u64::from(c & 0x7f) << shift;
        shift += 7;
    }
    let stored = match ty {
        1 => Stored::Whole(Kind::Commit),
        2 => Stored::Whole(Kind::Tree),
        3 => Stored::Whole(Kind::Blob),
        4 => Stored::Whole(Kind::Tag),
        6 => {
            // The base's offset back from this entry, as git encodes it.
            let mut c = byte(i)?;
            i += 1;
            let mut back = u64::from(c & 0x7f);
            while c & 0x80 != 0 {
                c = byte(i)?;
                i += 1;
                back = back
                    .checked_add(1)
                    .and_then(|b| b.checked_mul(128))
                    .map(|b| b | u64::from(c & 0x7f))
                    .ok_or_else(|| corrupt(offset, "a base offset too large"))?;
            }
            let base = usize::try_from(back)
                .ok()
                .filter(|b| *b > 0)
                .and_then(|b| offset.checked_sub(b))
                .filter(|b| *b >= 12)
                .ok_or_else(|| corrupt(offset, "a base offset outside the pack"))?;
            Stored::Ofs(base)
        }
        7 => {
            let id = body.get(i..i + 20).ok_or(PackError::Truncated)?;
            i += 20;
            Stored::Ref(ObjectId::from_bytes(id).ok_or(PackError::Truncated)?)
        }
        _ => return Err(corrupt(offset, format!("object type {ty}"))),
    };
    if size > MAX_OBJECT {
        return Err(corrupt(offset, "an object too large"));
    }
    budget.take(size)?;
    let (data, used) = inflate(z, body.get(i..).unwrap_or_default(), size, offset)?;
    Ok((
        Entry {
            offset,
            stored,
            data,
        },
        i + used,
    ))
}

/// Inflate one zlib stream that must give exactly `size` bytes; returns
/// the data and the compressed bytes used. Output is grown as it comes, so
/// a size claimed but not delivered allocates nothing.
fn inflate(
    z: &mut Decompress,
    input: &[u8],
    size: u64,
    offset: usize,
) -> Result<(Vec<u8>, usize), PackError> {
    z.reset(true);
    let mut out = Vec::new();
    // One byte more than the object, to see a stream that runs past it.
    let mut chunk = vec![0u8; usize::try_from(size.saturating_add(1).min(64 * 1024)).unwrap_or(1)];
    loop {
        let (before_in, before_out) = (z.total_in(), z.total_out());
        let start = usize::try_from(before_in).map_err(|_| PackError::Truncated)?;
        let status = z
            .decompress(
                input.get(start..).unwrap_or_default(),
                &mut chunk,
                FlushDecompress::None,
            )
            .map_err(|e| corrupt(offset, format!("zlib: {e}")))?;
        let produced = usize::try_from(z.total_out() - before_out).unwrap_or(usize::MAX);
        if out.len() as u64 + produced as u64 > size {
            return Err(corrupt(offset, "inflates past its size"));
        }
        out.extend_from_slice(chunk.get(..produced).unwrap_or_default());
        match status {
            Status::StreamEnd => break,
            _ if z.total_in() == before_in && produced == 0 => {
                return Err(PackError::Truncated);
            }
            _ => {}
        }
    }
    if out.len() as u64 != size {
        return Err(corrupt(offset, "inflates short of its size"));
    }
    let used = usize::try_from(z.total_in()).map_err(|_| PackError::Truncated)?;
    Ok((out, used))
}

/// Apply every delta, each once its base is known (a worklist from the
/// whole objects down every chain, so each entry is visited once), and
/// hash every object.
fn resolve(
    mut entries: Vec<Entry>,
    by_offset: &HashMap<usize, usize>,
    budget: &mut Budget,
) -> Result<Pack, PackError> {
    let mut ofs_children: HashMap<usize, Vec<usize>> = HashMap::new();
    let mut ref_children: HashMap<ObjectId, Vec<usize>> = HashMap::new();
    // (entry, kind, data, depth) of objects known but not yet recorded.
    let mut work: Vec<(usize, Kind, Arc<Vec<u8>>, usize)> = Vec::new();
    for (k, entry) in entries.iter_mut().enumerate() {
        match &entry.stored {
            Stored::Whole(kind) => {
                work.push((k, *kind, Arc::new(std::mem::take(&mut entry.data)), 0));
            }
            Stored::Ofs(off) => {
                let base = *by_offset
                    .get(off)
                    .ok_or_else(|| corrupt(*off, "a delta base at no object's offset"))?;
                ofs_children.entry(base).or_default().push(k);
            }
            Stored::Ref(id) => ref_children.entry(*id).or_default().push(k),
        }
    }
    let mut pack = Pack::default();
    let mut resolved = 0usize;
    while let Some((k, kind, data, depth)) = work.pop() {
        let id = record(&mut pack, kind, &data)?;
        resolved += 1;
        let children = ofs_children
            .remove(&k)
            .into_iter()
            .chain(ref_children.remove(&id))
            .flatten();
        for child in children {
            if depth + 1 > MAX_DELTA_DEPTH {
                return Err(PackError::TooDeep);
            }
            let delta = std::mem::take(&mut entries[child].data);
            let result = apply_delta(&data, &delta, budget)
                .map_err(|reason| corrupt(entries[child].offset, reason))?;
            work.push((child, kind, Arc::new(result), depth + 1));
        }
    }
    if resolved != entries.len() {
        let missing = ref_children.keys().next().map(ObjectId::to_hex);
        return Err(PackError::MissingBase(missing.unwrap_or_default()));
    }
    Ok(pack)
}

/// Add an object under its id; the same id twice must be the same object.
fn record(pack: &mut Pack, kind: Kind, data: &Arc<Vec<u8>>) -> Result<ObjectId, PackError> {
    let id = object_id(kind, data)?;
    let object = Object {
        kind,
        data: data.clone(),
    };
    match pack.objects.get(&id) {
        Some(seen) if *seen != object => Err(PackError::Duplicate(id.to_hex())),
        Some(_) => Ok(id),
        None => {
            pack.objects.insert(id, object);
            Ok(id)
        }
    }
}

/// A delta's size header: a little-endian base-128 number.
fn delta_size(delta: &[u8], pos: &mut usize) -> Result<u64, String> {
    let mut size = 0u64;
    let mut shift = 0;
    loop {
        let c = *delta.get(*pos).ok_or("a delta cut short")?;
        *pos += 1;
        if shift > 63 {
            return Err("a delta size too long".into());
        }
        size |= u64::from(c & 0x7f) << shift;
        shift += 7;
        if c & 0x80 == 0 {
            return Ok(size);
        }
    }
}

/// Apply `delta` to `base` (gitformat-pack, "Deltified representation").
fn apply_delta(base: &[u8], delta: &[u8], budget: &mut Budget) -> Result<Vec<u8>, String> {
    let mut pos = 0;
    let base_size = delta_size(delta, &mut pos)?;
    if base_size != base.len() as u64 {
        return Err("a delta for a base of another size".into());
    }
    let size = delta_size(delta, &mut pos)?;
    if size > MAX_OBJECT {
        return Err("a delta result too large".into());
    }
    budget.take(size).map_err(|e| e.to_string())?;
    // Grown as it comes: a claimed size allocates nothing by itself.
    let mut out = Vec::with_capacity(usize::try_from(size.min(1024 * 1024)).unwrap_or(0));
    while let Some(&op) = delta.get(pos) {
        pos += 1;
        if op & 0x80 != 0 {
            let mut arg = |bits: u8, bytes: usize| -> Result<usize, String> {
                let mut v = 0usize;
                for b in 0..bytes {
                    if bits & (1 << b) != 0 {
                        let c = *delta.get(pos).ok_or("a copy cut short")?;
                        pos += 1;
                        v |= usize::from(c) << (8 * b);
                    }
                }
                Ok(v)
            };
            let from = arg(op & 0x0f, 4)?;
            let mut len = arg((op >> 4) & 0x07, 3)?;
            if len == 0 {
                len = 0x10000;
            }
            let slice = from
                .checked_add(len)
                .and_then(|end| base.get(from..end))
                .ok_or("a copy outside the base")?;
            if (out.len() + len) as u64 > size {
                return Err("a delta longer than its result".into());
            }
            out.extend_from_slice(slice);
        } else if op != 0 {
            let len = usize::from(op);
            let slice = delta.get(pos..pos + len).ok_or("an insert cut short")?;
            pos += len;
            if (out.len() + len) as u64 > size {
                return Err("a delta longer than its result".into());
            }
            out.extend_from_slice(slice);
        } else {
            return Err("the reserved delta opcode 0".into());
        }
    }
    if out.len() as u64 != size {
        return Err("a delta short of its result".into());
    }
    Ok(out)
}
