//! The sections of the benchmark program and their helpers: workloads, raw
//! baselines, timing, the report.

pub mod append;
pub mod compaction;
pub mod conversation;
pub mod events;
pub mod formats;
pub mod group;
pub mod growth;
pub mod open;
pub mod pg;
pub mod raw;
pub mod report;
pub mod resume;
pub mod space;
pub mod timing;
pub mod viewer;

use agent_journal::format::now;
use agent_journal::{Durability, Envelope, Event, JournalConfig, SessionId};
use tempfile::TempDir;

/// `Buffered`, everything else at its default.
pub fn buffered() -> JournalConfig {
    JournalConfig {
        durability: Durability::Buffered,
        ..JournalConfig::default()
    }
}

/// A temp dir, removed when dropped.
pub fn tempdir() -> TempDir {
    tempfile::tempdir().expect("tempdir")
}

/// The library's default sled cache size, used by the raw baselines too.
pub fn cache_bytes() -> u64 {
    JournalConfig::default().cache_bytes
}

/// A placeholder envelope at `seq`, to ask a checkpoint strategy whether it
/// would snapshot there (Geometric only looks at the seq).
pub fn at_seq(seq: u64) -> Envelope {
    Envelope {
        session: SessionId::from_bytes([0; 16]),
        seq,
        at: now(),
        event: Event::Custom {
            kind: String::new(),
            payload: Vec::new(),
        },
    }
}

/// Returns once every event appended to `session`'s journal is readable: a
/// read waits for the journal's sled insert thread to make every queued
/// insert. Timed appends end with it, so their time counts that work.
pub fn wait_readable(session: &agent_journal::Session) {
    let last = session.head().saturating_sub(1);
    std::hint::black_box(session.events(last..).expect("read back"));
}
