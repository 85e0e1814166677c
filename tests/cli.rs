//! The `agent-journal` binary, run as a user runs it: exit codes, output,
//! and what it leaves on disk. The tests are grouped by what they run:
//! `inspect` (reading commands), `damage` (`verify` and cut exports),
//! `copies` (export, import, fork), `editing` (fork with an edit, diff of
//! two sessions), `errors` (misuse), `docs` (man pages, the hints `demo`
//! prints) and `finding` (filters, `--last`, prefixes). This file holds
//! what they share: a run's output ([`Out`]) and a database with one demo
//! session ([`Demo`]).

mod copies;
mod damage;
mod docs;
mod editing;
mod errors;
mod finding;
mod inspect;
mod one_model;
mod reading;
mod resuming;
mod timeline;
mod vocabulary;

use std::path::{Path, PathBuf};

use serde_json::Value;
use tempfile::TempDir;

use crate::common::{cli_command, path_str};

/// What a run of the binary produced (shared with `footguns`).
#[derive(Debug)]
pub(crate) struct Out {
    pub(crate) code: i32,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

impl Out {
    /// Runs `c` to completion.
    pub(crate) fn of(c: &mut std::process::Command) -> Out {
        let o = c.output().expect("run agent-journal");
        Out {
            code: o.status.code().unwrap_or(-1),
            stdout: String::from_utf8(o.stdout).expect("utf-8 stdout"),
            stderr: String::from_utf8(o.stderr).expect("utf-8 stderr"),
        }
    }

    /// stderr lines.
    pub(crate) fn stderr_lines(&self) -> Vec<&str> {
        self.stderr.lines().collect()
    }

    /// stdout parsed as JSON (the output of `--json`).
    pub(crate) fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {}", self.stdout))
    }

    /// Non-empty stdout lines.
    fn lines(&self) -> Vec<&str> {
        self.stdout
            .lines()
            .filter(|l| !l.trim().is_empty())
            .collect()
    }

    /// Asserts the run failed with `code` and exactly one error line on
    /// stderr: `error: ...`, or under `--json` `{"error": {code, kind,
    /// message}}` with the same code.
    pub(crate) fn assert_error(&self, code: i32) -> &str {
        assert_eq!(self.code, code, "{self:?}");
        let lines = self.stderr_lines();
        assert_eq!(lines.len(), 1, "one line on stderr: {self:?}");
        if lines[0].starts_with('{') {
            let v: Value = serde_json::from_str(lines[0]).expect("a JSON error");
            assert_eq!(v["error"]["code"], code, "{self:?}");
            assert!(v["error"]["kind"].is_string(), "{self:?}");
            assert!(v["error"]["message"].is_string(), "{self:?}");
        } else {
            assert!(lines[0].starts_with("error: "), "{self:?}");
        }
        lines[0]
    }

    /// stdout parsed as JSON Lines (`sessions` and `log` under `--json`).
    pub(crate) fn json_lines(&self) -> Vec<Value> {
        self.lines()
            .iter()
            .map(|l| {
                serde_json::from_str(l).unwrap_or_else(|e| panic!("a line is not JSON ({e}): {l}"))
            })
            .collect()
    }
}

/// Runs `demo --conversation` on `db` with its sandbox in `sandbox`,
/// killed right after event 9 (inside its first turn), and checks that it
/// died.
pub(crate) fn crash_a_conversation(db: &Path, sandbox: &Path) {
    let args = ["demo", "--conversation", "--sandbox", path_str(sandbox)];
    let out = aj(db, &[&args[..], &["--crash-after", "9"]].concat());
    assert_ne!(out.code, 0, "{out:?}");
}

/// Runs `agent-journal --db DB ARGS...` to completion.
pub(crate) fn aj(db: &Path, args: &[&str]) -> Out {
    Out::of(cli_command(db).args(args))
}

/// A database holding one demo session (shared with `footguns`).
pub(crate) struct Demo {
    pub(crate) dir: TempDir,
    /// The database.
    pub(crate) db: PathBuf,
    /// The session's id, as the binary prints it.
    pub(crate) id: String,
}

impl Demo {
    /// Runs `demo` (23 events, a finished session) in a new temporary
    /// directory.
    pub(crate) fn new() -> Demo {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = dir.path().join("db");
        let sb = dir.path().join("sb");
        let out = aj(&db, &["demo", "--json", "--sandbox", path_str(&sb)]);
        assert_eq!(out.code, 0, "{out:?}");
        let v = out.json();
        assert_eq!(v["events"], 23, "{v}");
        let id = v["session"].as_str().expect("session id").to_owned();
        Demo { dir, db, id }
    }

    /// Runs the binary on the demo's database.
    pub(crate) fn run(&self, args: &[&str]) -> Out {
        aj(&self.db, args)
    }

    /// Exports the demo session to `name` (an `.ajournal` file) and checks
    /// the command succeeded.
    pub(crate) fn export_journal(&self, name: &str) -> PathBuf {
        let file = self.path(name);
        let out = self.run(&[
            "export",
            &self.id,
            "--format",
            "journal",
            "-o",
            path_str(&file),
        ]);
        assert_eq!(out.code, 0, "{out:?}");
        file
    }

    /// A path in the demo's temporary directory.
    pub(crate) fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// `sessions --json` of the demo's database: (id, events) of each.
    pub(crate) fn sessions(&self) -> Vec<(String, u64)> {
        let out = self.run(&["sessions", "--json"]);
        assert_eq!(out.code, 0, "{out:?}");
        out.json_lines()
            .iter()
            .map(|s| {
                (
                    s["id"].as_str().expect("id").to_owned(),
                    s["events"].as_u64().expect("events"),
                )
            })
            .collect()
    }

    /// `log --json` of the session as parsed events.
    fn events(&self, db: &Path, id: &str) -> Vec<Value> {
        let out = aj(db, &["log", id, "--json"]);
        assert_eq!(out.code, 0, "{out:?}");
        out.json_lines()
    }
}

/// The seq at the start of a timeline line.
fn line_seq(line: &str) -> u64 {
    line.split_whitespace()
        .next()
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("no seq at the start of {line:?}"))
}

/// The `type` of an event in `log --json`.
fn kind(e: &Value) -> &str {
    e["type"].as_str().expect("a type")
}
