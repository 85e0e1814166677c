//! Crash tests, level (b): a child process appends with real durability and
//! is killed with SIGKILL at a random moment; the parent reopens the database
//! and checks the promise of an embedded database: every acknowledged event
//! is there byte for byte, every stream is gap-free from 0, the folded state
//! is the fold of the recovered events, and the journal takes appends again.
//! Also: a database whose creation a kill interrupted opens.
//!
//! As sled does, the integration binary re-runs itself as the child: the
//! parent spawns `current_exe()` with `kill::child --exact --ignored` and the
//! database path in `AJ_KILL_CHILD_DB`. `child` is `#[ignore]`d so that a
//! normal run skips it, and returns at once without that variable.
//!
//! The files: `kill/content.rs` (what event `seq` of session `id` holds: a
//! pure function of `(id, seq)`, so the parent can check every recovered
//! event, acknowledged or not), `kill/child.rs` (the child),
//! `kill/rounds.rs` (the parent: kill, reopen, check, repeat); the tests
//! are here.
//!
//! A database is reused for several rounds (5 in the normal suite, 10 in the
//! long run; each round reopens what the previous kill left, so recovery runs
//! on recovered data again and again), then a fresh one starts, so that disk
//! use and the time to verify a round stay bounded.
//!
//! `kill/maintenance.rs` (its source in `kill/fixture.rs`) kills the
//! binary during `compact`, `salvage`, `import`, `export` and `copy`
//! (`kill/copy.rs`: sled and `.ajournal` to sled and PostgreSQL) instead:
//! the source must be intact and the target absent (or the older file
//! unchanged) or whole; a copy may also leave a session hidden, reported by
//! `verify`, and finished by the next copy. Its knobs:
//! `AJ_MAINT_KILL_ROUNDS` (rounds per command), `AJ_MAINT_SESSIONS` and
//! `AJ_MAINT_EVENTS` (the source), `AJ_MAINT_COPY_EVENTS` (each of the
//! two sessions of the copies' source), `AJ_MAINT_ONLY=import,export` (only
//! those commands), `AJ_KILL_SEED`, `AJ_KILL_TIMING`; the long run:
//! `AJ_MAINT_KILL_ROUNDS=100 cargo test --release --test integration kill::maintenance_kills_long -- --ignored --nocapture`
//!
//! Knobs: `AJ_KILL_ROUNDS` (rounds), `AJ_KILL_SEED` (the seed of every random
//! choice: kill time, batch sizes, sessions), `AJ_KILL_FRESH_EVERY`, and
//! `AJ_KILL_TIMING` (print the time of each round).
//! The long run:
//! `AJ_KILL_ROUNDS=500 cargo test --release --test integration kill::kill_500_rounds -- --ignored --nocapture`
#![cfg(unix)]

mod child;
mod content;
mod conversation;
mod copy;
mod fixture;
mod maintenance;
mod rounds;

use std::path::{Path, PathBuf};

use agent_journal::{Durability, Journal};

use rounds::{assert_clean, run_kill_rounds};

/// Sessions each child writes: one per thread (single writer, plain
/// `append`/`append_batch`) plus two shared by every thread (optimistic
/// `append_expected`/`append_batch_at` with retries on conflict).
const SHARED_SESSIONS: usize = 2;
/// Threads of each child, one session of its own each.
const CHILD_THREADS: usize = 4;

/// The number in the environment variable `name`, else `default`.
fn env_u64(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|e| panic!("{name}={v:?} is not a number: {e}")),
        Err(_) => default,
    }
}

/// The child process of the kill tests (see `kill/child.rs`). Does nothing
/// unless `AJ_KILL_CHILD_DB` is set (the parent sets it).
#[test]
#[ignore = "the child process of the kill tests; runs only when AJ_KILL_CHILD_DB is set"]
fn child() {
    if let Ok(db) = std::env::var("AJ_KILL_CHILD_DB") {
        child::run(&db);
    }
}

/// The seed of the normal suite's rounds (each test mixes in its own salt).
const DEFAULT_SEED: u64 = 0x5EED_0A11;

#[test]
fn sigkill_during_synced_appends_loses_no_acknowledged_event() {
    let t = run_kill_rounds(
        "Synced",
        env_u64("AJ_KILL_ROUNDS", 20),
        env_u64("AJ_KILL_SEED", DEFAULT_SEED),
        5,
        |_| Durability::Synced,
    );
    assert_clean(&t);
}

/// `Flushed` promises survival of a process crash (not of power loss): a
/// SIGKILL must lose nothing acknowledged either.
#[test]
fn sigkill_during_flushed_appends_loses_no_acknowledged_event() {
    let t = run_kill_rounds(
        "Flushed",
        env_u64("AJ_KILL_ROUNDS", 10),
        env_u64("AJ_KILL_SEED", DEFAULT_SEED ^ 0xF1),
        5,
        |_| Durability::Flushed,
    );
    assert_clean(&t);
}

/// `Buffered` may lose the last ~500 ms to a process crash, but what
/// survives is still a gap-free prefix of undamaged events. This also shows
/// that the harness sees a loss when there is one.
#[test]
fn sigkill_during_buffered_appends_leaves_a_gap_free_prefix() {
    let t = run_kill_rounds(
        "Buffered",
        env_u64("AJ_KILL_ROUNDS", 5).min(5),
        env_u64("AJ_KILL_SEED", DEFAULT_SEED ^ 0xB0),
        5,
        |_| Durability::Buffered,
    );
    assert!(
        t.gaps == 0 && t.unopenable == 0 && t.damaged == 0,
        "gaps {}, unopenable {}, damaged {}:\n{}",
        t.gaps,
        t.unopenable,
        t.damaged,
        t.problems.join("\n")
    );
    assert!(
        t.lost > 0,
        "a kill loses Buffered events the harness must see (it saw none of {})",
        t.acknowledged
    );
}

/// The long run: 500 rounds (every fifth with `Flushed`).
#[test]
#[ignore = "long: AJ_KILL_ROUNDS=500 cargo test --release --test integration kill::kill_500_rounds -- --ignored --nocapture"]
fn kill_500_rounds() {
    let t = run_kill_rounds(
        "long run",
        env_u64("AJ_KILL_ROUNDS", 500),
        env_u64("AJ_KILL_SEED", DEFAULT_SEED ^ 0x500),
        10,
        |r| {
            if r % 5 == 4 {
                Durability::Flushed
            } else {
                Durability::Synced
            }
        },
    );
    assert_clean(&t);
    // Over hundreds of rounds some sessions always grow past 64 KiB (in
    // the short runs of the normal suite, how far they get depends on the
    // machine's speed: there it is only reported).
    assert!(
        t.rounds < 100 || t.rounds_with_snapshot_files > 0,
        "no round reached a snapshot kept in a file: the harness no longer covers them"
    );
}

/// Lays out in `db` what a kill leaves while sled creates a database: sled
/// 0.34 makes the directory and `blobs/` first, then writes `conf`, then
/// creates `db` (`Config::open_file`). `conf` is copied from a real database.
fn interrupted_creation(dir: &Path, name: &str, conf: bool, db_file: bool) -> PathBuf {
    let model = dir.join("model");
    if !model.exists() {
        drop(Journal::open(&model).expect("create a model database"));
    }
    let db = dir.join(name);
    std::fs::create_dir_all(db.join("blobs")).expect("mkdir");
    if conf {
        std::fs::copy(model.join("conf"), db.join("conf")).expect("conf");
    }
    if db_file {
        std::fs::write(db.join("db"), b"").expect("db");
    }
    db
}

/// The database must open (and be created) where a kill interrupted its
/// creation: nothing was ever acknowledged in it.
fn assert_opens_and_works(db: &Path) {
    let what = db.display();
    let journal = Journal::open(db).unwrap_or_else(|e| panic!("{what}: {e}"));
    let s = journal
        .create_session()
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let id = s.id();
    drop((s, journal));
    let journal = Journal::open(db).unwrap_or_else(|e| panic!("{what}, reopened: {e}"));
    assert_eq!(journal.sessions().expect("sessions"), vec![id], "{what}");
}

#[test]
fn a_database_killed_after_sled_created_its_db_file_opens_again() {
    let dir = tempfile::tempdir().expect("tempdir");
    assert_opens_and_works(&interrupted_creation(dir.path(), "empty-db", true, true));
}

#[test]
fn a_database_killed_before_sled_created_its_db_file_opens_again() {
    let dir = tempfile::tempdir().expect("tempdir");
    assert_opens_and_works(&interrupted_creation(
        dir.path(),
        "blobs-and-conf",
        true,
        false,
    ));
    assert_opens_and_works(&interrupted_creation(
        dir.path(),
        "blobs-only",
        false,
        false,
    ));
}

/// Kills during `compact`, `salvage`, `import`, `export` and `copy` leave
/// the old state or the whole new one (see `kill/maintenance.rs`).
#[test]
fn sigkill_during_maintenance_leaves_the_old_state_or_the_whole_new_one() {
    let t = maintenance::run_maintenance_kills(
        env_u64("AJ_MAINT_KILL_ROUNDS", 6),
        env_u64("AJ_KILL_SEED", DEFAULT_SEED ^ 0x3A1),
        env_u64("AJ_MAINT_SESSIONS", 5) as usize,
        env_u64("AJ_MAINT_EVENTS", 300),
        env_u64("AJ_MAINT_COPY_EVENTS", 4_500),
    );
    t.assert_clean();
}

/// The long run of the maintenance kills: 100 per command by default.
#[test]
#[ignore = "long: AJ_MAINT_KILL_ROUNDS=100 cargo test --release --test integration kill::maintenance_kills_long -- --ignored --nocapture"]
fn maintenance_kills_long() {
    let t = maintenance::run_maintenance_kills(
        env_u64("AJ_MAINT_KILL_ROUNDS", 100),
        env_u64("AJ_KILL_SEED", DEFAULT_SEED ^ 0x3A2),
        env_u64("AJ_MAINT_SESSIONS", 6) as usize,
        env_u64("AJ_MAINT_EVENTS", 600),
        env_u64("AJ_MAINT_COPY_EVENTS", 30_000),
    );
    t.assert_clean();
}
