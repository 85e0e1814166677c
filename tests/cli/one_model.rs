//! One model through the CLI (issue 34): `turns`, `show --turn` (and
//! `--request`), `export --format state-blob` and `compact-history` work
//! on a demo session and on an imported OpenAI chat, each evaluation read
//! as a turn with the same id.

use serde_json::Value;

use super::{Demo, aj};
use crate::common::path_str;

/// The evaluation id of the first `evaluation_started` event of `id`.
fn evaluation_of(d: &Demo, id: &str) -> String {
    let out = d.run(&["--json", "log", id]);
    assert_eq!(out.code, 0, "{out:?}");
    out.json_lines()
        .iter()
        .find(|e| e["type"] == "evaluation_started")
        .and_then(|e| e["evaluation"].as_str())
        .map(str::to_owned)
        .unwrap_or_else(|| panic!("no evaluation_started in {}", out.stdout))
}

/// The one turn of `id` under `turns --json`.
fn only_turn(d: &Demo, id: &str) -> Value {
    let out = d.run(&["--json", "turns", id]);
    assert_eq!(out.code, 0, "{out:?}");
    let turns = out.json_lines();
    assert_eq!(turns.len(), 1, "{}", out.stdout);
    turns[0].clone()
}

#[test]
fn a_demo_run_has_turns_a_turn_view_a_request_and_a_state_blob() {
    let d = Demo::new();
    let turn = only_turn(&d, &d.id);
    assert_eq!(turn["id"], evaluation_of(&d, &d.id).as_str(), "same id");
    assert_eq!(turn["status"], "succeeded", "{turn}");
    assert_eq!(turn["provider_calls"].as_array().map(Vec::len), Some(3));
    assert_eq!(turn["tool_calls"].as_array().map(Vec::len), Some(4));
    assert!(turn["tokens"].as_u64().is_some_and(|t| t > 0), "{turn}");

    let out = d.run(&["turns", &d.id]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("succeeded"), "{}", out.stdout);

    let prefix = &turn["id"].as_str().expect("id")[..8];
    let out = d.run(&["show", &d.id, "--turn", prefix]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stdout.contains("output [tool] 9 words"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("write_file"), "{}", out.stdout);

    // The last call was sent the whole run so far (8 messages).
    let out = d.run(&["show", &d.id, "--turn", prefix, "--request"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(out.json()["messages"].as_array().map(Vec::len), Some(8));

    let blob = d.path("demo.blob");
    let out = d.run(&[
        "export",
        &d.id,
        "--format",
        "state-blob",
        "-o",
        path_str(&blob),
    ]);
    assert_eq!(out.code, 0, "{out:?}");
    let out = d.run(&["--json", "import", path_str(&blob)]);
    assert_eq!(out.code, 0, "{out:?}");

    // One user message: no cut is allowed, and that is said.
    let out = d.run(&["compact-history", &d.id, "--messages", "2"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("nothing to compact"), "{}", out.stdout);
}

#[test]
fn an_imported_openai_chat_is_a_conversation_that_compacts() {
    let d = Demo::new();
    let chat = d.path("chat.json");
    let messages = serde_json::json!({"model": "gpt-4o", "messages": [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
        {"role": "user", "content": "list files"},
        {"role": "assistant", "content": "a.txt"},
        {"role": "user", "content": "thanks"},
    ]});
    std::fs::write(&chat, messages.to_string()).expect("write the chat");
    let out = d.run(&["--json", "import", path_str(&chat), "--format", "openai"]);
    assert_eq!(out.code, 0, "{out:?}");
    let v = out.json();
    let id = v["session"]
        .as_str()
        .or_else(|| v["sessions"][0].as_str())
        .unwrap_or_else(|| panic!("the imported session in {v}"))
        .to_owned();

    // An import is left open, as a crashed run is: a running turn.
    let turn = only_turn(&d, &id);
    assert_eq!(turn["status"], "running", "{turn}");
    assert_eq!(turn["input_messages"].as_array().map(Vec::len), Some(4));
    assert_eq!(turn["output_messages"].as_array().map(Vec::len), Some(2));
    let prefix = turn["id"].as_str().expect("id")[..8].to_owned();
    let out = d.run(&["show", &id, "--turn", &prefix]);
    assert_eq!(out.code, 0, "{out:?}");

    let out = d.run(&["--json", "compact-history", &id, "--messages", "2"]);
    assert_eq!(out.code, 0, "{out:?}");
    let v = out.json();
    assert_eq!(v["recorded"], true, "{v}");
    assert_eq!(v["messages_after"], 1, "{v}");
    let last = d.run(&["--json", "log", &id]).json_lines();
    assert_eq!(
        last.last().map(|e| e["type"].clone()),
        Some("compacted".into())
    );

    // The state blob holds what is still sent: the last user message (the
    // leading system message is the caller's to supply).
    let out = d.run(&["export", &id, "--format", "state-blob"]);
    assert_eq!(out.code, 0, "{out:?}");
    let blob = out.json();
    let sent: Vec<&str> = blob["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter_map(|m| m["content"].as_str())
        .collect();
    assert_eq!(sent, vec!["thanks"], "{blob}");
    assert_eq!(blob["provider"], "openai", "{blob}");
}

#[test]
fn a_session_without_messages_holds_no_conversation() {
    let d = Demo::new();
    let out = d.run(&["--json", "fork", &d.id, "--at", "0"]);
    assert_eq!(out.code, 0, "{out:?}");
    let fork = out.json()["session"]
        .as_str()
        .expect("the fork's id")
        .to_owned();
    for args in [
        vec!["turns", fork.as_str()],
        vec!["export", fork.as_str(), "--format", "state-blob"],
        vec!["compact-history", fork.as_str(), "--messages", "2"],
    ] {
        let out = aj(&d.db, &args);
        let line = out.assert_error(1);
        assert!(line.contains("holds no conversation"), "{args:?}: {line}");
    }
}
