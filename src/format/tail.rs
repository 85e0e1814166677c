//! [`TailDamage`]: the damaged end of a session's stream or of an exported
//! file, found and cut off while reading.

/// What the position and length of a [`TailDamage`] count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TailUnit {
    /// Events of a session's stream: `start` is a seq.
    Events,
    /// Bytes of an exported journal file (`.ajournal`): `start` is a byte
    /// offset.
    Bytes,
}

/// A damaged tail: unreadable data at the very end of a session's stream or
/// of an exported file, the crash point of a write that did not complete.
///
/// It is reported, never read as data: a session's torn tail is not part of
/// its stream and the next append cuts it off
/// ([`Session::torn_tail`](crate::Session::torn_tail)); a file's is cut off
/// when the file is read
/// ([`Journal::file_damage`](crate::Journal::file_damage)). Damage followed
/// by good records is never a tail: it is
/// [`Error::Corruption`](crate::Error::Corruption).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TailDamage {
    /// Where the tail starts: the seq of its first unreadable event, or the
    /// byte offset of its first unreadable byte (see `unit`).
    pub start: u64,
    /// How long it is, in `unit`s. 0 for a file cut short exactly between
    /// two records: nothing to cut, but records may be missing after it.
    pub len: u64,
    /// What `start` and `len` count.
    pub unit: TailUnit,
    /// Why the first record of the tail is unreadable.
    pub reason: String,
}

impl TailDamage {
    /// `events` unreadable events of a stream from seq `from_seq`.
    pub(crate) fn events(from_seq: u64, events: u64, reason: String) -> Self {
        TailDamage {
            start: from_seq,
            len: events,
            unit: TailUnit::Events,
            reason,
        }
    }

    /// `bytes` unreadable bytes of a file from byte `offset`.
    pub(crate) fn bytes(offset: u64, bytes: u64, reason: String) -> Self {
        TailDamage {
            start: offset,
            len: bytes,
            unit: TailUnit::Bytes,
            reason,
        }
    }
}

impl std::fmt::Display for TailDamage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (start, len, reason) = (self.start, self.len, &self.reason);
        match self.unit {
            TailUnit::Events => write!(
                f,
                "torn tail: {len} unreadable event(s) from seq {start}: {reason}"
            ),
            // Nothing to cut: the file ends where it should not.
            TailUnit::Bytes if len == 0 => {
                write!(f, "cut short at byte offset {start}: {reason}")
            }
            TailUnit::Bytes => write!(
                f,
                "torn tail of {len} bytes cut off at byte offset {start}: {reason}"
            ),
        }
    }
}
