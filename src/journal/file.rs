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
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use crate::codec::{self, FRAME_HEADER_LEN};
use crate::error::{Error, Result};
use crate::event::Envelope;
use crate::model::SessionId;

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

/// A damaged tail that was cut off while reading.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TailDamage {
    /// Byte offset where the unreadable tail starts.
    pub offset: u64,
    /// Bytes cut off.
    pub bytes: u64,
    /// Why the tail was unreadable.
    pub reason: String,
}

impl std::fmt::Display for TailDamage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.bytes == 0 {
            // Nothing to cut: the file ends where it should not.
            return write!(
                f,
                "cut short at byte offset {}: {}",
                self.offset, self.reason
            );
        }
        write!(
            f,
            "torn tail of {} bytes cut off at byte offset {}: {}",
            self.bytes, self.offset, self.reason
        )
    }
}

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

/// What a journal file holds.
#[derive(Debug, Default)]
pub(crate) struct FileContents {
    /// Frames per session, seq = index.
    pub streams: BTreeMap<SessionId, Vec<Vec<u8>>>,
    /// The damaged tail, if one was cut off.
    pub tail: Option<TailDamage>,
}

/// True if the file at `path` starts like an exported journal (any version).
pub(crate) fn looks_like_journal_file(path: &Path) -> bool {
    let mut head = [0u8; 6];
    File::open(path)
        .and_then(|mut f| f.read_exact(&mut head))
        .map(|()| &head == MAGIC_PREFIX)
        .unwrap_or(false)
}

/// Reads and verifies a whole exported journal.
pub(crate) fn read_file(path: &Path, limit: u64) -> Result<FileContents> {
    let bytes =
        std::fs::read(path).map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
    parse(&bytes, limit).map_err(|e| match e {
        Error::NotAJournal { reason, .. } => Error::NotAJournal {
            path: path.to_owned(),
            reason,
        },
        other => other,
    })
}

/// Parses the bytes of an exported journal. Never panics, whatever the input.
pub(crate) fn parse(bytes: &[u8], limit: u64) -> Result<FileContents> {
    let format = format_of(bytes)?;
    let mut out = FileContents::default();
    let mut resync = Resync::new(bytes);
    let mut pos = MAGIC.len();
    let mut records = 0u64;
    let total = bytes.len();
    loop {
        let offset = pos as u64;
        let cut = |reason: String| TailDamage {
            offset,
            bytes: (total - pos) as u64,
            reason,
        };
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
                    out.tail = Some(TailDamage {
                        offset: (pos + TRAILER_LEN) as u64,
                        bytes: extra as u64,
                        reason: "bytes after the trailer".into(),
                    })
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

/// Readable records with their byte offsets, and what was dropped.
pub(crate) type Lenient = (Vec<(u64, Envelope)>, Vec<crate::verify::Problem>);

/// Reads every readable record of an exported journal, skipping damaged
/// ones (their length prefix still says where the next one starts). Returns
/// the records with their byte offsets, and what was dropped.
pub(crate) fn parse_lenient(bytes: &[u8], limit: u64) -> Result<Lenient> {
    let format = match format_of(bytes) {
        // A newer format's records may still be readable: try them,
        // expecting no trailer.
        Err(Error::Unsupported(_)) => 1,
        other => other?,
    };
    let unknown = SessionId::from_bytes([0; 16]);
    let dropped_at = |offset: usize, message: String| crate::verify::Problem {
        session: unknown,
        seq: None,
        offset: Some(offset as u64),
        kind: crate::verify::ProblemKind::Damage,
        message,
    };
    let mut records = Vec::new();
    let mut dropped = Vec::new();
    let mut resync = Resync::new(bytes);
    let mut pos = MAGIC.len();
    loop {
        if pos >= bytes.len() {
            if format == 2 {
                dropped.push(dropped_at(
                    pos,
                    format!(
                        "the file ends after {} readable records without its trailer: records after them may be lost",
                        records.len()
                    ),
                ));
            }
            break;
        }
        if format == 2 && at_trailer(bytes, pos) {
            let problem = match check_trailer(bytes, pos, records.len() as u64) {
                Trailer::Whole => None,
                Trailer::Followed(extra) => Some(format!("{extra} bytes after the trailer")),
                Trailer::Cut(reason) | Trailer::Mismatch(reason) => Some(reason),
            };
            dropped.extend(problem.map(|m| dropped_at(pos, m)));
            break;
        }
        match read_record(bytes, pos, limit) {
            Ok((env, _, next)) => {
                records.push((pos as u64, env));
                pos = next;
            }
            Err(reason) => {
                // Resynchronise on the next readable record: a damaged length
                // prefix must not take the records after it down with it.
                let rest = match resync.next_valid(bytes, pos + 1, limit) {
                    Found::At(good) => {
                        dropped.push(dropped_at(
                            pos,
                            format!("{reason}; {} bytes skipped", good - pos),
                        ));
                        pos = good;
                        continue;
                    }
                    Found::Nothing => String::new(),
                    Found::GaveUp => format!(" ({GAVE_UP})"),
                };
                dropped.push(dropped_at(
                    pos,
                    format!(
                        "{reason}; the last {} bytes are unreadable{rest}",
                        bytes.len() - pos
                    ),
                ));
                break;
            }
        }
    }
    Ok((records, dropped))
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
    let env = codec::decode_frame(frame, limit).map_err(|e| e.to_string())?;
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
    (frame[0] == codec::FRAME_VERSION).then_some(len)
}

/// Why the search after damage at `pos` stopped, for a message.
const GAVE_UP: &str = "gave up looking for a readable record after it (too many candidates to checksum: a crafted file?)";

/// Writes an exported journal, record by record, then its trailer.
pub(crate) struct FileWriter {
    out: BufWriter<File>,
    path: PathBuf,
    records: u64,
    /// CRC-32 of every byte written so far.
    crc: crc32fast::Hasher,
}

impl FileWriter {
    /// Creates (or truncates) the file and writes the magic.
    pub(crate) fn create(path: &Path) -> Result<Self> {
        let f =
            File::create(path).map_err(|e| Error::io(format!("creating {}", path.display()), e))?;
        let mut w = Self {
            out: BufWriter::new(f),
            path: path.to_owned(),
            records: 0,
            crc: crc32fast::Hasher::new(),
        };
        w.write(MAGIC)?;
        Ok(w)
    }

    fn write(&mut self, bytes: &[u8]) -> Result<()> {
        self.crc.update(bytes);
        self.out
            .write_all(bytes)
            .map_err(|e| Error::io(format!("writing {}", self.path.display()), e))
    }

    /// Appends one frame.
    pub(crate) fn write_frame(&mut self, frame: &[u8]) -> Result<()> {
        let too_large = || Error::TooLarge {
            size: frame.len() as u64,
            limit: TRAILER_MARK as u64 - 1,
        };
        let len = u32::try_from(frame.len()).map_err(|_| too_large())?;
        if len == TRAILER_MARK {
            return Err(too_large());
        }
        self.write(&len.to_le_bytes())?;
        self.write(frame)?;
        self.records += 1;
        Ok(())
    }

    /// Writes the trailer, flushes and fsyncs the file; returns the number
    /// of records written.
    pub(crate) fn finish(mut self) -> Result<u64> {
        let crc = std::mem::take(&mut self.crc).finalize();
        let mut trailer = [0u8; TRAILER_LEN];
        trailer[..4].copy_from_slice(&TRAILER_MARK.to_le_bytes());
        trailer[4..12].copy_from_slice(&self.records.to_le_bytes());
        trailer[12..].copy_from_slice(&crc.to_le_bytes());
        self.write(&trailer)?;
        let path = self.path.clone();
        let f = self
            .out
            .into_inner()
            .map_err(|e| Error::io(format!("writing {}", path.display()), e.into_error()))?;
        f.sync_all()
            .map_err(|e| Error::io(format!("syncing {}", path.display()), e))?;
        Ok(self.records)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Event;

    /// The records of a format 1 file of `n` events of one session.
    fn v1_file_with(n: u64) -> Vec<u8> {
        let sid = SessionId::new();
        let mut bytes = MAGIC_V1.to_vec();
        for seq in 0..n {
            let env = Envelope {
                session: sid,
                seq,
                at: crate::model::now(),
                event: Event::Custom {
                    kind: "k".into(),
                    payload: vec![seq as u8; 10],
                },
            };
            let frame = codec::encode_frame(&env, 1 << 20).expect("encode");
            bytes.extend_from_slice(&(frame.len() as u32).to_le_bytes());
            bytes.extend_from_slice(&frame);
        }
        bytes
    }

    /// `n` records and a trailer that counts `count` of them.
    fn file_counting(n: u64, count: u64) -> Vec<u8> {
        let mut bytes = v1_file_with(n);
        bytes[..MAGIC.len()].copy_from_slice(MAGIC);
        let crc = crc32fast::hash(&bytes);
        bytes.extend_from_slice(&TRAILER_MARK.to_le_bytes());
        bytes.extend_from_slice(&count.to_le_bytes());
        bytes.extend_from_slice(&crc.to_le_bytes());
        bytes
    }

    /// A format 2 file of `n` events, as the writer makes it.
    fn file_with(n: u64) -> Vec<u8> {
        file_counting(n, n)
    }

    fn events(c: &FileContents) -> usize {
        c.streams.values().next().map(Vec::len).unwrap_or(0)
    }

    #[test]
    fn the_writer_ends_a_file_with_its_trailer() {
        let dir = std::env::temp_dir().join(format!("aj-file-{}", SessionId::new()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("x.ajournal");
        let records = v1_file_with(3);
        let mut w = FileWriter::create(&path).expect("create");
        let mut pos = MAGIC.len();
        while pos < records.len() {
            let len = u32::from_le_bytes(records[pos..pos + 4].try_into().expect("4")) as usize;
            w.write_frame(&records[pos + 4..pos + 4 + len])
                .expect("write");
            pos += 4 + len;
        }
        assert_eq!(w.finish().expect("finish"), 3);
        let written = std::fs::read(&path).expect("read");
        std::fs::remove_dir_all(&dir).expect("cleanup");
        assert_eq!(written[..MAGIC.len()], MAGIC[..]);
        assert_eq!(
            written[MAGIC.len()..written.len() - TRAILER_LEN],
            records[MAGIC.len()..]
        );
        let read = parse(&written, 1 << 20).expect("parse");
        assert_eq!((events(&read), read.tail), (3, None));
    }

    #[test]
    fn a_cut_at_any_length_keeps_the_good_prefix_and_is_reported() {
        let full = file_with(5);
        let whole = parse(&full, 1 << 20).expect("parse");
        assert_eq!((events(&whole), whole.tail.is_none()), (5, true));
        for cut in MAGIC.len()..full.len() {
            let c = parse(&full[..cut], 1 << 20).expect("a truncated file still opens");
            assert!(events(&c) <= 5);
            // Even a cut exactly between two records, or right before the
            // trailer: the trailer is missing.
            let tail = c.tail.unwrap_or_else(|| panic!("cut at {cut} unreported"));
            assert!(tail.offset <= cut as u64, "{tail}");
        }
        let between = parse(&full[..full.len() - TRAILER_LEN], 1 << 20).expect("parse");
        assert_eq!(events(&between), 5);
        let tail = between.tail.expect("reported");
        assert_eq!(tail.bytes, 0);
        assert!(tail.to_string().contains("without its trailer"), "{tail}");
    }

    #[test]
    fn a_format_1_file_is_still_read() {
        let full = v1_file_with(5);
        let whole = parse(&full, 1 << 20).expect("parse");
        assert_eq!((events(&whole), whole.tail), (5, None));
        for cut in MAGIC.len()..full.len() {
            let c = parse(&full[..cut], 1 << 20).expect("a truncated file still opens");
            let n = events(&c);
            assert!(n < 5);
            // Either the cut fell exactly on a record boundary (format 1
            // cannot tell), or it is reported.
            assert!(
                c.tail.is_some() || cut == MAGIC.len() || n > 0,
                "cut at {cut} unreported"
            );
        }
        let (records, dropped) = parse_lenient(&full, 1 << 20).expect("lenient");
        assert_eq!((records.len(), dropped.len()), (5, 0));
    }

    #[test]
    fn a_trailer_that_does_not_match_is_corruption_at_its_offset() {
        let trailer_at = (file_with(4).len() - TRAILER_LEN) as u64;
        // One record fewer than the trailer counts: a whole record gone.
        let missing = file_counting(4, 5);
        assert!(matches!(
            parse(&missing, 1 << 20),
            Err(Error::Corruption { offset: Some(o), ref reason, .. }) if o == trailer_at && reason.contains("counts 5")
        ));
        // A flipped byte of the checksum, or of the count.
        for at in [1, 5] {
            let mut flipped = file_with(4);
            let i = flipped.len() - at;
            flipped[i] ^= 0x08;
            assert!(matches!(
                parse(&flipped, 1 << 20),
                Err(Error::Corruption { offset: Some(o), .. }) if o == trailer_at
            ));
            let (records, dropped) = parse_lenient(&flipped, 1 << 20).expect("lenient");
            assert_eq!((records.len(), dropped.len()), (4, 1));
        }
    }

    #[test]
    fn a_version_byte_damaged_into_format_1s_is_corruption_at_the_magic() {
        // Found by the fuzz target tail_recovery: the file was read as
        // format 1 and its trailer reported as a damaged tail.
        let mut bytes = file_with(3);
        bytes[MAGIC.len() - 1] = MAGIC_V1[MAGIC.len() - 1];
        assert!(matches!(
            parse(&bytes, 1 << 20),
            Err(Error::Corruption { offset: Some(7), ref reason, .. }) if reason.contains("version byte")
        ));
        // A genuine format 1 file is still read, and one cut short still
        // has its tail reported.
        let v1 = v1_file_with(3);
        let c = parse(&v1, 1 << 20).expect("format 1");
        assert_eq!((events(&c), c.tail.is_none()), (3, true));
        let c = parse(&v1[..v1.len() - 3], 1 << 20).expect("cut");
        assert_eq!((events(&c), c.tail.is_some()), (2, true));
    }

    #[test]
    fn bytes_after_the_trailer_are_a_reported_tail() {
        let mut bytes = file_with(2);
        let end = bytes.len() as u64;
        bytes.extend_from_slice(b"garbage");
        let c = parse(&bytes, 1 << 20).expect("parse");
        assert_eq!(events(&c), 2);
        let tail = c.tail.expect("reported");
        assert_eq!((tail.offset, tail.bytes), (end, 7));
    }

    #[test]
    fn salvage_reports_a_missing_trailer() {
        let full = file_with(3);
        let (records, dropped) = parse_lenient(&full, 1 << 20).expect("lenient");
        assert_eq!((records.len(), dropped.len()), (3, 0));
        let cut = &full[..full.len() - TRAILER_LEN];
        let (records, dropped) = parse_lenient(cut, 1 << 20).expect("lenient");
        assert_eq!((records.len(), dropped.len()), (3, 1));
        assert!(dropped[0].message.contains("without its trailer"));
    }

    /// Every fifth byte starts what looks like a 256 KiB record of our
    /// frame version (its checksum fails): a search that checksummed each
    /// would hash ~100 GiB here. The budget stops it after ~129 MiB.
    #[test]
    fn a_file_crafted_to_look_like_records_everywhere_is_read_in_linear_time() {
        let mut bytes = MAGIC.to_vec();
        let mut unit = (256u32 << 10).to_le_bytes().to_vec();
        unit.push(codec::FRAME_VERSION);
        while bytes.len() < 2 << 20 {
            bytes.extend_from_slice(&unit);
        }
        let start = std::time::Instant::now();
        let read = parse(&bytes, 16 << 20).expect("a damaged file still opens");
        assert_eq!(events(&read), 0);
        let tail = read.tail.expect("reported");
        assert!(tail.reason.contains("gave up"), "{tail}");
        assert_eq!(tail.offset, MAGIC.len() as u64);
        let (records, dropped) = parse_lenient(&bytes, 16 << 20).expect("lenient");
        assert!(records.is_empty());
        assert!(dropped[0].message.contains("gave up"), "{:?}", dropped[0]);
        let took = start.elapsed();
        assert!(took < std::time::Duration::from_secs(30), "{took:?}");
    }

    /// The budget is never near for real damage: records after a garbage
    /// region are still found, by salvage and by the strict reader.
    #[test]
    fn records_after_a_region_of_random_garbage_are_still_found() {
        let good = file_with(3);
        let trailer = good.len() - TRAILER_LEN;
        let first_end =
            MAGIC.len() + 4 + u32::from_le_bytes(good[8..12].try_into().expect("4")) as usize;
        // The first record's bytes replaced by 64 KiB of pseudo-random ones.
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut bytes = MAGIC.to_vec();
        for _ in 0..(64 << 10) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            bytes.push(x as u8);
        }
        bytes.extend_from_slice(&good[first_end..trailer]);
        let (records, dropped) = parse_lenient(&bytes, 16 << 20).expect("lenient");
        assert_eq!(records.len(), 2, "{dropped:?}");
        assert!(!dropped.iter().any(|d| d.message.contains("gave up")));
    }

    #[test]
    fn damage_before_good_records_is_corruption_with_offset() {
        let mut bytes = file_with(3);
        let at = MAGIC.len() + 4 + 7; // inside the first frame's body
        bytes[at] ^= 0x40;
        match parse(&bytes, 1 << 20) {
            Err(Error::Corruption {
                offset: Some(o), ..
            }) => assert_eq!(o, MAGIC.len() as u64),
            other => panic!("expected corruption, got {other:?}"),
        }
    }

    #[test]
    fn future_version_and_garbage_are_refused() {
        let mut bytes = file_with(1);
        bytes[7] = b'9';
        assert!(matches!(parse(&bytes, 1 << 20), Err(Error::Unsupported(_))));
        assert!(matches!(
            parse(b"hello world", 1 << 20),
            Err(Error::NotAJournal { .. })
        ));
    }
}
