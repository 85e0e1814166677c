//! Rows 4 and 6: opening a big session, folding it from 0 or from a snapshot.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use agent_journal::{
    CheckpointStrategy, Journal, JournalConfig, SessionId, SessionState, SliceRegistry,
};
use tempfile::TempDir;

use super::events::AgentRun;
use super::raw;
use super::report::{
    Report, Row, Verdict, fmt_bytes, fmt_dur, fmt_rate, fmt_ratio, rate, thousands,
};
use super::{buffered, cache_bytes, tempdir};
use crate::Sizes;

// 4. Cold open + fold of a big session

/// The big session of rows 4 and 6, and our time to open and fold it.
pub struct Big {
    _dir: TempDir,
    path: PathBuf,
    session: SessionId,
    events: u64,
    fold_from_zero: Duration,
}

fn on_demand() -> JournalConfig {
    JournalConfig {
        checkpoint: CheckpointStrategy::OnDemand,
        ..buffered()
    }
}

/// Appends the realistic workload to `session` until its head is `n`, in
/// atomic batches of 1,000.
fn fill(session: &agent_journal::Session, run: &mut AgentRun, n: u64) {
    loop {
        let head = session.head();
        if head >= n {
            break;
        }
        session
            .append_batch(run.take_vec((n - head).min(1_000)))
            .expect("append batch");
    }
}

pub fn section_cold_open(s: &Sizes, rep: &mut Report) -> Big {
    let n = s.big;
    eprintln!(
        "[4] building a {}-event session (Buffered, OnDemand: no snapshot)",
        thousands(n)
    );
    let dir = tempdir();
    let path = dir.path().join("db");
    let t = Instant::now();
    let session_id = {
        let journal = Journal::open_with(&path, on_demand()).expect("open");
        let session = journal.create_session().expect("session");
        fill(&session, &mut AgentRun::new(500), n);
        journal.flush().expect("flush");
        session.id()
    };
    eprintln!("    built in {}", fmt_dur(t.elapsed()));
    // Warm-up: sled's own recovery after the build, and the OS page cache.
    let warm = raw::sled_scan_decode(&path, cache_bytes(), session_id, false);
    assert_eq!(warm.events, n);
    eprintln!("[4] timing open + fold ({} round(s))", s.rounds);
    let mut ours = (Duration::MAX, Duration::ZERO, Duration::ZERO);
    let mut base = raw::ScanTimes {
        open: Duration::MAX,
        scan: Duration::ZERO,
        events: 0,
    };
    let mut folded = raw::ScanTimes {
        open: Duration::MAX,
        scan: Duration::ZERO,
        events: 0,
    };
    let mut drop_time = Duration::ZERO;
    // The one that goes first rotates: whoever runs right after a big state
    // was freed finds its heap already faulted in.
    for round in 0..s.rounds {
        for k in 0..3 {
            match (round + k) % 3 {
                0 => {
                    let t = Instant::now();
                    let journal = Journal::open_with(&path, on_demand()).expect("open");
                    let opened = t.elapsed();
                    let session = journal.session(session_id).expect("session");
                    let total = t.elapsed();
                    let stats = session.load_stats();
                    assert_eq!(stats.events_replayed, n);
                    assert_eq!(stats.snapshot_seq, None);
                    if total < ours.0 {
                        ours = (total, opened, total - opened);
                    }
                    let t = Instant::now();
                    drop(session);
                    drop(journal);
                    drop_time = t.elapsed();
                }
                1 => {
                    let b = raw::sled_scan_decode(&path, cache_bytes(), session_id, false);
                    assert_eq!(b.events, n);
                    if b.open + b.scan < base.open.saturating_add(base.scan) {
                        base = b;
                    }
                }
                _ => {
                    let f = raw::sled_scan_decode(&path, cache_bytes(), session_id, true);
                    if f.open + f.scan < folded.open.saturating_add(folded.scan) {
                        folded = f;
                    }
                }
            }
        }
    }
    let base_total = base.open + base.scan;
    let ratio = base_total.as_secs_f64() / ours.0.as_secs_f64();
    rep.row(Row {
        id: "4",
        what: format!(
            "cold open + fold of {} events, no snapshot (`Journal::open` + `journal.session(id)`)",
            thousands(n)
        ),
        ours: format!("{} ({})", fmt_dur(ours.0), fmt_rate(rate(n, ours.0))),
        baseline: format!(
            "open sled + prefix scan + crc + decode `Envelope`: {} ({})",
            fmt_dur(base_total),
            fmt_rate(rate(n, base_total))
        ),
        ratio: format!("{} (raw time / ours)", fmt_ratio(ratio)),
        target: ">= 0.80x".into(),
        verdict: Verdict::at_least(ratio, 0.8),
    });
    rep.note(format!(
        "row 4: ours = `Journal::open` {} + `session()` {}; raw = sled open {} + scan/crc/decode {}; \
         raw scan + decode + `SessionState::apply` (the library's fold without its session and store \
         layers, a third contestant of the same rounds): \
         open {} + {} = {} ({} of ours); dropping our journal and its folded state took {} (untimed). \
         OS page cache warm for both.",
        fmt_dur(ours.1),
        fmt_dur(ours.2),
        fmt_dur(base.open),
        fmt_dur(base.scan),
        fmt_dur(folded.open),
        fmt_dur(folded.scan),
        fmt_dur(folded.open + folded.scan),
        fmt_ratio((folded.open + folded.scan).as_secs_f64() / ours.0.as_secs_f64()),
        fmt_dur(drop_time),
    ));
    Big {
        _dir: dir,
        path,
        session: session_id,
        events: n,
        fold_from_zero: ours.0,
    }
}

// ---------------------------------------------------------------------------
// 6. Opening a big session with a snapshot

pub fn section_snapshot_open(s: &Sizes, big: &Big, rep: &mut Report) {
    eprintln!(
        "[6] snapshot of the {}-event session, then {} more events",
        thousands(big.events),
        thousands(s.tail)
    );
    let snapshot_write = {
        let journal = Journal::open_with(&big.path, on_demand()).expect("open");
        let session = journal.session(big.session).expect("session");
        let t = Instant::now();
        let seq = session.snapshot().expect("snapshot");
        let d = t.elapsed();
        assert_eq!(seq, Some(big.events - 1));
        let mut run = AgentRun::new(500);
        for _ in 0..s.tail {
            session.append(run.next_event()).expect("append");
        }
        journal.flush().expect("flush");
        d
    };
    // The snapshot as stored, and what decoding it alone costs.
    let (snapshot_bytes, decode) = {
        let db = raw::open_sled(&big.path, cache_bytes());
        let (seq, frame) = raw::latest_snapshot(&big.path, &db, big.session).expect("a snapshot");
        assert_eq!(seq, big.events - 1);
        let len = frame.len() as u64;
        let frame = agent_journal::SharedBytes::from(frame);
        let t = Instant::now();
        agent_journal::format::verify_frame(&frame).expect("crc");
        let state = SessionState::decode_snapshot_shared(
            frame,
            agent_journal::format::FRAME_HEADER_LEN,
            &SliceRegistry::default(),
            u64::MAX,
        )
        .expect("decode");
        let d = t.elapsed();
        drop(state);
        (len, d)
    };
    let mut best = Duration::MAX;
    let mut replayed = 0;
    let mut snapshot_seq = None;
    for _ in 0..s.rounds {
        let t = Instant::now();
        let journal = Journal::open_with(&big.path, on_demand()).expect("open");
        let session = journal.session(big.session).expect("session");
        let d = t.elapsed();
        let stats = session.load_stats();
        assert_eq!(stats.snapshot_rejected, None);
        replayed = stats.events_replayed;
        snapshot_seq = stats.snapshot_seq;
        best = best.min(d);
    }
    // The first appends after an open (after the rounds: they add events
    // after the snapshot): the first used to copy the decoded state's full
    // vectors.
    let first_appends = {
        let journal = Journal::open_with(&big.path, on_demand()).expect("open");
        let session = journal.session(big.session).expect("session");
        let mut run = AgentRun::new(500);
        let times: Vec<Duration> = (0..3)
            .map(|_| {
                let e = run.next_event();
                let t = Instant::now();
                session.append(e).expect("append");
                t.elapsed()
            })
            .collect();
        times
            .iter()
            .map(|d| fmt_dur(*d))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let speedup = big.fold_from_zero.as_secs_f64() / best.as_secs_f64();
    rep.row(Row {
        id: "6",
        what: format!(
            "open a {}-event session with a snapshot at seq {} + {} events after it",
            thousands(big.events + s.tail),
            snapshot_seq.map_or("none".into(), thousands),
            thousands(s.tail)
        ),
        ours: format!(
            "{} (`events_replayed` = {})",
            fmt_dur(best),
            thousands(replayed)
        ),
        baseline: format!(
            "ours, fold from event 0 (row 4): {}",
            fmt_dur(big.fold_from_zero)
        ),
        ratio: format!("{} faster", fmt_ratio(speedup)),
        target: ">= 5x, replayed = 1,000".into(),
        verdict: if replayed == s.tail {
            Verdict::at_least(speedup, 5.0)
        } else {
            Verdict::Fail
        },
    });
    rep.note(format!(
        "row 6: the snapshot frame is {} ({} per event folded into it); `session.snapshot()` took {}; \
         the frame already in memory, its crc (one thread) then \
         `SessionState::decode_snapshot_shared` take {}; the open, which also reads the file and \
         checks the crc beside the decode, {}. The first three appends after an open \
         (`Buffered`, a new evaluation: `EvaluationStarted`, system, user) took {first_appends}",
        fmt_bytes(snapshot_bytes),
        fmt_bytes(snapshot_bytes / big.events),
        fmt_dur(snapshot_write),
        fmt_dur(decode),
        fmt_dur(best),
    ));
}
