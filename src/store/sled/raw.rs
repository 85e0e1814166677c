//! Salvage below sled: the events whose frames are still whole in the bytes
//! of a database's files, for when sled cannot open them (it refuses or
//! panics on damaged pages).
//!
//! sled 0.34 stores a small value as its bytes inside a page of its `db`
//! file (a zstd frame per page or log message in a database the journal
//! compresses; the bytes as they are in one made before) and a large one in
//! a file of its own under `blobs/` (compressed the same way); the journal
//! keeps frames over 7 KiB in segments under `frames/` (each one a zstd
//! frame); the write-ahead log (`wal`) holds the
//! frames of the latest `Synced` appends. An event's frame checks itself: a version byte,
//! the CRC-32 of its body, and a body that decodes as an `Envelope` naming
//! its session and seq. So every offset of those files where a whole frame
//! starts can be found without sled: where the version byte is, decode an
//! envelope, and keep it if the CRC of exactly the bytes it took matches.
//! Older copies of a value (sled rewrites pages) give the same frame again;
//! a session deleted long ago may come back if its pages were not reused
//! (a salvage reports every session it writes).

use std::collections::BTreeMap;
use std::path::Path;

use bincode::Options;

use crate::error::{Error, Result};
use crate::event::Envelope;
use crate::format::{FRAME_HEADER_LEN, FRAME_VERSION, codec};
use crate::model::SessionId;
use crate::store::sled::{frame_files, wal};

/// What a raw scan found.
#[derive(Debug, Default)]
pub(crate) struct RawScan {
    /// Every event found, by session and seq (the first copy of each).
    pub(crate) events: BTreeMap<(SessionId, u64), Envelope>,
    /// Copies of an event found again with other contents (kept: the first).
    pub(crate) conflicts: Vec<(SessionId, u64)>,
    /// Files read, with the events each gave.
    pub(crate) files: Vec<(String, usize)>,
}

impl RawScan {
    fn add(&mut self, env: Envelope) -> bool {
        match self.events.entry((env.session, env.seq)) {
            std::collections::btree_map::Entry::Vacant(v) => {
                v.insert(env);
                true
            }
            std::collections::btree_map::Entry::Occupied(o) => {
                if *o.get() != env {
                    self.conflicts.push((env.session, env.seq));
                }
                false
            }
        }
    }
}

/// The frame starting at `at`, if a whole one does: its envelope and length.
fn frame_at(bytes: &[u8], at: usize, limit: u64) -> Option<(Envelope, usize)> {
    if bytes.get(at) != Some(&FRAME_VERSION) {
        return None;
    }
    let crc = u32::from_le_bytes(bytes.get(at + 1..at + FRAME_HEADER_LEN)?.try_into().ok()?);
    let body = bytes.get(at + FRAME_HEADER_LEN..)?;
    let mut rest = body;
    // The limit bounds what a decode of arbitrary bytes may allocate.
    let env: Envelope = codec(limit.min(body.len() as u64))
        .allow_trailing_bytes()
        .deserialize_from(&mut rest)
        .ok()?;
    let used = body.len() - rest.len();
    (used > 0 && crc32fast::hash(&body[..used]) == crc).then_some((env, FRAME_HEADER_LEN + used))
}

/// The first four bytes of a zstd frame, as sled writes a compressed page.
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xB5, 0x2F, 0xFD];

/// The most a compressed page found by a raw scan may decompress to: sled's
/// pages and log messages are at most a segment (512 KiB in this build); a
/// larger output is bytes that only look like a zstd frame.
const PAGE_MAX: u64 = 8 << 20;

/// Every whole frame in `bytes` and in the compressed pages found among
/// them (each zstd frame, decompressed as far as it is whole), into `scan`;
/// returns how many were new.
fn frames_in(bytes: &[u8], limit: u64, scan: &mut RawScan) -> usize {
    let mut new = plain_frames_in(bytes, limit, scan);
    let mut at = 0;
    while let Some(i) = bytes[at..]
        .windows(ZSTD_MAGIC.len())
        .position(|w| w == ZSTD_MAGIC)
    {
        let page = decompress_prefix(&bytes[at + i..]);
        new += plain_frames_in(&page, limit, scan);
        at += i + 1;
    }
    new
}

/// What the zstd frame at the start of `bytes` decompresses to, as far as
/// it is whole (a damaged frame gives what came before the damage), at most
/// [`PAGE_MAX`] bytes.
fn decompress_prefix(bytes: &[u8]) -> Vec<u8> {
    use std::io::Read;
    let mut out = Vec::new();
    if let Ok(decoder) = zstd::stream::read::Decoder::with_buffer(bytes) {
        let mut decoder = decoder.single_frame().take(PAGE_MAX);
        let mut buf = [0u8; 64 << 10];
        loop {
            match decoder.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => out.extend_from_slice(&buf[..n]),
            }
        }
    }
    out
}

/// Every whole frame in `bytes` as they are, into `scan`; returns how many
/// were new.
fn plain_frames_in(bytes: &[u8], limit: u64, scan: &mut RawScan) -> usize {
    let (mut at, mut new) = (0, 0);
    while at + FRAME_HEADER_LEN < bytes.len() {
        match frame_at(bytes, at, limit) {
            Some((env, len)) => {
                new += usize::from(scan.add(env));
                at += len;
            }
            None => at += 1,
        }
    }
    new
}

fn read(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| Error::io(format!("reading {}", path.display()), e))
}

/// Scans the files of the sled database at `dir` for whole event frames:
/// its `db` file, its blob files, the segments of its large frames
/// (`frames/`) and its write-ahead log (every record that checks, of any
/// generation).
///
/// # Errors
/// [`Error::Io`] if `dir` or its `db` file cannot be read.
pub(crate) fn scan_dir(dir: &Path, limit: u64) -> Result<RawScan> {
    let mut scan = RawScan::default();
    let wal_bytes = std::fs::read(dir.join(wal::FILE)).unwrap_or_default();
    let mut from_log = 0;
    for record in wal::all_records(&wal_bytes) {
        for frame in &record.frames {
            if let Some((env, len)) = frame_at(frame, 0, limit)
                && len == frame.len()
            {
                from_log += usize::from(scan.add(env));
            }
        }
    }
    scan.files.push((wal::FILE.to_owned(), from_log));
    let db = read(&dir.join("db"))?;
    let n = frames_in(&db, limit, &mut scan);
    scan.files.push(("db".to_owned(), n));
    for sub in ["blobs", frame_files::DIR] {
        let Ok(entries) = std::fs::read_dir(dir.join(sub)) else {
            continue;
        };
        let mut blobs: Vec<_> = entries.flatten().map(|e| e.path()).collect();
        blobs.sort();
        for blob in blobs {
            if let Ok(bytes) = std::fs::read(&blob) {
                let n = frames_in(&bytes, limit, &mut scan);
                let name = blob
                    .strip_prefix(dir)
                    .unwrap_or(&blob)
                    .display()
                    .to_string();
                scan.files.push((name, n));
            }
        }
    }
    Ok(scan)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Event;
    use crate::format::encode_frame;

    fn env(session: SessionId, seq: u64) -> Envelope {
        Envelope {
            session,
            seq,
            at: crate::model::now(),
            event: Event::Custom {
                kind: "k".into(),
                payload: seq.to_le_bytes().to_vec(),
            },
        }
    }

    #[test]
    fn whole_frames_are_found_among_noise_and_damaged_ones_are_not() {
        let s = SessionId::new();
        let frames: Vec<Vec<u8>> = (0..5)
            .map(|seq| encode_frame(&env(s, seq), 1 << 20).expect("encode"))
            .collect();
        let mut bytes = vec![1u8, 0, 0, 0, 0, 7, 1, 1];
        let mut third = 0;
        for (seq, f) in frames.iter().enumerate() {
            if seq == 3 {
                third = bytes.len();
            }
            bytes.extend(f);
            bytes.extend([0u8, 1, 2, 3]);
        }
        // Damage the frame of seq 3: one byte of its body.
        bytes[third + 10] ^= 0xff;
        let mut scan = RawScan::default();
        assert_eq!(frames_in(&bytes, 1 << 20, &mut scan), 4);
        let seqs: Vec<u64> = scan.events.keys().map(|k| k.1).collect();
        assert_eq!(seqs, [0, 1, 2, 4]);
        // Found again: nothing new, no conflict.
        assert_eq!(frames_in(&bytes, 1 << 20, &mut scan), 0);
        assert!(scan.conflicts.is_empty());
    }

    #[test]
    fn large_frames_are_found_in_segment_files() {
        let s = SessionId::new();
        let dir = tempfile::tempdir().expect("tempdir");
        // A `db` file of noise: what sled would refuse.
        std::fs::write(dir.path().join("db"), [0x5au8; 4096]).expect("db");
        let big = |seq: u64| {
            let mut e = env(s, seq);
            e.event = Event::Custom {
                kind: "k".into(),
                payload: vec![seq as u8; 20_000],
            };
            encode_frame(&e, 1 << 20).expect("encode")
        };
        for seqs in [0..3u64, 3..6] {
            let files = crate::store::sled::frame_files::FrameFiles::new(dir.path());
            let frames: Vec<Vec<u8>> = seqs.map(big).collect();
            let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
            files.write(&refs).expect("write");
        }
        let scan = scan_dir(dir.path(), 1 << 20).expect("scan");
        let seqs: Vec<u64> = scan.events.keys().map(|k| k.1).collect();
        assert_eq!(seqs, (0..6).collect::<Vec<_>>());
    }

    #[test]
    fn frames_inside_compressed_pages_are_found_up_to_the_damage() {
        let s = SessionId::new();
        let mut page = vec![7u8; 3];
        for seq in 0..40 {
            page.extend(encode_frame(&env(s, seq), 1 << 20).expect("encode"));
        }
        let compressed = zstd::block::compress(&page, 5).expect("compress");
        let mut bytes = vec![0xFDu8, 0x2F, 1, 2, 3];
        bytes.extend(&compressed);
        bytes.extend([9u8; 16]);
        let mut scan = RawScan::default();
        assert_eq!(frames_in(&bytes, 1 << 20, &mut scan), 40);
        // A page cut short gives the frames before the cut, and no panic.
        let cut = &bytes[..5 + compressed.len() / 2];
        let mut scan = RawScan::default();
        let n = frames_in(cut, 1 << 20, &mut scan);
        assert!(n < 40, "{n}");
        let seqs: Vec<u64> = scan.events.keys().map(|k| k.1).collect();
        assert_eq!(seqs, (0..n as u64).collect::<Vec<_>>());
    }
}
