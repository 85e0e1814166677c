//! The `agent-journal` binary, run as a user runs it: exit codes, output,
//! and what it leaves on disk.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;
use tempfile::TempDir;

/// What a run of the binary produced.
#[derive(Debug)]
struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Out {
    fn json(&self) -> Value {
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

    /// Asserts the run failed with `code` and exactly one `error:` line on stderr.
    fn assert_error(&self, code: i32) -> &str {
        assert_eq!(self.code, code, "{self:?}");
        let lines: Vec<&str> = self.stderr.lines().collect();
        assert_eq!(lines.len(), 1, "one line on stderr: {self:?}");
        assert!(lines[0].starts_with("error: "), "{self:?}");
        lines[0]
    }
}

fn command(db: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_agent-journal"));
    c.arg("--db")
        .arg(db)
        .env_remove("AGENT_JOURNAL_DB")
        .stdin(Stdio::null());
    c
}

/// Runs `agent-journal --db DB ARGS...` to completion.
fn aj(db: &Path, args: &[&str]) -> Out {
    let o = command(db).args(args).output().expect("run agent-journal");
    Out {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8(o.stdout).expect("utf-8 stdout"),
        stderr: String::from_utf8(o.stderr).expect("utf-8 stderr"),
    }
}

/// A database holding one demo session.
struct Demo {
    dir: TempDir,
    db: PathBuf,
    id: String,
}

impl Demo {
    fn new() -> Demo {
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

    fn run(&self, args: &[&str]) -> Out {
        aj(&self.db, args)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// `log --json` of the session as parsed events.
    fn events(&self, db: &Path, id: &str) -> Vec<Value> {
        let out = aj(db, &["log", id, "--json"]);
        assert_eq!(out.code, 0, "{out:?}");
        out.json().as_array().expect("array").clone()
    }
}

fn path_str(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// The seq at the start of a timeline line.
fn line_seq(line: &str) -> u64 {
    line.split_whitespace()
        .next()
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("no seq at the start of {line:?}"))
}

/// The name of an event's variant in `log --json` (externally tagged).
fn kind(e: &Value) -> &str {
    match &e["event"] {
        Value::Object(m) => m.keys().next().expect("a variant"),
        Value::String(s) => s,
        other => panic!("unexpected event shape {other}"),
    }
}

#[test]
fn demo_records_a_finished_session_that_sessions_lists() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    let sb = dir.path().join("sb");
    let out = aj(&db, &["demo", "--sandbox", path_str(&sb)]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stderr.is_empty(), "{out:?}");

    let listed = aj(&db, &["sessions", "--json"]);
    assert_eq!(listed.code, 0, "{listed:?}");
    let v = listed.json();
    let all = v.as_array().expect("array");
    assert_eq!(all.len(), 1, "{v}");
    let s = &all[0];
    let id = s["id"].as_str().expect("id");
    assert!(
        out.stdout.contains(&format!("recorded session {id}")),
        "{out:?}"
    );
    assert_eq!(s["events"], 23);
    assert_eq!(s["status"], "finished");
    assert_eq!(s["labels"][0], serde_json::json!(["agent", "demo"]));
    assert_eq!(s["labels"][1][0], "sandbox");
    for field in ["created", "last_activity"] {
        let t = s[field].as_str().expect(field);
        assert!(
            chrono::DateTime::parse_from_rfc3339(t).is_ok(),
            "{field}: {t}"
        );
    }

    // The tools really ran, in the sandbox given.
    let sandbox = s["labels"][1][1].as_str().expect("sandbox label");
    assert!(
        std::path::Path::new(sandbox).starts_with(sb.canonicalize().expect("sb")),
        "{sandbox}"
    );
    let notes = std::path::Path::new(sandbox).join("notes.txt");
    let text = std::fs::read_to_string(&notes).expect("notes.txt written by the demo's tool");
    assert!(text.contains("buy milk"), "{text}");

    let table = aj(&db, &["sessions"]);
    assert_eq!(table.code, 0, "{table:?}");
    let row = table
        .stdout
        .lines()
        .find(|l| l.starts_with(id))
        .unwrap_or_else(|| panic!("{id} not listed: {table:?}"));
    let cols: Vec<&str> = row.split_whitespace().collect();
    assert!(cols.contains(&"23") && cols.contains(&"finished"), "{row}");
}

#[test]
fn log_shows_one_line_per_event_and_from_to_restrict_it() {
    let d = Demo::new();
    let out = d.run(&["log", &d.id]);
    assert_eq!(out.code, 0, "{out:?}");
    let seqs: Vec<u64> = out.lines().iter().map(|l| line_seq(l)).collect();
    assert_eq!(seqs, (0..23).collect::<Vec<_>>(), "{}", out.stdout);

    let out = d.run(&["log", &d.id, "--from", "5", "--to", "9"]);
    assert_eq!(out.code, 0, "{out:?}");
    let seqs: Vec<u64> = out.lines().iter().map(|l| line_seq(l)).collect();
    assert_eq!(seqs, vec![5, 6, 7, 8, 9]);

    let out = d.run(&["log", &d.id, "--from", "15"]);
    assert_eq!(out.lines().len(), 8, "{out:?}");

    let all = d.events(&d.db, &d.id);
    assert_eq!(all.len(), 23);
    for (i, e) in all.iter().enumerate() {
        assert_eq!(e["seq"], i as u64);
        assert_eq!(e["session"], d.id.as_str());
    }
    assert_eq!(kind(&all[0]), "SessionOpened");
    assert_eq!(kind(&all[22]), "EvaluationFinished");

    let out = d.run(&["log", &d.id, "--json", "--from", "5", "--to", "9"]);
    assert_eq!(out.code, 0, "{out:?}");
    let part = out.json();
    let part = part.as_array().expect("array");
    assert_eq!(part.len(), 5);
    assert_eq!(part[..], all[5..10]);

    // Past the head: an error, not an empty timeline.
    d.run(&["log", &d.id, "--from", "5", "--to", "25"])
        .assert_error(1);
}

#[test]
fn sessions_are_found_by_unique_prefix_and_bad_prefixes_are_one_line_errors() {
    let d = Demo::new();
    let fork = d.run(&["fork", &d.id, "--at", "3", "--json"]);
    assert_eq!(fork.code, 0, "{fork:?}");
    let other = fork.json()["session"].as_str().expect("id").to_owned();
    let common =
        d.id.chars()
            .zip(other.chars())
            .take_while(|(a, b)| a == b)
            .count();

    let unique = &d.id[..common + 1];
    let out = d.run(&["log", unique]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(out.lines().len(), 23);
    let upper = unique.to_ascii_uppercase();
    assert_eq!(d.run(&["log", &upper]).lines().len(), 23);

    let ambiguous = &d.id[..common];
    let line = d.run(&["log", ambiguous]).assert_error(1).to_owned();
    assert!(line.contains("matches 2 sessions"), "{line}");

    let line = d.run(&["log", "zz"]).assert_error(1).to_owned();
    assert!(line.contains("no session matches \"zz\""), "{line}");

    let unknown = agent_journal::SessionId::new().to_string();
    let line = d.run(&["show", &unknown]).assert_error(1).to_owned();
    assert!(
        line.contains(&unknown) && line.contains("not found"),
        "{line}"
    );
}

#[test]
fn show_at_a_seq_shows_the_state_right_after_it() {
    let d = Demo::new();
    let events = d.events(&d.db, &d.id);
    let started = events
        .iter()
        .find(|e| e["event"]["ToolStatus"]["status"] == "started")
        .expect("a tool started");
    let at = started["seq"].as_u64().expect("seq");
    let call = started["event"]["ToolStatus"]["call_id"]
        .as_str()
        .expect("call id");

    let status_at = |at: Option<u64>| -> String {
        let at_text = at.map(|a| a.to_string());
        let mut args = vec!["show", d.id.as_str()];
        if let Some(a) = &at_text {
            args.extend(["--at", a.as_str()]);
        }
        let out = d.run(&args);
        assert_eq!(out.code, 0, "{out:?}");
        let row = out
            .stdout
            .lines()
            .find(|l| l.trim_start().starts_with(call))
            .unwrap_or_else(|| panic!("no row for {call}: {}", out.stdout));
        row.split_whitespace().nth(2).expect("status").to_owned()
    };
    assert_eq!(status_at(Some(at - 1)), "pending");
    assert_eq!(status_at(Some(at)), "started");
    assert_eq!(status_at(None), "completed");
    assert_eq!(status_at(Some(22)), "completed");

    let out = d.run(&["show", &d.id, "--at", "3"]);
    assert!(out.stdout.contains("at seq 3 (of 22)"), "{out:?}");

    let out = d.run(&["show", &d.id, "--json"]);
    assert_eq!(out.code, 0, "{out:?}");
    let v = out.json();
    let keys: Vec<&str> = v
        .as_object()
        .expect("object")
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "children_ids",
            "created_at",
            "parent_id",
            "policies",
            "slices",
            "tags",
            "version"
        ]
    );
    assert!(!v["slices"].as_array().expect("slices").is_empty());

    let line = d
        .run(&["show", &d.id, "--at", "23"])
        .assert_error(1)
        .to_owned();
    assert!(line.contains("seq 23") && line.contains(&d.id), "{line}");
}

#[test]
fn verify_finds_a_flipped_byte_and_names_the_session_and_seq() {
    let d = Demo::new();
    let out = d.run(&["verify"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stderr.is_empty(), "no progress bar on a pipe: {out:?}");
    assert_eq!(d.run(&["verify", "--json"]).json()["ok"], true);

    // Damage event 10 (of 0..23) with the CLI not running.
    {
        let id: agent_journal::SessionId = d.id.parse().expect("id");
        let db = sled::open(&d.db).expect("raw sled open");
        let events = db.open_tree("events").expect("tree events");
        let mut key = id.as_bytes().to_vec();
        key.extend_from_slice(&10u64.to_be_bytes());
        let mut v = events.get(&key).expect("get").expect("present").to_vec();
        assert!(v.len() > 12);
        v[12] ^= 0x5a;
        events.insert(key, v).expect("insert");
        db.flush().expect("flush");
    }

    let out = d.run(&["verify"]);
    assert_eq!(out.code, 3, "{out:?}");
    for text in [&out.stdout, &out.stderr] {
        assert!(
            text.contains(&d.id) && text.contains("seq 10"),
            "names the place: {out:?}"
        );
    }
    assert!(out.stderr.starts_with("error: corruption"), "{out:?}");

    let out = d.run(&["verify", "--json"]);
    assert_eq!(out.code, 3, "{out:?}");
    let v = out.json();
    assert_eq!(v["ok"], false);
    assert_eq!(v["problems"][0]["session"], d.id.as_str());
    assert_eq!(v["problems"][0]["seq"], 10);
    assert_eq!(v["problems"][0]["kind"], "damage");

    assert_eq!(d.run(&["verify", &d.id]).code, 3);
    for cmd in ["log", "show"] {
        let out = d.run(&[cmd, &d.id]);
        assert_eq!(out.code, 3, "{cmd}: {out:?}");
        assert!(
            out.stderr.contains("seq 10") && out.stderr.contains(&d.id),
            "{cmd}: {out:?}"
        );
    }
}

#[test]
fn an_exported_journal_imports_elsewhere_and_serves_read_commands() {
    let d = Demo::new();
    let file = d.path("run.ajournal");
    let out = d.run(&[
        "export",
        &d.id,
        "--format",
        "journal",
        "-o",
        path_str(&file),
    ]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stderr.is_empty(), "no progress bar on a pipe: {out:?}");
    assert!(out.stdout.contains("wrote 23 events"), "{out:?}");
    let original = d.run(&["log", &d.id, "--json"]).stdout;

    let other = d.path("other");
    let out = aj(&other, &["import", path_str(&file), "--format", "journal"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains(&d.id), "{out:?}");
    assert_eq!(aj(&other, &["log", &d.id, "--json"]).stdout, original);

    // A second import is refused and changes nothing.
    let line = aj(&other, &["import", path_str(&file), "--format", "journal"])
        .assert_error(1)
        .to_owned();
    assert!(
        line.contains(&d.id) && line.contains("already exists"),
        "{line}"
    );
    assert_eq!(aj(&other, &["log", &d.id, "--json"]).stdout, original);
    assert_eq!(
        aj(&other, &["sessions", "--json"])
            .json()
            .as_array()
            .map(Vec::len),
        Some(1)
    );

    // The file itself is a read-only database.
    let out = aj(&file, &["sessions", "--json"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(out.json()[0]["id"], d.id.as_str());
    assert_eq!(out.json()[0]["events"], 23);
    assert_eq!(aj(&file, &["log", &d.id, "--json"]).stdout, original);
    assert_eq!(aj(&file, &["log", &d.id]).lines().len(), 23);
    let out = aj(&file, &["show", &d.id]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("completed"), "{out:?}");
    let out = aj(&file, &["verify"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stderr.is_empty(), "{out:?}");

    // --at belongs to wink exports.
    let out = d.run(&[
        "export",
        &d.id,
        "--format",
        "journal",
        "--at",
        "3",
        "-o",
        path_str(&d.path("x.ajournal")),
    ]);
    out.assert_error(1);
    assert!(!d.path("x.ajournal").exists());

    let out = d.run(&["export", &d.id, "--format", "wink"]);
    assert_eq!(out.code, 0, "{out:?}");
    let v = out.json();
    assert_eq!(v["tags"]["session"], d.id.as_str());
    assert_eq!(v["tags"]["seq"], "22");
    assert!(v["slices"].is_array(), "{v}");
}

#[test]
fn a_cut_exported_journal_fails_verify_at_its_offset_and_keeps_its_prefix() {
    let d = Demo::new();
    let file = d.path("run.ajournal");
    let out = d.run(&[
        "export",
        &d.id,
        "--format",
        "journal",
        "-o",
        path_str(&file),
    ]);
    assert_eq!(out.code, 0, "{out:?}");
    let bytes = std::fs::read(&file).expect("read");
    let offsets = crate::common::record_offsets(&bytes);
    assert_eq!(offsets.len(), 23);
    let last = offsets[22];
    let cut = d.path("cut.ajournal");
    // The last 3 bytes of the last record gone, and the trailer after it.
    let end = bytes.len() - agent_journal::format::ajournal::TRAILER_LEN - 3;
    std::fs::write(&cut, &bytes[..end]).expect("write");

    let out = aj(&cut, &["verify"]);
    assert_eq!(out.code, 3, "{out:?}");
    let needle = format!("byte offset {last}");
    assert!(out.stdout.contains(&needle), "{out:?}");
    assert!(
        out.stderr.starts_with("error: corruption") && out.stderr.contains(&needle),
        "{out:?}"
    );
    let out = aj(&cut, &["verify", "--json"]);
    assert_eq!(out.code, 3, "{out:?}");
    let v = out.json();
    assert_eq!(v["ok"], false);
    assert_eq!(v["file_tail"]["offset"], last as u64);

    let out = aj(&cut, &["log", &d.id]);
    assert_eq!(out.code, 0, "{out:?}");
    let seqs: Vec<u64> = out
        .lines()
        .iter()
        .filter(|l| !l.starts_with("!!"))
        .map(|l| line_seq(l))
        .collect();
    assert_eq!(seqs, (0..22).collect::<Vec<_>>());
    assert_eq!(std::fs::read(&cut).expect("read").len(), end);

    // Cut exactly between two records: the trailer is missing, and says so.
    let between = d.path("between.ajournal");
    std::fs::write(&between, &bytes[..offsets[10]]).expect("write");
    let out = aj(&between, &["verify"]);
    assert_eq!(out.code, 3, "{out:?}");
    let needle = format!("cut short at byte offset {}", offsets[10]);
    assert!(
        out.stdout.contains(&needle) && out.stdout.contains("without its trailer"),
        "{out:?}"
    );
}

#[test]
fn log_of_a_cut_exported_journal_reports_the_cut() {
    let d = Demo::new();
    let file = d.path("run.ajournal");
    let out = d.run(&[
        "export",
        &d.id,
        "--format",
        "journal",
        "-o",
        path_str(&file),
    ]);
    assert_eq!(out.code, 0, "{out:?}");
    let bytes = std::fs::read(&file).expect("read");
    let last = crate::common::record_offsets(&bytes)[22];
    let end = bytes.len() - agent_journal::format::ajournal::TRAILER_LEN - 3;
    std::fs::write(&file, &bytes[..end]).expect("write");
    let out = aj(&file, &["log", &d.id]);
    let needle = format!("byte offset {last}");
    assert!(
        out.stdout.contains(&needle) || out.stderr.contains(&needle),
        "the cut should be reported as a sled torn tail is: {out:?}"
    );
}

#[test]
fn usage_errors_exit_2_and_touch_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    let id = agent_journal::SessionId::new().to_string();
    for args in [
        vec!["frobnicate"],
        vec!["log"],
        vec!["log", &id, "--from", "five"],
        vec!["fork", &id],
        vec!["export", &id],
        vec!["export", &id, "--format", "xml"],
        vec!["import", "x.ajournal", "--format", "yaml"],
        vec![],
    ] {
        let out = aj(&db, &args);
        assert_eq!(out.code, 2, "{args:?}: {out:?}");
        assert!(!out.stderr.is_empty(), "{args:?}: {out:?}");
        assert!(out.stdout.is_empty(), "{args:?}: {out:?}");
    }
    assert!(!db.exists(), "a usage error created the database");
}

#[test]
fn paths_that_are_not_databases_exit_1_and_are_left_alone() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("missing");
    for cmd in [&["sessions"][..], &["verify"], &["log", "0"]] {
        let line = aj(&missing, cmd).assert_error(1).to_owned();
        assert!(line.contains(path_str(&missing)), "{cmd:?}: {line}");
        assert!(!missing.exists(), "{cmd:?} created {}", missing.display());
    }

    let text = dir.path().join("notes.txt");
    std::fs::write(&text, "just some notes\n").expect("write");
    let line = aj(&text, &["sessions"]).assert_error(1).to_owned();
    assert!(
        line.contains("not an agent-journal database") && line.contains(path_str(&text)),
        "{line}"
    );
    assert_eq!(
        std::fs::read_to_string(&text).expect("read"),
        "just some notes\n"
    );
}

#[test]
fn a_locked_database_is_reported_by_path() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    let journal = agent_journal::Journal::open(&db).expect("open");
    journal.create_session().expect("create");
    for cmd in [&["sessions"][..], &["demo"]] {
        let line = aj(&db, cmd).assert_error(1).to_owned();
        assert!(
            line.contains("locked") && line.contains(path_str(&db)),
            "{cmd:?}: {line}"
        );
    }
    assert_eq!(journal.sessions().expect("sessions").len(), 1);
    drop(journal);
    let out = aj(&db, &["sessions", "--json"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(out.json().as_array().map(Vec::len), Some(1));
}

#[test]
fn fork_creates_a_session_that_starts_with_opened_and_forked() {
    let d = Demo::new();
    let out = d.run(&["fork", &d.id, "--at", "5"]);
    assert_eq!(out.code, 0, "{out:?}");
    let new_id = out
        .stdout
        .strip_prefix("forked session ")
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or_else(|| panic!("{out:?}"))
        .to_owned();
    assert_ne!(new_id, d.id);

    let parent = d.events(&d.db, &d.id);
    let fork = d.events(&d.db, &new_id);
    assert_eq!(fork.len(), 7, "SessionOpened, Forked, then events 1..=5");
    assert_eq!(kind(&fork[0]), "SessionOpened");
    assert_eq!(kind(&fork[1]), "Forked");
    assert_eq!(fork[1]["event"]["Forked"]["parent"], d.id.as_str());
    assert_eq!(fork[1]["event"]["Forked"]["at"], 5);
    for (f, p) in fork[2..].iter().zip(&parent[1..=5]) {
        assert_eq!(f["event"], p["event"]);
    }
    let text = d.run(&["log", &new_id]);
    let first: Vec<&str> = text.lines().iter().take(2).copied().collect();
    assert!(
        first[0].contains("SessionOpened") && first[1].contains("Forked"),
        "{text:?}"
    );
    assert_eq!(
        d.run(&["sessions", "--json"])
            .json()
            .as_array()
            .map(Vec::len),
        Some(2)
    );

    let line = d
        .run(&["fork", &d.id, "--at", "23"])
        .assert_error(1)
        .to_owned();
    assert!(line.contains("seq 23"), "{line}");
    assert_eq!(
        d.run(&["sessions", "--json"])
            .json()
            .as_array()
            .map(Vec::len),
        Some(2)
    );
}

#[test]
fn diff_shows_what_happened_between_two_seqs() {
    let d = Demo::new();
    // Events 4..=10: a provider call, the assistant's two calls, the first
    // call started, its result, completed, the second started, its result.
    let v = d.run(&["diff", &d.id, "3", "10", "--json"]).json();
    assert_eq!((v["from"].as_u64(), v["to"].as_u64()), (Some(3), Some(10)));
    assert_eq!(v["events"], 7, "{v}");
    let new: Vec<(String, u64)> = v["new_messages"]
        .as_array()
        .expect("array")
        .iter()
        .map(|m| {
            (
                m["role"].as_str().unwrap_or("").to_owned(),
                m["sequence"].as_u64().unwrap_or(99),
            )
        })
        .collect();
    let want: Vec<(String, u64)> = [("assistant", 2), ("tool", 3), ("tool", 4)]
        .iter()
        .map(|(r, q)| ((*r).to_owned(), *q))
        .collect();
    assert_eq!(new, want, "{v}");
    let calls = v["tool_calls"].as_array().expect("array");
    let call = |id: &str| {
        calls
            .iter()
            .find(|c| c["call_id"] == id)
            .unwrap_or_else(|| panic!("{id} in {v}"))
    };
    assert_eq!(
        (
            call("call_1_1")["from"].is_null(),
            call("call_1_1")["to"].as_str()
        ),
        (true, Some("completed"))
    );
    assert_eq!(call("call_1_2")["to"], "started");
    assert_eq!(calls.len(), 2, "{v}");
    assert_eq!(
        (
            v["tokens"]["input"].as_u64(),
            v["tokens"]["output"].as_u64()
        ),
        (Some(53), Some(8))
    );

    // The end of the run: the final answer and the evaluation's finish.
    let text = d.run(&["diff", &d.id, "20", "22"]);
    assert_eq!(text.code, 0, "{text:?}");
    assert!(
        text.stdout.contains("from seq 20 to seq 22: 2 events"),
        "{text:?}"
    );
    assert!(text.stdout.contains("+ assistant seq=8"), "{text:?}");
    let v = d.run(&["diff", &d.id, "20", "22", "--json"]).json();
    let evals = v["evaluations"].as_array().expect("array");
    assert_eq!(evals.len(), 1, "{v}");
    assert!(
        evals[0]
            .as_str()
            .is_some_and(|e| e.ends_with(" finished: succeeded")),
        "{v}"
    );

    // A message appended again (same id) is not new; one appended twice
    // within the range is listed once.
    {
        let j = agent_journal::Journal::open(&d.db).expect("open");
        let s = j
            .sessions()
            .expect("sessions")
            .into_iter()
            .next()
            .expect("one");
        let s = j.session(s).expect("session");
        let events = s.events(7..8).expect("event 7");
        s.append(events[0].event.clone()).expect("duplicate");
        let eval = match &events[0].event {
            agent_journal::Event::Message(m) => m.evaluation_id,
            other => panic!("event 7 is {other:?}"),
        };
        let fresh = agent_journal::InnerMessage::new(agent_journal::Role::User, "again?", eval, 9);
        for _ in 0..2 {
            s.append(agent_journal::Event::Message(fresh.clone()))
                .expect("append");
        }
    }
    let v = d.run(&["diff", &d.id, "22", "25", "--json"]).json();
    assert_eq!(v["events"], 3, "{v}");
    let new = v["new_messages"].as_array().expect("array");
    assert_eq!(new.len(), 1, "{v}");
    assert_eq!(new[0]["content"], "again?");

    let line = d
        .run(&["diff", &d.id, "10", "3"])
        .assert_error(1)
        .to_owned();
    assert!(line.contains("A <= B"), "{line}");
    let line = d
        .run(&["diff", &d.id, "3", "99"])
        .assert_error(1)
        .to_owned();
    assert!(line.contains("99"), "{line}");
}

#[test]
fn pending_shows_the_crash_point_and_the_unfinished_tool_calls() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    let sb = dir.path().join("sb");
    // Event 6 is the first call's `Started`: the process aborts right
    // after it, with that call in doubt and the second one pending.
    let out = aj(
        &db,
        &["demo", "--sandbox", path_str(&sb), "--crash-after", "6"],
    );
    assert_ne!(out.code, 0, "{out:?}");
    let sessions = aj(&db, &["sessions", "--json"]).json();
    let id = sessions[0]["id"].as_str().expect("id").to_owned();

    let v = aj(&db, &["pending", &id, "--json"]).json();
    assert_eq!(v["session"], id.as_str());
    assert_eq!(
        (v["crash_point"].as_u64(), v["state"].as_str()),
        (Some(6), Some("in-doubt"))
    );
    assert_eq!(
        (v["messages"].as_u64(), v["next_sequence"].as_u64()),
        (Some(3), Some(3))
    );
    let ids = |k: &str| -> Vec<String> {
        v[k].as_array()
            .expect("array")
            .iter()
            .map(|c| {
                format!(
                    "{} {}",
                    c["call_id"].as_str().unwrap_or(""),
                    c["status"].as_str().unwrap_or("")
                )
            })
            .collect()
    };
    assert_eq!(ids("in_doubt"), ["call_1_1 started"], "{v}");
    assert_eq!(ids("pending"), ["call_1_2 pending"], "{v}");

    let text = aj(&db, &["pending", &id]);
    assert_eq!(text.code, 0, "{text:?}");
    assert!(text.stdout.contains("crash point: seq 6"), "{text:?}");
    assert!(
        text.stdout.contains("in doubt:") && text.stdout.contains("call_1_1"),
        "{text:?}"
    );

    // A finished session has nothing pending.
    let d = Demo::new();
    let v = d.run(&["pending", &d.id, "--json"]).json();
    assert_eq!(v["state"], "finished", "{v}");
    assert_eq!(
        (
            v["in_doubt"].as_array().map(Vec::len),
            v["pending"].as_array().map(Vec::len)
        ),
        (Some(0), Some(0)),
        "{v}"
    );
    let line = aj(&db, &["pending", "ffff"]).assert_error(1).to_owned();
    assert!(line.contains("no session matches"), "{line}");
}

#[test]
fn a_closed_stdout_is_not_a_panic() {
    let d = Demo::new();
    for cmd in ["log", "show"] {
        let mut child = command(&d.db)
            .args([cmd, d.id.as_str()])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        // Close the reading end before the child prints (it opens sled first).
        drop(child.stdout.take());
        let out = child.wait_with_output().expect("wait");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !stderr.contains("panicked") && out.status.code() != Some(101),
            "{cmd}: {:?} {stderr}",
            out.status
        );
    }
}
