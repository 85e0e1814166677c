//! Lenient reading of a damaged `.ajournal`, for salvage: every readable
//! record, and the spans skipped.

use super::{
    Found, GAVE_UP, MAGIC, Resync, Trailer, at_trailer, check_trailer, format_of, read_record,
};
use crate::error::{Error, Result};
use crate::event::Envelope;

/// Readable records with their byte offsets, and what was dropped.
pub(crate) type Lenient = (Vec<(u64, Envelope)>, Vec<Skipped>);

/// A span of an exported journal that lenient reading skipped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Skipped {
    /// Byte offset where the unreadable span starts.
    pub offset: u64,
    /// What was wrong, and how much was skipped.
    pub message: String,
}

/// Reads every readable record of an exported journal, skipping damaged
/// ones (their length prefix still says where the next one starts). Returns
/// the records with their byte offsets, and what was dropped.
pub(crate) fn parse_lenient(bytes: &[u8], limit: u64) -> Result<Lenient> {
    match format_of(bytes) {
        // Another version's records may still be readable: try them.
        Err(Error::Unsupported(_)) | Ok(()) => {}
        Err(e) => return Err(e),
    }
    let dropped_at = |offset: usize, message: String| Skipped {
        offset: offset as u64,
        message,
    };
    let mut records = Vec::new();
    let mut dropped = Vec::new();
    let mut resync = Resync::new(bytes.len());
    let mut src = bytes;
    let mut pos = MAGIC.len();
    loop {
        if pos >= bytes.len() {
            dropped.push(dropped_at(
                pos,
                format!(
                    "the file ends after {} readable records without its trailer: records after them may be lost",
                    records.len()
                ),
            ));
            break;
        }
        if at_trailer(&mut src, pos) {
            let crc = crc32fast::hash(&bytes[..pos]);
            let problem = match check_trailer(&mut src, pos, records.len() as u64, crc) {
                Trailer::Whole => None,
                Trailer::Followed(extra) => Some(format!("{extra} bytes after the trailer")),
                Trailer::Cut(reason) | Trailer::Mismatch(reason) => Some(reason),
            };
            dropped.extend(problem.map(|m| dropped_at(pos, m)));
            break;
        }
        match read_record(&mut src, pos, limit) {
            Ok((env, _, next)) => {
                records.push((pos as u64, env));
                pos = next;
            }
            Err(reason) => {
                // Resynchronise on the next readable record: a damaged length
                // prefix must not take the records after it down with it.
                let rest = match resync.next_valid(&mut src, pos + 1, limit) {
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
