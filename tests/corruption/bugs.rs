//! What the campaign found, one small deterministic test each, stating
//! the promised behaviour: a failure here names the finding more plainly
//! than a random case of the campaign does. The one ignored test is a
//! limitation of sled 0.34 that is still open (its reason says what).

use std::path::{Path, PathBuf};

use agent_journal::{
    DEFAULT_MAX_EVENT_BYTES, Envelope, Error, Event, Journal, JournalConfig, SessionId,
    salvage_file,
};

use super::db_cases::{DbDamage, apply};
use super::process::aj;
use crate::common::{Rng, custom, record_offsets};

/// A database with one session of `SessionOpened` and `n` custom events.
fn plain_db(dir: &Path, n: u64) -> (PathBuf, SessionId, Vec<Envelope>) {
    let db = dir.join("db");
    let j = Journal::open(&db).expect("open");
    let s = j.create_session().expect("create");
    for i in 0..n {
        s.append(custom(i)).expect("append");
    }
    let events = s.events(..).expect("events");
    (db, s.id(), events)
}

fn salvaged(dest: &Path, id: SessionId) -> Vec<Envelope> {
    let j = Journal::open(dest).expect("open salvaged");
    j.session(id).expect("session").events(..).expect("events")
}

#[test]
fn a_gap_is_reported_at_the_missing_seq() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (db, id, _) = plain_db(dir.path(), 10);
    apply(&db, &[DbDamage::Remove(id, 4)], &mut Rng::new(1));
    let j = Journal::open(&db).expect("open");
    let r = j.session(id);
    assert!(
        matches!(r, Err(Error::Corruption { seq: Some(4), .. })),
        "seq 4 is the one missing: {r:?}"
    );
}

#[test]
fn a_gap_before_the_last_record_is_corruption_not_a_torn_tail() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (db, id, _) = plain_db(dir.path(), 10);
    apply(&db, &[DbDamage::Remove(id, 9)], &mut Rng::new(1));
    let j = Journal::open(&db).expect("open");
    match j.session(id) {
        Err(Error::Corruption { seq: Some(9), .. }) => {}
        Ok(s) => {
            let tail = s.torn_tail();
            let cut = s.append(Event::Custom {
                kind: "x".into(),
                payload: vec![],
            });
            panic!(
                "opened with {tail:?}; an append ({cut:?}) then deleted record 10, which was whole: {:?}",
                s.events(..).map(|e| e.len())
            );
        }
        Err(e) => panic!("expected corruption at seq 9, got {e:?}"),
    }
}

#[test]
fn misplaced_records_at_the_end_are_corruption_not_a_torn_tail() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (db, id, _) = plain_db(dir.path(), 10);
    apply(&db, &[DbDamage::Swap((id, 9), (id, 10))], &mut Rng::new(1));
    let j = Journal::open(&db).expect("open");
    let r = j.session(id).map(|s| s.torn_tail());
    assert!(
        matches!(r, Err(Error::Corruption { seq: Some(9), .. })),
        "two whole records in each other's place are not a crash artefact: {r:?}"
    );
}

#[test]
fn salvage_puts_misplaced_records_back_in_place() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (db, id, original) = plain_db(dir.path(), 10);
    apply(&db, &[DbDamage::Swap((id, 3), (id, 6))], &mut Rng::new(1));
    let dest = dir.path().join("salvaged");
    let report = Journal::open(&db)
        .expect("open")
        .salvage_to(&dest)
        .expect("salvage");
    assert_eq!(report.copied, 11, "{report:?}");
    assert_eq!(salvaged(&dest, id), original);
}

#[test]
fn salvage_lists_a_gap_as_lost() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (db, id, _) = plain_db(dir.path(), 10);
    apply(&db, &[DbDamage::Remove(id, 4)], &mut Rng::new(1));
    let report = Journal::open(&db)
        .expect("open")
        .salvage_to(&dir.path().join("salvaged"))
        .expect("salvage");
    assert!(
        report
            .dropped
            .iter()
            .any(|p| p.session == id && p.seq == Some(4)),
        "{report:?}"
    );
}

#[test]
fn salvage_file_resyncs_after_a_damaged_length_prefix() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (db, id, original) = plain_db(dir.path(), 10);
    let file = dir.path().join("x.ajournal");
    Journal::open(&db)
        .expect("open")
        .export_journal(&[], &file, |_| {})
        .expect("export");
    let mut bytes = std::fs::read(&file).expect("read");
    // The length of record 2 grows by 4096: it now runs past the end.
    let pos = record_offsets(&bytes)[2];
    bytes[pos + 1] ^= 0x10;
    std::fs::write(&file, &bytes).expect("write");
    let strict = Journal::open(&file);
    assert!(
        matches!(strict, Err(Error::Corruption { offset: Some(o), .. }) if o == pos as u64),
        "{strict:?}"
    );
    let dest = dir.path().join("salvaged");
    let report = salvage_file(&file, &dest, DEFAULT_MAX_EVENT_BYTES).expect("salvage");
    assert_eq!(report.copied, 10, "every record but seq 2: {report:?}");
    let got = salvaged(&dest, id);
    assert_eq!(got.len(), 11, "seq 2 replaced by a marker");
    assert_eq!(got[3..], original[3..]);
}

/// Format 1 could not tell (no end marker, no count); format 2's trailer
/// does.
#[test]
fn an_ajournal_cut_between_records_is_reported() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (db, _, _) = plain_db(dir.path(), 10);
    let file = dir.path().join("x.ajournal");
    Journal::open(&db)
        .expect("open")
        .export_journal(&[], &file, |_| {})
        .expect("export");
    let bytes = std::fs::read(&file).expect("read");
    let pos = record_offsets(&bytes)[6];
    std::fs::write(&file, &bytes[..pos]).expect("cut after record 5");
    let r = Journal::open(&file).map(|j| j.file_damage().cloned());
    assert!(
        matches!(r, Ok(Some(_)) | Err(Error::Corruption { .. })),
        "5 of 11 records gone without a word: {r:?}"
    );
}

/// A database written by one process, closed: sled has no snapshot of its
/// own yet, so everything is in its log.
fn one_process_db(dir: &Path) -> PathBuf {
    plain_db(dir, 20).0
}

fn flip_db_file(db: &Path, at: usize) {
    let file = db.join("db");
    let mut bytes = std::fs::read(&file).expect("read db file");
    bytes[at] ^= 0x40;
    std::fs::write(&file, bytes).expect("write db file");
}

#[test]
fn a_database_sled_reopens_empty_is_not_taken_for_a_new_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = one_process_db(dir.path());
    flip_db_file(&db, 20);
    let r = Journal::open_with(
        &db,
        JournalConfig {
            create_if_missing: false,
            ..JournalConfig::default()
        },
    )
    .map(|j| j.sessions().map(|s| s.len()));
    assert!(
        !matches!(r, Ok(Ok(0))),
        "a damaged database of 21 events opened as an empty journal"
    );
}

#[test]
#[ignore = "KNOWN LIMITATION, open (sled 0.34): sled treats a damaged log message as the end of its log, opens at the point before it and zeroes the log after it; verify says ok and the events are gone for good. verify/salvage should open a copy, and the journal needs its own record of stream heads to notice"]
fn verify_neither_hides_nor_destroys_a_rolled_back_log() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = one_process_db(dir.path());
    let len = std::fs::read(db.join("db"))
        .expect("read")
        .iter()
        .rposition(|b| *b != 0);
    // Inside the log, past the first messages: sled keeps what is before.
    flip_db_file(&db, len.expect("a written log") * 2 / 3);
    let before = std::fs::read(db.join("db")).expect("read");
    let out = aj(&db, &["verify"], &dir.path().join("verify"));
    let after = std::fs::read(db.join("db")).expect("read");
    let changed = before.iter().zip(&after).filter(|(a, b)| a != b).count();
    assert!(
        out.code != Some(0) && changed == 0,
        "verify exited {:?} ({}) and changed {changed} bytes of the db file",
        out.code,
        out.stdout.trim()
    );
}
