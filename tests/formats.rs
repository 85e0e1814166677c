//! The OpenAI Responses API format: the fixture
//! `tests/fixtures/openai-responses/items.json` (written for these tests:
//! a developer message, image input, reasoning with encrypted content,
//! annotated output text, parallel function calls, a structured output, a
//! server-side web search, a custom tool call) round-trips exactly; a
//! request body whose last call was never answered imports with it pending;
//! bad input is refused naming the item, and nothing is written.

use std::path::{Path, PathBuf};

use agent_journal::EvaluationId;
use agent_journal::provider::ConversationFormat;
use serde_json::Value;

use crate::common::{json_lines, path_str, run_cli};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/openai-responses")
        .join(name)
}

#[test]
fn responses_items_round_trip_exactly() {
    let text = std::fs::read_to_string(fixture("items.json")).unwrap();
    let f = ConversationFormat::OpenAiResponses;
    let messages = f.parse(&text, EvaluationId::new(), "ns", "k").unwrap();
    let original: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(f.to_json(&messages), original);
    // Through the CLI and a database too.
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let out = run_cli(
        &db,
        &[
            "import",
            path_str(&fixture("items.json")),
            "--format",
            "openai-responses",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id = json_lines(&run_cli(&db, &["--json", "sessions"]).stdout)[0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let out = run_cli(&db, &["export", &id, "--format", "openai-responses"]);
    let back: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(back, original);
    // The neutral fields: what other formats are built from.
    let texts: Vec<(&str, &str)> = messages
        .iter()
        .map(|m| (m.role.as_str(), m.content.as_str()))
        .collect();
    assert_eq!(
        texts[0],
        ("system", "You are a release assistant. Use tools.")
    );
    assert_eq!(texts[2], ("assistant", "Checking CI first."));
    assert_eq!(messages[2].tool_calls.len(), 2);
    assert_eq!(texts[4], ("tool", "- faster uploads\n- retry on 503"));
    // Exported to chat completions, a valid history.
    let chat = ConversationFormat::OpenAi.to_json(&messages);
    agent_journal::provider::validate::openai(chat.as_array().unwrap())
        .expect("valid chat messages");
}

#[test]
fn a_request_whose_last_call_was_never_answered_imports_it_pending() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let out = run_cli(&db, &["import", path_str(&fixture("crashed.json"))]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("format: openai-responses"));
    let id = json_lines(&run_cli(&db, &["--json", "sessions"]).stdout)[0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let pending: Value =
        serde_json::from_slice(&run_cli(&db, &["--json", "pending", &id]).stdout).unwrap();
    assert_eq!(pending["state"], "pending_tools");
    assert_eq!(pending["pending"][0]["call_id"], "call_tag");
    assert_eq!(run_cli(&db, &["verify"]).status.code(), Some(0));
}

#[test]
fn bad_responses_input_is_refused_by_item() {
    let f = ConversationFormat::OpenAiResponses;
    let cases = [
        ("[{\"role\":\"user\",\"content\":\"hi\"}", "invalid JSON"),
        (
            r#"[{"type":"function_call_output","call_id":"c9","output":"x"}]"#,
            "input[0]: function_call_output for call_id \"c9\"",
        ),
        (
            r#"[{"type":"function_call","call_id":"c1","name":"a","arguments":"{}"},{"type":"function_call","call_id":"c1","name":"b","arguments":"{}"}]"#,
            "input[1]: duplicate call_id \"c1\"",
        ),
        (r#"[{"hologram":1}]"#, "input[0]: no \"type\""),
        (
            r#"[{"type":"function_call","call_id":"c1","name":"a"}]"#,
            "input[0]: no string \"arguments\"",
        ),
        (
            r#"[{"type":"function_call","call_id":"c1","name":"a","arguments":"{}"},{"type":"function_call_output","call_id":"c1","output":"x"},{"type":"function_call_output","call_id":"c1","output":"y"}]"#,
            "input[2]: a second output",
        ),
    ];
    for (text, expected) in cases {
        let err = f
            .parse(text, EvaluationId::new(), "ns", "k")
            .unwrap_err()
            .to_string();
        assert!(err.contains(expected), "{text}: {err}");
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.json");
    std::fs::write(&file, cases[3].0).unwrap();
    let db = dir.path().join("db");
    let out = run_cli(
        &db,
        &["import", path_str(&file), "--format", "openai-responses"],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(!db.exists(), "nothing written");
}

/// Ollama and Gemini: their fixtures round-trip exactly; a run that stopped
/// on an unanswered call imports it pending; ids derived from position are
/// said so; bad input is refused naming the message or part.
#[test]
fn ollama_and_gemini_round_trip_and_import_their_crash_point() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    for (format, f, complete, crashed, call) in [
        (
            "ollama",
            ConversationFormat::Ollama,
            "ollama/messages.json",
            "ollama/crashed.json",
            "ollama-7-0",
        ),
        (
            "gemini",
            ConversationFormat::Gemini,
            "gemini/request.json",
            "gemini/crashed.json",
            "call-book-1",
        ),
    ] {
        let text = std::fs::read_to_string(dir.join(complete)).unwrap();
        let messages = f.parse(&text, EvaluationId::new(), "ns", "k").unwrap();
        let original: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(f.to_json(&messages), original, "{format}: exact round trip");
        // Neutral fields: a valid chat history, and a valid Anthropic one.
        let chat = ConversationFormat::OpenAi.to_json(&messages);
        agent_journal::provider::validate::openai(chat.as_array().unwrap()).expect(format);
        let anthropic = ConversationFormat::Anthropic.to_json(&messages);
        agent_journal::provider::validate::anthropic(&anthropic).expect(format);

        let tmp = tempfile::tempdir().unwrap();
        let db = tmp.path().join("db");
        let out = run_cli(&db, &["import", path_str(&dir.join(crashed))]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{format}: {stderr}");
        assert!(
            stderr.contains(&format!("format: {format}")),
            "{format}: {stderr}"
        );
        let listed = json_lines(&run_cli(&db, &["--json", "sessions"]).stdout);
        let labels = listed[0]["labels"].to_string();
        assert!(labels.contains("derived-by-position"), "{format}: {labels}");
        let id = listed[0]["id"].as_str().unwrap().to_owned();
        let pending: Value =
            serde_json::from_slice(&run_cli(&db, &["--json", "pending", &id]).stdout).unwrap();
        assert_eq!(
            pending["pending"][0]["call_id"], call,
            "{format}: {pending}"
        );
        assert_eq!(pending["pending"].as_array().unwrap().len(), 1, "{format}");
    }
    let bad = [
        (
            ConversationFormat::Ollama,
            r#"[{"role":"tool","content":"x"}]"#,
            "messages[0]: a tool result with no earlier tool call",
        ),
        (
            ConversationFormat::Ollama,
            r#"[{"role":"robot","content":"x"}]"#,
            "messages[0]: unknown role",
        ),
        (
            ConversationFormat::Ollama,
            r#"[{"role":"assistant","content":"","tool_calls":[{"function":{"name":"a","arguments":{}}}]},{"role":"tool","content":"x","tool_name":"b"}]"#,
            "messages[1]: a tool result for \"b\" that answers no call",
        ),
        (
            ConversationFormat::Gemini,
            r#"{"contents":[{"role":"user","parts":[{"functionResponse":{"name":"a","response":{}}}]}]}"#,
            "contents[0].parts[0]: a functionResponse for a that answers no call",
        ),
        (
            ConversationFormat::Gemini,
            r#"{"contents":[{"role":"model","parts":[{"functionCall":{"id":"x","name":"a","args":{}}},{"functionCall":{"id":"x","name":"b","args":{}}}]}]}"#,
            "contents[0].parts[1]: call id \"x\" used twice",
        ),
        (
            ConversationFormat::Gemini,
            r#"{"contents":[{"role":"narrator","parts":[]}]}"#,
            "contents[0]: unknown role",
        ),
        (
            ConversationFormat::Gemini,
            r#"{"contents":[{"role":"user","parts":"hi"}]}"#,
            "\"parts\" must be an array",
        ),
    ];
    for (f, text, expected) in bad {
        let err = f
            .parse(text, EvaluationId::new(), "ns", "k")
            .unwrap_err()
            .to_string();
        assert!(err.contains(expected), "{}: {text}: {err}", f.name());
    }
}

#[test]
fn a_request_body_comes_back_whole_with_export_body() {
    let dir = tempfile::tempdir().unwrap();
    let bodies = [
        (
            "openai",
            serde_json::json!({"model": "gpt-4o", "temperature": 0.2, "tool_choice": "auto",
                "tools": [{"type": "function", "function": {"name": "ls", "parameters": {"type": "object"}}}],
                "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "list"},
                    {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
                        "function": {"name": "ls", "arguments": "{}"}}]},
                    {"role": "tool", "tool_call_id": "c1", "content": "a b"},
                    {"role": "assistant", "content": "a and b"}]}),
        ),
        (
            "anthropic",
            serde_json::json!({"model": "claude-sonnet-4-5", "max_tokens": 1024, "system": "s",
                "stop_sequences": ["END"],
                "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}),
        ),
        (
            "gemini",
            serde_json::json!({"generationConfig": {"temperature": 0.1}, "systemInstruction": {"parts": [{"text": "s"}]},
                "contents": [{"role": "user", "parts": [{"text": "hi"}]}, {"role": "model", "parts": [{"text": "yo"}]}]}),
        ),
    ];
    for (i, (format, body)) in bodies.iter().enumerate() {
        let file = dir.path().join(format!("{format}.json"));
        std::fs::write(&file, body.to_string()).unwrap();
        let db = dir.path().join(format!("db{i}"));
        let out = run_cli(&db, &["import", path_str(&file), "--format", format]);
        assert!(
            out.status.success(),
            "{format}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let id = json_lines(&run_cli(&db, &["--json", "sessions"]).stdout)[0]["id"]
            .as_str()
            .unwrap()
            .to_owned();
        let out = run_cli(&db, &["export", &id, "--format", format, "--body"]);
        assert!(
            out.stderr.is_empty(),
            "{format}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let back: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(&back, body, "{format}: the whole request");
        // Without --body, only the messages, as before.
        let out = run_cli(&db, &["export", &id, "--format", format]);
        let plain: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(
            plain.get("model").is_none() && plain.get("generationConfig").is_none(),
            "{format}"
        );
    }
    // Fields of another format are not carried over, and that is said.
    let db = dir.path().join("db0");
    let id = json_lines(&run_cli(&db, &["--json", "sessions"]).stdout)[0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let out = run_cli(&db, &["export", &id, "--format", "anthropic", "--body"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("recorded for openai") && stderr.contains("model"),
        "{stderr}"
    );
    let back: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(back.get("model").is_none());
    agent_journal::provider::validate::anthropic(&back).expect("valid messages");
}

#[test]
fn an_export_to_another_provider_says_what_it_left_out_and_added() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let log =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/claude-code/crashed.jsonl");
    assert!(run_cli(&db, &["import", path_str(&log)]).status.success());
    let id = json_lines(&run_cli(&db, &["--json", "sessions"]).stdout)[0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    // The last thread (after the compaction): an image (carried across as
    // an image part), redacted thinking (left out), and a call that never
    // got a result (one added).
    let out = run_cli(&db, &["--json", "export", &id, "--format", "openai"]);
    assert!(out.status.success());
    let notes: Vec<Value> = String::from_utf8_lossy(&out.stderr)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["translation"].clone())
        .collect();
    let kinds: Vec<(u64, &str)> = notes
        .iter()
        .map(|n| (n["message"].as_u64().unwrap(), n["kind"].as_str().unwrap()))
        .collect();
    assert_eq!(kinds, [(2, "redacted_thinking"), (2, "added")], "{notes:?}");
    // The export itself is still a valid history, the image in it.
    let chat: Value = serde_json::from_slice(&out.stdout).unwrap();
    agent_journal::provider::validate::openai(chat.as_array().unwrap()).unwrap();
    assert_eq!(
        chat[1]["content"][1],
        serde_json::json!({"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}})
    );
    // In its own format nothing is left out but the result it must add.
    let out = run_cli(&db, &["export", &id, "--format", "anthropic"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("added a result for call toolu_05"),
        "{stderr}"
    );
    // The first thread: thinking has no place in chat completions; the
    // error flag of a failed result becomes a mark in its text.
    let out = run_cli(
        &db,
        &["export", &id, "--format", "openai", "--evaluation", "all"],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("thinking left out (evaluation 0"),
        "{stderr}"
    );
    assert!(!stderr.contains("is_error"), "{stderr}");
    let all: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(all[0][4]["content"], "[error] 1 failed: assert 0 != 0");

    // OpenAI images reach Anthropic as image blocks.
    let file = dir.path().join("chat.json");
    std::fs::write(
        &file,
        serde_json::json!([{"role": "user", "content": [{"type": "text", "text": "what is this?"},
            {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},
            {"type": "file", "file": {"filename": "a.pdf", "file_data": "data:application/pdf;base64,JVBERi0="}}]},
            {"role": "assistant", "content": "a cat"}])
        .to_string(),
    )
    .unwrap();
    let db2 = dir.path().join("db2");
    assert!(
        run_cli(&db2, &["import", path_str(&file), "--format", "openai"])
            .status
            .success()
    );
    let id2 = json_lines(&run_cli(&db2, &["--json", "sessions"]).stdout)[0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let out = run_cli(&db2, &["export", &id2, "--format", "anthropic"]);
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let request: Value = serde_json::from_slice(&out.stdout).unwrap();
    agent_journal::provider::validate::anthropic(&request).unwrap();
    assert_eq!(
        request["messages"][0]["content"][1],
        serde_json::json!({"type": "image", "source": {"type": "url", "url": "https://example.com/cat.png"}})
    );
    assert_eq!(
        request["messages"][0]["content"][2],
        serde_json::json!({"type": "document", "title": "a.pdf",
            "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0="}})
    );
}
