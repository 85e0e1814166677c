//! The acknowledgement log (`<db>/acks`): the journal's own durable record of what
//! it acknowledged, outside sled.
//!
//! sled 0.34 can roll its own log back after damage, losing its last writes
//! without a report, and a tree inside sled would roll back with them. So
//! every time sled is made durable (a rollover of the write-ahead log, a
//! flush of a journal without one, a clean close), the heads of the streams
//! appended to since the last time are appended to this file and synced;
//! a cut (a torn tail cut off, a session deleted) is recorded *before* it is
//! made. At open, the heads it holds, raised by the write-ahead log's
//! records, are what the journal acknowledged: a stream that sled holds to a
//! lower seq lost acknowledged events, and the open reports it ([`Loss`])
//! instead of passing the shorter stream off as whole.
//!
//! Record layout (integers little-endian): magic `AJA1`, body length (u32),
//! crc32 of the body (u32), body = entry count (u32), then per entry a
//! session id (16 B) and its head (u64: the number of events acknowledged;
//! 0 for a deleted session). The latest record of a session wins. A record
//! that fails its checksum is skipped; reading goes on at the next magic.
//! When the file has grown past [`COMPACT_BYTES`] and four times what its
//! live entries need, it is rewritten whole (a temporary file renamed over
//! it, the directory synced).

use std::collections::HashMap;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use crate::error::{Error, Result};
use crate::model::SessionId;
use crate::store::fs::sync_dir;

/// The file name inside the database directory.
pub(crate) const FILE: &str = "acks";

const MAGIC: [u8; 4] = *b"AJA1";
const HEADER: usize = 12;
const ENTRY: usize = 16 + 8;

/// The file is rewritten once it is this large (and mostly superseded).
pub(crate) const COMPACT_BYTES: u64 = 1 << 20;

/// Acknowledged events that the store no longer holds: the stream ends at
/// `held` (the number of events the store has), but `acknowledged` events
/// were acknowledged and made durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Loss {
    /// The session.
    pub session: SessionId,
    /// Events the store holds (its next seq).
    pub held: u64,
    /// Events the journal acknowledged.
    pub acknowledged: u64,
}

impl std::fmt::Display for Loss {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "events {}..{} were acknowledged and are missing: lost below the journal \
             (sled rolled back or its files were damaged) and no longer in the write-ahead log",
            self.held, self.acknowledged
        )
    }
}

fn encode(entries: &[(SessionId, u64)], out: &mut Vec<u8>) {
    let mut body = Vec::with_capacity(4 + entries.len() * ENTRY);
    body.extend_from_slice(&(entries.len() as u32).to_le_bytes());
    for (session, head) in entries {
        body.extend_from_slice(session.as_bytes());
        body.extend_from_slice(&head.to_le_bytes());
    }
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
    out.extend_from_slice(&body);
}

/// The record at `at`, if whole and checked, and the offset after it.
fn record_at(bytes: &[u8], at: usize) -> Option<(Vec<(SessionId, u64)>, usize)> {
    if bytes.get(at..at + 4)? != MAGIC {
        return None;
    }
    let len = u32::from_le_bytes(bytes.get(at + 4..at + 8)?.try_into().ok()?) as usize;
    let crc = u32::from_le_bytes(bytes.get(at + 8..at + 12)?.try_into().ok()?);
    let body = bytes.get(at + HEADER..(at + HEADER).checked_add(len)?)?;
    if crc32fast::hash(body) != crc {
        return None;
    }
    let count = u32::from_le_bytes(body.get(..4)?.try_into().ok()?) as usize;
    if body.len() != 4 + count.checked_mul(ENTRY)? {
        return None;
    }
    let entries = body[4..]
        .chunks_exact(ENTRY)
        .map(|e| {
            let id: [u8; 16] = e[..16].try_into().unwrap_or_default();
            let head: [u8; 8] = e[16..].try_into().unwrap_or_default();
            (SessionId::from_bytes(id), u64::from_le_bytes(head))
        })
        .collect();
    Some((entries, at + HEADER + len))
}

/// The heads a file's bytes record: the latest entry of each session.
pub(crate) fn parse(bytes: &[u8]) -> HashMap<SessionId, u64> {
    let mut heads = HashMap::new();
    let mut at = 0;
    while at + HEADER <= bytes.len() {
        match record_at(bytes, at) {
            Some((entries, next)) => {
                heads.extend(entries);
                at = next;
            }
            None => match bytes[at + 1..].windows(4).position(|w| w == MAGIC) {
                Some(i) => at = at + 1 + i,
                None => break,
            },
        }
    }
    heads
}

struct State {
    /// What the journal acknowledged, per session (0: deleted).
    acked: HashMap<SessionId, u64>,
    /// What the file holds: the latest entry of each session.
    recorded: HashMap<SessionId, u64>,
    /// Sessions whose head changed since the last record.
    dirty: Vec<SessionId>,
    /// Bytes of the file.
    len: u64,
}

/// The acknowledgement log of one database, and the heads acknowledged since.
pub(crate) struct AckLog {
    dir: PathBuf,
    path: PathBuf,
    state: Mutex<State>,
    /// Held while the file is written: one writer at a time, records whole.
    file: Mutex<Option<File>>,
}

impl AckLog {
    /// Reads the log in `dir` (none yet: nothing acknowledged).
    ///
    /// # Errors
    /// [`Error::Io`] if it exists and cannot be read.
    pub(crate) fn open(dir: &Path) -> Result<AckLog> {
        let path = dir.join(FILE);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(Error::io(format!("reading {}", path.display()), e)),
        };
        Ok(AckLog {
            dir: dir.to_owned(),
            path,
            state: Mutex::new(State {
                acked: parse(&bytes),
                recorded: parse(&bytes),
                dirty: Vec::new(),
                len: bytes.len() as u64,
            }),
            file: Mutex::new(None),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Plain maps, changed one entry at a time: nothing half-done to refuse.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The acknowledged heads, as read at open and raised since.
    pub(crate) fn acknowledged(&self) -> HashMap<SessionId, u64> {
        self.lock().acked.clone()
    }

    /// Raises the acknowledged head of `session` to at least `head`.
    pub(crate) fn raise(&self, session: SessionId, head: u64) {
        let mut s = self.lock();
        let entry = s.acked.entry(session).or_insert(0);
        if head > *entry {
            *entry = head;
            s.dirty.push(session);
        }
    }

    /// The entries to record next: the dirty sessions with their heads.
    /// Taken *before* sled is made durable, so that every event they count
    /// is covered by it.
    pub(crate) fn take_dirty(&self) -> Vec<(SessionId, u64)> {
        let mut s = self.lock();
        let mut dirty = std::mem::take(&mut s.dirty);
        dirty.sort_unstable();
        dirty.dedup();
        dirty
            .into_iter()
            .map(|id| (id, s.acked.get(&id).copied().unwrap_or(0)))
            .collect()
    }

    /// Puts back entries whose record could not be written.
    pub(crate) fn untake(&self, entries: &[(SessionId, u64)]) {
        self.lock().dirty.extend(entries.iter().map(|(id, _)| *id));
    }

    /// Sets the head of `session` to `head` (a cut, or 0 for a deletion)
    /// and records it durably at once, before the cut is made.
    pub(crate) fn lower(&self, session: SessionId, head: u64) -> Result<()> {
        self.lock().acked.insert(session, head);
        self.record(&[(session, head)])
    }

    /// Appends a record of `entries` and syncs it; rewrites the file whole
    /// when it has grown past what it needs.
    pub(crate) fn record(&self, entries: &[(SessionId, u64)]) -> Result<()> {
        if entries.is_empty() {
            return Ok(());
        }
        let mut file = self.file.lock().unwrap_or_else(|p| p.into_inner());
        let (len, live) = {
            let mut s = self.lock();
            s.recorded.extend(entries.iter().copied());
            (
                s.len,
                s.recorded.values().filter(|h| **h > 0).count() as u64,
            )
        };
        if len > COMPACT_BYTES && len > 4 * (HEADER as u64 + 4 + live * ENTRY as u64) {
            *file = None;
            return self.rewrite();
        }
        if file.is_none() {
            let created = !self.path.exists();
            let f = File::options()
                .create(true)
                .append(true)
                .open(&self.path)
                .map_err(|e| Error::io(format!("opening {}", self.path.display()), e))?;
            if created {
                sync_dir(&self.dir)?;
            }
            *file = Some(f);
        }
        let mut bytes = Vec::new();
        encode(entries, &mut bytes);
        let f = file
            .as_mut()
            .ok_or_else(|| Error::Storage("acknowledgement log not open".into()))?;
        f.write_all(&bytes)
            .and_then(|()| f.sync_data())
            .map_err(|e| Error::io(format!("writing {}", self.path.display()), e))?;
        self.lock().len += bytes.len() as u64;
        Ok(())
    }

    /// Writes every live head the file holds to a new file and renames it
    /// over the log. (Not the in-memory heads: those raised since the last
    /// `take_dirty` may count events not yet durable.)
    fn rewrite(&self) -> Result<()> {
        let mut entries: Vec<(SessionId, u64)> = self
            .lock()
            .recorded
            .iter()
            .filter(|(_, h)| **h > 0)
            .map(|(id, h)| (*id, *h))
            .collect();
        entries.sort_unstable();
        let mut bytes = Vec::new();
        encode(&entries, &mut bytes);
        let tmp = self.dir.join(format!("{FILE}.tmp"));
        let io = |what: &str, e| Error::io(format!("{what} {}", tmp.display()), e);
        let mut f = File::create(&tmp).map_err(|e| io("creating", e))?;
        f.write_all(&bytes)
            .and_then(|()| f.sync_data())
            .map_err(|e| io("writing", e))?;
        std::fs::rename(&tmp, &self.path).map_err(|e| io("renaming", e))?;
        sync_dir(&self.dir)?;
        let mut s = self.lock();
        s.len = bytes.len() as u64;
        s.recorded.retain(|_, h| *h > 0);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_latest_record_of_a_session_wins_and_damage_is_skipped() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (a, b) = (SessionId::new(), SessionId::new());
        let heads = AckLog::open(dir.path()).expect("open");
        heads.raise(a, 5);
        heads.raise(b, 3);
        heads.raise(a, 4); // lower: no change
        let first = heads.take_dirty();
        assert_eq!(first.len(), 2);
        heads.record(&first).expect("record");
        heads.lower(b, 0).expect("lower");
        heads.raise(a, 9);
        heads.record(&heads.take_dirty()).expect("record");
        let bytes = std::fs::read(dir.path().join(FILE)).expect("read");
        let got = parse(&bytes);
        assert_eq!((got[&a], got[&b]), (9, 0));
        // Damage the middle record: the others still read.
        let mut damaged = bytes.clone();
        let second = HEADER + 4 + 2 * ENTRY;
        damaged[second + HEADER + 4] ^= 1;
        let got = parse(&damaged);
        assert_eq!((got[&a], got[&b]), (9, 3));
        assert_eq!(
            AckLog::open(dir.path()).expect("reopen").acknowledged()[&a],
            9
        );
    }

    #[test]
    fn a_grown_log_is_rewritten_with_its_live_heads() {
        let dir = tempfile::tempdir().expect("tempdir");
        let heads = AckLog::open(dir.path()).expect("open");
        let ids: Vec<SessionId> = (0..3).map(|_| SessionId::new()).collect();
        let mut n = 0;
        while heads.lock().len <= COMPACT_BYTES {
            n += 1;
            for id in &ids {
                heads.raise(*id, n);
            }
            heads.record(&heads.take_dirty()).expect("record");
        }
        heads.lower(ids[2], 0).expect("lower"); // rewrites
        let size = std::fs::metadata(dir.path().join(FILE))
            .expect("size")
            .len();
        assert!(size < 200, "{size}");
        let got = AckLog::open(dir.path()).expect("reopen").acknowledged();
        assert_eq!((got[&ids[0]], got.get(&ids[2])), (n, None));
    }
}
