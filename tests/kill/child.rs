//! The child half of the kill tests: appends with real durability until
//! the parent kills it, and tells the parent on stdout what was
//! acknowledged (`ACK <session> <first seq> <last seq>`).

use std::io::Write;
use std::time::{Duration, Instant};

use agent_journal::{
    CheckpointStrategy, Durability, Error, Event, Journal, JournalConfig, SessionId,
};

use super::content::expected_event;
use super::{CHILD_THREADS, SHARED_SESSIONS, env_u64};
use crate::common::Rng;

/// Tells the parent that seqs `first..=last` of `id` are acknowledged.
fn ack(id: SessionId, first: u64, last: u64) {
    let mut out = std::io::stdout().lock();
    writeln!(out, "ACK {id} {first} {last}").expect("child: write ACK");
    out.flush().expect("child: flush ACK");
}

/// A line to the parent, flushed at once: a kill may come any moment.
fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}").expect("child: write");
    out.flush().expect("child: flush");
}

/// The child process: opens the database at `db` (every setting comes from
/// the parent, in `AJ_KILL_CHILD_*` variables), says `READY`, then appends
/// from several threads until it is killed, printing an `ACK` line for
/// every append that returned Ok.
pub fn run(db: &str) {
    let seed = env_u64("AJ_KILL_CHILD_SEED", 1);
    let threads = env_u64("AJ_KILL_CHILD_THREADS", CHILD_THREADS as u64) as usize;
    let durability = match std::env::var("AJ_KILL_CHILD_DURABILITY").as_deref() {
        Ok("flushed") => Durability::Flushed,
        Ok("buffered") => Durability::Buffered,
        _ => Durability::Synced,
    };
    let config = JournalConfig {
        durability,
        // Snapshots often (a whole one, then deltas on it), so a kill also
        // lands between an event and its snapshot, and recovery starts
        // from recovered chains.
        checkpoint: CheckpointStrategy::Incremental { every: 200 },
        compress: env_u64("AJ_KILL_CHILD_COMPRESS", 0) == 1,
        // Every other round seals blocks of 2 KiB: kills land in seals.
        block_bytes: if seed % 2 == 0 {
            2 << 10
        } else {
            agent_journal::JournalConfig::DEFAULT_BLOCK_BYTES
        },
        ..JournalConfig::default()
    };
    // libtest has printed "test kill::child ... " without a newline.
    say("");
    let journal = Journal::open_with(db, config).expect("child: open");
    let mut sessions = Vec::new();
    for id in journal.sessions().expect("child: sessions") {
        sessions.push(journal.session(id).expect("child: session"));
    }
    while sessions.len() < threads + SHARED_SESSIONS {
        let s = journal
            .create_session_with_labels(vec![("test".into(), "kill".into())])
            .expect("child: create");
        ack(s.id(), 0, 0);
        sessions.push(s);
    }
    say("READY");
    let deadline = Instant::now() + Duration::from_secs(30);
    std::thread::scope(|scope| {
        for t in 0..threads {
            let own = sessions[t].clone();
            let shared = sessions[threads..].to_vec();
            scope.spawn(move || {
                let mut rng = Rng::new(seed ^ ((t as u64 + 1) << 32));
                while Instant::now() < deadline {
                    let n = if rng.below(2) == 0 {
                        1
                    } else {
                        rng.between(1, 5) as u64
                    };
                    if rng.below(3) != 0 {
                        // The only writer of `own`: the head cannot move under us.
                        let id = own.id();
                        let h = own.head();
                        let events: Vec<Event> =
                            (h..h + n).map(|seq| expected_event(id, seq)).collect();
                        let (first, last) = if n == 1 && rng.below(2) == 0 {
                            let mut events = events;
                            let seq = own.append(events.remove(0)).expect("child: append");
                            (seq, seq)
                        } else {
                            own.append_batch(events).expect("child: append_batch")
                        };
                        assert_eq!((first, last), (h, h + n - 1), "child: seqs of {id}");
                        ack(id, first, last);
                    } else {
                        let s = &shared[rng.below(shared.len())];
                        let id = s.id();
                        loop {
                            let h = s.head();
                            let mut events: Vec<Event> =
                                (h..h + n).map(|seq| expected_event(id, seq)).collect();
                            let r = if n == 1 {
                                s.append_expected(h, events.remove(0)).map(|seq| (seq, seq))
                            } else {
                                s.append_batch_at(h, events)
                            };
                            match r {
                                Ok((first, last)) => {
                                    assert_eq!((first, last), (h, h + n - 1));
                                    ack(id, first, last);
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
}
