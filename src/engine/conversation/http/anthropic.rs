//! Anthropic's Messages API: `POST {base_url}/messages`.
//!
//! The wire shapes are those of [`crate::provider::anthropic`]'s import and
//! export: a top-level `system`, alternating `user` and `assistant`
//! messages, tool calls as `tool_use` blocks and their results as
//! `tool_result` blocks of the next user message.

use serde_json::{Map, Value, json};

use super::anthropic_response::{parse_anthropic_error, parse_anthropic_response};
use super::anthropic_stream::AnthropicStream;
use super::options::HttpOptions;
use super::transport::{Transport, Wire, call};
use crate::engine::conversation::adapter::{
    ChatInputMessage, ProviderAdapter, ProviderCallOptions, ProviderChatRequest,
    ProviderChatResult, ProviderError, ProviderStreamChunk,
};
use crate::model::Role;
use crate::provider::anthropic::LEADING_USER_TEXT;

/// The `anthropic-version` header sent.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// The `max_tokens` of a request whose parameters give none (the API
/// requires it).
pub const DEFAULT_MAX_TOKENS: u64 = 1024;

/// An adapter for Anthropic's Messages API.
///
/// Requests are built by [`anthropic_request_body`], sent with the key in
/// `x-api-key` and `anthropic-version: 2023-06-01`; responses are read by
/// [`parse_anthropic_response`] (streamed: [`AnthropicStream`]), with the
/// `request-id` header as the request id.
///
/// ```
/// use agent_journal::conversation::ProviderAdapter;
/// use agent_journal::conversation::http::{AnthropicAdapter, HttpOptions};
///
/// let claude = AnthropicAdapter::new(HttpOptions::anthropic().api_key("sk-ant-..."));
/// assert_eq!(claude.id(), "anthropic");
/// assert!(claude.supports_streaming());
/// ```
pub struct AnthropicAdapter {
    id: String,
    transport: Transport,
}

impl AnthropicAdapter {
    /// An adapter `"anthropic"` with `options`.
    pub fn new(options: HttpOptions) -> Self {
        Self {
            id: "anthropic".into(),
            transport: Transport::new(options),
        }
    }

    /// The same adapter under provider id `id`.
    pub fn with_id(mut self, id: impl Into<String>) -> Self {
        self.id = id.into();
        self
    }

    /// Its options.
    pub fn options(&self) -> &HttpOptions {
        &self.transport.options
    }

    fn headers(&self, stream: bool) -> Vec<(&'static str, String)> {
        let accept = if stream {
            "text/event-stream"
        } else {
            "application/json"
        };
        let mut h = vec![
            ("accept", accept.to_owned()),
            ("anthropic-version", ANTHROPIC_VERSION.to_owned()),
        ];
        if let Some(key) = &self.transport.options.api_key {
            h.push(("x-api-key", key.clone()));
        }
        h
    }
}

impl std::fmt::Debug for AnthropicAdapter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnthropicAdapter")
            .field("id", &self.id)
            .field("options", &self.transport.options)
            .finish()
    }
}

impl ProviderAdapter for AnthropicAdapter {
    fn id(&self) -> &str {
        &self.id
    }

    fn supports_streaming(&self) -> bool {
        true
    }

    /// # Errors
    /// See [the module](super): `network`, `timeout`, `auth`, `rate_limit`,
    /// `server` (529 `overloaded_error` included), `client` (with the
    /// provider's message, error type and body) and `parse`.
    fn send_chat(
        &self,
        request: &ProviderChatRequest,
        _options: &ProviderCallOptions,
    ) -> Result<ProviderChatResult, ProviderError> {
        call::<AnthropicWire>(&self.transport, &self.headers(false), request, None)
    }

    /// # Errors
    /// As [`send_chat`](Self::send_chat); an `error` event is that error;
    /// `network` for a stream that stops before `message_stop` and before
    /// a stop reason.
    fn stream_chat(
        &self,
        request: &ProviderChatRequest,
        _options: &ProviderCallOptions,
        on_chunk: &mut dyn FnMut(&ProviderStreamChunk),
    ) -> Result<ProviderChatResult, ProviderError> {
        call::<AnthropicWire>(
            &self.transport,
            &self.headers(true),
            request,
            Some(on_chunk),
        )
    }
}

/// The Anthropic wire protocol, for [`call`].
struct AnthropicWire;

impl Wire for AnthropicWire {
    const PATH: &'static str = "/messages";
    type Stream = AnthropicStream;
    fn body(request: &ProviderChatRequest, stream: bool) -> Value {
        anthropic_request_body(request, stream)
    }
    fn parse_response(body: &[u8]) -> Result<ProviderChatResult, ProviderError> {
        parse_anthropic_response(body)
    }
    fn parse_error(status: u16, body: &[u8]) -> ProviderError {
        parse_anthropic_error(status, body)
    }
}

/// The body of a Messages API request.
///
/// - System messages, wherever they are, become the top-level `system`:
///   their texts joined by a blank line, or text blocks when one of them
///   has blocks (array content).
/// - User messages (and messages of role `Other`) are `user` messages; an
///   assistant message is a text block (if it has text) and one `tool_use`
///   block per call, whose `input` is the arguments parsed as a JSON object
///   (empty arguments are `{}`; arguments that are not a JSON object are
///   `{"arguments": <text>}`); a tool message is a `tool_result` block
///   (`tool_use_id`, `content`) in a user message.
/// - Consecutive messages of one role are merged into one (roles
///   alternate), so the results of one assistant message's calls are one
///   user message, with any user text that follows them; a history that
///   starts with an assistant message gets a first user message saying
///   [`LEADING_USER_TEXT`]. A message of a single text block is sent as a
///   string.
/// - Tools are `{"name", "description", "input_schema"}`, omitted when
///   there are none. `max_tokens` is the parameters' or
///   [`DEFAULT_MAX_TOKENS`]; the other parameters (`temperature`,
///   `tool_choice`, `thinking`, ...) are merged into the body as they are.
///   Streaming sets `stream: true`; otherwise `stream` is removed.
pub fn anthropic_request_body(request: &ProviderChatRequest, stream: bool) -> Value {
    let mut body: Map<String, Value> = request.parameters.clone().into_iter().collect();
    let mut systems: Vec<&Value> = Vec::new();
    let mut out: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for m in &request.messages {
        let (role, blocks) = match m.role {
            Role::System => {
                systems.push(&m.content);
                continue;
            }
            Role::User | Role::Other => ("user", blocks(&m.content)),
            Role::Assistant => ("assistant", assistant(m)),
            Role::Tool => ("user", vec![tool_result(m)]),
        };
        match out.last_mut() {
            Some((last, b)) if *last == role => b.extend(blocks),
            _ => out.push((role, blocks)),
        }
    }
    if out.first().is_some_and(|(role, _)| *role == "assistant") {
        out.insert(0, ("user", vec![text_block(LEADING_USER_TEXT)]));
    }
    let messages = out
        .into_iter()
        .map(|(role, mut blocks)| {
            let content = if blocks.is_empty() {
                Value::String(String::new())
            } else if blocks.len() == 1 && is_plain_text(&blocks[0]) {
                blocks[0]
                    .get_mut("text")
                    .map(Value::take)
                    .unwrap_or_default()
            } else {
                Value::Array(blocks)
            };
            json!({"role": role, "content": content})
        })
        .collect();
    body.insert("model".into(), json!(request.model));
    body.insert("messages".into(), Value::Array(messages));
    if let Some(system) = system(&systems) {
        body.insert("system".into(), system);
    }
    if !body.contains_key("max_tokens") {
        body.insert("max_tokens".into(), json!(DEFAULT_MAX_TOKENS));
    }
    if !request.tools.is_empty() {
        let tools = request
            .tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.parameters}))
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    if stream {
        body.insert("stream".into(), Value::Bool(true));
    } else {
        body.remove("stream");
    }
    Value::Object(body)
}

fn text_block(text: &str) -> Value {
    json!({"type": "text", "text": text})
}

/// `{"type": "text", "text": <string>}` and nothing else.
fn is_plain_text(b: &Value) -> bool {
    b.as_object().is_some_and(|o| {
        o.len() == 2
            && o.get("type").and_then(Value::as_str) == Some("text")
            && o.get("text").is_some_and(Value::is_string)
    })
}

/// The blocks of a user message's content: text (none when empty), the
/// blocks of an array, or the JSON text of other JSON.
fn blocks(content: &Value) -> Vec<Value> {
    match content {
        Value::Null => Vec::new(),
        Value::String(s) if s.is_empty() => Vec::new(),
        Value::String(s) => vec![text_block(s)],
        Value::Array(a) => a
            .iter()
            .map(|b| match b {
                Value::String(s) => text_block(s),
                other => other.clone(),
            })
            .collect(),
        other => vec![text_block(&other.to_string())],
    }
}

/// An assistant message's blocks: its text (or its blocks as they are),
/// then a `tool_use` block for each call not among them.
fn assistant(m: &ChatInputMessage) -> Vec<Value> {
    let mut out = blocks(&m.content);
    for c in &m.tool_calls {
        let present = out.iter().any(|b| {
            b.get("type").and_then(Value::as_str) == Some("tool_use")
                && b.get("id").and_then(Value::as_str) == Some(c.call_id.as_str())
        });
        if present {
            continue;
        }
        out.push(json!({
            "type": "tool_use",
            "id": c.call_id.as_str(),
            "name": c.name,
            "input": input(&c.arguments),
        }));
    }
    out
}

/// A tool call's `input` from its arguments text (as the export does).
fn input(arguments: &str) -> Value {
    match serde_json::from_str::<Value>(arguments) {
        Ok(v @ Value::Object(_)) => v,
        _ if arguments.trim().is_empty() => Value::Object(Map::new()),
        _ => json!({ "arguments": arguments }),
    }
}

/// A tool message as a `tool_result` block.
fn tool_result(m: &ChatInputMessage) -> Value {
    let content = match &m.content {
        Value::String(_) | Value::Array(_) => m.content.clone(),
        Value::Null => Value::String(String::new()),
        other => Value::String(other.to_string()),
    };
    json!({
        "type": "tool_result",
        "tool_use_id": m.tool_call_id.as_ref().map_or("", |c| c.as_str()),
        "content": content,
    })
}

/// The top-level `system` of `systems`' contents.
fn system(systems: &[&Value]) -> Option<Value> {
    match systems {
        [] => None,
        [one] if !one.is_array() => Some(Value::String(text(one))),
        many if many.iter().any(|s| s.is_array()) => {
            Some(Value::Array(many.iter().flat_map(|s| blocks(s)).collect()))
        }
        many => {
            let texts: Vec<String> = many.iter().map(|s| text(s)).collect();
            Some(Value::String(texts.join("\n\n")))
        }
    }
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}
