//! Exported journal files (`.ajournal`).
//!
//! ```text
//! b"AGJRNL01"                       magic and format version
//! repeated: u32 LE length ++ frame  one record per event, any sessions
//! ```
//!
//! A reader verifies every frame. A torn or unreadable *last* record (the
//! crash point of a copy cut short) is reported and cut off; damage followed
//! by good records is [`Error::Corruption`] with its byte offset.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use crate::codec::{self, FRAME_HEADER_LEN};
use crate::error::{Error, Result};
use crate::event::Envelope;
use crate::model::SessionId;

/// The first 8 bytes of an exported journal.
pub const MAGIC: &[u8; 8] = b"AGJRNL01";

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
        write!(
            f,
            "torn tail of {} bytes cut off at byte offset {}: {}",
            self.bytes, self.offset, self.reason
        )
    }
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
    if bytes.len() < MAGIC.len() || &bytes[..MAGIC_PREFIX.len()] != MAGIC_PREFIX {
        return Err(Error::NotAJournal {
            path: PathBuf::new(),
            reason: "missing the AGJRNL magic".into(),
        });
    }
    if &bytes[..MAGIC.len()] != MAGIC {
        return Err(Error::Unsupported(format!(
            "exported journal format {:?} is not readable by this build (it reads {:?})",
            String::from_utf8_lossy(&bytes[..MAGIC.len()]),
            String::from_utf8_lossy(MAGIC)
        )));
    }
    let mut out = FileContents::default();
    let mut pos = MAGIC.len();
    let total = bytes.len();
    while pos < total {
        let offset = pos as u64;
        let cut = |reason: String| TailDamage {
            offset,
            bytes: (total - pos) as u64,
            reason,
        };
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
                if let Some(good) = next_record_where(bytes, pos + 1, limit, continues) {
                    return Err(Error::corruption(
                        None,
                        None,
                        Some(offset),
                        format!("{reason} (a readable record follows at byte offset {good})"),
                    ));
                }
                out.tail = Some(cut(reason));
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
    }
    Ok(out)
}

/// Readable records with their byte offsets, and what was dropped.
pub(crate) type Lenient = (Vec<(u64, Envelope)>, Vec<crate::verify::Problem>);

/// Reads every readable record of an exported journal, skipping damaged
/// ones (their length prefix still says where the next one starts). Returns
/// the records with their byte offsets, and what was dropped.
pub(crate) fn parse_lenient(bytes: &[u8], limit: u64) -> Result<Lenient> {
    if bytes.len() < MAGIC.len() || &bytes[..MAGIC_PREFIX.len()] != MAGIC_PREFIX {
        return Err(Error::NotAJournal {
            path: PathBuf::new(),
            reason: "missing the AGJRNL magic".into(),
        });
    }
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
    let mut pos = MAGIC.len();
    while pos < bytes.len() {
        match read_record(bytes, pos, limit) {
            Ok((env, _, next)) => {
                records.push((pos as u64, env));
                pos = next;
            }
            Err(reason) => {
                // Resynchronise on the next readable record: a damaged length
                // prefix must not take the records after it down with it.
                match next_valid_record(bytes, pos + 1, limit) {
                    Some(good) => {
                        dropped.push(dropped_at(
                            pos,
                            format!("{reason}; {} bytes skipped", good - pos),
                        ));
                        pos = good;
                    }
                    None => {
                        dropped.push(dropped_at(
                            pos,
                            format!(
                                "{reason}; the last {} bytes are unreadable",
                                bytes.len() - pos
                            ),
                        ));
                        break;
                    }
                }
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

/// The offset of the first readable record at or after `from`, if any.
/// Cheap on the usual tails (zeros, a cut): most offsets fail on the length
/// or the version byte before any checksum is computed.
fn next_valid_record(bytes: &[u8], from: usize, limit: u64) -> Option<usize> {
    next_record_where(bytes, from, limit, |_| true)
}

/// [`next_valid_record`] for a record that also satisfies `accept`.
fn next_record_where(
    bytes: &[u8],
    from: usize,
    limit: u64,
    accept: impl Fn(&Envelope) -> bool,
) -> Option<usize> {
    (from..bytes.len().saturating_sub(4 + FRAME_HEADER_LEN))
        .find(|&p| read_record(bytes, p, limit).is_ok_and(|(env, _, _)| accept(&env)))
}

/// Writes an exported journal, record by record.
pub(crate) struct FileWriter {
    out: BufWriter<File>,
    path: PathBuf,
    records: u64,
}

impl FileWriter {
    /// Creates (or truncates) the file and writes the magic.
    pub(crate) fn create(path: &Path) -> Result<Self> {
        let f =
            File::create(path).map_err(|e| Error::io(format!("creating {}", path.display()), e))?;
        let mut out = BufWriter::new(f);
        out.write_all(MAGIC)
            .map_err(|e| Error::io(format!("writing {}", path.display()), e))?;
        Ok(Self {
            out,
            path: path.to_owned(),
            records: 0,
        })
    }

    /// Appends one frame.
    pub(crate) fn write_frame(&mut self, frame: &[u8]) -> Result<()> {
        let len = u32::try_from(frame.len()).map_err(|_| Error::TooLarge {
            size: frame.len() as u64,
            limit: u32::MAX as u64,
        })?;
        self.out
            .write_all(&len.to_le_bytes())
            .and_then(|()| self.out.write_all(frame))
            .map_err(|e| Error::io(format!("writing {}", self.path.display()), e))?;
        self.records += 1;
        Ok(())
    }

    /// Flushes and fsyncs the file; returns the number of records written.
    pub(crate) fn finish(self) -> Result<u64> {
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

    fn file_with(n: u64) -> Vec<u8> {
        let sid = SessionId::new();
        let mut bytes = MAGIC.to_vec();
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

    #[test]
    fn truncation_at_every_length_keeps_the_good_prefix() {
        let full = file_with(5);
        let whole = parse(&full, 1 << 20).expect("parse");
        assert_eq!(whole.streams.values().next().map(Vec::len), Some(5));
        assert!(whole.tail.is_none());
        for cut in MAGIC.len()..full.len() {
            let c = parse(&full[..cut], 1 << 20).expect("a truncated file still opens");
            let n = c.streams.values().next().map(Vec::len).unwrap_or(0);
            assert!(n < 5);
            let tail = c.tail.is_some();
            // Either the cut fell exactly on a record boundary, or it is reported.
            assert!(
                tail || cut == MAGIC.len() || n > 0,
                "cut at {cut} unreported"
            );
        }
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
