//! Rows 1, 2 and 3: append throughput, Buffered and Synced, one writer and 16.

use std::hint::black_box;
use std::path::PathBuf;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use agent_journal::format::now;
use agent_journal::state::SessionState;
use agent_journal::{
    CheckpointStrategy, Durability, Envelope, EvaluationId, Event, InnerMessage, Journal,
    JournalConfig, Session, SessionId,
};
use tempfile::TempDir;

use super::events::{cloned_messages, frame_of, message_200};
use super::raw;
use super::report::{Report, Row, Verdict, fmt_dur, fmt_rate, fmt_ratio, rate, thousands};
use super::timing::{Contestant, interleave};
use super::{buffered, cache_bytes, tempdir, wait_readable};
use crate::Sizes;

// 1. Buffered append vs raw sled inserts

/// Chunks in which contestants take turns (rows 1 and 2).
const CHUNK_BUFFERED: u64 = 1_000;
const CHUNK_SYNCED: u64 = 25;

/// A contestant appending prebuilt clones of `template` to a new session of a
/// new journal with `config`. The journal lives in `dir`.
fn ours_appending<'a>(
    dir: &'a TempDir,
    config: JournalConfig,
    template: &'a InnerMessage,
) -> Contestant<'a> {
    let journal = Journal::open_with(dir.path().join("db"), config).expect("open");
    let session = journal.create_session().expect("session");
    Box::new(move |first, count| {
        let events = cloned_messages(template, first, count);
        let t = Instant::now();
        for e in events {
            session.append(e).expect("append");
        }
        wait_readable(&session);
        let d = t.elapsed();
        // Keep the journal alive with the session.
        let _ = &journal;
        d
    })
}

pub fn section_buffered(s: &Sizes, rep: &mut Report) {
    let n = s.buffered;
    eprintln!(
        "[1] Buffered append of {} messages (200-byte content), interleaved in chunks of {}",
        thousands(n),
        thousands(CHUNK_BUFFERED)
    );
    let template = message_200(EvaluationId::new());
    // The frame of one such message at a seq in the middle of the loop.
    let frame = frame_of(SessionId::new(), n / 2, Event::Message(template.clone()));
    let dirs = [tempdir(), tempdir(), tempdir()];
    let raw_db = raw::open_sled(&dirs[2].path().join("db"), cache_bytes());
    let raw_events = raw_db.open_tree("events").expect("tree");
    let raw_session = SessionId::new();
    raw_events
        .insert(raw::key(raw_session, 0), &frame[..])
        .expect("insert");
    let frame_ref = &frame;
    let mut contestants: Vec<Contestant<'_>> = vec![
        ours_appending(&dirs[0], buffered(), &template),
        ours_appending(
            &dirs[1],
            JournalConfig {
                checkpoint: CheckpointStrategy::OnDemand,
                ..buffered()
            },
            &template,
        ),
        Box::new(|first, count| {
            let t = Instant::now();
            for seq in first + 1..=first + count {
                raw_events
                    .insert(raw::key(raw_session, seq), &frame_ref[..])
                    .expect("insert");
            }
            t.elapsed()
        }),
    ];
    let times = interleave(n, CHUNK_BUFFERED, &mut contestants);
    drop(contestants);
    let (ours, on_demand, base) = (times[0], times[1], times[2]);
    // The library's CPU per event without the store: build the envelope,
    // encode the frame, fold it.
    let cpu = {
        let sid = SessionId::new();
        let events = cloned_messages(&template, 0, n);
        let mut state = SessionState::new();
        let t = Instant::now();
        for (seq, event) in events.into_iter().enumerate() {
            let env = Envelope {
                session: sid,
                seq: seq as u64,
                at: now(),
                event,
            };
            let f = agent_journal::format::encode_frame(
                &env,
                agent_journal::format::DEFAULT_MAX_EVENT_BYTES,
            )
            .expect("encode");
            black_box(&f);
            state.apply(&env);
        }
        t.elapsed()
    };
    let (r_ours, r_base) = (rate(n, ours), rate(n, base));
    let ratio = r_ours / r_base;
    rep.row(Row {
        id: "1",
        what: format!(
            "`Buffered` append, {} Message events (200-byte content, {}-byte frame), default config (incremental snapshots)",
            thousands(n),
            frame.len()
        ),
        ours: fmt_rate(r_ours),
        baseline: format!("raw sled insert of the same frame: {}", fmt_rate(r_base)),
        ratio: fmt_ratio(ratio),
        target: ">= 0.80x".into(),
        verdict: Verdict::at_least(ratio, 0.8),
    });
    rep.note(format!(
        "row 1: ours, raw sled and ours with `CheckpointStrategy::OnDemand` took turns in chunks of {}. \
         OnDemand (no snapshot): {} ({} of raw); per event: ours {}, OnDemand {}, raw sled insert {}; \
         the library's CPU alone (envelope + `encode_frame` + fold, no store) {}",
        thousands(CHUNK_BUFFERED),
        fmt_rate(rate(n, on_demand)),
        fmt_ratio(rate(n, on_demand) / r_base),
        fmt_dur(ours / n as u32),
        fmt_dur(on_demand / n as u32),
        fmt_dur(base / n as u32),
        fmt_dur(cpu / n as u32),
    ));
}

// ---------------------------------------------------------------------------
// 2. Synced append, one writer

/// A contestant writing `frame` per record with `write` + `fdatasync`.
fn file_writing<'a>(path: PathBuf, frame: &'a [u8], n: u64, preallocate: bool) -> Contestant<'a> {
    let mut f = raw::SyncedFile::create(&path, preallocate.then_some(frame.len() as u64 * n));
    Box::new(move |_, count| f.append(frame, count))
}

/// Returns our one-writer Synced rate (events/s).
pub fn section_synced(s: &Sizes, rep: &mut Report) -> f64 {
    let n = s.synced;
    eprintln!(
        "[2] Synced append, one writer, {} events, interleaved in chunks of {}",
        thousands(n),
        CHUNK_SYNCED
    );
    let template = message_200(EvaluationId::new());
    let frame = frame_of(SessionId::new(), n / 2, Event::Message(template.clone()));
    let dirs = [tempdir(), tempdir(), tempdir()];
    let sled_synced = raw::SyncedSled::open(&dirs[1].path().join("db"), cache_bytes());
    let raw_session = SessionId::new();
    let frame_ref = &frame;
    let config = JournalConfig::default();
    assert_eq!(config.durability, Durability::Synced);
    let mut contestants: Vec<Contestant<'_>> = vec![
        ours_appending(&dirs[0], config, &template),
        file_writing(dirs[2].path().join("plain.log"), &frame, n, false),
        file_writing(dirs[2].path().join("preallocated.log"), &frame, n, true),
        Box::new(|first, count| sled_synced.append(raw_session, first, count, frame_ref)),
    ];
    let times = interleave(n, CHUNK_SYNCED, &mut contestants);
    drop(contestants);
    let (ours, base, preallocated, sled) = (times[0], times[1], times[2], times[3]);
    let (r_ours, r_base) = (rate(n, ours), rate(n, base));
    let ratio = r_ours / r_base;
    rep.row(Row {
        id: "2",
        what: format!(
            "`Synced` append, one writer, {} events ({}-byte frame)",
            thousands(n),
            frame.len()
        ),
        ours: format!(
            "{} ({} / append)",
            fmt_rate(r_ours),
            fmt_dur(ours / n as u32)
        ),
        baseline: format!(
            "write + fdatasync per record, plain file: {} ({} / record)",
            fmt_rate(r_base),
            fmt_dur(base / n as u32)
        ),
        ratio: fmt_ratio(ratio),
        target: ">= 0.90x".into(),
        verdict: Verdict::at_least(ratio, 0.9),
    });
    rep.note(format!(
        "row 2: contestants took turns in chunks of {}. Raw sled insert + `Db::flush` (pwrite + \
         sync_file_range) + fdatasync(db) per record, no library: {} ({} / record); write + \
         fdatasync into a file written and synced beforehand (no block allocation, no size \
         change to commit): {} ({} / record)",
        CHUNK_SYNCED,
        fmt_rate(rate(n, sled)),
        fmt_dur(sled / n as u32),
        fmt_rate(rate(n, preallocated)),
        fmt_dur(preallocated / n as u32),
    ));
    r_ours
}

// ---------------------------------------------------------------------------
// 3. Synced append, 16 sessions on 16 threads

/// `sessions.len()` threads, each appending `per` clones of `template` to
/// its own session, started together; returns the wall time.
fn appending_threads(sessions: &[Session], template: &InnerMessage, per: u64) -> Duration {
    let barrier = Arc::new(Barrier::new(sessions.len() + 1));
    let handles: Vec<_> = sessions
        .iter()
        .map(|session| {
            let session = session.clone();
            let events = cloned_messages(template, session.head(), per);
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                barrier.wait();
                for e in events {
                    session.append(e).expect("append");
                }
            })
        })
        .collect();
    barrier.wait();
    let t = Instant::now();
    for h in handles {
        h.join().expect("join");
    }
    // One read waits for the inserts of every session of the journal.
    if let Some(s) = sessions.first() {
        wait_readable(s);
    }
    t.elapsed()
}

/// `threads` threads, each inserting `per` copies of `frame` into raw sled
/// under a session key of its own (no library, no sync), started together;
/// returns the wall time. The ceiling of sled's own inserts.
fn raw_inserting_threads(
    events: &sled::Tree,
    frame: &Arc<Vec<u8>>,
    sessions: &[SessionId],
    first: u64,
    per: u64,
) -> Duration {
    let barrier = Arc::new(Barrier::new(sessions.len() + 1));
    let handles: Vec<_> = sessions
        .iter()
        .map(|&session| {
            let (events, frame, barrier) = (events.clone(), frame.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                for seq in first..first + per {
                    events
                        .insert(raw::key(session, seq), &frame[..])
                        .expect("insert");
                }
            })
        })
        .collect();
    barrier.wait();
    let t = Instant::now();
    for h in handles {
        h.join().expect("join");
    }
    t.elapsed()
}

pub fn section_synced_threads(s: &Sizes, row2: Option<f64>, rep: &mut Report) {
    let (threads, per) = (s.threads, s.per_thread);
    let rounds = s.thread_rounds;
    let per_round = per / rounds;
    let total = threads as u64 * per_round * rounds;
    let one_total = s.synced;
    eprintln!(
        "[3] Synced append, {threads} threads x {per} events, vs one writer, {rounds} rounds taking turns"
    );
    let template = message_200(EvaluationId::new());
    let dirs = [tempdir(), tempdir(), tempdir(), tempdir(), tempdir()];
    let open = |dir: &TempDir, durability| {
        Journal::open_with(
            dir.path().join("db"),
            JournalConfig {
                durability,
                ..JournalConfig::default()
            },
        )
        .expect("open")
    };
    let (synced, buffered, flushed, single) = (
        open(&dirs[0], Durability::Synced),
        open(&dirs[1], Durability::Buffered),
        open(&dirs[2], Durability::Flushed),
        open(&dirs[3], Durability::Synced),
    );
    let sessions = |j: &Journal| -> Vec<Session> {
        (0..threads)
            .map(|_| j.create_session().expect("session"))
            .collect()
    };
    let many = [sessions(&synced), sessions(&buffered), sessions(&flushed)];
    let one = single.create_session().expect("session");
    let raw_db = raw::open_sled(&dirs[4].path().join("db"), cache_bytes());
    let raw_events = raw_db.open_tree("events").expect("tree");
    let raw_sessions: Vec<SessionId> = (0..threads).map(|_| SessionId::new()).collect();
    let frame = Arc::new(frame_of(
        SessionId::new(),
        per / 2,
        Event::Message(template.clone()),
    ));
    let mut times = [Duration::ZERO; 6];
    let mut gc_syncs = 0;
    let stats_before = (synced.sync_stats(), single.sync_stats());
    for round in 0..rounds {
        for k in 0..6 {
            let i = (round as usize + k) % 6;
            times[i] += match i {
                0..=2 => appending_threads(&many[i], &template, per_round),
                5 => {
                    let path = dirs[4].path().join(format!("group-commit-{round}"));
                    let (took, syncs) =
                        super::group::leader_follower(&path, threads, per_round, frame.len());
                    gc_syncs += syncs;
                    took
                }
                4 => raw_inserting_threads(
                    &raw_events,
                    &frame,
                    &raw_sessions,
                    round * per_round,
                    per_round,
                ),
                _ => {
                    let events = cloned_messages(&template, one.head(), one_total / rounds);
                    let t = Instant::now();
                    for e in events {
                        one.append(e).expect("append");
                    }
                    wait_readable(&one);
                    t.elapsed()
                }
            };
        }
    }
    // Appends per log write and the mean time of one write + sync.
    let log = |j: &Journal, before: agent_journal::store::SyncStats| {
        let after = j.sync_stats();
        let writes = (after.log_writes - before.log_writes).max(1);
        let records = after.log_records - before.log_records;
        let time = after.log_write_time - before.log_write_time;
        (records as f64 / writes as f64, time / writes as u32)
    };
    let (log_many, log_one) = (log(&synced, stats_before.0), log(&single, stats_before.1));
    let log_text = |(per_write, took): (f64, Duration)| {
        format!(
            "{per_write:.1} appends per log write, {} per write + sync",
            fmt_dur(took)
        )
    };
    // Writes back to back, each carrying what the measured ones carried.
    let disk_bound =
        log_many.0 * log_one.1.as_secs_f64() / (log_one.0 * log_many.1.as_secs_f64()).max(1e-9);
    let r_synced = rate(total, times[0]);
    let r_buffered = rate(total, times[1]);
    let r_flushed = rate(total, times[2]);
    let r_raw = rate(total, times[4]);
    let r_gc = rate(total, times[5]);
    let one_count = one_total / rounds * rounds;
    let r_one = rate(one_count, times[3]);
    let ratio = r_synced / r_gc;
    rep.row(Row {
        id: "3",
        what: format!(
            "`Synced` append, {threads} sessions on {threads} threads x {} events (group commit)",
            thousands(per_round * rounds)
        ),
        ours: format!("{} total", fmt_rate(r_synced)),
        baseline: format!(
            "a plain leader/follower loop, {threads} threads queueing {}-byte records, \
             write + fdatasync of a preallocated file: {} ({:.1} records per sync)",
            frame.len(),
            fmt_rate(r_gc),
            total as f64 / gc_syncs.max(1) as f64
        ),
        ratio: fmt_ratio(ratio),
        target: ">= 0.85x".into(),
        verdict: Verdict::at_least(ratio, 0.85),
    });
    rep.note(format!(
        "row 3: {rounds} rounds, each: {threads} threads x {} Synced appends, the same with \
         `Buffered` (no sync: the ceiling of the library's own append path, whose sled inserts \
         one insert thread makes), with `Flushed`, {threads} threads inserting the same frames into \
         raw sled (no library, no sync), the leader/follower loop, and {} one-writer Synced \
         appends ({} = {} / append; {threads} writers reach {} its rate), in turns. \
         {threads} threads `Buffered`: {} = {} the one-writer `Synced` rate; `Flushed` (sled flush, \
         no fdatasync): {}; raw sled inserts alone: {} = {}. The write-ahead log \
         (`Journal::sync_stats`): {threads} threads {}; one writer {}. With log writes back to \
         back, each carrying as many appends and taking as long as these did, {threads} writers \
         would reach at most {} the one-writer rate (`Synced` reaches {:.0}% of that bound).{}",
        thousands(per_round),
        thousands(one_total / rounds),
        fmt_rate(r_one),
        fmt_dur(times[3] / one_count as u32),
        fmt_ratio(r_synced / r_one),
        fmt_rate(r_buffered),
        fmt_ratio(r_buffered / r_one),
        fmt_rate(r_flushed),
        fmt_rate(r_raw),
        fmt_ratio(r_raw / r_one),
        log_text(log_many),
        log_text(log_one),
        fmt_ratio(disk_bound),
        100.0 * ratio / disk_bound,
        row2.map_or(String::new(), |r| format!(
            " Row 2's one-writer rate, measured earlier: {}.",
            fmt_rate(r)
        )),
    ));
}

// ---------------------------------------------------------------------------
// 16. Large events: frames over 7 KiB go to the journal's segment files

/// Content of the large messages of row 16.
const LARGE: usize = 16 << 10;

/// Row 16: one writer appending 16 KiB messages, `Synced` and `Buffered`,
/// against `write` + `fdatasync` of the same frame per record. Each such
/// frame is written to the write-ahead log (`Synced`) and to a segment file
/// synced before sled points to it (once per insert batch).
pub fn section_large(s: &Sizes, rep: &mut Report) {
    let n = s.synced;
    eprintln!(
        "[16] append of {} messages of {} KiB, Synced and Buffered, interleaved in chunks of {}",
        thousands(n),
        LARGE >> 10,
        CHUNK_SYNCED
    );
    let mut template = message_200(EvaluationId::new());
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    template.content = (0..LARGE)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            char::from(b'a' + (x % 26) as u8)
        })
        .collect();
    let frame = frame_of(SessionId::new(), n / 2, Event::Message(template.clone()));
    let dirs = [tempdir(), tempdir(), tempdir()];
    let mut contestants: Vec<Contestant<'_>> = vec![
        ours_appending(&dirs[0], JournalConfig::default(), &template),
        file_writing(dirs[2].path().join("plain.log"), &frame, n, false),
        ours_appending(&dirs[1], buffered(), &template),
    ];
    let times = interleave(n, CHUNK_SYNCED, &mut contestants);
    drop(contestants);
    let (ours, base, ours_buffered) = (times[0], times[1], times[2]);
    let (r_ours, r_base) = (rate(n, ours), rate(n, base));
    let ratio = r_ours / r_base;
    rep.row(Row {
        id: "16",
        what: format!(
            "`Synced` append, one writer, {} messages of {} KiB ({}-byte frame, kept in a segment file)",
            thousands(n),
            LARGE >> 10,
            frame.len()
        ),
        ours: format!("{} ({} / append)", fmt_rate(r_ours), fmt_dur(ours / n as u32)),
        baseline: format!(
            "write + fdatasync per record, plain file: {} ({} / record)",
            fmt_rate(r_base),
            fmt_dur(base / n as u32)
        ),
        ratio: fmt_ratio(ratio),
        target: ">= 0.90x".into(),
        verdict: Verdict::at_least(ratio, 0.9),
    });
    let segments: u64 = std::fs::read_dir(dirs[0].path().join("db/frames"))
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0);
    rep.note(format!(
        "row 16: the same messages `Buffered`: {} ({} / append); the segment files of the \
         `Synced` journal hold {} bytes for {} frames",
        fmt_rate(rate(n, ours_buffered)),
        fmt_dur(ours_buffered / n as u32),
        thousands(segments),
        thousands(n),
    ));
}
