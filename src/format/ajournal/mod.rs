//! Exported journal files (`.ajournal`).
//!
//! ```text
//! b"AGJRNL01"                       magic and format version
//! repeated: u32 LE length ++ frame  one record per event, any sessions
//! u32 LE 0xFFFF_FFFF                the trailer: its mark,
//! u64 LE records                    the number of records,
//! u32 LE crc32                      and the CRC-32 of every byte before it
//! ```
//!
//! A reader verifies every frame. A torn or unreadable *last* record, or a
//! file that ends without its trailer (the crash point of a copy cut short,
//! even between two records), is reported and cut off; damage followed by
//! good records, or a trailer that does not match the records, is
//! [`Error::Corruption`] with its byte offset. A file of another format
//! version is refused ([`Error::Unsupported`]).

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
mod source;
#[cfg(test)]
mod tests;
mod write;

use source::{FileSource, Source};

pub(crate) use lenient::parse_lenient;
pub(crate) use write::{FileWriter, sync_file};

/// The first 8 bytes of an exported journal: `AGJRNL`, then the format
/// version, `01` (the only one this build reads and writes).
pub const MAGIC: &[u8; 8] = b"AGJRNL01";

/// Where a length prefix holds this, the trailer starts. No frame is this
/// long: the writer refuses one.
pub const TRAILER_MARK: u32 = u32::MAX;

/// Bytes of the trailer: mark, record count (u64), CRC-32 (u32).
pub const TRAILER_LEN: usize = 4 + 8 + 4;

/// Prefix shared by every format version of the magic.
const MAGIC_PREFIX: &[u8; 6] = b"AGJRNL";

/// Whether the file whose bytes these are has the format this build
/// reads, or why not.
fn format_of(bytes: &[u8]) -> Result<()> {
    if bytes.len() < MAGIC.len() || &bytes[..MAGIC_PREFIX.len()] != MAGIC_PREFIX {
        return Err(Error::NotAJournal {
            path: PathBuf::new(),
            reason: "missing the AGJRNL magic".into(),
        });
    }
    match &bytes[..MAGIC.len()] {
        m if m == MAGIC => Ok(()),
        m => Err(Error::Unsupported(format!(
            "exported journal format {:?} is not readable by this build (it reads {:?})",
            String::from_utf8_lossy(m),
            String::from_utf8_lossy(MAGIC)
        ))),
    }
}

/// True if the length prefix at `pos` is the trailer's mark.
fn at_trailer<S: Source>(src: &mut S, pos: usize) -> bool {
    src.get(pos..pos + 4) == Some(&TRAILER_MARK.to_le_bytes()[..])
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

/// `crc_before`: the CRC-32 of every byte before `pos`.
fn check_trailer<S: Source>(src: &mut S, pos: usize, records: u64, crc_before: u32) -> Trailer {
    let total = src.len();
    let Some(t) = src.get(pos..pos + TRAILER_LEN) else {
        return Trailer::Cut(format!(
            "the trailer is cut short ({} of its {TRAILER_LEN} bytes)",
            total - pos
        ));
    };
    let (count, crc) = trailer_fields(t);
    if count != records {
        return Trailer::Mismatch(format!(
            "the trailer counts {count} records, the file holds {records}"
        ));
    }
    let actual = crc_before;
    if crc != actual {
        return Trailer::Mismatch(format!(
            "the trailer's checksum {crc:#010x} does not match the file's {actual:#010x}"
        ));
    }
    match total - pos - TRAILER_LEN {
        0 => Trailer::Whole,
        extra => Trailer::Followed(extra),
    }
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

/// Where a verified frame lies in its file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FrameAt {
    /// Byte offset of the frame (after its length prefix).
    pub offset: u64,
    /// Its length.
    pub len: u32,
}

/// Where a journal file's frames are: 12 bytes per event, whatever their
/// size.
#[derive(Debug, Default)]
pub(crate) struct FileIndex {
    /// Frames per session, seq = index.
    pub streams: BTreeMap<SessionId, Vec<FrameAt>>,
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

/// Reads and verifies a whole exported journal, in one pass through a
/// window (memory: the window, the largest record and 12 bytes per event,
/// whatever the file's size). Returns the open file and where its frames
/// are.
pub(crate) fn read_file(path: &Path, limit: u64) -> Result<(File, FileIndex)> {
    // An endless input (a device, a pipe) is no exported journal: it is
    // refused rather than read until memory runs out.
    let mut src = FileSource::open(path)?;
    let index = index(&mut src, limit).map_err(|e| match e {
        Error::NotAJournal { reason, .. } => Error::NotAJournal {
            path: path.to_owned(),
            reason,
        },
        other => other,
    })?;
    Ok((src.into_file(), index))
}

/// Parses the bytes of an exported journal. Never panics, whatever the input.
pub(crate) fn parse_frames(bytes: &[u8], limit: u64) -> Result<FileContents> {
    let index = index(&mut &*bytes, limit)?;
    let frame = |at: &FrameAt| {
        let start = at.offset as usize;
        bytes[start..start + at.len as usize].to_vec()
    };
    Ok(FileContents {
        streams: index
            .streams
            .iter()
            .map(|(id, frames)| (*id, frames.iter().map(frame).collect()))
            .collect(),
        tail: index.tail,
    })
}

/// Reads and verifies the records of an exported journal: where each
/// session's frames are. Never panics, whatever the input.
fn index<S: Source>(src: &mut S, limit: u64) -> Result<FileIndex> {
    let result = index_inner(src, limit);
    // A read that failed looked like the end of the file: its error, not
    // a tail, is the answer.
    match src.take_error() {
        Some(e) => Err(e),
        None => result,
    }
}

fn index_inner<S: Source>(src: &mut S, limit: u64) -> Result<FileIndex> {
    let total = src.len();
    let magic = src.get(0..MAGIC.len().min(total)).unwrap_or_default();
    format_of(magic)?;
    // The CRC-32 of every byte read so far, for the trailer.
    let mut crc = crc32fast::Hasher::new();
    crc.update(magic);
    let mut out = FileIndex::default();
    let mut resync = Resync::new(total);
    let mut pos = MAGIC.len();
    let mut records = 0u64;
    loop {
        let offset = pos as u64;
        let cut = |reason: String| TailDamage::bytes(offset, (total - pos) as u64, reason);
        if pos >= total {
            out.tail = Some(cut(format!(
                "the file ends after {records} records without its trailer: it was cut short"
            )));
            break;
        }
        if at_trailer(src, pos) {
            match check_trailer(src, pos, records, crc.clone().finalize()) {
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
        let (env, frame) = match read_record(src, pos, limit) {
            Ok((env, start, next)) => {
                let record = src.get(pos..next).unwrap_or_default();
                crc.update(record);
                pos = next;
                (
                    env,
                    FrameAt {
                        offset: start as u64,
                        len: (next - start) as u32,
                    },
                )
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
                match resync.next_where(src, pos + 1, limit, continues) {
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
        stream.push(frame);
        records += 1;
    }
    Ok(out)
}

/// Reads the record at `pos`: its envelope and the position after it, or why
/// it is unreadable.
fn read_record<S: Source>(
    src: &mut S,
    pos: usize,
    limit: u64,
) -> std::result::Result<(Envelope, usize, usize), String> {
    let len_bytes = src.get(pos..pos + 4).ok_or("incomplete length prefix")?;
    let len = u32::from_le_bytes([len_bytes[0], len_bytes[1], len_bytes[2], len_bytes[3]]) as usize;
    if len as u64 > limit.saturating_add(FRAME_HEADER_LEN as u64) {
        return Err(format!(
            "record of {len} bytes is over the limit of {limit}"
        ));
    }
    let start = pos + 4;
    let frame = start
        .checked_add(len)
        .and_then(|end| src.get(start..end))
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
    /// For a file of `len` bytes.
    fn new(len: usize) -> Self {
        Self {
            left: len
                .saturating_mul(RESYNC_CRC_PER_BYTE)
                .saturating_add(RESYNC_CRC_FLOOR),
        }
    }

    /// The first readable record at or after `from`.
    fn next_valid<S: Source>(&mut self, src: &mut S, from: usize, limit: u64) -> Found {
        self.next_where(src, from, limit, |_| true)
    }

    /// The first readable record at or after `from` that satisfies
    /// `accept`. Cheap on the usual tails (zeros, a cut): most offsets fail
    /// on the length or the version byte before any checksum is computed.
    fn next_where<S: Source>(
        &mut self,
        src: &mut S,
        from: usize,
        limit: u64,
        accept: impl Fn(&Envelope) -> bool,
    ) -> Found {
        for p in from..src.len().saturating_sub(4 + FRAME_HEADER_LEN) {
            let Some(len) = candidate_len(src, p, limit) else {
                continue;
            };
            match self.left.checked_sub(len) {
                Some(left) => self.left = left,
                None => return Found::GaveUp,
            }
            if read_record(src, p, limit).is_ok_and(|(env, _, _)| accept(&env)) {
                return Found::At(p);
            }
        }
        Found::Nothing
    }
}

/// The length of the frame at `p` if reading it would compute a checksum:
/// the length fits the limit and the file, and the version byte is ours.
fn candidate_len<S: Source>(src: &mut S, p: usize, limit: u64) -> Option<usize> {
    let len = u32::from_le_bytes(src.get(p..p + 4)?.try_into().ok()?) as usize;
    if len < FRAME_HEADER_LEN || len as u64 > limit.saturating_add(FRAME_HEADER_LEN as u64) {
        return None;
    }
    // The version byte first: reading the whole frame for each offset
    // would move a file's window back and forth.
    if src.get(p + 4..p + 5)?[0] != format::FRAME_VERSION {
        return None;
    }
    (p + 4).checked_add(len).filter(|&end| end <= src.len())?;
    Some(len)
}

/// Why the search after damage at `pos` stopped, for a message.
const GAVE_UP: &str = "gave up looking for a readable record after it (too many candidates to checksum: a crafted file?)";
