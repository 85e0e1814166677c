//! Incremental snapshots (`CheckpointStrategy::Incremental`, the default):
//! a whole snapshot, then deltas that each hold what changed since the one
//! before. A session opens from its chain replaying fewer events than the
//! spacing, `state_at` reads the chain up to its seq, a damaged link ends
//! the chain before it (the rest is replayed and `verify` names it),
//! `compact` keeps the chain, and every state equals the fold of the
//! stream.

use std::path::Path;

use agent_journal::state::SessionState;
use agent_journal::{
    CheckpointStrategy, Durability, Journal, JournalConfig, Session, SessionId, ToolCallRecord,
};

fn config(every: u64) -> JournalConfig {
    JournalConfig {
        checkpoint: CheckpointStrategy::Incremental { every },
        durability: Durability::Buffered,
        ..JournalConfig::default()
    }
}

/// `steps` agent steps in evaluations of 40: a question, an answer making
/// a tool call, the call started, its result; a call left running at the
/// end of each evaluation is answered in the next step's evaluation (so
/// older messages change status after a delta was written).
fn steps(s: &Session, steps: usize) {
    let mut eval = s.start_evaluation("agent", "steps").expect("start");
    let mut open: Option<(agent_journal::Evaluation, String)> = None;
    for i in 0..steps {
        if i % 40 == 39 {
            eval.finish(agent_journal::Outcome::Succeeded)
                .expect("finish");
            eval = s.start_evaluation("agent", "steps").expect("start");
        }
        eval.user(format!("question {i}: {}", "x".repeat(i % 300)))
            .expect("user");
        let call = format!("call_{i}");
        eval.assistant(
            format!("looking {i}"),
            vec![ToolCallRecord::new(
                call.clone(),
                "look",
                format!("{{\"i\":{i}}}"),
            )],
        )
        .expect("assistant");
        eval.tool_started(call.as_str()).expect("started");
        if let Some((e, c)) = open.take() {
            e.tool_result(c.as_str(), "late result").expect("late");
        }
        if i % 7 == 3 {
            open = Some((eval.session().evaluation(eval.id()).expect("again"), call));
        } else {
            eval.tool_result(call.as_str(), format!("result {i}"))
                .expect("result");
        }
    }
}

fn fold(s: &Session) -> SessionState {
    let mut state = SessionState::new();
    for e in s.events(..).expect("events") {
        state.apply(&e);
    }
    state
}

fn session(path: &Path, every: u64, n: usize) -> SessionId {
    let j = Journal::open_with(path, config(every)).expect("open");
    let s = j.create_session().expect("create");
    steps(&s, n);
    s.id()
}

#[test]
fn a_session_opens_from_its_chain_and_every_state_at_is_the_fold() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    let id = session(&path, 100, 300);
    let j = Journal::open_with(&path, config(100)).expect("reopen");
    let s = j.session(id).expect("session");
    let stats = s.load_stats();
    assert!(stats.snapshot_deltas >= 10, "{stats:?}");
    assert!(stats.events_replayed < 100, "{stats:?}");
    assert_eq!(stats.snapshot_rejected, None);
    let all = s.events(..).expect("events");
    assert!(*s.state() == fold(&s));
    let mut state = SessionState::new();
    for (k, e) in all.iter().enumerate() {
        state.apply(e);
        if k % 37 == 0 || k + 2 >= all.len() {
            let (at, read) = s.state_at_with_stats(k as u64).expect("state_at");
            assert!(at == state, "at {k}");
            // From the latest link at or before k: fewer than the spacing.
            assert!(read.events_replayed < 100, "at {k}: {read:?}");
        }
    }
    let report = j.verify(None, |_| {}).expect("verify");
    assert!(report.is_clean(), "{:?}", report.problems);
    assert_eq!(report.snapshots, u64::from(stats.snapshot_deltas) + 1);
    // A snapshot asked for twice with nothing appended between writes one.
    let at = s.snapshot().expect("snapshot");
    assert_eq!(s.snapshot().expect("again"), at);
    // Appending after the open goes on with the chain.
    steps(&s, 50);
    drop((s, j));
    let j = Journal::open_with(&path, config(100)).expect("reopen");
    let s = j.session(id).expect("session");
    assert!(s.load_stats().snapshot_deltas > stats.snapshot_deltas);
    assert!(*s.state() == fold(&s));
}

#[test]
fn a_damaged_delta_ends_the_chain_before_it_and_verify_names_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    let id = session(&path, 100, 300);
    let good = {
        let j = Journal::open_with(&path, config(100)).expect("reopen");
        fold(&j.session(id).expect("session"))
    };
    // Flip a byte in the middle of a delta's frame, in sled, through a raw
    // open of the database's tree.
    let (seqs, bad) = {
        let db = crate::common::raw_sled(&path);
        let tree = db.open_tree("snapshots").expect("tree");
        let seqs: Vec<u64> = tree
            .scan_prefix(id.as_bytes())
            .keys()
            .map(|k| u64::from_be_bytes(k.expect("key")[16..24].try_into().expect("8 bytes")))
            .collect();
        assert!(seqs.len() >= 5, "{seqs:?}");
        let bad = seqs[seqs.len() - 3];
        let mut k = id.as_bytes().to_vec();
        k.extend_from_slice(&bad.to_be_bytes());
        let mut v = tree.get(&k).expect("get").expect("the delta").to_vec();
        if matches!(v[0], 0xFE | 0xFD) {
            // A pointer to the frame's own file.
            let name = format!("{bad:020}.frame");
            let file = std::fs::read_dir(path.join("snapshots"))
                .expect("snapshot files")
                .flatten()
                .map(|e| e.path())
                .find(|f| f.to_string_lossy().ends_with(&name))
                .expect("the delta's file");
            let mut bytes = std::fs::read(&file).expect("read");
            let mid = bytes.len() / 2;
            bytes[mid] ^= 0x40;
            std::fs::write(&file, bytes).expect("write");
        } else {
            let mid = v.len() / 2;
            v[mid] ^= 0x40;
            tree.insert(&k, v).expect("insert");
            db.flush().expect("flush");
        }
        (seqs, bad)
    };
    let _ = bad;
    let j = Journal::open_with(&path, config(100)).expect("reopen");
    let s = j.session(id).expect("session");
    let stats = s.load_stats();
    let below = seqs[seqs.len() - 4];
    assert_eq!(stats.snapshot_seq, Some(below), "{stats:?}");
    assert!(stats.snapshot_rejected.is_some(), "{stats:?}");
    assert!(*s.state() == good);
    let report = j.verify(None, |_| {}).expect("verify");
    let problems: Vec<String> = report.problems.iter().map(|p| p.message.clone()).collect();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].contains("delta snapshot unreadable"),
        "{problems:?}"
    );
    // The next snapshot builds on the last good link; the chain reads back.
    s.snapshot().expect("snapshot");
    drop((s, j));
    let j = Journal::open_with(&path, config(100)).expect("reopen");
    let s = j.session(id).expect("session");
    assert_eq!(s.load_stats().snapshot_seq, Some(s.head() - 1));
    assert!(*s.state() == good);
}

#[test]
fn compact_keeps_the_chain() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    let id = session(&path, 100, 200);
    let j = Journal::open_with(&path, config(100)).expect("reopen");
    let before = j.session(id).expect("session").load_stats();
    let dest = dir.path().join("compacted");
    j.compact_to(&dest, |_| {}).expect("compact");
    let c = Journal::open_with(&dest, config(100)).expect("open the copy");
    let s = c.session(id).expect("session");
    let after = s.load_stats();
    assert_eq!(
        (after.snapshot_seq, after.snapshot_deltas),
        (before.snapshot_seq, before.snapshot_deltas)
    );
    assert!(*s.state() == fold(&s));
    assert!(c.verify(None, |_| {}).expect("verify").is_clean());
}

#[test]
fn an_append_after_lost_events_drops_the_snapshots_that_counted_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    let (id, last) = {
        let j = Journal::open_with(&path, config(100)).expect("open");
        let s = j.create_session().expect("create");
        steps(&s, 60);
        // A delta at the head; then sled loses the last three events (as a
        // rollback of its log would): the delta is past what is left.
        let last = s.snapshot().expect("snapshot").expect("a delta");
        assert_eq!(last, s.head() - 1);
        (s.id(), last)
    };
    {
        let db = crate::common::raw_sled(&path);
        let events = db.open_tree("events").expect("tree");
        for seq in last - 2..=last {
            assert!(crate::common::unpack_event(&path, &events, id, seq));
            events
                .remove(crate::common::event_key(id, seq))
                .expect("remove");
        }
        db.flush().expect("flush");
    }
    let j = Journal::open_with(&path, config(100)).expect("reopen");
    let s = j.session(id).expect("the session opens");
    assert_eq!(s.head(), last - 2);
    // (Before the cut, `verify` names the delta past the stream's end.)
    assert!(!j.verify(None, |_| {}).expect("verify").is_clean());
    // The next append drops the delta past the end: else, once new events
    // went past its seq, an open would take it for their state.
    s.append(agent_journal::Event::Custom {
        kind: "after".into(),
        payload: Vec::new(),
    })
    .expect("append over the tail");
    // New events take the lost ones' seqs and go past the old delta's.
    steps(&s, 3);
    assert!(s.head() > last + 1);
    let report = j.verify(None, |_| {}).expect("verify");
    assert!(report.is_clean(), "{:?}", report.problems);
    drop(s);
    drop(j);
    let j = Journal::open_with(&path, config(100)).expect("reopen");
    let s = j.session(id).expect("session");
    assert!(s.load_stats().snapshot_seq.is_some_and(|seq| seq < last));
    assert!(*s.state() == fold(&s));
}
