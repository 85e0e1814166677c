//! Helpers the provider tests share: importing with a fixed prompt, reading
//! an import's or a validator's error reason, checking that a list rebuilds
//! into histories both validators accept, one conversation per provider, and
//! [`Conv`], a builder of neutral message lists.

use serde_json::{Value, json};

use crate::error::{Error, Result};
use crate::model::{EvaluationId, InnerMessage, Role, ToolCallRecord, ToolStatus};
use crate::provider::{anthropic, openai, validate};

pub(super) fn oa(v: &Value) -> Vec<InnerMessage> {
    crate::provider::stream::convert_whole_with(
        crate::provider::ConversationFormat::OpenAi,
        v,
        EvaluationId::new(),
        "ns",
        "key",
        false,
    )
    .expect("valid openai messages")
}

pub(super) fn an(v: &Value) -> Vec<InnerMessage> {
    crate::provider::stream::convert_whole_with(
        crate::provider::ConversationFormat::Anthropic,
        v,
        EvaluationId::new(),
        "ns",
        "key",
        false,
    )
    .expect("valid anthropic request")
}

pub(super) fn oa_err(v: Value) -> String {
    match crate::provider::stream::convert_whole_with(
        crate::provider::ConversationFormat::OpenAi,
        &v,
        EvaluationId::new(),
        "ns",
        "key",
        false,
    ) {
        Err(Error::InvalidInput(reason)) => reason,
        other => panic!("expected InvalidInput, got {other:?}"),
    }
}

pub(super) fn an_err(v: Value) -> String {
    match crate::provider::stream::convert_whole_with(
        crate::provider::ConversationFormat::Anthropic,
        &v,
        EvaluationId::new(),
        "ns",
        "key",
        false,
    ) {
        Err(Error::InvalidInput(reason)) => reason,
        other => panic!("expected InvalidInput, got {other:?}"),
    }
}

/// A validator's verdict as `Ok(())` or the reason of its
/// [`Error::InvalidInput`] (any other error fails the test).
pub(super) fn verdict(r: Result<()>) -> Result<(), String> {
    match r {
        Ok(()) => Ok(()),
        Err(Error::InvalidInput(reason)) => Err(reason),
        Err(other) => panic!("expected InvalidInput, got {other:?}"),
    }
}

pub(super) fn check_both(messages: &[InnerMessage]) -> (Vec<Value>, Value) {
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

pub(super) fn openai_conversation() -> Value {
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

pub(super) fn anthropic_conversation() -> Value {
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

/// A neutral message list, built message by message.
pub(super) struct Conv {
    eval: EvaluationId,
    pub(super) msgs: Vec<InnerMessage>,
}

impl Conv {
    pub(super) fn new() -> Self {
        Self {
            eval: EvaluationId::new(),
            msgs: Vec::new(),
        }
    }
    pub(super) fn push(&mut self, role: Role, content: &str) -> &mut InnerMessage {
        let seq = self.msgs.len() as u64;
        self.msgs
            .push(InnerMessage::new(role, content, self.eval, seq));
        self.msgs.last_mut().expect("pushed")
    }
    pub(super) fn system(&mut self, c: &str) -> &mut Self {
        self.push(Role::System, c);
        self
    }
    pub(super) fn user(&mut self, c: &str) -> &mut Self {
        self.push(Role::User, c);
        self
    }
    pub(super) fn assistant(&mut self, c: &str, calls: &[(&str, ToolStatus)]) -> &mut Self {
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
    pub(super) fn tool(&mut self, id: &str, c: &str) -> &mut Self {
        let m = self.push(Role::Tool, c);
        m.tool_call_id = Some(id.into());
        m.tool_name = Some(format!("tool_{id}"));
        self
    }
}
