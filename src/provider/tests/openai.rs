//! OpenAI chat-completions: the exact round trip, the neutral fields an
//! import sets, and the import's error messages.

use serde_json::{Value, json};

use super::helpers::{oa, oa_err, openai_conversation, verdict};
use crate::model::{CallId, EvaluationId, Role, ToolCallRecord, ToolStatus};
use crate::provider::{openai, validate};

#[test]
fn openai_round_trip_is_exact() {
    let x = openai_conversation();
    let msgs = oa(&x);
    assert_eq!(Value::Array(openai::to_messages(&msgs)), x);
    assert_eq!(
        verdict(validate::openai(x.as_array().expect("array"))),
        Ok(())
    );

    // The request-body form is accepted too.
    let body = json!({"model": "gpt-4o", "messages": x.clone()});
    assert_eq!(Value::Array(openai::to_messages(&oa(&body))), x);
}

#[test]
fn openai_import_sets_the_neutral_fields() {
    let msgs = oa(&openai_conversation());
    let roles: Vec<Role> = msgs.iter().map(|m| m.role).collect();
    use Role::*;
    assert_eq!(
        roles,
        [
            System, User, Assistant, Tool, Tool, User, Assistant, Tool, Assistant
        ]
    );
    let seqs: Vec<u64> = msgs.iter().map(|m| m.sequence).collect();
    assert_eq!(seqs, (0..9).collect::<Vec<_>>());
    let turns: Vec<u32> = msgs.iter().map(|m| m.turn).collect();
    assert_eq!(turns, [0, 0, 1, 1, 1, 1, 2, 2, 3]);
    assert_eq!(msgs[1].content, "Weather and time\nin Paris?");
    assert_eq!(msgs[2].content, "");
    assert_eq!(
        msgs[2].tool_calls,
        vec![
            ToolCallRecord {
                call_id: "call_1".into(),
                name: "weather".into(),
                arguments: "{\"city\":\"Paris\"}".into(),
                status: ToolStatus::Completed,
            },
            ToolCallRecord {
                call_id: "call_2".into(),
                name: "time".into(),
                arguments: "{\"tz\": \"CET\"}".into(),
                status: ToolStatus::Completed,
            },
        ]
    );
    assert_eq!(msgs[3].tool_call_id, Some(CallId::from("call_2")));
    assert_eq!(msgs[3].tool_name.as_deref(), Some("time"));
    assert_eq!(msgs[7].content, "rain");
    for m in &msgs {
        assert_eq!((m.prompt_ns.as_str(), m.prompt_key.as_str()), ("ns", "key"));
        let p: Value =
            serde_json::from_str(m.provider_payload.as_deref().expect("payload")).expect("json");
        assert_eq!(p["provider"], "openai");
        assert!(p["message"].is_object());
    }

    // A call without a result is pending.
    let msgs = oa(&json!([
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": null, "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        ]}
    ]));
    assert_eq!(msgs[1].tool_calls[0].status, ToolStatus::Pending);
    // A developer message is a system message; it survives the round trip.
    let x = json!([{"role": "developer", "content": "rules"}, {"role": "user", "content": "hi"}]);
    let msgs = oa(&x);
    assert_eq!(msgs[0].role, Role::System);
    assert_eq!(Value::Array(openai::to_messages(&msgs)), x);
    // A refusal is the content of an assistant message with null content.
    let msgs = oa(&json!([{"role": "assistant", "content": null, "refusal": "I can't."}]));
    assert_eq!(msgs[0].content, "I can't.");
}

#[test]
fn openai_import_errors_name_the_message_and_the_reason() {
    let call = |id: &str| json!({"id": id, "type": "function", "function": {"name": "f", "arguments": "{}"}});
    let asst = |ids: &[&str]| json!({"role": "assistant", "content": null, "tool_calls": ids.iter().map(|i| call(i)).collect::<Vec<_>>()});
    let user = json!({"role": "user", "content": "hi"});
    let tool = |id: &str| json!({"role": "tool", "tool_call_id": id, "content": "ok"});

    let cases: Vec<(Value, &str)> = vec![
        (
            json!("hi"),
            "expected an array of messages or an object with a \"messages\" array, found a string",
        ),
        (json!({"model": "m"}), "the object has no \"messages\""),
        (
            json!({"messages": {}}),
            "\"messages\" must be an array, found an object",
        ),
        (
            json!([user, 1]),
            "messages[1]: expected an object, found a number",
        ),
        (json!([{"content": "x"}]), "messages[0]: missing \"role\""),
        (
            json!([{"role": 1, "content": "x"}]),
            "messages[0]: \"role\" must be a string, found a number",
        ),
        (
            json!([{"role": "robot", "content": "beep"}]),
            "messages[0]: invalid role \"robot\" (expected system, developer, user, assistant or tool)",
        ),
        (
            json!([user, asst(&["call_1"]), {"role": "tool", "content": "ok"}]),
            "messages[2]: a tool message needs a \"tool_call_id\"",
        ),
        (
            json!([user, asst(&["call_1"]), tool("call_9")]),
            "messages[2]: tool result for unknown call \"call_9\"",
        ),
        (
            json!([user, tool("call_1"), asst(&["call_1"])]),
            "messages[1]: tool result for unknown call \"call_1\"",
        ),
        (
            json!([user, asst(&["call_1"]), tool("call_1"), asst(&["call_1"])]),
            "messages[3].tool_calls[0]: duplicate tool call id \"call_1\" (already used by messages[1])",
        ),
        (
            json!([user, asst(&["call_1", "call_1"])]),
            "messages[1].tool_calls[1]: tool call id \"call_1\" appears twice in this message (first at tool_calls[0])",
        ),
        (
            json!([user, asst(&["call_1"]), tool("call_1"), tool("call_1")]),
            "messages[3]: second result for call \"call_1\" (the first is messages[2])",
        ),
        (
            json!([user, {"role": "assistant", "content": null, "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": {"a": 1}}}]}]),
            "messages[1].tool_calls[0].function: \"arguments\" must be a string (JSON text), found an object",
        ),
        (
            json!([user, {"role": "assistant", "content": null, "tool_calls": {}}]),
            "messages[1]: \"tool_calls\" must be an array, found an object",
        ),
        (
            json!([{"role": "user", "content": 5}]),
            "messages[0]: \"content\" must be a string or an array of content parts, found a number",
        ),
        (
            json!([{"role": "assistant", "content": {"text": "x"}}]),
            "messages[0]: \"content\" must be a string or an array of content parts or null, found an object",
        ),
        (
            json!([{"role": "user", "content": null}]),
            "messages[0]: a user message needs \"content\"",
        ),
        (
            json!([{"role": "user", "content": ["hi"]}]),
            "messages[0].content[0]: expected a content part object, found a string",
        ),
        (
            json!([{"role": "user", "content": [{"type": "text", "text": 3}]}]),
            "messages[0].content[0]: a text part needs a string \"text\"",
        ),
    ];
    for (input, reason) in cases {
        let got = oa_err(input.clone());
        assert!(
            got.contains(reason),
            "for {input}:\n  got  {got}\n  want {reason}"
        );
    }
    // The Display of the error says what it is.
    let e = crate::provider::stream::convert_whole_with(
        crate::provider::ConversationFormat::OpenAi,
        &json!([{"role": "robot"}]),
        EvaluationId::new(),
        "",
        "",
        false,
    )
    .expect_err("invalid");
    assert!(
        e.to_string()
            .starts_with("invalid input: messages[0]: invalid role")
    );
}
