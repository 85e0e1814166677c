//! `resume` cannot repeat itself: a second resume of a session with nothing
//! left to do says so, writes nothing and exits 0; a session and the forks
//! made at its crash point share the tool calls left open there, so
//! resuming the parent and its fork (in either order, either way) runs each
//! of them once. Runs are counted twice over: every `started` status the
//! sessions record past their shared prefix (a tool runs right after its
//! `started` is durable), and every real execution of `write_file` in the
//! sandbox's execution log.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;
use tempfile::TempDir;

use super::{Out, aj, crash_a_conversation};
use crate::common::path_str;

/// A database with one demo run crashed right after event `n`.
struct Crashed {
    _dir: TempDir,
    db: PathBuf,
    sb: PathBuf,
    id: String,
}

impl Crashed {
    fn new(n: u64) -> Crashed {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = dir.path().join("db");
        let sb = dir.path().join("sb");
        let out = aj(
            &db,
            &[
                "demo",
                "--sandbox",
                path_str(&sb),
                "--crash-after",
                &n.to_string(),
            ],
        );
        assert_ne!(out.code, 0, "it crashed: {out:?}");
        let sessions = aj(&db, &["--json", "sessions"]).json_lines();
        assert_eq!(sessions.len(), 1);
        let id = sessions[0]["id"].as_str().expect("id").to_owned();
        Crashed {
            _dir: dir,
            db,
            sb,
            id,
        }
    }

    fn run(&self, args: &[&str]) -> Out {
        aj(&self.db, args)
    }

    /// `--json resume ID [extra]`, which must succeed: its object.
    fn resume(&self, id: &str, extra: &[&str]) -> Value {
        let mut args = vec!["--json", "resume", id];
        args.extend_from_slice(extra);
        let out = self.run(&args);
        assert_eq!(out.code, 0, "{args:?}: {out:?}");
        out.json()
    }

    /// Every session's head.
    fn heads(&self) -> BTreeMap<String, u64> {
        self.run(&["--json", "sessions"])
            .json_lines()
            .iter()
            .map(|s| {
                (
                    s["id"].as_str().expect("id").to_owned(),
                    s["events"].as_u64().expect("events"),
                )
            })
            .collect()
    }

    /// How many times each tool call started, over every session: a fork
    /// counted from its own events on (after `forked`), not its parent's.
    fn runs(&self) -> BTreeMap<String, usize> {
        let mut runs = BTreeMap::new();
        for id in self.heads().keys() {
            let events = self.run(&["--json", "log", id]).json_lines();
            let own = events
                .iter()
                .position(|e| e["type"] == "forked")
                .map_or(0, |i| i + 1);
            for e in &events[own..] {
                if e["type"] == "tool_status" && e["status"] == "started" {
                    let call = e["call_id"].as_str().expect("call id").to_owned();
                    *runs.entry(call).or_default() += 1;
                }
            }
        }
        runs
    }

    /// The lines of the sandboxes' execution logs (`write_file` runs).
    fn executions(&self) -> Vec<String> {
        executions(&self.sb)
    }
}

fn executions(root: &Path) -> Vec<String> {
    let mut lines = Vec::new();
    for dir in std::fs::read_dir(root).expect("sandbox root").flatten() {
        if let Ok(text) = std::fs::read_to_string(dir.path().join(".executions.log")) {
            lines.extend(text.lines().map(str::to_owned));
        }
    }
    lines.sort();
    lines
}

/// Each of the demo's four tool calls ran exactly once, and each
/// `write_file` wrote once.
fn assert_each_tool_ran_once(c: &Crashed) {
    let runs = c.runs();
    assert_eq!(runs.len(), 4, "every call ran: {runs:?}");
    assert!(runs.values().all(|n| *n == 1), "a call ran twice: {runs:?}");
    let ex = c.executions();
    assert_eq!(ex.len(), 2, "each write_file ran once: {ex:?}");
}

/// Crashed after event 5 (the first assistant message: both `write_file`
/// calls pending), resumed, then resumed again: the second run does
/// nothing, in text and in JSON, and writes nothing.
#[test]
fn resume_twice_runs_nothing_the_second_time() {
    let c = Crashed::new(5);
    let first = c.resume(&c.id, &[]);
    assert_eq!(first["session"], c.id.as_str(), "continued in place");
    assert_eq!(first["state_at_crash"], "pending_tools");
    assert_eq!(first["outcome"], "succeeded");
    let heads = c.heads();
    let again = c.resume(&c.id, &[]);
    assert_eq!(again["session"], c.id.as_str());
    assert_eq!(again["resumed_in"], Value::Null);
    assert!(
        again["nothing_to_do"]
            .as_str()
            .is_some_and(|r| r.contains("finished")),
        "{again}"
    );
    let text = c.run(&["resume", &c.id]);
    assert_eq!(text.code, 0, "{text:?}");
    assert!(text.stdout.contains("nothing to resume"), "{text:?}");
    assert_eq!(
        c.heads(),
        heads,
        "the second and third resume wrote nothing"
    );
    assert_each_tool_ran_once(&c);

    // The crash point stays on the timeline, marked where the resume began.
    let log = c.run(&["--json", "log", &c.id]).json_lines();
    let marks: Vec<&Value> = log
        .iter()
        .filter(|e| e["kind"] == "agent_journal.resumed")
        .collect();
    assert_eq!(marks.len(), 1, "one marker");
    assert_eq!(marks[0]["seq"], 6, "right after the crash point");
    let mark: Value = serde_json::from_str(marks[0]["text"].as_str().expect("text")).expect("json");
    assert_eq!(mark["crash_point"], 5);
    assert_eq!(mark["from"], c.id.as_str());
    assert_eq!(mark["state"], "pending_tools");
    let status = &c.run(&["--json", "sessions"]).json_lines()[0]["status"];
    assert_eq!(status, "finished", "the session itself is finished");
}

/// Crashed after event 13 (the second assistant message: `word_count` and
/// `list_dir` pending), resumed with `--fork`: resuming the parent (in
/// place or forking again) and the fork does nothing more, and `pending`
/// of the parent lists the fork and the calls it finished.
#[test]
fn resume_of_a_parent_and_of_its_fork_never_runs_a_tool_twice() {
    let c = Crashed::new(13);
    let pending = c.run(&["--json", "pending", &c.id]).json();
    let open: Vec<&str> = pending["pending"]
        .as_array()
        .expect("pending")
        .iter()
        .map(|p| p["call_id"].as_str().expect("id"))
        .collect();
    assert_eq!(open, ["call_2_1", "call_2_2"], "{pending}");
    let forked = c.resume(&c.id, &["--fork"]);
    let fork = forked["session"].as_str().expect("fork").to_owned();
    assert_ne!(fork, c.id, "--fork makes a fork");
    let heads = c.heads();
    for extra in [&[][..], &["--fork"][..]] {
        let again = c.resume(&c.id, extra);
        assert_eq!(again["resumed_in"], fork.as_str(), "{extra:?}: {again}");
    }
    let again = c.resume(&fork, &[]);
    assert!(again["nothing_to_do"].is_string(), "{again}");
    assert_eq!(c.heads(), heads, "no resume after the first wrote anything");
    assert_eq!(heads.len(), 2, "one fork");
    assert_each_tool_ran_once(&c);

    let pending = c.run(&["--json", "pending", &c.id]).json();
    assert_eq!(pending["resumed_in"], fork.as_str());
    let forks = pending["forks"].as_array().expect("forks");
    assert_eq!(forks.len(), 1, "{pending}");
    assert_eq!(forks[0]["session"], fork.as_str());
    assert_eq!(forks[0]["at"], 13);
    assert_eq!(forks[0]["status"], "finished");
    assert_eq!(
        forks[0]["finished"],
        serde_json::json!(["call_2_1", "call_2_2"])
    );
    let text = c.run(&["pending", &c.id]);
    assert!(text.stdout.contains(&fork), "{text:?}");
    assert!(text.stdout.contains("nothing to do"), "{text:?}");
}

/// The other order: the parent resumed in place, then a fork made by hand
/// at its old crash point: resuming the fork does nothing, since its
/// parent already ran what was open there.
#[test]
fn a_fork_at_a_crash_point_its_parent_resumed_from_runs_nothing() {
    let c = Crashed::new(5);
    c.resume(&c.id, &[]);
    let out = c.run(&["--json", "fork", &c.id, "--at", "5"]);
    assert_eq!(out.code, 0, "{out:?}");
    let fork = out.json()["session"].as_str().expect("fork").to_owned();
    let heads = c.heads();
    let again = c.resume(&fork, &["--sandbox", path_str(&c.sb)]);
    assert_eq!(again["resumed_in"], c.id.as_str(), "{again}");
    assert_eq!(c.heads(), heads);
    assert_each_tool_ran_once(&c);
}

/// A demo conversation killed inside its first turn: resumed in place, the
/// conversation keeps its id and `turns` shows no running turn; a second
/// resume does nothing; a `--fork` of it does nothing either.
#[test]
fn a_conversation_resumed_in_place_keeps_its_id_and_resumes_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    let sb = dir.path().join("sb");
    crash_a_conversation(&db, &sb);
    let id = aj(&db, &["--json", "sessions"]).json_lines()[0]["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let before = aj(&db, &["turns", &id]);
    assert!(before.stdout.contains("`resume` finishes it"), "{before:?}");
    let out = aj(&db, &["--json", "resume", &id]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(out.json()["conversation"], id.as_str(), "the same id");
    let turns = aj(&db, &["--json", "turns", &id]).json_lines();
    assert_eq!(turns.len(), 4, "the script ran to its end");
    assert!(
        turns
            .iter()
            .all(|t| !matches!(t["status"].as_str(), Some("running" | "pending"))),
        "{turns:?}"
    );
    let text = aj(&db, &["turns", &id]);
    assert!(!text.stdout.contains("interrupted"), "{text:?}");
    let heads = aj(&db, &["--json", "sessions"]).stdout;
    for extra in [&[][..], &["--fork"][..]] {
        let mut args = vec!["--json", "resume", &id];
        args.extend_from_slice(extra);
        let again = aj(&db, &args);
        assert_eq!(again.code, 0, "{again:?}");
        assert!(again.json()["nothing_to_do"].is_string(), "{again:?}");
    }
    assert_eq!(
        aj(&db, &["--json", "sessions"]).stdout,
        heads,
        "nothing written"
    );
    let ex = executions(&sb);
    assert_eq!(ex.len(), 2, "each write_file ran once: {ex:?}");
}
