//! Streamed Messages API responses: `message_start`, `content_block_start`,
//! `content_block_delta`, `content_block_stop`, `message_delta`,
//! `message_stop`, `ping` and `error` events.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::anthropic_response::{in_band_error, result_from_message};
use super::sse::{SseEvent, SseParser};
use super::transport::{cut_stream, parse_error};
use crate::engine::conversation::adapter::{
    ProviderChatResult, ProviderError, ProviderStreamChunk,
};

/// Assembles a streamed Messages API response from the bytes of its
/// server-sent-events body, fed in chunks cut anywhere.
///
/// `message_start` gives the message (id, model, first usage);
/// `content_block_start` opens a block at an index; `content_block_delta`
/// extends it: `text_delta` (given to `on_chunk` as a delta),
/// `input_json_delta` (a `tool_use` block's input, as JSON text fragments,
/// reported as chunks with no delta), `thinking_delta` and
/// `signature_delta` (kept in `raw`, not in the message); `message_delta`
/// gives the stop reason and the final usage (its members replace the
/// first ones); `message_stop` ends the stream. `ping` and unknown events
/// are ignored; an `error` event fails the call with its error.
///
/// [`finish`](Self::finish) builds the message the stream amounts to, which
/// is the result's `raw` and is read as
/// [`parse_anthropic_response`](super::parse_anthropic_response) reads a
/// body. A `tool_use` input is the concatenated fragments parsed as JSON
/// (the block's start `input` when there were none); fragments that do
/// not parse (a stream stopped by `max_tokens`) are kept as their text.
#[derive(Debug, Default)]
pub struct AnthropicStream {
    sse: SseParser,
    done: bool,
    message: Map<String, Value>,
    blocks: BTreeMap<u64, Block>,
    usage: Map<String, Value>,
}

/// A content block being assembled.
#[derive(Debug, Default)]
struct Block {
    start: Map<String, Value>,
    text: String,
    json: String,
    thinking: String,
    signature: String,
}

impl AnthropicStream {
    /// A stream at its start.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds the next bytes; `on_chunk` sees each text delta and each
    /// tool-input fragment as its event completes.
    ///
    /// # Errors
    /// `parse` for an event that is not a JSON object, that lacks what its
    /// type needs (`message_start` without a message, a block event without
    /// an index), or a delta to a block that never started; the provider's
    /// error for an `error` event.
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
    /// `message_stop` without a stop reason, or inside an event (it was cut
    /// off); `parse` when
    /// the assembled message is malformed.
    pub fn finish(
        mut self,
        on_chunk: &mut dyn FnMut(&ProviderStreamChunk),
    ) -> Result<ProviderChatResult, ProviderError> {
        if let Some(event) = self.sse.finish() {
            // An event without its closing blank line: a stream cut inside
            // it leaves a piece of JSON.
            self.event(event, on_chunk).map_err(|e| {
                if e.category == "parse" {
                    cut_stream("message_stop")
                } else {
                    e
                }
            })?;
        }
        let stopped = self
            .message
            .get("stop_reason")
            .is_some_and(|r| !r.is_null());
        if !self.done && !stopped {
            return Err(cut_stream("message_stop"));
        }
        let result = result_from_message(self.message())?;
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
        let value: Value = serde_json::from_str(data).map_err(|e| {
            let mut error = parse_error(format!("a stream event is not JSON: {e}"));
            error.raw = Some(Value::String(data.to_owned()));
            error
        })?;
        let invalid = |reason: &str, value: &Value| {
            let mut e = parse_error(format!("a stream event is not valid: {reason}"));
            e.raw = Some(value.clone());
            e
        };
        let Some(o) = value.as_object() else {
            return Err(invalid("not a JSON object", &value));
        };
        let kind = o
            .get("type")
            .and_then(Value::as_str)
            .or(event.event.as_deref())
            .unwrap_or_default();
        let index = || o.get("index").and_then(Value::as_u64);
        match kind {
            "message_start" => {
                let Some(m) = o.get("message").and_then(Value::as_object) else {
                    return Err(invalid("message_start without a message", &value));
                };
                self.message = m.clone();
                self.message.remove("content");
                if let Some(Value::Object(u)) = self.message.remove("usage") {
                    self.usage = u;
                }
            }
            "content_block_start" => {
                let (Some(i), Some(b)) = (index(), o.get("content_block")) else {
                    return Err(invalid(
                        "content_block_start without index or block",
                        &value,
                    ));
                };
                let Some(start) = b.as_object() else {
                    return Err(invalid("content_block is not an object", &value));
                };
                let block = Block {
                    start: start.clone(),
                    ..Block::default()
                };
                self.blocks.insert(i, block);
            }
            "content_block_delta" => {
                let Some(i) = index() else {
                    return Err(invalid("content_block_delta without an index", &value));
                };
                let Some(block) = self.blocks.get_mut(&i) else {
                    return Err(invalid("a delta to a block that never started", &value));
                };
                let delta = o.get("delta");
                let field = |k: &str| delta.and_then(|d| d.get(k)).and_then(Value::as_str);
                match delta.and_then(|d| d.get("type")).and_then(Value::as_str) {
                    Some("text_delta") => {
                        let text = field("text").unwrap_or_default();
                        block.text.push_str(text);
                        on_chunk(&ProviderStreamChunk {
                            delta: Some(Value::String(text.to_owned())),
                            raw: Some(value.clone()),
                            ..ProviderStreamChunk::default()
                        });
                    }
                    Some("input_json_delta") => {
                        block
                            .json
                            .push_str(field("partial_json").unwrap_or_default());
                        on_chunk(&ProviderStreamChunk {
                            raw: Some(value.clone()),
                            ..ProviderStreamChunk::default()
                        });
                    }
                    Some("thinking_delta") => {
                        block
                            .thinking
                            .push_str(field("thinking").unwrap_or_default());
                    }
                    Some("signature_delta") => {
                        block
                            .signature
                            .push_str(field("signature").unwrap_or_default());
                    }
                    _ => {} // citations and later kinds
                }
            }
            "message_delta" => {
                if let Some(Value::Object(d)) = o.get("delta") {
                    for (k, v) in d {
                        self.message.insert(k.clone(), v.clone());
                    }
                }
                if let Some(Value::Object(u)) = o.get("usage") {
                    for (k, v) in u.iter().filter(|(_, v)| !v.is_null()) {
                        self.usage.insert(k.clone(), v.clone());
                    }
                }
            }
            "message_stop" => self.done = true,
            "error" => return Err(in_band_error(&value)),
            _ => {} // ping, content_block_stop, later kinds
        }
        Ok(())
    }

    /// The message object the stream amounts to.
    fn message(&self) -> Value {
        let mut m = self.message.clone();
        let content = self.blocks.values().map(Block::finish).collect();
        m.insert("content".into(), Value::Array(content));
        if !self.usage.is_empty() {
            m.insert("usage".into(), Value::Object(self.usage.clone()));
        }
        Value::Object(m)
    }
}

impl Block {
    /// The block as a response would have it.
    fn finish(&self) -> Value {
        let mut b = self.start.clone();
        let kind = b.get("type").and_then(Value::as_str).unwrap_or_default();
        match kind {
            "text" => {
                let mut text = b
                    .get("text")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                text.push_str(&self.text);
                b.insert("text".into(), Value::String(text));
            }
            "tool_use" | "server_tool_use" if !self.json.is_empty() => {
                let input = serde_json::from_str(&self.json)
                    .unwrap_or_else(|_| Value::String(self.json.clone()));
                b.insert("input".into(), input);
            }
            "thinking" => {
                let mut thinking = b
                    .get("thinking")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                thinking.push_str(&self.thinking);
                b.insert("thinking".into(), Value::String(thinking));
                if !self.signature.is_empty() {
                    b.insert("signature".into(), Value::String(self.signature.clone()));
                }
            }
            _ => {}
        }
        Value::Object(b)
    }
}

/// Parses a whole streamed Messages API body (the bytes of its
/// server-sent events), as [`AnthropicStream`] does when fed them.
///
/// # Errors
/// As [`AnthropicStream::push`] and [`AnthropicStream::finish`].
pub fn parse_anthropic_stream(bytes: &[u8]) -> Result<ProviderChatResult, ProviderError> {
    let mut stream = AnthropicStream::new();
    stream.push(bytes, &mut |_| {})?;
    stream.finish(&mut |_| {})
}

impl super::transport::WireStream for AnthropicStream {
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
