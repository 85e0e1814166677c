//! The durability levels of an append.

/// How durable an event is when `append` returns.
///
/// | level | survives a process crash | survives power loss |
/// |---|---|---|
/// | `Buffered` | no: the last ~500 ms may be lost | no |
/// | `Flushed` | yes | not guaranteed |
/// | `Synced` | yes | yes |
///
/// Whatever the level, an appended event enters the session's head, state
/// and `events()` only once its append is durable at that level: a reader
/// in another thread never acts on an event its appender has not been told
/// is safe. An append whose write or sync fails returns the error, leaves
/// the head and the state as they were, and poisons the journal (every
/// later write is refused with `Error::Poisoned`); its events may still
/// reach the disk, as a tool call in doubt may have run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Durability {
    /// In memory when `append` returns: queued for sled's insert thread, then
    /// in sled's buffer, which sled writes out within ~500 ms. Readable at
    /// once (a read waits for the queued inserts). A process crash can lose
    /// the last half second; the stream stays gap-free (what survives is a
    /// prefix).
    Buffered,
    /// Written to the operating system with `sync_file_range` (sled's
    /// `flush`): guaranteed to survive a crash of the process as soon as
    /// `append` returns; not guaranteed to survive power loss, because sled
    /// 0.34 does not issue `fsync` (sled issue #1452).
    Flushed,
    /// Written to the database's write-ahead log (`<db>/wal`) and that file
    /// `fdatasync`ed: guaranteed to survive a process crash and power loss
    /// as soon as `append` returns. Concurrent appenders share one write and
    /// one sync (group commit). The next open puts back into sled whatever
    /// of the log sled lost. (Through sled alone it took two device syncs:
    /// sled's flush waits for its own write, then an `fdatasync` commits it.)
    #[default]
    Synced,
}
