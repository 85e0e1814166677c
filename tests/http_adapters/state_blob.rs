//! Issue 38 item 3 over HTTP: the spec's example blob imported by the
//! command line and continued by `chat`; an Anthropic extended-thinking
//! tool loop kept in a blob reaches the Messages API with its blocks
//! unchanged, and the answer's thinking is kept in the new blob.

use std::path::Path;

use agent_journal::conversation::http::{AnthropicAdapter, HttpOptions};
use agent_journal::conversation::state_blob::{StateChatOptions, chat_with_state};
use serde_json::{Value, json};

use super::openai::text_response;
use super::server::{Reply, Server};
use crate::common::{cli_command, path_str, run_cli};
use crate::state_blob::wire::thinking_blob;

fn example() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/state_blob/goaitools_example.json")
}

#[test]
fn the_spec_example_blob_is_imported_and_continued_by_chat() {
    let server = Server::start(vec![Reply::json(&text_response("At 7:30pm."), "req-1")]);
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    let file = example();
    let out = run_cli(
        &db,
        &[
            "--json",
            "import",
            path_str(&file),
            "--format",
            "state-blob",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let made: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let id = made["sessions"][0].as_str().expect("id").to_owned();
    let mut c = cli_command(&db);
    c.env_remove("OPENAI_API_KEY")
        .env("OPENAI_BASE_URL", server.base_url())
        .args([
            "chat",
            "--provider",
            "openai",
            "--model",
            "gpt-4o",
            "--conversation",
            &id,
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = c.spawn().expect("spawn");
    std::io::Write::write_all(
        &mut child.stdin.take().expect("stdin"),
        b"When does it start?\n",
    )
    .expect("write");
    let out = child.wait_with_output().expect("wait");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("At 7:30pm."), "{stdout}");
    let got = server.finish();
    let spec: Value =
        serde_json::from_slice(&std::fs::read(&file).expect("fixture")).expect("JSON");
    let sent = got[0].body["messages"].as_array().expect("messages");
    assert_eq!(sent[0], spec["messages"][0], "the example's messages first");
    assert_eq!(sent[1], spec["messages"][1]);
    assert_eq!(
        sent[2],
        json!({"role": "user", "content": "When does it start?"})
    );
}

#[test]
fn an_anthropic_thinking_tool_loop_reaches_the_api_unchanged_through_a_blob() {
    let answer = json!({"id": "msg_3", "type": "message", "role": "assistant",
        "model": "claude-sonnet-4-5", "stop_reason": "end_turn", "stop_sequence": null,
        "content": [
            {"type": "thinking", "thinking": "396 it is.", "signature": "Sig3=="},
            {"type": "text", "text": "17 * 23 + 5 = 396."}],
        "usage": {"input_tokens": 50, "output_tokens": 12}});
    let server = Server::start(vec![Reply::json(&answer, "req-a")]);
    let adapter = AnthropicAdapter::new(HttpOptions::new(server.base_url()).api_key("sk-ant-test"));
    let blob = thinking_blob();
    let r = chat_with_state(
        &adapter,
        Some(blob.to_string().as_bytes()),
        &StateChatOptions::new("claude-sonnet-4-5").system("Use the tools."),
    )
    .expect("chat");
    assert!(r.degraded.is_none(), "{:?}", r.degraded);
    let got = server.finish();
    let body = &got[0].body;
    assert_eq!(body["system"], "Use the tools.");
    assert_eq!(
        body["messages"], blob["messages"],
        "every message and block as the blob holds it"
    );
    let state: Value = serde_json::from_slice(&r.state).expect("JSON");
    assert_eq!(
        state["messages"][5],
        json!({"role": "assistant", "content": answer["content"]})
    );
}
