//! Kills during `copy --from A --to B` (part of the maintenance kill
//! rounds): sled to sled, sled to PostgreSQL, an `.ajournal` file to sled
//! and to PostgreSQL. After each kill, every session of the target is
//! absent, hidden (a session the copy left in part: not listed, refused,
//! reported by `verify`), or listed and whole, equal to the source event
//! by event; a target with a hidden session must not verify clean. Then
//! `copy` run again must finish: the target verifies clean, every session
//! whole.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use agent_journal::maintenance::ProblemKind;
use agent_journal::{Durability, Journal, JournalConfig, SessionId};

use super::fixture::{Fixture, check_session, check_whole};
use super::maintenance::{MaintTotals, Ran, kill_delay, run_until, run_whole};
use crate::common::{Rng, cli_command, path_str};

/// One kind of copy: its name, its source, and a maker of fresh targets.
struct Kind {
    name: &'static str,
    from: PathBuf,
    /// A fresh target for round `n`.
    target: Box<dyn Fn(u64) -> PathBuf>,
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).trim().to_owned()
}

fn command(from: &Path, to: &Path) -> Command {
    let mut c = cli_command(Path::new("unused"));
    c.args(["copy", "--from", path_str(from), "--to", path_str(to)]);
    c
}

/// The kinds of copy to run: to PostgreSQL only when a test server runs.
fn kinds(f: &Fixture) -> Vec<Kind> {
    let work = f.work.clone();
    let sled_target = move |name: &'static str| -> Box<dyn Fn(u64) -> PathBuf> {
        let work = work.clone();
        Box::new(move |n| work.join(format!("copy-{name}-{n}.db")))
    };
    let mut all = vec![
        Kind {
            name: "sled to sled",
            from: f.db.clone(),
            target: sled_target("sled"),
        },
        Kind {
            name: ".ajournal to sled",
            from: f.file.clone(),
            target: sled_target("file"),
        },
    ];
    #[cfg(feature = "postgres")]
    match crate::pg_server::server_url() {
        Some(_) => {
            let pg = || -> Box<dyn Fn(u64) -> PathBuf> {
                Box::new(|_| PathBuf::from(crate::pg_server::fresh_url().expect("the server")))
            };
            all.push(Kind {
                name: "sled to PostgreSQL",
                from: f.db.clone(),
                target: pg(),
            });
            all.push(Kind {
                name: ".ajournal to PostgreSQL",
                from: f.file.clone(),
                target: pg(),
            });
        }
        None => eprintln!("note: copy kills to PostgreSQL skipped: no test server"),
    }
    all
}

/// What a killed copy left in `target`: `Ok((listed, hidden, cut))`, the
/// sessions listed (each whole), those hidden (named by the copy's intent,
/// reported by `verify`), and of those the ones cut short, or what is
/// wrong.
fn classify(f: &Fixture, target: &Path) -> Result<(u64, u64, u64), String> {
    let is_url = path_str(target).contains("://");
    if !is_url && !target.exists() {
        return Ok((0, 0, 0));
    }
    let journal = Journal::open_with(
        target,
        JournalConfig {
            create_if_missing: false,
            durability: Durability::Buffered,
            ..JournalConfig::default()
        },
    );
    let journal = match journal {
        Ok(j) => j,
        // A PostgreSQL schema the kill came before.
        Err(agent_journal::Error::NotAJournal { .. }) if is_url => return Ok((0, 0, 0)),
        Err(e) => return Err(format!("the target does not open: {e}")),
    };
    let listed: BTreeSet<SessionId> = journal
        .sessions()
        .map_err(|e| format!("sessions: {e}"))?
        .into_iter()
        .collect();
    let want: BTreeSet<SessionId> = f.sessions.iter().map(|(id, _)| *id).collect();
    if let Some(x) = listed.difference(&want).next() {
        return Err(format!("lists session {x}, not one of the source"));
    }
    let (mut hidden, mut cut) = (Vec::new(), 0);
    for &(id, len) in &f.sessions {
        if listed.contains(&id) {
            check_session(&journal, id, len).map_err(|e| format!("a listed {e}"))?;
        } else if let Some(held) = journal.stream_len(id).map_err(|e| e.to_string())? {
            hidden.push(id);
            cut += u64::from(held < len);
        }
    }
    let report = journal
        .verify(None, |_| {})
        .map_err(|e| format!("verify: {e}"))?;
    for id in &hidden {
        if !report
            .problems
            .iter()
            .any(|p| p.session == *id && p.kind == ProblemKind::Incomplete)
            || !report.has_damage()
        {
            return Err(format!(
                "session {id} is held in part and verify does not report it: {:?}",
                report.problems
            ));
        }
        if journal.session(*id).is_ok() {
            return Err(format!("session {id} is held in part and opens"));
        }
    }
    if hidden.is_empty() && !report.is_clean() {
        return Err(format!("verify: {:?}", report.problems));
    }
    Ok((listed.len() as u64, hidden.len() as u64, cut))
}

fn remove(target: &Path) {
    if target.is_dir() {
        std::fs::remove_dir_all(target).expect("remove a target");
    }
}

/// `rounds` kills of each kind of copy (more, up to three times as many,
/// until one was killed). `f` should hold sessions of more than 4,096
/// events: a copy writes a session in atomic appends of 4,096, so only
/// such sessions can be left cut short.
pub(super) fn copy_rounds(f: &Fixture, t: &mut MaintTotals, rng: &mut Rng, rounds: u64) {
    for kind in kinds(f) {
        let name = kind.name;
        let target = (kind.target)(u64::MAX);
        // (A whole run is checked after every kill: the re-run.)
        let (out, mut full) = run_whole(command(&kind.from, &target));
        assert!(out.status.success(), "copy {name}: {}", stderr(&out));
        if std::env::var_os("AJ_KILL_TIMING").is_some() {
            eprintln!("  copy {name}: a whole run {:.2} s", full.as_secs_f64());
        }
        remove(&target);
        let mut killed = 0;
        for round in 0..rounds * 3 {
            if round >= rounds && killed > 0 {
                break; // (more rounds only until one run was killed)
            }
            let target = (kind.target)(round);
            let delay = kill_delay(rng, full);
            match run_until(command(&kind.from, &target), delay) {
                Ran::Killed => {
                    killed += 1;
                    t.copy += 1;
                    // Killed after its last intent was removed: the copy
                    // was complete, and a re-run is refused ("already
                    // exists") with nothing left to do.
                    let mut complete = false;
                    match classify(f, &target) {
                        Ok((0, 0, _)) => t.absent += 1,
                        Ok((_, 0, _)) => {
                            t.whole += 1;
                            complete = true;
                        }
                        Ok((_, hidden, cut)) => {
                            t.copy_hidden += hidden;
                            t.copy_cut += cut;
                        }
                        Err(e) => {
                            t.incomplete += 1;
                            t.problem(format!(
                                "copy {name} round {round}, killed after {delay:?}: {e}"
                            ));
                        }
                    }
                    // The user runs the copy again: it must finish.
                    let (out, _) = run_whole(command(&kind.from, &target));
                    let done_already = complete && stderr(&out).contains("already exists");
                    if done_already {
                        if let Err(e) = check_whole(&target, &f.sessions) {
                            t.incomplete += 1;
                            t.problem(format!("copy {name} round {round}: whole? {e}"));
                        }
                    } else if !out.status.success() {
                        t.rerun_failed += 1;
                        t.problem(format!(
                            "copy {name} round {round}: the re-run fails: {}",
                            stderr(&out)
                        ));
                    } else if let Err(e) = check_whole(&target, &f.sessions) {
                        t.incomplete += 1;
                        t.problem(format!("copy {name} round {round}: after the re-run: {e}"));
                    }
                }
                Ran::Finished(out, took) => {
                    full = full.min(took);
                    t.finished += 1;
                    if !out.status.success() {
                        t.rerun_failed += 1;
                        t.problem(format!("copy {name} round {round}: {}", stderr(&out)));
                    } else if let Err(e) = check_whole(&target, &f.sessions) {
                        t.incomplete += 1;
                        t.problem(format!("copy {name} round {round}, finished: {e}"));
                    }
                }
            }
            remove(&target);
        }
    }
    if let Err(e) = check_whole(&f.db, &f.sessions) {
        t.source_damaged += 1;
        t.problem(format!("copy: the source {e}"));
    }
    if std::fs::read(&f.file).ok().as_deref() != Some(&f.file_bytes[..]) {
        t.source_damaged += 1;
        t.problem("copy: the source file changed".into());
    }
}
