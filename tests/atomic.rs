//! Copies whole or not at all: `export -o FILE` and the library's
//! `export_journal` write a temporary file and rename it, so a failure
//! leaves the file they were replacing unchanged; `compact` and `salvage`
//! build their new database under a temporary name; an import of several
//! sessions that does not finish is rolled back by the next one (its
//! intent file, `docs/format.md`). Kills at random moments are in
//! `kill/maintenance.rs`; these are the cases one can set up exactly.
#![cfg(unix)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use agent_journal::format::SharedBytes;
use agent_journal::store::{Store, Visit};
use agent_journal::{Durability, Error, Journal, JournalConfig, Result, SessionId};

use crate::common::{custom, event_key, path_str, raw_sled, run_cli};

/// The intent file an import keeps in the database directory while it runs.
const INTENT: &str = "agent-journal.importing";

fn buffered() -> JournalConfig {
    JournalConfig {
        durability: Durability::Buffered,
        ..JournalConfig::default()
    }
}

/// A database at `db` with `sessions` sessions of `events` events each
/// (`custom(0..)` after `SessionOpened`); returns their ids in id order.
fn database(db: &Path, sessions: usize, events: u64) -> Vec<SessionId> {
    let j = Journal::open_with(db, buffered()).expect("open");
    let mut ids: Vec<SessionId> = (0..sessions)
        .map(|_| {
            let s = j.create_session().expect("create");
            s.append_batch((1..events).map(custom).collect())
                .expect("append");
            s.id()
        })
        .collect();
    j.flush().expect("flush");
    ids.sort();
    ids
}

/// The events of every session of the database or file at `path`, as
/// `log` would show them (panics if it does not open).
fn contents(path: &Path) -> BTreeMap<SessionId, Vec<agent_journal::Envelope>> {
    let j = Journal::open_with(
        path,
        JournalConfig {
            create_if_missing: false,
            ..buffered()
        },
    )
    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(j.file_damage().is_none(), "{}", path.display());
    j.sessions()
        .expect("sessions")
        .into_iter()
        .map(|id| {
            (
                id,
                j.session(id).expect("session").events(..).expect("events"),
            )
        })
        .collect()
}

/// Names in `dir` that start with a dot: the temporaries of a write.
fn temporaries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .expect("read_dir")
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.starts_with('.'))
        .collect()
}

/// Damages event `seq` of session `id` (one flipped byte of its body).
fn damage(db: &Path, id: SessionId, seq: u64) {
    let sled = raw_sled(db);
    let events = sled.open_tree("events").expect("tree");
    crate::common::unpack_event(db, &events, id, seq);
    let key = event_key(id, seq);
    let mut v = events.get(&key).expect("get").expect("present").to_vec();
    v[12] ^= 0x5a;
    events.insert(key, v).expect("insert");
    sled.flush().expect("flush");
}

#[test]
fn a_failed_export_keeps_the_backup_it_was_writing_over() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    let ids = database(&db, 1, 60);
    let backup = dir.path().join("backup.ajournal");
    let n = Journal::open(&db)
        .expect("open")
        .export_journal(&ids, &backup, |_| {})
        .expect("the good backup");
    assert_eq!(n, 60);
    let good = std::fs::read(&backup).expect("read");

    // A record in the middle goes bad: exporting again fails half-way.
    damage(&db, ids[0], 30);
    let out = run_cli(
        &db,
        &[
            "export",
            &ids[0].to_string(),
            "--format",
            "journal",
            "-o",
            path_str(&backup),
        ],
    );
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("seq 30"),
        "{out:?}"
    );
    assert_eq!(std::fs::read(&backup).expect("read"), good, "the backup");
    assert_eq!(temporaries(dir.path()), Vec::<String>::new());

    let j = Journal::open(&db).expect("open");
    let e = j.export_journal(&ids, &backup, |_| {}).unwrap_err();
    assert!(
        matches!(&e, Error::Corruption { seq: Some(30), .. }),
        "{e:?}"
    );
    assert_eq!(std::fs::read(&backup).expect("read"), good, "the backup");
    // An unknown session fails before anything is written.
    let fresh = dir.path().join("fresh.ajournal");
    let e = j
        .export_journal(&[SessionId::new()], &fresh, |_| {})
        .unwrap_err();
    assert!(matches!(&e, Error::SessionNotFound(_)), "{e:?}");
    assert!(!fresh.exists());
    assert_eq!(temporaries(dir.path()), Vec::<String>::new());
}

#[test]
fn an_export_replaces_its_target_in_one_rename() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    let ids = database(&db, 2, 300);
    let j = Journal::open(&db).expect("open");
    let old: &[u8] = b"the previous backup";
    let backup = dir.path().join("backup.ajournal");
    std::fs::write(&backup, old).expect("write");
    std::fs::set_permissions(&backup, std::fs::Permissions::from_mode(0o640)).expect("chmod");
    // Through a symbolic link: the file it names is replaced, the link stays.
    let link = dir.path().join("link.ajournal");
    std::os::unix::fs::symlink(&backup, &link).expect("symlink");

    let mut seen_midway = Vec::new();
    let n = j
        .export_journal(&ids, &link, |_| {
            if seen_midway.len() < 3 {
                seen_midway.push(std::fs::read(&backup).expect("read"));
            }
        })
        .expect("export");
    assert_eq!(n, 600);
    assert!(
        seen_midway.iter().all(|b| b == old),
        "the old file until the end"
    );
    assert!(
        std::fs::symlink_metadata(&link)
            .expect("stat")
            .file_type()
            .is_symlink()
    );
    let meta = std::fs::metadata(&backup).expect("stat");
    assert_eq!(meta.permissions().mode() & 0o777, 0o640, "permissions kept");
    drop(j);
    let exported = contents(&backup);
    assert_eq!(exported, contents(&db));
    assert_eq!(temporaries(dir.path()), Vec::<String>::new());

    // Text formats too, through the binary; `-o` on a non-file is written
    // as it is.
    let conversation = Journal::open_with(&db, buffered())
        .expect("open")
        .import_conversation(
            r#"[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"},{"role":"assistant","content":"Hello."}]"#,
            agent_journal::provider::ConversationFormat::OpenAi,
            "ns",
            "key",
        )
        .expect("a conversation")
        .id()
        .to_string();
    for format in ["wink", "jsonl", "openai", "anthropic", "journal"] {
        let text = dir.path().join(format!("out.{format}"));
        std::fs::write(&text, old).expect("write");
        let args = ["export", &conversation, "--format", format, "-o"];
        let out = run_cli(&db, &[&args[..], &[path_str(&text)]].concat());
        assert!(out.status.success(), "{out:?}");
        let written = String::from_utf8_lossy(&std::fs::read(&text).expect("read")).into_owned();
        assert!(written.contains("Hello."), "{format}: {written}");
        // Written as it is (a character device takes no fsync: not an error).
        let direct = run_cli(&db, &[&args[..], &["/dev/null"]].concat());
        assert!(direct.status.success(), "{direct:?}");
    }
    assert_eq!(temporaries(dir.path()), Vec::<String>::new());
}

#[test]
fn compact_and_salvage_build_their_target_under_a_temporary_name() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    database(&db, 3, 200);
    let expected = contents(&db);
    let j = Journal::open(&db).expect("open");

    let dest = dir.path().join("compacted");
    let mut visible = false;
    let r = j
        .compact_to(&dest, |_| visible |= dest.exists())
        .expect("compact");
    assert!(!visible, "the target appeared before it was whole");
    assert_eq!((r.sessions, r.events), (3, 600));
    let salvaged = dir.path().join("salvaged");
    j.salvage_to(&salvaged).expect("salvage");
    let file = dir.path().join("all.ajournal");
    j.export_journal(&[], &file, |_| {}).expect("export");
    let from_file = dir.path().join("from-file");
    agent_journal::maintenance::salvage_file(
        &file,
        &from_file,
        agent_journal::format::DEFAULT_MAX_EVENT_BYTES,
    )
    .expect("salvage the file");

    // An existing target is refused and left alone; an empty directory is taken.
    let e = j.compact_to(&dest, |_| {}).unwrap_err();
    assert!(
        matches!(&e, Error::InvalidInput(m) if m.contains("already exists")),
        "{e:?}"
    );
    let e = j.salvage_to(&file).unwrap_err();
    assert!(matches!(&e, Error::InvalidInput(_)), "{e:?}");
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).expect("mkdir");
    j.compact_to(&empty, |_| {})
        .expect("into an empty directory");
    drop(j);
    for path in [&dest, &salvaged, &from_file, &empty] {
        assert_eq!(contents(path), expected, "{}", path.display());
    }
    assert_eq!(temporaries(dir.path()), Vec::<String>::new());

    // The binary's refusal, with the target unchanged.
    let before = crate::common::tree(&dest);
    let out = run_cli(&db, &["compact", "--to", path_str(&dest)]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert_eq!(crate::common::tree(&dest), before);
}

#[test]
fn temporaries_of_killed_runs_are_removed_by_the_next_run_and_live_ones_kept() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    let ids = database(&db, 1, 20);
    // A pid above Linux's largest (2^22) belongs to no process.
    let dead = dir.path().join(".new.db.999999999.0.tmp");
    std::fs::create_dir_all(dead.join("blobs")).expect("mkdir");
    std::fs::write(dead.join("db"), b"half a database").expect("write");
    let live = dir
        .path()
        .join(format!(".new.db.{}.77.tmp", std::process::id()));
    std::fs::create_dir(&live).expect("mkdir");
    let dead_file = dir.path().join(".out.ajournal.999999999.3.tmp");
    std::fs::write(&dead_file, b"half an export").expect("write");
    let other = dir.path().join(".other.999999999.0.tmp");
    std::fs::write(&other, b"not ours").expect("write");

    let j = Journal::open(&db).expect("open");
    j.compact_to(&dir.path().join("new.db"), |_| {})
        .expect("compact");
    j.export_journal(&ids, dir.path().join("out.ajournal"), |_| {})
        .expect("export");
    let mut left = temporaries(dir.path());
    left.sort();
    let mut want = vec![
        ".other.999999999.0.tmp".to_owned(),
        format!(".new.db.{}.77.tmp", std::process::id()),
    ];
    want.sort();
    if Path::new("/proc/self").exists() {
        assert_eq!(left, want);
    }
}

/// Exports `sessions` of `db` to `file`.
fn export(db: &Path, sessions: &[SessionId], file: &Path) {
    Journal::open_with(db, buffered())
        .expect("open")
        .export_journal(sessions, file, |_| {})
        .expect("export");
}

/// A database with one session of its own, and a file of three other
/// sessions to import into it.
struct ImportCase {
    _dir: tempfile::TempDir,
    target: PathBuf,
    own: SessionId,
    file: PathBuf,
    foreign: Vec<SessionId>,
    dir: PathBuf,
}

fn import_case() -> ImportCase {
    let dir = tempfile::tempdir().expect("tempdir");
    let source = dir.path().join("source");
    let foreign = database(&source, 3, 50);
    let file = dir.path().join("three.ajournal");
    export(&source, &[], &file);
    let target = dir.path().join("target");
    let own = database(&target, 1, 10)[0];
    ImportCase {
        dir: dir.path().to_owned(),
        _dir: dir,
        target,
        own,
        file,
        foreign,
    }
}

/// What a kill half-way through an import of `case.file` leaves: its first
/// session in, and the intent file naming all three.
fn interrupted_import(case: &ImportCase) {
    let first = case.dir.join("first.ajournal");
    export(&case.dir.join("source"), &case.foreign[..1], &first);
    Journal::open(&case.target)
        .expect("open")
        .import_journal(&first)
        .expect("import the first session");
    let mut intent = "agent-journal import 1\n".to_owned();
    for id in &case.foreign {
        intent.push_str(&format!("{id}\n"));
    }
    intent.push_str("end 3\n");
    std::fs::write(case.target.join(INTENT), intent).expect("write the intent");
}

#[test]
fn an_interrupted_import_is_rolled_back_and_the_rerun_imports_everything() {
    let case = import_case();
    interrupted_import(&case);
    let own_events = contents(&case.target)[&case.own].clone();

    // Opening the database rolls the half-imported session back before
    // anything reads it: copies hold only what was there before.
    let j = Journal::open(&case.target).expect("open");
    assert!(!case.target.join(INTENT).exists(), "rolled back at open");
    assert_eq!(j.sessions().expect("sessions"), vec![case.own]);
    let compacted = case.dir.join("compacted");
    let r = j.compact_to(&compacted, |_| {}).expect("compact");
    assert_eq!(r.sessions, 1);
    let salvaged = case.dir.join("salvaged");
    let r = j.salvage_to(&salvaged).expect("salvage");
    assert_eq!(r.sessions, 1);
    let all = case.dir.join("all.ajournal");
    j.export_journal(&[], &all, |_| {}).expect("export");
    drop(j);
    for copy in [&compacted, &salvaged, &all] {
        assert_eq!(
            contents(copy).keys().copied().collect::<Vec<_>>(),
            vec![case.own],
            "{}",
            copy.display()
        );
    }

    // The user runs the import again: it goes through, whole.
    let out = run_cli(
        &case.target,
        &["import", path_str(&case.file), "--format", "journal"],
    );
    assert!(out.status.success(), "{out:?}");
    assert!(!case.target.join(INTENT).exists());
    let now = contents(&case.target);
    let source = contents(&case.dir.join("source"));
    assert_eq!(now.len(), 4);
    assert_eq!(now[&case.own], own_events);
    for id in &case.foreign {
        assert_eq!(now[id], source[id], "session {id}");
    }
    assert_eq!(temporaries(&case.target), Vec::<String>::new());
}

#[test]
fn an_unreadable_import_intent_is_corruption_naming_the_file() {
    let case = import_case();
    interrupted_import(&case);
    let intent = case.target.join(INTENT);
    let text = std::fs::read_to_string(&intent).expect("read");
    std::fs::write(&intent, text.replace("end 3", "end 2")).expect("write");
    let out = run_cli(
        &case.target,
        &["import", path_str(&case.file), "--format", "journal"],
    );
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(INTENT) && err.contains("interrupted import"),
        "{err}"
    );
    // Nothing was changed: the file stays for the user to decide.
    assert!(intent.exists());
    assert_eq!(contents(&case.target).len(), 2);
}

// ---------------------------------------------------------------------------
// An import that fails half-way in the process (not killed) rolls back
// what it wrote itself.

/// Frames in memory; the append numbered `fail_at` fails (after writing
/// its frames, as a store that dies mid-write may have), and so does every
/// flush once `fail_flush` is set.
#[derive(Default)]
struct Flaky {
    streams: Mutex<BTreeMap<SessionId, Vec<Vec<u8>>>>,
    appends: AtomicU64,
    fail_at: AtomicU64,
    fail_flush: std::sync::atomic::AtomicBool,
}

fn injected(what: &str) -> Error {
    Error::Io {
        context: what.to_owned(),
        source: std::io::Error::other("injected fault"),
    }
}

impl Store for Flaky {
    fn kind(&self) -> &'static str {
        "flaky"
    }
    fn append(&self, session: SessionId, expected: u64, frames: &[Vec<u8>]) -> Result<()> {
        let mut streams = self.streams.lock().expect("lock");
        let s = streams.entry(session).or_default();
        if s.len() as u64 != expected {
            return Err(Error::Conflict {
                session,
                expected,
                found: s.len() as u64,
            });
        }
        s.extend(frames.iter().cloned());
        if self.appends.fetch_add(1, Ordering::SeqCst) + 1 == self.fail_at.load(Ordering::SeqCst) {
            return Err(injected("appending"));
        }
        Ok(())
    }
    fn len(&self, session: SessionId) -> Result<Option<u64>> {
        let streams = self.streams.lock().expect("lock");
        Ok(streams.get(&session).map(|s| s.len() as u64))
    }
    fn scan(
        &self,
        session: SessionId,
        from: u64,
        to: u64,
        visit: &mut dyn FnMut(u64, &[u8]) -> Result<Visit>,
    ) -> Result<()> {
        let frames = self.streams.lock().expect("lock").get(&session).cloned();
        for (seq, f) in frames.unwrap_or_default().iter().enumerate() {
            let seq = seq as u64;
            if (from..to).contains(&seq) && visit(seq, f)?.is_break() {
                break;
            }
        }
        Ok(())
    }
    fn sessions(&self) -> Result<Vec<SessionId>> {
        Ok(self.streams.lock().expect("lock").keys().copied().collect())
    }
    fn put_snapshot(&self, _: SessionId, _: u64, _: Vec<u8>) -> Result<()> {
        Ok(())
    }
    fn latest_snapshot(&self, _: SessionId) -> Result<Option<(u64, SharedBytes)>> {
        Ok(None)
    }
    fn truncate(&self, session: SessionId, from: u64) -> Result<()> {
        let mut streams = self.streams.lock().expect("lock");
        if let Some(s) = streams.get_mut(&session) {
            s.truncate(from as usize);
            if s.is_empty() {
                streams.remove(&session);
            }
        }
        Ok(())
    }
    fn delete_session(&self, session: SessionId) -> Result<()> {
        self.streams.lock().expect("lock").remove(&session);
        Ok(())
    }
    fn drop_snapshots(&self, _: SessionId) -> Result<()> {
        Ok(())
    }
    fn flush(&self, _: Durability) -> Result<()> {
        if self.fail_flush.load(Ordering::SeqCst) {
            return Err(injected("flushing"));
        }
        Ok(())
    }
    fn size_on_disk(&self) -> Result<u64> {
        Ok(0)
    }
}

#[test]
fn an_import_that_fails_half_way_rolls_back_what_it_wrote() {
    let case = import_case();
    // The second of three sessions fails.
    let store = Arc::new(Flaky::default());
    store.fail_at.store(2, Ordering::SeqCst);
    let j = Journal::with_store(store.clone(), JournalConfig::default());
    let e = j.import_journal(&case.file).unwrap_err();
    assert!(matches!(&e, Error::Io { .. }), "{e:?}");
    // A failed write poisons the journal: nothing more is written to a
    // store in doubt, not even the undo (on disk, the intent file stays and
    // the next open rolls the import back), and the re-run is refused.
    let e = j.import_journal(&case.file).unwrap_err();
    assert!(matches!(&e, Error::Poisoned(_)), "{e:?}");
    // A store that did not fail: an error before any write changes nothing
    // and the import goes through.
    let store = Arc::new(Flaky::default());
    let j = Journal::with_store(store.clone(), JournalConfig::default());
    let (ids, tail) = j.import_journal(&case.file).expect("import");
    assert_eq!((ids, tail), (case.foreign.clone(), None));

    // A flush that fails after every session was written: rolled back too.
    let store = Arc::new(Flaky::default());
    let j = Journal::with_store(store.clone(), JournalConfig::default());
    let keep = j.create_session().expect("create").id();
    store.fail_flush.store(true, Ordering::SeqCst);
    let e = j.import_journal(&case.file).unwrap_err();
    assert!(matches!(&e, Error::Io { .. }), "{e:?}");
    assert!(j.sessions().expect("sessions").contains(&keep));
}
