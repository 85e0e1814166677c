//! Acknowledged events that sled loses below the journal (a rollback of its
//! log after damage, its own snapshot files removed): detected at open
//! against the acknowledgement log (`<db>/acks`). Where the journal's own records
//! (write-ahead log, segments, whole frames in sled's file) still hold
//! them, the open rebuilds the database and gives them all back; where
//! they do not (here: the acknowledgement log made to claim events no record holds),
//! the loss is reported by the session (as its damaged tail), by `verify`
//! (exit 3, naming the session and the seq range) and never passed off as a
//! whole stream.

use std::path::Path;

use agent_journal::maintenance::ProblemKind;
use agent_journal::store::Loss;
use agent_journal::{Journal, SessionId};

use crate::common::{custom, event_key, raw_sled, run_cli};

/// A closed database of `sessions` sessions of `n` custom events each.
fn closed_db(path: &Path, sessions: usize, n: u64) -> Vec<(SessionId, u64)> {
    let j = Journal::open(path).expect("open");
    let mut out = Vec::new();
    for _ in 0..sessions {
        let s = j.create_session().expect("create");
        for i in 0..n {
            s.append(custom(i)).expect("append");
        }
        out.push((s.id(), s.head()));
    }
    out
}

/// What a rollback of sled leaves: the events of `id` from `from` on gone,
/// in sled alone (the acknowledgement log and the write-ahead log untouched).
fn sled_loses(path: &Path, id: SessionId, from: u64, to: u64) {
    let db = raw_sled(path);
    let t = db.open_tree("events").expect("tree");
    for seq in from..to {
        crate::common::unpack_event(path, &t, id, seq);
        t.remove(event_key(id, seq)).expect("remove");
    }
    db.flush().expect("flush");
}

/// Appends a record to the acknowledgement log saying `head` events of `id` were
/// acknowledged (the layout of `src/store/sled/acks.rs`): events past what any
/// record holds, which no rebuild can give back.
fn acknowledge(path: &Path, id: SessionId, head: u64) {
    use std::io::Write;
    let mut body = 1u32.to_le_bytes().to_vec();
    body.extend_from_slice(id.as_bytes());
    body.extend_from_slice(&head.to_le_bytes());
    let mut record = b"AJA1".to_vec();
    record.extend_from_slice(&(body.len() as u32).to_le_bytes());
    record.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
    record.extend_from_slice(&body);
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(path.join("acks"))
        .expect("acknowledgement log");
    f.write_all(&record).expect("append");
}

/// sled lost events, and the journal's own records hold them all: the open
/// rebuilds the database from them (the damaged one kept beside it), and
/// every event is back; a second open has nothing to do.
#[test]
fn events_sled_lost_below_an_acknowledged_head_are_given_back_by_the_open() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    let made = closed_db(&path, 2, 20);
    let want: Vec<_> = {
        let j = Journal::open(&path).expect("open");
        made.iter()
            .map(|(id, _)| j.session(*id).expect("s").events(..).expect("events"))
            .collect()
    };
    let (id, head) = made[0];
    sled_loses(&path, id, head - 6, head);
    // The command line's verify reads a copy: the damage is reported.
    let out = run_cli(&path, &["verify"]);
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    let j = Journal::open(&path).expect("open");
    assert!(j.rebuilt_from().is_some());
    assert!(j.losses().is_empty());
    for events in &want {
        let s = j.session(events[0].session).expect("session");
        assert_eq!(&s.events(..).expect("events"), events);
        assert!(s.torn_tail().is_none());
    }
    assert!(j.verify(None, |_| {}).expect("verify").is_clean());
    drop(j);
    assert!(
        Journal::open(&path)
            .expect("again")
            .rebuilt_from()
            .is_none()
    );
}

#[test]
fn events_sled_lost_below_an_acknowledged_head_are_reported_not_hidden() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    let made = closed_db(&path, 2, 20);
    let (id, written) = made[0];
    sled_loses(&path, id, written - 6, written);
    // Three more acknowledged than any record holds: no rebuild.
    let head = written + 3;
    acknowledge(&path, id, head);
    let lost = head - (written - 6);

    let j = Journal::open(&path).expect("the database still opens");
    assert_eq!(
        j.losses(),
        vec![Loss {
            session: id,
            held: written - 6,
            acknowledged: head
        }]
    );
    let s = j.session(id).expect("the session opens with what is left");
    let tail = s
        .torn_tail()
        .expect("the loss is reported as its damaged end");
    assert_eq!((tail.start, tail.len), (written - 6, lost));
    assert!(tail.reason.contains("acknowledged"), "{tail}");
    let report = j.verify(None, |_| {}).expect("verify");
    let p: Vec<_> = report.problems.iter().filter(|p| p.session == id).collect();
    assert_eq!(p.len(), 1, "{:?}", report.problems);
    assert_eq!(
        (p[0].kind, p[0].seq),
        (ProblemKind::Damage, Some(written - 6))
    );
    assert!(
        p[0].message.contains(&format!("{}..{head}", written - 6)),
        "{}",
        p[0]
    );
    // The other session is whole and says nothing.
    assert!(j.session(made[1].0).expect("other").torn_tail().is_none());
    drop(s);
    drop(j);

    // The command line: verify exits 3 naming the session and the range.
    let out = run_cli(&path, &["verify"]);
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&id.to_string()) && text.contains(&format!("{}..{head}", written - 6)),
        "{text}"
    );
}

#[test]
fn a_loss_stays_reported_until_the_stream_is_cut_and_goes_on() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    let (id, head) = closed_db(&path, 1, 10)[0];
    sled_loses(&path, id, head - 3, head);
    acknowledge(&path, id, head + 2);
    // Opening and closing without touching the session keeps the loss.
    for _ in 0..2 {
        let j = Journal::open(&path).expect("open");
        assert_eq!(j.losses().len(), 1);
    }
    // An append cuts the damaged end (as for a torn tail) and goes on:
    // the loss is settled, recorded, and not reported again.
    let j = Journal::open(&path).expect("open");
    let s = j.session(id).expect("session");
    assert_eq!(s.append(custom(99)).expect("append"), head - 3);
    assert!(j.losses().is_empty());
    assert!(j.verify(None, |_| {}).expect("verify").is_clean());
    drop(s);
    drop(j);
    let j = Journal::open(&path).expect("reopen");
    assert!(j.losses().is_empty());
    assert!(j.verify(None, |_| {}).expect("verify").is_clean());
}

#[test]
fn a_session_sled_lost_whole_is_still_listed_and_reported() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    let made = closed_db(&path, 2, 5);
    let (gone, written) = made[1];
    sled_loses(&path, gone, 0, written);
    let head = written + 1;
    acknowledge(&path, gone, head);
    let j = Journal::open(&path).expect("open");
    assert!(j.sessions().expect("sessions").contains(&gone));
    let s = j.session(gone).expect("opens empty, with its loss");
    assert_eq!(s.head(), 0);
    assert_eq!(s.torn_tail().map(|t| (t.start, t.len)), Some((0, head)));
    assert!(j.verify(None, |_| {}).expect("verify").has_damage());
}

#[test]
fn a_deleted_session_is_not_a_loss() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    let made = closed_db(&path, 2, 5);
    {
        let j = Journal::open(&path).expect("open");
        j.delete_session(made[0].0, true).expect("delete");
    }
    let j = Journal::open(&path).expect("reopen");
    assert!(j.losses().is_empty());
    assert_eq!(j.sessions().expect("sessions"), vec![made[1].0]);
    assert!(j.verify(None, |_| {}).expect("verify").is_clean());
}

#[test]
fn removing_sleds_own_snapshot_files_never_loses_events_silently() {
    // sled recovers from its log alone without them, and may come back
    // shorter: whatever it lost is reported.
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    let made = closed_db(&path, 4, 400);
    let mut removed = 0;
    for entry in std::fs::read_dir(&path).expect("read_dir").flatten() {
        if entry.file_name().to_string_lossy().starts_with("snap.") {
            std::fs::remove_file(entry.path()).expect("remove");
            removed += 1;
        }
    }
    let Ok(j) = Journal::open(&path) else {
        return; // refused: nothing passed off as whole
    };
    let report = j.verify(None, |_| {}).expect("verify");
    for (id, head) in made {
        let held = j.stream_len(id).expect("len").unwrap_or(0);
        assert!(
            held == head || report.problems.iter().any(|p| p.session == id),
            "session {id}: {held} of {head} events and no report ({removed} snapshot files removed)"
        );
    }
}

#[test]
fn salvage_recovers_every_event_of_a_database_sled_refuses_to_open() {
    salvage_recovers_every_event(false);
}

/// The same with compressed pages (`--compress`): salvage finds the frames
/// inside sled's zstd frames.
#[test]
fn salvage_recovers_every_event_of_a_compressed_database_sled_refuses_to_open() {
    salvage_recovers_every_event(true);
}

fn salvage_recovers_every_event(compress: bool) {
    // One flipped byte in sled's own log can make it refuse the database
    // (or fail on its pages). Salvage reads the files before sled does (sled
    // rewrites a damaged log when it opens one) and copies every event whose
    // frame is still whole: all of them, since every checkpoint seals what
    // it makes durable into segment files and the log holds the rest. The
    // database is one a kill left (demo runs, the last killed), so sled's
    // log is not checkpointed.
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    let sandbox = dir.path().join("sandbox");
    let compress: &[&str] = if compress { &["--compress"] } else { &[] };
    for _ in 0..6 {
        let out = run_cli(
            &path,
            &[
                &["demo", "--sandbox", crate::common::path_str(&sandbox)],
                compress,
            ]
            .concat(),
        );
        assert!(out.status.success(), "{out:?}");
    }
    let out = run_cli(
        &path,
        &[
            &[
                "demo",
                "--sandbox",
                crate::common::path_str(&sandbox),
                "--crash-after",
                "15",
                "--crash-with",
                "kill",
            ],
            compress,
        ]
        .concat(),
    );
    assert!(!out.status.success(), "{out:?}");
    let truth = {
        let probe = dir.path().join("truth");
        crate::common::copy_dir(&path, &probe);
        let j = Journal::open(&probe).expect("the killed database opens");
        j.sessions()
            .expect("sessions")
            .into_iter()
            .map(|id| (id, j.stream_len(id).expect("len").expect("there")))
            .collect::<Vec<_>>()
    };
    let conf = std::fs::read(path.join("conf")).expect("conf");
    let said = format!("use_compression: {}", !compress.is_empty());
    assert!(String::from_utf8_lossy(&conf).contains(&said), "{said}");
    let pristine = std::fs::read(path.join("db")).expect("read db");
    let used: Vec<usize> = (0..pristine.len()).filter(|&i| pristine[i] != 0).collect();
    let mut rng = crate::common::Rng::new(7);
    let mut refused = 0;
    for case in 0..12 {
        let copy = dir.path().join(format!("copy-{case}"));
        crate::common::copy_dir(&path, &copy);
        let mut bytes = pristine.clone();
        for _ in 0..3 {
            let i = used[rng.below(used.len())];
            bytes[i] ^= 0x5a;
        }
        std::fs::write(copy.join("db"), &bytes).expect("write db");
        // Whether sled refuses it, tried on a second copy (an open rewrites).
        let probe = dir.path().join(format!("probe-{case}"));
        crate::common::copy_dir(&copy, &probe);
        // Refused, or rebuilt at open from the journal's records (which
        // must then hold every event).
        let opens = match Journal::open(&probe) {
            Ok(j) if j.rebuilt_from().is_some() => {
                for (id, head) in &truth {
                    assert_eq!(j.stream_len(*id).expect("len"), Some(*head), "case {case}");
                }
                false
            }
            Ok(_) => true,
            Err(_) => false,
        };
        let dest = dir.path().join(format!("salvaged-{case}"));
        let r = agent_journal::maintenance::salvage_database(
            &copy,
            &dest,
            agent_journal::format::DEFAULT_MAX_EVENT_BYTES,
        )
        .expect("salvage runs whether sled opens the database or not");
        let j = Journal::open(&dest).expect("the salvaged database opens");
        assert!(
            j.verify(None, |_| {}).expect("verify").is_clean(),
            "case {case}"
        );
        if !opens {
            refused += 1;
            let total = truth.iter().map(|t| t.1).sum::<u64>();
            // Every acknowledged event has a copy outside sled's file (a
            // checkpoint seals what it makes durable into segments; the
            // killed run's last events are in the write-ahead log).
            assert_eq!(r.copied, total, "case {case}: {:?}", r.dropped);
            for (id, head) in &truth {
                assert_eq!(j.stream_len(*id).expect("len"), Some(*head), "case {case}");
            }
        }
    }
    assert!(
        refused > 0,
        "no case made sled refuse the database (or the open rebuild it)"
    );
}

/// sled opens a database whose tree holds a key that is not one of ours
/// (as after it lost a write of its log): listing its sessions fails, and
/// salvage reads the files instead, giving back every event.
#[test]
fn salvage_of_a_database_whose_tree_cannot_be_listed_reads_the_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    let made = closed_db(&path, 2, 20);
    {
        let db = crate::common::raw_sled(&path);
        db.open_tree("events")
            .expect("tree")
            .insert(b"bad", b"x")
            .expect("insert");
        db.flush().expect("flush");
    }
    let dest = dir.path().join("salvaged");
    let r = agent_journal::maintenance::salvage_database(
        &path,
        &dest,
        agent_journal::format::DEFAULT_MAX_EVENT_BYTES,
    )
    .expect("salvage");
    let total: u64 = made.iter().map(|m| m.1).sum();
    assert_eq!(r.copied, total, "{:?}", r.dropped);
    // The open itself rebuilds it from the journal's records.
    let j = Journal::open(&path).expect("rebuilt at open");
    assert!(j.rebuilt_from().is_some());
    assert_eq!(j.sessions().expect("sessions").len(), made.len());
    drop(j);
    let j = Journal::open(&dest).expect("the salvaged database opens");
    for (id, head) in made {
        assert_eq!(j.stream_len(id).expect("len"), Some(head));
    }
    assert!(j.verify(None, |_| {}).expect("verify").is_clean());
}
