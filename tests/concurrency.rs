//! Concurrency through the public API: many writers, optimistic writers
//! racing on one stream, readers folding while writers append, and group
//! commit sharing syncs between concurrent `Synced` appenders.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Instant;

use agent_journal::format::now;
use agent_journal::state::SessionState;
use agent_journal::{
    CheckpointStrategy, Durability, Envelope, Error, EvaluationId, Event, InnerMessage, Journal,
    JournalConfig, ProviderCallRecord, ProviderOutcome, Role, Session, TokenUsage,
};

use crate::common::Rng;

fn config(durability: Durability) -> JournalConfig {
    JournalConfig {
        durability,
        ..JournalConfig::default()
    }
}

/// The payload of event `i` (1-based) of writer `t`.
fn payload(t: u64, i: u64) -> Vec<u8> {
    let mut p = format!("writer {t} event {i} ").into_bytes();
    p.resize(16 + (i % 64) as usize + p.len(), (t as u8) ^ (i as u8));
    p
}

/// Event `i` of writer `t`: a `Custom` event whose payload names both, so
/// a reader can tell whose event landed where.
fn writer_event(t: u64, i: u64) -> Event {
    Event::Custom {
        kind: "w".into(),
        payload: payload(t, i),
    }
}

/// `SessionOpened` at 0, then `writer_event(t, 1..=n)`, nothing else, no gap.
fn assert_stream(s: &Session, t: u64, n: u64) {
    assert_eq!(s.head(), n + 1, "writer {t}");
    let events = s.events(..).expect("events");
    assert_eq!(events.len() as u64, n + 1, "writer {t}");
    for (i, env) in events.iter().enumerate() {
        assert_eq!(env.seq, i as u64, "writer {t}");
        assert_eq!(env.session, s.id());
        if i == 0 {
            assert!(matches!(env.event, Event::SessionOpened { .. }));
        } else {
            assert_eq!(env.event, writer_event(t, i as u64), "writer {t}, seq {i}");
        }
    }
}

/// `threads` writers, each appending `per_thread` events to its own session
/// (single appends, every seventh a batch of 3), then every stream is
/// checked, before and after a reopen.
fn many_writers(durability: Durability, threads: u64, per_thread: u64) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    let started = Instant::now();
    let ids = {
        let journal = Journal::open_with(&path, config(durability)).expect("open");
        let sessions: Vec<Session> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    let journal = journal.clone();
                    scope.spawn(move || {
                        let s = journal.create_session().expect("create");
                        let mut i = 1;
                        while i <= per_thread {
                            if i % 7 == 0 && i + 2 <= per_thread {
                                let r = s
                                    .append_batch((i..i + 3).map(|k| writer_event(t, k)).collect());
                                assert_eq!(r.expect("append_batch"), (i, i + 2));
                                i += 3;
                            } else {
                                assert_eq!(s.append(writer_event(t, i)).expect("append"), i);
                                i += 1;
                            }
                        }
                        s
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("writer"))
                .collect()
        });
        for (t, s) in sessions.iter().enumerate() {
            assert_stream(s, t as u64, per_thread);
        }
        sessions.iter().map(Session::id).collect::<Vec<_>>()
    };
    let journal = Journal::open_with(&path, config(durability)).expect("reopen");
    let mut listed = journal.sessions().expect("sessions");
    listed.sort();
    let mut want = ids.clone();
    want.sort();
    assert_eq!(listed, want);
    for (t, id) in ids.iter().enumerate() {
        assert_stream(
            &journal.session(*id).expect("session"),
            t as u64,
            per_thread,
        );
    }
    eprintln!(
        "{threads} writers x {per_thread} {durability:?} events: {:.2} s",
        started.elapsed().as_secs_f64()
    );
}

#[test]
fn sixteen_buffered_writers_of_10000_events_each_lose_and_reorder_nothing() {
    many_writers(Durability::Buffered, 16, 10_000);
}

#[test]
fn sixteen_synced_writers_of_200_events_each_lose_and_reorder_nothing() {
    many_writers(Durability::Synced, 16, 200);
}

/// The winner of a seq and the seq itself, in the payload.
fn race_payload(thread: u64, seq: u64) -> Vec<u8> {
    let mut p = vec![thread as u8];
    p.extend_from_slice(&seq.to_le_bytes());
    p
}

/// 4 threads race `append_expected(head, ..)` on one session for seqs
/// `1..=n`: each seq has exactly one winner, losers get `Conflict`, nothing
/// is lost or doubled, and the stream holds the winners' events.
fn race_on_one_session(journal: &Journal, n: u64) -> Session {
    let s = journal.create_session().expect("create");
    let barrier = Barrier::new(4);
    let conflicts = AtomicU64::new(0);
    let mut wins: Vec<(u64, u64)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..4u64)
            .map(|t| {
                let (s, barrier, conflicts) = (s.clone(), &barrier, &conflicts);
                scope.spawn(move || {
                    let mut mine = Vec::new();
                    barrier.wait();
                    let mut attempt = 0u64;
                    loop {
                        attempt += 1;
                        let h = s.head();
                        if h > n {
                            break;
                        }
                        // Now and then a writer that is certainly stale.
                        let expected = if attempt % 16 == 0 && h > 1 { h - 1 } else { h };
                        let ev = Event::Custom {
                            kind: "race".into(),
                            payload: race_payload(t, expected),
                        };
                        match s.append_expected(expected, ev) {
                            Ok(seq) => {
                                assert_eq!(seq, expected, "the seq asked for");
                                mine.push((seq, t));
                            }
                            Err(Error::Conflict {
                                expected: e, found, ..
                            }) => {
                                assert_eq!(e, expected);
                                assert!(found > expected, "a conflict means someone was first");
                                conflicts.fetch_add(1, Ordering::Relaxed);
                            }
                            Err(other) => panic!("thread {t}: {other}"),
                        }
                    }
                    mine
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("racer"))
            .collect()
    });
    wins.sort();
    let seqs: Vec<u64> = wins.iter().map(|(seq, _)| *seq).collect();
    assert_eq!(
        seqs,
        (1..=n).collect::<Vec<_>>(),
        "every seq won exactly once"
    );
    assert!(conflicts.load(Ordering::Relaxed) > 0, "losers got Conflict");
    assert_eq!(s.head(), n + 1);
    assert_race_stream(&s, &wins);
    s
}

fn assert_race_stream(s: &Session, wins: &[(u64, u64)]) {
    let events = s.events(1..).expect("events");
    assert_eq!(events.len(), wins.len());
    for (env, (seq, t)) in events.iter().zip(wins) {
        assert_eq!(env.seq, *seq);
        assert!(
            matches!(&env.event, Event::Custom { kind, payload } if kind == "race" && *payload == race_payload(*t, *seq)),
            "seq {seq} holds the event of its winner, thread {t}: {:?}",
            env.event
        );
    }
}

#[test]
fn racing_append_expected_on_sled_has_exactly_one_winner_per_seq() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    let (id, wins) = {
        let journal = Journal::open_with(&path, config(Durability::Synced)).expect("open");
        let s = race_on_one_session(&journal, 300);
        let wins: Vec<(u64, u64)> = s
            .events(1..)
            .expect("events")
            .iter()
            .map(|e| match &e.event {
                Event::Custom { payload, .. } => (e.seq, u64::from(payload[0])),
                other => panic!("{other:?}"),
            })
            .collect();
        (s.id(), wins)
    };
    let journal = Journal::open(&path).expect("reopen");
    let s = journal.session(id).expect("session");
    assert_eq!(s.head(), 301);
    assert_race_stream(&s, &wins);
}

#[test]
fn racing_append_expected_in_memory_has_exactly_one_winner_per_seq() {
    race_on_one_session(&Journal::memory(), 2000);
}

/// Events with a non-trivial fold: messages, provider calls, tool statuses.
fn varied(writer: u64, i: u64, eval: EvaluationId) -> Event {
    match i % 3 {
        0 => Event::Message(InnerMessage::new(
            if i % 2 == 0 {
                Role::User
            } else {
                Role::Assistant
            },
            format!("writer {writer} message {i}"),
            eval,
            i * 2 + writer,
        )),
        1 => Event::ProviderCall(ProviderCallRecord {
            evaluation_id: eval,
            turn: i as u32,
            provider: "p".into(),
            model: "m".into(),
            usage: TokenUsage {
                input_tokens: i,
                output_tokens: writer + 1,
                ..TokenUsage::default()
            },
            started_at: now(),
            finished_at: now(),
            outcome: ProviderOutcome::Ok,
        }),
        _ => writer_event(writer, i),
    }
}

fn fold(events: &[Envelope], config: &JournalConfig) -> SessionState {
    let mut state = SessionState::with_slices(&config.slices);
    for env in events {
        state.apply(env);
    }
    state
}

/// 2 writers append to one session while 2 readers read and fold: every
/// `events(0..h)` is a gap-free prefix of length `h`, and `state_at(k)` is
/// the state right after event `k`, equal to the fold of `events(0..=k)`.
fn readers_fold_while_writers_append(journal: &Journal, per_writer: u64) {
    let s = journal.create_session().expect("create");
    let eval = s
        .start_evaluation("ns", "key")
        .expect("start evaluation")
        .id();
    let config = journal.config().clone();
    let writing = AtomicBool::new(true);
    let checks = AtomicU64::new(0);
    std::thread::scope(|scope| {
        let writers: Vec<_> = (0..2u64)
            .map(|w| {
                let s = s.clone();
                scope.spawn(move || {
                    for i in 0..per_writer {
                        s.append(varied(w, i, eval)).expect("append");
                    }
                })
            })
            .collect();
        for r in 0..2u64 {
            let (s, config, writing, checks) = (s.clone(), &config, &writing, &checks);
            scope.spawn(move || {
                let mut rng = Rng::from_state(0x9E37_79B9_7F4A_7C15u64 ^ (r + 1));
                while writing.load(Ordering::Acquire) {
                    let h = s.head();
                    let events = s.events(0..h).expect("events(0..h)");
                    assert_eq!(events.len() as u64, h, "a prefix of length h");
                    for (i, env) in events.iter().enumerate() {
                        assert_eq!(env.seq, i as u64, "gap-free");
                    }
                    // k < h - 1: a snapshot (if one fits) plus replay. (k = h - 1
                    // is the current state: see `state_at_the_head_...` below.)
                    let k = rng.next_u64() % (h - 1);
                    let got = s.state_at(k).expect("state_at");
                    let events = &events[..=k as usize];
                    assert_eq!(
                        got.last_seq(),
                        Some(k),
                        "state_at({k}) is the state right after event {k}"
                    );
                    assert!(
                        got == fold(events, config),
                        "state_at({k}) equals the fold of events 0..={k}"
                    );
                    checks.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        for w in writers {
            w.join().expect("writer");
        }
        writing.store(false, Ordering::Release);
    });
    let events = s.events(..).expect("events");
    assert_eq!(events.len() as u64, 2 + 2 * per_writer);
    assert!(
        fold(&events, &config) == *s.state(),
        "the final state is the fold"
    );
    let checks = checks.load(Ordering::Relaxed);
    eprintln!("readers made {checks} checks while 2 writers appended {per_writer} events each");
    assert!(checks > 0, "the readers read");
}

fn snapshotting(durability: Durability) -> JournalConfig {
    JournalConfig {
        durability,
        checkpoint: CheckpointStrategy::EveryEvents(25),
        ..JournalConfig::default()
    }
}

fn sled_snapshotting() -> (tempfile::TempDir, Journal) {
    let dir = tempfile::tempdir().expect("tempdir");
    let journal = Journal::open_with(dir.path().join("db"), snapshotting(Durability::Buffered))
        .expect("open");
    (dir, journal)
}

#[test]
fn readers_fold_past_states_while_writers_append_on_sled() {
    let (_dir, journal) = sled_snapshotting();
    readers_fold_while_writers_append(&journal, 1500);
}

#[test]
fn readers_fold_past_states_while_writers_append_in_memory() {
    let journal = Journal::memory_with(snapshotting(Durability::Buffered));
    readers_fold_while_writers_append(&journal, 1500);
}

/// 2 writers append small events while 3 readers ask for `state_at(k)`
/// with `k = head() - 1` read just before: the answer must be the state
/// right after event `k`, even if an append lands in between.
fn state_at_the_head_while_writers_append(journal: &Journal, per_writer: u64) {
    let s = journal.create_session().expect("create");
    let writing = AtomicBool::new(true);
    let (checks, wrong) = (AtomicU64::new(0), AtomicU64::new(0));
    let first_wrong = std::sync::Mutex::new(None);
    std::thread::scope(|scope| {
        let writers: Vec<_> = (0..2u64)
            .map(|w| {
                let s = s.clone();
                scope.spawn(move || {
                    for i in 1..=per_writer {
                        s.append(writer_event(w, i)).expect("append");
                    }
                })
            })
            .collect();
        for _ in 0..3 {
            let (s, writing, checks, wrong, first_wrong) =
                (s.clone(), &writing, &checks, &wrong, &first_wrong);
            scope.spawn(move || {
                while writing.load(Ordering::Acquire) {
                    let k = s.head() - 1;
                    let got = s.state_at(k).expect("state_at").last_seq();
                    checks.fetch_add(1, Ordering::Relaxed);
                    if got != Some(k) {
                        wrong.fetch_add(1, Ordering::Relaxed);
                        first_wrong.lock().expect("lock").get_or_insert((k, got));
                    }
                }
            });
        }
        for w in writers {
            w.join().expect("writer");
        }
        writing.store(false, Ordering::Release);
    });
    let (checks, wrong) = (checks.into_inner(), wrong.into_inner());
    eprintln!("state_at(head - 1): {wrong} wrong of {checks}");
    assert_eq!(
        wrong,
        0,
        "state_at(k) answered the state after a later event, first: (k, last_seq) = {:?}",
        first_wrong.into_inner().expect("lock")
    );
}

#[test]
fn state_at_the_head_while_writers_append_is_that_state_on_sled() {
    let (_dir, journal) = sled_snapshotting();
    state_at_the_head_while_writers_append(&journal, 5000);
}

#[test]
fn state_at_the_head_while_writers_append_is_that_state_in_memory() {
    let journal = Journal::memory_with(snapshotting(Durability::Buffered));
    state_at_the_head_while_writers_append(&journal, 10_000);
}

/// Appends `per_thread` Synced events on each of `threads` threads (own
/// sessions) and returns events per second.
fn synced_rate(journal: &Journal, threads: u64, per_thread: u64) -> f64 {
    let sessions: Vec<Session> = (0..threads)
        .map(|_| journal.create_session().expect("create"))
        .collect();
    let barrier = Barrier::new(threads as usize);
    let started = Arc::new(std::sync::OnceLock::new());
    std::thread::scope(|scope| {
        for (t, s) in sessions.iter().enumerate() {
            let (barrier, started) = (&barrier, started.clone());
            scope.spawn(move || {
                barrier.wait();
                started.get_or_init(Instant::now);
                for i in 1..=per_thread {
                    s.append(writer_event(t as u64, i)).expect("append");
                }
            });
        }
    });
    let elapsed = started.get().expect("started").elapsed().as_secs_f64();
    for (t, s) in sessions.iter().enumerate() {
        assert_stream(s, t as u64, per_thread);
    }
    (threads * per_thread) as f64 / elapsed
}

#[test]
fn group_commit_lets_sixteen_synced_writers_share_syncs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let journal =
        Journal::open_with(dir.path().join("db"), config(Durability::Synced)).expect("open");
    // Best of three turns each: the rest of the suite runs beside this
    // test on 2 cores, and one turn can fall on a busy moment.
    let (mut single, mut concurrent) = (0f64, 0f64);
    let (mut writes, mut records) = (0, 0);
    for _ in 0..3 {
        single = single.max(synced_rate(&journal, 1, 50));
        let before = journal.sync_stats();
        concurrent = concurrent.max(synced_rate(&journal, 16, 50));
        let after = journal.sync_stats();
        writes += after.log_writes - before.log_writes;
        records += after.log_records - before.log_records;
    }
    // Each turn: 16 sessions opened, then 16 x 50 appends, one record each.
    assert_eq!(records, 3 * 16 * 51);
    eprintln!(
        "16 writers: {records} appends in {writes} log writes ({:.1} per write)",
        records as f64 / writes as f64
    );
    // The sharing itself: 16 writers never each get a write of their own.
    assert!(
        records as f64 >= 1.5 * writes as f64,
        "{records} appends took {writes} log writes: no group commit"
    );
    eprintln!(
        "Synced appends: 1 writer {single:.0}/s, 16 writers {concurrent:.0}/s ({:.1}x)",
        concurrent / single
    );
    // That the writers share syncs is asserted above from the log's own
    // counts (and by the unit tests of group_commit and wal); a rate
    // ratio depends on the disk's sync latency against the CPU cost of 16
    // debug-build threads on 2 cores, shared with the rest of the suite (it
    // ranged from 0.6x, under the other concurrency tests, to 19x here). So
    // this end-to-end check only guards against a collapse, such as a lock
    // held across the sync making every writer wait for every other's.
    assert!(
        concurrent >= single / 2.0,
        "16 writers should share syncs: {concurrent:.0}/s vs {single:.0}/s for one writer"
    );
}

#[test]
fn sync_stats_count_what_each_durability_writes() {
    let stats = |durability| {
        let dir = tempfile::tempdir().expect("tempdir");
        let journal = Journal::open_with(dir.path().join("db"), config(durability)).expect("open");
        let s = journal.create_session().expect("create");
        for i in 1..=5 {
            s.append(writer_event(0, i)).expect("append");
        }
        let appended = journal.sync_stats();
        journal.flush().expect("flush");
        (appended, journal.sync_stats())
    };
    // Synced, one writer: a log write per append (the session's opening
    // event and 5), each of its own record.
    let (synced, _) = stats(Durability::Synced);
    assert_eq!((synced.log_writes, synced.log_records), (6, 6));
    assert!(synced.log_bytes > 6 * 20, "{synced:?}");
    assert!(synced.log_write_time > std::time::Duration::ZERO);
    assert!(synced.rollovers >= 1, "the open's rollover: {synced:?}");
    assert_eq!(synced.sled_flushes, 0);
    // Flushed: sled flushes, no log.
    let (flushed, _) = stats(Durability::Flushed);
    assert_eq!(flushed.log_writes, 0);
    assert!((1..=6).contains(&flushed.sled_flushes), "{flushed:?}");
    // Buffered: nothing until a flush.
    let (buffered, after_flush) = stats(Durability::Buffered);
    assert_eq!((buffered.log_writes, buffered.sled_flushes), (0, 0));
    assert_eq!(after_flush.sled_flushes, 1);
    // A journal in memory has nothing to report.
    let memory = Journal::memory();
    let s = memory.create_session().expect("create");
    s.append(writer_event(0, 1)).expect("append");
    assert_eq!(
        memory.sync_stats(),
        agent_journal::store::SyncStats::default()
    );
}
