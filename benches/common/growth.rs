//! Rows 5 and 7: what a growing session costs: append time at 1k vs 1M events,
//! bytes on disk, snapshot bytes.

use std::path::Path;
use std::time::{Duration, Instant};

use agent_journal::format::FRAME_HEADER_LEN;
use agent_journal::{
    CheckpointStrategy, Envelope, EvaluationId, Event, Journal, JournalConfig, Session, SessionId,
};
use tempfile::TempDir;

use super::events::{AgentRun, frame_of, message_200};
use super::raw;
use super::report::{Report, Row, Verdict, fmt_bytes, fmt_dur, fmt_ratio, thousands};
use super::timing::Window;
use super::{at_seq, buffered, cache_bytes, tempdir};
use crate::Sizes;

// 5. Append cost at the 1,000th and at the 1,000,000th event

/// A session appended to event by event, each append timed, knowing which
/// appends wrote a snapshot.
struct Appender {
    session: Session,
    /// The journal and its directory, kept alive with the session.
    _journal: (Journal, TempDir),
    run: AgentRun,
    strategy: CheckpointStrategy,
    last_snapshot: Option<u64>,
    probe: Envelope,
    /// Time spent in `append`, summed.
    appended: Duration,
    snapshots: Vec<(u64, Duration)>,
}

impl Appender {
    fn new(config: JournalConfig) -> Appender {
        let dir = tempdir();
        let strategy = config.checkpoint;
        let journal = Journal::open_with(dir.path().join("db"), config).expect("open");
        let session = journal.create_session().expect("session");
        // The strategy is pure for Geometric: replaying it tells which append
        // wrote a snapshot (it is asked after the last event of every append,
        // seq 0 included).
        let probe = at_seq(0);
        let last_snapshot = strategy.should_checkpoint(None, None, &probe).then_some(0);
        Appender {
            session,
            _journal: (journal, dir),
            run: AgentRun::new(500),
            strategy,
            last_snapshot,
            probe,
            appended: Duration::ZERO,
            snapshots: Vec::new(),
        }
    }

    /// The seq the next append gets.
    fn head(&self) -> u64 {
        self.probe.seq + 1
    }

    /// Reads the last event back, which waits for the journal's sled insert
    /// thread to insert every queued append; returns the time taken.
    fn drain(&mut self) -> Duration {
        let t = Instant::now();
        super::wait_readable(&self.session);
        let d = t.elapsed();
        self.appended += d;
        d
    }

    /// Appends the next event: its seq, the time `append` took, and whether
    /// it wrote a snapshot.
    fn append(&mut self) -> (u64, Duration, bool) {
        let event = self.run.next_event();
        let t = Instant::now();
        let seq = self.session.append(event).expect("append");
        let d = t.elapsed();
        self.appended += d;
        self.probe.seq = seq;
        let snap = self
            .strategy
            .should_checkpoint(self.last_snapshot, None, &self.probe);
        if snap {
            self.last_snapshot = Some(seq);
            self.snapshots.push((seq, d));
        }
        (seq, d, snap)
    }
}

pub fn section_append_cost(s: &Sizes, rep: &mut Report) {
    let (early, late, width, reps) = (s.early, s.big, s.window, s.rounds as u64);
    let chunk = 1_000;
    eprintln!(
        "[5] appending {} events one by one (Buffered, default snapshots)",
        thousands(late + reps * width)
    );
    let mut big = Appender::new(buffered());
    // The early window of the big session itself, measured when it was small.
    let mut own_early = Window::new(early, width);
    while big.head() < late {
        let (seq, d, snap) = big.append();
        own_early.add(seq, d, snap);
        if seq % 100_000 == 0 {
            eprintln!("    {} appended", thousands(seq));
        }
    }
    // `reps` pairs of windows, each measured taking turns in chunks of 1,000:
    // the next `width` appends of the big session, and appends `early..early +
    // width` of a fresh session of a fresh journal, so that both see the same
    // load from the rest of the machine. The best pair member of each side is kept.
    let mut pairs: Vec<(Window, Window)> = Vec::new();
    for r in 0..reps {
        let mut small = Appender::new(buffered());
        while small.head() < early {
            small.append();
        }
        let mut w1 = Window::new(early, width);
        let mut w2 = Window::new(late + r * width, width);
        for c in 0..width.div_ceil(chunk) {
            for k in 0..2 {
                for _ in 0..chunk.min(width - c * chunk) {
                    if (c + k) % 2 == 0 {
                        let (seq, d, snap) = big.append();
                        w2.add(seq, d, snap);
                    } else {
                        let (seq, d, snap) = small.append();
                        w1.add(seq, d, snap);
                    }
                }
                // Until the chunk is in sled (the journal's insert thread),
                // so that the means count each append's whole cost.
                if (c + k) % 2 == 0 {
                    w2.add_drain(big.drain());
                } else {
                    w1.add_drain(small.drain());
                }
            }
        }
        pairs.push((w1, w2));
    }
    assert_eq!(big.head(), late + reps * width);
    assert_eq!(big.session.checkpoint_error(), None);
    let best = |f: &dyn Fn(&(Window, Window)) -> &Window| -> &Window {
        pairs
            .iter()
            .map(f)
            .min_by_key(|w| w.mean())
            .expect("a window")
    };
    let w1 = best(&|p| &p.0);
    let w2 = best(&|p| &p.1);
    let appends = big.head() - 1;
    let amortized = big.appended / appends as u32;
    let snap_total: Duration = big.snapshots.iter().map(|(_, d)| *d).sum();
    let ratio_incl = w2.mean().as_secs_f64() / w1.mean().as_secs_f64();
    let ratio_excl =
        w2.mean_without_snapshots().as_secs_f64() / w1.mean_without_snapshots().as_secs_f64();
    let ratio_median = w2.quantile(0.5).as_secs_f64() / w1.quantile(0.5).as_secs_f64();
    // Judged on the less favourable of the two ratios of means.
    let worse = ratio_incl.max(ratio_excl);
    rep.row(Row {
        id: "5",
        what: format!(
            "mean `Buffered` append over {} appends at seq {} vs at seq {} (realistic mix, default snapshots, Incremental every 8,192; best of {} window pairs, each pair timed taking turns in chunks of {}); amortized over all {} appends incl. snapshots: {}",
            thousands(width),
            thousands(w2.from),
            thousands(early),
            reps,
            thousands(chunk),
            thousands(appends),
            fmt_dur(amortized)
        ),
        ours: format!(
            "at {}: {} ({} w/o snapshot appends; median {})",
            thousands(w2.from),
            fmt_dur(w2.mean()),
            fmt_dur(w2.mean_without_snapshots()),
            fmt_dur(w2.quantile(0.5))
        ),
        baseline: format!(
            "at {}: {} ({} w/o the {} snapshot appends in the window; median {})",
            thousands(early),
            fmt_dur(w1.mean()),
            fmt_dur(w1.mean_without_snapshots()),
            w1.snapshots.len(),
            fmt_dur(w1.quantile(0.5))
        ),
        ratio: format!(
            "{} ({} w/o snapshots; medians {})",
            fmt_ratio(ratio_incl),
            fmt_ratio(ratio_excl),
            fmt_ratio(ratio_median)
        ),
        target: "<= 1.25x (worse of the two means)".into(),
        verdict: Verdict::at_most(worse, 1.25),
    });
    for (i, (a, b)) in pairs.iter().enumerate() {
        rep.note(format!(
            "row 5, pair {}: early window (fresh session) {}",
            i + 1,
            a.describe()
        ));
        rep.note(format!(
            "row 5, pair {}: late window {}",
            i + 1,
            b.describe()
        ));
    }
    rep.note(format!(
        "row 5, early window of the big session itself (measured when it was small, not \
         interleaved): {}",
        own_early.describe()
    ));
    rep.note(format!(
        "row 5: {} snapshots (the default strategy) over {} appends took {} of the {} spent appending ({:.0}%); \
         largest: {}",
        big.snapshots.len(),
        thousands(appends),
        fmt_dur(snap_total),
        fmt_dur(big.appended),
        100.0 * snap_total.as_secs_f64() / big.appended.as_secs_f64(),
        big.snapshots
            .iter()
            .rev()
            .take(3)
            .map(|(s, d)| format!("seq {} in {}", thousands(*s), fmt_dur(*d)))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    let (w1_mean, w1_median) = (w1.mean_without_snapshots(), w1.quantile(0.5));
    let (w2_mean, w2_median) = (w2.mean_without_snapshots(), w2.quantile(0.5));
    let t = Instant::now();
    drop(pairs);
    drop(big);
    eprintln!("    dropped in {}", fmt_dur(t.elapsed()));
    // The same windows for raw sled inserts of one message frame: how much
    // of the growth is sled's.
    let frame = frame_of(
        SessionId::new(),
        late,
        Event::Message(message_200(EvaluationId::new())),
    );
    let (r1, r2) = raw::sled_paired_windows(cache_bytes(), &frame, early, late, width, chunk);
    rep.note(format!(
        "row 5: raw sled inserts of a {}-byte frame, one pair of the same windows, same turns: \
         mean {} at {} vs {} at {} ({}), medians {} vs {}; ours minus raw (means w/o snapshots): \
         {} at {} vs {} at {}; (medians): {} vs {}",
        frame.len(),
        fmt_dur(r2.mean()),
        thousands(late),
        fmt_dur(r1.mean()),
        thousands(early),
        fmt_ratio(r2.mean().as_secs_f64() / r1.mean().as_secs_f64()),
        fmt_dur(r2.quantile(0.5)),
        fmt_dur(r1.quantile(0.5)),
        fmt_dur(w2_mean.saturating_sub(r2.mean())),
        thousands(late),
        fmt_dur(w1_mean.saturating_sub(r1.mean())),
        thousands(early),
        fmt_dur(w2_median.saturating_sub(r2.quantile(0.5))),
        fmt_dur(w1_median.saturating_sub(r1.quantile(0.5))),
    ));
}

// ---------------------------------------------------------------------------
// 7. Bytes on disk

/// Rows 7a and 7b (7z with `compress`: the same session in a database whose
/// pages are compressed).
pub fn section_disk(s: &Sizes, rep: &mut Report, compress: bool) {
    let n = s.disk;
    eprintln!(
        "[7] bytes on disk of a {}-event session (Buffered, default snapshots{})",
        thousands(n),
        if compress { ", pages compressed" } else { "" }
    );
    let dir = tempdir();
    let path: &Path = &dir.path().join("db");
    let config = JournalConfig {
        compress,
        ..buffered()
    };
    let strategy = config.checkpoint;
    // A chain keeps every snapshot it wrote: what is stored was written.
    let incremental = matches!(strategy, CheckpointStrategy::Incremental { .. });
    let (session_id, size, written, written_count, final_state) = {
        let journal = Journal::open_with(path, config).expect("open");
        let session = journal.create_session().expect("session");
        let mut run = AgentRun::new(500);
        let mut last = strategy
            .should_checkpoint(None, None, &at_seq(0))
            .then_some(0);
        let mut written = 0u64;
        let mut count = 0u64;
        for seq in 1..n {
            session.append(run.next_event()).expect("append");
            if strategy.should_checkpoint(last, None, &at_seq(seq)) {
                last = Some(seq);
                count += 1;
                if !incremental {
                    // The size of the whole snapshot the library just
                    // wrote (and the next replaces): its body re-encoded
                    // now, plus the frame header.
                    let body = session.state().encode_snapshot(u64::MAX).expect("encode");
                    written += (body.len() + FRAME_HEADER_LEN) as u64;
                }
            }
        }
        journal.flush().expect("flush");
        let size = journal.size_on_disk().expect("size");
        let final_state = session
            .state()
            .encode_snapshot(u64::MAX)
            .expect("encode")
            .len() as u64;
        (session.id(), size, written, count, final_state)
    };
    let (events, event_bytes) = raw::journal_frames(path, session_id, cache_bytes(), None);
    let db = raw::open_sled(path, cache_bytes());
    let (snaps, snap_bytes, snap_stored) = raw::snapshot_bytes(&db);
    let latest = raw::latest_snapshot(path, &db, session_id).map(|(seq, _)| seq);
    assert_eq!(events, n);
    let written = if incremental {
        assert_eq!(snaps, written_count, "a chain keeps every snapshot");
        snap_bytes
    } else {
        written
    };
    drop(db);
    let per_event = size as f64 / n as f64;
    let frame_per_event = event_bytes as f64 / events as f64;
    let amplification = per_event / frame_per_event;
    rep.row(Row {
        id: if compress { "7z" } else { "7a" },
        what: format!(
            "bytes on disk per event, {}-event session after `flush` (`size_on_disk` / events; includes the snapshot){}",
            thousands(n),
            if compress {
                ", pages compressed (`JournalConfig::compress`)"
            } else {
                ""
            }
        ),
        ours: format!("{per_event:.0} B/event ({} in all)", fmt_bytes(size)),
        baseline: format!(
            "frame bytes (the events encoded, one frame each): {frame_per_event:.0} B/event"
        ),
        ratio: format!("{} space amplification", fmt_ratio(amplification)),
        target: "<= 1.2x".into(),
        verdict: Verdict::at_most(amplification, 1.2),
    });
    if compress {
        return;
    }
    let life_ratio = written as f64 / final_state as f64;
    let stored_ratio = snap_bytes as f64 / event_bytes as f64;
    rep.row(Row {
        id: "7b",
        what: format!(
            "snapshot bytes vs journal bytes, same session ({strategy:?}): stored (raw: {} snapshot(s) in tree `snapshots` and its files, latest at seq {}) and written over its life ({} snapshots)",
            snaps,
            latest.map_or("none".into(), thousands),
            written_count
        ),
        ours: format!(
            "stored {} = {} of the journal (on disk, compressed: {}); written {} = {} of the journal",
            fmt_bytes(snap_bytes),
            fmt_ratio(snap_bytes as f64 / event_bytes as f64),
            fmt_bytes(snap_stored),
            fmt_bytes(written),
            fmt_ratio(written as f64 / event_bytes as f64)
        ),
        baseline: format!(
            "journal frames {}; final state encoded {}",
            fmt_bytes(event_bytes),
            fmt_bytes(final_state)
        ),
        ratio: format!(
            "{} written / final state; {} stored / journal",
            fmt_ratio(life_ratio),
            fmt_ratio(stored_ratio)
        ),
        target: "written <= 2x final state, stored <= 1x journal".into(),
        verdict: if life_ratio <= 2.0 && stored_ratio <= 1.0 {
            Verdict::Pass
        } else {
            Verdict::Fail
        },
    });
}
