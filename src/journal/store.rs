//! The backend trait. No type of a storage engine appears in it.

use crate::error::Result;
use crate::journal::Durability;
use crate::model::SessionId;

/// What a visitor returns to go on reading or to stop.
pub type Visit = std::ops::ControlFlow<()>;

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

    /// All session ids, in id order (= creation order).
    fn sessions(&self) -> Result<Vec<SessionId>>;

    /// Stores a snapshot frame taken after event `seq`, replacing older ones
    /// of the session. Snapshots are a cache: a store may lose them.
    fn put_snapshot(&self, session: SessionId, seq: u64, frame: Vec<u8>) -> Result<()>;

    /// The latest snapshot of a session: `(seq, frame)`.
    fn latest_snapshot(&self, session: SessionId) -> Result<Option<(u64, Vec<u8>)>>;

    /// Removes the frames with `seq >= from` (cuts off a torn tail).
    fn truncate(&self, session: SessionId, from: u64) -> Result<()>;

    /// Removes a session: every event and snapshot, atomically for the events.
    fn delete_session(&self, session: SessionId) -> Result<()>;

    /// Removes every snapshot of a session (used when one is found damaged).
    fn drop_snapshots(&self, session: SessionId) -> Result<()>;

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
}
