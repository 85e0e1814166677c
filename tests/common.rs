//! Helpers shared by the test modules.

use agent_journal::{Durability, Journal, JournalConfig};
use tempfile::TempDir;

/// A journal under test, with the directory that keeps it alive.
pub struct Backend {
    pub name: &'static str,
    pub journal: Journal,
    pub _dir: Option<TempDir>,
}

/// The same journal contract on every store: sled (on disk) and memory.
pub fn backends() -> Vec<Backend> {
    backends_with(JournalConfig::default)
}

pub fn backends_with(config: impl Fn() -> JournalConfig) -> Vec<Backend> {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut c = config();
    // Buffered keeps the suite fast; durability has its own tests.
    c.durability = Durability::Buffered;
    let sled = Journal::open_with(dir.path().join("db"), c).expect("open sled");
    vec![
        Backend {
            name: "sled",
            journal: sled,
            _dir: Some(dir),
        },
        Backend {
            name: "memory",
            journal: Journal::memory_with(config()),
            _dir: None,
        },
    ]
}
