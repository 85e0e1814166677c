//! Large snapshot frames of the sled store, kept in files of their own.
//!
//! A snapshot frame over [`INLINE_MAX`] bytes is written to
//! `<db>/snapshots/<session>-<seq, 20 digits>.frame`, and the `snapshots`
//! tree holds a pointer to it instead of the frame: [`MARKER`] (never a
//! frame's version byte), the frame's length and the file's (u64
//! little-endian each).
//!
//! Why: sled 0.34 reads a large value by growing a `Vec` (copying it as it
//! grows), checks a crc of its own, then copies it once more into the value
//! it returns, and writes one through as many copies. For the snapshot of a
//! million-event session (about 240 MiB) that was most of the time opening
//! the session took. A file is read with one `read` into the buffer the
//! decoded state then keeps (its message bodies stay in it).
//!
//! The file is compressed (one zstd frame, level 1: a state is mostly
//! message text); reading it decompresses it whole.
//!
//! Crash safety: a file is written under a temporary name and renamed, and
//! its pointer is inserted after the rename; a file that no pointer names
//! (the process died between the two, or after the pointer was replaced)
//! is removed when the database is next opened. The file of a replaced
//! snapshot is removed only after a sled flush has made the new pointer
//! durable. Snapshots are a cache, checked by their frame's crc: a missing,
//! short or damaged file is a rejected snapshot, and the stream is replayed.

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{Error, Result};
use crate::format::SharedBytes;
use crate::model::SessionId;

/// Frames up to this size stay inline in the `snapshots` tree: 7 KiB, so
/// that a leaf of sled's tree (at most 17 values before it splits) stays
/// under sled's blob threshold (a quarter of its 512 KiB segment). sled
/// writes a larger node to a blob file that its log points to, and syncs
/// that file after (or never with) the log: a power cut could keep the
/// pointer and lose the file (`tests/powerloss/known.rs`). At 64 KiB, the
/// leaves of a few sessions' snapshots went over it.
pub(crate) const INLINE_MAX: usize = 7 << 10;

/// First byte of a pointer value (frame versions start at 1 and are small).
const MARKER: u8 = 0xFD;

/// Length of a pointer value: the marker, the frame's length and the
/// file's (u64 each).
const POINTER_LEN: usize = 17;

/// The zstd level of a compressed snapshot file.
const LEVEL: i32 = 1;

/// The directory of snapshot files, inside the database directory.
pub(crate) const DIR: &str = "snapshots";

/// The snapshot files of one database.
pub(crate) struct SnapFiles {
    dir: PathBuf,
    /// Makes temporary names unique within the process.
    tmp: AtomicU64,
}

/// Files from this size on are read by two threads, a half each: most of
/// the cost of reading into fresh memory is the kernel's (faulting pages
/// in, copying), and it is shared.
const PARALLEL_READ_MIN: usize = 4 << 20;

/// Fills `buf` from the start of `f`.
fn read_all(f: &mut File, buf: &mut [u8]) -> std::io::Result<()> {
    #[cfg(unix)]
    if buf.len() >= PARALLEL_READ_MIN {
        use std::os::unix::fs::FileExt;
        let mid = buf.len() / 2;
        let (a, b) = buf.split_at_mut(mid);
        let f = &*f;
        return std::thread::scope(|s| {
            let second = s.spawn(move || f.read_exact_at(b, mid as u64));
            let first = f.read_exact_at(a, 0);
            let second = second
                .join()
                .unwrap_or_else(|_| Err(std::io::Error::other("reader thread panicked")));
            first.and(second)
        });
    }
    f.read_exact(buf)
}

/// True if a value of the `snapshots` tree is a pointer to a file.
pub(crate) fn is_pointer(value: &[u8]) -> bool {
    value.len() == POINTER_LEN && value[0] == MARKER
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

fn file_name(session: SessionId, seq: u64) -> String {
    format!("{session}-{seq:020}.frame")
}

/// The session and seq a file name stands for.
fn parse_name(name: &str) -> Option<(SessionId, u64)> {
    let stem = name.strip_suffix(".frame")?;
    let (session, seq) = stem.rsplit_once('-')?;
    if seq.len() != 20 {
        return None;
    }
    Some((session.parse().ok()?, seq.parse().ok()?))
}

impl SnapFiles {
    /// The snapshot files of the database at `db_path`.
    pub(crate) fn new(db_path: &Path) -> Self {
        SnapFiles {
            dir: db_path.join(DIR),
            tmp: AtomicU64::new(0),
        }
    }

    fn path(&self, session: SessionId, seq: u64) -> PathBuf {
        self.dir.join(file_name(session, seq))
    }

    /// Writes `frame` as the file of snapshot `(session, seq)`; returns the
    /// pointer to store in the tree. With `durable`, the file's data is
    /// synced before it takes its name, and the directory after, so that a
    /// pointer made durable later never names a file a power loss emptied.
    pub(crate) fn write(
        &self,
        session: SessionId,
        seq: u64,
        frame: &[u8],
        durable: bool,
    ) -> Result<Vec<u8>> {
        if !self.dir.is_dir() {
            std::fs::create_dir_all(&self.dir)
                .map_err(|e| Error::io(format!("creating {}", self.dir.display()), e))?;
            // The folder's own name, durable in the database directory
            // before a pointer can name a file in it.
            if durable && let Some(parent) = self.dir.parent() {
                crate::store::fs::sync_dir(parent)?;
            }
        }
        let n = self.tmp.fetch_add(1, Ordering::Relaxed);
        let tmp = self.dir.join(format!(
            ".{}.{}.{n}.tmp",
            file_name(session, seq),
            std::process::id()
        ));
        let path = self.path(session, seq);
        let bytes = zstd::block::compress(frame, LEVEL)
            .map_err(|e| Error::io(format!("compressing snapshot file {}", path.display()), e))?;
        let written = File::create(&tmp)
            .and_then(|mut f| {
                f.write_all(&bytes)?;
                if durable { f.sync_data() } else { Ok(()) }
            })
            .and_then(|()| std::fs::rename(&tmp, &path))
            .and_then(|()| {
                if durable {
                    File::open(&self.dir)?.sync_all()
                } else {
                    Ok(())
                }
            });
        if let Err(e) = written {
            let _ = std::fs::remove_file(&tmp);
            return Err(Error::io(
                format!("writing snapshot file {}", path.display()),
                e,
            ));
        }
        let mut pointer = Vec::with_capacity(POINTER_LEN);
        pointer.push(MARKER);
        pointer.extend_from_slice(&(frame.len() as u64).to_le_bytes());
        pointer.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
        Ok(pointer)
    }

    /// Reads the file a pointer names, checking its length against the
    /// pointer's (the frame's own crc is checked by the caller).
    pub(crate) fn read(&self, session: SessionId, seq: u64, pointer: &[u8]) -> Result<SharedBytes> {
        let path = self.path(session, seq);
        let bad = || Error::corruption(Some(session), Some(seq), None, "bad snapshot pointer");
        if pointer.first() != Some(&MARKER) {
            return Err(bad());
        }
        let frame_len = u64_at(pointer, 1).ok_or_else(bad)?;
        let len = u64_at(pointer, 9).ok_or_else(bad)?;
        let io = |e| Error::io(format!("reading snapshot file {}", path.display()), e);
        let mut f = File::open(&path).map_err(io)?;
        let found = f.metadata().map_err(io)?.len();
        if found != len {
            return Err(Error::corruption(
                Some(session),
                Some(seq),
                None,
                format!(
                    "snapshot file {} is {found} bytes, its pointer says {len}",
                    path.display()
                ),
            ));
        }
        // The length is the file's real size, so the allocation is bounded
        // by what is on disk, whatever the pointer says.
        // Huge pages if big: reading the 240 MiB snapshot of a million-event
        // session took ~100 ms into 4 KiB pages, 46-58 ms into huge ones.
        let mut buf = crate::mem::zeroed(usize::try_from(len).unwrap_or(usize::MAX));
        read_all(&mut f, &mut buf).map_err(io)?;
        // What the zstd frame says it holds must be what the pointer says
        // before anything is allocated for it, and an allocation that fails
        // is an error (not an abort).
        let said = zstd::zstd_safe::get_frame_content_size(&buf);
        // (Huge pages: decompressing a 240 MiB state into 4 KiB pages took
        // as long again as the decompression itself.)
        let room = usize::try_from(frame_len)
            .ok()
            .filter(|_| said == frame_len)
            .and_then(crate::mem::try_with_capacity);
        let Some(mut frame) = room else {
            return Err(Error::corruption(
                Some(session),
                Some(seq),
                None,
                format!(
                    "snapshot file {} holds {said} bytes compressed, its pointer says {frame_len}",
                    path.display()
                ),
            ));
        };
        // Streamed into the reserved (untouched) memory: a file holding less
        // than it claims fills only what it holds.
        zstd::stream::read::Decoder::with_buffer(&buf[..])
            .map(|d| d.single_frame())
            .and_then(|d| d.take(frame_len.saturating_add(1)).read_to_end(&mut frame))
            .map_err(|e| {
                Error::corruption(
                    Some(session),
                    Some(seq),
                    None,
                    format!("snapshot file {} does not decompress: {e}", path.display()),
                )
            })?;
        if frame.len() as u64 != frame_len {
            return Err(bad());
        }
        Ok(SharedBytes::from(frame))
    }

    /// Removes the file of snapshot `(session, seq)`, if it is there.
    pub(crate) fn remove(&self, session: SessionId, seq: u64) -> Result<()> {
        let path = self.path(session, seq);
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Error::io(format!("removing {}", path.display()), e)),
        }
    }

    /// Removes temporary files and every file `referenced` says no pointer
    /// names. Files whose names are not ours are left alone.
    pub(crate) fn clean(&self, referenced: impl Fn(SessionId, u64) -> Result<bool>) -> Result<()> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return Ok(());
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(name) = name.to_str() else {
                continue;
            };
            let stale = if name.starts_with('.') && name.ends_with(".tmp") {
                true
            } else if let Some((session, seq)) = parse_name(name) {
                !referenced(session, seq)?
            } else {
                false
            };
            if stale {
                std::fs::remove_file(entry.path())
                    .map_err(|e| Error::io(format!("removing {}", entry.path().display()), e))?;
            }
        }
        Ok(())
    }

    /// Bytes of the snapshot files.
    pub(crate) fn size(&self) -> u64 {
        std::fs::read_dir(&self.dir)
            .map(|d| {
                d.flatten()
                    .filter_map(|e| e.metadata().ok())
                    .map(|m| m.len())
                    .sum()
            })
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_foreign_names_are_not_ours() {
        let id = SessionId::new();
        assert_eq!(parse_name(&file_name(id, 42)), Some((id, 42)));
        assert_eq!(parse_name(&file_name(id, u64::MAX)), Some((id, u64::MAX)));
        assert_eq!(parse_name("notes.txt"), None);
        assert_eq!(parse_name(&format!("{id}-42.frame")), None);
    }

    #[test]
    fn a_short_file_or_a_bad_pointer_is_an_error_not_a_panic() {
        let dir = tempfile::tempdir().expect("tempdir");
        let files = SnapFiles::new(dir.path());
        let id = SessionId::new();
        let pointer = files.write(id, 7, b"0123456789", true).expect("write");
        assert!(is_pointer(&pointer));
        assert_eq!(&*files.read(id, 7, &pointer).expect("read"), b"0123456789");
        std::fs::write(files.path(id, 7), b"01234").expect("cut");
        let e = files.read(id, 7, &pointer).expect_err("short");
        assert!(e.to_string().contains("5 bytes"), "{e}");
        assert!(files.read(id, 7, &[MARKER]).is_err());
        files.remove(id, 7).expect("remove");
        assert!(files.read(id, 7, &pointer).is_err());
        files.remove(id, 7).expect("removing twice is fine");
    }

    #[test]
    fn a_file_reads_back_exactly_and_a_lying_pointer_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let files = SnapFiles::new(dir.path());
        let id = SessionId::new();
        let frame: Vec<u8> = (0..200_000u32)
            .flat_map(|i| format!("message {} ", i % 97).into_bytes())
            .collect();
        let pointer = files.write(id, 3, &frame, true).expect("write");
        assert!(is_pointer(&pointer));
        assert_eq!(pointer[0], MARKER);
        let on_disk = std::fs::metadata(files.path(id, 3)).expect("file").len();
        assert!(on_disk * 10 < frame.len() as u64, "{on_disk}");
        assert!(*files.read(id, 3, &pointer).expect("read") == *frame);
        // A pointer claiming another length (or a huge one) is refused,
        // with nothing allocated for it.
        for claim in [frame.len() as u64 + 1, u64::MAX / 2] {
            let mut lying = pointer.clone();
            lying[1..9].copy_from_slice(&claim.to_le_bytes());
            let e = files.read(id, 3, &lying).expect_err("lying pointer");
            assert!(e.is_corruption(), "{e}");
        }
        // A damaged file is an error, not a panic.
        let mut bytes = std::fs::read(files.path(id, 3)).expect("read");
        let mid = bytes.len() / 2;
        bytes[mid] ^= 0xff;
        std::fs::write(files.path(id, 3), &bytes).expect("write");
        if let Ok(got) = files.read(id, 3, &pointer) {
            // zstd keeps no checksum of its own here: the frame's crc,
            // checked by the caller, catches what decompresses wrong.
            assert!(*got != *frame);
        }
    }

    #[test]
    fn a_big_file_read_in_two_halves_is_read_exactly() {
        let dir = tempfile::tempdir().expect("tempdir");
        let files = SnapFiles::new(dir.path());
        let id = SessionId::new();
        for len in [
            PARALLEL_READ_MIN,
            PARALLEL_READ_MIN + 1,
            3 * PARALLEL_READ_MIN / 2 + 7,
        ] {
            // Pseudo-random (xorshift): the compressed file is as large.
            let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ len as u64;
            let frame: Vec<u8> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect();
            let pointer = files.write(id, 1, &frame, false).expect("write");
            assert!(
                *files.read(id, 1, &pointer).expect("read") == *frame,
                "{len}"
            );
        }
    }

    #[test]
    fn clean_removes_unreferenced_and_temporary_files_only() {
        let dir = tempfile::tempdir().expect("tempdir");
        let files = SnapFiles::new(dir.path());
        let (a, b) = (SessionId::new(), SessionId::new());
        files.write(a, 1, b"a", false).expect("write");
        files.write(b, 2, b"b", true).expect("write");
        std::fs::write(files.dir.join(".x.tmp"), b"partial").expect("tmp");
        std::fs::write(files.dir.join("README"), b"mine").expect("foreign");
        files.clean(|s, _| Ok(s == a)).expect("clean");
        let mut left: Vec<String> = std::fs::read_dir(&files.dir)
            .expect("dir")
            .flatten()
            .filter_map(|e| e.file_name().into_string().ok())
            .collect();
        left.sort();
        assert_eq!(left, vec![file_name(a, 1), "README".to_owned()]);
    }
}
