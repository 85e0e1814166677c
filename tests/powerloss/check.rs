//! Opens one power-cut state with the library (no shim) and checks it.

use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;

use agent_journal::format::{DEFAULT_MAX_EVENT_BYTES, encode_frame};
use agent_journal::maintenance::ProblemKind;
use agent_journal::{Event, Journal, JournalConfig, SessionId};

use super::content::expected_event;

/// What one state showed.
#[derive(Default, Debug)]
pub struct Outcome {
    /// The database opened.
    pub opened: bool,
    /// The open rebuilt it from the journal's own records (sled could not
    /// read its files).
    pub rebuilt: bool,
    /// Acknowledged events checked present and byte-equal to what was
    /// appended.
    pub acked_checked: u64,
    /// Acknowledged events missing (or not the ones written).
    pub lost: u64,
    /// Snapshots `verify` rejected (a cache: the stream is replayed), and
    /// what it said of the first few.
    pub snapshot_problems: u64,
    pub snapshot_messages: Vec<String>,
    /// The heads the database holds, per session (after the open).
    pub heads: HashMap<SessionId, u64>,
    /// What went wrong; empty if the state is good.
    pub problems: Vec<String>,
}

/// Whether `event` is, byte for byte (its encoding), the event the child
/// appended at `seq` of `id`. (The envelope's timestamp is the journal's,
/// taken at the append: not compared.)
fn same_bytes(event: &Event, id: SessionId, seq: u64) -> bool {
    let encode = |e: &Event| encode_frame(e, DEFAULT_MAX_EVENT_BYTES).expect("encode");
    encode(event) == encode(&expected_event(id, seq))
}

fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".into())
}

/// Opens the database at `db` and checks it against `acked` (session ->
/// the number of its events acknowledged, i.e. its last acknowledged seq
/// plus one). `may_be_missing`: the cut came before the database was fully
/// created, so a clean error is allowed.
pub fn check(db: &Path, acked: &HashMap<SessionId, u64>, may_be_missing: bool) -> Outcome {
    let mut out = Outcome::default();
    let config = JournalConfig {
        create_if_missing: false,
        ..JournalConfig::default()
    };
    let opened = catch_unwind(AssertUnwindSafe(|| Journal::open_with(db, config)));
    let journal = match opened {
        Ok(Ok(j)) => j,
        Ok(Err(e)) => {
            if !(may_be_missing && acked.values().all(|n| *n == 0)) {
                out.lost += acked.values().sum::<u64>();
                out.problems
                    .push(format!("the database does not open: {e}"));
            }
            return out;
        }
        Err(p) => {
            out.lost += acked.values().sum::<u64>();
            out.problems.push(format!(
                "opening the database panicked: {}",
                panic_text(&*p)
            ));
            return out;
        }
    };
    out.opened = true;
    out.rebuilt = journal.rebuilt_from().is_some();
    let checked = catch_unwind(AssertUnwindSafe(|| check_open(&journal, acked, &mut out)));
    if let Err(p) = checked {
        out.problems.push(format!(
            "checking the database panicked: {}",
            panic_text(&*p)
        ));
    }
    out
}

fn check_open(journal: &Journal, acked: &HashMap<SessionId, u64>, out: &mut Outcome) {
    for loss in journal.losses() {
        out.problems.push(format!(
            "the journal reports a loss: session {}: {loss}",
            loss.session
        ));
    }
    let ids = match journal.sessions() {
        Ok(ids) => ids,
        Err(e) => {
            out.lost += acked.values().sum::<u64>();
            out.problems.push(format!("cannot list sessions: {e}"));
            return;
        }
    };
    for (id, n) in acked {
        if *n > 0 && !ids.contains(id) {
            out.lost += n;
            out.problems
                .push(format!("session {id} ({n} acknowledged events) is gone"));
        }
    }
    for id in ids {
        let want = acked.get(&id).copied().unwrap_or(0);
        let s = match journal.session(id) {
            Ok(s) => s,
            Err(e) => {
                out.lost += want;
                out.problems
                    .push(format!("session {id} does not open: {e}"));
                continue;
            }
        };
        let head = s.head();
        out.heads.insert(id, head);
        if let Some(tail) = s.torn_tail() {
            out.problems
                .push(format!("session {id} has a damaged tail: {tail}"));
        }
        match journal.stream_len(id) {
            Ok(Some(len)) if len == head => {}
            other => out.problems.push(format!(
                "session {id}: head {head} but the store holds {other:?}"
            )),
        }
        if head < want {
            out.lost += want - head;
            out.problems.push(format!(
                "session {id}: {want} events acknowledged, {head} recovered"
            ));
        }
        let events = match s.events(..) {
            Ok(e) => e,
            Err(e) => {
                out.lost += want.min(head);
                out.problems
                    .push(format!("session {id}: reading events: {e}"));
                continue;
            }
        };
        if events.len() as u64 != head {
            out.problems.push(format!(
                "session {id}: {} events read, head {head}",
                events.len()
            ));
        }
        for (i, env) in events.iter().enumerate() {
            let seq = i as u64;
            let right = env.seq == seq && env.session == id && same_bytes(&env.event, id, seq);
            if !right {
                if seq < want {
                    out.lost += 1;
                }
                out.problems.push(format!(
                    "session {id}: position {seq} holds {}#{}, not the event written",
                    env.session, env.seq
                ));
            } else if seq < want {
                out.acked_checked += 1;
            }
        }
    }
    match journal.verify(None, |_| {}) {
        Ok(report) => {
            for p in &report.problems {
                match p.kind {
                    ProblemKind::Snapshot => {
                        out.snapshot_problems += 1;
                        if out.snapshot_messages.len() < 3 {
                            out.snapshot_messages.push(p.to_string());
                        }
                    }
                    _ => out.problems.push(format!("verify: {p}")),
                }
            }
        }
        Err(e) => out.problems.push(format!("verify fails: {e}")),
    }
}

/// Salvages the database at `db` into a new one next to it and checks it
/// against `acked` as [`check`] does: the acknowledged events the salvaged
/// copy holds in place, and how many it lacks.
pub fn salvaged(db: &Path, acked: &HashMap<SessionId, u64>) -> (u64, u64) {
    let dest = db.with_file_name("salvaged");
    let r = catch_unwind(AssertUnwindSafe(|| {
        agent_journal::maintenance::salvage_database(db, &dest, DEFAULT_MAX_EVENT_BYTES)
    }));
    if !matches!(r, Ok(Ok(_))) {
        return (0, acked.values().sum());
    }
    let mut out = Outcome::default();
    let journal = match Journal::open(&dest) {
        Ok(j) => j,
        Err(_) => return (0, acked.values().sum()),
    };
    check_open(&journal, acked, &mut out);
    (out.acked_checked, out.lost)
}
