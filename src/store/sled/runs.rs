//! Values of the sled store's `events` tree that hold several events: runs
//! and blocks (see `docs/format.md`, "Runs and blocks").
//!
//! - A *run* holds the frames of consecutive appends of one session,
//!   inline: [`RUN`], the number of events (u32), a CRC-32 of those five
//!   bytes, then each event as its length (u32) and its bytes. The insert
//!   thread writes one per session per insert batch instead of a key per
//!   event, at most [`RUN_MAX`] bytes, so that sled stays free of blobs.
//! - A *block* is a pointer to a body of the same elements compressed as
//!   one zstd frame in a segment file (`frame_files.rs`): [`BLOCK`], the
//!   number of events (u32), the segment's number, the offset, the bytes
//!   stored, the body's length (u64 each), and a CRC-32 of the 37 bytes
//!   before it. The sealer (`sealer.rs`) replaces a session's runs with
//!   blocks once they add up to the configured block size.
//!
//! Either is kept under the key of its first event and stands for events
//! `first..first + count`. An element is an event's frame, or the pointer
//! to a frame kept in a segment of its own (a frame too large for sled).
//! Integers are little-endian. Every element still checks itself (a
//! frame's CRC); the counts and lengths are what these formats add, and a
//! count is only believed with its CRC.

use std::ops::Range;

/// First byte of a run (never a frame's version byte nor another pointer's).
pub(crate) const RUN: u8 = 0xF9;

/// First byte of a block pointer.
pub(crate) const BLOCK: u8 = 0xFA;

/// Bytes before a run's first element: marker, count, CRC.
pub(crate) const RUN_HEADER: usize = 9;

/// Length of a block pointer.
pub(crate) const BLOCK_POINTER_LEN: usize = 41;

/// The most bytes a run value takes (sled's values stay at most 7 KiB:
/// see `frame_files.rs`).
pub(crate) const RUN_MAX: usize = crate::store::sled::snapfiles::INLINE_MAX;

/// What an element adds to a run or a block body besides its bytes.
pub(crate) const ELEMENT_OVERHEAD: usize = 4;

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// The number of events a run's header says it holds, if the header checks.
fn run_count(value: &[u8]) -> Option<u32> {
    if value.first() != Some(&RUN) {
        return None;
    }
    let count = u32_at(value, 1)?;
    (u32_at(value, 5)? == crc32fast::hash(&value[..5]) && count >= 1).then_some(count)
}

/// Where a block is and what it holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BlockPointer {
    /// Events in the block.
    pub(crate) count: u32,
    /// The segment file's number.
    pub(crate) segment: u64,
    /// Byte offset of the compressed body in the segment.
    pub(crate) offset: u64,
    /// Bytes stored there.
    pub(crate) stored: u64,
    /// Length of the body once decompressed.
    pub(crate) raw: u64,
}

impl BlockPointer {
    /// The pointer's bytes.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(BLOCK_POINTER_LEN);
        v.push(BLOCK);
        v.extend_from_slice(&self.count.to_le_bytes());
        for n in [self.segment, self.offset, self.stored, self.raw] {
            v.extend_from_slice(&n.to_le_bytes());
        }
        let crc = crc32fast::hash(&v);
        v.extend_from_slice(&crc.to_le_bytes());
        v
    }

    /// The pointer `value` is, if it is one whose CRC checks.
    pub(crate) fn decode(value: &[u8]) -> Option<BlockPointer> {
        if value.len() != BLOCK_POINTER_LEN || value[0] != BLOCK {
            return None;
        }
        if u32_at(value, 37)? != crc32fast::hash(&value[..37]) {
            return None;
        }
        Some(BlockPointer {
            count: u32_at(value, 1)?,
            segment: u64_at(value, 5)?,
            offset: u64_at(value, 13)?,
            stored: u64_at(value, 21)?,
            raw: u64_at(value, 29)?,
        })
    }
}

/// What a value of the `events` tree is.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// One event: a frame, or a pointer to one in a segment.
    One,
    /// A run of `count` events.
    Run(u32),
    /// A block.
    Block(BlockPointer),
}

/// What `value` is. A value whose run header or block pointer does not
/// check is read as one event (whose frame check then fails: damage at its
/// seq), never as many.
pub(crate) fn kind(value: &[u8]) -> Kind {
    match value.first() {
        Some(&RUN) => run_count(value).map_or(Kind::One, Kind::Run),
        Some(&BLOCK) => BlockPointer::decode(value).map_or(Kind::One, Kind::Block),
        _ => Kind::One,
    }
}

/// The number of events `value` stands for.
pub(crate) fn span(value: &[u8]) -> u64 {
    match kind(value) {
        Kind::One => 1,
        Kind::Run(n) => u64::from(n),
        Kind::Block(p) => u64::from(p.count),
    }
}

/// The ranges of a body's elements, or the ones before the first that
/// cannot be read and its index.
pub(crate) type Parsed = std::result::Result<Vec<Range<usize>>, (Vec<Range<usize>>, usize)>;

/// The elements of a body (a run's bytes after its header, or a block's
/// decompressed body): the range of each of the first `count` in `body`.
/// `Err((ranges, i))`: element `i` (and so every one after it) cannot be
/// read, or bytes are left over after the last (then `i` is `count - 1`);
/// `ranges` holds the ones before it.
pub(crate) fn elements(body: &[u8], count: u32) -> Parsed {
    let mut out = Vec::with_capacity(usize::try_from(count).unwrap_or(0).min(1 << 16));
    let mut at = 0usize;
    for i in 0..count as usize {
        let Some(len) = u32_at(body, at).and_then(|n| usize::try_from(n).ok()) else {
            return Err((out, i));
        };
        let start = at + ELEMENT_OVERHEAD;
        match start.checked_add(len).filter(|end| *end <= body.len()) {
            Some(end) => {
                out.push(start..end);
                at = end;
            }
            None => return Err((out, i)),
        }
    }
    if at != body.len() {
        let last = out.len().saturating_sub(1);
        out.truncate(last);
        return Err((out, last));
    }
    Ok(out)
}

/// Appends `element` to a body.
pub(crate) fn push_element(body: &mut Vec<u8>, element: &[u8]) {
    body.extend_from_slice(&(element.len() as u32).to_le_bytes());
    body.extend_from_slice(element);
}

/// A run of `elements` (at least two; one is stored as it is).
pub(crate) fn run<'a>(elements: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut v = vec![RUN, 0, 0, 0, 0, 0, 0, 0, 0];
    let mut count = 0u32;
    for e in elements {
        push_element(&mut v, e);
        count += 1;
    }
    v[1..5].copy_from_slice(&count.to_le_bytes());
    let crc = crc32fast::hash(&v[..5]);
    v[5..9].copy_from_slice(&crc.to_le_bytes());
    v
}

/// Bytes an element takes in a run or a body.
pub(crate) fn element_bytes(element: &[u8]) -> usize {
    element.len() + ELEMENT_OVERHEAD
}

/// The values that store `elements` (each at most [`RUN_MAX`] bytes, or a
/// frame alone): `(index of the first element, value)`, runs of as many as
/// fit, an element alone as it is.
pub(crate) fn pack(elements: &[&[u8]]) -> Vec<(usize, Vec<u8>)> {
    let mut out = Vec::new();
    let mut start = 0;
    while start < elements.len() {
        let mut end = start;
        let mut bytes = RUN_HEADER;
        while end < elements.len() && bytes + element_bytes(elements[end]) <= RUN_MAX {
            bytes += element_bytes(elements[end]);
            end += 1;
        }
        if end <= start + 1 {
            out.push((start, elements[start].to_vec()));
            start += 1;
        } else {
            out.push((start, run(elements[start..end].iter().copied())));
            start = end;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Any elements packed read back in order, each value within
        /// [`RUN_MAX`]; a block body of them reads back too.
        #[test]
        fn packed_elements_read_back(sizes in proptest::collection::vec(0usize..9000, 0..60)) {
            let elems: Vec<Vec<u8>> = sizes
                .iter()
                .enumerate()
                .map(|(i, n)| vec![i as u8; (*n).min(RUN_MAX - RUN_HEADER - 4)])
                .collect();
            let refs: Vec<&[u8]> = elems.iter().map(Vec::as_slice).collect();
            let mut got = Vec::new();
            for (first, v) in pack(&refs) {
                prop_assert_eq!(first, got.len());
                prop_assert!(v.len() <= RUN_MAX);
                match kind(&v) {
                    Kind::Run(n) => {
                        let body = &v[RUN_HEADER..];
                        for r in elements(body, n).expect("a run") {
                            got.push(body[r].to_vec());
                        }
                    }
                    _ => got.push(v),
                }
            }
            prop_assert_eq!(&got, &elems);
            let mut body = Vec::new();
            for e in &refs {
                push_element(&mut body, e);
            }
            let ranges = elements(&body, refs.len() as u32).expect("a body");
            prop_assert_eq!(ranges.len(), refs.len());
        }

        /// Any bytes and any count: no panic, and the ranges found lie
        /// within the bytes.
        #[test]
        fn any_bytes_parse_without_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200), count in any::<u32>()) {
            let ranges = match elements(&bytes, count) {
                Ok(r) => r,
                Err((r, i)) => {
                    prop_assert!(i as u64 <= u64::from(count));
                    r
                }
            };
            for r in ranges {
                prop_assert!(r.start <= r.end && r.end <= bytes.len());
            }
            let _ = (kind(&bytes), span(&bytes));
        }
    }

    #[test]
    fn a_run_reads_back_its_elements_and_its_count_only_with_its_crc() {
        let elems: Vec<Vec<u8>> = (0..5u8).map(|i| vec![i; 10 * usize::from(i)]).collect();
        let v = run(elems.iter().map(Vec::as_slice));
        assert_eq!(kind(&v), Kind::Run(5));
        assert_eq!(span(&v), 5);
        let ranges = elements(&v[RUN_HEADER..], 5).expect("elements");
        for (r, e) in ranges.iter().zip(&elems) {
            assert_eq!(&v[RUN_HEADER..][r.clone()], e.as_slice());
        }
        for i in 1..RUN_HEADER {
            let mut bad = v.clone();
            bad[i] ^= 0x10;
            assert_eq!(kind(&bad), Kind::One, "byte {i}");
        }
    }

    #[test]
    fn a_damaged_length_or_trailing_bytes_name_the_element_that_fails() {
        let elems: Vec<Vec<u8>> = (0..4u8).map(|i| vec![i; 20]).collect();
        let v = run(elems.iter().map(Vec::as_slice));
        let body = &v[RUN_HEADER..];
        let mut bad = body.to_vec();
        bad[2 * 24] = 0xFF;
        let (good, at) = elements(&bad, 4).expect_err("damaged");
        assert_eq!((good.len(), at), (2, 2));
        let mut long = body.to_vec();
        long.push(0);
        assert_eq!(elements(&long, 4).expect_err("trailing").1, 3);
        assert!(elements(&body[..body.len() - 1], 4).is_err());
        // A count larger than the body: no panic, no huge allocation.
        assert!(elements(body, u32::MAX).is_err());
    }

    #[test]
    fn a_block_pointer_round_trips_and_rejects_any_flip() {
        let p = BlockPointer {
            count: 700,
            segment: 3,
            offset: 1 << 33,
            stored: 40_000,
            raw: 131_072,
        };
        let v = p.encode();
        assert_eq!(v.len(), BLOCK_POINTER_LEN);
        assert_eq!(kind(&v), Kind::Block(p));
        for i in 0..v.len() {
            let mut bad = v.clone();
            bad[i] ^= 1;
            assert_eq!(kind(&bad), Kind::One, "byte {i}");
        }
    }

    #[test]
    fn pack_keeps_every_value_within_run_max_and_the_order() {
        let elems: Vec<Vec<u8>> = (0..200usize)
            .map(|i| vec![i as u8; i * 13 % 3000])
            .collect();
        let refs: Vec<&[u8]> = elems.iter().map(Vec::as_slice).collect();
        let packed = pack(&refs);
        let mut next = 0;
        for (first, v) in &packed {
            assert_eq!(*first, next);
            assert!(v.len() <= RUN_MAX);
            match kind(v) {
                Kind::One => {
                    assert_eq!(v, &elems[next]);
                    next += 1;
                }
                Kind::Run(n) => {
                    let ranges = elements(&v[RUN_HEADER..], n).expect("run");
                    for r in ranges {
                        assert_eq!(&v[RUN_HEADER..][r], elems[next].as_slice());
                        next += 1;
                    }
                }
                Kind::Block(_) => panic!("no block here"),
            }
        }
        assert_eq!(next, elems.len());
    }
}
