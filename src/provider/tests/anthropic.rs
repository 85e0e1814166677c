//! Anthropic Messages requests: the exact round trip, the split of a user
//! message's tool results into tagged parts, and the import's error messages.

use serde_json::{Value, json};

use super::helpers::{an, an_err, anthropic_conversation, verdict};
use crate::model::{CallId, InnerMessage, Role, ToolStatus};
use crate::provider::{anthropic, validate};

#[test]
fn anthropic_round_trip_is_exact() {
    let x = anthropic_conversation();
    let msgs = an(&x);
    assert_eq!(anthropic::to_request(&msgs), x);
    assert_eq!(verdict(validate::anthropic(&x)), Ok(()));

    // A string system, no system, a bare array.
    let mut y = x.clone();
    y["system"] = json!("Be brief.");
    assert_eq!(anthropic::to_request(&an(&y)), y);
    let mut z = x.clone();
    z.as_object_mut().expect("object").remove("system");
    assert_eq!(anthropic::to_request(&an(&z)), z);
    assert_eq!(anthropic::to_request(&an(&z["messages"])), z);
}

#[test]
fn consecutive_user_messages_export_as_they_were_sent() {
    // A tool result, then the user's text in a message of its own: the API
    // takes the two as one turn; the export keeps them two messages.
    let x = json!({"messages": [
        {"role": "user", "content": "Read a."},
        {"role": "assistant", "content": [
            {"type": "text", "text": "Reading."},
            {"type": "tool_use", "id": "t1", "name": "read", "input": {"path": "a"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "A"}]},
        {"role": "user", "content": "Now b, please."},
        {"role": "user", "content": [{"type": "text", "text": "And hurry."}]},
    ]});
    let msgs = an(&x);
    assert_eq!(anthropic::to_request(&msgs), x);
    assert_eq!(verdict(validate::anthropic(&x)), Ok(()));
    // Built from the neutral fields alone, the turn is one valid message.
    let neutral: Vec<_> = msgs
        .iter()
        .cloned()
        .map(|mut m| {
            m.provider_payload = None;
            m
        })
        .collect();
    let rebuilt = anthropic::to_request(&neutral);
    assert_eq!(rebuilt["messages"].as_array().expect("messages").len(), 3);
    assert_eq!(verdict(validate::anthropic(&rebuilt)), Ok(()));
}

#[test]
fn anthropic_import_splits_tool_results_and_tags_the_parts() {
    let msgs = an(&anthropic_conversation());
    use Role::*;
    let roles: Vec<Role> = msgs.iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        [System, User, Assistant, Tool, Tool, User, Assistant]
    );
    let seqs: Vec<u64> = msgs.iter().map(|m| m.sequence).collect();
    assert_eq!(seqs, (0..7).collect::<Vec<_>>());
    let turns: Vec<u32> = msgs.iter().map(|m| m.turn).collect();
    assert_eq!(turns, [0, 0, 1, 1, 1, 1, 2]);
    assert_eq!(msgs[0].content, "Be brief.");
    assert_eq!(msgs[2].content, "Checking.");
    let calls = &msgs[2].tool_calls;
    assert_eq!(calls[0].call_id, CallId::from("toolu_1"));
    assert_eq!(calls[0].arguments, r#"{"city":"Paris"}"#);
    assert_eq!(calls[0].status, ToolStatus::Completed);
    assert_eq!(calls[1].status, ToolStatus::Failed);
    assert_eq!(msgs[3].tool_call_id, Some(CallId::from("toolu_1")));
    assert_eq!(msgs[3].tool_name.as_deref(), Some("weather"));
    assert_eq!(msgs[3].content, "sunny");
    assert_eq!(msgs[4].content, "clock service down");
    assert_eq!(msgs[4].tool_name.as_deref(), Some("time"));
    assert_eq!(msgs[5].content, "Also, thanks!");
    assert_eq!(msgs[6].content, "Sunny; the clock failed.");

    let payload = |m: &InnerMessage| -> Value {
        serde_json::from_str(m.provider_payload.as_deref().expect("payload")).expect("json")
    };
    assert_eq!(
        payload(&msgs[0])["system"],
        anthropic_conversation()["system"]
    );
    // The whole user message is on its first part; the others point to it.
    assert_eq!(
        payload(&msgs[3])["message"],
        anthropic_conversation()["messages"][2]
    );
    let lead = msgs[3].message_id.to_string();
    assert_eq!(
        payload(&msgs[4]),
        json!({"provider": "anthropic", "part_of": lead})
    );
    assert_eq!(
        payload(&msgs[5]),
        json!({"provider": "anthropic", "part_of": lead})
    );
}

#[test]
fn anthropic_import_errors_name_the_message_and_the_reason() {
    let user = json!({"role": "user", "content": "hi"});
    let uses = |ids: &[&str]| json!({"role": "assistant", "content": ids.iter().map(|i| json!({"type": "tool_use", "id": i, "name": "f", "input": {}})).collect::<Vec<_>>()});
    let results = |ids: &[&str]| json!({"role": "user", "content": ids.iter().map(|i| json!({"type": "tool_result", "tool_use_id": i, "content": "ok"})).collect::<Vec<_>>()});
    let req = |messages: Value| json!({"messages": messages});

    let cases: Vec<(Value, &str)> = vec![
        (
            json!(3),
            "expected a request object with a \"messages\" array or an array of messages, found a number",
        ),
        (json!({"system": "s"}), "the object has no \"messages\""),
        (
            json!({"messages": {}}),
            "\"messages\" must be an array, found an object",
        ),
        (
            json!({"system": 5, "messages": []}),
            "system: must be a string or an array of text blocks, found a number",
        ),
        (
            json!({"system": [{"type": "image"}], "messages": []}),
            "system[0]: expected a text block, found \"image\"",
        ),
        (
            req(json!([user, {"role": "system", "content": "s"}])),
            "messages[1]: role \"system\" is not allowed in messages",
        ),
        (
            req(json!([{"role": "robot", "content": "beep"}])),
            "messages[0]: invalid role \"robot\" (expected user or assistant)",
        ),
        (
            req(json!([{"content": "x"}])),
            "messages[0]: missing \"role\"",
        ),
        (
            req(json!(["hi"])),
            "messages[0]: expected an object, found a string",
        ),
        (
            req(json!([{"role": "user", "content": 5}])),
            "messages[0]: \"content\" must be a string or an array of content blocks, found a number",
        ),
        (
            req(json!([{"role": "user"}])),
            "messages[0]: missing \"content\"",
        ),
        (
            req(json!([{"role": "user", "content": ["hi"]}])),
            "messages[0].content[0]: expected a content block object, found a string",
        ),
        (
            req(json!([{"role": "user", "content": [{"text": "hi"}]}])),
            "messages[0].content[0]: missing \"type\"",
        ),
        (
            req(json!([{"role": "user", "content": [{"type": "text", "text": 1}]}])),
            "messages[0].content[0]: text \"text\" must be a string, found a number",
        ),
        (
            req(
                json!([user, {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": "{}"}]}]),
            ),
            "messages[1].content[0]: tool_use \"input\" must be an object, found a string",
        ),
        (
            req(json!([user, uses(&["toolu_1"]), results(&["toolu_9"])])),
            "messages[2].content[0]: tool_result for unknown tool_use \"toolu_9\"",
        ),
        (
            req(json!([results(&["toolu_1"]), uses(&["toolu_1"])])),
            "messages[0].content[0]: tool_result for unknown tool_use \"toolu_1\"",
        ),
        (
            req(json!([
                user,
                uses(&["toolu_1"]),
                results(&["toolu_1"]),
                uses(&["toolu_1"])
            ])),
            "messages[3].content[0]: duplicate tool_use id \"toolu_1\" (already used at messages[1].content[0])",
        ),
        (
            req(json!([user, uses(&["toolu_1", "toolu_1"])])),
            "messages[1].content[1]: duplicate tool_use id \"toolu_1\" (already used at messages[1].content[0])",
        ),
        (
            req(json!([
                user,
                uses(&["toolu_1"]),
                results(&["toolu_1", "toolu_1"])
            ])),
            "messages[2].content[1]: second tool_result for tool_use \"toolu_1\" (the first is messages[2].content[0])",
        ),
        (
            req(
                json!([user, {"role": "assistant", "content": [{"type": "tool_result", "tool_use_id": "x"}]}]),
            ),
            "messages[1].content[0]: tool_result in an assistant message",
        ),
        (
            req(
                json!([{"role": "user", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}]}]),
            ),
            "messages[0].content[0]: tool_use in a user message",
        ),
        (
            req(
                json!([user, uses(&["t"]), {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "is_error": "yes"}]}]),
            ),
            "messages[2].content[0]: tool_result \"is_error\" must be a boolean, found a string",
        ),
        (
            req(
                json!([user, uses(&["t"]), {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": 7}]}]),
            ),
            "messages[2].content[0]: tool_result \"content\" must be a string or an array of content blocks, found a number",
        ),
    ];
    for (input, reason) in cases {
        let got = an_err(input.clone());
        assert!(
            got.contains(reason),
            "for {input}:\n  got  {got}\n  want {reason}"
        );
    }
}
