//! Kills during maintenance: the binary runs `compact`, `salvage`, `import`,
//! `export` or `copy` (`kill/copy.rs`) and is SIGKILLed at a random moment. Then the source must be
//! intact, and the target either absent (for an export over an older file:
//! that file unchanged) or whole: every event of every session, `verify`
//! clean. An import killed half-way may leave its intent file (the sessions
//! it names are rolled back); the next `import` must then roll them back
//! and import everything.
//!
//! The moment of each kill is drawn between 0 and 1.25 times the length of
//! a full run of the same command, measured first (and lowered when a round
//! finishes sooner); a run that finishes before its kill is checked as a
//! whole run. A command none of whose rounds was killed gets more rounds
//! (up to three times as many) until one is.

use std::collections::BTreeSet;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use agent_journal::{Durability, Journal, JournalConfig, SessionId};

use super::fixture::{Fixture, check_session, check_whole, fixture};
use crate::common::{Rng, cli_command, copy_dir, path_str};

/// The file an import keeps in the database directory while it runs
/// (`docs/format.md`, "Import intent").
pub const IMPORT_INTENT: &str = "agent-journal.importing";

/// What the maintenance kill rounds saw.
#[derive(Default, Debug)]
pub struct MaintTotals {
    /// Runs killed, per command.
    pub compact: u64,
    pub salvage: u64,
    pub import: u64,
    pub export: u64,
    pub copy: u64,
    /// Sessions a killed copy left in part (hidden, reported by `verify`,
    /// finished by the next copy).
    pub copy_hidden: u64,
    /// Of those, sessions cut short (fewer events than the source's).
    pub copy_cut: u64,
    /// Runs that finished before their kill (checked as whole runs).
    pub finished: u64,
    /// Targets left absent (or an older file unchanged) by a kill.
    pub absent: u64,
    /// Targets left whole by a kill.
    pub whole: u64,
    /// Imports killed with their intent file left: rolled back later.
    pub rolled_back: u64,
    /// Targets that exist but are not whole (the failure this harness is for).
    pub incomplete: u64,
    /// Sources changed by a run.
    pub source_damaged: u64,
    /// Re-runs after a kill that failed (an import refused, say).
    pub rerun_failed: u64,
    /// Temporary files or directories of killed runs that a later run of
    /// the same command did not clean up.
    pub leftovers: u64,
    /// What went wrong, the first 50 of it.
    pub problems: Vec<String>,
}

impl MaintTotals {
    pub(super) fn problem(&mut self, what: String) {
        if self.problems.len() < 50 {
            self.problems.push(what);
        }
    }

    /// Asserts nothing went wrong and every command run was killed at
    /// least once.
    pub fn assert_clean(&self) {
        assert!(
            self.incomplete == 0
                && self.source_damaged == 0
                && self.rerun_failed == 0
                && self.leftovers == 0,
            "incomplete targets {}, damaged sources {}, failed re-runs {}, leftovers {}:\n{}",
            self.incomplete,
            self.source_damaged,
            self.rerun_failed,
            self.leftovers,
            self.problems.join("\n")
        );
        for (name, n) in [
            ("compact", self.compact),
            ("salvage", self.salvage),
            ("import", self.import),
            ("export", self.export),
            ("copy", self.copy),
        ] {
            let ran = std::env::var("AJ_MAINT_ONLY")
                .map(|o| o.split(',').any(|x| x == name))
                .unwrap_or(true);
            assert!(n > 0 || !ran, "no run of {name} was killed");
        }
    }
}

/// How a run ended.
pub(super) enum Ran {
    /// SIGKILLed.
    Killed,
    /// Exited on its own before the kill, after this long.
    Finished(Output, Duration),
}

/// Runs `cmd`, and SIGKILLs it after `delay` unless it ended before.
pub(super) fn run_until(mut cmd: Command, delay: Duration) -> Ran {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn agent-journal");
    let started = Instant::now();
    let deadline = started + delay;
    loop {
        if child.try_wait().expect("try_wait").is_some() {
            let took = started.elapsed();
            return Ran::Finished(child.wait_with_output().expect("output"), took);
        }
        if Instant::now() >= deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let _ = child.kill();
    let out = child.wait_with_output().expect("wait");
    match out.status.signal() {
        Some(9) => Ran::Killed,
        _ => Ran::Finished(out, delay),
    }
}

/// Runs `cmd` to completion; returns its output and how long it took.
pub(super) fn run_whole(mut cmd: Command) -> (Output, Duration) {
    let t = Instant::now();
    let out = cmd.output().expect("run agent-journal");
    (out, t.elapsed())
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).trim().to_owned()
}

/// Temporary files and directories left in `dir` (names starting with a
/// dot: the targets themselves never do).
fn temporaries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().into_string().ok())
                .filter(|n| n.starts_with('.'))
                .collect()
        })
        .unwrap_or_default()
}

fn remove(path: &Path) {
    if path.is_dir() {
        std::fs::remove_dir_all(path).expect("remove a target directory");
    } else if path.exists() {
        std::fs::remove_file(path).expect("remove a target file");
    }
}

/// The delay before a kill: uniform in `0..=1.25 * full` half the time,
/// else in the second half of a full run (`0.5..=1.05 * full`), where the
/// commands write most of what they write.
pub(super) fn kill_delay(rng: &mut Rng, full: Duration) -> Duration {
    let full = full.as_micros() as u64;
    let (lo, hi) = if rng.below(2) == 0 {
        (0, full * 5 / 4)
    } else {
        (full / 2, full * 21 / 20)
    };
    Duration::from_micros(lo + rng.next_u64() % (hi - lo + 1))
}

/// A database target (`compact --to`, `salvage --to`): absent or whole.
fn db_rounds(
    f: &Fixture,
    t: &mut MaintTotals,
    rng: &mut Rng,
    rounds: u64,
    name: &'static str,
    command: impl Fn(u64, &Path) -> Command,
) {
    let dest = f.work.join(format!("{name}.db"));
    let (out, mut full) = run_whole(command(0, &dest));
    assert!(out.status.success(), "{name}: {}", stderr(&out));
    if let Err(e) = check_whole(&dest, &f.sessions) {
        panic!("{name}, a whole run: {e}");
    }
    remove(&dest);
    let mut killed = 0;
    for round in 0..rounds * 3 {
        if round >= rounds && killed > 0 {
            break; // (more rounds only until one run was killed)
        }
        let delay = kill_delay(rng, full);
        match run_until(command(round, &dest), delay) {
            Ran::Killed => {
                killed += 1;
                *match name {
                    "compact" => &mut t.compact,
                    _ => &mut t.salvage,
                } += 1;
                if !dest.exists() {
                    t.absent += 1;
                } else {
                    match check_whole(&dest, &f.sessions) {
                        Ok(()) => t.whole += 1,
                        Err(e) => {
                            t.incomplete += 1;
                            t.problem(format!(
                                "{name} round {round}, killed after {delay:?}: the target {e}"
                            ));
                        }
                    }
                }
            }
            Ran::Finished(out, took) => {
                // The runs so far were slower (a cold cache): aim shorter.
                full = full.min(took);
                t.finished += 1;
                if !out.status.success() {
                    t.rerun_failed += 1;
                    t.problem(format!("{name} round {round}: {}", stderr(&out)));
                } else if let Err(e) = check_whole(&dest, &f.sessions) {
                    t.incomplete += 1;
                    t.problem(format!("{name} round {round}, finished: the target {e}"));
                }
            }
        }
        remove(&dest);
    }
    // A whole run cleans up what the killed ones left.
    let (out, _) = run_whole(command(rounds, &dest));
    assert!(out.status.success(), "{name}: {}", stderr(&out));
    let left = temporaries(&f.work);
    if !left.is_empty() {
        t.leftovers += left.len() as u64;
        t.problem(format!("{name}: left after a whole run: {left:?}"));
    }
    remove(&dest);
    if let Err(e) = check_whole(&f.db, &f.sessions) {
        t.source_damaged += 1;
        t.problem(format!("{name}: the source {e}"));
    }
}

/// `import FILE --format journal` into a database that holds a session of
/// its own: none of the file's sessions or all of them, whole.
fn import_rounds(f: &Fixture, t: &mut MaintTotals, rng: &mut Rng, rounds: u64) {
    let target = f.work.join("import.db");
    let command = |target: &Path| {
        let mut c = cli_command(target);
        c.args(["import", path_str(&f.file), "--format", "journal"]);
        c
    };
    let mut all = f.sessions.clone();
    all.push(f.own);
    all.sort();
    copy_dir(&f.import_template, &target);
    let (out, mut full) = run_whole(command(&target));
    assert!(out.status.success(), "import: {}", stderr(&out));
    if let Err(e) = check_whole(&target, &all) {
        panic!("import, a whole run: {e}");
    }
    remove(&target);
    let mut killed = 0;
    for round in 0..rounds * 3 {
        if round >= rounds && killed > 0 {
            break; // (more rounds only until one run was killed)
        }
        copy_dir(&f.import_template, &target);
        let delay = kill_delay(rng, full);
        let ran = run_until(command(&target), delay);
        if std::fs::read(&f.file).ok().as_deref() != Some(&f.file_bytes[..]) {
            t.source_damaged += 1;
            t.problem(format!("import round {round}: the imported file changed"));
        }
        match ran {
            Ran::Killed => {
                killed += 1;
                t.import += 1;
                let rerun = match classify_import(f, &target) {
                    Ok(ImportState::Nothing) => {
                        t.absent += 1;
                        false
                    }
                    Ok(ImportState::All) => {
                        t.whole += 1;
                        false
                    }
                    Ok(ImportState::RolledBackLater) => {
                        t.rolled_back += 1;
                        true
                    }
                    Err(e) => {
                        t.incomplete += 1;
                        t.problem(format!("import round {round}, killed after {delay:?}: {e}"));
                        true
                    }
                };
                if rerun {
                    // The user runs the import again: it must go through.
                    let (out, _) = run_whole(command(&target));
                    if !out.status.success() {
                        t.rerun_failed += 1;
                        t.problem(format!(
                            "import round {round}: the re-run fails: {}",
                            stderr(&out)
                        ));
                    } else if let Err(e) = check_whole(&target, &all) {
                        t.incomplete += 1;
                        t.problem(format!("import round {round}: after the re-run: {e}"));
                    }
                }
            }
            Ran::Finished(out, took) => {
                full = full.min(took);
                t.finished += 1;
                if !out.status.success() {
                    t.rerun_failed += 1;
                    t.problem(format!("import round {round}: {}", stderr(&out)));
                } else if let Err(e) = check_whole(&target, &all) {
                    t.incomplete += 1;
                    t.problem(format!("import round {round}, finished: {e}"));
                }
            }
        }
        let left: Vec<String> = temporaries(&target);
        if !left.is_empty() {
            // Reported, not counted: the next import removes them.
            eprintln!("  (import: temporaries in the database after round {round}: {left:?})");
        }
        remove(&target);
    }
}

/// What a killed import left, as the next open or import sees it.
enum ImportState {
    /// None of the file's sessions.
    Nothing,
    /// All of them, whole.
    All,
    /// Its intent file: what it wrote is rolled back by the next import.
    RolledBackLater,
}

fn classify_import(f: &Fixture, target: &Path) -> Result<ImportState, String> {
    // The intent file is written whole (renamed into place): when it is
    // there, it names every session of the file.
    let intent = match std::fs::read_to_string(target.join(IMPORT_INTENT)) {
        Ok(text) => {
            let named = text
                .lines()
                .filter(|l| l.parse::<SessionId>().is_ok())
                .count();
            if named != f.sessions.len()
                || !f
                    .sessions
                    .iter()
                    .all(|(id, _)| text.contains(&id.to_string()))
            {
                return Err(format!(
                    "the intent file does not name the file's sessions: {text:?}"
                ));
            }
            true
        }
        Err(_) => false,
    };
    let journal = Journal::open_with(
        target,
        JournalConfig {
            create_if_missing: false,
            durability: Durability::Buffered,
            ..JournalConfig::default()
        },
    )
    .map_err(|e| format!("the database does not open: {e}"))?;
    check_session(&journal, f.own.0, f.own.1)
        .map_err(|e| format!("its own session changed: {e}"))?;
    if intent {
        return Ok(ImportState::RolledBackLater);
    }
    let ids: BTreeSet<SessionId> = journal
        .sessions()
        .map_err(|e| e.to_string())?
        .into_iter()
        .collect();
    let present: Vec<(SessionId, u64)> = f
        .sessions
        .iter()
        .copied()
        .filter(|(id, _)| ids.contains(id))
        .collect();
    if present.is_empty() {
        return Ok(ImportState::Nothing);
    }
    if present.len() != f.sessions.len() {
        return Err(format!(
            "{} of the {} sessions were imported",
            present.len(),
            f.sessions.len()
        ));
    }
    for &(id, len) in &present {
        check_session(&journal, id, len)?;
    }
    Ok(ImportState::All)
}

/// Whether `got` is the whole export `reference` of `format`: the same
/// bytes, except a WINK snapshot's `created_at` (the time of the export).
fn same_export(format: &str, got: &[u8], reference: &[u8]) -> bool {
    if format != "wink" {
        return got == reference;
    }
    let parse = |b: &[u8]| {
        serde_json::from_slice::<serde_json::Value>(b)
            .ok()
            .map(|mut v| {
                if let Some(m) = v.as_object_mut() {
                    m.remove("created_at");
                }
                v
            })
    };
    matches!((parse(got), parse(reference)), (Some(a), Some(b)) if a == b)
}

/// `export SESSION --format F -o FILE` over an older file (a good backup):
/// the older file unchanged, or the whole new export.
fn export_rounds(f: &Fixture, t: &mut MaintTotals, rng: &mut Rng, rounds: u64) {
    let (id, _) = *f
        .sessions
        .iter()
        .max_by_key(|(_, n)| *n)
        .expect("a session");
    let id = id.to_string();
    let target = f.work.join("backup.out");
    let old: &[u8] = b"an older backup that a failed export must leave alone\n";
    let command = |format: &str, out: &Path| {
        let mut c = cli_command(&f.db);
        c.args(["export", &id, "--format", format, "-o", path_str(out)]);
        c
    };
    let formats = ["journal", "jsonl", "openai", "wink"];
    // The whole output of each format, and how long it takes.
    let mut whole = Vec::new();
    for format in formats {
        let reference = f.work.join(format!("reference.{format}"));
        let (out, full) = run_whole(command(format, &reference));
        assert!(out.status.success(), "export {format}: {}", stderr(&out));
        whole.push((std::fs::read(&reference).expect("read"), full));
        remove(&reference);
    }
    let mut killed = 0;
    for round in 0..rounds * 3 {
        if round >= rounds && killed > 0 {
            break; // (more rounds only until one run was killed)
        }
        // Mostly the journal format, whose writing takes longest.
        let k = if round % 2 == 0 {
            0
        } else {
            1 + (round as usize / 2) % 3
        };
        let format = formats[k];
        let (reference, full) = (&whole[k].0, whole[k].1);
        std::fs::write(&target, old).expect("write the old backup");
        let delay = kill_delay(rng, full);
        let ran = run_until(command(format, &target), delay);
        let now = std::fs::read(&target).unwrap_or_default();
        match ran {
            Ran::Killed => {
                killed += 1;
                t.export += 1;
                if now == old {
                    t.absent += 1;
                } else if same_export(format, &now, reference) {
                    t.whole += 1;
                } else {
                    t.incomplete += 1;
                    t.problem(format!(
                        "export {format} round {round}, killed after {delay:?}: the file holds \
                         {} bytes, neither the old {} nor the new {}",
                        now.len(),
                        old.len(),
                        reference.len()
                    ));
                }
            }
            Ran::Finished(out, took) => {
                t.finished += 1;
                if !out.status.success() || !same_export(format, &now, reference) {
                    t.incomplete += 1;
                    t.problem(format!(
                        "export {format} round {round}, finished: {}",
                        stderr(&out)
                    ));
                }
                whole[k].1 = full.min(took);
            }
        }
    }
    let (out, _) = run_whole(command("journal", &target));
    assert!(out.status.success(), "export: {}", stderr(&out));
    let left = temporaries(&f.work);
    if !left.is_empty() {
        t.leftovers += left.len() as u64;
        t.problem(format!("export: left after a whole run: {left:?}"));
    }
    remove(&target);
}

/// Runs `rounds` kills of each command against one fixture (a sixth as
/// many of each of the four kinds of `copy`, against a fixture of two sessions of
/// `copy_events` events: longer than a copy's atomic appends of 4,096, so
/// that a kill can cut one short).
pub fn run_maintenance_kills(
    rounds: u64,
    seed: u64,
    sessions: usize,
    events: u64,
    copy_events: u64,
) -> MaintTotals {
    let started = Instant::now();
    let f = fixture(sessions, events);
    let built = started.elapsed();
    let mut rng = Rng::new(seed);
    let mut t = MaintTotals::default();
    // `AJ_MAINT_ONLY=import,export` runs only those commands.
    let only = std::env::var("AJ_MAINT_ONLY").ok();
    let run = |name: &str| {
        only.as_deref()
            .is_none_or(|o| o.split(',').any(|n| n == name))
    };
    let timing = std::env::var("AJ_KILL_TIMING").is_ok();
    let mut lap = Instant::now();
    let mut lap = |name: &str| {
        if timing {
            eprintln!("  {name}: {:.1} s", lap.elapsed().as_secs_f64());
        }
        lap = Instant::now();
    };
    if run("compact") {
        db_rounds(&f, &mut t, &mut rng, rounds, "compact", |_, dest| {
            let mut c = cli_command(&f.db);
            c.args(["compact", "--to", path_str(dest)]);
            c
        });
        lap("compact");
    }
    if run("salvage") {
        db_rounds(&f, &mut t, &mut rng, rounds, "salvage", |round, dest| {
            // From the database, and from the exported file.
            let mut c = cli_command(if round % 2 == 0 { &f.db } else { &f.file });
            c.args(["salvage", "--to", path_str(dest)]);
            c
        });
        lap("salvage");
    }
    if run("import") {
        import_rounds(&f, &mut t, &mut rng, rounds);
        lap("import");
    }
    if run("export") {
        export_rounds(&f, &mut t, &mut rng, rounds);
        lap("export");
    }
    if run("copy") {
        let big = fixture(2, copy_events);
        super::copy::copy_rounds(&big, &mut t, &mut rng, rounds.div_ceil(6));
        lap("copy");
    }
    eprintln!(
        "maintenance kills: compact {}, salvage {}, import {}, export {}, copy {}; incomplete \
         targets left: {}",
        t.compact, t.salvage, t.import, t.export, t.copy, t.incomplete
    );
    eprintln!(
        "  (seed {seed}; {sessions} sessions of ~{events} events; targets absent or unchanged {}, \
         whole {}, imports rolled back {}, sessions a killed copy left hidden {} (cut short {}), runs that finished first {}, failed re-runs {}, \
         damaged sources {}, leftovers {}; fixture {:.1} s, total {:.1} s)",
        t.absent,
        t.whole,
        t.rolled_back,
        t.copy_hidden,
        t.copy_cut,
        t.finished,
        t.rerun_failed,
        t.source_damaged,
        t.leftovers,
        built.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
    t
}
