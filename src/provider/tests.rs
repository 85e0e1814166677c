use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;
use crate::error::Error;
use crate::model::{CallId, EvaluationId, InnerMessage, Role, ToolCallRecord, ToolStatus};

fn oa(v: &Value) -> Vec<InnerMessage> {
    openai::from_messages(v, EvaluationId::new(), "ns", "key").expect("valid openai messages")
}

fn an(v: &Value) -> Vec<InnerMessage> {
    anthropic::from_request(v, EvaluationId::new(), "ns", "key").expect("valid anthropic request")
}

fn oa_err(v: Value) -> String {
    match openai::from_messages(&v, EvaluationId::new(), "ns", "key") {
        Err(Error::InvalidInput(reason)) => reason,
        other => panic!("expected InvalidInput, got {other:?}"),
    }
}

fn an_err(v: Value) -> String {
    match anthropic::from_request(&v, EvaluationId::new(), "ns", "key") {
        Err(Error::InvalidInput(reason)) => reason,
        other => panic!("expected InvalidInput, got {other:?}"),
    }
}

fn check_both(messages: &[InnerMessage]) -> (Vec<Value>, Value) {
    let o = openai::to_messages(messages);
    let a = anthropic::to_request(messages);
    if let Err(e) = validate::openai(&o) {
        panic!("invalid openai history: {e}\n{}", Value::Array(o.clone()));
    }
    if let Err(e) = validate::anthropic(&a) {
        panic!("invalid anthropic history: {e}\n{a}");
    }
    (o, a)
}

fn openai_conversation() -> Value {
    json!([
        {"role": "system", "content": "You are helpful."},
        {"role": "user", "name": "alice", "content": [
            {"type": "text", "text": "Weather and time"},
            {"type": "image_url", "image_url": {"url": "https://example.com/paris.png"}},
            {"type": "text", "text": "in Paris?"}
        ]},
        {"role": "assistant", "content": null, "refusal": null, "annotations": [], "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Paris\"}"}},
            {"id": "call_2", "type": "function", "function": {"name": "time", "arguments": "{\"tz\": \"CET\"}"}}
        ]},
        {"role": "tool", "tool_call_id": "call_2", "content": "12:00"},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
        {"role": "user", "content": "Thanks. And Rome?"},
        {"role": "assistant", "tool_calls": [
            {"id": "call_3", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Rome\"}"}}
        ]},
        {"role": "tool", "tool_call_id": "call_3", "content": [{"type": "text", "text": "rain"}]},
        {"role": "assistant", "content": "Paris: sunny at noon. Rome: rain.", "audio": {"id": "audio_1"}}
    ])
}

fn anthropic_conversation() -> Value {
    json!({
        "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {"role": "user", "content": "Weather and time in Paris?"},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "Two tools, in parallel.", "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"},
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Paris"}},
                {"type": "tool_use", "id": "toolu_2", "name": "time", "input": {"tz": "CET", "fmt": {"h24": true}}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny", "cache_control": {"type": "ephemeral"}},
                {"type": "tool_result", "tool_use_id": "toolu_2", "content": [{"type": "text", "text": "clock service down"}], "is_error": true},
                {"type": "text", "text": "Also, thanks!"}
            ]},
            {"role": "assistant", "content": [
                {"type": "redacted_thinking", "data": "c2VjcmV0"},
                {"type": "text", "text": "Sunny; "},
                {"type": "text", "text": "the clock failed.", "citations": null}
            ], "future_field": {"x": 1}}
        ]
    })
}

// ---- OpenAI ------------------------------------------------------------------

#[test]
fn openai_round_trip_is_exact() {
    let x = openai_conversation();
    let msgs = oa(&x);
    assert_eq!(Value::Array(openai::to_messages(&msgs)), x);
    assert_eq!(validate::openai(x.as_array().expect("array")), Ok(()));

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
    let e = openai::from_messages(&json!([{"role": "robot"}]), EvaluationId::new(), "", "")
        .expect_err("invalid");
    assert!(
        e.to_string()
            .starts_with("invalid input: messages[0]: invalid role")
    );
}

// ---- Anthropic ---------------------------------------------------------------

#[test]
fn anthropic_round_trip_is_exact() {
    let x = anthropic_conversation();
    let msgs = an(&x);
    assert_eq!(anthropic::to_request(&msgs), x);
    assert_eq!(validate::anthropic(&x), Ok(()));

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

// ---- Cross-provider -----------------------------------------------------------

#[test]
fn openai_conversation_translates_to_anthropic() {
    let msgs = oa(&openai_conversation());
    let (_, a) = check_both(&msgs);
    assert_eq!(
        a,
        json!({
            "system": "You are helpful.",
            "messages": [
                {"role": "user", "content": "Weather and time\nin Paris?"},
                {"role": "assistant", "content": [
                    {"type": "tool_use", "id": "call_1", "name": "weather", "input": {"city": "Paris"}},
                    {"type": "tool_use", "id": "call_2", "name": "time", "input": {"tz": "CET"}}
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "call_2", "content": "12:00"},
                    {"type": "tool_result", "tool_use_id": "call_1", "content": "sunny"},
                    {"type": "text", "text": "Thanks. And Rome?"}
                ]},
                {"role": "assistant", "content": [
                    {"type": "tool_use", "id": "call_3", "name": "weather", "input": {"city": "Rome"}}
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "call_3", "content": "rain"}
                ]},
                {"role": "assistant", "content": "Paris: sunny at noon. Rome: rain."}
            ]
        })
    );
    // And back: the neutral fields survive both ways.
    let back = an(&a);
    let o = openai::to_messages(&back);
    assert_eq!(validate::openai(&o), Ok(()));
    assert_eq!(
        o[2]["tool_calls"][1]["function"]["arguments"],
        r#"{"tz":"CET"}"#
    );
    assert_eq!(
        o[5],
        json!({"role": "user", "content": "Thanks. And Rome?"})
    );
}

#[test]
fn anthropic_conversation_translates_to_openai() {
    let msgs = an(&anthropic_conversation());
    let (o, _) = check_both(&msgs);
    assert_eq!(
        Value::Array(o),
        json!([
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather and time in Paris?"},
            {"role": "assistant", "content": "Checking.", "tool_calls": [
                {"id": "toolu_1", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Paris\"}"}},
                {"id": "toolu_2", "type": "function", "function": {"name": "time", "arguments": "{\"fmt\":{\"h24\":true},\"tz\":\"CET\"}"}}
            ]},
            {"role": "tool", "tool_call_id": "toolu_1", "content": "sunny"},
            {"role": "tool", "tool_call_id": "toolu_2", "content": "clock service down"},
            {"role": "user", "content": "Also, thanks!"},
            {"role": "assistant", "content": "Sunny; the clock failed."}
        ])
    );
}

#[test]
fn foreign_and_untagged_payloads_are_ignored() {
    let eval = EvaluationId::new();
    let mut user = InnerMessage::new(Role::User, "hello", eval, 0);
    user.provider_payload = Some(r#"{"role":"user","content":"RAW"}"#.to_owned());
    let mut asst = InnerMessage::new(Role::Assistant, "hi", eval, 1);
    asst.turn = 1;
    asst.provider_payload = Some(anthropic::payload(
        &json!({"role": "assistant", "content": [{"type": "thinking", "thinking": "t", "signature": "s"}, {"type": "text", "text": "hi"}]}),
    ));
    let msgs = vec![user, asst];
    let (o, a) = check_both(&msgs);
    assert_eq!(
        Value::Array(o),
        json!([{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"}])
    );
    assert_eq!(
        a["messages"][0],
        json!({"role": "user", "content": "hello"})
    );
    assert_eq!(a["messages"][1]["content"][0]["type"], "thinking");
}

#[test]
fn a_payload_that_disagrees_with_the_neutral_fields_is_not_used() {
    let eval = EvaluationId::new();
    let mut asst = InnerMessage::new(Role::Assistant, "", eval, 1);
    asst.tool_calls = vec![ToolCallRecord::new("c1", "f", "{}")];
    // The payload makes another call than the neutral record.
    asst.provider_payload = Some(openai::payload(
        &json!({"role": "assistant", "content": null,
        "tool_calls": [{"id": "zz", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}),
    ));
    let mut tool = InnerMessage::new(Role::Tool, "ok", eval, 2);
    tool.tool_call_id = Some("c1".into());
    tool.provider_payload = Some(openai::payload(
        &json!({"role": "tool", "tool_call_id": "zz", "content": "ok"}),
    ));
    let (o, _) = check_both(&[InnerMessage::new(Role::User, "go", eval, 0), asst, tool]);
    assert_eq!(o[1]["tool_calls"][0]["id"], "c1");
    assert_eq!(
        o[2],
        json!({"role": "tool", "tool_call_id": "c1", "content": "ok"})
    );
}

// ---- The resume rule --------------------------------------------------------------

struct Conv {
    eval: EvaluationId,
    msgs: Vec<InnerMessage>,
}

impl Conv {
    fn new() -> Self {
        Self {
            eval: EvaluationId::new(),
            msgs: Vec::new(),
        }
    }
    fn push(&mut self, role: Role, content: &str) -> &mut InnerMessage {
        let seq = self.msgs.len() as u64;
        self.msgs
            .push(InnerMessage::new(role, content, self.eval, seq));
        self.msgs.last_mut().expect("pushed")
    }
    fn system(&mut self, c: &str) -> &mut Self {
        self.push(Role::System, c);
        self
    }
    fn user(&mut self, c: &str) -> &mut Self {
        self.push(Role::User, c);
        self
    }
    fn assistant(&mut self, c: &str, calls: &[(&str, ToolStatus)]) -> &mut Self {
        let m = self.push(Role::Assistant, c);
        m.tool_calls = calls
            .iter()
            .map(|(id, status)| ToolCallRecord {
                status: *status,
                ..ToolCallRecord::new(*id, format!("tool_{id}"), r#"{"x":1}"#)
            })
            .collect();
        self
    }
    fn tool(&mut self, id: &str, c: &str) -> &mut Self {
        let m = self.push(Role::Tool, c);
        m.tool_call_id = Some(id.into());
        m.tool_name = Some(format!("tool_{id}"));
        self
    }
}

#[test]
fn unfinished_calls_get_a_synthetic_result_and_every_call_is_kept() {
    use ToolStatus::*;
    let mut c = Conv::new();
    c.system("sys")
        .user("go")
        .assistant(
            "",
            &[
                ("c1", Completed),
                ("c2", Failed),
                ("c3", Started),
                ("c4", Pending),
            ],
        )
        .tool("c1", "one")
        .tool("c2", "boom");
    let (o, a) = check_both(&c.msgs);
    assert_eq!(o[2]["tool_calls"].as_array().map(Vec::len), Some(4));
    assert_eq!(
        o[3..].to_vec(),
        vec![
            json!({"role": "tool", "tool_call_id": "c1", "content": "one"}),
            json!({"role": "tool", "tool_call_id": "c2", "content": "boom"}),
            json!({"role": "tool", "tool_call_id": "c3", "content": INTERRUPTED_RESULT}),
            json!({"role": "tool", "tool_call_id": "c4", "content": INTERRUPTED_RESULT}),
        ]
    );
    assert_eq!(
        a["messages"][2],
        json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "c1", "content": "one"},
            {"type": "tool_result", "tool_use_id": "c2", "content": "boom", "is_error": true},
            {"type": "tool_result", "tool_use_id": "c3", "content": INTERRUPTED_RESULT, "is_error": true},
            {"type": "tool_result", "tool_use_id": "c4", "content": INTERRUPTED_RESULT, "is_error": true},
        ]})
    );
    assert_eq!(a["messages"][1]["content"][0]["input"], json!({"x": 1}));
}

#[test]
fn duplicate_orphan_and_late_results_are_dropped() {
    use ToolStatus::*;
    let mut c = Conv::new();
    c.tool("c0", "orphan before any call")
        .user("go")
        .assistant("a1", &[("c1", Completed), ("c2", Completed)])
        .tool("c1", "first")
        .tool("c1", "second")
        .tool("zz", "orphan")
        .assistant("a2", &[("c3", Completed)])
        .tool("c2", "late")
        .tool("c3", "three");
    let (o, a) = check_both(&c.msgs);
    assert_eq!(
        Value::Array(o),
        json!([
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": "a1", "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "tool_c1", "arguments": "{\"x\":1}"}},
                {"id": "c2", "type": "function", "function": {"name": "tool_c2", "arguments": "{\"x\":1}"}}
            ]},
            {"role": "tool", "tool_call_id": "c1", "content": "first"},
            {"role": "tool", "tool_call_id": "c2", "content": INTERRUPTED_RESULT},
            {"role": "assistant", "content": "a2", "tool_calls": [
                {"id": "c3", "type": "function", "function": {"name": "tool_c3", "arguments": "{\"x\":1}"}}
            ]},
            {"role": "tool", "tool_call_id": "c3", "content": "three"}
        ])
    );
    assert_eq!(a["messages"].as_array().map(Vec::len), Some(5));
}

#[test]
fn results_move_before_a_user_message_that_came_between() {
    use ToolStatus::*;
    let mut c = Conv::new();
    c.user("go")
        .assistant("", &[("c1", Completed)])
        .user("hurry up")
        .system("late system note")
        .tool("c1", "done");
    let (o, a) = check_both(&c.msgs);
    assert_eq!(
        o[2],
        json!({"role": "tool", "tool_call_id": "c1", "content": "done"})
    );
    assert_eq!(o[3], json!({"role": "user", "content": "hurry up"}));
    assert_eq!(
        o[4],
        json!({"role": "system", "content": "late system note"})
    );
    assert_eq!(a["system"], "late system note");
    assert_eq!(
        a["messages"][2]["content"],
        json!([
            {"type": "tool_result", "tool_use_id": "c1", "content": "done"},
            {"type": "text", "text": "hurry up"}
        ])
    );
}

#[test]
fn anthropic_roles_alternate_whatever_the_history() {
    let mut c = Conv::new();
    c.system("one")
        .assistant("first", &[])
        .assistant("second", &[])
        .system("two");
    let (_, a) = check_both(&c.msgs);
    assert_eq!(
        a,
        json!({
            "system": "one\n\ntwo",
            "messages": [
                {"role": "user", "content": anthropic::LEADING_USER_TEXT},
                {"role": "assistant", "content": [
                    {"type": "text", "text": "first"},
                    {"type": "text", "text": "second"}
                ]}
            ]
        })
    );
    assert_eq!(anthropic::to_request(&[]), json!({"messages": []}));
    assert_eq!(openai::to_messages(&[]), Vec::<Value>::new());
}

#[test]
fn a_reused_call_id_is_dropped_from_the_later_message() {
    use ToolStatus::*;
    let mut c = Conv::new();
    c.user("go")
        .assistant("", &[("c1", Completed)])
        .tool("c1", "one")
        .assistant("", &[("c1", Completed), ("c2", Completed)])
        .tool("c1", "again")
        .tool("c2", "two");
    let (o, _) = check_both(&c.msgs);
    assert_eq!(o[3]["tool_calls"].as_array().map(Vec::len), Some(1));
    assert_eq!(o[3]["tool_calls"][0]["id"], "c2");
    assert_eq!(o.len(), 5);
}

#[test]
fn arguments_that_are_not_an_object_still_make_a_valid_tool_use() {
    let eval = EvaluationId::new();
    let mut asst = InnerMessage::new(Role::Assistant, "", eval, 1);
    asst.tool_calls = vec![
        ToolCallRecord::new("a", "f", ""),
        ToolCallRecord::new("b", "f", "not json"),
        ToolCallRecord::new("c", "f", "[1,2]"),
    ];
    let (_, a) = check_both(&[InnerMessage::new(Role::User, "go", eval, 0), asst]);
    let content = &a["messages"][1]["content"];
    assert_eq!(content[0]["input"], json!({}));
    assert_eq!(content[1]["input"], json!({"arguments": "not json"}));
    assert_eq!(content[2]["input"], json!({"arguments": "[1,2]"}));
}

// ---- The validators catch the spec's bug class --------------------------------------

#[test]
fn validators_reject_the_spec_reconstruction() {
    // The conversation: c1 completed, c2 failed (its error result recorded),
    // c3 pending (no result). The spec keeps only completed calls in the
    // assistant message and every tool result.
    let call = |id: &str| json!({"id": id, "type": "function", "function": {"name": "f", "arguments": "{}"}});
    let spec = vec![
        json!({"role": "user", "content": "go"}),
        json!({"role": "assistant", "content": "", "tool_calls": [call("c1")]}),
        json!({"role": "tool", "tool_call_id": "c1", "content": "ok"}),
        json!({"role": "tool", "tool_call_id": "c2", "content": "boom"}),
    ];
    assert_eq!(
        validate::openai(&spec),
        Err("messages[3]: tool result for \"c2\", a call the preceding assistant message (messages[1]) did not make".to_owned())
    );
    // When every call is filtered out, the assistant keeps an empty list.
    let spec = vec![
        json!({"role": "user", "content": "go"}),
        json!({"role": "assistant", "content": "", "tool_calls": []}),
        json!({"role": "tool", "tool_call_id": "c2", "content": "boom"}),
    ];
    assert_eq!(
        validate::openai(&spec),
        Err(
            "messages[1]: \"tool_calls\" is an empty array (omit it when there are no calls)"
                .to_owned()
        )
    );
    // Keeping the call but not giving it a result is the other half.
    let unanswered = vec![
        json!({"role": "user", "content": "go"}),
        json!({"role": "assistant", "content": "", "tool_calls": [call("c1"), call("c3")]}),
        json!({"role": "tool", "tool_call_id": "c1", "content": "ok"}),
        json!({"role": "user", "content": "continue"}),
    ];
    assert_eq!(
        validate::openai(&unanswered),
        Err("messages[1]: tool call \"c3\" has no result (expected a tool message for it before messages[3])".to_owned())
    );
    assert_eq!(
        validate::openai(&unanswered[..3]),
        Err("messages[1]: tool call \"c3\" has no result (expected a tool message for it before the end of the history)".to_owned())
    );

    // The same bug in the Anthropic shape.
    let tool_use = |id: &str| json!({"type": "tool_use", "id": id, "name": "f", "input": {}});
    let result = |id: &str| json!({"type": "tool_result", "tool_use_id": id, "content": "ok"});
    let orphaned = json!({"messages": [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [tool_use("c1")]},
        {"role": "user", "content": [result("c1"), result("c2")]}
    ]});
    assert_eq!(
        validate::anthropic(&orphaned),
        Err("messages[2].content[1]: tool_result for \"c2\", which no tool_use of the preceding assistant message made".to_owned())
    );
    let missing = json!({"messages": [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [tool_use("c1"), tool_use("c3")]},
        {"role": "user", "content": [result("c1")]}
    ]});
    assert_eq!(
        validate::anthropic(&missing),
        Err("messages[1].content[1]: tool_use \"c3\" has no tool_result in the next message (messages[2])".to_owned())
    );

    // Our rebuild of the same conversation passes both.
    use ToolStatus::*;
    let mut c = Conv::new();
    c.user("go")
        .assistant("", &[("c1", Completed), ("c2", Failed), ("c3", Pending)])
        .tool("c1", "ok")
        .tool("c2", "boom");
    check_both(&c.msgs);
}

#[test]
fn openai_validator_messages() {
    let call = |id: &str| json!({"id": id, "type": "function", "function": {"name": "f", "arguments": "{}"}});
    let asst = |ids: &[&str]| json!({"role": "assistant", "content": null, "tool_calls": ids.iter().map(|i| call(i)).collect::<Vec<_>>()});
    let tool = |id: &str| json!({"role": "tool", "tool_call_id": id, "content": "ok"});
    let user = json!({"role": "user", "content": "hi"});
    let cases: Vec<(Vec<Value>, &str)> = vec![
        (
            vec![json!(1)],
            "messages[0]: expected an object, found a number",
        ),
        (
            vec![json!({"role": "robot"})],
            "messages[0]: invalid role \"robot\"",
        ),
        (
            vec![json!({"content": "x"})],
            "messages[0]: missing \"role\"",
        ),
        (
            vec![user.clone(), tool("c1")],
            "messages[1]: tool result for \"c1\", which no earlier assistant message called",
        ),
        (
            vec![user.clone(), asst(&["c1"]), tool("c1"), tool("c1")],
            "messages[3]: second result for tool call \"c1\" (the first is messages[2])",
        ),
        (
            vec![user.clone(), asst(&["c1"]), user.clone(), tool("c1")],
            "messages[1]: tool call \"c1\" has no result (expected a tool message for it before messages[2])",
        ),
        (
            vec![
                user.clone(),
                asst(&["c1"]),
                tool("c1"),
                user.clone(),
                tool("c1"),
            ],
            "messages[4]: tool result for \"c1\" does not directly follow its assistant message (messages[1]); only tool messages may come between",
        ),
        (
            vec![asst(&["c1", "c1"])],
            "messages[0].tool_calls[1]: tool call id \"c1\" appears twice in this message (first at tool_calls[0])",
        ),
        (
            vec![json!({"role": "tool", "content": "x"})],
            "messages[0]: a tool message needs a \"tool_call_id\"",
        ),
        (
            vec![
                json!({"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "{}"}}]}),
            ],
            "messages[0].tool_calls[0]: missing \"type\": \"function\"",
        ),
    ];
    for (messages, want) in cases {
        let got = validate::openai(&messages).expect_err("invalid");
        assert!(
            got.starts_with(want),
            "for {messages:?}:\n  got  {got}\n  want {want}"
        );
    }
    assert_eq!(validate::openai(&[]), Ok(()));
    assert_eq!(
        validate::openai(&[user.clone(), asst(&["a", "b"]), tool("b"), tool("a"), user]),
        Ok(())
    );
}

#[test]
fn anthropic_validator_messages() {
    let tool_use = |id: &str| json!({"type": "tool_use", "id": id, "name": "f", "input": {}});
    let result = |id: &str| json!({"type": "tool_result", "tool_use_id": id, "content": "ok"});
    let user = json!({"role": "user", "content": "hi"});
    let asst = json!({"role": "assistant", "content": "hello"});
    let req = |m: Vec<Value>| json!({"messages": m});
    let cases: Vec<(Value, &str)> = vec![
        (
            json!("x"),
            "expected a request object or a messages array, found a string",
        ),
        (
            json!({"system": 1, "messages": []}),
            "system: must be a string or an array of text blocks, found a number",
        ),
        (json!({}), "missing \"messages\""),
        (
            req(vec![asst.clone()]),
            "messages[0]: the first message must have role \"user\", found \"assistant\"",
        ),
        (
            req(vec![user.clone(), user.clone()]),
            "messages[1]: two \"user\" messages in a row (messages[0] and messages[1]); roles must alternate",
        ),
        (
            req(vec![
                user.clone(),
                json!({"role": "system", "content": "s"}),
            ]),
            "messages[1]: role \"system\" is not allowed in messages",
        ),
        (
            req(vec![
                user.clone(),
                json!({"role": "assistant", "content": [tool_use("t")]}),
            ]),
            "messages[1].content[0]: tool_use \"t\" has no tool_result (no message follows)",
        ),
        (
            req(vec![
                user.clone(),
                json!({"role": "assistant", "content": [tool_use("t")]}),
                json!({"role": "user", "content": [{"type": "text", "text": "x"}, result("t")]}),
            ]),
            "messages[2].content[1]: tool_result after other content; tool_result blocks must come first in a user message",
        ),
        (
            req(vec![
                user.clone(),
                json!({"role": "assistant", "content": [tool_use("t")]}),
                json!({"role": "user", "content": [result("t")]}),
                json!({"role": "assistant", "content": [tool_use("t")]}),
            ]),
            "messages[3].content[0]: tool_use id \"t\" is used twice (first at messages[1].content[0])",
        ),
        (
            req(vec![
                user.clone(),
                json!({"role": "assistant", "content": [tool_use("t")]}),
                json!({"role": "user", "content": [result("t")]}),
                asst.clone(),
                json!({"role": "user", "content": [result("t")]}),
            ]),
            "messages[4].content[0]: tool_result for \"t\" is not in the message right after its tool_use (messages[1].content[0])",
        ),
        (
            req(vec![
                user.clone(),
                json!({"role": "assistant", "content": [tool_use("t")]}),
                json!({"role": "user", "content": [result("t"), result("t")]}),
            ]),
            "messages[2].content[1]: second tool_result for tool_use \"t\"",
        ),
        (
            req(vec![json!({"role": "user", "content": [result("t")]})]),
            "messages[0].content[0]: tool_result for \"t\", which no tool_use of the preceding assistant message made",
        ),
        (
            req(vec![
                user.clone(),
                json!({"role": "assistant", "content": [result("t")]}),
            ]),
            "messages[1].content[0]: tool_result in an assistant message",
        ),
    ];
    for (request, want) in cases {
        let got = validate::anthropic(&request).expect_err("invalid");
        assert!(
            got.starts_with(want),
            "for {request}:\n  got  {got}\n  want {want}"
        );
    }
    assert_eq!(validate::anthropic(&json!({"messages": []})), Ok(()));
    assert_eq!(validate::anthropic(&json!([user, asst])), Ok(()));
}

// ---- JSONL -----------------------------------------------------------------------------

#[test]
fn jsonl_round_trips_and_numbers_its_errors() {
    let msgs = an(&anthropic_conversation());
    let text = jsonl::to_jsonl(&msgs);
    assert_eq!(text.lines().count(), msgs.len());
    assert!(text.ends_with('\n'));
    let first: Value = serde_json::from_str(text.lines().next().expect("a line")).expect("json");
    assert!(
        first["created_at"]
            .as_str()
            .is_some_and(|t| t.ends_with('Z'))
    );
    assert_eq!(jsonl::from_jsonl(&text).expect("parses"), msgs);
    assert_eq!(
        jsonl::from_jsonl(&format!("\n{text}\n\n")).expect("parses"),
        msgs
    );
    assert_eq!(jsonl::from_jsonl("").expect("empty"), Vec::new());

    let mut lines: Vec<&str> = text.lines().collect();
    lines[2] = "{\"role\": \"robot\"}";
    match jsonl::from_jsonl(&lines.join("\n")) {
        Err(Error::InvalidInput(r)) => assert!(r.starts_with("line 3: "), "{r}"),
        other => panic!("{other:?}"),
    }
}

// ---- Properties -----------------------------------------------------------------------------

#[derive(Clone, Debug)]
enum Op {
    System,
    User,
    /// An assistant message with this many new calls (and maybe one reused id).
    Assistant {
        calls: usize,
        reuse: bool,
        text: bool,
    },
    /// A result for the `k`-th call made so far (modulo), maybe failed.
    Result {
        k: usize,
        failed: bool,
    },
    /// A result for a call nobody made.
    Orphan,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        1 => Just(Op::System),
        3 => Just(Op::User),
        4 => (0usize..4, proptest::bool::weighted(0.1), any::<bool>())
            .prop_map(|(calls, reuse, text)| Op::Assistant { calls, reuse, text }),
        6 => (any::<usize>(), proptest::bool::weighted(0.2)).prop_map(|(k, failed)| Op::Result { k, failed }),
        1 => Just(Op::Orphan),
    ]
}

fn build(ops: &[Op]) -> Vec<InnerMessage> {
    let mut c = Conv::new();
    let mut made: Vec<String> = Vec::new();
    let mut n = 0;
    for (i, op) in ops.iter().enumerate() {
        match op {
            Op::System => {
                c.system(&format!("system {i}"));
            }
            Op::User => {
                c.user(&format!("user {i}"));
            }
            Op::Assistant { calls, reuse, text } => {
                let mut ids: Vec<String> = (0..*calls)
                    .map(|_| {
                        n += 1;
                        format!("call_{n}")
                    })
                    .collect();
                if *reuse && !made.is_empty() {
                    ids.push(made[i % made.len()].clone());
                }
                let statuses = [
                    ToolStatus::Pending,
                    ToolStatus::Started,
                    ToolStatus::Completed,
                    ToolStatus::Failed,
                ];
                let calls: Vec<(&str, ToolStatus)> = ids
                    .iter()
                    .enumerate()
                    .map(|(j, id)| (id.as_str(), statuses[(i + j) % 4]))
                    .collect();
                c.assistant(if *text { "thinking aloud" } else { "" }, &calls);
                made.extend(ids);
            }
            Op::Result { k, failed } => {
                if !made.is_empty() {
                    let id = made[k % made.len()].clone();
                    c.tool(&id, if *failed { "error: boom" } else { "result" });
                }
            }
            Op::Orphan => {
                c.tool("nobody_called_this", "orphan");
            }
        }
    }
    c.msgs
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn every_rebuilt_history_is_valid(ops in proptest::collection::vec(op(), 0..40)) {
        let msgs = build(&ops);
        let o = openai::to_messages(&msgs);
        prop_assert_eq!(validate::openai(&o), Ok(()), "{}", Value::Array(o.clone()));
        let a = anthropic::to_request(&msgs);
        prop_assert_eq!(validate::anthropic(&a), Ok(()), "{}", a);
    }

    #[test]
    fn rebuilt_histories_import_and_round_trip(ops in proptest::collection::vec(op(), 0..40)) {
        let msgs = build(&ops);
        // OpenAI: a rebuilt history imports, and exports to itself.
        let o = Value::Array(openai::to_messages(&msgs));
        let imported = oa(&o);
        prop_assert_eq!(Value::Array(openai::to_messages(&imported)), o.clone());
        // ... and translates to a valid Anthropic request.
        let a = anthropic::to_request(&imported);
        prop_assert_eq!(validate::anthropic(&a), Ok(()), "{}", a);

        // Anthropic: the same.
        let a = anthropic::to_request(&msgs);
        let imported = an(&a);
        prop_assert_eq!(anthropic::to_request(&imported), a.clone());
        let o = openai::to_messages(&imported);
        prop_assert_eq!(validate::openai(&o), Ok(()), "{}", Value::Array(o.clone()));
        // Tool results and their calls agree on the status after import.
        for m in &imported {
            for call in &m.tool_calls {
                prop_assert!(call.status == ToolStatus::Completed || call.status == ToolStatus::Failed);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Captured payloads never make a history invalid, even when messages
    /// are missing (a part of a split user message, a result, a call).
    #[test]
    fn any_subset_of_imported_messages_rebuilds_validly(
        ops in proptest::collection::vec(op(), 0..40),
        keep in proptest::collection::vec(proptest::bool::weighted(0.8), 80),
    ) {
        let msgs = build(&ops);
        let subset = |imported: Vec<InnerMessage>| -> Vec<InnerMessage> {
            imported
                .into_iter()
                .enumerate()
                .filter(|(i, _)| keep[i % keep.len()])
                .map(|(_, m)| m)
                .collect()
        };
        let from_anthropic = subset(an(&anthropic::to_request(&msgs)));
        check_both(&from_anthropic);
        let from_openai = subset(oa(&Value::Array(openai::to_messages(&msgs))));
        check_both(&from_openai);
        // Mixed: messages captured from both providers in one list.
        let mut mixed = from_anthropic;
        mixed.extend(from_openai);
        check_both(&mixed);
    }
}
