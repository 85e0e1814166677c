//! Conversations in and out through the library and the CLI: exact round
//! trips, cross-provider translation, and malformed files that write nothing.

use crate::common::run_cli;

use agent_journal::provider::ConversationFormat;
use agent_journal::provider::validate;
use agent_journal::{Error, Journal};
use serde_json::json;

fn openai_fixture() -> serde_json::Value {
    json!([
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "weather in Paris and Oslo?"}]},
        {"role": "assistant", "content": null, "refusal": null, "annotations": [],
         "tool_calls": [
            {"id": "call_a", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Paris\"}"}},
            {"id": "call_b", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Oslo\"}"}}
         ]},
        {"role": "tool", "tool_call_id": "call_a", "content": "18C"},
        {"role": "tool", "tool_call_id": "call_b", "content": "9C"},
        {"role": "assistant", "content": "Paris 18C, Oslo 9C.", "x_vendor_field": {"kept": true}}
    ])
}

fn anthropic_fixture() -> serde_json::Value {
    json!({
        "system": "be brief",
        "messages": [
            {"role": "user", "content": "weather in Paris and Oslo?"},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "two cities", "signature": "sig=="},
                {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Paris"}},
                {"type": "tool_use", "id": "toolu_2", "name": "weather", "input": {"city": "Oslo"}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "18C"},
                {"type": "tool_result", "tool_use_id": "toolu_2", "content": "lookup failed", "is_error": true}
            ]},
            {"role": "assistant", "content": [{"type": "text", "text": "Paris 18C; Oslo unknown."}]}
        ]
    })
}

#[test]
fn same_provider_in_and_out_reproduces_every_message() {
    let j = Journal::memory();
    let s = j
        .import_conversation(
            &openai_fixture().to_string(),
            ConversationFormat::OpenAi,
            "ns",
            "key",
        )
        .expect("import");
    let out: serde_json::Value = serde_json::from_str(
        &ConversationFormat::OpenAi.to_text(&s.latest_conversation(None).expect("export")),
    )
    .expect("json");
    assert_eq!(out, openai_fixture());

    let s = j
        .import_conversation(
            &anthropic_fixture().to_string(),
            ConversationFormat::Anthropic,
            "ns",
            "key",
        )
        .expect("import");
    let out: serde_json::Value = serde_json::from_str(
        &ConversationFormat::Anthropic.to_text(&s.latest_conversation(None).expect("export")),
    )
    .expect("json");
    assert_eq!(out, anthropic_fixture());
}

#[test]
fn across_providers_the_neutral_fields_translate_into_valid_requests() {
    let j = Journal::memory();
    let s = j
        .import_conversation(
            &openai_fixture().to_string(),
            ConversationFormat::OpenAi,
            "ns",
            "key",
        )
        .expect("import");
    let a: serde_json::Value = serde_json::from_str(
        &ConversationFormat::Anthropic.to_text(&s.latest_conversation(None).expect("export")),
    )
    .expect("json");
    validate::anthropic(&a).expect("valid for Anthropic");
    assert_eq!(a["system"], "be brief");
    assert_eq!(
        a["messages"][1]["content"][1]["input"],
        json!({"city": "Oslo"})
    );

    let s = j
        .import_conversation(
            &anthropic_fixture().to_string(),
            ConversationFormat::Anthropic,
            "ns",
            "key",
        )
        .expect("import");
    let o: serde_json::Value = serde_json::from_str(
        &ConversationFormat::OpenAi.to_text(&s.latest_conversation(None).expect("export")),
    )
    .expect("json");
    validate::openai(o.as_array().expect("array")).expect("valid for OpenAI");
    assert_eq!(o[0], json!({"role": "system", "content": "be brief"}));

    // JSONL keeps everything, ids included.
    let text = ConversationFormat::Jsonl.to_text(&s.latest_conversation(None).expect("jsonl"));
    let back = j
        .import_conversation(&text, ConversationFormat::Jsonl, "", "")
        .expect("import jsonl");
    let msgs =
        |s: &agent_journal::Session| s.state().messages().iter().cloned().collect::<Vec<_>>();
    assert_eq!(msgs(&back), msgs(&s));
}

#[test]
fn malformed_conversations_are_refused_and_write_nothing() {
    let cases: Vec<(&str, ConversationFormat, String, &str)> = vec![
        ("not json", ConversationFormat::OpenAi, "{oops".into(), "invalid JSON"),
        (
            "result without a call",
            ConversationFormat::OpenAi,
            json!([{"role": "tool", "tool_call_id": "call_9", "content": "x"}]).to_string(),
            "call_9",
        ),
        (
            "a call id twice",
            ConversationFormat::OpenAi,
            json!([
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}},
                    {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}
            ])
            .to_string(),
            "c1",
        ),
        ("a wrong role", ConversationFormat::OpenAi, json!([{"role": "robot", "content": "beep"}]).to_string(), "robot"),
        (
            "anthropic result without a tool_use",
            ConversationFormat::Anthropic,
            json!({"messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_x", "content": "x"}]}]})
                .to_string(),
            "toolu_x",
        ),
        ("jsonl garbage on line 2", ConversationFormat::Jsonl, "{}\nnot json\n".into(), "line"),
        ("empty", ConversationFormat::OpenAi, "[]".into(), "no messages"),
    ];
    let j = Journal::memory();
    for (name, format, text, needle) in cases {
        let r = j.import_conversation(&text, format, "ns", "key");
        match r {
            Err(e @ Error::InvalidInput(_)) => {
                assert!(e.to_string().contains(needle), "{name}: {e}")
            }
            other => panic!("{name}: expected InvalidInput, got {other:?}"),
        }
        assert!(
            j.sessions().expect("sessions").is_empty(),
            "{name}: nothing was written"
        );
    }
}

#[test]
fn the_cli_imports_and_exports_conversations() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    let file = dir.path().join("chat.json");
    std::fs::write(&file, openai_fixture().to_string()).expect("write");
    let run = |args: &[&str]| run_cli(&db, args);
    let out = run(&[
        "--json",
        "import",
        file.to_str().expect("utf8"),
        "--format",
        "openai",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let id = v["sessions"][0].as_str().expect("id").to_owned();
    let out = run(&["export", &id, "--format", "openai"]);
    let back: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(back, openai_fixture());
    // Time travel: the history after the assistant's calls has synthetic
    // "interrupted" results, and is still valid.
    let out = run(&["export", &id, "--format", "openai", "--at", "4"]);
    let early: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    validate::openai(early.as_array().expect("array")).expect("valid");

    std::fs::write(&file, "[{\"role\":\"robot\"}]").expect("write");
    let out = run(&["import", file.to_str().expect("utf8"), "--format", "openai"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("chat.json") && err.contains("robot") && err.lines().count() == 1,
        "{err}"
    );
    let out = run(&["--json", "sessions"]);
    let all = crate::common::json_lines(&out.stdout);
    assert_eq!(
        all.as_array().map(Vec::len),
        Some(1),
        "the bad file wrote nothing"
    );
}

#[test]
fn the_cli_imports_and_exports_anthropic_and_jsonl() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    let run = |args: &[&str]| run_cli(&db, args);
    let import = |file: &std::path::Path, format: &str| -> String {
        let out = run(&[
            "--json",
            "import",
            file.to_str().expect("utf8"),
            "--format",
            format,
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
        v["sessions"][0].as_str().expect("id").to_owned()
    };
    let export = |id: &str, format: &str| -> String {
        let out = run(&["export", id, "--format", format]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("utf8")
    };

    // Anthropic in, Anthropic out: the same request body.
    let file = dir.path().join("request.json");
    std::fs::write(&file, anthropic_fixture().to_string()).expect("write");
    let id = import(&file, "anthropic");
    let back: serde_json::Value = serde_json::from_str(&export(&id, "anthropic")).expect("json");
    assert_eq!(back, anthropic_fixture());

    // JSONL out and in again: every message, ids included.
    let lines = export(&id, "jsonl");
    assert_eq!(lines.lines().count(), 6, "{lines}");
    let file = dir.path().join("messages.jsonl");
    std::fs::write(&file, &lines).expect("write");
    let again = import(&file, "jsonl");
    assert_ne!(again, id);
    assert_eq!(export(&again, "jsonl"), lines);

    // A malformed line is a one-line error naming the file, and writes nothing.
    std::fs::write(&file, format!("{lines}{{\"role\": 7}}\n")).expect("write");
    let out = run(&["import", file.to_str().expect("utf8"), "--format", "jsonl"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("messages.jsonl") && err.lines().count() == 1,
        "{err}"
    );
    let out = run(&["--json", "sessions"]);
    let all = crate::common::json_lines(&out.stdout);
    assert_eq!(
        all.as_array().map(Vec::len),
        Some(2),
        "the bad file wrote nothing"
    );
}

#[test]
fn unknown_fields_with_extreme_floats_round_trip_exactly() {
    // Found by the fuzz target `openai_import` (seed
    // regression-float-roundtrip.json): serde_json's default float parser is
    // not exact, so 2.000000000000001e60 came back as 2.0000000000000006e60.
    let text = r#"[{"role":"user","content":"hi"},
        {"role":"assistant","content":"ok","x_extra":2.000000000000001e+60,"y":8.888888888888889e+25}]"#;
    let j = Journal::memory();
    let s = j
        .import_conversation(text, ConversationFormat::OpenAi, "ns", "key")
        .expect("import");
    let once = ConversationFormat::OpenAi.to_text(&s.latest_conversation(None).expect("export"));
    let original: serde_json::Value = serde_json::from_str(text).expect("json");
    let back: serde_json::Value = serde_json::from_str(&once).expect("json");
    assert_eq!(back, original);
    let s2 = j
        .import_conversation(&once, ConversationFormat::OpenAi, "ns", "key")
        .expect("import again");
    assert_eq!(
        ConversationFormat::OpenAi.to_text(&s2.latest_conversation(None).expect("export")),
        once
    );
}

#[test]
fn a_wink_snapshot_imports_as_a_session_that_resumes() {
    use crate::common::path_str;
    let dir = tempfile::tempdir().expect("tempdir");
    let (db, sb) = (dir.path().join("db"), dir.path().join("sb"));
    let out = run_cli(
        &db,
        &["demo", "--sandbox", path_str(&sb), "--crash-after", "9"],
    );
    assert!(!out.status.success(), "crashed");
    let id = agent_journal::Journal::open(&db)
        .expect("open")
        .sessions()
        .expect("sessions")[0]
        .to_string();
    let snap = dir.path().join("snap.json");
    let out = run_cli(
        &db,
        &[
            "export",
            &id,
            "--format",
            "wink",
            "--include-logs",
            "-o",
            path_str(&snap),
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let other = dir.path().join("other");
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "{\"version\": \"1\"}").expect("write");
    let out = run_cli(&other, &["import", path_str(&bad), "--format", "wink"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not an importable snapshot"));
    assert!(!other.exists(), "bad input creates nothing");
    let out = run_cli(
        &other,
        &["--json", "import", path_str(&snap), "--format", "wink"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let new = v["sessions"][0].as_str().expect("id").to_owned();
    let before: serde_json::Value =
        serde_json::from_slice(&run_cli(&db, &["--json", "pending", &id]).stdout).expect("JSON");
    let after: serde_json::Value =
        serde_json::from_slice(&run_cli(&other, &["--json", "pending", &new]).stdout)
            .expect("JSON");
    assert_eq!(before["state"], after["state"]);
    assert_eq!(
        before["pending"].as_array().map(Vec::len),
        after["pending"].as_array().map(Vec::len)
    );
    // An imported session has no sandbox of its own: --sandbox names one.
    let out = run_cli(
        &other,
        &[
            "resume",
            &new,
            "--sandbox",
            path_str(&dir.path().join("sb2")),
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn one_role_enum_an_other_message_is_recorded_as_other_and_sent_as_a_user_message() {
    use agent_journal::conversation::ConversationMessage;
    use agent_journal::{EvaluationId, InnerMessage, Role};
    // The conversation engine's message and the inner loop's share one
    // `Role`: an observer's note keeps its role in the journal (frame and
    // JSON) and every provider format sends it as the user.
    let eval = EvaluationId::new();
    let note = ConversationMessage::new(Role::Other, "the user left the page").to_inner(eval, 1);
    assert_eq!(note.role, Role::Other);
    let messages = vec![
        InnerMessage::new(Role::System, "Be brief.", eval, 0),
        note.clone(),
        InnerMessage::new(Role::User, "Hi", eval, 2),
    ];
    let openai = ConversationFormat::OpenAi.to_json(&messages);
    assert_eq!(openai[1]["role"], "user");
    validate::openai(openai.as_array().expect("array")).expect("a valid OpenAI request");
    validate::anthropic(&ConversationFormat::Anthropic.to_json(&messages))
        .expect("a valid Anthropic request");
    let jsonl = ConversationFormat::Jsonl.to_text(&messages);
    assert!(jsonl.contains(r#""role":"other""#), "{jsonl}");

    let journal = Journal::memory();
    let session = journal.create_session().expect("session");
    let eval = session.start_evaluation("ns", "key").expect("evaluation");
    let mut other = InnerMessage::new(Role::Other, "a UI event", eval.id(), 1);
    other.message_id = agent_journal::MessageId::new();
    session
        .append(agent_journal::Event::Message(other))
        .expect("append");
    let reopened: Vec<Role> = session
        .state()
        .messages()
        .for_evaluation(eval.id())
        .map(|m| m.role)
        .collect();
    assert_eq!(reopened, vec![Role::Other]);
    let events = session.events(..).expect("events");
    assert!(
        events
            .iter()
            .any(|e| matches!(&e.event, agent_journal::Event::Message(m) if m.role == Role::Other))
    );
}
