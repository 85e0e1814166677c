//! The parent half of the kill tests: runs a child against a database,
//! kills it at a random moment, reopens the database and checks it
//! ([`verify`]), round after round ([`run_kill_rounds`]).

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use agent_journal::state::SessionState;
use agent_journal::{Durability, Journal, JournalConfig, SessionId};

use super::content::expected_event;
use super::{CHILD_THREADS, env_u64};
use crate::common::Rng;

/// What a run of kill rounds saw.
#[derive(Default, Debug)]
pub struct Totals {
    /// Rounds run.
    pub rounds: u64,
    /// Events the children acknowledged (`append` returned Ok).
    pub acknowledged: u64,
    /// Acknowledged events missing after the kill.
    pub lost: u64,
    /// Streams with a hole, or frames past the readable head.
    pub gaps: u64,
    /// Databases that could not be opened after a kill.
    pub unopenable: u64,
    /// Events present but not the ones written, states that differ from the
    /// fold of their events, torn tails, errors reading.
    pub damaged: u64,
    /// Kills before the child was ready (during sled's open or recovery).
    pub kills_during_open: u64,
    /// Rounds on a database whose pages are compressed.
    pub compressed_rounds: u64,
    /// Rounds whose child appended with `Flushed`.
    pub flushed_rounds: u64,
    /// Fresh databases started.
    pub databases: u64,
    /// The most files seen in sled's `blobs/` after a round.
    pub max_blob_files: u64,
    /// Rounds after which the reopened database held snapshot files (the
    /// sled store keeps snapshots over 64 KiB in `snapshots/`).
    pub rounds_with_snapshot_files: u64,
    /// What went wrong, the first 50 of it, for the failure message.
    pub problems: Vec<String>,
}

impl Totals {
    /// Notes a problem of `round` for the failure message.
    fn problem(&mut self, round: u64, what: String) {
        if self.problems.len() < 50 {
            self.problems.push(format!("round {round}: {what}"));
        }
    }
}

/// An `ACK` line of the child: it acknowledged seqs `first..=last` of `id`.
struct Ack {
    id: SessionId,
    first: u64,
    last: u64,
}

/// Runs one child against `db`, kills it at a random moment, returns its
/// acknowledgements and whether it was killed before it was ready.
fn run_child(db: &Path, rng: &mut Rng, durability: Durability, compress: bool) -> (Vec<Ack>, bool) {
    let exe = std::env::current_exe().expect("current_exe");
    let mut child = Command::new(exe)
        .args([
            "kill::child",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("AJ_KILL_CHILD_DB", db)
        .env("AJ_KILL_CHILD_SEED", rng.next_u64().to_string())
        .env("AJ_KILL_CHILD_THREADS", CHILD_THREADS.to_string())
        .env("AJ_KILL_CHILD_COMPRESS", if compress { "1" } else { "0" })
        .env(
            "AJ_KILL_CHILD_DURABILITY",
            match durability {
                Durability::Buffered => "buffered",
                Durability::Flushed => "flushed",
                Durability::Synced => "synced",
            },
        )
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the child");
    let stdout = child.stdout.take().expect("stdout");
    let mut stderr = child.stderr.take().expect("stderr");
    let (ready_tx, ready_rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut acks = Vec::new();
        let mut other = Vec::new();
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if line == "READY" {
                let _ = ready_tx.send(());
                continue;
            }
            let mut parts = line.split(' ');
            if parts.next() != Some("ACK") {
                other.push(line);
                continue;
            }
            // A line cut by the kill does not parse and was not complete:
            // ignoring it is right, the ACK was never fully written.
            let (Some(id), Some(first), Some(last), None) =
                (parts.next(), parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            if let (Ok(id), Ok(first), Ok(last)) = (id.parse(), first.parse(), last.parse()) {
                acks.push(Ack { id, first, last });
            }
        }
        (acks, other)
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let early = rng.below(8) == 0;
    if early {
        // Kill while sled opens and recovers, or while sessions are created.
        std::thread::sleep(Duration::from_millis(rng.below(60) as u64));
    } else {
        if ready_rx.recv_timeout(Duration::from_secs(120)).is_err() {
            let _ = child.kill();
            let _ = child.wait();
            let status = child.wait();
            let err = err_reader.join().unwrap_or_default();
            let out = reader.join().map(|r| r.1).unwrap_or_default();
            panic!(
                "the child never became ready ({status:?}); its stdout:\n{}\nits stderr:\n{err}",
                out.join("\n")
            );
        }
        std::thread::sleep(Duration::from_millis(rng.between(20, 400) as u64));
    }
    let was_ready = ready_rx.try_recv().is_ok();
    child.kill().expect("SIGKILL the child");
    let status = child.wait().expect("wait for the child");
    let (acks, _) = reader.join().expect("stdout reader");
    let err = err_reader.join().expect("stderr reader");
    assert_eq!(
        status.signal(),
        Some(9),
        "the child must die by SIGKILL, not on its own ({status}); its stderr:\n{err}"
    );
    (acks, early && !was_ready)
}

/// Reopens `db` after a kill and checks everything, appends one event to
/// each session and records it in `acked` (the next round checks it is
/// there; with `reopen`, this round reopens once more and checks it now).
/// Returns false if the database cannot be used again.
fn verify(
    db: &Path,
    round: u64,
    reopen: bool,
    acked: &mut HashMap<SessionId, u64>,
    t: &mut Totals,
) -> bool {
    if !db.exists() && acked.is_empty() {
        return true; // killed before sled created anything
    }
    let config = || JournalConfig {
        create_if_missing: false,
        ..JournalConfig::default()
    };
    let journal = match Journal::open_with(db, config()) {
        Ok(j) => j,
        Err(e) => {
            t.unopenable += 1;
            t.lost += acked.values().map(|l| l + 1).sum::<u64>();
            t.problem(round, format!("cannot open {}: {e}", db.display()));
            return false;
        }
    };
    let ids = match journal.sessions() {
        Ok(ids) => ids,
        Err(e) => {
            t.unopenable += 1;
            t.problem(round, format!("cannot list sessions: {e}"));
            return false;
        }
    };
    for (id, last) in acked.iter() {
        if !ids.contains(id) {
            t.lost += last + 1;
            t.problem(round, format!("acknowledged session {id} is gone"));
        }
    }
    let mut heads = Vec::new();
    for id in ids {
        let s = match journal.session(id) {
            Ok(s) => s,
            Err(e) => {
                t.damaged += 1;
                t.problem(round, format!("session {id} does not open: {e}"));
                continue;
            }
        };
        let head = s.head();
        if let Some(tail) = s.torn_tail() {
            t.damaged += 1;
            t.problem(round, format!("session {id} has a torn tail: {tail}"));
        }
        match journal.stream_len(id) {
            Ok(Some(len)) if len == head => {}
            other => {
                t.gaps += 1;
                t.problem(
                    round,
                    format!("session {id}: head {head} but stored length {other:?}"),
                );
            }
        }
        if let Some(&last) = acked.get(&id)
            && head <= last
        {
            t.lost += last + 1 - head;
            t.problem(
                round,
                format!("session {id}: acknowledged through seq {last}, recovered head {head}"),
            );
        }
        let events = match s.events(..) {
            Ok(events) => events,
            Err(e) => {
                t.gaps += 1;
                t.problem(round, format!("session {id}: events(..) fails: {e}"));
                continue;
            }
        };
        let mut fold = SessionState::with_slices(&JournalConfig::default().slices);
        let mut ok = events.len() as u64 == head;
        for (i, env) in events.iter().enumerate() {
            let seq = i as u64;
            if env.seq != seq || env.session != id {
                t.gaps += 1;
                t.problem(
                    round,
                    format!(
                        "session {id}: position {seq} holds {}#{}",
                        env.session, env.seq
                    ),
                );
                ok = false;
                break;
            }
            if env.event != expected_event(id, seq) {
                t.damaged += 1;
                t.problem(
                    round,
                    format!("session {id}: event {seq} is not the one written"),
                );
                ok = false;
            }
            fold.apply(env);
        }
        if ok && fold != *s.state() {
            t.damaged += 1;
            t.problem(
                round,
                format!("session {id}: state differs from the fold of its {head} events"),
            );
        }
        // The stream takes appends again, right after the recovered head.
        match s.append_expected(head, expected_event(id, head)) {
            Ok(seq) if seq == head => {
                acked.insert(id, head);
                heads.push((id, head + 1));
            }
            other => {
                t.damaged += 1;
                t.problem(
                    round,
                    format!("session {id}: append after recovery: {other:?}"),
                );
            }
        }
    }
    if let Ok(entries) = std::fs::read_dir(db.join("blobs")) {
        t.max_blob_files = t.max_blob_files.max(entries.count() as u64);
    }
    // Opening removed what a kill left mid-snapshot: no temporary file.
    if let Ok(entries) = std::fs::read_dir(db.join("snapshots")) {
        let names: Vec<String> = entries
            .flatten()
            .filter_map(|e| e.file_name().into_string().ok())
            .collect();
        if names.iter().any(|n| n.ends_with(".frame")) {
            t.rounds_with_snapshot_files += 1;
        }
        if let Some(tmp) = names.iter().find(|n| n.ends_with(".tmp")) {
            t.damaged += 1;
            t.problem(
                round,
                format!("a temporary snapshot file survived the open: {tmp}"),
            );
        }
    }
    drop(journal);
    if !reopen {
        return true;
    }
    // What the parent appended is there after one more reopen.
    match Journal::open_with(db, config()) {
        Ok(journal) => {
            for (id, head) in heads {
                let got = journal.session(id).and_then(|s| {
                    let h = s.head();
                    s.events(head - 1..head).map(|e| (h, e))
                });
                match got {
                    Ok((h, e))
                        if h == head && e.len() == 1 && e[0].event == expected_event(id, h - 1) => {
                    }
                    other => {
                        t.lost += 1;
                        t.problem(
                            round,
                            format!("session {id}: the event appended after recovery: {other:?}"),
                        );
                    }
                }
            }
            true
        }
        Err(e) => {
            t.unopenable += 1;
            t.problem(round, format!("cannot reopen after appending: {e}"));
            false
        }
    }
}

/// Runs `rounds` kill rounds, a fresh database every `fresh_every` rounds;
/// the child of round `r` appends with `durability(r)`.
pub fn run_kill_rounds(
    name: &str,
    rounds: u64,
    seed: u64,
    fresh_every: u64,
    durability: impl Fn(u64) -> Durability,
) -> Totals {
    let fresh_every = env_u64("AJ_KILL_FRESH_EVERY", fresh_every).max(1);
    let started = Instant::now();
    let mut rng = Rng::new(seed);
    let mut t = Totals::default();
    let mut dir: Option<tempfile::TempDir> = None;
    let mut db = PathBuf::new();
    let mut acked: HashMap<SessionId, u64> = HashMap::new();
    let mut since_fresh = 0;
    for round in 0..rounds {
        if dir.is_none() || since_fresh == fresh_every {
            let d = tempfile::tempdir().expect("tempdir");
            db = d.path().join("db");
            dir = Some(d);
            acked.clear();
            since_fresh = 0;
            t.databases += 1;
        }
        // Every other new database compresses its pages.
        let compress = t.databases % 2 == 0;
        t.compressed_rounds += u64::from(compress);
        since_fresh += 1;
        let d = durability(round);
        if d == Durability::Flushed {
            t.flushed_rounds += 1;
        }
        let t0 = Instant::now();
        let (acks, during_open) = run_child(&db, &mut rng, d, compress);
        let t1 = Instant::now();
        if during_open {
            t.kills_during_open += 1;
        }
        for a in &acks {
            t.acknowledged += a.last - a.first + 1;
            let e = acked.entry(a.id).or_insert(a.last);
            *e = (*e).max(a.last);
        }
        t.rounds += 1;
        let last_of_db = since_fresh == fresh_every || round + 1 == rounds;
        let ok = verify(&db, round, last_of_db, &mut acked, &mut t);
        if std::env::var("AJ_KILL_TIMING").is_ok() {
            eprintln!(
                "round {round}: child {:?}, verify {:?}",
                t1 - t0,
                t1.elapsed()
            );
        }
        if !ok {
            dir = None; // start over on a fresh database
        }
    }
    eprintln!(
        "kill rounds: {}, acknowledged events: {}, lost: {}, gaps: {}, unopenable: {}",
        t.rounds, t.acknowledged, t.lost, t.gaps, t.unopenable
    );
    eprintln!(
        "  ({name}: seed {seed}, damaged: {}, kills during open: {}, Flushed rounds: {}, \
         rounds on compressed databases: {}, \
         databases: {} (fresh every {fresh_every} rounds), most blob files: {}, \
         rounds with snapshot files: {}, {:.1} s)",
        t.damaged,
        t.kills_during_open,
        t.flushed_rounds,
        t.compressed_rounds,
        t.databases,
        t.max_blob_files,
        t.rounds_with_snapshot_files,
        started.elapsed().as_secs_f64()
    );
    t
}

pub fn assert_clean(t: &Totals) {
    assert!(
        t.lost == 0 && t.gaps == 0 && t.unopenable == 0 && t.damaged == 0,
        "lost {}, gaps {}, unopenable {}, damaged {}:\n{}",
        t.lost,
        t.gaps,
        t.unopenable,
        t.damaged,
        t.problems.join("\n")
    );
    assert!(t.acknowledged > 0, "the children acknowledged nothing");
}
