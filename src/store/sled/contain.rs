//! The boundary with sled's panics.
//!
//! sled 0.34 panics on some damaged pages of its own files (for example in
//! its `serialization.rs`), in whatever call first reads them: the open, a
//! read, an insert that pages a node in. The journal promises no panic on
//! any database content, so every call into the sled store goes through
//! [`Guarded`], which runs it under `catch_unwind` (`fault.rs`) and turns
//! such a panic into
//! [`Error::Corruption`](crate::error::Error::Corruption) naming the
//! database file. A panic of the caller's own code (a visitor of a scan: a
//! reducer, an application slice) is not sled's: it is let through as it
//! came.

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::path::{Path, PathBuf};

use super::SledStore;
use super::fault::contained;
use crate::error::Result;
use crate::format::SharedBytes;
use crate::model::SessionId;
use crate::store::poison::Poison;
use crate::store::{Durability, Loss, Store, SyncStats, Visit};

/// The sled store, every call contained.
pub(crate) struct Guarded {
    store: SledStore,
    path: PathBuf,
}

impl Guarded {
    /// [`SledStore::open`], contained.
    pub(crate) fn open(
        path: &Path,
        create: bool,
        cache_bytes: u64,
        compress: bool,
        wal_appends: bool,
        block_bytes: usize,
        poison: Poison,
    ) -> Result<Guarded> {
        let store = contained(path, "opening the database", || {
            SledStore::open(
                path,
                create,
                cache_bytes,
                compress,
                wal_appends,
                block_bytes,
                poison,
            )
        })?;
        Ok(Guarded {
            store,
            path: path.to_owned(),
        })
    }

    fn run<T>(&self, what: &str, f: impl FnOnce(&SledStore) -> Result<T>) -> Result<T> {
        contained(&self.path, what, || f(&self.store))
    }

    /// Runs a scan whose visitor is the caller's: `scan` gets the visitor
    /// wrapped so that a panic of the visitor stops the scan (it returns
    /// `Break`) and is resumed after it, as the caller's own.
    fn scan_with(
        &self,
        scan: impl FnOnce(
            &SledStore,
            &mut dyn FnMut(&mut dyn FnMut() -> Result<Visit>) -> Result<Visit>,
        ) -> Result<()>,
    ) -> Result<()> {
        let mut theirs: Option<Box<dyn Any + Send>> = None;
        let result = self.run("reading events", |s| {
            scan(s, &mut |call| {
                catch_unwind(AssertUnwindSafe(call)).unwrap_or_else(|p| {
                    theirs = Some(p);
                    Ok(Visit::Break(()))
                })
            })
        });
        if let Some(p) = theirs {
            resume_unwind(p);
        }
        result
    }
}

impl Store for Guarded {
    fn kind(&self) -> &'static str {
        self.store.kind()
    }

    fn append(&self, session: SessionId, expected: u64, frames: &[Vec<u8>]) -> Result<()> {
        self.run("appending", |s| s.append(session, expected, frames))
    }

    fn len(&self, session: SessionId) -> Result<Option<u64>> {
        self.run("reading a head", |s| s.len(session))
    }

    fn scan(
        &self,
        session: SessionId,
        from: u64,
        to: u64,
        visit: &mut dyn FnMut(u64, &[u8]) -> Result<Visit>,
    ) -> Result<()> {
        self.scan_with(|s, guard| {
            s.scan(session, from, to, &mut |seq, frame| {
                guard(&mut || visit(seq, frame))
            })
        })
    }

    fn scan_shared(
        &self,
        session: SessionId,
        from: u64,
        to: u64,
        visit: &mut dyn FnMut(u64, SharedBytes) -> Result<Visit>,
    ) -> Result<()> {
        self.scan_with(|s, guard| {
            s.scan_shared(session, from, to, &mut |seq, frame| {
                let mut frame = Some(frame);
                guard(&mut || match frame.take() {
                    Some(f) => visit(seq, f),
                    None => Ok(Visit::Break(())),
                })
            })
        })
    }

    fn sessions(&self) -> Result<Vec<SessionId>> {
        self.run("listing sessions", |s| s.sessions())
    }

    fn put_snapshot(&self, session: SessionId, seq: u64, frame: Vec<u8>) -> Result<()> {
        self.run("writing a snapshot", |s| {
            s.put_snapshot(session, seq, frame)
        })
    }

    fn latest_snapshot(&self, session: SessionId) -> Result<Option<(u64, SharedBytes)>> {
        self.run("reading a snapshot", |s| s.latest_snapshot(session))
    }

    fn keeps_snapshot_chains(&self) -> bool {
        true
    }

    fn add_snapshot(&self, session: SessionId, seq: u64, frame: Vec<u8>) -> Result<()> {
        self.run("writing a snapshot", |s| {
            s.add_snapshot(session, seq, frame)
        })
    }

    fn snapshot_seqs(&self, session: SessionId) -> Result<Vec<u64>> {
        self.run("listing snapshots", |s| s.snapshot_seqs(session))
    }

    fn snapshot_at(&self, session: SessionId, seq: u64) -> Result<Option<SharedBytes>> {
        self.run("reading a snapshot", |s| s.snapshot_at(session, seq))
    }

    fn truncate(&self, session: SessionId, from: u64) -> Result<()> {
        self.run("cutting a torn tail", |s| s.truncate(session, from))
    }

    fn delete_session(&self, session: SessionId) -> Result<()> {
        self.run("deleting a session", |s| s.delete_session(session))
    }

    fn drop_snapshots(&self, session: SessionId) -> Result<()> {
        self.run("dropping snapshots", |s| s.drop_snapshots(session))
    }

    fn drop_snapshots_from(&self, session: SessionId, seq: u64) -> Result<()> {
        self.run("dropping snapshots", |s| {
            s.drop_snapshots_from(session, seq)
        })
    }

    fn flush(&self, level: Durability) -> Result<()> {
        self.run("flushing", |s| s.flush(level))
    }

    fn size_on_disk(&self) -> Result<u64> {
        self.run("measuring its size", |s| s.size_on_disk())
    }

    fn losses(&self) -> Vec<Loss> {
        self.store.losses()
    }

    fn log_damage(&self) -> Option<String> {
        self.store.log_damage()
    }

    fn sync_stats(&self) -> SyncStats {
        self.store.sync_stats()
    }

    fn records(&self) -> Result<Vec<(String, String, Vec<u8>)>> {
        self.store.records()
    }

    fn write_records(&self, writes: &[(String, String, Option<Vec<u8>>)]) -> Result<()> {
        self.store.write_records(writes)
    }
}
