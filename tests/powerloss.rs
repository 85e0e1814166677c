//! Power-loss tests: `Durability::Synced` promises that an acknowledged
//! event survives power loss, and a SIGKILL (the kill tests) cannot test
//! that: the page cache survives a killed process. Here the child's I/O is
//! recorded, and the states a power cut could leave on the disk are
//! rebuilt from the record and opened.
//!
//! How:
//!
//! 1. `powerloss/shim.c`, compiled at run time with the system C compiler
//!    (the test prints one line and passes if there is none), is preloaded
//!    into a child process (this test binary re-run on the ignored test
//!    `powerloss::child`, as the kill tests do). For every file under the
//!    recorded directory it logs each state-changing operation in the order
//!    it took effect: opens (flags, so `O_DSYNC`), writes (`write`,
//!    `pwrite`, `writev`, `pwritev`, with their bytes), `ftruncate`,
//!    `fallocate`, `fsync`/`fdatasync` of files and directories (a BEGIN
//!    and an END each), `sync_file_range` (no barrier), `rename`, `unlink`,
//!    `mkdir`, `rmdir`, `close`, `dup`. Other write paths (shared `mmap`,
//!    `copy_file_range`, links) are logged as unsupported and fail the test.
//! 2. The child (`powerloss/child.rs`) opens a journal (`Synced`, the
//!    default) and appends from three threads to five sessions; after each
//!    append returns it writes `ACK <session> <first> <last>` to a mark
//!    file, which the shim logs too: so the log says which acknowledgements
//!    came before which I/O. It is SIGKILLed at a random moment, or closes
//!    the journal and exits.
//! 3. The parent (`powerloss/rounds.rs`) replays the log over the directory
//!    as it was before the child (`powerloss/model.rs`: the model of a
//!    power cut is documented there) and, for several cut points per run
//!    (the last one after the last record; a quarter of the others while
//!    the child was opening the database), builds a state under a random
//!    policy (everything unsynced kept, all of it dropped, each write kept,
//!    dropped or torn at 512-byte sectors, each sector at random, or an
//!    ordered prefix), writes it to a fresh directory, and opens it with
//!    the library, without the shim (`powerloss/check.rs`).
//! 4. Checked: it opens (a clean error is allowed only for a cut before the
//!    database was durably created); `Journal::losses()` reports nothing;
//!    every event acknowledged before the cut is there and equal to what
//!    was appended (its content is a pure function of session and seq,
//!    `kill/content.rs`); every stream is gap-free from seq 0 and has no
//!    damaged tail; `verify` finds no damage and no broken invariant. (A
//!    snapshot `verify` rejects is counted and printed: snapshots are a
//!    cache, the stream is replayed.)
//! 5. A failing state is explained: the harness puts back, one class of
//!    files at a time (sled's log, its blobs, its `conf`, its snapshots,
//!    the write-ahead log, the acknowledgement log, snapshot files, ...), what the
//!    page cache held at the cut, and reports the smallest set of classes
//!    that makes the state pass. Durability bugs found this way that the
//!    tests cannot fix are listed in `rounds::KNOWN_BUGS`, each with an
//!    ignored test in `powerloss/known.rs` that reproduces it: a state
//!    explained by one of them (under the policies it names) is counted
//!    and printed apart, not as a loss. `AJ_POWERLOSS_STRICT=1` counts them
//!    as losses.
//! 6. Rounds are chained: the next child starts from a state this round
//!    recovered (so opening, replaying the log, sled's own snapshot at
//!    open, and rewriting files are under test too); every
//!    `AJ_POWERLOSS_FRESH_EVERY` rounds (default 4) it starts from nothing,
//!    so creating the database is as well. Every fifth child runs five
//!    times longer, to fill the write-ahead log.
//! 7. The model checks itself: after each child that was not killed in the
//!    middle of an operation, the model's state with everything kept must
//!    be, byte for byte, the directory the child left.
//!
//! The summary line: `power loss: N states checked, M acknowledged events
//! checked, L lost` (L: in states no known bug explains), then the seed,
//! the states per policy, what the children's I/O covered (blob files,
//! snapshot files, sled's snapshots, write-ahead log generations and full
//! logs) and a line per known bug. The test asserts L = 0 and that no
//! state had an unexplained problem.
//!
//! Knobs: `AJ_POWERLOSS_ROUNDS` (child runs; 3 in the normal suite),
//! `AJ_POWERLOSS_STATES` (states per run, 6), `AJ_POWERLOSS_SEED`,
//! `AJ_POWERLOSS_CHILD_MS` (how long a child appends, 300),
//! `AJ_POWERLOSS_FRESH_EVERY`, `AJ_POWERLOSS_STRICT`,
//! `AJ_POWERLOSS_KEEP=DIR` (write each failing state as built, the
//! directory before the child and the log there). The seed fixes every
//! choice of the parent, not the child's timing: a failure is reproduced
//! from the kept state, not from the seed.
//!
//! The long run:
//! `AJ_POWERLOSS_ROUNDS=50 cargo test --release --test integration powerloss -- --nocapture`
#![cfg(target_os = "linux")]

mod check;
mod child;
// The kill tests' event content, the same pure function of (session, seq).
// (`kill::content` is private to that module, hence the second `mod`; a
// `pub(crate) mod content` there would let this be a `use`.)
#[allow(clippy::duplicate_mod)]
#[path = "kill/content.rs"]
mod content;
mod known;
mod model;
mod oplog;
mod recorded;
mod rounds;

use rounds::{Plan, run};

/// The number in the environment variable `name`, else `default`.
fn env_u64(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|e| panic!("{name}={v:?} is not a number: {e}")),
        Err(_) => default,
    }
}

/// The child process (see `powerloss/child.rs`). Does nothing unless
/// `AJ_PL_CHILD_DB` is set (the parent sets it).
#[test]
#[ignore = "the child process of the power-loss tests; runs only when AJ_PL_CHILD_DB is set"]
fn child() {
    if let (Ok(db), Ok(mark)) = (
        std::env::var("AJ_PL_CHILD_DB"),
        std::env::var("AJ_PL_CHILD_MARK"),
    ) {
        child::run(&db, &mark);
    }
}

#[test]
fn power_loss_during_synced_appends_loses_no_acknowledged_event() {
    let plan = Plan {
        rounds: env_u64("AJ_POWERLOSS_ROUNDS", 3),
        states_per_round: env_u64("AJ_POWERLOSS_STATES", 6).max(1),
        seed: env_u64("AJ_POWERLOSS_SEED", 0x0B0F_F00D),
        fresh_every: env_u64("AJ_POWERLOSS_FRESH_EVERY", 4),
        child_ms: env_u64("AJ_POWERLOSS_CHILD_MS", 300).max(1),
        strict: std::env::var_os("AJ_POWERLOSS_STRICT").is_some(),
    };
    let Some(t) = run(&plan) else { return };
    assert!(
        t.unsupported.is_empty(),
        "the child used I/O the power-loss model does not cover:\n{}",
        t.unsupported.join("\n")
    );
    assert!(
        t.lost == 0 && t.bad_states == 0,
        "{} acknowledged events lost, {} bad states of {}:\n{}",
        t.lost,
        t.bad_states,
        t.states,
        t.problems.join("\n")
    );
    assert!(t.acked_checked > 0, "no acknowledged event was checked");
}
