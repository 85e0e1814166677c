//! The log's record format: what one append writes (magic, body length,
//! crc, then generation, session, first seq and the frames), and how a
//! file of them is read back, torn or damaged records skipped. The file
//! and its writer are `wal.rs`.

use crate::model::SessionId;

/// First bytes of a record written twice, in each half of a preallocated
/// log (format version 1).
pub(super) const MAGIC: [u8; 4] = *b"AJW1";

/// First bytes of a record written once, in a log that is not
/// preallocated (a journal that does not append through it, or a disk
/// with no room): same layout, from offset 0 of the whole file. The
/// magic tells the reader which of the two it reads.
pub(super) const MAGIC_ONCE: [u8; 4] = *b"AJS1";

/// Magic, body length, crc.
pub(super) const HEADER: usize = 12;

/// The smallest body: generation, session, first seq, count.
pub(super) const BODY_MIN: usize = 8 + 16 + 8 + 4;

/// The size the file is given when it is created.
pub(crate) const PREALLOCATED: u64 = 4 << 20;

/// Where the second copy of every record goes: the records of a generation
/// fill the first half, their copies the second.
pub(crate) const HALF: u64 = PREALLOCATED / 2;

/// Frames of one append, read back from the log.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Record {
    pub(crate) generation: u64,
    pub(crate) session: SessionId,
    pub(crate) first_seq: u64,
    pub(crate) frames: Vec<Vec<u8>>,
}

/// Appends the record of `frames` of `generation` to `buf`, with `magic`
/// (the format it is written in).
pub(super) fn encode(
    buf: &mut Vec<u8>,
    magic: [u8; 4],
    generation: u64,
    session: SessionId,
    first_seq: u64,
    frames: &[Vec<u8>],
) {
    let body_len = BODY_MIN + frames.iter().map(|f| 4 + f.len()).sum::<usize>();
    buf.reserve(HEADER + body_len);
    buf.extend_from_slice(&magic);
    // Frames are at most the event size limit (u32 range), and an append
    // holds few of them; a batch past 4 GiB is refused by `check_len`.
    buf.extend_from_slice(&(body_len as u32).to_le_bytes());
    let crc_at = buf.len();
    buf.extend_from_slice(&[0; 4]);
    let body_at = buf.len();
    buf.extend_from_slice(&generation.to_le_bytes());
    buf.extend_from_slice(session.as_bytes());
    buf.extend_from_slice(&first_seq.to_le_bytes());
    buf.extend_from_slice(&(frames.len() as u32).to_le_bytes());
    for f in frames {
        buf.extend_from_slice(&(f.len() as u32).to_le_bytes());
        buf.extend_from_slice(f);
    }
    let crc = crc32fast::hash(&buf[body_at..]);
    buf[crc_at..crc_at + 4].copy_from_slice(&crc.to_le_bytes());
}

/// True if `bytes`, a log file as found, was cut inside its first half: a
/// record written twice is only ever written into a file preallocated to
/// [`PREALLOCATED`] bytes, and the file is only ever shortened to 0 (at a
/// clean close, after a rollover) or cut short by damage. A cut there
/// takes the second copy of every record and the first of those past it;
/// what was past it cannot be known, so the cut itself is reported. (A
/// file cut in its second half loses no record: each first copy is whole.)
pub(super) fn cut_short(bytes: &[u8]) -> bool {
    (1..HALF).contains(&(bytes.len() as u64))
        && scan(bytes).iter().any(|(_, magic, _)| *magic == MAGIC)
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// The record starting at `at`, if it is whole and its crc matches, and the
/// offset after it.
fn record_at(bytes: &[u8], at: usize, magic: [u8; 4]) -> Option<(Record, usize)> {
    if bytes.get(at..at + 4)? != magic {
        return None;
    }
    let len = u32_at(bytes, at + 4)? as usize;
    let crc = u32_at(bytes, at + 8)?;
    let start = at + HEADER;
    let body = bytes.get(start..start.checked_add(len)?)?;
    if len < BODY_MIN || crc32fast::hash(body) != crc {
        return None;
    }
    let generation = u64::from_le_bytes(body[..8].try_into().ok()?);
    let session = SessionId::from_bytes(body[8..24].try_into().ok()?);
    let first_seq = u64::from_le_bytes(body[24..32].try_into().ok()?);
    let count = u32_at(body, 32)? as usize;
    let mut frames = Vec::with_capacity(count.min(body.len() / 4));
    let mut p = BODY_MIN;
    for _ in 0..count {
        let n = u32_at(body, p)? as usize;
        frames.push(body.get(p + 4..(p + 4).checked_add(n)?)?.to_vec());
        p += 4 + n;
    }
    if p != body.len() {
        return None;
    }
    Some((
        Record {
            generation,
            session,
            first_seq,
            frames,
        },
        start + len,
    ))
}

/// The offset of the next record magic (either kind) from `from` on,
/// and which. A preallocated log is mostly zeros: those are skipped eight
/// at a time.
fn find_magic(bytes: &[u8], from: usize) -> Option<(usize, [u8; 4])> {
    let mut i = from;
    while i + MAGIC.len() <= bytes.len() {
        if let Some(word) = bytes.get(i..i + 8)
            && u64::from_ne_bytes(word.try_into().ok()?) == 0
        {
            i += 8;
            continue;
        }
        let m = &bytes[i..i + MAGIC.len()];
        if m == MAGIC || m == MAGIC_ONCE {
            return Some((i, [m[0], m[1], m[2], m[3]]));
        }
        i += 1;
    }
    None
}

/// Every record of either kind that checks, with its offset and magic,
/// in file order, in one pass. Damage is skipped: the search goes on at
/// the next magic whose record checks.
fn scan(bytes: &[u8]) -> Vec<(usize, [u8; 4], Record)> {
    let mut all = Vec::new();
    let mut next = find_magic(bytes, 0);
    while let Some((at, magic)) = next {
        next = match record_at(bytes, at, magic) {
            Some((r, end)) => {
                all.push((at, magic, r));
                find_magic(bytes, end)
            }
            // Resynchronize on the next magic.
            None => find_magic(bytes, at + 1),
        };
    }
    all
}

/// Every record of a log that checks, of any generation and either kind,
/// in file order (both copies of a record written twice: a reader of every
/// frame, as `salvage`, drops the second).
pub(crate) fn all_records(bytes: &[u8]) -> Vec<Record> {
    scan(bytes).into_iter().map(|(_, _, r)| r).collect()
}

/// The highest generation in a log (0 if none) and its valid records, in
/// order, without the frameless record that starts a generation.
///
/// Records written twice: each half is read on its own, and a record is
/// taken from either copy (they sit at the same offset of their half).
/// Records written once (the log was last written without room for its
/// second half): the records of the whole file.
#[cfg(test)]
pub(crate) fn parse(bytes: &[u8]) -> (u64, Vec<Record>) {
    let (generation, records, _) = parse_all(bytes);
    (generation, records)
}

/// [`parse`], and whether the log holds records written once (of any
/// generation).
pub(super) fn parse_all(bytes: &[u8]) -> (u64, Vec<Record>, bool) {
    let half = HALF as usize;
    let mut mirrored: Vec<(usize, Record)> = Vec::new();
    let mut once: Vec<(usize, Record)> = Vec::new();
    for (at, magic, r) in scan(bytes) {
        if magic == MAGIC_ONCE {
            once.push((at, r));
        } else if at < half {
            mirrored.push((at, r));
        } else {
            mirrored.push((at - half, r));
        }
    }
    let generation = |rs: &[(usize, Record)]| rs.iter().map(|(_, r)| r.generation).max();
    let (twice, single) = (generation(&mirrored), generation(&once));
    let (current, mut records) = match (twice, single) {
        (Some(g), single) if single.is_none_or(|s| g >= s) => {
            mirrored.retain(|(_, r)| r.generation == g);
            // By offset in the half; the first copy of each offset.
            mirrored.sort_by_key(|(at, _)| *at);
            mirrored.dedup_by_key(|(at, _)| *at);
            (g, mirrored)
        }
        (_, Some(g)) => {
            once.retain(|(_, r)| r.generation == g);
            (g, once)
        }
        _ => (0, Vec::new()),
    };
    records.retain(|(_, r)| !r.frames.is_empty());
    (
        current,
        records.into_iter().map(|(_, r)| r).collect(),
        single.is_some(),
    )
}
