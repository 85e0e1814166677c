//! `agent-journal chat` against the local server: every turn recorded, the
//! provider's answer printed, a provider error reported and recorded.

use std::io::Write;
use std::process::Stdio;

use serde_json::{Value, json};

use super::anthropic::stream_body;
use super::openai::text_response;
use super::server::{Reply, Server};
use crate::common::{cli_command, run_cli};

fn chat(
    db: &std::path::Path,
    env: (&str, String),
    args: &[&str],
    input: &str,
) -> std::process::Output {
    let mut c = cli_command(db);
    c.env_remove("OPENAI_BASE_URL")
        .env_remove("ANTHROPIC_BASE_URL")
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .env(env.0, env.1)
        .arg("chat")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = c.spawn().expect("spawn");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes())
        .expect("write");
    child.wait_with_output().expect("wait")
}

#[test]
fn chat_records_a_real_conversation_against_an_openai_compatible_server() {
    let server = Server::start(vec![
        Reply::json(&text_response("Hello! How can I help?"), "req-1"),
        Reply::status(
            429,
            &json!({"error": {"message": "Rate limit reached", "type": "rate_limit_error", "code": "rate_limit_exceeded"}}),
            "req-2",
        ),
        Reply::json(&text_response("Paris."), "req-3"),
    ]);
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    let out = chat(
        &db,
        ("OPENAI_BASE_URL", server.base_url()),
        &[
            "--provider",
            "openai",
            "--model",
            "gpt-4o-mini",
            "--system",
            "Be brief.",
        ],
        "Hi\nAre you busy?\nCapital of France?\n",
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "a turn failed: {stderr}");
    assert!(stdout.contains("Hello! How can I help?"), "{stdout}");
    assert!(stdout.contains("Paris."), "{stdout}");
    assert!(stderr.contains("Rate limit reached"), "{stderr}");
    let received = server.finish();
    assert_eq!(received.len(), 3);
    assert_eq!(received[0].path, "/v1/chat/completions");
    assert_eq!(received[0].body["model"], "gpt-4o-mini");
    assert_eq!(
        received[0].body["messages"][0],
        json!({"role": "system", "content": "Be brief."})
    );
    // The third request carries the whole history, the failed turn's
    // question included (it was recorded before the call).
    let roles: Vec<&str> = received[2].body["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| m["role"].as_str().expect("role"))
        .collect();
    assert_eq!(roles, ["system", "user", "assistant", "user", "user"]);

    let list: Value = crate::common::json_lines(&run_cli(&db, &["--json", "conversations"]).stdout);
    let id = list[0]["id"].as_str().expect("id").to_owned();
    let turns: Value = crate::common::json_lines(&run_cli(&db, &["--json", "turns", &id]).stdout);
    let statuses: Vec<&str> = turns
        .as_array()
        .expect("turns")
        .iter()
        .map(|t| t["status"].as_str().expect("status"))
        .collect();
    assert_eq!(statuses, ["succeeded", "failed", "succeeded"]);
    assert_eq!(
        turns[1]["error"]["raw"]["error"]["type"],
        "rate_limit_error"
    );
    assert_eq!(turns[0]["provider_calls"][0]["request_id"], "req-1");
    assert_eq!(turns[0]["tokens"], 35);
    // Each call's request can be rebuilt as it was sent.
    for (turn, sent) in [(0, 0), (1, 1), (2, 2)] {
        let t = turns[turn]["id"].as_str().expect("id");
        let out = run_cli(&db, &["show", &id, "--turn", t, "--request"]);
        let body: Value = serde_json::from_slice(&out.stdout).expect("JSON");
        assert_eq!(body, received[sent].body, "turn {turn}");
    }
}

#[test]
fn chat_streams_from_anthropic_and_continues_a_conversation() {
    let server = Server::start(vec![
        Reply::sse(&stream_body("Bonjour !", false), 11, "req-a"),
        Reply::sse(&stream_body("Au revoir.", false), 5, "req-b"),
    ]);
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    let env = ("ANTHROPIC_BASE_URL", server.base_url());
    let args = ["--provider", "anthropic", "--model", "claude-x", "--stream"];
    let out = chat(&db, env.clone(), &args, "Salut\n");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("Bonjour !"));
    let list: Value = crate::common::json_lines(&run_cli(&db, &["--json", "conversations"]).stdout);
    let id = list[0]["id"].as_str().expect("id").to_owned();
    let mut more = args.to_vec();
    more.extend(["--conversation", &id]);
    let out = chat(&db, env, &more, "Bye\n");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let received = server.finish();
    assert_eq!(received[1].path, "/v1/messages");
    assert_eq!(received[1].body["stream"], true);
    assert_eq!(
        received[1].body["messages"].as_array().map(Vec::len),
        Some(3),
        "the history went along"
    );
    let turns: Value = crate::common::json_lines(&run_cli(&db, &["--json", "turns", &id]).stdout);
    assert_eq!(turns.as_array().map(Vec::len), Some(2));
    let t = turns[1]["id"].as_str().expect("id");
    let out = run_cli(&db, &["show", &id, "--turn", t, "--request"]);
    let mut body: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let mut sent = received[1].body.clone();
    sent.as_object_mut().expect("object").remove("stream");
    body.as_object_mut().expect("object").remove("stream");
    assert_eq!(body, sent, "the streamed request, rebuilt");
}
