//! The sled store: the embedded default.
//!
//! Layout (see `docs/format.md`):
//! - tree `events`: key = session id (16 B) ++ seq (u64 big-endian), value =
//!   a frame, a pointer to a large one in a segment (`frame_files.rs`), a
//!   run of several events' frames, or a pointer to a compressed block of
//!   them (`runs.rs`, sealed by `seal.rs`), each under its first event's seq;
//! - tree `snapshots`: same key shape, value = frame of a `SessionState`, or
//!   for a frame over 7 KiB a pointer to its file in `snapshots/` (see
//!   `snapfiles.rs`);
//! - tree `meta`: `format` = `agent-journal 1` (another value is refused),
//!   written when the database is created;
//! - file `wal`: the write-ahead log of `Synced` appends (see `wal.rs`);
//! - file `records`: the record area, outside sled (see `records.rs`).
//!
//! Reading a range of events, out of values of every kind: `read.rs`.
//!
//! The head (next seq) of a session is derived from its last key and cached;
//! one lock per session makes the compare-and-append atomic, and a sled batch
//! makes a multi-event append all-or-none.

use std::collections::HashMap;
use std::fs::File;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};

use crate::error::{Error, Result};
use crate::model::SessionId;
use crate::store::Durability;
use crate::store::fs::sync_dir;
use crate::store::records::RecordFile;
use crate::store::sled::acks::{AckLog, Loss};
use crate::store::sled::applier::Applier;
use crate::store::sled::frame_files::FrameFiles;
use crate::store::sled::group_commit::GroupCommit;
use crate::store::sled::keys::{key, split_key};
use crate::store::sled::snapfiles::SnapFiles;
use crate::store::sled::wal::Wal;
use crate::store::{SharedBytes, Store, Visit};

pub(crate) mod acks;
pub(crate) mod applier;
mod contain;
pub(crate) mod fault;
pub(crate) mod frame_files;
pub(crate) mod group_commit;
pub(crate) mod keys;
mod open;
pub(crate) mod raw;
mod read;
#[cfg(unix)]
pub(crate) mod reader;
pub(crate) mod rebuild;
mod recover;
pub(crate) mod runs;
mod seal;
pub(crate) mod snapfiles;
mod snapshots;
pub(crate) mod wal;

use fault::{contained, storage};
use seal::Sealer;

pub(crate) use contain::Guarded;
pub(crate) use open::compressed;

/// The sled-backed store.
pub(crate) struct SledStore {
    path: PathBuf,
    db: sled::Db,
    events: sled::Tree,
    snapshots: sled::Tree,
    /// Snapshot frames too large to keep in sled.
    snap_files: SnapFiles,
    /// Event frames too large to keep in sled (`frame_files.rs`).
    frame_files: Arc<FrameFiles>,
    /// Cached next seq per session; one lock per session.
    heads: RwLock<HashMap<SessionId, Arc<Mutex<Option<u64>>>>>,
    /// The database file, for a real fdatasync (sled 0.34 only sync_file_ranges).
    db_file: File,
    /// Blob files (by number) already synced.
    synced_blobs: Mutex<std::collections::HashSet<u64>>,
    flushed: GroupCommit,
    synced: GroupCommit,
    /// The write-ahead log (see `wal.rs`): read back at every open; written
    /// by appends only when `wal_appends` (the journal is `Synced`).
    wal: Wal,
    wal_appends: bool,
    /// The thread that inserts appends into sled (see `applier.rs`).
    /// Everything that reads sled drains it first.
    applier: Applier,
    /// The thread that packs runs into blocks (`seal.rs`).
    sealer: Arc<Sealer>,
    /// What the journal acknowledged, recorded outside sled (`heads.rs`).
    acked: AckLog,
    /// Acknowledged events found missing at open, by session, until a cut
    /// or a deletion settles them.
    losses: Mutex<HashMap<SessionId, Loss>>,
    /// The record area (`store/records.rs`), a file beside sled's.
    records: RecordFile,
}

impl SledStore {
    fn head_lock(&self, session: SessionId) -> Arc<Mutex<Option<u64>>> {
        if let Some(l) = self
            .heads
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(&session)
        {
            return l.clone();
        }
        let mut heads = self.heads.write().unwrap_or_else(|p| p.into_inner());
        heads
            .entry(session)
            .or_insert_with(|| Arc::new(Mutex::new(None)))
            .clone()
    }

    /// Returns once every queued insert is in sled.
    fn drain(&self) -> Result<()> {
        self.applier.drain()
    }

    fn read_head(&self, session: SessionId) -> Result<u64> {
        self.drain()?;
        let last = self
            .events
            .range(key(session, 0)..=key(session, u64::MAX))
            .next_back()
            .transpose()
            .map_err(|e| storage(e, "reading the head"))?;
        Ok(match last {
            Some((k, v)) => match split_key(&k) {
                Some((_, seq)) => seq.saturating_add(runs::span(&v)),
                None => 0,
            },
            None => 0,
        })
    }

    /// fsyncs blob files sled wrote since the last call (sled writes values
    /// over ~128 KiB to `blobs/` without syncing them), and the directory.
    fn sync_blobs(&self) -> Result<()> {
        let dir = self.path.join("blobs");
        let Ok(entries) = std::fs::read_dir(&dir) else {
            return Ok(());
        };
        // Blob names are sled lsns, but concurrent writers create them out of
        // order: remember every name synced, not the highest.
        let mut synced = self.synced_blobs.lock().unwrap_or_else(|p| p.into_inner());
        let mut any = false;
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(n) = name.to_str().and_then(|s| s.parse::<u64>().ok()) else {
                continue;
            };
            if synced.contains(&n) {
                continue;
            }
            if let Ok(f) = File::open(entry.path()) {
                f.sync_data().map_err(|e| {
                    Error::io(format!("syncing blob {}", entry.path().display()), e)
                })?;
                any = true;
            }
            synced.insert(n);
        }
        if any {
            sync_dir(&dir)?;
        }
        Ok(())
    }

    /// Makes every sled write so far survive power loss: sled's flush, then
    /// an fdatasync of its file and of new blob files.
    pub(super) fn sled_durable(&self) -> Result<()> {
        // The heads to record are taken first: every event they count was
        // queued before, so the flush below covers it.
        let heads = self.acked.take_dirty();
        let durable = (|| {
            // Every session written to since the last time is sealed whole,
            // at once, all with one segment write and sync: the log is
            // emptied after this, and sled's file must not be the only
            // place left that holds what it held.
            self.sealer.seal_all(&self.applier.take_touched()?)?;
            // (The flush drains the insert queue first.)
            self.flush_sled()?;
            self.db_file
                .sync_data()
                .map_err(|e| Error::io(format!("fdatasync of {}/db", self.path.display()), e))?;
            self.sync_blobs()?;
            self.acked.record(&heads)
        })();
        if durable.is_err() {
            self.acked.untake(&heads);
        }
        durable
    }

    fn flush_sled(&self) -> Result<()> {
        self.drain()?;
        self.db
            .flush()
            .map(|_| ())
            .map_err(|e| storage(e, "flushing"))
    }
}

impl Store for SledStore {
    fn kind(&self) -> &'static str {
        "sled"
    }

    fn append(&self, session: SessionId, expected: u64, frames: &[Vec<u8>]) -> Result<()> {
        self.flushed.check()?;
        self.synced.check()?;
        self.wal.check()?;
        self.applier.check()?;
        if self.wal_appends {
            Wal::check_len(frames)?;
        }
        let lock = self.head_lock(session);
        let mut head = lock.lock().unwrap_or_else(|p| p.into_inner());
        let found = match *head {
            Some(h) => h,
            None => self.read_head(session)?,
        };
        *head = Some(found);
        if found != expected {
            return Err(Error::Conflict {
                session,
                expected,
                found,
            });
        }
        if frames.is_empty() {
            return Ok(());
        }
        // The insert thread makes the insert (one sled batch for several
        // frames: all or none); reads wait for it.
        self.applier.push(session, expected, frames)?;
        if self.wal_appends {
            self.wal.enqueue(session, expected, frames);
        }
        let next = expected + frames.len() as u64;
        self.acked.raise(session, next);
        *head = Some(next);
        Ok(())
    }

    fn len(&self, session: SessionId) -> Result<Option<u64>> {
        let lock = self.head_lock(session);
        let mut head = lock.lock().unwrap_or_else(|p| p.into_inner());
        let h = match *head {
            Some(h) => h,
            None => {
                let h = self.read_head(session)?;
                *head = Some(h);
                h
            }
        };
        Ok(if h > 0 || self.loss(session).is_some() {
            Some(h)
        } else {
            None
        })
    }

    fn scan(
        &self,
        session: SessionId,
        from: u64,
        to: u64,
        visit: &mut dyn FnMut(u64, &[u8]) -> Result<Visit>,
    ) -> Result<()> {
        self.scan_values(session, from, to, &mut |seq, frame| visit(seq, &frame))
    }

    fn scan_shared(
        &self,
        session: SessionId,
        from: u64,
        to: u64,
        visit: &mut dyn FnMut(u64, SharedBytes) -> Result<Visit>,
    ) -> Result<()> {
        // The values sled holds (or the blocks read), shared: no copy.
        self.scan_values(session, from, to, visit)
    }

    fn sessions(&self) -> Result<Vec<SessionId>> {
        self.drain()?;
        let mut out = Vec::new();
        let mut start = [0u8; 16];
        loop {
            let next = self
                .events
                .range(start..)
                .keys()
                .next()
                .transpose()
                .map_err(|e| storage(e, "listing sessions"))?;
            let Some(k) = next else { break };
            let Some((sid, _)) = split_key(&k) else {
                return Err(Error::corruption(
                    None,
                    None,
                    None,
                    "malformed key in tree events",
                ));
            };
            out.push(sid);
            // Jump past every key of this session: increment the 16-byte id.
            let mut n = u128::from_be_bytes(*sid.as_bytes());
            if n == u128::MAX {
                break;
            }
            n += 1;
            start = n.to_be_bytes();
        }
        // A session whose every event was lost is still one: reading it
        // reports the loss.
        let lost: Vec<SessionId> = self
            .losses
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .keys()
            .copied()
            .collect();
        if !lost.is_empty() {
            out.extend(lost);
            out.sort_unstable();
            out.dedup();
        }
        Ok(out)
    }

    fn truncate(&self, session: SessionId, from: u64) -> Result<()> {
        let lock = self.head_lock(session);
        let mut head = lock.lock().unwrap_or_else(|p| p.into_inner());
        // The log must hold none of the events about to go (a replay would
        // bring them back), and the cut must be durable before the log is
        // written again: a rollover before and after.
        if self.wal_appends {
            self.wal.roll_over(&|| self.sled_durable())?;
        }
        self.drain()?;
        // No seal may put back what this removes (released before the
        // rollover below, which seals).
        let sealing = self.sealer.hold();
        // The cut is recorded before it is made: a crash between the two
        // leaves more events than recorded, never fewer.
        let held = self.read_head(session)?;
        self.acked.lower(session, from.min(held))?;
        self.losses
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&session);
        let keys: Vec<sled::IVec> = self
            .events
            .range(key(session, from)..=key(session, u64::MAX))
            .keys()
            .collect::<std::result::Result<_, _>>()
            .map_err(|e| storage(e, "listing a tail to cut"))?;
        let mut batch = sled::Batch::default();
        for k in keys {
            batch.remove(k);
        }
        // A run or block that holds events on both sides of the cut keeps
        // those before it, as runs.
        if let Some((at, v)) = self.covering(session, from)? {
            let (whole, ranges, failed) = self.value_elements(session, at, at, &v)?;
            let keep = usize::try_from(from - at).unwrap_or(usize::MAX);
            if failed.is_some_and(|i| i < keep) {
                return Err(Error::corruption(
                    Some(session),
                    Some(at),
                    None,
                    format!(
                        "cannot cut events from seq {from}: the run or block of events \
                         from seq {at} before the cut is damaged"
                    ),
                ));
            }
            let elements: Vec<&[u8]> = ranges[..keep].iter().map(|r| &whole[r.clone()]).collect();
            batch.remove(&key(session, at)[..]);
            for (i, value) in runs::pack(&elements) {
                batch.insert(&key(session, at + i as u64)[..], value);
            }
        }
        self.events
            .apply_batch(batch)
            .map_err(|e| storage(e, "cutting a tail"))?;
        drop(sealing);
        // What the cut left in runs is sealed at the next rollover.
        self.applier.touch(session);
        *head = Some(from.min(self.read_head(session)?));
        if self.wal_appends {
            self.wal.roll_over(&|| self.sled_durable())?;
        }
        Ok(())
    }

    fn put_snapshot(&self, session: SessionId, seq: u64, frame: Vec<u8>) -> Result<()> {
        self.put_snapshot_in(session, seq, frame)
    }

    fn keeps_snapshot_chains(&self) -> bool {
        true
    }

    fn add_snapshot(&self, session: SessionId, seq: u64, frame: Vec<u8>) -> Result<()> {
        self.add_snapshot_in(session, seq, frame)
    }

    fn snapshot_seqs(&self, session: SessionId) -> Result<Vec<u64>> {
        self.snapshot_seqs_in(session)
    }

    fn snapshot_at(&self, session: SessionId, seq: u64) -> Result<Option<SharedBytes>> {
        self.snapshot_at_in(session, seq)
    }

    fn latest_snapshot(&self, session: SessionId) -> Result<Option<(u64, SharedBytes)>> {
        self.latest_snapshot_in(session)
    }

    fn delete_session(&self, session: SessionId) -> Result<()> {
        self.truncate(session, 0)?;
        self.drop_snapshots(session)
    }

    fn drop_snapshots(&self, session: SessionId) -> Result<()> {
        self.drop_snapshots_in(session, 0)
    }

    fn drop_snapshots_from(&self, session: SessionId, seq: u64) -> Result<()> {
        self.drop_snapshots_in(session, seq)
    }

    fn flush(&self, level: Durability) -> Result<()> {
        match level {
            Durability::Buffered => Ok(()),
            Durability::Flushed => self.flushed.commit(|| self.flush_sled()),
            Durability::Synced if self.wal_appends => self.wal.commit(&|| self.sled_durable()),
            Durability::Synced => self.synced.commit(|| self.sled_durable()),
        }
    }

    fn losses(&self) -> Vec<Loss> {
        let mut v: Vec<Loss> = self
            .losses
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .copied()
            .collect();
        v.sort_unstable_by_key(|l| l.session);
        v
    }

    fn log_damage(&self) -> Option<String> {
        self.wal.damage().map(str::to_owned)
    }

    fn sync_stats(&self) -> crate::store::SyncStats {
        crate::store::SyncStats {
            sled_flushes: self.flushed.flushes() + self.synced.flushes(),
            ..self.wal.stats()
        }
    }

    fn size_on_disk(&self) -> Result<u64> {
        let sled = self
            .db
            .size_on_disk()
            .map_err(|e| storage(e, "measuring size"))?;
        Ok(sled + self.snap_files.size() + self.frame_files.size() + self.wal.file_size())
    }

    fn records(&self) -> Result<Vec<(String, String, Vec<u8>)>> {
        self.records.records()
    }

    fn write_records(&self, writes: &[(String, String, Option<Vec<u8>>)]) -> Result<()> {
        self.records.write(writes)
    }
}

impl Drop for SledStore {
    /// Empties the write-ahead log on a clean close, so that the next open
    /// has nothing to replay, and gives its preallocated bytes back. Errors are left to that open's replay.
    fn drop(&mut self) {
        // Contained: sled panics on some damaged pages, and a panic out of
        // a drop (maybe during an unwind) would abort the process.
        let _ = contained(&self.path.clone(), "closing", || {
            // Stops the insert thread; what it had queued is inserted.
            self.applier.stop();
            // The seals asked for are made (before the rollover below).
            self.sealer.stop();
            if self.wal_appends {
                self.wal.roll_over(&|| self.sled_durable())?;
                self.wal.release()?;
            }
            Ok(())
        });
    }
}
