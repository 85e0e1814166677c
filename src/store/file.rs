//! An exported `.ajournal` file opened for reading, in place: one pass
//! verifies it and finds where each frame is (12 bytes per event); reads
//! then fetch frames from the file. Memory does not grow with the file's
//! size, only with its number of events.

use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

use crate::error::{Error, Result};
use crate::format::ajournal::{FileIndex, FrameAt};
use crate::model::SessionId;
use crate::store::memory::SnapshotCache;
use crate::store::{Durability, SharedBytes, Store, Visit};

/// Frames read with one `pread` at most (a run of frames that follow one
/// another in the file, or one larger frame).
const READ_AT_ONCE: u64 = 1 << 20;

/// A read-only store over an exported journal file.
pub(crate) struct FileStore {
    file: File,
    path: PathBuf,
    streams: BTreeMap<SessionId, Vec<FrameAt>>,
    /// Snapshots the journal takes of folds it made (a cache, in memory).
    snapshots: SnapshotCache,
}

fn read_only() -> Error {
    Error::Unsupported("this journal is read-only (an exported file)".into())
}

impl FileStore {
    /// The store of `file`, whose frames `index` found.
    pub(crate) fn new(file: File, path: PathBuf, index: FileIndex) -> Self {
        Self {
            file,
            path,
            streams: index.streams,
            snapshots: SnapshotCache::default(),
        }
    }

    /// Reads `len` bytes at `offset`; a file that changed since it was
    /// verified and no longer holds them is damage.
    fn read(&self, session: SessionId, seq: u64, offset: u64, len: usize) -> Result<Vec<u8>> {
        let mut buf = vec![0u8; len];
        self.file.read_exact_at(&mut buf, offset).map_err(|e| {
            if e.kind() == std::io::ErrorKind::UnexpectedEof {
                Error::corruption(
                    Some(session),
                    Some(seq),
                    Some(offset),
                    format!(
                        "{} is shorter than when it was opened: it changed since",
                        self.path.display()
                    ),
                )
            } else {
                Error::io(
                    format!("reading {} at byte offset {offset}", self.path.display()),
                    e,
                )
            }
        })?;
        Ok(buf)
    }

    /// Calls `visit` with each frame from `from` to `to`, reading runs of
    /// adjacent frames together.
    fn each_frame(
        &self,
        session: SessionId,
        from: u64,
        to: u64,
        visit: &mut dyn FnMut(u64, &[u8]) -> Result<Visit>,
    ) -> Result<()> {
        let Some(frames) = self.streams.get(&session) else {
            return Ok(());
        };
        let end = to.min(frames.len() as u64) as usize;
        let mut i = (from as usize).min(end);
        while i < end {
            // A run: frames that follow one another (each after its 4-byte
            // length prefix), up to READ_AT_ONCE bytes (at least one frame).
            let first = frames[i];
            let mut j = i + 1;
            let mut run_end = first.offset + u64::from(first.len);
            while j < end {
                let next = frames[j];
                let next_end = next.offset + u64::from(next.len);
                if next.offset != run_end + 4 || next_end - first.offset > READ_AT_ONCE {
                    break;
                }
                run_end = next_end;
                j += 1;
            }
            let bytes = self.read(
                session,
                i as u64,
                first.offset,
                (run_end - first.offset) as usize,
            )?;
            for (k, at) in frames[i..j].iter().enumerate() {
                let start = (at.offset - first.offset) as usize;
                let frame = &bytes[start..start + at.len as usize];
                if visit((i + k) as u64, frame)?.is_break() {
                    return Ok(());
                }
            }
            i = j;
        }
        Ok(())
    }
}

impl Store for FileStore {
    fn kind(&self) -> &'static str {
        "file"
    }

    fn append(&self, _session: SessionId, _expected: u64, _frames: &[Vec<u8>]) -> Result<()> {
        Err(read_only())
    }

    fn len(&self, session: SessionId) -> Result<Option<u64>> {
        Ok(self.streams.get(&session).map(|s| s.len() as u64))
    }

    fn scan(
        &self,
        session: SessionId,
        from: u64,
        to: u64,
        visit: &mut dyn FnMut(u64, &[u8]) -> Result<Visit>,
    ) -> Result<()> {
        self.each_frame(session, from, to, visit)
    }

    fn sessions(&self) -> Result<Vec<SessionId>> {
        Ok(self.streams.keys().copied().collect())
    }

    fn truncate(&self, _session: SessionId, _from: u64) -> Result<()> {
        Err(read_only())
    }

    fn put_snapshot(&self, session: SessionId, seq: u64, frame: Vec<u8>) -> Result<()> {
        self.snapshots.put(session, seq, frame);
        Ok(())
    }

    fn latest_snapshot(&self, session: SessionId) -> Result<Option<(u64, SharedBytes)>> {
        Ok(self.snapshots.latest(session))
    }

    fn delete_session(&self, _session: SessionId) -> Result<()> {
        Err(read_only())
    }

    fn drop_snapshots(&self, session: SessionId) -> Result<()> {
        self.snapshots.remove(session);
        Ok(())
    }

    fn flush(&self, _level: Durability) -> Result<()> {
        Ok(())
    }

    fn size_on_disk(&self) -> Result<u64> {
        Ok(0)
    }

    fn read_only(&self) -> bool {
        true
    }
}
