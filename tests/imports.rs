//! Imports of the logs people really have (issue 35, item 6).
//!
//! - Claude Code: `tests/fixtures/claude-code/session/` holds a resumed
//!   session's log (its first record's parent is in an earlier file and it
//!   answers a call made there; a `progress` record inside the chain; a
//!   content block of a type not modeled; a compaction boundary with
//!   `logicalParentUuid`) and a sub-agent's file under `subagents/` (its
//!   first record's parent is in the main log). Both import, with warnings
//!   naming the lines; each message keeps its record's time, each reply its
//!   model, tokens, request id and cost, so `stats` shows real durations.
//! - Responses, Anthropic and Gemini inputs with item, block and part types
//!   we do not model (`fixtures/{openai-responses,anthropic,gemini}/unknown-*`)
//!   import, show as `[opaque TYPE]` and export back equal as JSON values;
//!   `--strict` refuses them naming the item and the type.
//! - The same file imported twice is there already, unless `--again`:
//!   for every kind of import (a provider's file, a Claude Code log, a
//!   state blob, a WINK snapshot, standard input by what was read; an
//!   exported journal when all its sessions are here with the same events).

use std::path::{Path, PathBuf};

use agent_journal::provider::claude_code::ClaudeCodeFile;
use agent_journal::provider::{ConversationFormat, opaque};
use agent_journal::transfer::{ConversationFile, read_claude_code};
use agent_journal::{Error, EvaluationId, Event, Journal};
use serde_json::Value;

use crate::common::{json_lines, path_str, run_cli};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn ok(out: &std::process::Output) -> (String, String) {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn session_ids(db: &Path) -> Vec<String> {
    json_lines(&run_cli(db, &["--json", "sessions"]).stdout)
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn claude_code_logs_that_begin_mid_thread_import_with_warnings() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let logs = fixtures().join("claude-code/session");
    let (_, stderr) = ok(&run_cli(&db, &["import", path_str(&logs)]));
    for said in [
        "resumed.jsonl: line 1: parentUuid \"p-0099\" names no record of the file",
        "resumed.jsonl: line 1: the tool_result for \"toolu_prev\" answers a call the file does not hold",
        "resumed.jsonl: line 4: record type \"progress\" is not modeled",
        "agent-7c1f.jsonl: line 1: parentUuid \"r-03\" names no record of the file",
    ] {
        assert!(stderr.contains(said), "{said}: {stderr}");
    }
    assert_eq!(run_cli(&db, &["verify"]).status.code(), Some(0));

    let journal = Journal::open(&db).unwrap();
    let mut main = None;
    for id in journal.sessions().unwrap() {
        let s = journal.session(id).unwrap();
        let state = s.state();
        let file = state
            .labels()
            .iter()
            .find(|(k, _)| k == "file")
            .map(|(_, v)| v.clone());
        let keys: Vec<String> = state
            .evaluations()
            .iter()
            .map(|e| e.prompt_key.clone())
            .collect();
        match file.as_deref() {
            // Before and after the compaction.
            Some("resumed.jsonl") => {
                assert_eq!(keys, ["main", "main"]);
                main = Some(id);
            }
            Some("agent-7c1f.jsonl") => assert_eq!(keys, ["sidechain"]),
            other => panic!("unexpected session of {other:?}"),
        }
    }
    let main = main.expect("the main log's session");
    let s = journal.session(main).unwrap();
    let state = s.state();
    let first = state.evaluations().iter().next().unwrap().evaluation_id;
    let messages: Vec<_> = state.messages().for_evaluation(first).cloned().collect();
    // The result of a call made before the file: text, said so.
    assert!(
        messages[0]
            .content
            .starts_with("[the result of toolu_prev, a call made before this log]"),
        "{}",
        messages[0].content
    );
    // Each message keeps its first record's time.
    assert_eq!(
        messages[1].created_at.to_rfc3339(),
        "2026-11-21T10:00:04+00:00"
    );
    assert_eq!(opaque::opaque_types(&messages[3]), ["container_upload"]);
    drop(state);
    // Each reply's model, tokens, times, request id and cost.
    let mut calls = Vec::new();
    let mut replies = Vec::new();
    s.for_each_event(.., |e| {
        match &e.event {
            Event::ProviderCall(p) => calls.push(p.clone()),
            Event::Custom { kind, payload } if kind == "claude_code.reply" => {
                replies.push(serde_json::from_slice::<Value>(payload).unwrap());
            }
            Event::Custom { kind, payload } if kind == "claude_code.record" => {
                let v: Value = serde_json::from_slice(payload).unwrap();
                assert_eq!(v["type"], "progress", "kept as it is");
            }
            _ => {}
        }
        Ok(())
    })
    .unwrap();
    assert_eq!(calls.len(), 4);
    assert_eq!(calls[0].model, "claude-sonnet-4-5");
    assert_eq!(
        (calls[0].usage.input_tokens, calls[0].usage.output_tokens),
        (2000, 75)
    );
    assert_eq!(calls[0].usage.cache_read_tokens, 1500);
    assert_eq!(
        (calls[0].finished_at - calls[0].started_at).num_seconds(),
        5
    );
    assert_eq!(replies[0]["records"][0]["requestId"], "req_r1");
    assert_eq!(replies[0]["records"][0]["costUSD"], 0.0123);
    assert_eq!(replies[0]["records"][1]["line"], 3);
    drop((s, journal));

    // `stats` shows the run's real durations and tokens.
    let stats: Value =
        serde_json::from_str(&ok(&run_cli(&db, &["--json", "stats", &main.to_string()])).0)
            .unwrap();
    assert_eq!(stats["wall_ms"], 319000.0, "{stats}");
    assert_eq!(stats["provider_ms"], 18900.0, "{stats}");
    let read = stats["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "Read")
        .unwrap();
    assert_eq!(read["median_ms"], 3000.0, "{stats}");
    let tokens: u64 = stats["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["input_tokens"].as_u64().unwrap())
        .sum();
    assert_eq!(tokens, 2000 + 2300 + 900 + 1000);
    // The timeline shows the opaque block.
    let log = ok(&run_cli(&db, &["log", &main.to_string(), "--no-pager"])).0;
    assert!(log.contains("[opaque container_upload]"), "{log}");
}

#[test]
fn claude_code_strict_refuses_what_is_not_modeled_naming_the_line() {
    let logs = read_claude_code(&fixtures().join("claude-code/session"), 1 << 30).unwrap();
    let resumed = logs.iter().find(|l| l.name() == "resumed.jsonl").unwrap();
    assert!(resumed.warnings().len() >= 3, "{:?}", resumed.warnings());
    let err = resumed.check_strict().unwrap_err();
    assert!(
        matches!(&err, Error::Unmodeled { at, kind } if at == "resumed.jsonl: line 4" && kind == "progress"),
        "{err}"
    );
    // Without the progress record: the block of a type not modeled.
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(fixtures().join("claude-code/session/resumed.jsonl"))
        .unwrap()
        .replace("\"type\": \"progress\"", "\"type\": \"system\"");
    let file = dir.path().join("log.jsonl");
    std::fs::write(&file, text).unwrap();
    let log = ClaudeCodeFile::open(&file, 1 << 30).unwrap();
    let err = log.check_strict().unwrap_err();
    assert!(
        matches!(&err, Error::Unmodeled { at, kind }
            if at == "log.jsonl: line 6: message.content[0]" && kind == "container_upload"),
        "{err}"
    );
    // Through the CLI: refused, nothing written.
    let db = dir.path().join("db");
    let out = run_cli(&db, &["import", path_str(&file), "--strict"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("line 6: message.content[0]: \"container_upload\""),
        "{stderr}"
    );
    assert!(!db.exists(), "nothing written");
}

#[test]
fn unknown_items_and_blocks_round_trip_exactly_and_strict_refuses_them() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    for (name, f, opaque_seen, strict_at, strict_kind) in [
        (
            "openai-responses/unknown-items.json",
            ConversationFormat::OpenAiResponses,
            "apply_patch_call",
            "input[2]",
            "tool_search_call",
        ),
        (
            "anthropic/unknown-blocks.json",
            ConversationFormat::Anthropic,
            "server_tool_use",
            "messages[0].content[1]",
            "search_result",
        ),
        (
            "gemini/unknown-parts.json",
            ConversationFormat::Gemini,
            "toolCall",
            "contents[1].parts[2]",
            "toolCall",
        ),
    ] {
        let path = fixtures().join(name);
        let text = std::fs::read_to_string(&path).unwrap();
        let original: Value = serde_json::from_str(&text).unwrap();
        // The public API: kept, named, given back equal.
        let messages = f.parse(&text, EvaluationId::new(), "ns", "k").unwrap();
        assert!(
            messages
                .iter()
                .any(|m| opaque::opaque_types(m).iter().any(|t| t == opaque_seen)),
            "{name}"
        );
        let fields = f.request_fields(&text).unwrap();
        assert_eq!(f.to_body(&messages, &fields), original, "{name}");
        let err = f
            .parse_strict(&text, EvaluationId::new(), "ns", "k")
            .unwrap_err();
        assert!(
            matches!(&err, Error::Unmodeled { at, kind } if at == strict_at && kind == strict_kind),
            "{name}: {err}"
        );
        let err = ConversationFile::open_strict(&path, f, 1 << 30).unwrap_err();
        assert!(matches!(err, Error::Unmodeled { .. }), "{name}: {err}");

        // The CLI: --strict refuses and writes nothing.
        let strict_db = dir.path().join("strict-db");
        let out = run_cli(&strict_db, &["import", path_str(&path), "--strict"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{name}: {stderr}");
        assert!(
            stderr.contains(&format!("{strict_at}: \"{strict_kind}\"")),
            "{name}: {stderr}"
        );
        assert!(!strict_db.exists(), "{name}: nothing written");

        // Imported, shown as opaque, exported back equal.
        ok(&run_cli(&db, &["import", path_str(&path)]));
        let id = session_ids(&db).pop().unwrap();
        let log = ok(&run_cli(&db, &["log", &id, "--no-pager"])).0;
        assert!(
            log.contains(&format!("[opaque {opaque_seen}]")),
            "{name}: {log}"
        );
        let body = ok(&run_cli(
            &db,
            &["export", &id, "--format", f.name(), "--body"],
        ))
        .0;
        let body: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(body, original, "{name}");
    }
    // Exported to another provider, the opaque items are left out (and
    // the export says so).
    let id = session_ids(&db)[0].clone();
    let out = ok(&run_cli(&db, &["export", &id, "--format", "anthropic"]));
    assert!(!out.0.contains("apply_patch_call"), "{}", out.0);
    assert!(out.1.contains("apply_patch_call"), "{}", out.1);
}

/// A block of a type not modeled inside a `tool_result`'s content (an
/// Anthropic request, a Claude Code log): shown as `[opaque TYPE]`,
/// refused by `--strict` naming its path, and given back equal on export.
#[test]
fn an_opaque_block_inside_a_tool_result_is_shown_refused_and_given_back() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let original = serde_json::json!({
        "model": "claude-sonnet-4-5",
        "max_tokens": 256,
        "messages": [
            {"role": "user", "content": "List the files"},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "toolu_1", "name": "ls", "input": {"dir": "."}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": [
                    {"type": "text", "text": "a.rs"},
                    {"type": "future_block", "data": {"rows": [1, 2]}, "n": 0.5}
                ]},
                {"type": "text", "text": "and?"}
            ]},
            {"role": "assistant", "content": [{"type": "text", "text": "One file."}]}
        ]
    });
    let text = original.to_string();
    let f = ConversationFormat::Anthropic;
    let messages = f.parse(&text, EvaluationId::new(), "ns", "k").unwrap();
    let seen: Vec<String> = messages.iter().flat_map(opaque::opaque_types).collect();
    assert_eq!(seen, ["future_block"], "{messages:?}");
    let fields = f.request_fields(&text).unwrap();
    assert_eq!(f.to_body(&messages, &fields), original);
    let err = f
        .parse_strict(&text, EvaluationId::new(), "ns", "k")
        .unwrap_err();
    assert!(
        matches!(&err, Error::Unmodeled { at, kind }
            if at == "messages[2].content[0].content[1]" && kind == "future_block"),
        "{err}"
    );
    let file = dir.path().join("request.json");
    std::fs::write(&file, &text).unwrap();
    let err = ConversationFile::open_strict(&file, f, 1 << 30).unwrap_err();
    assert!(matches!(err, Error::Unmodeled { .. }), "{err}");

    // The CLI: --strict refuses and writes nothing; without it, imported,
    // shown, and exported back equal.
    let strict_db = dir.path().join("strict-db");
    let out = run_cli(&strict_db, &["import", path_str(&file), "--strict"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("messages[2].content[0].content[1]: \"future_block\""),
        "{stderr}"
    );
    assert!(!strict_db.exists(), "nothing written");
    ok(&run_cli(&db, &["import", path_str(&file)]));
    let id = session_ids(&db).pop().unwrap();
    let log = ok(&run_cli(&db, &["log", &id, "--no-pager"])).0;
    assert!(log.contains("[opaque future_block]"), "{log}");
    let body = ok(&run_cli(
        &db,
        &["export", &id, "--format", "anthropic", "--body"],
    ))
    .0;
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body, original);

    // A Claude Code log whose tool result holds one.
    let log_text = std::fs::read_to_string(fixtures().join("claude-code/session/resumed.jsonl"))
        .unwrap()
        .replace("\"type\": \"progress\"", "\"type\": \"system\"")
        .replace(
            "\"content\": \"def test_a(): ...\"",
            "\"content\": [{\"type\": \"text\", \"text\": \"def test_a(): ...\"}, \
             {\"type\": \"future_block\", \"x\": 1}]",
        );
    assert!(log_text.contains("future_block"));
    let file = dir.path().join("log.jsonl");
    std::fs::write(&file, log_text).unwrap();
    let err = ClaudeCodeFile::open(&file, 1 << 30)
        .unwrap()
        .check_strict()
        .unwrap_err();
    assert!(
        matches!(&err, Error::Unmodeled { at, kind }
            if at == "log.jsonl: line 5: message.content[0].content[1]" && kind == "future_block"),
        "{err}"
    );
    let cc_db = dir.path().join("cc-db");
    let out = run_cli(&cc_db, &["import", path_str(&file), "--strict"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(!cc_db.exists(), "nothing written");
    ok(&run_cli(&cc_db, &["import", path_str(&file)]));
    let id = session_ids(&cc_db).pop().unwrap();
    let log = ok(&run_cli(&cc_db, &["log", &id, "--no-pager"])).0;
    assert!(log.contains("[opaque future_block]"), "{log}");
    assert!(log.contains("[opaque container_upload]"), "{log}");
}

#[test]
fn the_same_file_twice_is_already_there_unless_again() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let responses = fixtures().join("openai-responses/unknown-items.json");
    let log = fixtures().join("claude-code/session/resumed.jsonl");
    for file in [&responses, &log] {
        ok(&run_cli(&db, &["import", path_str(file)]));
    }
    let before = session_ids(&db);
    assert_eq!(before.len(), 2);
    for (file, id) in [(&responses, &before[0]), (&log, &before[1])] {
        let (stdout, _) = ok(&run_cli(&db, &["import", path_str(file)]));
        assert!(
            stdout.contains(&format!("already imported as {id}")),
            "{stdout}"
        );
        let json: Value =
            serde_json::from_str(&ok(&run_cli(&db, &["--json", "import", path_str(file)])).0)
                .unwrap();
        assert_eq!(
            json["already_imported"][0]["session"],
            id.as_str(),
            "{json}"
        );
    }
    assert_eq!(session_ids(&db), before, "nothing written");
    // A copy of the same bytes elsewhere is the same file.
    let copy = dir.path().join("copy.json");
    std::fs::copy(&responses, &copy).unwrap();
    let (stdout, _) = ok(&run_cli(&db, &["import", path_str(&copy)]));
    assert!(stdout.contains("already imported as"), "{stdout}");
    // --again imports it again.
    ok(&run_cli(&db, &["import", path_str(&responses), "--again"]));
    ok(&run_cli(&db, &["import", path_str(&log), "--again"]));
    assert_eq!(session_ids(&db).len(), 4);
}

/// Runs the binary on `db` with `input` on its standard input.
fn run_cli_with_stdin(db: &Path, args: &[&str], input: &[u8]) -> std::process::Output {
    use std::io::Write;
    let mut child = crate::common::cli_command(db)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    child.wait_with_output().unwrap()
}

/// A second import of an exported journal, a state blob, a WINK snapshot,
/// or the same bytes on standard input, says where they are and writes
/// nothing (exit 0); `--again` imports them again (but an exported
/// journal, whose ids the import keeps).
#[test]
fn every_kind_of_import_is_already_there_the_second_time() {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("source");
    let sandbox = dir.path().join("sb");
    ok(&run_cli(
        &source,
        &["demo", "--sandbox", path_str(&sandbox)],
    ));
    let id = session_ids(&source).pop().unwrap();
    let export = |format: &str, name: &str| {
        let file = dir.path().join(name);
        ok(&run_cli(
            &source,
            &["export", &id, "--format", format, "-o", path_str(&file)],
        ));
        file
    };
    let journal = export("journal", "run.ajournal");
    let wink = export("wink", "run.wink.json");
    let blob = fixtures().join("state_blob/goaitools_example.json");
    let request = fixtures().join("openai-responses/items.json");

    let db = dir.path().join("db");
    let already = |out: &std::process::Output, file: &Path, sessions: &[String]| {
        let (stdout, _) = ok(out);
        let v: Value = serde_json::from_str(&stdout).unwrap();
        assert_eq!(v["sessions"], serde_json::json!([]), "{file:?}: {v}");
        let named: Vec<&str> = v["already_imported"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["session"].as_str().unwrap())
            .collect();
        assert_eq!(named, sessions, "{file:?}: {v}");
    };
    for file in [&journal, &wink, &blob] {
        ok(&run_cli(&db, &["import", path_str(file)]));
        let made = session_ids(&db).pop().unwrap();
        let made = if file == &journal { id.clone() } else { made };
        let before = session_ids(&db);
        let out = run_cli(&db, &["--json", "import", path_str(file)]);
        already(&out, file, std::slice::from_ref(&made));
        let (text, _) = ok(&run_cli(&db, &["import", path_str(file)]));
        assert!(
            text.contains(&format!("already imported as {made}")),
            "{text}"
        );
        assert_eq!(session_ids(&db), before, "{file:?}: nothing written");
        // The same bytes on standard input (read once) are the same file.
        if file != &journal {
            let bytes = std::fs::read(file).unwrap();
            let out = run_cli_with_stdin(&db, &["--json", "import", "/dev/stdin"], &bytes);
            already(&out, file, std::slice::from_ref(&made));
            assert_eq!(session_ids(&db), before, "{file:?}: nothing written");
        }
    }
    // Standard input first: its hash is that of what was read, with the
    // format told or detected.
    let bytes = std::fs::read(&request).unwrap();
    let args = [
        "--json",
        "import",
        "/dev/stdin",
        "--format",
        "openai-responses",
    ];
    ok(&run_cli_with_stdin(&db, &args, &bytes));
    let made = session_ids(&db).pop().unwrap();
    let before = session_ids(&db);
    already(
        &run_cli_with_stdin(&db, &args, &bytes),
        &request,
        std::slice::from_ref(&made),
    );
    let out = run_cli_with_stdin(&db, &["--json", "import", "/dev/stdin"], &bytes);
    already(&out, &request, std::slice::from_ref(&made));
    already(
        &run_cli(&db, &["--json", "import", path_str(&request)]),
        &request,
        &[made],
    );
    assert_eq!(session_ids(&db), before, "nothing written");

    // --again imports each again, but a journal's sessions, whose ids are
    // taken.
    for file in [&wink, &blob] {
        ok(&run_cli(&db, &["import", path_str(file), "--again"]));
    }
    ok(&run_cli_with_stdin(
        &db,
        &["import", "/dev/stdin", "--again"],
        &bytes,
    ));
    assert_eq!(session_ids(&db).len(), before.len() + 3);
    let out = run_cli(&db, &["import", path_str(&journal), "--again"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    // A journal with a session not here (a fork of the run) is imported as
    // always: refused whole, since its parent is here.
    let two = dir.path().join("two.ajournal");
    ok(&run_cli(&source, &["fork", &id, "--at", "5"]));
    let fork = session_ids(&source).pop().unwrap();
    ok(&run_cli(
        &source,
        &["export", &fork, "--format", "journal", "-o", path_str(&two)],
    ));
    let out = run_cli(&db, &["import", path_str(&two)]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(!session_ids(&db).contains(&fork));
}
