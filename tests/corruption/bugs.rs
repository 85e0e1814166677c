//! What the campaign found, one small deterministic test each, stating
//! the promised behaviour: a failure here names the finding more plainly
//! than a random case of the campaign does. Ignored tests are findings
//! still open: a limitation of sled 0.34, and (`bug: ...`) the losses of
//! acknowledged events that the write-ahead log's damage causes without a
//! report (built from what a kill leaves: [`killed_image`]).

use std::path::{Path, PathBuf};

use agent_journal::format::DEFAULT_MAX_EVENT_BYTES;
use agent_journal::maintenance::salvage_file;
use agent_journal::{Envelope, Error, Event, Journal, JournalConfig, SessionId};

use super::db_cases::{DbDamage, apply};
use super::killed::{WalRecord, wal_current_generation};
use super::process::aj;
use crate::common::{Rng, copy_dir, custom, raw_sled, record_offsets};

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

/// A key removed from sled: salvage finds the frame whole in the bytes of
/// sled's file (the page it was on before) and gives it back in place; had
/// it not, it would list the gap as lost.
#[test]
fn salvage_gives_a_removed_key_back_from_the_files_or_lists_the_gap() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (db, id, events) = plain_db(dir.path(), 10);
    apply(&db, &[DbDamage::Remove(id, 4)], &mut Rng::new(1));
    let dest = dir.path().join("salvaged");
    let report = Journal::open(&db)
        .expect("open")
        .salvage_to(&dest)
        .expect("salvage");
    let listed = report
        .dropped
        .iter()
        .any(|p| p.session == id && p.seq == Some(4));
    let back = salvaged(&dest, id)
        .iter()
        .any(|e| e.seq == 4 && e.event == events[4].event);
    assert!(
        listed != back,
        "listed {listed}, given back {back}: {report:?}"
    );
    assert_eq!(report.from_files, u64::from(back), "{report:?}");
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

/// Without an end marker a reader could not tell; the trailer does.
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

/// sled treats a damaged log message as the end of its log, opens at the
/// point before it and zeroes the log after it: `verify` and `salvage`
/// work on a private copy, so that looking at a damaged database never
/// destroys the evidence (every file of it byte for byte as it was), and
/// both still report the damage.
#[test]
fn verify_and_salvage_neither_hide_nor_destroy_a_rolled_back_log() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = one_process_db(dir.path());
    let len = std::fs::read(db.join("db"))
        .expect("read")
        .iter()
        .rposition(|b| *b != 0);
    // Inside the log, past the first messages: sled keeps what is before.
    flip_db_file(&db, len.expect("a written log") * 2 / 3);
    let before = crate::common::tree(&db);
    let out = aj(&db, &["verify"], &dir.path().join("verify"));
    assert_eq!(crate::common::tree(&db), before, "verify changed the files");
    assert_eq!(out.code, Some(3), "verify: {}", out.stdout.trim());
    let to = dir.path().join("salvaged");
    let out = aj(
        &db,
        &["salvage", "--to", to.to_str().expect("utf-8")],
        &dir.path().join("salvage"),
    );
    assert_eq!(
        crate::common::tree(&db),
        before,
        "salvage changed the files"
    );
    assert_eq!(out.code, Some(0), "salvage: {}", out.stdout.trim());
    let salvaged = Journal::open(&to).expect("open the salvaged copy");
    let events: usize = salvaged
        .sessions()
        .expect("sessions")
        .into_iter()
        .map(|id| salvaged.session(id).expect("session").head() as usize)
        .sum();
    assert!(events >= 21, "salvage gave back {events} of 21 events");
}

/// What a SIGKILL leaves of a `Synced` journal that appended `plan` (one
/// event to session `i` per entry) since it opened: the write-ahead log
/// holds a record per append, the acknowledgement log nothing of them (it is written
/// when sled is made durable: at open, at close, at a checkpoint), and sled
/// lost its buffer (every key of these sessions is removed from the copy,
/// so that what sled's flusher managed before the copy does not matter).
/// Returns the copy, the sessions, and the log's records of its current
/// generation.
fn killed_image(
    dir: &Path,
    sessions: usize,
    plan: &[usize],
) -> (PathBuf, Vec<SessionId>, Vec<WalRecord>) {
    let live = dir.join("live");
    let j = Journal::open(&live).expect("open");
    let ss: Vec<_> = (0..sessions)
        .map(|_| j.create_session().expect("create"))
        .collect();
    for (n, &i) in plan.iter().enumerate() {
        ss[i].append(custom(n as u64)).expect("append");
    }
    let image = dir.join("image");
    copy_dir(&live, &image);
    let ids: Vec<SessionId> = ss.iter().map(|s| s.id()).collect();
    drop(ss);
    drop(j);
    let raw = raw_sled(&image);
    let events = raw.open_tree("events").expect("tree");
    for id in &ids {
        for k in events.scan_prefix(id.as_bytes()).keys() {
            events.remove(k.expect("key")).expect("remove");
        }
    }
    raw.flush().expect("flush");
    drop(raw);
    let log = std::fs::read(image.join("wal")).expect("read the log");
    let records = wal_current_generation(&log);
    assert_eq!(
        records.len(),
        2 * (sessions + plan.len()),
        "a record per append, twice"
    );
    (image, ids, records)
}

/// Whether the library returns or reports every one of the first `acked`
/// events of `id` (a torn tail, a loss, `verify` damage at or before the
/// first missing seq).
fn returned_or_reported(db: &Path, id: SessionId, acked: u64) -> Result<(), String> {
    let j = Journal::open(db).map_err(|e| format!("open: {e}"))?;
    let losses = j.losses();
    let s = match j.session(id) {
        Ok(s) => s,
        Err(Error::Corruption { .. }) => return Ok(()),
        Err(e) => return Err(format!("session: {e}")),
    };
    let got = s.events(..).map_err(|e| format!("events: {e}"))?.len() as u64;
    if got >= acked {
        return Ok(());
    }
    let report = j.verify(None, |_| {}).map_err(|e| format!("verify: {e}"))?;
    let named = report
        .problems
        .iter()
        .any(|p| p.session == id && p.seq.is_some_and(|q| q <= got));
    if s.torn_tail().is_some() || losses.iter().any(|l| l.session == id) || named {
        return Ok(());
    }
    Err(format!(
        "{id}: {got} of {acked} acknowledged events returned; no torn tail, no loss \
         ({losses:?}), verify: {:?}",
        report.problems
    ))
}

/// Both copies of the record of `(session, first_seq)`.
fn copies(records: &[WalRecord], session: SessionId, first_seq: u64) -> Vec<WalRecord> {
    let found: Vec<WalRecord> = records
        .iter()
        .filter(|r| r.session == session && r.first_seq == first_seq)
        .copied()
        .collect();
    assert_eq!(found.len(), 2, "two copies of each record");
    found
}

/// Found by the campaign's "killed database: last write-ahead-log records
/// damaged": a record of session A, then an intact record of session B.
/// With one copy of each record, the log reader skipped A's damaged record
/// and went on; B's replayed, and A's event, acknowledged and in no other
/// place, was gone without a report. Each record is now written twice, in
/// the two halves of the log: damage to either copy gives the event back.
#[test]
fn a_damaged_wal_record_followed_by_an_intact_one_is_reported() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Sessions 0 and 1 created, then one event to 0, then one to 1.
    let (pristine, ids, records) = killed_image(dir.path(), 2, &[0, 1]);
    let damaged = records[records.len() - 2];
    assert_eq!((damaged.session, damaged.first_seq), (ids[0], 1));
    flip_each_copy(dir.path(), &pristine, &records, ids[0], 1, 2);
}

/// For each copy of the record of `(session, first_seq)` in turn, in a
/// fresh copy of `pristine`: flips a byte of its body, then checks that the
/// library returns the session's `head` events and reports no loss.
fn flip_each_copy(
    dir: &Path,
    pristine: &Path,
    records: &[WalRecord],
    session: SessionId,
    first_seq: u64,
    head: u64,
) {
    for (n, copy) in copies(records, session, first_seq).into_iter().enumerate() {
        let db = dir.join(format!("copy-{n}"));
        copy_dir(pristine, &db);
        let path = db.join("wal");
        let mut log = std::fs::read(&path).expect("read");
        log[copy.end - 3] ^= 0x20;
        std::fs::write(&path, log).expect("write");
        returned_or_reported(&db, session, head).unwrap();
        let j = Journal::open(&db).expect("open");
        assert_eq!(
            j.session(session).expect("session").head(),
            head,
            "copy {n}: returned"
        );
        assert_eq!(j.losses(), vec![], "copy {n}");
    }
}

/// The same with session A's record the last of the log, its body damaged
/// (a flipped byte: the header and its length are whole). Nothing after it
/// tells a damaged record from a write torn by a crash: with one copy, its
/// acknowledged events were lost without a report. Either copy now gives
/// them back.
#[test]
fn a_damaged_last_wal_record_is_reported() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (pristine, ids, records) = killed_image(dir.path(), 1, &[0, 0]);
    let last = records[records.len() - 1];
    assert_eq!((last.session, last.first_seq), (ids[0], 2));
    flip_each_copy(dir.path(), &pristine, &records, ids[0], 2, 3);
}

/// The log cut inside its last record (the file is shorter than the 4 MiB
/// it was preallocated to, which no write of the journal does): the copy in
/// the first half gives the record back. (A cut inside the first half
/// takes both copies of the records past it: `docs/format.md`.)
#[test]
fn a_wal_cut_inside_its_last_record_is_reported() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (db, ids, records) = killed_image(dir.path(), 1, &[0, 0]);
    let last = records[records.len() - 1];
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(db.join("wal"))
        .expect("open the log");
    file.set_len((last.start + last.end) as u64 / 2)
        .expect("cut");
    drop(file);
    returned_or_reported(&db, ids[0], 3).unwrap();
    let j = Journal::open(&db).expect("open");
    assert_eq!(j.session(ids[0]).expect("session").head(), 3, "returned");
}

/// The log cut inside its first half, inside the first copy of its last
/// record: both copies of that record are gone, and what else was past the
/// cut cannot be known; the cut itself is reported (`verify` exit 3, and
/// `Journal::verify` names it), by the open that finds it.
#[test]
fn a_wal_cut_inside_its_first_half_is_reported() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (db, ids, records) = killed_image(dir.path(), 1, &[0, 0]);
    let first = copies(&records, ids[0], 2)[0];
    assert!(first.end < 2 << 20, "the copy in the first half");
    let at = (first.start + first.end) as u64 / 2;
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(db.join("wal"))
        .expect("open the log");
    file.set_len(at).expect("cut");
    drop(file);
    let copy = dir.path().join("copy");
    copy_dir(&db, &copy);
    let out = aj(&copy, &["verify"], dir.path());
    assert_eq!(out.code, Some(3), "{out:?}");
    assert!(out.stdout.contains(&format!("cut at byte {at}")), "{out:?}");
    let j = Journal::open(&db).expect("open");
    let report = j.verify(None, |_| {}).expect("verify");
    assert!(report.has_damage(), "{report:?}");
    assert!(
        report
            .problems
            .iter()
            .any(|p| p.message.contains("write-ahead log") && p.message.contains("cut at byte")),
        "{report:?}"
    );
    assert_eq!(
        j.session(ids[0]).expect("session").head(),
        2,
        "the cut record"
    );
}

/// What already holds: a record damaged in both copies followed by a record
/// of the same session (the later record raises the acknowledged head: a
/// loss).
#[test]
fn a_damaged_wal_record_followed_by_one_of_its_session_is_a_loss() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (db, ids, records) = killed_image(dir.path(), 1, &[0, 0]);
    let damaged = records[records.len() - 2];
    assert_eq!((damaged.session, damaged.first_seq), (ids[0], 1));
    let path = db.join("wal");
    let mut log = std::fs::read(&path).expect("read");
    // Both copies (one alone loses nothing).
    for copy in copies(&records, ids[0], 1) {
        log[copy.end - 3] ^= 0x20;
    }
    std::fs::write(&path, log).expect("write");
    returned_or_reported(&db, ids[0], 3).unwrap();
    let j = Journal::open(&db).expect("open");
    assert_eq!(
        j.losses(),
        vec![agent_journal::store::Loss {
            session: ids[0],
            held: 1,
            acknowledged: 3
        }]
    );
}
