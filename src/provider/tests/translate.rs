//! From one provider to the other: conversations translate with their
//! neutral fields, and a foreign, untagged or disagreeing payload is not used.

use serde_json::{Value, json};

use super::helpers::{an, anthropic_conversation, check_both, oa, openai_conversation, verdict};
use crate::model::{EvaluationId, InnerMessage, Role, ToolCallRecord};
use crate::provider::{anthropic, openai, validate};

#[test]
fn openai_conversation_translates_to_anthropic() {
    let msgs = oa(&openai_conversation());
    let (_, a) = check_both(&msgs);
    assert_eq!(
        a,
        json!({
            "system": "You are helpful.",
            "messages": [
                // The image travels as an image block.
                {"role": "user", "content": [
                    {"type": "text", "text": "Weather and time\nin Paris?"},
                    {"type": "image", "source": {"type": "url", "url": "https://example.com/paris.png"}}
                ]},
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
    assert_eq!(verdict(validate::openai(&o)), Ok(()));
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
            // Chat completions has no error flag: the text says it.
            {"role": "tool", "tool_call_id": "toolu_2", "content": "[error] clock service down"},
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
