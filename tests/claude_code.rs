//! Claude Code session logs: a crashed run recorded by Claude Code (the
//! fixture `tests/fixtures/claude-code/crashed.jsonl`, written for these
//! tests: streamed replies, thinking with a signature, redacted thinking,
//! parallel tool calls, an error result, an image, a sub-agent, a summary,
//! a compaction) imports with its crash point; a directory of logs imports
//! as one session each; bad logs are refused naming the line, and nothing
//! is written; `--format auto` tells every format apart.

use std::path::{Path, PathBuf};

use agent_journal::{Journal, ToolStatus};
use serde_json::Value;

use crate::common::{json_lines, path_str, run_cli};

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/claude-code/crashed.jsonl")
}

fn ok(out: &std::process::Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn a_crashed_claude_code_run_imports_with_its_crash_point() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let out = run_cli(&db, &["import", path_str(&fixture())]);
    ok(&out);
    assert!(String::from_utf8_lossy(&out.stderr).contains("format: claude-code"));
    let id = json_lines(&run_cli(&db, &["--json", "sessions"]).stdout)[0]["id"]
        .as_str()
        .unwrap()
        .to_owned();

    // The crash point: the Edit call that was never answered.
    let pending: Value =
        serde_json::from_slice(&run_cli(&db, &["--json", "pending", &id]).stdout).unwrap();
    assert_eq!(pending["state"], "pending_tools", "{pending}");
    assert_eq!(pending["pending"][0]["call_id"], "toolu_05");
    assert_eq!(pending["pending"][0]["name"], "Edit");
    assert_eq!(run_cli(&db, &["verify"]).status.code(), Some(0));

    let journal = Journal::open(&db).unwrap();
    let s = journal.session(id.parse().unwrap()).unwrap();
    let state = s.state();
    // Threads: before the compaction, the sub-agent, after the compaction.
    let evals: Vec<(String, bool)> = state
        .evaluations()
        .iter()
        .map(|e| (e.prompt_key.clone(), e.outcome.is_some()))
        .collect();
    assert_eq!(
        evals,
        [
            ("main".into(), false),
            ("sidechain".into(), true),
            ("main".into(), false)
        ]
    );
    let first = state.evaluations().iter().next().unwrap().evaluation_id;
    let messages: Vec<_> = state.messages().for_evaluation(first).collect();
    // The streamed reply (thinking, text, tool_use: three records) is one
    // message, and keeps the thinking and its signature.
    assert_eq!(messages[1].content, "Let me read the test.");
    assert_eq!(messages[1].tool_calls.len(), 1);
    let payload = messages[1].provider_payload.as_deref().unwrap();
    assert!(payload.contains("EqQBCkYIBxgCKkD3sig=="), "{payload}");
    // Parallel calls in one reply; the failed one is failed.
    assert_eq!(messages[3].tool_calls.len(), 2);
    let calls = state.tool_calls();
    let status = |id: &str| {
        calls
            .for_evaluation(first)
            .find(|c| c.call_id.as_str() == id)
            .map(|c| c.status)
    };
    assert_eq!(status("toolu_01"), Some(ToolStatus::Completed));
    assert_eq!(status("toolu_02"), Some(ToolStatus::Failed));
    assert_eq!(status("toolu_04"), Some(ToolStatus::Completed));
    let labels = state.labels().to_vec();
    assert!(labels.contains(&(
        "claude_code.session".into(),
        "7f3c9a52-1b2e-4c55-9d7a-3e8f0c1d2b4a".into()
    )));
    drop(state);
    drop((s, journal));

    // Every thread exports as a valid Anthropic request, the image and the
    // redacted thinking kept.
    let all = ok(&run_cli(
        &db,
        &[
            "export",
            &id,
            "--format",
            "anthropic",
            "--evaluation",
            "all",
        ],
    ));
    let all: Value = serde_json::from_str(&all).unwrap();
    for request in all.as_array().unwrap() {
        agent_journal::provider::validate::anthropic(request).expect("a valid request");
    }
    let last = all[2].to_string();
    assert!(
        last.contains("\"image\"") && last.contains("redacted_thinking"),
        "{last}"
    );
    // The summary and the compaction boundary are in the timeline.
    let log = json_lines(&run_cli(&db, &["--json", "log", &id, "--type", "custom"]).stdout);
    let kinds: Vec<&str> = log
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .filter(|k| *k != "claude_code.reply")
        .collect();
    assert_eq!(kinds, ["claude_code.summary", "claude_code.system"]);
}

#[test]
fn a_directory_of_logs_imports_one_session_each() {
    let dir = tempfile::tempdir().unwrap();
    let projects = dir.path().join("projects");
    let text = std::fs::read_to_string(fixture()).unwrap();
    for (sub, name) in [("-home-dev-a", "one.jsonl"), ("-home-dev-b", "two.jsonl")] {
        std::fs::create_dir_all(projects.join(sub)).unwrap();
        std::fs::write(projects.join(sub).join(name), &text).unwrap();
    }
    std::fs::write(projects.join("notes.txt"), "not a log").unwrap();
    let db = dir.path().join("db");
    let out = run_cli(
        &db,
        &[
            "--json",
            "import",
            path_str(&projects),
            "--format",
            "claude-code",
        ],
    );
    let v: Value = serde_json::from_str(&ok(&out)).unwrap();
    assert_eq!(v["sessions"].as_array().unwrap().len(), 2);
    let files: Vec<String> = json_lines(&run_cli(&db, &["--json", "sessions"]).stdout)
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            s["labels"]
                .as_array()
                .unwrap()
                .iter()
                .find(|l| l[0] == "file")
                .map(|l| l[1].as_str().unwrap().to_owned())
                .unwrap()
        })
        .collect();
    assert_eq!(files, ["one.jsonl", "two.jsonl"]);
}

#[test]
fn bad_logs_are_refused_by_line_and_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let user = |uuid: &str, parent: &str, content: &str| {
        format!(
            r#"{{"type":"user","uuid":"{uuid}","parentUuid":{parent},"message":{{"role":"user","content":{content}}}}}"#
        )
    };
    let call = r#"{"type":"assistant","uuid":"a1","parentUuid":"u1","message":{"id":"m1","role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{}}]}}"#;
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "invalid JSON",
            format!("{}\n{{oops\n", user("u1", "null", "\"hi\"")),
            "line 2: invalid JSON",
        ),
        (
            "a result with no call",
            user(
                "u1",
                "null",
                r#"[{"type":"tool_result","tool_use_id":"t9","content":"x"}]"#,
            ),
            "line 1: tool_result for \"t9\"",
        ),
        (
            "a call id twice",
            format!(
                "{}\n{call}\n{}\n",
                user("u1", "null", "\"hi\""),
                call.replace("\"a1\"", "\"a2\"")
                    .replace("\"parentUuid\":\"u1\"", "\"parentUuid\":\"a1\"")
                    .replace("\"m1\"", "\"m2\"")
            ),
            "line 3: tool_use id \"t1\" used twice (first at line 2)",
        ),
        (
            "a uuid twice",
            format!(
                "{}\n{}\n",
                user("u1", "null", "\"hi\""),
                user("u1", "null", "\"hi\"")
            ),
            "line 2: uuid \"u1\" used twice (first at line 1)",
        ),
    ];
    for (what, text, expected) in cases {
        let file = dir.path().join("bad.jsonl");
        std::fs::write(&file, &text).unwrap();
        let db = dir.path().join("db");
        let out = run_cli(&db, &["import", path_str(&file), "--format", "claude-code"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{what}: {stderr}");
        assert!(stderr.contains(expected), "{what}: {stderr}");
        assert!(!db.exists(), "{what}: nothing written");
    }
}

#[test]
fn format_auto_tells_the_formats_apart() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p
    };
    let openai = write(
        "o.json",
        r#"[{"role":"user","content":"hi"},{"role":"assistant","content":"yo"}]"#,
    );
    let anthropic = write(
        "a.json",
        r#"{"system":"s","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}"#,
    );
    let blocks = write(
        "b.json",
        r#"[{"role":"user","content":"q"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"x","input":{}}]}]"#,
    );
    let source = dir.path().join("src");
    let demo = run_cli(
        &source,
        &["demo", "--sandbox", path_str(&dir.path().join("sb"))],
    );
    ok(&demo);
    let id = json_lines(&run_cli(&source, &["--json", "sessions"]).stdout)[0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let journal_file = dir.path().join("j.ajournal");
    ok(&run_cli(
        &source,
        &[
            "export",
            &id,
            "--format",
            "journal",
            "-o",
            path_str(&journal_file),
        ],
    ));
    let jsonl = write(
        "m.jsonl",
        &ok(&run_cli(&source, &["export", &id, "--format", "jsonl"])),
    );
    let wink = write(
        "w.json",
        &ok(&run_cli(&source, &["export", &id, "--format", "wink"])),
    );
    let cases = [
        (openai, "openai"),
        (anthropic, "anthropic"),
        (blocks, "anthropic"),
        (jsonl, "jsonl"),
        (wink, "wink"),
        (journal_file, "journal"),
        (fixture(), "claude-code"),
    ];
    for (i, (file, want)) in cases.iter().enumerate() {
        let db = dir.path().join(format!("db{i}"));
        let out = run_cli(&db, &["--json", "import", path_str(file)]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{want}: {stderr}");
        assert!(
            stderr.contains(&format!("{{\"format\":\"{want}\"}}")),
            "{want}: {stderr}"
        );
    }
    let junk = write("junk.txt", "hello");
    let out = run_cli(&dir.path().join("dbx"), &["import", path_str(&junk)]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("give --format"));
    assert!(!dir.path().join("dbx").exists());
}

/// A Claude Code log of `steps` tool steps (a question, a call, its
/// result), each record linked to the one before.
fn claude_code_steps(steps: usize) -> String {
    claude_code_log(steps, 2000, 4000)
}

/// A Claude Code log of `steps` tool steps: a question of `question`
/// bytes, a call, its result of `result` bytes, each record linked to the
/// one before.
pub(crate) fn claude_code_log(steps: usize, question: usize, result: usize) -> String {
    let text = |n: usize| -> String { "abcdefghij".repeat(n / 10) };
    let mut lines = Vec::new();
    let mut parent = serde_json::Value::Null;
    let mut record = |kind: &str, message: serde_json::Value| {
        let uuid = format!("r{}", lines.len());
        lines.push(
            serde_json::json!({
                "type": kind, "uuid": uuid, "parentUuid": parent,
                "sessionId": "s-1", "message": message,
            })
            .to_string(),
        );
        parent = uuid.into();
    };
    for i in 0..steps {
        let id = format!("toolu_{i}");
        record(
            "user",
            serde_json::json!({"role": "user", "content": text(question)}),
        );
        record(
            "assistant",
            serde_json::json!({"id": format!("msg_{i}"), "role": "assistant", "content": [
                {"type": "tool_use", "id": id, "name": "look", "input": {"q": text(200)}}]}),
        );
        record(
            "user",
            serde_json::json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": id, "content": text(result)}]}),
        );
    }
    lines.join("\n") + "\n"
}

/// A log file is read twice and imported a message at a time: the session
/// is the one the import of its text makes.
#[test]
fn a_log_file_imports_as_its_text_does() {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in [
        ("fixture", std::fs::read_to_string(fixture()).unwrap()),
        ("steps", claude_code_steps(30)),
    ] {
        let whole = Journal::open(dir.path().join(format!("{name}-whole"))).unwrap();
        let a = whole.import_claude_code_text(&text, "log.jsonl").unwrap();
        let file = dir.path().join(name).join("log.jsonl");
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, &text).unwrap();
        let streamed = Journal::open(dir.path().join(format!("{name}-streamed"))).unwrap();
        let logs = agent_journal::transfer::read_claude_code(&file, 1 << 30).unwrap();
        assert_eq!(logs[0].messages(), a.state().messages().len() as u64);
        let made = streamed.import_claude_code_files(&logs).unwrap();
        assert_eq!(made.len(), 1);
        let (b, n) = made[0];
        assert_eq!(streamed.session(b).unwrap().head(), n);
        assert_eq!(
            crate::streamed_import::session_events(&whole, a.id()),
            crate::streamed_import::session_events(&streamed, b),
            "{name}"
        );
    }
}

/// Between the pass that checks a log and the one that imports it, a line
/// that changes is refused by its number and the import of every log
/// given with it is undone; lines appended meanwhile (a log Claude Code is
/// still writing) are not read.
#[test]
fn a_log_that_changes_between_its_passes_is_refused_and_nothing_is_left() {
    let dir = tempfile::tempdir().unwrap();
    let projects = dir.path().join("projects");
    std::fs::create_dir_all(&projects).unwrap();
    let text = claude_code_steps(3);
    for name in ["a.jsonl", "b.jsonl"] {
        std::fs::write(projects.join(name), &text).unwrap();
    }
    let journal = Journal::open(dir.path().join("db")).unwrap();

    // Appended after the first pass: the import reads what that pass read.
    let logs = agent_journal::transfer::read_claude_code(&projects, 1 << 30).unwrap();
    let appended = text.clone() + &claude_code_steps(1).replace("\"r", "\"x");
    std::fs::write(projects.join("a.jsonl"), appended).unwrap();
    let made = journal.import_claude_code_files(&logs).unwrap();
    let messages = |id| journal.session(id).unwrap().state().messages().len();
    assert_eq!((messages(made[0].0), messages(made[1].0)), (9, 9));
    for (id, _) in made {
        journal.delete_session(id, true).unwrap();
    }

    // Line 5 of the second log changed (same length): refused, and the
    // first log's session, written already, is gone too.
    let logs = agent_journal::transfer::read_claude_code(&projects, 1 << 30).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    lines[4] = lines[4].replacen("abcdefghij", "ABCDEFGHIJ", 1);
    let changed = lines.join("\n") + "\n";
    assert_eq!(changed.len(), text.len());
    std::fs::write(projects.join("b.jsonl"), changed).unwrap();
    let err = journal.import_claude_code_files(&logs).unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains("line 5: the line changed since the log was first read"),
        "{message}"
    );
    assert!(journal.sessions().unwrap().is_empty());
    assert!(!dir.path().join("db/agent-journal.importing").exists());
}

/// A log is never held: one three times as long costs less memory than
/// the bytes it adds (the whole log was parsed and its threads held: a
/// 9.1 MiB log added 185 MiB).
#[test]
fn importing_a_longer_log_takes_little_more_memory() {
    let dir = tempfile::tempdir().unwrap();
    let mut runs = Vec::new();
    for steps in [2000, 6000] {
        let file = dir.path().join(format!("steps-{steps}.jsonl"));
        std::fs::write(&file, claude_code_steps(steps)).unwrap();
        let size = std::fs::metadata(&file).unwrap().len();
        let db = dir.path().join(format!("db-{steps}"));
        let args = ["import", path_str(&file), "--format", "claude-code"];
        let (code, peak) = crate::common::peak_memory(&db, &args);
        assert_eq!(code, Some(0));
        let j = Journal::open(&db).unwrap();
        let id = j.sessions().unwrap()[0];
        // Opened, evaluation started, the messages (the user's question
        // and the result of each step are one user record each).
        assert_eq!(j.session(id).unwrap().head(), 2 + 3 * steps as u64);
        eprintln!("{steps} steps, {} MiB: peak {} MiB", size >> 20, peak >> 20);
        runs.push((size, peak));
    }
    crate::common::assert_memory_grows_less_than_input(&runs);
}
