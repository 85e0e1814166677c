//! The sled store's snapshots: the tree `snapshots` keyed by session and
//! seq, a frame over `INLINE_MAX` bytes in a file of its own
//! (`store/sled/snapfiles.rs`) with a pointer in the tree; a whole snapshot
//! replaces the session's others, a delta is kept beside them (its chain).

use super::SledStore;
use super::fault::storage;
use crate::error::Result;
use crate::model::SessionId;
use crate::store::SharedBytes;
use crate::store::sled::keys::{key, split_key};
use crate::store::sled::snapfiles::{self, INLINE_MAX};

impl SledStore {
    /// Stores a snapshot frame under its key, after the events it covers
    /// reached sled: inline up to `inline_max` bytes, else in a file of its
    /// own (which in a `Synced` journal survives power loss too) with a
    /// pointer in the tree.
    fn store_frame(
        &self,
        session: SessionId,
        seq: u64,
        frame: Vec<u8>,
        inline_max: usize,
    ) -> Result<()> {
        self.drain()?;
        let value = if frame.len() > inline_max {
            self.snap_files
                .write(session, seq, &frame, self.wal_appends)?
        } else {
            frame
        };
        self.snapshots
            .insert(key(session, seq), value)
            .map_err(|e| storage(e, "writing a snapshot"))?;
        Ok(())
    }

    pub(super) fn put_snapshot_in(
        &self,
        session: SessionId,
        seq: u64,
        frame: Vec<u8>,
    ) -> Result<()> {
        let k = key(session, seq);
        self.store_frame(session, seq, frame, INLINE_MAX)?;
        // Every other snapshot of the session goes: older ones (the chain
        // this one replaces) and any past it (left by a cut tail).
        let others: Vec<(sled::IVec, sled::IVec)> = self
            .snapshots
            .scan_prefix(session.as_bytes())
            .filter(|r| {
                r.as_ref()
                    .map_or(true, |(old, _)| old.as_ref() != k.as_slice())
            })
            .collect::<std::result::Result<_, _>>()
            .map_err(|e| storage(e, "listing snapshots"))?;
        let mut files = Vec::new();
        for (old, v) in others {
            self.snapshots
                .remove(&old)
                .map_err(|e| storage(e, "removing an old snapshot"))?;
            if snapfiles::is_pointer(&v)
                && let Some((_, old_seq)) = split_key(&old)
            {
                files.push(old_seq);
            }
        }
        if !files.is_empty() {
            // The new pointer must be durable before the old file goes: a
            // crash would otherwise bring back a pointer to nothing (and
            // the stream would be replayed from 0). A `Synced` journal
            // makes it survive power loss as well.
            if self.wal_appends {
                self.sled_durable()?;
            } else {
                self.flush_sled()?;
            }
            for old_seq in files {
                self.snap_files.remove(session, old_seq)?;
            }
        }
        Ok(())
    }

    pub(super) fn add_snapshot_in(
        &self,
        session: SessionId,
        seq: u64,
        frame: Vec<u8>,
    ) -> Result<()> {
        // Always a file of its own, sled holding its pointer: a chain's
        // deltas would otherwise pile up in sled's tree and log.
        self.store_frame(session, seq, frame, 0)?;
        // A snapshot is also a point where sled is made durable (as a
        // whole snapshot replacing a file is): the power-loss harness
        // found that fewer such points leave sled more unsynced writes to
        // lose in the way sled cannot recover from.
        if self.wal_appends {
            self.sled_durable()?;
        }
        Ok(())
    }

    pub(super) fn snapshot_seqs_in(&self, session: SessionId) -> Result<Vec<u64>> {
        self.snapshots
            .scan_prefix(session.as_bytes())
            .keys()
            .map(|k| {
                let k = k.map_err(|e| storage(e, "listing snapshots"))?;
                Ok(split_key(&k).map(|(_, seq)| seq))
            })
            .filter_map(Result::transpose)
            .collect()
    }

    pub(super) fn snapshot_at_in(
        &self,
        session: SessionId,
        seq: u64,
    ) -> Result<Option<SharedBytes>> {
        let Some(v) = self
            .snapshots
            .get(key(session, seq))
            .map_err(|e| storage(e, "reading a snapshot"))?
        else {
            return Ok(None);
        };
        Ok(Some(if snapfiles::is_pointer(&v) {
            self.snap_files.read(session, seq, &v)?
        } else {
            SharedBytes::new(v)
        }))
    }

    pub(super) fn latest_snapshot_in(
        &self,
        session: SessionId,
    ) -> Result<Option<(u64, SharedBytes)>> {
        let last = self
            .snapshots
            .scan_prefix(session.as_bytes())
            .next_back()
            .transpose()
            .map_err(|e| storage(e, "reading a snapshot"))?;
        let Some((seq, v)) = last.and_then(|(k, v)| Some((split_key(&k)?.1, v))) else {
            return Ok(None);
        };
        let frame = if snapfiles::is_pointer(&v) {
            self.snap_files.read(session, seq, &v)?
        } else {
            SharedBytes::new(v)
        };
        Ok(Some((seq, frame)))
    }

    pub(super) fn drop_snapshots_in(&self, session: SessionId, from: u64) -> Result<()> {
        let entries: Vec<(sled::IVec, sled::IVec)> = self
            .snapshots
            .range(key(session, from)..=key(session, u64::MAX))
            .collect::<std::result::Result<_, _>>()
            .map_err(|e| storage(e, "listing snapshots"))?;
        for (k, v) in entries {
            self.snapshots
                .remove(&k)
                .map_err(|e| storage(e, "removing a snapshot"))?;
            if snapfiles::is_pointer(&v)
                && let Some((_, seq)) = split_key(&k)
            {
                self.snap_files.remove(session, seq)?;
            }
        }
        Ok(())
    }
}
