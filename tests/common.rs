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

/// Copies a directory tree (a database, for a crash image or a pristine
/// copy to damage).
pub fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read_dir") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

/// The records of an exported journal file as written (format 2): the
/// `(start, end)` byte range of each, length prefix included. Panics unless
/// the records run end to end from the magic to the trailer.
pub fn ajournal_records(bytes: &[u8]) -> Vec<(usize, usize)> {
    use agent_journal::format::ajournal::{MAGIC, TRAILER_LEN, TRAILER_MARK};
    assert_eq!(&bytes[..MAGIC.len()], MAGIC, "the current format");
    let mut pos = MAGIC.len();
    let mut out = Vec::new();
    loop {
        let len = u32::from_le_bytes(bytes[pos..pos + 4].try_into().expect("4 bytes"));
        if len == TRAILER_MARK {
            break;
        }
        out.push((pos, pos + 4 + len as usize));
        pos += 4 + len as usize;
    }
    assert_eq!(pos + TRAILER_LEN, bytes.len(), "records, then the trailer");
    out
}

/// Byte offsets of the records of an exported journal file.
pub fn record_offsets(bytes: &[u8]) -> Vec<usize> {
    ajournal_records(bytes)
        .into_iter()
        .map(|(start, _)| start)
        .collect()
}

/// Opens a database with raw sled, as the tests that damage one do. A
/// journal of this process that was just dropped may still hold sled's file
/// lock for a few milliseconds (its thread-pool tasks finish first), so the
/// lock is retried for up to 2 s, as the library's own open does.
pub fn raw_sled(path: &std::path::Path) -> sled::Db {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    loop {
        match sled::open(path) {
            Ok(db) => return db,
            Err(e) if std::time::Instant::now() < deadline && e.to_string().contains("lock") => {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            Err(e) => panic!("raw sled open of {}: {e}", path.display()),
        }
    }
}

/// Runs `agent-journal --db DB ARGS...` to completion, stdin closed and
/// `AGENT_JOURNAL_DB` unset.
pub fn run_cli(db: &std::path::Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_agent-journal"))
        .arg("--db")
        .arg(db)
        .args(args)
        .env_remove("AGENT_JOURNAL_DB")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run agent-journal")
}
