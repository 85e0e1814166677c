//! Large event frames of the sled store, kept in segment files of their own.
//!
//! An event frame over [`INLINE_MAX`](crate::store::sled::snapfiles::INLINE_MAX)
//! bytes is appended to a segment file, `<db>/frames/<n, 20 digits>.seg`,
//! and the `events` tree holds a pointer to it instead of the frame:
//! [`MARKER`] (never a frame's version byte), the segment's number, the
//! offset, the bytes stored and the frame's length (u64 little-endian
//! each).
//!
//! Why: sled 0.34 writes a tree node over 128 KiB (a quarter of its
//! segment) to a blob file of its own, and syncs its log, which points to
//! that file, without syncing the file (its flusher does so every 500 ms).
//! A power cut between the two left a pointer to a blob that was not there,
//! and when the blob held a node, sled refused the whole database. A leaf
//! holds at most 17 values, so with no value over 7 KiB no node reaches the
//! threshold and sled writes no blob.
//!
//! Durability: the segment is synced (and, for a new segment, its name in
//! the directory) *before* any pointer to it is inserted into sled, so that
//! no sync of sled, its own included, can make a pointer durable before the
//! bytes it names. One sync covers every large frame of an insert batch.
//! A crash between the write and the insert leaves bytes no pointer names:
//! the next append goes after them. The bytes of a deleted or cut session
//! stay in their segment until `compact` writes a new database.
//!
//! The store writes each frame as one zstd frame (level 1), which the
//! salvage scan finds as it finds sled's compressed pages. Segments also hold the
//! compressed blocks of events (`runs.rs`), written by the sealer with one
//! sync per seal.

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use crate::error::{Error, Result};
use crate::model::SessionId;
use crate::store::fs::sync_dir;
use crate::store::sled::runs::BlockPointer;

/// The directory of segment files, inside the database directory.
pub(crate) const DIR: &str = "frames";

/// A segment takes no more appends once it is this large.
const SEGMENT_MAX: u64 = 64 << 20;

/// First byte of a pointer to a frame (stored compressed).
const MARKER: u8 = 0xFB;

/// Length of a pointer: the marker and four u64.
const POINTER_LEN: usize = 33;

/// The zstd level of a compressed frame and of a block: level 1
/// compresses the benchmark's agent steps as well as level 3 does, at
/// twice the speed, and decompression costs the same.
const LEVEL: i32 = 1;

/// True if a value of the `events` tree is a pointer to a segment.
pub(crate) fn is_pointer(value: &[u8]) -> bool {
    value.len() == POINTER_LEN && value[0] == MARKER
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut n = [0u8; 8];
    n.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(n)
}

fn file_name(number: u64) -> String {
    format!("{number:020}.seg")
}

fn parse_name(name: &str) -> Option<u64> {
    let stem = name.strip_suffix(".seg")?;
    (stem.len() == 20).then(|| stem.parse().ok())?
}

/// The segment appends go to.
struct Writer {
    number: u64,
    file: File,
    len: u64,
}

/// The segment files of one database.
pub(crate) struct FrameFiles {
    dir: PathBuf,
    /// The segment appends go to, once one was opened.
    writer: Mutex<Option<Writer>>,
    /// Segments opened for reading.
    readers: RwLock<HashMap<u64, Arc<File>>>,
}

impl FrameFiles {
    /// The segment files of the database at `db_path`.
    pub(crate) fn new(db_path: &Path) -> Self {
        FrameFiles {
            dir: db_path.join(DIR),
            writer: Mutex::new(None),
            readers: RwLock::new(HashMap::new()),
        }
    }

    fn path(&self, number: u64) -> PathBuf {
        self.dir.join(file_name(number))
    }

    /// The numbers of the segments there are, in order.
    fn numbers(&self) -> Vec<u64> {
        let mut found: Vec<u64> = std::fs::read_dir(&self.dir)
            .map(|d| {
                d.flatten()
                    .filter_map(|e| parse_name(e.file_name().to_str()?))
                    .collect()
            })
            .unwrap_or_default();
        found.sort_unstable();
        found
    }

    /// The segment to append `more` bytes to: the open one, else the last
    /// one there is while it has room, else a new one whose name is durable
    /// (with its folder's) before this returns.
    fn writer<'a>(&self, slot: &'a mut Option<Writer>, more: u64) -> Result<&'a mut Writer> {
        if slot
            .as_ref()
            .is_some_and(|w| w.len + more > SEGMENT_MAX && w.len > 0)
        {
            *slot = None;
        }
        if slot.is_none() {
            let io =
                |what: &str, path: &Path, e| Error::io(format!("{what} {}", path.display()), e);
            let last = self.numbers().last().copied();
            let reuse = last.and_then(|n| {
                let path = self.path(n);
                let file = File::options().read(true).write(true).open(&path).ok()?;
                let len = file.metadata().ok()?.len();
                (len + more <= SEGMENT_MAX).then_some(Writer {
                    number: n,
                    file,
                    len,
                })
            });
            let w = match reuse {
                // Its name was made durable by the process that made it,
                // unless that one died first: made so once more.
                Some(w) => {
                    sync_dir(&self.dir)?;
                    w
                }
                None => {
                    if !self.dir.is_dir() {
                        std::fs::create_dir_all(&self.dir)
                            .map_err(|e| io("creating", &self.dir, e))?;
                        if let Some(parent) = self.dir.parent() {
                            sync_dir(parent)?;
                        }
                    }
                    let number = last.map_or(1, |n| n + 1);
                    let path = self.path(number);
                    let file = File::options()
                        .read(true)
                        .write(true)
                        .create_new(true)
                        .open(&path)
                        .map_err(|e| io("creating", &path, e))?;
                    sync_dir(&self.dir)?;
                    Writer {
                        number,
                        file,
                        len: 0,
                    }
                }
            };
            *slot = Some(w);
        }
        slot.as_mut()
            .ok_or_else(|| Error::Storage("no segment to write frames to".into()))
    }

    /// Appends `pieces` to a segment with one write and one sync; returns
    /// the segment's number and each piece's offset in it. Once this
    /// returns, the bytes are durable.
    fn append_synced(&self, pieces: &[&[u8]]) -> Result<(u64, Vec<u64>)> {
        let total: u64 = pieces.iter().map(|p| p.len() as u64).sum();
        let mut slot = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let w = self.writer(&mut slot, total)?;
        let mut buf = Vec::with_capacity(usize::try_from(total).unwrap_or(0));
        let mut offsets = Vec::with_capacity(pieces.len());
        for p in pieces {
            offsets.push(w.len + buf.len() as u64);
            buf.extend_from_slice(p);
        }
        let path = self.path(w.number);
        let written = w
            .file
            .write_all_at(&buf, w.len)
            .and_then(|()| w.file.sync_data());
        if let Err(e) = written {
            // What was written past `len` is named by no pointer; the next
            // write starts a new segment rather than trust this one.
            *slot = None;
            return Err(Error::io(format!("writing to {}", path.display()), e));
        }
        w.len += buf.len() as u64;
        Ok((w.number, offsets))
    }

    /// Appends `frames` to a segment and syncs it; returns their pointers,
    /// in order. Once this returns, the bytes every pointer names are
    /// durable.
    pub(crate) fn write(&self, frames: &[&[u8]]) -> Result<Vec<Vec<u8>>> {
        let packed = frames
            .iter()
            .map(|f| {
                zstd::block::compress(f, LEVEL)
                    .map_err(|e| Error::io("compressing a frame".to_owned(), e))
            })
            .collect::<Result<Vec<_>>>()?;
        let stored: Vec<&[u8]> = packed.iter().map(Vec::as_slice).collect();
        let (number, offsets) = self.append_synced(&stored)?;
        Ok(frames
            .iter()
            .zip(stored.iter().zip(offsets))
            .map(|(frame, (b, offset))| {
                let mut v = Vec::with_capacity(POINTER_LEN);
                v.push(MARKER);
                for n in [number, offset, b.len() as u64, frame.len() as u64] {
                    v.extend_from_slice(&n.to_le_bytes());
                }
                v
            })
            .collect())
    }

    /// Compresses each `(count, body)` (a block of `count` events, see
    /// `runs.rs`) as one zstd frame, appends them to a segment and syncs
    /// it; returns their pointers, in order. Once this returns, the bytes
    /// every pointer names are durable.
    pub(crate) fn write_blocks(&self, blocks: &[(u32, Vec<u8>)]) -> Result<Vec<BlockPointer>> {
        let packed = blocks
            .iter()
            .map(|(_, body)| {
                zstd::block::compress(body, LEVEL)
                    .map_err(|e| Error::io("compressing a block".to_owned(), e))
            })
            .collect::<Result<Vec<_>>>()?;
        let refs: Vec<&[u8]> = packed.iter().map(Vec::as_slice).collect();
        let (segment, offsets) = self.append_synced(&refs)?;
        Ok(blocks
            .iter()
            .zip(packed.iter().zip(offsets))
            .map(|((count, body), (p, offset))| BlockPointer {
                count: *count,
                segment,
                offset,
                stored: p.len() as u64,
                raw: body.len() as u64,
            })
            .collect())
    }

    /// The body of the block `p` names (see `runs.rs`), decompressed.
    ///
    /// # Errors
    /// [`Error::Corruption`] naming `session`, `seq` (the first event the
    /// reader wanted from it), the segment and the offset, as [`read`](Self::read).
    pub(crate) fn read_block(
        &self,
        session: SessionId,
        seq: u64,
        p: &BlockPointer,
    ) -> Result<Vec<u8>> {
        self.read_stored(session, seq, p.segment, p.offset, p.stored, p.raw)
    }

    fn reader(&self, number: u64) -> Result<Arc<File>> {
        if let Some(f) = self
            .readers
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(&number)
        {
            return Ok(f.clone());
        }
        let path = self.path(number);
        let f = Arc::new(
            File::open(&path)
                .map_err(|e| Error::io(format!("opening frame segment {}", path.display()), e))?,
        );
        self.readers
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(number, f.clone());
        Ok(f)
    }

    /// The frame a pointer names (its own crc is checked by the caller).
    ///
    /// # Errors
    /// [`Error::Corruption`] naming the session, seq, segment and offset if
    /// the segment is missing or shorter than the pointer says, or the
    /// frame does not decompress to the length it says; nothing is
    /// allocated beyond what the segment holds.
    pub(crate) fn read(&self, session: SessionId, seq: u64, pointer: &[u8]) -> Result<Vec<u8>> {
        self.read_stored(
            session,
            seq,
            u64_at(pointer, 1),
            u64_at(pointer, 9),
            u64_at(pointer, 17),
            u64_at(pointer, 25),
        )
    }

    /// The `len` bytes at `offset` of segment `number`, decompressed to
    /// exactly `frame_len` bytes.
    fn read_stored(
        &self,
        session: SessionId,
        seq: u64,
        number: u64,
        offset: u64,
        len: u64,
        frame_len: u64,
    ) -> Result<Vec<u8>> {
        let path = self.path(number);
        let bad = |what: String| {
            Error::corruption(
                Some(session),
                Some(seq),
                Some(offset),
                format!("frame segment {}: {what}", path.display()),
            )
        };
        let f = self.reader(number).map_err(|e| bad(e.to_string()))?;
        let size = f
            .metadata()
            .map_err(|e| Error::io(format!("reading {}", path.display()), e))?
            .len();
        if offset.checked_add(len).is_none_or(|end| end > size) {
            return Err(bad(format!(
                "{len} bytes at byte {offset} are past its end ({size} bytes)"
            )));
        }
        let mut buf = vec![0u8; usize::try_from(len).unwrap_or(usize::MAX)];
        f.read_exact_at(&mut buf, offset)
            .map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
        let said = zstd::zstd_safe::get_frame_content_size(&buf);
        let mut frame = Vec::new();
        if said != frame_len
            || usize::try_from(frame_len)
                .ok()
                .is_none_or(|n| frame.try_reserve_exact(n).is_err())
        {
            return Err(bad(format!(
                "the bytes at byte {offset} hold {said} bytes compressed, their pointer says {frame_len}"
            )));
        }
        // One zstd context per thread, kept: making one costs more than
        // decompressing a small block.
        thread_local! {
            static CONTEXT: std::cell::RefCell<zstd::block::Decompressor> =
                std::cell::RefCell::new(zstd::block::Decompressor::new());
        }
        CONTEXT
            .with(|c| c.borrow_mut().decompress_to_buffer(&buf, &mut frame))
            .map_err(|e| bad(format!("the bytes at byte {offset} do not decompress: {e}")))?;
        if frame.len() as u64 != frame_len {
            return Err(bad(format!(
                "the bytes at byte {offset} decompress to {} bytes, their pointer says {frame_len}",
                frame.len()
            )));
        }
        Ok(frame)
    }

    /// The segment files, for a raw scan.
    pub(crate) fn paths(&self) -> Vec<PathBuf> {
        self.numbers().into_iter().map(|n| self.path(n)).collect()
    }

    /// Bytes of the segment files.
    pub(crate) fn size(&self) -> u64 {
        self.paths()
            .iter()
            .filter_map(|p| std::fs::metadata(p).ok())
            .map(|m| m.len())
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames() -> Vec<Vec<u8>> {
        (0..5u8).map(|i| vec![i; 9000 + usize::from(i)]).collect()
    }

    #[test]
    fn frames_read_back_exactly_across_opens() {
        let dir = tempfile::tempdir().expect("tempdir");
        let s = SessionId::new();
        let fs = FrameFiles::new(dir.path());
        let all = frames();
        let refs: Vec<&[u8]> = all.iter().map(|f| f.as_slice()).collect();
        let mut pointers = fs.write(&refs[..2]).expect("write");
        drop(fs);
        // A second handle appends to the same segment, after the first.
        let fs = FrameFiles::new(dir.path());
        pointers.extend(fs.write(&refs[2..]).expect("write"));
        assert_eq!(fs.paths().len(), 1);
        for (i, p) in pointers.iter().enumerate() {
            assert!(is_pointer(p));
            assert_eq!(fs.read(s, i as u64, p).expect("read"), all[i]);
        }
        assert!(fs.size() < 1000, "{}", fs.size());
        // The marker of the pointer to a frame stored as it is, which no
        // build of this format writes: not a pointer.
        let mut plain = pointers[0].clone();
        plain[0] = 0xFC;
        assert!(!is_pointer(&plain));
    }

    #[test]
    fn a_pointer_past_the_end_or_to_a_missing_segment_is_corruption_not_a_panic() {
        let dir = tempfile::tempdir().expect("tempdir");
        let s = SessionId::new();
        let fs = FrameFiles::new(dir.path());
        let f = vec![7u8; 10_000];
        let p = fs.write(&[&f]).expect("write").remove(0);
        let mut long = p.clone();
        long[17..25].copy_from_slice(&u64::MAX.to_le_bytes());
        let mut far = p.clone();
        far[9..17].copy_from_slice(&(u64::MAX - 3).to_le_bytes());
        let mut missing = p.clone();
        missing[1..9].copy_from_slice(&99u64.to_le_bytes());
        for bad in [long, far, missing] {
            let e = fs.read(s, 3, &bad).expect_err("refused");
            assert!(matches!(e, Error::Corruption { .. }), "{e}");
            assert!(e.to_string().contains("frames"), "{e}");
        }
        // A pointer claiming another length of the frame: refused.
        let mut lying = p.clone();
        lying[25..33].copy_from_slice(&10_001u64.to_le_bytes());
        assert!(fs.read(s, 3, &lying).is_err());
    }

    #[test]
    fn a_full_segment_makes_the_next_write_start_another() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fs = FrameFiles::new(dir.path());
        // Pseudo-random (xorshift): stored about as large, compressed.
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let big: Vec<u8> = (0..SEGMENT_MAX / 2 + 1)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        fs.write(&[&big]).expect("write");
        fs.write(&[&big]).expect("write");
        assert_eq!(fs.paths().len(), 2);
        assert_eq!(parse_name("00000000000000000002.seg"), Some(2));
        assert_eq!(parse_name("2.seg"), None);
    }
}
