//! Where the events live: the [`Store`] trait every backend implements (the
//! embedded sled database, memory, PostgreSQL, exported `.ajournal` files
//! read in place) and what it reports. An application needs this module only
//! to plug in a backend of its own or to read a store's statistics.
//!
//! ```
//! use agent_journal::Journal;
//! use agent_journal::store::SyncStats;
//!
//! # fn main() -> agent_journal::Result<()> {
//! let journal = Journal::memory();
//! let session = journal.create_session()?;
//! session.start_evaluation("agent", "task")?.user("hello")?;
//! let stats: SyncStats = journal.sync_stats();
//! assert_eq!(stats, SyncStats::default()); // a journal in memory never syncs
//! assert!(journal.losses().is_empty());
//! # Ok(())
//! # }
//! ```
//!
//! Stores deal in frames only: they never decode events, so every backend
//! is checked by the same codec above it. Nothing here imports the journal,
//! the session or the state.

// The files: `sled/` is the embedded default (open and create in
// `sled/open.rs`), with `applier.rs` (sled's insert thread), `wal.rs` (the
// write-ahead log of `Synced` appends), `group_commit.rs` (shared flushes)
// and `snapfiles.rs` (snapshot frames too large for sled); `memory.rs` keeps
// a store in memory; `file.rs` reads exported `.ajournal` files in place;
// `records.rs` is the record area (a few durable key-value records beside
// the sessions) and the file that keeps it for a sled database; `fs.rs` and
// `keys.rs` are small leaf helpers (directory sync, sled keys).

pub(crate) mod atomic;
pub(crate) mod durability;
pub(crate) mod file;
pub(crate) mod fs;
pub(crate) mod lease;
pub(crate) mod memory;
pub(crate) mod poison;
#[cfg(feature = "postgres")]
pub(crate) mod postgres;
pub(crate) mod private;
pub(crate) mod records;
pub(crate) mod sled;

use crate::error::Result;
pub(crate) use crate::format::SharedBytes;
use crate::model::SessionId;
pub(crate) use durability::Durability;
pub use lease::Lease;
pub use sled::acks::Loss;

/// How a store's durable writes went since it was opened: how well
/// concurrent appenders shared them (group commit) and what they cost.
/// [`Journal::sync_stats`](crate::Journal::sync_stats) returns it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SyncStats {
    /// Writes of the write-ahead log, each synced (`Synced` appends and
    /// flushes of a sled database): one per group of appends.
    pub log_writes: u64,
    /// Appends those writes carried (one record each).
    pub log_records: u64,
    /// Bytes those writes carried.
    pub log_bytes: u64,
    /// Time spent in those writes, each with its sync, summed.
    pub log_write_time: std::time::Duration,
    /// Rollovers: sled flushed and synced, then the log emptied.
    pub rollovers: u64,
    /// Flushes of sled itself shared by `Flushed` appenders (and by
    /// `Synced` ones where there is no log).
    pub sled_flushes: u64,
}

/// What a visitor returns to go on reading or to stop.
pub type Visit = std::ops::ControlFlow<()>;

/// The visitor of [`Store::scan_past_damage`]: a frame, or why the store
/// could not hand it over.
pub type PastDamage<'a> = dyn FnMut(u64, Result<&[u8]>) -> Result<Visit> + 'a;

/// A storage backend for event streams: sled, memory, and later PostgreSQL.
///
/// Stores deal in *frames* (see `docs/format.md`): they never decode events,
/// so every backend is checked by the same codec above it.
pub trait Store: Send + Sync + 'static {
    /// A short name for messages (`"sled"`, `"memory"`).
    fn kind(&self) -> &'static str;

    /// Appends `frames` at seqs `expected, expected + 1, ...`, atomically: all
    /// or none.
    ///
    /// # Errors
    /// [`Error::Conflict`](crate::Error::Conflict) when the stream's next seq is
    /// not `expected` (a stale writer); nothing is written then.
    /// [`Error::Poisoned`](crate::Error::Poisoned) after a failed flush.
    fn append(&self, session: SessionId, expected: u64, frames: &[Vec<u8>]) -> Result<()>;

    /// The number of events in the stream (its next seq), or `None` if the
    /// session does not exist.
    fn len(&self, session: SessionId) -> Result<Option<u64>>;

    /// Calls `visit(seq, frame)` for the stored frames with `from <= seq < to`,
    /// in order, until it returns `Break`.
    fn scan(
        &self,
        session: SessionId,
        from: u64,
        to: u64,
        visit: &mut dyn FnMut(u64, &[u8]) -> Result<Visit>,
    ) -> Result<()>;

    /// [`scan`](Self::scan), handing each frame over as [`SharedBytes`] that
    /// the visitor may keep without copying (a replay keeps message bodies
    /// in them). The default copies each frame; a store whose frames are
    /// already shared (sled's values) hands them over as they are.
    fn scan_shared(
        &self,
        session: SessionId,
        from: u64,
        to: u64,
        visit: &mut dyn FnMut(u64, SharedBytes) -> Result<Visit>,
    ) -> Result<()> {
        self.scan(session, from, to, &mut |seq, frame| {
            visit(seq, SharedBytes::from(frame.to_vec()))
        })
    }

    /// [`scan`](Self::scan) for readers that report damage and go on
    /// (`verify`, `salvage`): a record the store cannot hand over (a frame
    /// its segment file lost) reaches `visit` as the error, and the scan goes
    /// on after it. An error of `visit` itself ends the scan.
    fn scan_past_damage(
        &self,
        session: SessionId,
        from: u64,
        to: u64,
        visit: &mut PastDamage<'_>,
    ) -> Result<()> {
        let mut at = from;
        loop {
            let (mut next, mut visitor_failed) = (at, false);
            let scanned = self.scan(session, at, to, &mut |seq, frame| {
                next = seq + 1;
                let r = visit(seq, Ok(frame));
                visitor_failed = r.is_err();
                r
            });
            let e = match scanned {
                Ok(()) => return Ok(()),
                Err(e) if visitor_failed => return Err(e),
                Err(e) => e,
            };
            let seq = match &e {
                crate::error::Error::Corruption {
                    session: Some(s),
                    seq: Some(seq),
                    ..
                } if *s == session && (next..to).contains(seq) => *seq,
                _ => return Err(e),
            };
            if visit(seq, Err(e))?.is_break() {
                return Ok(());
            }
            at = seq + 1;
        }
    }

    /// All session ids, in id order (= creation order).
    fn sessions(&self) -> Result<Vec<SessionId>>;

    /// Stores a snapshot frame taken after event `seq`, replacing the
    /// session's other ones. Snapshots are a cache: a store may lose them.
    fn put_snapshot(&self, session: SessionId, seq: u64, frame: Vec<u8>) -> Result<()>;

    /// True if the store keeps a chain of snapshots per session: a whole
    /// one ([`put_snapshot`](Self::put_snapshot)), then deltas that each
    /// build on the one before ([`add_snapshot`](Self::add_snapshot)).
    /// Default: false (only the latest snapshot is kept, and the journal
    /// writes whole ones).
    fn keeps_snapshot_chains(&self) -> bool {
        false
    }

    /// Stores a delta snapshot frame taken after event `seq`, keeping the
    /// session's older snapshots (the chain it builds on). Default:
    /// [`Error::Unsupported`](crate::Error::Unsupported).
    fn add_snapshot(&self, session: SessionId, seq: u64, frame: Vec<u8>) -> Result<()> {
        let _ = (session, seq, frame);
        Err(crate::error::Error::Unsupported(format!(
            "the {} store keeps no chain of snapshots",
            self.kind()
        )))
    }

    /// The seqs of the session's snapshots, oldest first. Default: the
    /// latest's.
    fn snapshot_seqs(&self, session: SessionId) -> Result<Vec<u64>> {
        Ok(self
            .latest_snapshot(session)?
            .map(|(seq, _)| seq)
            .into_iter()
            .collect())
    }

    /// The session's snapshot taken after event `seq`, if the store has
    /// it. Default: the latest, if it is that one.
    fn snapshot_at(&self, session: SessionId, seq: u64) -> Result<Option<SharedBytes>> {
        Ok(self
            .latest_snapshot(session)?
            .filter(|(s, _)| *s == seq)
            .map(|(_, f)| f))
    }

    /// The latest snapshot of a session: `(seq, frame)`. The frame is shared,
    /// not copied: a snapshot can be hundreds of MiB, and the decoded state
    /// keeps its message bodies in this buffer.
    fn latest_snapshot(&self, session: SessionId) -> Result<Option<(u64, SharedBytes)>>;

    /// Removes the frames with `seq >= from` (cuts off a torn tail).
    fn truncate(&self, session: SessionId, from: u64) -> Result<()>;

    /// Removes a session: every event and snapshot, atomically for the events.
    fn delete_session(&self, session: SessionId) -> Result<()>;

    /// Removes every snapshot of a session (used when one is found damaged).
    fn drop_snapshots(&self, session: SessionId) -> Result<()>;

    /// Removes the session's snapshots taken after event `seq` or later:
    /// a cut at `seq` made them describe events that are gone. Default:
    /// every snapshot, if any is that late (a cache lost, never a wrong
    /// one kept).
    fn drop_snapshots_from(&self, session: SessionId, seq: u64) -> Result<()> {
        if self.snapshot_seqs(session)?.iter().any(|s| *s >= seq) {
            self.drop_snapshots(session)?;
        }
        Ok(())
    }

    /// Makes everything appended so far durable at `level`. Concurrent callers
    /// share one flush (group commit).
    ///
    /// # Errors
    /// A failed flush returns the error and poisons the store: later appends
    /// fail with [`Error::Poisoned`](crate::Error::Poisoned).
    fn flush(&self, level: Durability) -> Result<()>;

    /// Bytes the store occupies on disk (0 for memory).
    fn size_on_disk(&self) -> Result<u64>;

    /// True if appends are refused (an exported file opened for reading).
    fn read_only(&self) -> bool {
        false
    }

    /// Acknowledged events the store found missing when it was opened (a
    /// store that keeps its own record of what it acknowledged, as the sled
    /// store does outside sled): each session whose stream ends below what
    /// was acknowledged, until a cut or a deletion settles it. Default: none.
    fn losses(&self) -> Vec<Loss> {
        Vec::new()
    }

    /// Damage to the store's write-ahead log found when it was opened that
    /// names no session (the log cut short: records past the cut may have
    /// been lost, and which cannot be known). Default: none.
    fn log_damage(&self) -> Option<String> {
        None
    }

    /// How the store's durable writes went (all zeros for a store that
    /// has none to report).
    fn sync_stats(&self) -> SyncStats {
        SyncStats::default()
    }

    /// [`append`](Self::append) made under `lease` (`None`: under none): a
    /// store shared between processes checks, in the same transaction as
    /// the insert, that the lease is still the session's
    /// ([`Error::Fenced`](crate::Error::Fenced) if another worker took it
    /// over) and that an append without one meets no other worker's live
    /// lease ([`Error::LeaseHeld`](crate::Error::LeaseHeld)). Default: a
    /// store only one process opens has no leases to check.
    fn append_leased(
        &self,
        session: SessionId,
        expected: u64,
        frames: &[Vec<u8>],
        lease: Option<&Lease>,
    ) -> Result<()> {
        let _ = lease;
        self.append(session, expected, frames)
    }

    /// Takes the session's lease for `owner`'s `instance` for `ttl` (see
    /// [`Lease`]): a renewal only if the live lease is that instance's.
    /// Default: [`Error::Unsupported`](crate::Error::Unsupported), as a
    /// store only one process opens needs none.
    fn acquire_lease(
        &self,
        session: SessionId,
        owner: &str,
        instance: uuid::Uuid,
        ttl: std::time::Duration,
    ) -> Result<Lease> {
        let _ = (session, owner, instance, ttl);
        Err(crate::error::Error::Unsupported(format!(
            "leases need a store shared between processes (PostgreSQL), not {}",
            self.kind()
        )))
    }

    /// Extends a lease by `ttl` from now. Default: unsupported.
    fn renew_lease(&self, lease: &Lease, ttl: std::time::Duration) -> Result<Lease> {
        self.acquire_lease(lease.session, &lease.owner, lease.instance, ttl)
    }

    /// Gives a lease up. Default: nothing to do.
    fn release_lease(&self, lease: &Lease) -> Result<()> {
        let _ = lease;
        Ok(())
    }

    /// Waits until session `session` holds more than `len` events, or
    /// `timeout` passed (then returns `Ok` all the same: the caller reads
    /// the length again). Default: sleeps a little (a poll); a store shared
    /// between processes wakes at once (PostgreSQL's `LISTEN`/`NOTIFY`).
    fn wait_for_append(
        &self,
        session: SessionId,
        len: u64,
        timeout: std::time::Duration,
    ) -> Result<()> {
        let _ = (session, len);
        std::thread::sleep(timeout.min(std::time::Duration::from_millis(200)));
        Ok(())
    }

    /// The session's live lease, if any. Default: none.
    fn lease(&self, session: SessionId) -> Result<Option<Lease>> {
        let _ = session;
        Ok(None)
    }
    /// Every record of the store's record area, as `(namespace, key,
    /// value)` in namespace and key order: small durable records kept
    /// beside the sessions, never in their events (see
    /// [`Journal::put_record`](crate::Journal::put_record)). Default: none.
    fn records(&self) -> Result<Vec<(String, String, Vec<u8>)>> {
        Ok(Vec::new())
    }

    /// Applies `writes` to the record area, all or none, durably: each
    /// `(namespace, key, Some(value))` puts a record, each `(namespace, key,
    /// None)` removes one, and all of it survives a crash and power loss as
    /// soon as this returns. Default:
    /// [`Error::Unsupported`](crate::Error::Unsupported).
    fn write_records(&self, writes: &[(String, String, Option<Vec<u8>>)]) -> Result<()> {
        let _ = writes;
        Err(crate::error::Error::Unsupported(format!(
            "the {} store keeps no records",
            self.kind()
        )))
    }
}
