//! The in-memory store: the same contract as sled, nothing on disk.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, MutexGuard, RwLock};

use crate::error::{Error, Result};
use crate::model::SessionId;
use crate::store::Durability;
use crate::store::{SharedBytes, Store, Visit};

/// Snapshots kept in memory, each session's chain (a whole one, then the
/// deltas on it, by seq): those of the store in memory, and the folds
/// cached for an exported file opened for reading (`store/file.rs`).
#[derive(Default)]
pub(crate) struct SnapshotCache(Mutex<HashMap<SessionId, Vec<(u64, SharedBytes)>>>);

impl SnapshotCache {
    fn lock(&self) -> MutexGuard<'_, HashMap<SessionId, Vec<(u64, SharedBytes)>>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Keeps `frame`, taken after event `seq`, in place of the session's
    /// other ones.
    pub(crate) fn put(&self, session: SessionId, seq: u64, frame: Vec<u8>) {
        self.lock()
            .insert(session, vec![(seq, SharedBytes::from(frame))]);
    }

    /// Keeps `frame`, taken after event `seq`, beside the session's other
    /// ones (in place of one at the same seq).
    pub(crate) fn add(&self, session: SessionId, seq: u64, frame: Vec<u8>) {
        let mut all = self.lock();
        let chain = all.entry(session).or_default();
        chain.retain(|(s, _)| *s != seq);
        let at = chain.partition_point(|(s, _)| *s < seq);
        chain.insert(at, (seq, SharedBytes::from(frame)));
    }

    /// The session's latest snapshot, if one is kept.
    pub(crate) fn latest(&self, session: SessionId) -> Option<(u64, SharedBytes)> {
        self.lock().get(&session).and_then(|c| c.last().cloned())
    }

    /// The seqs of the session's snapshots, oldest first.
    pub(crate) fn seqs(&self, session: SessionId) -> Vec<u64> {
        self.lock()
            .get(&session)
            .map(|c| c.iter().map(|(s, _)| *s).collect())
            .unwrap_or_default()
    }

    /// The session's snapshot taken after event `seq`.
    pub(crate) fn at(&self, session: SessionId, seq: u64) -> Option<SharedBytes> {
        self.lock()
            .get(&session)?
            .iter()
            .find(|(s, _)| *s == seq)
            .map(|(_, f)| f.clone())
    }

    /// Forgets the session's snapshot.
    pub(crate) fn remove(&self, session: SessionId) {
        self.lock().remove(&session);
    }
}

/// Keeps frames in memory. Used by `Journal::memory()` and by tests.
#[derive(Default)]
pub struct MemoryStore {
    streams: RwLock<BTreeMap<SessionId, Vec<Vec<u8>>>>,
    snapshots: SnapshotCache,
    records: Mutex<crate::store::records::RecordMap>,
}

impl MemoryStore {
    /// An empty, writable store.
    pub fn new() -> Self {
        Self::default()
    }
}

impl Store for MemoryStore {
    fn kind(&self) -> &'static str {
        "memory"
    }

    fn append(&self, session: SessionId, expected: u64, frames: &[Vec<u8>]) -> Result<()> {
        let mut streams = self.streams.write().unwrap_or_else(|p| p.into_inner());
        let stream = streams.entry(session).or_default();
        let found = stream.len() as u64;
        if found != expected {
            if stream.is_empty() {
                streams.remove(&session);
            }
            return Err(Error::Conflict {
                session,
                expected,
                found,
            });
        }
        stream.extend(frames.iter().cloned());
        if stream.is_empty() {
            streams.remove(&session);
        }
        Ok(())
    }

    fn len(&self, session: SessionId) -> Result<Option<u64>> {
        let streams = self.streams.read().unwrap_or_else(|p| p.into_inner());
        Ok(streams.get(&session).map(|s| s.len() as u64))
    }

    fn scan(
        &self,
        session: SessionId,
        from: u64,
        to: u64,
        visit: &mut dyn FnMut(u64, &[u8]) -> Result<Visit>,
    ) -> Result<()> {
        let streams = self.streams.read().unwrap_or_else(|p| p.into_inner());
        let Some(stream) = streams.get(&session) else {
            return Ok(());
        };
        let end = to.min(stream.len() as u64);
        let mut seq = from;
        while seq < end {
            let frame = &stream[seq as usize];
            if visit(seq, frame)?.is_break() {
                break;
            }
            seq += 1;
        }
        Ok(())
    }

    fn sessions(&self) -> Result<Vec<SessionId>> {
        let streams = self.streams.read().unwrap_or_else(|p| p.into_inner());
        Ok(streams.keys().copied().collect())
    }

    fn truncate(&self, session: SessionId, from: u64) -> Result<()> {
        let mut streams = self.streams.write().unwrap_or_else(|p| p.into_inner());
        if let Some(s) = streams.get_mut(&session) {
            s.truncate(from as usize);
            if s.is_empty() {
                streams.remove(&session);
            }
        }
        Ok(())
    }

    fn put_snapshot(&self, session: SessionId, seq: u64, frame: Vec<u8>) -> Result<()> {
        self.snapshots.put(session, seq, frame);
        Ok(())
    }

    fn latest_snapshot(&self, session: SessionId) -> Result<Option<(u64, SharedBytes)>> {
        Ok(self.snapshots.latest(session))
    }

    fn keeps_snapshot_chains(&self) -> bool {
        true
    }

    fn add_snapshot(&self, session: SessionId, seq: u64, frame: Vec<u8>) -> Result<()> {
        self.snapshots.add(session, seq, frame);
        Ok(())
    }

    fn snapshot_seqs(&self, session: SessionId) -> Result<Vec<u64>> {
        Ok(self.snapshots.seqs(session))
    }

    fn snapshot_at(&self, session: SessionId, seq: u64) -> Result<Option<SharedBytes>> {
        Ok(self.snapshots.at(session, seq))
    }

    fn delete_session(&self, session: SessionId) -> Result<()> {
        self.streams
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&session);
        self.snapshots.remove(session);
        Ok(())
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

    fn records(&self) -> Result<Vec<(String, String, Vec<u8>)>> {
        let records = self.records.lock().unwrap_or_else(|p| p.into_inner());
        Ok(crate::store::records::list(&records))
    }

    fn write_records(&self, writes: &[(String, String, Option<Vec<u8>>)]) -> Result<()> {
        crate::store::records::check(writes)?;
        let mut records = self.records.lock().unwrap_or_else(|p| p.into_inner());
        crate::store::records::apply(&mut records, writes);
        Ok(())
    }
}
