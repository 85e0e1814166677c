//! The source of the maintenance kill rounds (`kill/maintenance.rs`): a
//! database of several sessions of [`expected_event`]s, the same sessions
//! exported, a database to import into; and the check that a target holds
//! exactly those sessions, whole.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use agent_journal::{CheckpointStrategy, Durability, Event, Journal, JournalConfig, SessionId};

use super::content::expected_event;

/// The source of every round: a database of several sessions (their events
/// are [`expected_event`]s, with snapshots) and the same sessions exported.
pub struct Fixture {
    /// Keeps the files alive.
    _dir: tempfile::TempDir,
    /// Where each command writes its targets.
    pub work: PathBuf,
    /// The source database.
    pub db: PathBuf,
    /// Its sessions exported to one `.ajournal` file.
    pub file: PathBuf,
    /// The bytes of `file`, to see that nothing changed it.
    pub file_bytes: Vec<u8>,
    /// A database holding one session of its own: the target of imports.
    pub import_template: PathBuf,
    /// That session and its length.
    pub own: (SessionId, u64),
    /// Every session of the source and its length, in id order.
    pub sessions: Vec<(SessionId, u64)>,
}

/// Appends [`expected_event`]s `1..events` to a new session of `journal`.
fn fill(journal: &Journal, events: u64) -> (SessionId, u64) {
    let s = journal
        .create_session_with_labels(vec![("test".into(), "kill".into())])
        .expect("create");
    let id = s.id();
    let mut seq = 1;
    while seq < events {
        let end = (seq + 100).min(events);
        let batch: Vec<Event> = (seq..end).map(|n| expected_event(id, n)).collect();
        s.append_batch(batch).expect("append");
        seq = end;
    }
    (id, events)
}

/// Builds the source: `sessions` sessions of `events` events each.
pub fn fixture(sessions: usize, events: u64) -> Fixture {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("src.db");
    let file = dir.path().join("src.ajournal");
    let work = dir.path().join("work");
    std::fs::create_dir_all(&work).expect("mkdir");
    let config = || JournalConfig {
        durability: Durability::Buffered,
        checkpoint: CheckpointStrategy::Incremental { every: 200 },
        ..JournalConfig::default()
    };
    let journal = Journal::open_with(&db, config()).expect("open the source");
    let mut all: Vec<(SessionId, u64)> = (0..sessions)
        .map(|i| fill(&journal, events + 37 * i as u64))
        .collect();
    all.sort();
    journal.flush().expect("flush");
    journal
        .export_journal(&[], &file, |_| {})
        .expect("export the source");
    drop(journal);
    let import_template = dir.path().join("template.db");
    let journal = Journal::open_with(&import_template, config()).expect("open the template");
    let own = fill(&journal, 40);
    journal.flush().expect("flush");
    drop(journal);
    let file_bytes = std::fs::read(&file).expect("read the export");
    Fixture {
        _dir: dir,
        work,
        db,
        file,
        file_bytes,
        import_template,
        own,
        sessions: all,
    }
}

/// Opens the database (or `.ajournal` file) at `path` and checks that it
/// holds exactly `expected`: those sessions, each event the one written, no
/// torn tail, `verify` clean.
pub fn check_whole(path: &Path, expected: &[(SessionId, u64)]) -> Result<(), String> {
    let journal = Journal::open_with(
        path,
        JournalConfig {
            create_if_missing: false,
            durability: Durability::Buffered,
            ..JournalConfig::default()
        },
    )
    .map_err(|e| format!("does not open: {e}"))?;
    if let Some(d) = journal.file_damage() {
        return Err(format!("damaged file: {d}"));
    }
    let ids: BTreeSet<SessionId> = journal
        .sessions()
        .map_err(|e| format!("sessions: {e}"))?
        .into_iter()
        .collect();
    let want: BTreeSet<SessionId> = expected.iter().map(|(id, _)| *id).collect();
    if ids != want {
        return Err(format!(
            "holds {} sessions, {} of the {} expected",
            ids.len(),
            ids.intersection(&want).count(),
            want.len()
        ));
    }
    for &(id, len) in expected {
        check_session(&journal, id, len)?;
    }
    let report = journal
        .verify(None, |_| {})
        .map_err(|e| format!("verify: {e}"))?;
    if report.has_damage() {
        return Err(format!("verify: {:?}", report.problems));
    }
    Ok(())
}

/// Session `id` of `journal` holds exactly the [`expected_event`]s `0..len`.
pub fn check_session(journal: &Journal, id: SessionId, len: u64) -> Result<(), String> {
    let s = journal
        .session(id)
        .map_err(|e| format!("session {id}: {e}"))?;
    if let Some(t) = s.torn_tail() {
        return Err(format!("session {id}: torn tail {t}"));
    }
    if s.head() != len {
        return Err(format!("session {id}: {} events of {len}", s.head()));
    }
    let events = s.events(..).map_err(|e| format!("session {id}: {e}"))?;
    for (seq, env) in events.iter().enumerate() {
        if env.seq != seq as u64 || env.event != expected_event(id, seq as u64) {
            return Err(format!("session {id}: event {seq} is not the one written"));
        }
    }
    Ok(())
}
