//! Event frames over 7 KiB live in the journal's own segment files
//! (`frames/`), with a pointer in sled: sled then never writes a blob file
//! (whose sync it does not order with its log's). Read back exactly, after a
//! reopen, a compact and a salvage; damage to a segment is reported with the
//! session and seq, and the rest of the session is kept.

use std::path::Path;

use agent_journal::{Durability, Envelope, Event, Journal, JournalConfig, SessionId};

use crate::common::{Rng, run_cli};

/// Payload sizes: mostly small, every fourth one from 8 KiB to 300 KiB.
fn payload(i: u64) -> Vec<u8> {
    let mut rng = Rng::new(i + 1);
    let len = if i % 4 == 3 {
        8 * 1024 + rng.below(292 * 1024)
    } else {
        rng.below(2000)
    };
    rng.bytes(len)
}

fn config(compress: bool) -> JournalConfig {
    JournalConfig {
        durability: Durability::Synced,
        compress,
        ..JournalConfig::default()
    }
}

/// A database at `db` with one session of 40 events (10 large); its events.
fn fill(db: &Path, compress: bool) -> (SessionId, Vec<Envelope>) {
    let j = Journal::open_with(db, config(compress)).expect("open");
    let s = j.create_session().expect("create");
    for i in 0..39 {
        s.append(Event::Custom {
            kind: "big".into(),
            payload: payload(i),
        })
        .expect("append");
    }
    (s.id(), s.events(..).expect("events"))
}

fn files_in(dir: &Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |d| d.flatten().count())
}

#[test]
fn large_events_are_kept_in_segments_and_read_back_after_reopen_and_compact() {
    for compress in [false, true] {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = dir.path().join("db");
        let (id, events) = fill(&db, compress);
        assert!(files_in(&db.join("frames")) >= 1, "no segment file");
        assert_eq!(files_in(&db.join("blobs")), 0, "sled wrote a blob");
        let j = Journal::open_with(&db, config(compress)).expect("reopen");
        assert_eq!(
            j.session(id).expect("session").events(..).expect("events"),
            events
        );
        let segments: u64 = std::fs::read_dir(db.join("frames"))
            .expect("frames")
            .flatten()
            .map(|e| e.metadata().expect("metadata").len())
            .sum();
        assert!(
            j.size_on_disk().expect("size") > segments,
            "segments counted"
        );
        assert!(j.verify(None, |_| {}).expect("verify").is_clean());
        let dest = dir.path().join("compacted");
        j.compact_to(&dest, |_| {}).expect("compact");
        drop(j);
        let c = Journal::open(&dest).expect("open the copy");
        assert_eq!(
            c.session(id).expect("session").events(..).expect("events"),
            events
        );
        assert!(files_in(&dest.join("frames")) >= 1);
        // Through the binary too.
        let out = run_cli(&dest, &["verify"]);
        assert_eq!(out.status.code(), Some(0), "{out:?}");
    }
}

#[test]
fn a_damaged_segment_is_reported_at_its_seq_and_salvage_keeps_the_rest() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    let (id, events) = fill(&db, false);
    // One byte in the middle of the first large frame (seq 4: the session's
    // opening is seq 0, payload 3 is the first large one).
    let segment = std::fs::read_dir(db.join("frames"))
        .expect("frames")
        .flatten()
        .map(|e| e.path())
        .min()
        .expect("a segment");
    let mut bytes = std::fs::read(&segment).expect("read");
    bytes[4000] ^= 0x40;
    std::fs::write(&segment, &bytes).expect("write");

    let out = run_cli(&db, &["verify"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "{stdout}{stderr}");
    assert!(
        stdout.contains("seq 4") || stderr.contains("seq 4"),
        "{stdout}{stderr}"
    );

    // A cut segment: the pointers past its end are named too.
    std::fs::write(&segment, &bytes[..bytes.len() / 2]).expect("cut");
    let j = Journal::open(&db).expect("the database opens");
    let report = j.verify(None, |_| {}).expect("verify");
    let damaged: Vec<u64> = report.problems.iter().filter_map(|p| p.seq).collect();
    assert!(damaged.contains(&4), "{:?}", report.problems);
    assert!(
        report
            .problems
            .iter()
            .any(|p| p.message.contains("past its end")),
        "{:?}",
        report.problems
    );
    // Salvage copies every event it can read, from the store or from
    // other copies whole in the files (sled's older pages hold the small
    // events of the cut block); every other one is reported.
    let dest = dir.path().join("salvaged");
    let r = j.salvage_to(&dest).expect("salvage");
    assert!(
        r.dropped.iter().any(|p| p.seq == Some(4)),
        "{:?}",
        r.dropped
    );
    drop(j);
    let s = Journal::open(&dest).expect("open the salvaged copy");
    let kept = s.session(id).expect("session").events(..).expect("events");
    for e in &events {
        assert!(
            kept.iter().any(|k| k.event == e.event)
                || r.dropped.iter().any(|p| p.seq == Some(e.seq)),
            "seq {} was lost and not reported",
            e.seq
        );
    }
}
