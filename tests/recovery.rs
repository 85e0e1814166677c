//! Recovery from damage on disk, one hand-made case per test: a flipped
//! byte in a frame (corruption at its seq) or in the last frames (a torn
//! tail, cut off by the next append), damaged, missing or cut snapshots
//! (rejected, the stream replayed), a cut export, what a kill leaves while
//! a database is created or sled writes its own snapshot, the write-ahead
//! log of `Synced` appends giving back what sled lost, and the same checks
//! on a stream long enough to be read by a scan thread. The seeded campaign
//! over many random cases is `corruption`.

use std::path::Path;

use agent_journal::{Error, Event, Journal, SessionId};

use crate::common::{copy_dir, custom, event_key, raw_sled};

/// Flips one bit of the stored frame of `seq`, with the database closed.
fn flip(path: &Path, tree: &str, id: SessionId, seq: u64, byte: usize) {
    let db = raw_sled(path);
    let t = db.open_tree(tree).expect("tree");
    if tree == "events" {
        crate::common::unpack_event(path, &t, id, seq);
    }
    let k = event_key(id, seq);
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
        assert_eq!((tail.start, tail.len), (5, 1));
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
    // 7 bytes of the last record gone, and the trailer after it.
    let end = bytes.len() - agent_journal::format::ajournal::TRAILER_LEN;
    std::fs::write(&file, &bytes[..end - 7]).expect("cut");
    let j = Journal::open(&file).expect("a cut file opens");
    assert!(j.is_read_only());
    let damage = j.file_damage().expect("the cut is reported");
    assert!(damage.start > 8);
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

/// A session whose snapshot is over 64 KiB compressed (so the sled store
/// keeps it in a file of its own), with a snapshot taken at its head;
/// returns the id, the state and the snapshot file.
fn big_snapshot(
    path: &Path,
) -> (
    SessionId,
    agent_journal::state::SessionState,
    std::path::PathBuf,
) {
    let j = Journal::open(path).expect("open");
    let s = j.create_session().expect("create");
    let e = s.start_evaluation("ns", "key").expect("evaluation");
    // Letters at random: text zstd cannot make much smaller.
    let mut rng = crate::common::Rng::new(11);
    for i in 0..300 {
        let text: String = (0..400)
            .map(|_| char::from(b'a' + rng.below(26) as u8))
            .collect();
        e.user(format!("{i:04} {text}")).expect("user");
    }
    let seq = s.snapshot().expect("snapshot").expect("a snapshot");
    let file = snapshot_files(path)
        .into_iter()
        .find(|f| f.to_string_lossy().ends_with(&format!("{seq:020}.frame")))
        .expect("the snapshot has a file of its own");
    assert!(std::fs::metadata(&file).expect("file").len() > 64 << 10);
    (s.id(), s.state_cloned(), file)
}

fn snapshot_files(path: &Path) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(path.join("snapshots"))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

#[test]
fn a_large_snapshot_lives_in_a_file_and_is_read_back() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    let (id, expected, _) = big_snapshot(&path);
    let j = Journal::open(&path).expect("reopen");
    let s = j.session(id).expect("session");
    let stats = s.load_stats();
    assert_eq!((stats.snapshot_seq, stats.events_replayed), (Some(301), 0));
    assert_eq!(s.state_cloned(), expected);
    // The file counts in the size on disk.
    let files: u64 = snapshot_files(&path)
        .iter()
        .map(|f| std::fs::metadata(f).expect("file").len())
        .sum();
    assert!(j.size_on_disk().expect("size") > files);
    assert!(j.verify(None, |_| {}).expect("verify").is_clean());
}

#[test]
fn a_damaged_missing_or_cut_snapshot_file_is_rejected_and_the_stream_replayed() {
    type Damage = fn(&Path);
    let damages: [(&str, Damage, &[&str]); 3] = [
        (
            "flipped",
            |f| {
                let mut b = std::fs::read(f).expect("read");
                let at = b.len() / 2;
                b[at] ^= 0x40;
                std::fs::write(f, b).expect("write");
            },
            // (The file is compressed: the flip may break that first.)
            &["checksum", "decompress"],
        ),
        (
            "missing",
            |f| std::fs::remove_file(f).expect("rm"),
            &["reading snapshot file"],
        ),
        (
            "cut",
            |f| {
                let b = std::fs::read(f).expect("read");
                std::fs::write(f, &b[..b.len() - 100]).expect("write");
            },
            &["its pointer says", "decompress"],
        ),
    ];
    for (what, damage, reason) in damages {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("db");
        let (id, expected, file) = big_snapshot(&path);
        damage(&file);
        let j = Journal::open(&path).expect("reopen");
        let report = j.verify(None, |_| {}).expect("verify");
        assert_eq!(report.problems.len(), 1, "{what}: {:?}", report.problems);
        assert_eq!(
            report.problems[0].kind,
            agent_journal::maintenance::ProblemKind::Snapshot
        );
        let s = j.session(id).expect("session");
        let stats = s.load_stats();
        assert_eq!(stats.snapshot_seq, None, "{what}");
        let rejected = stats.snapshot_rejected.expect("a reason");
        assert!(
            reason.iter().any(|r| rejected.contains(r)),
            "{what}: {rejected}"
        );
        assert_eq!(stats.events_replayed, 302, "{what}");
        assert_eq!(s.state_cloned(), expected, "{what}");
        // The next snapshot replaces the damaged one.
        assert_eq!(s.snapshot().expect("snapshot"), Some(301));
        drop((s, j));
        let j = Journal::open(&path).expect("reopen");
        assert_eq!(
            j.session(id).expect("s").load_stats().snapshot_seq,
            Some(301)
        );
    }
}

#[test]
fn replaced_orphaned_and_deleted_snapshot_files_are_removed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    let (id, _, first) = big_snapshot(&path);
    {
        // Whole snapshots (a delta would build on the first, keeping it).
        let whole = agent_journal::JournalConfig {
            checkpoint: agent_journal::CheckpointStrategy::OnDemand,
            ..agent_journal::JournalConfig::default()
        };
        let j = Journal::open_with(&path, whole).expect("reopen");
        let s = j.session(id).expect("session");
        s.append(custom(1)).expect("append");
        assert_eq!(s.snapshot().expect("snapshot"), Some(302));
        let files = snapshot_files(&path);
        assert_eq!(files.len(), 1, "{files:?}");
        assert_ne!(files[0], first, "the replaced file is gone");
    }
    // A file no pointer names (a crash between writing it and recording
    // it) and a temporary one are removed at open; foreign files stay.
    let orphan = first.clone();
    std::fs::write(&orphan, b"left by a crash").expect("orphan");
    let tmp = path.join("snapshots").join(".x.frame.1.0.tmp");
    std::fs::write(&tmp, b"partial").expect("tmp");
    let foreign = path.join("snapshots").join("NOTES");
    std::fs::write(&foreign, b"mine").expect("foreign");
    let j = Journal::open(&path).expect("reopen");
    assert!(!orphan.exists() && !tmp.exists() && foreign.exists());
    assert_eq!(snapshot_files(&path).len(), 2);
    j.delete_session(id, true).expect("delete");
    assert_eq!(snapshot_files(&path), vec![foreign]);
}

/// A process killed while it created a database leaves sled's files and no
/// format marker. The creation is marked by a file until the marker is
/// durable; with it there, the next open finishes the creation. Without it,
/// an empty database whose `db` file existed is one sled rolled back, and
/// is still refused.
#[test]
fn a_database_whose_creation_was_interrupted_opens_and_an_unmarked_empty_one_does_not() {
    let dir = tempfile::tempdir().expect("tempdir");
    // What a kill between sled's first write and the marker leaves.
    let half_made = |p: &Path, marked: bool| {
        std::fs::create_dir_all(p).expect("mkdir");
        if marked {
            std::fs::write(p.join("agent-journal.creating"), b"").expect("mark");
        }
        let db = crate::common::raw_sled(p);
        db.flush().expect("flush");
        drop(db);
        assert!(std::fs::metadata(p.join("db")).expect("db file").len() > 0);
    };
    let p = dir.path().join("interrupted");
    half_made(&p, true);
    {
        let j = Journal::open(&p).expect("the creation is finished");
        let s = j.create_session().expect("session");
        s.append(custom(0)).expect("append");
    }
    assert!(!p.join("agent-journal.creating").exists());
    let j = Journal::open(&p).expect("reopen");
    assert_eq!(j.sessions().expect("sessions").len(), 1);
    drop(j);

    let p = dir.path().join("unmarked");
    half_made(&p, false);
    let e = Journal::open(&p).map(|_| ()).unwrap_err();
    assert!(
        matches!(&e, Error::NotAJournal { reason, .. } if reason.contains("marker")),
        "{e:?}"
    );

    // A new database goes through the mark: none is left behind.
    let p = dir.path().join("new");
    session_with(&p, 3);
    assert!(!p.join("agent-journal.creating").exists());
    assert_eq!(
        Journal::open(&p)
            .expect("reopen")
            .sessions()
            .expect("s")
            .len(),
        1
    );
}

/// A process killed while sled wrote its own page-cache snapshot leaves
/// `snap.<lsn>.generating`; sled 0.34 then picks that unfinished file and
/// refuses the database (sled #1527). The journal removes it and opens.
#[test]
fn an_unfinished_sled_snapshot_left_by_a_kill_does_not_make_the_database_unopenable() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    let id = session_with(&path, 30);
    // Sorts after every finished `snap.<lsn>`: sled would read it first.
    let unfinished = path.join("snap.FFFFFFFFFFFFFFF0.generating");
    std::fs::write(&unfinished, vec![0x5a; 4096]).expect("write");
    let j = Journal::open(&path).expect("opens despite the unfinished snapshot");
    assert!(!unfinished.exists());
    let s = j.session(id).expect("session");
    assert_eq!(s.head(), 31);
    assert_eq!(s.events(1..31).expect("events")[29].event, custom(29));
    assert!(j.verify(None, |_| {}).expect("verify").is_clean());
}

// ---------------------------------------------------------------------------
// The write-ahead log of `Synced` appends (`<db>/wal`).

/// Where the second copy of each record of the log is (`docs/format.md`).
const LOG_HALF: usize = 2 << 20;

/// A `Synced` session of `n` custom events, its head, and the log as it was
/// before the journal closed (a clean close starts a new generation in it,
/// which hides these records).
fn synced_session_and_its_log(path: &Path, n: u64) -> (SessionId, u64, Vec<u8>) {
    let j = Journal::open(path).expect("open");
    let s = j.create_session().expect("create");
    for i in 0..n {
        s.append(custom(i)).expect("append");
    }
    let log = std::fs::read(path.join("wal")).expect("read the log");
    let payload = 0u64.to_le_bytes();
    assert!(
        log.windows(8).any(|w| w == payload),
        "Synced appends go through the log"
    );
    let (id, head) = (s.id(), s.head());
    drop(s);
    drop(j);
    (id, head, log)
}

/// What sled keeps after a crash that lost its buffered writes: the stream
/// without its events from `from` on.
fn lose_sled_tail(path: &Path, id: SessionId, from: u64) {
    let db = raw_sled(path);
    let t = db.open_tree("events").expect("tree");
    let mut seq = from;
    while crate::common::unpack_event(path, &t, id, seq)
        && t.remove(event_key(id, seq)).expect("remove").is_some()
    {
        seq += 1;
    }
    assert!(seq > from, "nothing to lose at {from}");
    db.flush().expect("flush");
}

fn payloads(j: &Journal, id: SessionId) -> Vec<u64> {
    let s = j.session(id).expect("session");
    s.events(..)
        .expect("events")
        .into_iter()
        .filter_map(|e| match e.event {
            Event::Custom { payload, .. } => {
                Some(u64::from_le_bytes(payload.try_into().expect("8 bytes")))
            }
            _ => None,
        })
        .collect()
}

#[test]
fn acknowledged_synced_events_that_sled_lost_come_back_from_the_log() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    let (id, head, log) = synced_session_and_its_log(&path, 20);
    lose_sled_tail(&path, id, head - 8);
    std::fs::write(path.join("wal"), &log).expect("put the log back");

    let j = Journal::open(&path).expect("reopen");
    assert_eq!(payloads(&j, id), (0..20).collect::<Vec<_>>());
    assert_eq!(j.session(id).expect("session").head(), head);
    let report = j.verify(None, |_| {}).expect("verify");
    assert!(report.is_clean(), "{:?}", report.problems);
}

#[test]
fn a_torn_log_gives_back_every_whole_record_and_never_blocks_the_open() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    let (id, head, log) = synced_session_and_its_log(&path, 20);
    let pristine = dir.path().join("pristine");
    copy_dir(&path, &pristine);
    // The log is preallocated: its records, then zeros, in each half.
    let half = LOG_HALF;
    let used = log[..half].iter().rposition(|&b| b != 0).expect("records") + 1;
    assert_eq!(log[..used], log[half..half + used], "two copies");
    // One copy cut short or zeroed from anywhere: nothing lost.
    for cut in (0..used).step_by(61) {
        let _ = std::fs::remove_dir_all(&path);
        copy_dir(&pristine, &path);
        lose_sled_tail(&path, id, head - 8);
        let mut zeroed = log.clone();
        zeroed[cut..used].fill(0);
        for damaged in [&log[..half + cut], &zeroed[..]] {
            std::fs::write(path.join("wal"), damaged).expect("write the damaged log");
            let j = Journal::open(&path).expect("open");
            assert_eq!(payloads(&j, id), (0..20).collect::<Vec<_>>(), "cut {cut}");
            drop(j);
            // (The open replayed the log into sled: lose the tail again.)
            let _ = std::fs::remove_dir_all(&path);
            copy_dir(&pristine, &path);
            lose_sled_tail(&path, id, head - 8);
        }
    }
    // Each cut of a write torn in both copies, on a database that lost its
    // last 8 events.
    let mut recovered = Vec::new();
    for cut in (0..used).step_by(37).chain([used - 1, used]) {
        let _ = std::fs::remove_dir_all(&path);
        copy_dir(&pristine, &path);
        lose_sled_tail(&path, id, head - 8);
        let mut torn = log.clone();
        torn[cut..used].fill(0);
        torn[half + cut..half + used].fill(0);
        std::fs::write(path.join("wal"), &torn).expect("write the torn log");
        let j = Journal::open(&path).expect("a torn log never blocks the open");
        let got = payloads(&j, id);
        // A prefix of the stream: nothing invented, no gap.
        assert_eq!(got, (0..got.len() as u64).collect::<Vec<_>>(), "cut {cut}");
        recovered.push(got.len());
        // What the cut log could not give back was acknowledged (the heads
        // log says so): reported, never passed off as whole.
        let held = got.len() as u64 + 1;
        let report = j.verify(None, |_| {}).expect("verify");
        if held == head {
            assert!(report.is_clean(), "cut {cut}: {:?}", report.problems);
        } else {
            assert_eq!(j.losses().len(), 1, "cut {cut}");
            assert!(
                report
                    .problems
                    .iter()
                    .any(|p| p.seq == Some(held) && p.message.contains(&format!("{held}..{head}"))),
                "cut {cut}: {:?}",
                report.problems
            );
        }
    }
    // (Where sled's file still held the lost tail, the open rebuilt the
    // database whole: every cut then gives back all 20.)
    assert!(
        recovered.first() < recovered.last() || recovered.iter().all(|n| *n == 20),
        "{recovered:?}"
    );
    assert_eq!(recovered.last(), Some(&20));
}

/// The offset in `log` of the record of `session` whose first seq is `seq`.
fn log_record_of(log: &[u8], session: SessionId, seq: u64) -> usize {
    let mut needle = session.as_bytes().to_vec();
    needle.extend_from_slice(&seq.to_le_bytes());
    let at = log
        .windows(needle.len())
        .position(|w| w == needle)
        .expect("the record is in the log");
    // magic (4), length (4), crc (4), generation (8), then the session id.
    at - 20
}

#[test]
fn a_damaged_log_record_ends_its_streams_replay_without_a_gap() {
    // Power loss can keep a later block of the log and not an earlier one:
    // a record of seq n damaged, the record of n + 1 whole. Replaying n + 1
    // without n would leave a hole that makes the session unreadable.
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    let (id, head, mut log) = synced_session_and_its_log(&path, 20);
    lose_sled_tail(&path, id, head - 8);
    let damaged = head - 6;
    let at = log_record_of(&log, id, damaged);
    // Inside the body, in both copies: the crc no longer matches. (One copy
    // alone damaged loses nothing: `a_torn_log_gives_back...`.)
    log[at + 40] ^= 0xff;
    log[LOG_HALF + at + 40] ^= 0xff;
    std::fs::write(path.join("wal"), &log).expect("write the damaged log");

    let j = Journal::open(&path).expect("a damaged log never blocks the open");
    let s = j.session(id).expect("the session opens: no gap");
    if j.rebuilt_from().is_some() {
        // The damaged record's events were still whole in sled's file: the
        // open rebuilt the database with every acknowledged event.
        assert_eq!(s.head(), head);
        assert_eq!(payloads(&j, id), (0..head - 1).collect::<Vec<_>>());
        return;
    }
    assert_eq!(
        s.head(),
        damaged,
        "replayed up to the damaged record, no further"
    );
    assert_eq!(
        payloads(&j, id),
        (0..damaged - 1).collect::<Vec<_>>(),
        "a prefix of the stream"
    );
    // Events damaged..head were acknowledged: the loss is reported.
    let tail = s.torn_tail().expect("the loss is reported");
    assert_eq!((tail.start, tail.len), (damaged, head - damaged));
    assert!(j.verify(None, |_| {}).expect("verify").has_damage());
    // The stream goes on from there (the append cuts the reported end).
    s.append(custom(99)).expect("append after the replay");
    assert_eq!(s.head(), damaged + 1);
    assert!(j.verify(None, |_| {}).expect("verify").is_clean());
}

#[test]
fn a_deleted_session_is_not_brought_back_by_the_log() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    let j = Journal::open(&path).expect("open");
    let gone = j.create_session().expect("create");
    let kept = j.create_session().expect("create");
    for i in 0..10 {
        gone.append(custom(i)).expect("append");
        kept.append(custom(i)).expect("append");
    }
    let gone = gone.id();
    j.delete_session(gone, true).expect("delete");
    kept.append(custom(10)).expect("append after the delete");
    // A crash image: the database as it is on disk now, with the log.
    let image = dir.path().join("image");
    copy_dir(&path, &image);
    drop(kept);
    drop(j);
    let j = Journal::open(&image).expect("open the image");
    assert!(j.session(gone).is_err(), "the deleted session came back");
    assert_eq!(
        payloads(&j, j.sessions().expect("sessions")[0]),
        (0..11).collect::<Vec<_>>()
    );
}

/// A session of `n` events (its opening event, then custom events carrying
/// their seq), appended in batches without snapshots:
/// every read of it scans the whole stream, past the point where a scan
/// hands sled's side to a thread of its own.
fn long_session(path: &Path, n: u64) -> SessionId {
    let config = agent_journal::JournalConfig {
        durability: agent_journal::Durability::Buffered,
        checkpoint: agent_journal::CheckpointStrategy::OnDemand,
        ..agent_journal::JournalConfig::default()
    };
    let j = Journal::open_with(path, config).expect("open");
    let s = j.create_session().expect("create");
    while s.head() < n {
        let from = s.head();
        s.append_batch((from..n.min(from + 1_000)).map(custom).collect())
            .expect("append");
    }
    j.flush().expect("flush");
    s.id()
}

const LONG: u64 = 20_000;

#[test]
fn a_long_stream_reads_back_whole_and_in_order() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    let id = long_session(&path, LONG);
    let j = Journal::open(&path).expect("reopen");
    // Seq 0 is the session's opening event; event `seq` carries `seq`.
    let got = payloads(&j, id);
    assert!(
        got.len() as u64 == LONG - 1 && got.iter().zip(1..).all(|(p, seq)| *p == seq),
        "{} payloads, first mismatch at {:?}",
        got.len(),
        got.iter().zip(1..).position(|(p, seq)| *p != seq)
    );
    let s = j.session(id).expect("session");
    assert_eq!(s.load_stats().events_replayed, LONG);
    assert_eq!(s.state().last_seq(), Some(LONG - 1));
    // A range that starts and ends inside the part read by the scan thread,
    // and time travel that stops there.
    let some = s.events(9_000..15_000).expect("events");
    assert_eq!(some.len(), 6_000);
    assert!(some.iter().zip(9_000..).all(|(e, seq)| e.seq == seq));
    assert_eq!(
        s.state_at(12_345).expect("state_at").last_seq(),
        Some(12_345)
    );
    assert!(j.verify(None, |_| {}).expect("verify").is_clean());
}

#[test]
fn damage_deep_in_a_long_stream_is_corruption_at_its_seq() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    let id = long_session(&path, LONG);
    flip(&path, "events", id, 15_000, 9);
    let j = Journal::open(&path).expect("reopen");
    assert!(
        matches!(j.session(id), Err(Error::Corruption { session: Some(s), seq: Some(15_000), .. }) if s == id)
    );
    let report = j.verify(None, |_| {}).expect("verify");
    assert_eq!(report.problems[0].seq, Some(15_000));
}

#[test]
fn a_gap_deep_in_a_long_stream_is_corruption_at_its_seq() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    let id = long_session(&path, LONG);
    {
        let db = raw_sled(&path);
        let t = db.open_tree("events").expect("tree");
        crate::common::unpack_event(&path, &t, id, 9_500);
        t.remove(event_key(id, 9_500))
            .expect("remove")
            .expect("present");
        db.flush().expect("flush");
    }
    let j = Journal::open(&path).expect("reopen");
    assert!(
        matches!(j.session(id), Err(Error::Corruption { session: Some(s), seq: Some(9_500), .. }) if s == id)
    );
}

#[test]
fn a_torn_tail_of_a_long_stream_is_reported_and_cut_off() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    let id = long_session(&path, LONG);
    flip(&path, "events", id, LONG - 2, 12);
    flip(&path, "events", id, LONG - 1, 12);
    let j = Journal::open(&path).expect("reopen");
    let s = j.session(id).expect("a torn tail does not stop the open");
    assert_eq!(s.head(), LONG - 2);
    let tail = s.torn_tail().expect("reported");
    assert_eq!((tail.start, tail.len), (LONG - 2, 2));
    assert_eq!(s.append(custom(7)).expect("append"), LONG - 2);
}

/// sled refuses its files (here: its `db` file damaged where its log
/// starts, as a power cut that reorders writes can leave it): the open
/// rebuilds the database from the journal's own records (every event of a
/// closed database is sealed in its segments, and the write-ahead log
/// holds what came after), gives back every acknowledged event, keeps the
/// damaged database beside it, and the CLI says so. A second open finds
/// nothing to rebuild.
#[test]
fn a_database_sled_refuses_is_rebuilt_at_open_from_the_journal_s_records() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    let (a, b) = {
        let j = Journal::open(&db).expect("open");
        let sa = j.create_session().expect("a");
        let sb = j.create_session().expect("b");
        for i in 0..300u64 {
            sa.append(custom(i)).expect("append");
            if i % 3 == 0 {
                sb.append(custom(i)).expect("append");
            }
        }
        (sa.events(..).expect("a"), sb.events(..).expect("b"))
    };
    let file = db.join("db");
    let mut bytes = std::fs::read(&file).expect("db file");
    for b in bytes.iter_mut().take(64) {
        *b ^= 0x5a;
    }
    std::fs::write(&file, bytes).expect("damage");
    let j = Journal::open(&db).expect("rebuilt at open");
    let kept = j.rebuilt_from().expect("it was rebuilt").to_owned();
    assert!(kept.join("db").is_file(), "{}", kept.display());
    for want in [&a, &b] {
        let got = j
            .session(want[0].session)
            .expect("session")
            .events(..)
            .expect("events");
        assert_eq!(&got, want);
    }
    assert!(!j.verify(None, |_| {}).expect("verify").has_damage());
    drop(j);
    let j = Journal::open(&db).expect("open again");
    assert!(j.rebuilt_from().is_none());
    drop(j);
    // Through the CLI: the warning names the kept copy.
    std::fs::remove_dir_all(&db).expect("remove");
    std::fs::rename(&kept, &db).expect("put the damaged one back");
    let out = crate::common::run_cli(&db, &["sessions"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("rebuilt from the journal's own records"),
        "{stderr}"
    );
}
