//! Damage on disk: flipped bytes, torn tails, bad snapshots, cut files.

use std::path::Path;

use agent_journal::{Error, Event, Journal, SessionId};

fn custom(n: u64) -> Event {
    Event::Custom {
        kind: "test".into(),
        payload: n.to_le_bytes().to_vec(),
    }
}

fn key(id: SessionId, seq: u64) -> Vec<u8> {
    let mut k = id.as_bytes().to_vec();
    k.extend_from_slice(&seq.to_be_bytes());
    k
}

/// Flips one bit of the stored frame of `seq`, with the database closed.
fn flip(path: &Path, tree: &str, id: SessionId, seq: u64, byte: usize) {
    let db = sled::open(path).expect("raw open");
    let t = db.open_tree(tree).expect("tree");
    let k = key(id, seq);
    let mut v = t.get(&k).expect("get").expect("present").to_vec();
    v[byte] ^= 0x10;
    t.insert(k, v).expect("insert");
    db.flush().expect("flush");
}

fn session_with(path: &Path, n: u64) -> SessionId {
    let j = Journal::open(path).expect("open");
    let s = j.create_session().expect("create");
    for i in 0..n {
        s.append(custom(i)).expect("append");
    }
    s.id()
}

#[test]
fn a_flipped_byte_before_good_records_is_corruption_at_its_seq() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    let id = session_with(&path, 5);
    flip(&path, "events", id, 2, 9);
    let j = Journal::open(&path).expect("reopen");
    match j.session(id) {
        Err(e @ Error::Corruption { .. }) => {
            assert!(
                matches!(e, Error::Corruption { session: Some(s), seq: Some(2), .. } if s == id)
            );
            let msg = e.to_string();
            assert!(
                msg.contains("seq 2") && msg.contains(&id.to_string()),
                "{msg}"
            );
        }
        other => panic!("expected corruption, got {other:?}"),
    }
    // verify finds it too, and names the place.
    let report = j.verify(None, |_| {}).expect("verify");
    assert!(report.has_damage());
    assert_eq!(report.problems[0].seq, Some(2));
}

#[test]
fn a_torn_tail_is_reported_then_cut_off_by_the_next_append() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    let id = session_with(&path, 5);
    flip(&path, "events", id, 5, 12);
    {
        let j = Journal::open(&path).expect("reopen");
        let s = j
            .session(id)
            .expect("a torn tail does not stop the session from opening");
        assert_eq!(s.head(), 5);
        let tail = s.torn_tail().expect("reported");
        assert_eq!((tail.from_seq, tail.events), (5, 1));
        assert!(tail.to_string().contains("checksum"), "{tail}");
        // Reading does not change anything.
        assert_eq!(s.events(..).expect("events").len(), 5);
        assert_eq!(s.append(custom(99)).expect("append"), 5);
    }
    let j = Journal::open(&path).expect("reopen");
    let s = j.session(id).expect("session");
    assert!(s.torn_tail().is_none());
    assert_eq!(s.events(5..6).expect("events")[0].event, custom(99));
    assert!(j.verify(None, |_| {}).expect("verify").is_clean());
}

#[test]
fn a_damaged_snapshot_is_ignored_and_the_stream_replayed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    let (id, expected) = {
        let j = Journal::open(&path).expect("open");
        let s = j.create_session().expect("create");
        for i in 0..20 {
            s.append(custom(i)).expect("append");
        }
        assert_eq!(s.snapshot().expect("snapshot"), Some(20));
        (s.id(), s.state_cloned())
    };
    {
        let j = Journal::open(&path).expect("reopen");
        let s = j.session(id).expect("session");
        assert_eq!(s.load_stats().snapshot_seq, Some(20));
        assert_eq!(s.load_stats().events_replayed, 0);
    }
    flip(&path, "snapshots", id, 20, 7);
    let j = Journal::open(&path).expect("reopen");
    let s = j.session(id).expect("session");
    let stats = s.load_stats();
    assert_eq!(stats.snapshot_seq, None);
    assert!(
        stats
            .snapshot_rejected
            .expect("reason")
            .contains("checksum")
    );
    assert_eq!(stats.events_replayed, 21);
    assert_eq!(s.state_cloned(), expected);
}

#[test]
fn an_exported_file_cut_short_gives_its_good_prefix_and_reports_the_cut() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    let id = session_with(&path, 10);
    let file = dir.path().join("run.ajournal");
    {
        let j = Journal::open(&path).expect("open");
        assert_eq!(j.export_journal(&[id], &file, |_| {}).expect("export"), 11);
    }
    let bytes = std::fs::read(&file).expect("read");
    std::fs::write(&file, &bytes[..bytes.len() - 7]).expect("cut");
    let j = Journal::open(&file).expect("a cut file opens");
    assert!(j.is_read_only());
    let damage = j.file_damage().expect("the cut is reported");
    assert!(damage.offset > 8);
    let s = j.session(id).expect("session");
    assert_eq!(s.head(), 10);
    assert_eq!(s.events(9..10).expect("events")[0].event, custom(8));
    assert!(matches!(s.append(custom(1)), Err(Error::Unsupported(_))));
}

#[test]
fn an_exported_file_round_trips_through_import() {
    let dir = tempfile::tempdir().expect("tempdir");
    let id = session_with(&dir.path().join("a"), 7);
    let file = dir.path().join("a.ajournal");
    let original = {
        let j = Journal::open(dir.path().join("a")).expect("open");
        j.export_journal(&[], &file, |_| {}).expect("export");
        j.session(id).expect("s").events(..).expect("events")
    };
    let j = Journal::open(dir.path().join("b")).expect("open b");
    let (ids, tail) = j.import_journal(&file).expect("import");
    assert_eq!(ids, vec![id]);
    assert!(tail.is_none());
    assert_eq!(
        j.session(id).expect("s").events(..).expect("events"),
        original
    );
    // Importing twice is refused and changes nothing.
    assert!(matches!(
        j.import_journal(&file),
        Err(Error::InvalidInput(_))
    ));
    assert_eq!(j.session(id).expect("s").head(), 8);
}
