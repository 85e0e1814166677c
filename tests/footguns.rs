//! Footguns that lose data or mislead (issue 11, item 7), each reproduced
//! through the binary or the library:
//!
//! - an empty or blank session id is a usage error (exit 2) everywhere a
//!   session id is accepted, never "the prefix of every session";
//! - only `demo` and `import` create a database: every other command given
//!   a mistyped `--db` fails naming the path and leaves nothing on disk;
//! - the latest evaluation is the last one started in the stream, even
//!   when the clock stepped back and its id (UUIDv7) is the smaller one;
//! - warnings (a damaged end of an exported journal, a torn tail) go to
//!   stderr, one line each, in text and `--json` mode, and the data still
//!   prints on stdout.

use std::path::{Path, PathBuf};
use std::process::Command;

use agent_journal::resume::ResumeState;
use agent_journal::{
    EvaluationId, Event, Journal, Outcome, Session, SessionStatus, ToolCallRecord,
};
use serde_json::Value;

use crate::cli::{Demo, Out, aj};
use crate::common::{path_str, raw_sled, record_offsets, tree};

/// [`Out::assert_error`], and nothing on stdout.
fn assert_only_error(out: &Out, code: i32) -> &str {
    let line = out.assert_error(code);
    assert!(out.stdout.is_empty(), "nothing on stdout: {out:?}");
    line
}

/// Every command that takes a session, with `id` in the session's place.
fn commands_with_a_session(id: &str) -> Vec<Vec<&str>> {
    vec![
        vec!["sessions", "--delete", id],
        vec!["sessions", "--delete", id, "--force"],
        vec!["log", id],
        vec!["show", id],
        vec!["pending", id],
        vec!["diff", id, "0", "1"],
        vec!["export", id, "--format", "wink"],
        vec!["export", id, "--format", "journal"],
        vec!["verify", id],
        vec!["resume", id],
        vec!["fork", id, "--at", "1"],
    ]
}

// ---------------------------------------------------------------------------
// 1. An empty or blank session id.

#[test]
fn sessions_delete_of_an_empty_id_deletes_nothing() {
    let d = Demo::new();
    let out = d.run(&["sessions", "--delete", ""]);
    let line = assert_only_error(&out, 2).to_owned();
    assert!(line.contains("empty"), "{line}");
    assert_eq!(d.sessions(), vec![(d.id.clone(), 23)]);
}

#[test]
fn an_empty_or_blank_session_id_is_a_usage_error_everywhere() {
    let d = Demo::new();
    let before = tree(&d.db);
    for blank in ["", " ", "\t", "  \n "] {
        for args in commands_with_a_session(blank) {
            let mut args = args;
            for json in [false, true] {
                if json {
                    args.push("--json");
                }
                let out = d.run(&args);
                let line = assert_only_error(&out, 2);
                assert!(
                    line.contains("session id") && line.contains("empty or blank"),
                    "{args:?}: {line}"
                );
            }
        }
    }
    assert!(tree(&d.db) == before, "a usage error changed the database");
    assert_eq!(d.sessions(), vec![(d.id.clone(), 23)]);
    assert!(!d.path("agent-journal-sandbox").exists());

    // On a database that does not exist: still a usage error, and nothing created.
    let missing = d.path("missing");
    for args in commands_with_a_session("") {
        assert_only_error(&aj(&missing, &args), 2);
        assert!(!missing.exists(), "{args:?} created {}", missing.display());
    }
}

// ---------------------------------------------------------------------------
// 2. A mistyped --db.

/// The files and directories under `dir`, by path.
fn listing(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).expect("read_dir") {
            let p = entry.expect("entry").path();
            if p.is_dir() {
                stack.push(p.clone());
            }
            out.push(p);
        }
    }
    out.sort();
    out
}

#[test]
fn a_mistyped_db_is_created_only_by_demo_and_import() {
    let d = Demo::new();
    let file = d.export_journal("run.ajournal");
    let empty_dir = d.path("empty-dir");
    std::fs::create_dir(&empty_dir).expect("mkdir");
    let before = listing(d.dir.path());
    let id = d.id.as_str();
    let mut commands = commands_with_a_session(id);
    commands.extend([
        vec!["sessions"],
        vec!["verify"],
        vec!["export", id, "--format", "openai"],
        vec!["resume", id, "--fork"],
    ]);
    for typo in [d.path("db2"), d.path("no/such/dir/db"), empty_dir.clone()] {
        for args in &commands {
            let mut args = args.clone();
            for json in [false, true] {
                if json {
                    args.push("--json");
                }
                let out = aj(&typo, &args);
                let line = assert_only_error(&out, 1);
                assert!(line.contains(path_str(&typo)), "{args:?}: {line}");
                assert_eq!(
                    listing(d.dir.path()),
                    before,
                    "{args:?} on {} left something behind",
                    typo.display()
                );
            }
        }
    }

    // The default database in the current directory: the same.
    let cwd = tempfile::tempdir().expect("tempdir");
    for args in [vec!["resume", id], vec!["fork", id, "--at", "1"]] {
        let out = Out::of(
            Command::new(env!("CARGO_BIN_EXE_agent-journal"))
                .args(&args)
                .current_dir(cwd.path())
                .env_remove("AGENT_JOURNAL_DB"),
        );
        let line = assert_only_error(&out, 1);
        assert!(line.contains("agent-journal.db"), "{args:?}: {line}");
        assert!(
            listing(cwd.path()).is_empty(),
            "{args:?} created {:?}",
            listing(cwd.path())
        );
    }

    // demo and import may create one.
    let imported = d.path("imported");
    let out = aj(
        &imported,
        &["import", path_str(&file), "--format", "journal"],
    );
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(
        aj(&imported, &["sessions", "--json"]).json_lines()[0]["id"],
        id
    );
    let fresh = d.path("fresh");
    let sb = d.path("sb2");
    let out = aj(&fresh, &["demo", "--json", "--sandbox", path_str(&sb)]);
    assert_eq!(out.code, 0, "{out:?}");
}

// ---------------------------------------------------------------------------
// 3. The latest evaluation, with a clock that stepped back.

/// The first evaluation's id is the greater one: it was made before the
/// clock stepped back; the second, started later in the stream, has the
/// smaller id.
const FIRST: [u8; 16] = [0x7f; 16];
const SECOND: [u8; 16] = [0x10; 16];

/// Starts an evaluation with an explicit id, as a process whose clock
/// stepped back would, and records its opening messages.
fn start(s: &Session, id: EvaluationId, key: &str) -> agent_journal::Evaluation {
    s.append(Event::EvaluationStarted {
        evaluation_id: id,
        prompt_ns: "test".into(),
        prompt_key: key.into(),
        adapter: "scripted".into(),
    })
    .expect("start");
    let e = s.evaluation(id).expect("recorder");
    e.system("be brief").expect("system");
    e
}

/// A first evaluation that finished, then (optionally after `between`) a
/// second one, started later but with a smaller id, left with a pending
/// tool call.
fn two_evaluations(s: &Session, between: impl FnOnce(&Session)) -> (EvaluationId, EvaluationId) {
    let (first, second) = (
        EvaluationId::from_bytes(FIRST),
        EvaluationId::from_bytes(SECOND),
    );
    assert!(second < first, "the later evaluation has the smaller id");
    let e = start(s, first, "first");
    e.user("the first question").expect("user");
    e.assistant("the first answer", vec![]).expect("assistant");
    e.finish(Outcome::Succeeded).expect("finish");
    between(s);
    let e = start(s, second, "second");
    e.user("the second question").expect("user");
    e.assistant(
        "calling a tool",
        vec![ToolCallRecord::new("call_1", "write_file", "{}")],
    )
    .expect("assistant");
    (first, second)
}

/// Everything built on "the latest evaluation" picks `second`.
fn assert_latest_is(s: &Session, second: EvaluationId, context: &str) {
    let state = s.state();
    let latest = state.evaluations().latest().map(|e| e.evaluation_id);
    assert_eq!(latest, Some(second), "{context}: latest()");
    drop(state);
    let plan = s.resume_plan().expect("plan");
    assert_eq!(plan.evaluation_id, second, "{context}: resume plan");
    assert_eq!(plan.prompt_key, "second", "{context}");
    assert!(
        matches!(plan.state, ResumeState::PendingTools(ref calls) if calls.len() == 1),
        "{context}: {:?}",
        plan.state
    );
    let conversation = s.latest_conversation(None).expect("conversation");
    assert!(
        conversation
            .iter()
            .any(|m| m.content == "the second question")
            && conversation.iter().all(|m| m.evaluation_id == second),
        "{context}: {conversation:?}"
    );
    assert_eq!(
        s.info().expect("info").status,
        SessionStatus::Unfinished,
        "{context}: status"
    );
    let at = s.head() - 1;
    let state = s.state_at(at).expect("state_at");
    assert_eq!(
        state.evaluations().latest().map(|e| e.evaluation_id),
        Some(second),
        "{context}: state_at"
    );
}

/// Rewrites the session's snapshot in sled as a snapshot of a format no
/// build writes (the body's first byte, the format, set to 9, the frame
/// sealed again).
fn make_snapshot_of_another_format(db: &Path, id: agent_journal::SessionId) {
    use agent_journal::format::{seal, verify_frame};
    let sled = raw_sled(db);
    let snaps = sled.open_tree("snapshots").expect("tree snapshots");
    let mut found = 0;
    for kv in snaps.scan_prefix(id.as_bytes()) {
        let (key, frame) = kv.expect("snapshot");
        let mut body = verify_frame(&frame)
            .expect("an inline snapshot frame")
            .to_vec();
        assert_eq!(body[0], 1, "the current snapshot format");
        body[0] = 9;
        snaps.insert(key, seal(&body)).expect("insert");
        found += 1;
    }
    assert_eq!(found, 1, "one snapshot");
    sled.flush().expect("flush");
}

#[test]
fn the_latest_evaluation_is_the_last_started_even_if_the_clock_stepped_back() {
    let journal = Journal::memory();
    let s = journal.create_session().expect("session");
    let (_, second) = two_evaluations(&s, |_| {});
    assert_latest_is(&s, second, "memory");

    // On disk, reopened: from a snapshot taken after everything, from one
    // taken between the two evaluations (the second then folded from the
    // tail), with no snapshot at all, and with a snapshot of another
    // format (refused: the stream is replayed).
    for snapshot in ["after", "between", "none", "format 9"] {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = dir.path().join("db");
        let (id, between_seq) = {
            let journal = Journal::open(&db).expect("open");
            let s = journal.create_session().expect("session");
            let mut between_seq = None;
            let (_, second) = two_evaluations(&s, |s| {
                if snapshot == "between" {
                    between_seq = s.snapshot().expect("snapshot");
                }
            });
            if snapshot == "after" || snapshot == "format 9" {
                s.snapshot().expect("snapshot");
            }
            assert_latest_is(&s, second, snapshot);
            (s.id(), between_seq)
        };
        if snapshot == "format 9" {
            make_snapshot_of_another_format(&db, id);
        }
        let journal = Journal::open(&db).expect("reopen");
        let s = journal.session(id).expect("session");
        let load = s.load_stats();
        match snapshot {
            "after" => assert_eq!(load.snapshot_seq, Some(s.head() - 1), "{load:?}"),
            "between" => {
                assert!(between_seq.is_some());
                assert_eq!(load.snapshot_seq, between_seq, "{load:?}");
                assert!(load.events_replayed > 0, "{load:?}");
            }
            "none" => assert_eq!(load.snapshot_seq, None, "{load:?}"),
            _ => {
                assert_eq!(load.snapshot_seq, None, "{load:?}");
                assert!(
                    load.snapshot_rejected
                        .as_deref()
                        .is_some_and(|r| r.contains("unknown snapshot format 9")),
                    "{load:?}"
                );
            }
        }
        assert_latest_is(&s, second, &format!("reopened, snapshot {snapshot}"));
        let report = journal.verify(Some(id), |_| {}).expect("verify");
        assert!(!report.has_damage(), "{snapshot}: {report:?}");
    }
}

#[test]
fn wink_json_carries_the_place_of_each_evaluation_and_json_without_it_is_refused() {
    use agent_journal::state::{JsonOptions, SessionState, SliceRegistry};
    let journal = Journal::memory();
    let s = journal.create_session().expect("session");
    let (first, second) = two_evaluations(&s, |_| {});
    let state = s.state_cloned();
    let text = state.to_json(&JsonOptions::default());
    let back = SessionState::from_json(&text, &SliceRegistry::new()).expect("from_json");
    assert_eq!(
        back.evaluations().latest().map(|e| e.evaluation_id),
        Some(second)
    );
    assert_eq!(back.evaluations(), state.evaluations());
    let place = |id| back.evaluations().get(id).and_then(|e| e.started_seq);
    assert!(place(first) < place(second), "{text}");

    // Without it (JSON no build writes): refused, not read in id order.
    let mut v: Value = serde_json::from_str(&text).expect("json");
    let slices = v["slices"].as_array_mut().expect("slices");
    let evals = slices
        .iter_mut()
        .find(|s| s["slice_type"] == "agent_journal:Evaluation")
        .expect("the evaluations");
    for item in evals["items"].as_array_mut().expect("items") {
        item.as_object_mut().expect("item").remove("started_seq");
    }
    let e = SessionState::from_json(&v.to_string(), &SliceRegistry::new()).expect_err("refused");
    assert!(e.to_string().contains("no started_seq"), "{e}");
}

#[test]
fn the_cli_reports_the_last_started_evaluation_if_the_clock_stepped_back() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    let id = {
        let journal = Journal::open(&db).expect("open");
        let s = journal.create_session().expect("session");
        two_evaluations(&s, |s| {
            s.snapshot().expect("snapshot");
        });
        s.id().to_string()
    };
    let second = EvaluationId::from_bytes(SECOND).to_string();

    let out = aj(&db, &["pending", &id, "--json"]);
    assert_eq!(out.code, 0, "{out:?}");
    let v = out.json();
    assert_eq!(v["evaluation"], second.as_str(), "{v}");
    assert_eq!(v["pending"].as_array().map(Vec::len), Some(1), "{v}");

    let out = aj(&db, &["sessions", "--json"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(out.json_lines()[0]["status"], "unfinished", "{out:?}");

    for format in ["openai", "jsonl"] {
        let out = aj(&db, &["export", &id, "--format", format]);
        assert_eq!(out.code, 0, "{out:?}");
        assert!(
            out.stdout.contains("the second question") && !out.stdout.contains("the first"),
            "{format}: {out:?}"
        );
    }
}

// ---------------------------------------------------------------------------
// 4. Warnings go to stderr.

/// Runs `args` in text and `--json` mode; each run must succeed, print its
/// data on stdout, and print exactly one `warning:` line on stderr that
/// contains every one of `needles` (and stdout none of them).
fn assert_one_warning(db: &Path, args: &[&str], needles: &[&str]) -> [Out; 2] {
    [false, true].map(|json| {
        let mut args = args.to_vec();
        if json {
            args.push("--json");
        }
        let out = aj(db, &args);
        assert_eq!(out.code, 0, "{args:?}: {out:?}");
        assert!(!out.stdout.trim().is_empty(), "{args:?}: no data: {out:?}");
        let lines = out.stderr_lines();
        assert_eq!(lines.len(), 1, "{args:?}: one warning line: {out:?}");
        if json {
            let v: serde_json::Value = serde_json::from_str(lines[0]).expect("a JSON warning");
            assert!(v["warning"]["message"].is_string(), "{args:?}: {out:?}");
        } else {
            assert!(lines[0].starts_with("warning: "), "{args:?}: {out:?}");
        }
        for n in needles {
            assert!(lines[0].contains(n), "{args:?}: {n:?} in {out:?}");
            assert!(
                !out.stdout.contains(n),
                "{args:?}: {n:?} on stdout: {out:?}"
            );
        }
        assert!(!out.stdout.contains("!!"), "{args:?}: {out:?}");
        if json && !args.contains(&"jsonl") {
            if args.contains(&"sessions") || args.contains(&"log") {
                out.json_lines();
            } else {
                out.json();
            }
        }
        out
    })
}

#[test]
fn warnings_about_a_cut_exported_journal_go_to_stderr_in_every_mode() {
    let d = Demo::new();
    let file = d.export_journal("run.ajournal");
    let bytes = std::fs::read(&file).expect("read");
    let last = record_offsets(&bytes)[22];
    let cut = d.path("cut.ajournal");
    let end = bytes.len() - agent_journal::format::ajournal::TRAILER_LEN - 3;
    std::fs::write(&cut, &bytes[..end]).expect("write");
    let offset = format!("byte offset {last}");
    let needles = [path_str(&cut), offset.as_str()];
    let id = d.id.as_str();

    let [text, json] = assert_one_warning(&cut, &["sessions"], &needles);
    assert!(text.stdout.contains(id), "{text:?}");
    assert_eq!(json.json_lines()[0]["events"], 22, "{json:?}");
    let [_, json] = assert_one_warning(&cut, &["show", id], &needles);
    assert_eq!(json.json()["slices"][6]["items"][0]["last_seq"], 21);
    let [text, _] = assert_one_warning(&cut, &["pending", id], &needles);
    assert!(text.stdout.contains("crash point: seq 21"), "{text:?}");
    let [text, _] = assert_one_warning(&cut, &["log", id], &needles);
    assert_eq!(text.stdout.lines().count(), 22, "{text:?}");
    assert_one_warning(&cut, &["diff", id, "0", "5"], &needles);
    for format in ["openai", "anthropic", "jsonl", "wink"] {
        assert_one_warning(&cut, &["export", id, "--format", format], &needles);
    }
    let copy = d.path("copy.ajournal");
    let args = ["export", id, "--format", "journal", "-o", path_str(&copy)];
    let [text, json] = assert_one_warning(&cut, &args, &needles);
    assert!(text.stdout.contains("wrote 22 events"), "{text:?}");
    assert_eq!(json.json()["events"], 22, "{json:?}");

    // The warning names the file; importing it warns the same way.
    for json in [false, true] {
        let target = d.path(&format!("imported-{json}"));
        let mut args = vec!["import", path_str(&cut), "--format", "journal"];
        if json {
            args.push("--json");
        }
        let out = aj(&target, &args);
        assert_eq!(out.code, 0, "{out:?}");
        let lines = out.stderr_lines();
        assert_eq!(lines.len(), 1, "{out:?}");
        let prefix = if json { "{\"warning\":" } else { "warning: " };
        assert!(
            lines[0].starts_with(prefix) && lines[0].contains(&offset),
            "{out:?}"
        );
    }
}

#[test]
fn warnings_about_a_torn_tail_go_to_stderr_in_every_mode() {
    let d = Demo::new();
    // Damage the last event (seq 22) with the CLI not running: a torn tail.
    {
        let sid: agent_journal::SessionId = d.id.parse().expect("id");
        let db = raw_sled(&d.db);
        let events = db.open_tree("events").expect("tree events");
        crate::common::unpack_event(&d.db, &events, sid, 22);
        let key = crate::common::event_key(sid, 22);
        let mut v = events.get(&key).expect("get").expect("present").to_vec();
        assert!(v.len() > 12);
        v[12] ^= 0x5a;
        events.insert(key, v).expect("insert");
        // No snapshot past the tail.
        let snaps = db.open_tree("snapshots").expect("tree snapshots");
        snaps.clear().expect("clear");
        db.flush().expect("flush");
    }
    let id = d.id.as_str();
    let needles = [id, "torn tail", "seq 22"];
    let [_, json] = assert_one_warning(&d.db, &["sessions"], &needles[1..]);
    assert_eq!(json.json_lines()[0]["events"], 22, "{json:?}");
    let [_, json] = assert_one_warning(&d.db, &["show", id], &needles[1..]);
    assert_eq!(json.json()["slices"][6]["items"][0]["last_seq"], 21);
    for args in [
        vec!["pending", id],
        vec!["log", id],
        vec!["diff", id, "0", "5"],
        vec!["export", id, "--format", "openai"],
    ] {
        let [_, _] = assert_one_warning(&d.db, &args, &needles[1..]);
    }
    // The line names the session too (stdout holds its id as data).
    let out = d.run(&["pending", id]);
    assert!(out.stderr.contains(id), "{out:?}");
}

#[test]
fn an_endless_input_is_refused_not_read_until_memory_runs_out() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    let out = crate::common::run_cli(
        &db,
        &[
            "import",
            "/dev/zero",
            "--format",
            "openai",
            "--max-bytes",
            "100000",
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    // Not read at all: a device is not a file to import.
    assert!(err.contains("not a regular file"), "{err}");
    assert!(!db.exists(), "bad input creates nothing");
    let out = crate::common::run_cli(&db, &["import", "/dev/zero", "--format", "journal"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a regular file"));
}

/// Issue 11, case 8: reading an exported journal held the whole file in
/// memory (a 4 GB file took 3.9 GB to list its sessions). It is now read in
/// place: one pass through a window verifies it, then frames are read from
/// the file as they are needed. Here a 32 MiB file of 16 events of 2 MiB
/// is listed, verified, shown and exported by processes whose peak memory
/// stays far below its size, and imported.
#[test]
fn an_exported_journal_is_read_in_place_not_into_memory() {
    use agent_journal::{Event, Journal};
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("big.ajournal");
    let id = {
        let j = Journal::memory();
        let s = j.create_session().expect("session");
        let mut rng = crate::common::Rng::new(8);
        let block = rng.bytes(1 << 16);
        for i in 0..16u8 {
            let mut payload = block.repeat(32);
            payload[0] = i;
            s.append(Event::Custom {
                kind: "blob".into(),
                payload,
            })
            .expect("append");
        }
        j.export_journal(&[s.id()], &file, |_| {}).expect("export");
        s.id().to_string()
    };
    let size = std::fs::metadata(&file).expect("metadata").len();
    assert!(size > 32 << 20, "{size}");
    let copy = dir.path().join("copy.ajournal");
    let db = dir.path().join("db");
    let copy_s = copy.to_str().expect("utf-8").to_owned();
    let file_s = file.to_str().expect("utf-8");
    for args in [
        vec!["sessions"],
        vec!["verify"],
        vec!["show", &id],
        vec!["log", &id],
        vec!["export", &id, "--format", "journal", "-o", &copy_s],
    ] {
        let (code, peak) = crate::common::peak_memory(&file, &args);
        assert_eq!(code, Some(0), "{args:?}");
        eprintln!("{args:?}: peak {} MiB", peak >> 20);
        assert!(
            peak < size / 2 + (16 << 20),
            "{args:?} on a {} MiB file peaked at {} MiB",
            size >> 20,
            peak >> 20
        );
    }
    assert_eq!(
        std::fs::read(&copy).expect("copy"),
        std::fs::read(&file).expect("file"),
        "the export of the file is the file"
    );
    // An import reads it in chunks of at most 8 MiB (sled's cache, 512 MiB
    // by default, holds what it inserts: not measured here).
    let out = crate::common::run_cli(&db, &["import", file_s]);
    assert!(out.status.success(), "{out:?}");
    let j = Journal::open(&db).expect("open");
    let s = j.session(id.parse().expect("id")).expect("session");
    assert_eq!(s.head(), 17);
    let events = s.events(16..17).expect("events");
    assert!(
        matches!(&events[0].event, Event::Custom { payload, .. } if payload[0] == 15 && payload.len() == 2 << 20)
    );
}
