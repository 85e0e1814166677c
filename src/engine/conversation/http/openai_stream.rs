//! Streamed chat completions: `data:` events of `chat.completion.chunk`s,
//! then `data: [DONE]`.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::openai_response::{in_band_error, result_from_completion};
use super::sse::{SseEvent, SseParser};
use super::transport::{cut_stream, parse_error};
use crate::engine::conversation::adapter::{
    ProviderChatResult, ProviderError, ProviderStreamChunk,
};

/// Assembles a streamed chat completion from the bytes of its
/// server-sent-events body, fed in chunks cut anywhere.
///
/// Each `data:` event is a `chat.completion.chunk`; only choice 0 is read.
/// `delta.content` is appended to the text (and given to `on_chunk` as a
/// delta); `delta.tool_calls` fragments are assembled by their `index`
/// (the `id` and `function.name` from the first fragment that has them,
/// `function.arguments` concatenated) and reported as chunks with no
/// delta; `finish_reason`, `id`, `model` and the `usage` chunk (sent last
/// when `stream_options.include_usage` is set) are kept. `data: [DONE]`
/// ends the stream; anything after it is ignored. An event with an
/// `error` member (or of type `error`) fails the call with that error.
///
/// [`finish`](Self::finish) builds the completion the stream amounts to
/// (`{"id", "object": "chat.completion", "model", "choices": [{"message",
/// "finish_reason"}], "usage"}`), which is the result's `raw` and is read
/// as [`parse_openai_response`](super::parse_openai_response) reads a
/// body, so a streamed and a plain call give the same result.
#[derive(Debug, Default)]
pub struct OpenAiStream {
    sse: SseParser,
    done: bool,
    /// `id`, `model`, `system_fingerprint`, `created`: the latest seen.
    header: Map<String, Value>,
    text: Option<String>,
    refusal: Option<String>,
    reasoning: Option<String>,
    calls: BTreeMap<u64, Call>,
    finish_reason: Option<Value>,
    usage: Option<Map<String, Value>>,
}

/// A tool call being assembled.
#[derive(Debug, Default)]
struct Call {
    id: String,
    name: String,
    arguments: String,
}

impl OpenAiStream {
    /// A stream at its start.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds the next bytes; `on_chunk` sees each content delta and each
    /// tool-call fragment as its event completes.
    ///
    /// # Errors
    /// `parse` for an event that is not a JSON object; the provider's error
    /// for an error event.
    pub fn push(
        &mut self,
        bytes: &[u8],
        on_chunk: &mut dyn FnMut(&ProviderStreamChunk),
    ) -> Result<(), ProviderError> {
        for event in self.sse.push(bytes) {
            self.event(event, on_chunk)?;
        }
        Ok(())
    }

    /// Ends the stream and returns the assembled result; `on_chunk` sees a
    /// chunk marking the message complete, then one with the usage.
    ///
    /// # Errors
    /// As [`push`](Self::push); `network` when the stream ended before
    /// `[DONE]` without a finish reason, or inside an event (it was cut
    /// off); `parse` when the
    /// assembled message is malformed (a tool call without a name).
    pub fn finish(
        mut self,
        on_chunk: &mut dyn FnMut(&ProviderStreamChunk),
    ) -> Result<ProviderChatResult, ProviderError> {
        if let Some(event) = self.sse.finish() {
            // An event without its closing blank line: a stream cut inside
            // it leaves a piece of JSON.
            self.event(event, on_chunk).map_err(|e| {
                if e.category == "parse" {
                    cut_stream("data: [DONE]")
                } else {
                    e
                }
            })?;
        }
        if !self.done && self.finish_reason.is_none() {
            return Err(cut_stream("data: [DONE]"));
        }
        let result = result_from_completion(self.completion())?;
        on_chunk(&ProviderStreamChunk {
            is_message_complete: true,
            ..ProviderStreamChunk::default()
        });
        if result.usage.is_some() {
            on_chunk(&ProviderStreamChunk {
                usage: result.usage.clone(),
                ..ProviderStreamChunk::default()
            });
        }
        Ok(result)
    }

    fn event(
        &mut self,
        event: SseEvent,
        on_chunk: &mut dyn FnMut(&ProviderStreamChunk),
    ) -> Result<(), ProviderError> {
        let data = event.data.trim();
        if self.done || data.is_empty() {
            return Ok(());
        }
        if data == "[DONE]" {
            self.done = true;
            return Ok(());
        }
        let value: Value = serde_json::from_str(data).map_err(|e| {
            let mut error = parse_error(format!("a stream event is not JSON: {e}"));
            error.raw = Some(Value::String(data.to_owned()));
            error
        })?;
        let Some(o) = value.as_object() else {
            let mut error = parse_error("a stream event is not a JSON object");
            error.raw = Some(value);
            return Err(error);
        };
        if event.event.as_deref() == Some("error") || o.get("error").is_some_and(|e| !e.is_null()) {
            return Err(in_band_error(&value));
        }
        for key in ["id", "model", "system_fingerprint", "created"] {
            if let Some(v) = o.get(key).filter(|v| !v.is_null()) {
                self.header.insert(key.into(), v.clone());
            }
        }
        if let Some(u) = o.get("usage").and_then(Value::as_object) {
            self.usage = Some(u.clone());
        }
        let choices = o.get("choices").and_then(Value::as_array);
        let choice = choices.and_then(|c| {
            c.iter()
                .find(|c| c.get("index").and_then(Value::as_u64).unwrap_or(0) == 0)
        });
        let Some(choice) = choice else {
            return Ok(());
        };
        if let Some(reason) = choice.get("finish_reason").filter(|r| !r.is_null()) {
            self.finish_reason = Some(reason.clone());
        }
        let Some(delta) = choice.get("delta").and_then(Value::as_object) else {
            return Ok(());
        };
        if let Some(text) = delta.get("content").and_then(Value::as_str) {
            self.text.get_or_insert_with(String::new).push_str(text);
            if !text.is_empty() {
                on_chunk(&ProviderStreamChunk {
                    delta: Some(Value::String(text.to_owned())),
                    raw: Some(value.clone()),
                    ..ProviderStreamChunk::default()
                });
            }
        }
        for (key, into) in [
            ("refusal", &mut self.refusal),
            ("reasoning_content", &mut self.reasoning),
        ] {
            if let Some(text) = delta.get(key).and_then(Value::as_str) {
                into.get_or_insert_with(String::new).push_str(text);
            }
        }
        if let Some(fragments) = delta.get("tool_calls").and_then(Value::as_array) {
            for (pos, f) in fragments.iter().enumerate() {
                let index = f.get("index").and_then(Value::as_u64).unwrap_or(pos as u64);
                let call = self.calls.entry(index).or_default();
                if let Some(id) = f.get("id").and_then(Value::as_str) {
                    if call.id.is_empty() {
                        id.clone_into(&mut call.id);
                    }
                }
                let function = f.get("function");
                if let Some(name) = function.and_then(|f| f.get("name")).and_then(Value::as_str) {
                    if call.name.is_empty() {
                        name.clone_into(&mut call.name);
                    }
                }
                match function.and_then(|f| f.get("arguments")) {
                    Some(Value::String(s)) => call.arguments.push_str(s),
                    Some(v @ Value::Object(_)) => call.arguments.push_str(&v.to_string()),
                    _ => {}
                }
            }
            if !fragments.is_empty() {
                on_chunk(&ProviderStreamChunk {
                    raw: Some(value.clone()),
                    ..ProviderStreamChunk::default()
                });
            }
        }
        Ok(())
    }

    /// The completion object the stream amounts to.
    fn completion(&self) -> Value {
        let mut message = Map::new();
        message.insert("role".into(), json!("assistant"));
        let content = match &self.text {
            Some(t) => Value::String(t.clone()),
            None => Value::Null,
        };
        message.insert("content".into(), content);
        if let Some(r) = &self.refusal {
            message.insert("refusal".into(), json!(r));
        }
        if let Some(r) = &self.reasoning {
            message.insert("reasoning_content".into(), json!(r));
        }
        if !self.calls.is_empty() {
            let calls = self
                .calls
                .values()
                .map(|c| {
                    let mut call = Map::new();
                    if !c.id.is_empty() {
                        call.insert("id".into(), json!(c.id));
                    }
                    call.insert("type".into(), json!("function"));
                    let mut function = Map::new();
                    if !c.name.is_empty() {
                        function.insert("name".into(), json!(c.name));
                    }
                    function.insert("arguments".into(), json!(c.arguments));
                    call.insert("function".into(), Value::Object(function));
                    Value::Object(call)
                })
                .collect();
            message.insert("tool_calls".into(), Value::Array(calls));
        }
        let mut out = self.header.clone();
        out.insert("object".into(), json!("chat.completion"));
        out.insert(
            "choices".into(),
            json!([{
                "index": 0,
                "message": Value::Object(message),
                "finish_reason": self.finish_reason.clone().unwrap_or(Value::Null),
            }]),
        );
        if let Some(u) = &self.usage {
            out.insert("usage".into(), Value::Object(u.clone()));
        }
        Value::Object(out)
    }
}

/// Parses a whole streamed chat-completions body (the bytes of its
/// server-sent events), as [`OpenAiStream`] does when fed them.
///
/// # Errors
/// As [`OpenAiStream::push`] and [`OpenAiStream::finish`].
pub fn parse_openai_stream(bytes: &[u8]) -> Result<ProviderChatResult, ProviderError> {
    let mut stream = OpenAiStream::new();
    stream.push(bytes, &mut |_| {})?;
    stream.finish(&mut |_| {})
}

impl super::transport::WireStream for OpenAiStream {
    fn start() -> Self {
        Self::new()
    }
    fn feed(
        &mut self,
        bytes: &[u8],
        on_chunk: &mut dyn FnMut(&ProviderStreamChunk),
    ) -> Result<(), ProviderError> {
        self.push(bytes, on_chunk)
    }
    fn end(
        self,
        on_chunk: &mut dyn FnMut(&ProviderStreamChunk),
    ) -> Result<ProviderChatResult, ProviderError> {
        self.finish(on_chunk)
    }
}
