//! Mistakes a user can make through the library: each gets the right
//! error, a message naming what it should, and leaves the database exactly
//! as it was. The table of mistakes is in `bad_input/cases.rs`
//! (add a row there); this file holds its fixture, the test that runs it,
//! and the cases that need a directory of their own (an empty directory,
//! foreign sled databases, damaged exports).

mod cases;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use agent_journal::{
    Durability, Envelope, Error, EvaluationId, Event, Journal, JournalConfig, Session, SessionId,
    ToolCallRecord,
};
use tempfile::TempDir;

use crate::common::{custom, raw_sled, record_offsets};

/// `max_event_bytes` of the fixture's journals.
const LIMIT: u64 = 64 << 10;

/// An event twice the size limit.
fn big() -> Event {
    Event::Custom {
        kind: "big".into(),
        payload: vec![7u8; 2 * LIMIT as usize],
    }
}

/// The fixture's configuration: `Buffered`, events up to [`LIMIT`].
fn config() -> JournalConfig {
    JournalConfig {
        durability: Durability::Buffered,
        max_event_bytes: LIMIT,
        ..JournalConfig::default()
    }
}

/// Everything a journal holds, for before/after comparisons.
fn contents(j: &Journal) -> Vec<(SessionId, Vec<Envelope>)> {
    j.sessions()
        .expect("sessions")
        .into_iter()
        .map(|id| {
            let s = j.session(id).expect("session");
            (id, s.events(..).expect("events"))
        })
        .collect()
}

/// Every tree of a raw sled database with its entries (as text, for messages).
fn sled_contents(path: &Path) -> BTreeMap<String, Vec<(String, String)>> {
    let db = raw_sled(path);
    db.tree_names()
        .into_iter()
        .map(|name| {
            let t = db.open_tree(&name).expect("tree");
            let kv = t
                .iter()
                .map(|r| r.map(|(k, v)| (text(&k), text(&v))).expect("entry"))
                .collect();
            (text(&name), kv)
        })
        .collect()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A database with two sessions (one with a tool call), kept open, and
/// exported journals of two *other* sessions made elsewhere.
struct Fx {
    dir: TempDir,
    db: PathBuf,
    journal: Journal,
    /// An evaluation whose tool call `call_1` has started (head 5).
    a: Session,
    /// The evaluation of `a`.
    eval: EvaluationId,
    /// `custom(0..7)` (head 8).
    b: Session,
    /// Sessions not in the fixture's database.
    foreign: Vec<SessionId>,
    /// An export of the foreign sessions (4 + 6 records).
    export: PathBuf,
}

impl Fx {
    fn new() -> Fx {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = dir.path().join("db");
        let journal = Journal::open_with(&db, config()).expect("open");
        let a = journal
            .create_session_with_labels(vec![("agent".into(), "fx".into())])
            .expect("a");
        let e = a.start_evaluation("ns", "key").expect("start");
        e.system("sys").expect("system");
        e.assistant("calling", vec![ToolCallRecord::new("call_1", "ls", "{}")])
            .expect("assistant");
        e.tool_started("call_1").expect("started");
        let eval = e.id();
        let b = journal.create_session().expect("b");
        for n in 0..7 {
            b.append(custom(n)).expect("append");
        }

        let source = Journal::open_with(dir.path().join("source"), config()).expect("source");
        let mut foreign = Vec::new();
        for n in [3, 5] {
            let s = source.create_session().expect("create");
            for i in 0..n {
                s.append(custom(i)).expect("append");
            }
            foreign.push(s.id());
        }
        let export = dir.path().join("foreign.ajournal");
        assert_eq!(
            source.export_journal(&[], &export, |_| {}).expect("export"),
            10
        );
        Fx {
            dir,
            db,
            journal,
            a,
            eval,
            b,
            foreign,
            export,
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// A copy of the export, changed by `f`, under `name`.
    fn export_variant(&self, name: &str, f: impl FnOnce(&mut Vec<u8>)) -> PathBuf {
        let mut bytes = std::fs::read(&self.export).expect("read");
        f(&mut bytes);
        let p = self.path(name);
        std::fs::write(&p, bytes).expect("write");
        p
    }
}

/// Asserts that the message of `e` names each of `what`.
fn says(e: &Error, what: &[&str]) {
    let msg = e.to_string();
    for w in what {
        assert!(msg.contains(w), "{msg:?} should name {w:?}");
    }
}

#[test]
fn every_mistake_gets_its_error_and_changes_nothing() {
    let fx = Fx::new();
    let before = contents(&fx.journal);
    let names: Vec<String> = fx
        .journal
        .sessions()
        .expect("sessions")
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(names.len(), 2);
    for (name, case) in cases::all() {
        case(&fx);
        assert_eq!(contents(&fx.journal), before, "after {name:?}");
        assert_eq!(fx.a.head(), 5, "after {name:?}");
        assert_eq!(fx.b.head(), 8, "after {name:?}");
    }
    // And on disk, as another process would see it.
    fx.journal.flush().expect("flush");
    let Fx {
        dir,
        db,
        journal,
        a,
        b,
        ..
    } = fx;
    drop((journal, a, b));
    let reopened = Journal::open_with(&db, config()).expect("reopen");
    assert_eq!(contents(&reopened), before);
    assert!(reopened.verify(None, |_| {}).expect("verify").is_clean());
    drop(dir);
}

#[test]
fn an_empty_existing_directory_becomes_a_database() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("empty");
    std::fs::create_dir(&p).expect("mkdir");
    let id = {
        let j = Journal::open_with(&p, config()).expect("an empty directory is fine");
        let s = j.create_session().expect("create");
        s.append(custom(1)).expect("append");
        j.flush().expect("flush");
        s.id()
    };
    let j = Journal::open(&p).expect("reopen");
    assert_eq!(j.sessions().expect("sessions"), vec![id]);
}

#[test]
fn a_foreign_sled_database_with_an_events_tree_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("foreign");
    {
        let db = sled::open(&p).expect("sled");
        db.open_tree("events")
            .expect("tree")
            .insert("user:1", "alice")
            .expect("insert");
        db.flush().expect("flush");
    }
    let e = Journal::open(&p).unwrap_err();
    assert!(
        matches!(&e, Error::NotAJournal { path, .. } if *path == p),
        "{e:?}"
    );
    says(&e, &[&p.display().to_string()]);
}

#[test]
fn a_refused_foreign_sled_database_is_left_unchanged() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("foreign");
    {
        let db = sled::open(&p).expect("sled");
        db.open_tree("events")
            .expect("tree")
            .insert("user:1", "alice")
            .expect("insert");
        db.flush().expect("flush");
    }
    let before = sled_contents(&p);
    assert!(matches!(Journal::open(&p), Err(Error::NotAJournal { .. })));
    assert_eq!(sled_contents(&p), before);
}

#[test]
fn a_foreign_sled_database_without_the_marker_is_refused_and_left_unchanged() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("foreign");
    {
        let db = sled::open(&p).expect("sled");
        db.insert("user:1", "alice").expect("insert");
        db.open_tree("orders")
            .expect("tree")
            .insert("o:1", "42")
            .expect("insert");
        db.flush().expect("flush");
    }
    let before = sled_contents(&p);
    let r = Journal::open(&p);
    assert!(
        matches!(&r, Err(Error::NotAJournal { path, .. }) if *path == p),
        "{r:?}"
    );
    drop(r);
    assert_eq!(sled_contents(&p), before);
}

#[test]
fn an_exported_journal_with_a_zero_filled_tail_keeps_its_records() {
    let fx = Fx::new();
    let good_len = std::fs::metadata(&fx.export).expect("stat").len();
    let p = fx.export_variant("zeros.ajournal", |b| b.extend_from_slice(&[0u8; 4096]));
    let j = Journal::open_with(&p, config()).expect("opens with its tail cut");
    let tail = j.file_damage().expect("reported").clone();
    assert_eq!((tail.start, tail.len), (good_len, 4096));
    assert_eq!(j.sessions().expect("sessions"), fx.foreign);
}

#[test]
fn a_damaged_length_prefix_before_good_records_is_corruption() {
    let fx = Fx::new();
    let bytes = std::fs::read(&fx.export).expect("read");
    let mid = record_offsets(&bytes)[5];
    // The high byte of the length: the record now "runs past the end".
    let p = fx.export_variant("length.ajournal", |b| b[mid + 3] ^= 0x01);
    let r = Journal::open(&p);
    assert!(
        matches!(&r, Err(Error::Corruption { offset: Some(o), .. }) if *o == mid as u64),
        "four good records follow the damage: {:?}",
        r.as_ref().map(|j| j.file_damage().cloned())
    );
}
