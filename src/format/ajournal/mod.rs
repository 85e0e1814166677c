//! Exported journal files (`.ajournal`).
//!
//! ```text
//! b"AGJRNL02"                       magic and format version
//! repeated: u32 LE length ++ frame  one record per event, any sessions
//! u32 LE 0xFFFF_FFFF                the trailer (format 2): its mark,
//! u64 LE records                    the number of records,
//! u32 LE crc32                      and the CRC-32 of every byte before it
//! ```
//!
//! A reader verifies every frame. A torn or unreadable *last* record, or a
//! file that ends without its trailer (the crash point of a copy cut short,
//! even between two records), is reported and cut off; damage followed by
//! good records, or a trailer that does not match the records, is
//! [`Error::Corruption`] with its byte offset. Format 1 files (no trailer)
//! are still read.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::event::Envelope;
use crate::format::TailDamage;
use crate::format::{self, FRAME_HEADER_LEN};
use crate::model::SessionId;

mod lenient;
#[cfg(test)]
mod tests;
mod write;

pub(crate) use lenient::parse_lenient;
pub(crate) use write::FileWriter;

/// The first 8 bytes of an exported journal, as this build writes it
/// (format 2: with a trailer).
pub const MAGIC: &[u8; 8] = b"AGJRNL02";

/// The magic of format 1 (no trailer), still read.
const MAGIC_V1: &[u8; 8] = b"AGJRNL01";

/// Where a length prefix holds this, the trailer starts (format 2). No
/// frame is this long: the writer refuses one.
pub const TRAILER_MARK: u32 = u32::MAX;

/// Bytes of the trailer: mark, record count (u64), CRC-32 (u32).
pub const TRAILER_LEN: usize = 4 + 8 + 4;

/// Prefix shared by every format version of the magic.
const MAGIC_PREFIX: &[u8; 6] = b"AGJRNL";

/// The format of the file whose bytes these are: 1 or 2, or why it is not
/// one this build reads.
fn format_of(bytes: &[u8]) -> Result<u8> {
    if bytes.len() < MAGIC.len() || &bytes[..MAGIC_PREFIX.len()] != MAGIC_PREFIX {
        return Err(Error::NotAJournal {
            path: PathBuf::new(),
            reason: "missing the AGJRNL magic".into(),
        });
    }
    match &bytes[..MAGIC.len()] {
        m if m == MAGIC => Ok(2),
        m if m == MAGIC_V1 => Ok(1),
        m => Err(Error::Unsupported(format!(
            "exported journal format {:?} is not readable by this build (it reads {:?} and {:?})",
            String::from_utf8_lossy(m),
            String::from_utf8_lossy(MAGIC_V1),
            String::from_utf8_lossy(MAGIC)
        ))),
    }
}

/// True if the length prefix at `pos` is the trailer's mark.
fn at_trailer(bytes: &[u8], pos: usize) -> bool {
    bytes.get(pos..pos + 4) == Some(&TRAILER_MARK.to_le_bytes()[..])
}

/// What the trailer at `pos` says against the `records` read before it.
enum Trailer {
    /// It matches, and ends the file.
    Whole,
    /// It matches; this many bytes follow it.
    Followed(usize),
    /// It is cut short (a tail), for this reason.
    Cut(String),
    /// It is whole and does not match the records, for this reason.
    Mismatch(String),
}

/// The record count and the checksum of a whole trailer `t`.
fn trailer_fields(t: &[u8]) -> (u64, u32) {
    let count = u64::from_le_bytes([t[4], t[5], t[6], t[7], t[8], t[9], t[10], t[11]]);
    let crc = u32::from_le_bytes([t[12], t[13], t[14], t[15]]);
    (count, crc)
}

fn check_trailer(bytes: &[u8], pos: usize, records: u64) -> Trailer {
    let Some(t) = bytes.get(pos..pos + TRAILER_LEN) else {
        return Trailer::Cut(format!(
            "the trailer is cut short ({} of its {TRAILER_LEN} bytes)",
            bytes.len() - pos
        ));
    };
    let (count, crc) = trailer_fields(t);
    if count != records {
        return Trailer::Mismatch(format!(
            "the trailer counts {count} records, the file holds {records}"
        ));
    }
    let actual = crc32fast::hash(&bytes[..pos]);
    if crc != actual {
        return Trailer::Mismatch(format!(
            "the trailer's checksum {crc:#010x} does not match the file's {actual:#010x}"
        ));
    }
    match bytes.len() - pos - TRAILER_LEN {
        0 => Trailer::Whole,
        extra => Trailer::Followed(extra),
    }
}

/// True if a whole format 2 trailer at `pos` matches the `records` before
/// it and the file's bytes with the format 2 magic in place of its own.
fn v2_trailer_matches(bytes: &[u8], pos: usize, records: u64) -> bool {
    let Some(t) = bytes.get(pos..pos + TRAILER_LEN) else {
        return false;
    };
    let (count, crc) = trailer_fields(t);
    let Some(rest) = bytes.get(MAGIC.len()..pos) else {
        return false;
    };
    let mut h = crc32fast::Hasher::new();
    h.update(MAGIC);
    h.update(rest);
    count == records && crc == h.finalize()
}

/// Every session of a file with its events, in order.
pub type Streams = Vec<(SessionId, Vec<Envelope>)>;

/// Parses the bytes of an exported journal: every session's verified
/// events in order, and the damaged tail that was cut off (or where a
/// file cut short ends without its trailer), if any. Never panics.
///
/// # Errors
/// [`Error::NotAJournal`] without the magic; [`Error::Unsupported`] for a
/// format this build does not read; [`Error::Corruption`] for damage
/// before the end, or a trailer that does not match.
pub fn parse(bytes: &[u8], limit: u64) -> Result<(Streams, Option<TailDamage>)> {
    let contents = parse_frames(bytes, limit)?;
    let mut out = Vec::new();
    for (id, frames) in contents.streams {
        let mut events = Vec::with_capacity(frames.len());
        for f in frames {
            let env = format::decode_frame(&f, limit).map_err(|e| Error::Corruption {
                session: Some(id),
                seq: None,
                offset: None,
                reason: e.to_string(),
            })?;
            events.push(env);
        }
        out.push((id, events));
    }
    Ok((out, contents.tail))
}

/// What a journal file holds.
#[derive(Debug, Default)]
pub(crate) struct FileContents {
    /// Frames per session, seq = index.
    pub streams: BTreeMap<SessionId, Vec<Vec<u8>>>,
    /// The damaged tail, if one was cut off.
    pub tail: Option<TailDamage>,
}

/// True if the file at `path` starts like an exported journal (any version).
pub fn looks_like_journal_file(path: &Path) -> bool {
    let mut head = [0u8; 6];
    File::open(path)
        .and_then(|mut f| f.read_exact(&mut head))
        .map(|()| &head == MAGIC_PREFIX)
        .unwrap_or(false)
}

/// Reads and verifies a whole exported journal.
pub(crate) fn read_file(path: &Path, limit: u64) -> Result<FileContents> {
    // An endless input (a device, a pipe) is no exported journal: it is
    // refused rather than read until memory runs out.
    if !std::fs::metadata(path).is_ok_and(|m| m.is_file()) && path.exists() {
        return Err(Error::NotAJournal {
            path: path.to_owned(),
            reason: "not a regular file".into(),
        });
    }
    let bytes =
        std::fs::read(path).map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
    parse_frames(&bytes, limit).map_err(|e| match e {
        Error::NotAJournal { reason, .. } => Error::NotAJournal {
            path: path.to_owned(),
            reason,
        },
        other => other,
    })
}

/// Parses the bytes of an exported journal. Never panics, whatever the input.
pub(crate) fn parse_frames(bytes: &[u8], limit: u64) -> Result<FileContents> {
    let format = format_of(bytes)?;
    let mut out = FileContents::default();
    let mut resync = Resync::new(bytes);
    let mut pos = MAGIC.len();
    let mut records = 0u64;
    let total = bytes.len();
    loop {
        let offset = pos as u64;
        let cut = |reason: String| TailDamage::bytes(offset, (total - pos) as u64, reason);
        if pos >= total {
            if format == 2 {
                out.tail = Some(cut(format!(
                    "the file ends after {records} records without its trailer: it was cut short"
                )));
            }
            break;
        }
        if format == 1 && at_trailer(bytes, pos) && v2_trailer_matches(bytes, pos, records) {
            // No format 1 file has a trailer: this is a format 2 file whose
            // version byte was damaged into format 1's.
            return Err(Error::corruption(
                None,
                None,
                Some(MAGIC.len() as u64 - 1),
                format!(
                    "the magic says {:?}, but the file ends with a trailer that matches it as {:?}: \
                     its version byte is damaged",
                    String::from_utf8_lossy(MAGIC_V1),
                    String::from_utf8_lossy(MAGIC)
                ),
            ));
        }
        if format == 2 && at_trailer(bytes, pos) {
            match check_trailer(bytes, pos, records) {
                Trailer::Whole => {}
                Trailer::Followed(extra) => {
                    out.tail = Some(TailDamage::bytes(
                        (pos + TRAILER_LEN) as u64,
                        extra as u64,
                        "bytes after the trailer".into(),
                    ))
                }
                Trailer::Cut(reason) => out.tail = Some(cut(reason)),
                Trailer::Mismatch(reason) => {
                    return Err(Error::corruption(None, None, Some(offset), reason));
                }
            }
            break;
        }
        let (env, frame) = match read_record(bytes, pos, limit) {
            Ok((env, start, next)) => {
                pos = next;
                (env, &bytes[start..next])
            }
            Err(reason) => {
                // A tail only if nothing readable follows; otherwise the
                // damage is in the middle and must not hide what comes after.
                // Only a record that could continue a stream (a later seq of
                // a session, or any record of a session not seen yet) counts:
                // a torn last record's payload may hold copies of earlier
                // records.
                let continues = |env: &Envelope| match out.streams.get(&env.session) {
                    Some(stream) => env.seq >= stream.len() as u64,
                    None => true,
                };
                match resync.next_where(bytes, pos + 1, limit, continues) {
                    Found::At(good) => {
                        return Err(Error::corruption(
                            None,
                            None,
                            Some(offset),
                            format!("{reason} (a readable record follows at byte offset {good})"),
                        ));
                    }
                    Found::Nothing => out.tail = Some(cut(reason)),
                    Found::GaveUp => out.tail = Some(cut(format!("{reason}; {GAVE_UP}"))),
                }
                break;
            }
        };
        let stream = out.streams.entry(env.session).or_default();
        if env.seq != stream.len() as u64 {
            return Err(Error::corruption(
                Some(env.session),
                Some(env.seq),
                Some(offset),
                format!(
                    "expected seq {} of the session here (a gap or a duplicate)",
                    stream.len()
                ),
            ));
        }
        stream.push(frame.to_vec());
        records += 1;
    }
    Ok(out)
}

/// Reads the record at `pos`: its envelope and the position after it, or why
/// it is unreadable.
fn read_record(
    bytes: &[u8],
    pos: usize,
    limit: u64,
) -> std::result::Result<(Envelope, usize, usize), String> {
    let len_bytes = bytes.get(pos..pos + 4).ok_or("incomplete length prefix")?;
    let len = u32::from_le_bytes([len_bytes[0], len_bytes[1], len_bytes[2], len_bytes[3]]) as usize;
    if len as u64 > limit.saturating_add(FRAME_HEADER_LEN as u64) {
        return Err(format!(
            "record of {len} bytes is over the limit of {limit}"
        ));
    }
    let start = pos + 4;
    let frame = start
        .checked_add(len)
        .and_then(|end| bytes.get(start..end))
        .ok_or_else(|| format!("record of {len} bytes runs past the end of the file"))?;
    let env = format::decode_frame(frame, limit).map_err(|e| e.to_string())?;
    Ok((env, start, start + len))
}

/// What a search for the next readable record found.
enum Found {
    /// A readable record starts here.
    At(usize),
    /// None up to the end of the file.
    Nothing,
    /// The search ran out of its checksum budget (see [`Resync`]).
    GaveUp,
}

/// The searches for readable records after damage, in one read of a file:
/// they may checksum at most [`RESYNC_CRC_PER_BYTE`] bytes per byte of the
/// file (and [`RESYNC_CRC_FLOOR`]), all together. Random damage comes
/// nowhere near that (a candidate must have a length that fits and the
/// frame's version byte: about one offset in 65,536, and each is
/// checksummed once); without it, a file crafted so that every few bytes
/// look like the start of a long record would cost time quadratic in its
/// size.
struct Resync {
    left: usize,
}

/// See [`Resync`].
const RESYNC_CRC_PER_BYTE: usize = 64;
/// See [`Resync`].
const RESYNC_CRC_FLOOR: usize = 1 << 20;

impl Resync {
    fn new(bytes: &[u8]) -> Self {
        Self {
            left: bytes
                .len()
                .saturating_mul(RESYNC_CRC_PER_BYTE)
                .saturating_add(RESYNC_CRC_FLOOR),
        }
    }

    /// The first readable record at or after `from`.
    fn next_valid(&mut self, bytes: &[u8], from: usize, limit: u64) -> Found {
        self.next_where(bytes, from, limit, |_| true)
    }

    /// The first readable record at or after `from` that satisfies
    /// `accept`. Cheap on the usual tails (zeros, a cut): most offsets fail
    /// on the length or the version byte before any checksum is computed.
    fn next_where(
        &mut self,
        bytes: &[u8],
        from: usize,
        limit: u64,
        accept: impl Fn(&Envelope) -> bool,
    ) -> Found {
        for p in from..bytes.len().saturating_sub(4 + FRAME_HEADER_LEN) {
            let Some(len) = candidate_len(bytes, p, limit) else {
                continue;
            };
            match self.left.checked_sub(len) {
                Some(left) => self.left = left,
                None => return Found::GaveUp,
            }
            if read_record(bytes, p, limit).is_ok_and(|(env, _, _)| accept(&env)) {
                return Found::At(p);
            }
        }
        Found::Nothing
    }
}

/// The length of the frame at `p` if reading it would compute a checksum:
/// the length fits the limit and the file, and the version byte is ours.
fn candidate_len(bytes: &[u8], p: usize, limit: u64) -> Option<usize> {
    let len = u32::from_le_bytes(bytes.get(p..p + 4)?.try_into().ok()?) as usize;
    if len < FRAME_HEADER_LEN || len as u64 > limit.saturating_add(FRAME_HEADER_LEN as u64) {
        return None;
    }
    let frame = bytes.get(p + 4..(p + 4).checked_add(len)?)?;
    (frame[0] == format::FRAME_VERSION).then_some(len)
}

/// Why the search after damage at `pos` stopped, for a message.
const GAVE_UP: &str = "gave up looking for a readable record after it (too many candidates to checksum: a crafted file?)";
