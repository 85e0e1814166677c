//! OpenAI-compatible chat completions: `POST {base_url}/chat/completions`.
//!
//! The wire shapes are those of [`crate::provider::openai`]'s import and
//! export: `{"role": "assistant", "content", "tool_calls": [{"id", "type":
//! "function", "function": {"name", "arguments"}}]}` and `{"role": "tool",
//! "tool_call_id", "content"}`.

use serde_json::{Map, Value, json};

use super::openai_response::{parse_openai_error, parse_openai_response};
use super::openai_stream::OpenAiStream;
use super::options::HttpOptions;
use super::transport::{Transport, Wire, call};
use crate::engine::conversation::adapter::{
    ChatInputMessage, ProviderAdapter, ProviderCallOptions, ProviderChatRequest,
    ProviderChatResult, ProviderError, ProviderStreamChunk,
};
use crate::model::Role;

/// An adapter for OpenAI's chat completions API and the servers that speak
/// it (Ollama, vLLM, llama.cpp's server, LM Studio, gateways), chosen by
/// [`HttpOptions::base_url`].
///
/// A request is `{"model", "messages", "tools"?, ...parameters}`: the
/// request's parameters (`temperature`, `max_tokens`, `tool_choice`,
/// `response_format`, ...) are merged into the body as they are, under
/// `model`, `messages` and `tools`. Messages map as
/// [`openai_request_body`] says. The key, if any, goes in
/// `Authorization: Bearer`. Streaming asks for `stream: true` and
/// `stream_options.include_usage`, and reads the server-sent events
/// ([`OpenAiStream`]).
///
/// The result ([`parse_openai_response`]) is one assistant message with the
/// text of `choices[0].message` and its tool calls; its usage; the
/// `x-request-id` header as the request id; `finish_reason`, `model` and
/// `system_fingerprint` in the response metadata; the body as `raw`.
///
/// ```
/// use agent_journal::conversation::ProviderAdapter;
/// use agent_journal::conversation::http::{HttpOptions, OpenAiAdapter};
///
/// let openai = OpenAiAdapter::new(HttpOptions::openai().api_key("sk-..."));
/// assert_eq!(openai.id(), "openai");
/// let vllm = OpenAiAdapter::new(HttpOptions::new("http://127.0.0.1:8000/v1")).with_id("vllm");
/// assert_eq!(vllm.id(), "vllm");
/// ```
pub struct OpenAiAdapter {
    id: String,
    transport: Transport,
}

impl OpenAiAdapter {
    /// An adapter `"openai"` with `options`.
    pub fn new(options: HttpOptions) -> Self {
        Self {
            id: "openai".into(),
            transport: Transport::new(options),
        }
    }

    /// The same adapter under provider id `id` (to register several
    /// OpenAI-compatible servers in one engine).
    pub fn with_id(mut self, id: impl Into<String>) -> Self {
        self.id = id.into();
        self
    }

    /// Its options.
    pub fn options(&self) -> &HttpOptions {
        &self.transport.options
    }

    fn headers(&self, stream: bool) -> Vec<(&'static str, String)> {
        let mut h = vec![(
            "accept",
            if stream {
                "text/event-stream"
            } else {
                "application/json"
            }
            .to_owned(),
        )];
        if let Some(key) = &self.transport.options.api_key {
            h.push(("authorization", format!("Bearer {key}")));
        }
        h
    }
}

impl std::fmt::Debug for OpenAiAdapter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiAdapter")
            .field("id", &self.id)
            .field("options", &self.transport.options)
            .finish()
    }
}

impl ProviderAdapter for OpenAiAdapter {
    fn id(&self) -> &str {
        &self.id
    }

    fn supports_streaming(&self) -> bool {
        true
    }

    /// # Errors
    /// See [the module](super): `network`, `timeout`, `auth`, `rate_limit`,
    /// `server`, `client` (with the provider's message, code and body) and
    /// `parse`.
    fn send_chat(
        &self,
        request: &ProviderChatRequest,
        _options: &ProviderCallOptions,
    ) -> Result<ProviderChatResult, ProviderError> {
        call::<OpenAiWire>(&self.transport, &self.headers(false), request, None)
    }

    /// # Errors
    /// As [`send_chat`](Self::send_chat), and `network` for a stream that
    /// stops before `[DONE]` and before a finish reason.
    fn stream_chat(
        &self,
        request: &ProviderChatRequest,
        _options: &ProviderCallOptions,
        on_chunk: &mut dyn FnMut(&ProviderStreamChunk),
    ) -> Result<ProviderChatResult, ProviderError> {
        call::<OpenAiWire>(
            &self.transport,
            &self.headers(true),
            request,
            Some(on_chunk),
        )
    }
}

/// The OpenAi wire protocol, for [`call`].
struct OpenAiWire;

impl Wire for OpenAiWire {
    const PATH: &'static str = "/chat/completions";
    type Stream = OpenAiStream;
    fn body(request: &ProviderChatRequest, stream: bool) -> Value {
        openai_request_body(request, stream)
    }
    fn parse_response(body: &[u8]) -> Result<ProviderChatResult, ProviderError> {
        parse_openai_response(body)
    }
    fn parse_error(status: u16, body: &[u8]) -> ProviderError {
        parse_openai_error(status, body)
    }
}

/// The body of a chat-completions request.
///
/// - System messages are `system`; user messages and messages of role
///   `Other` are `user`.
/// - An assistant message carries its `tool_calls` (`{"id", "type":
///   "function", "function": {"name", "arguments"}}`); its content is
///   `null` when it has calls and no text.
/// - A tool message is `{"role": "tool", "tool_call_id", "content"}`.
/// - Text content is a string; an array (content parts) is sent as it is;
///   other JSON is sent as its JSON text.
/// - `name` is sent on system, user and assistant messages when it is a
///   valid OpenAI name (1 to 64 of `a-z A-Z 0-9 _ -`), else dropped.
/// - Tools are `[{"type": "function", "function": {"name", "description",
///   "parameters"}}]`, omitted when there are none.
/// - The parameters are the body's other members, as given. Streaming sets
///   `stream: true` and `stream_options.include_usage: true` (keeping the
///   parameters' other stream options); otherwise `stream` and
///   `stream_options` are removed.
pub fn openai_request_body(request: &ProviderChatRequest, stream: bool) -> Value {
    let mut body: Map<String, Value> = request.parameters.clone().into_iter().collect();
    body.insert("model".into(), json!(request.model));
    body.insert(
        "messages".into(),
        Value::Array(request.messages.iter().map(message).collect()),
    );
    if !request.tools.is_empty() {
        let tools = request
            .tools
            .iter()
            .map(|t| {
                json!({
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.parameters,
                    },
                })
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    if stream {
        body.insert("stream".into(), Value::Bool(true));
        let mut options = match body.remove("stream_options") {
            Some(Value::Object(o)) => o,
            _ => Map::new(),
        };
        options.insert("include_usage".into(), Value::Bool(true));
        body.insert("stream_options".into(), Value::Object(options));
    } else {
        body.remove("stream");
        body.remove("stream_options");
    }
    Value::Object(body)
}

/// One message of a request.
fn message(m: &ChatInputMessage) -> Value {
    let mut o = Map::new();
    let role = match m.role {
        Role::System => "system",
        Role::User | Role::Other => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    };
    o.insert("role".into(), json!(role));
    let empty = match &m.content {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        _ => false,
    };
    let content = if m.role == Role::Assistant && empty && !m.tool_calls.is_empty() {
        Value::Null
    } else {
        content(&m.content)
    };
    o.insert("content".into(), content);
    match m.role {
        Role::Tool => {
            if let Some(id) = &m.tool_call_id {
                o.insert("tool_call_id".into(), json!(id.as_str()));
            }
        }
        _ => {
            if let Some(name) = m.name.as_deref().filter(|n| valid_name(n)) {
                o.insert("name".into(), json!(name));
            }
        }
    }
    if m.role == Role::Assistant && !m.tool_calls.is_empty() {
        let calls = m
            .tool_calls
            .iter()
            .map(|c| {
                json!({
                    "id": c.call_id.as_str(),
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                })
            })
            .collect();
        o.insert("tool_calls".into(), Value::Array(calls));
    }
    Value::Object(o)
}

/// A message's content on the wire: a string or content parts.
fn content(v: &Value) -> Value {
    match v {
        Value::String(_) | Value::Array(_) => v.clone(),
        Value::Null => Value::String(String::new()),
        other => Value::String(other.to_string()),
    }
}

/// `^[a-zA-Z0-9_-]{1,64}$`, the names OpenAI accepts.
fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}
