//! The child of the power-loss tests: runs with the shim preloaded, appends
//! `Synced` events from several threads, and writes a line to its mark file
//! for each acknowledged append (`ACK <session> <first> <last>`), so that
//! the operation log places the acknowledgement right after the I/O that
//! made it durable. Then it closes the journal and exits, unless the parent
//! kills it first.

use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use agent_journal::{CheckpointStrategy, Error, Event, Journal, JournalConfig, SessionId};

use super::content::expected_event;
use super::env_u64;
use crate::common::Rng;

/// Own sessions (one per thread) and sessions shared by every thread.
const THREADS: usize = 3;
const SHARED: usize = 2;

/// The mark file: one `write` per line, so that each line is one record.
struct Marks(Mutex<File>);

impl Marks {
    fn line(&self, line: &str) {
        let mut f = self.0.lock().unwrap_or_else(|p| p.into_inner());
        f.write_all(format!("{line}\n").as_bytes())
            .expect("child: write a mark");
    }

    fn ack(&self, id: SessionId, first: u64, last: u64) {
        self.line(&format!("ACK {id} {first} {last}"));
    }
}

/// How many files the directory `dir` holds whose names pass `name`.
fn files(dir: &Path, name: impl Fn(&str) -> bool) -> usize {
    std::fs::read_dir(dir).map_or(0, |entries| {
        entries
            .flatten()
            .filter(|e| e.file_name().to_str().is_some_and(&name))
            .count()
    })
}

/// A line to the parent on stdout, flushed at once.
fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}").expect("child: write");
    out.flush().expect("child: flush");
}

/// Runs the child against the database at `db`, its marks going to `mark`.
pub fn run(db: &str, mark: &str) {
    let seed = env_u64("AJ_PL_CHILD_SEED", 1);
    let run_for = Duration::from_millis(env_u64("AJ_PL_CHILD_MS", 500));
    // Stop early once the database holds a file of this kind.
    let until = std::env::var("AJ_PL_CHILD_UNTIL").unwrap_or_default();
    let config = JournalConfig {
        // The default, said out loud: this is what is under test.
        durability: agent_journal::Durability::Synced,
        // Snapshots often (a whole one, then deltas on it): cuts land
        // while they are written and replaced.
        checkpoint: CheckpointStrategy::Incremental {
            every: env_u64("AJ_PL_CHILD_SNAPSHOT_EVERY", 100),
        },
        compress: env_u64("AJ_PL_CHILD_COMPRESS", 0) == 1,
        // Every other run seals blocks of 2 KiB: cuts land in seals.
        block_bytes: if seed % 2 == 0 {
            2 << 10
        } else {
            agent_journal::JournalConfig::DEFAULT_BLOCK_BYTES
        },
        // The read service's socket holds no data (and is made in a folder
        // of its own, renamed into place: not what the model is about).
        serve_readers: false,
        ..JournalConfig::default()
    };
    let marks = Marks(Mutex::new(File::create(mark).expect("child: mark file")));
    // libtest has printed "test powerloss::child ... " without a newline.
    say("");
    let journal = Journal::open_with(db, config).expect("child: open");
    let mut sessions = Vec::new();
    for id in journal.sessions().expect("child: sessions") {
        sessions.push(journal.session(id).expect("child: session"));
    }
    while sessions.len() < THREADS + SHARED {
        let s = journal
            .create_session_with_labels(vec![("test".into(), "kill".into())])
            .expect("child: create");
        marks.ack(s.id(), 0, 0);
        sessions.push(s);
    }
    marks.line("READY");
    say("READY");
    let deadline = Instant::now() + run_for;
    let stop = AtomicBool::new(false);
    let reached = || match until.as_str() {
        // Half a MiB of large frames in segment files.
        "frames" => {
            std::fs::read_dir(Path::new(db).join("frames")).map_or(0, |entries| {
                entries
                    .flatten()
                    .filter_map(|e| e.metadata().ok())
                    .map(|m| m.len())
                    .sum::<u64>()
            }) >= 512 << 10
        }
        "snapshot" => files(&Path::new(db).join("snapshots"), |n| n.ends_with(".frame")) >= 1,
        _ => false,
    };
    std::thread::scope(|scope| {
        for t in 0..THREADS {
            let own = sessions[t].clone();
            let shared = sessions[sessions.len() - SHARED..].to_vec();
            let marks = &marks;
            let (stop, reached) = (&stop, &reached);
            scope.spawn(move || {
                let mut rng = Rng::new(seed ^ ((t as u64 + 1) << 32));
                while Instant::now() < deadline && !stop.load(Ordering::Relaxed) {
                    if t == 0 && reached() {
                        stop.store(true, Ordering::Relaxed);
                    }
                    let n = if rng.below(2) == 0 {
                        1
                    } else {
                        rng.between(1, 4) as u64
                    };
                    if rng.below(3) != 0 {
                        let id = own.id();
                        let h = own.head();
                        let events: Vec<Event> =
                            (h..h + n).map(|seq| expected_event(id, seq)).collect();
                        let (first, last) = own.append_batch(events).expect("child: append");
                        assert_eq!((first, last), (h, h + n - 1), "child: seqs of {id}");
                        marks.ack(id, first, last);
                    } else {
                        let s = &shared[rng.below(shared.len())];
                        let id = s.id();
                        loop {
                            let h = s.head();
                            let events: Vec<Event> =
                                (h..h + n).map(|seq| expected_event(id, seq)).collect();
                            match s.append_batch_at(h, events) {
                                Ok((first, last)) => {
                                    marks.ack(id, first, last);
                                    break;
                                }
                                Err(Error::Conflict { .. }) => continue,
                                Err(e) => panic!("child: append to shared {id}: {e}"),
                            }
                        }
                    }
                }
            });
        }
    });
    // A clean close: the log's last checkpoint, the heads recorded.
    drop(sessions);
    drop(journal);
    marks.line("CLOSED");
    say("CLOSED");
}
