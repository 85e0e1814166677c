//! Rows 4 and 6: opening a big session, folding it from 0 or from a snapshot.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use agent_journal::state::{SessionState, SliceRegistry};
use agent_journal::{CheckpointStrategy, Journal, JournalConfig, SessionId};
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
    // For profiling an open: `AJ_BENCH_KEEP=DIR` keeps a copy of the
    // database (and prints its session) for the child of row 4m.
    if let Some(keep) = std::env::var_os("AJ_BENCH_KEEP") {
        let to = std::path::Path::new(&keep);
        std::fs::create_dir_all(to).expect("keep dir");
        for e in std::fs::read_dir(&path).expect("db dir").flatten() {
            if e.path().is_file() {
                std::fs::copy(e.path(), to.join(e.file_name())).expect("copy");
            } else {
                let sub = to.join(e.file_name());
                std::fs::create_dir_all(&sub).expect("sub dir");
                for f in std::fs::read_dir(e.path()).expect("sub").flatten() {
                    std::fs::copy(f.path(), sub.join(f.file_name())).expect("copy");
                }
            }
        }
        eprintln!("    kept in {} (session {session_id})", to.display());
    }
    // The raw baselines scan the same frames in a sled database of their
    // own, one key per event.
    let raw_path = dir.path().join("raw");
    raw::journal_frames(&path, session_id, cache_bytes(), Some(&raw_path));
    // Warm-up: sled's own recovery after the build, and the OS page cache.
    let warm = raw::sled_scan_decode(&raw_path, cache_bytes(), session_id, false);
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
                    let b = raw::sled_scan_decode(&raw_path, cache_bytes(), session_id, false);
                    assert_eq!(b.events, n);
                    if b.open + b.scan < base.open.saturating_add(base.scan) {
                        base = b;
                    }
                }
                _ => {
                    let f = raw::sled_scan_decode(&raw_path, cache_bytes(), session_id, true);
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
    memory_of_open(&path, session_id, n, rep);
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
        let frame = agent_journal::format::SharedBytes::from(frame);
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

// 4m. Memory of the open

/// The variable that makes the bench binary a child of row 4m: `PATH SESSION
/// CACHE_BYTES MODE` (`journal` or `raw`).
pub const OPEN_MEMORY_CHILD: &str = "AJ_BENCH_OPEN_MEMORY";

/// Row 4m's child: opens and folds the session as `spec` says, then prints
/// its peak resident memory (VmHWM) in bytes.
pub fn open_memory_child(spec: &str) {
    let parts: Vec<&str> = spec.split(' ').collect();
    let [path, session, cache, mode] = parts[..] else {
        panic!("{OPEN_MEMORY_CHILD}: expected PATH SESSION CACHE MODE, got {spec:?}");
    };
    let path = std::path::Path::new(path);
    let session: SessionId = session.parse().expect("session id");
    let cache: u64 = cache.parse().expect("cache bytes");
    if mode == "raw" {
        std::hint::black_box(raw::sled_scan_decode(path, cache, session, true));
    } else if let Some(n) = mode.strip_prefix("live:") {
        // A fresh journal at `path` whose session takes `n` events live
        // (the state folded as they are appended), held open.
        let n: u64 = n.parse().expect("live: events");
        let journal = Journal::open_with(
            path,
            JournalConfig {
                cache_bytes: cache,
                ..on_demand()
            },
        )
        .expect("open");
        let s = journal.create_session().expect("session");
        fill(&s, &mut AgentRun::new(500), n);
        journal.flush().expect("flush");
        std::hint::black_box(s.head());
    } else {
        let config = if mode == "default" {
            buffered()
        } else {
            on_demand()
        };
        let journal = Journal::open_with(
            path,
            JournalConfig {
                cache_bytes: cache,
                ..config
            },
        )
        .expect("open");
        let s = journal.session(session).expect("session");
        std::hint::black_box(s.head());
    }
    let status = std::fs::read_to_string("/proc/self/status").expect("status");
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
        .expect("VmHWM");
    println!("{}", kb * 1024);
}

/// The peak resident memory of a child that opens `session` (see
/// [`open_memory_child`]).
fn child_peak(path: &std::path::Path, session: SessionId, cache: u64, mode: &str) -> u64 {
    let out = std::process::Command::new(std::env::current_exe().expect("exe"))
        .env(
            OPEN_MEMORY_CHILD,
            format!("{} {session} {cache} {mode}", path.display()),
        )
        .stderr(std::process::Stdio::inherit())
        .output()
        .expect("run the child");
    assert!(out.status.success(), "row 4m's child failed");
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("the child's peak")
}

/// Row 4m: the peak memory of a process that opens and folds the big
/// session (the journal with its default page cache, and the folded
/// state), against the bytes of its frames; then the same with sled's cache
/// at 64 MiB, and the raw scan + decode + fold (no journal) of row 4's
/// third contestant.
fn memory_of_open(path: &std::path::Path, session_id: SessionId, n: u64, rep: &mut Report) {
    let raw_path = path.with_file_name("raw");
    let frames = if raw_path.exists() {
        raw::journal_frames(path, session_id, cache_bytes(), None).1
    } else {
        raw::journal_frames(path, session_id, cache_bytes(), Some(&raw_path)).1
    };
    let ours = child_peak(path, session_id, cache_bytes(), "journal");
    let small_cache = child_peak(path, session_id, 64 << 20, "journal");
    let raw_fold = child_peak(&raw_path, session_id, 64 << 20, "raw");
    let live_dir = tempdir();
    let live = child_peak(
        &live_dir.path().join("db"),
        session_id,
        cache_bytes(),
        &format!("live:{n}"),
    );
    let ratio = ours as f64 / frames as f64;
    rep.row(Row {
        id: "4m",
        what: format!(
            "peak memory of a process that opens and folds row 4's session ({} events, default config)",
            thousands(n)
        ),
        ours: fmt_bytes(ours),
        baseline: format!("the session's frame bytes: {}", fmt_bytes(frames)),
        ratio: fmt_ratio(ratio),
        target: "<= 2x".into(),
        verdict: Verdict::at_most(ratio, 2.0),
    });
    rep.note(format!(
        "row 4m: with sled's cache at 64 MiB the process peaks at {} ({}); raw scan + decode + \
         fold into a `SessionState` (64 MiB cache, no journal) at {} ({}); a process that \
         appends the same events live (`OnDemand`, batches of 1,000, the session held open) \
         at {} ({})",
        fmt_bytes(small_cache),
        fmt_ratio(small_cache as f64 / frames as f64),
        fmt_bytes(raw_fold),
        fmt_ratio(raw_fold as f64 / frames as f64),
        fmt_bytes(live),
        fmt_ratio(live as f64 / frames as f64),
    ));
}

// ---------------------------------------------------------------------------
// 6r, 6t, 6m. A session as the default strategy leaves it

/// A pseudo-random number in `0..n` from `state` (xorshift), advancing it.
fn draw(state: &mut u64, n: u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state % n.max(1)
}

/// Rows 6r, 6t and 6m: a session of a random length between half and all
/// of `s.big` events, appended in batches of 100 with the default
/// configuration (its `Incremental` snapshots where they fall), then
/// opened (events replayed at most 10,000), read at random seqs with
/// `state_at` (the same bound), and opened in a process of its own (peak
/// memory at most twice its frames).
pub fn section_realistic_open(s: &Sizes, rep: &mut Report) {
    let mut seed = std::env::var("AJ_BENCH_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
                | 1
        });
    let start_seed = seed;
    let n = s.big / 2 + draw(&mut seed, s.big / 2 + 1);
    eprintln!(
        "[6r] a {}-event session as the default strategy leaves it (seed {start_seed}; AJ_BENCH_SEED)",
        thousands(n)
    );
    let dir = tempdir();
    let path = dir.path().join("db");
    let id = {
        let journal = Journal::open_with(&path, buffered()).expect("open");
        let session = journal.create_session().expect("session");
        let mut run = AgentRun::new(500);
        loop {
            let head = session.head();
            if head >= n {
                break;
            }
            session
                .append_batch(run.take_vec((n - head).min(100)))
                .expect("append batch");
        }
        journal.flush().expect("flush");
        session.id()
    };
    let mut best = Duration::MAX;
    let mut stats = agent_journal::LoadStats::default();
    for _ in 0..s.rounds {
        let t = Instant::now();
        let journal = Journal::open_with(&path, buffered()).expect("open");
        let session = journal.session(id).expect("session");
        let d = t.elapsed();
        if d < best {
            best = d;
            stats = session.load_stats();
        }
    }
    let raw_path = path.with_file_name("raw");
    raw::journal_frames(&path, id, cache_bytes(), Some(&raw_path));
    let fold = raw::sled_scan_decode(&raw_path, cache_bytes(), id, true);
    let fold_time = fold.open + fold.scan;
    let speedup = fold_time.as_secs_f64() / best.as_secs_f64();
    rep.row(Row {
        id: "6r",
        what: format!(
            "open a {}-event session as the default strategy leaves it (Incremental every 8,192, \
             appended in batches of 100; length drawn in {}..{})",
            thousands(n),
            thousands(s.big / 2),
            thousands(s.big)
        ),
        ours: format!(
            "{} (`events_replayed` = {}, from seq {} through {} deltas)",
            fmt_dur(best),
            thousands(stats.events_replayed),
            stats.snapshot_seq.map_or("none".into(), thousands),
            stats.snapshot_deltas
        ),
        baseline: format!(
            "raw scan + crc + decode + fold of every event, no journal: {}",
            fmt_dur(fold_time)
        ),
        ratio: format!("{} faster", fmt_ratio(speedup)),
        target: "replayed <= 10,000".into(),
        verdict: if stats.events_replayed <= 10_000 {
            Verdict::Pass
        } else {
            Verdict::Fail
        },
    });
    // 6t: state_at at random seqs.
    let journal = Journal::open_with(&path, buffered()).expect("open");
    let session = journal.session(id).expect("session");
    let (mut worst, mut total, calls) = (0u64, Duration::ZERO, 20u32);
    for _ in 0..calls {
        let k = draw(&mut seed, n - 1);
        let t = Instant::now();
        let (state, read) = session.state_at_with_stats(k).expect("state_at");
        total += t.elapsed();
        assert_eq!(state.last_seq(), Some(k));
        worst = worst.max(read.events_replayed);
    }
    drop((session, journal));
    let mean = total / calls;
    rep.row(Row {
        id: "6t",
        what: format!(
            "`state_at(k)` of that session at {calls} random k (the latest snapshot at or before k, its chain read, the rest replayed)"
        ),
        ours: format!(
            "mean {} a call, at most {} events replayed",
            fmt_dur(mean),
            thousands(worst)
        ),
        baseline: format!("row 6r's open: {}", fmt_dur(best)),
        ratio: fmt_ratio(mean.as_secs_f64() / best.as_secs_f64()),
        target: "replayed <= 10,000".into(),
        verdict: if worst <= 10_000 {
            Verdict::Pass
        } else {
            Verdict::Fail
        },
    });
    // 6m: the memory of that open, in a process of its own.
    let frames = raw::journal_frames(&path, id, cache_bytes(), None).1;
    let peak = child_peak(&path, id, cache_bytes(), "default");
    let small = child_peak(&path, id, 64 << 20, "default");
    let ratio = peak as f64 / frames as f64;
    rep.row(Row {
        id: "6m",
        what: "peak memory of a process that opens that session (default config)".into(),
        ours: fmt_bytes(peak),
        baseline: format!("the session's frame bytes: {}", fmt_bytes(frames)),
        ratio: fmt_ratio(ratio),
        target: "<= 2x".into(),
        verdict: Verdict::at_most(ratio, 2.0),
    });
    rep.note(format!(
        "row 6m: with sled's cache at 64 MiB the process peaks at {} ({})",
        fmt_bytes(small),
        fmt_ratio(small as f64 / frames as f64)
    ));
}
