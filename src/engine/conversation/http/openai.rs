//! OpenAI-compatible chat completions: `POST {base_url}/chat/completions`.
//!
//! The wire shapes are those of [`crate::provider::openai`]'s import and
//! export: `{"role": "assistant", "content", "tool_calls": [{"id", "type":
//! "function", "function": {"name", "arguments"}}]}` and `{"role": "tool",
//! "tool_call_id", "content"}`.

use serde_json::{Map, Value, json};
use uuid::Uuid;

use super::HttpOptions;
use super::openai_stream::OpenAiStream;
use super::transport::{
    Transport, Wire, bad_body, call, count, http_error, parse_error, text_of, type_category,
};
use crate::engine::conversation::adapter::{
    ChatInputMessage, ProviderAdapter, ProviderCallOptions, ProviderChatRequest,
    ProviderChatResult, ProviderError, ProviderStreamChunk,
};
use crate::event::TokenUsage;
use crate::event::conversation::{CallUsage, ConversationMessage, MessageRole, Metadata};
use crate::model::ToolCallRecord;

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
        MessageRole::System => "system",
        MessageRole::User | MessageRole::Other => "user",
        MessageRole::Assistant => "assistant",
        MessageRole::Tool => "tool",
    };
    o.insert("role".into(), json!(role));
    let empty = match &m.content {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        _ => false,
    };
    let content = if m.role == MessageRole::Assistant && empty && !m.tool_calls.is_empty() {
        Value::Null
    } else {
        content(&m.content)
    };
    o.insert("content".into(), content);
    match m.role {
        MessageRole::Tool => {
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
    if m.role == MessageRole::Assistant && !m.tool_calls.is_empty() {
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

/// Parses a chat-completions response body (`{"id", "model", "choices":
/// [{"message", "finish_reason"}], "usage"}`).
///
/// The message's content may be a string, `null` or missing (then its
/// `refusal`, if any, is the text and `metadata.refusal` is true), or
/// content parts (their `text` concatenated). `reasoning_content`, which
/// some servers send, goes to `metadata.reasoning_content`. A tool call
/// without an id gets a generated one (`call_<uuid>`); `arguments` sent as
/// an object is kept as its JSON text. Unknown members are ignored (and
/// kept in `raw`).
///
/// Usage: `prompt_tokens`, `completion_tokens`,
/// `prompt_tokens_details.cached_tokens` (cache reads) and `total_tokens`;
/// every other member (`completion_tokens_details`, ...) goes to the
/// breakdown as it came. A count that is not a non-negative integer is 0.
///
/// # Errors
/// `parse` (with the body as `raw`) when the body is not JSON, has no
/// `choices[0].message`, or has a malformed tool call; a body with an
/// `error` member is that error (its category from its type or code).
pub fn parse_openai_response(body: &[u8]) -> Result<ProviderChatResult, ProviderError> {
    let value: Value = serde_json::from_slice(body).map_err(|e| bad_body(e, body))?;
    result_from_completion(value)
}

/// The result of a parsed completion object.
pub(super) fn result_from_completion(value: Value) -> Result<ProviderChatResult, ProviderError> {
    let invalid = |reason: &str, value: &Value| {
        let mut e = parse_error(format!("the response is not valid: {reason}"));
        e.raw = Some(value.clone());
        e
    };
    let Some(o) = value.as_object() else {
        return Err(invalid("not a JSON object", &value));
    };
    if o.get("error").is_some_and(|e| !e.is_null()) {
        return Err(in_band_error(&value));
    }
    let Some(choice) = o
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|c| c.first())
        .and_then(Value::as_object)
    else {
        return Err(invalid("no choices[0]", &value));
    };
    let Some(msg) = choice.get("message").and_then(Value::as_object) else {
        return Err(invalid("no choices[0].message", &value));
    };
    let mut metadata = Metadata::new();
    let text = match msg.get("content") {
        Some(Value::String(s)) => s.clone(),
        None | Some(Value::Null) => match msg.get("refusal").and_then(Value::as_str) {
            Some(r) => {
                metadata.insert("refusal".into(), Value::Bool(true));
                r.to_owned()
            }
            None => String::new(),
        },
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect(),
        Some(_) => return Err(invalid("choices[0].message.content is not text", &value)),
    };
    if let Some(r) = msg.get("reasoning_content").filter(|r| r.is_string()) {
        metadata.insert("reasoning_content".into(), r.clone());
    }
    let calls = match msg.get("tool_calls") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(calls)) => {
            let mut out = Vec::with_capacity(calls.len());
            for (k, c) in calls.iter().enumerate() {
                match tool_call(c) {
                    Some(c) => out.push(c),
                    None => {
                        let reason = format!("choices[0].message.tool_calls[{k}] is malformed");
                        return Err(invalid(&reason, &value));
                    }
                }
            }
            out
        }
        Some(_) => return Err(invalid("tool_calls is not an array", &value)),
    };
    let mut m = ConversationMessage::assistant(text);
    m.tool_calls = calls;
    m.metadata = metadata;
    m.provider_message_id = text_of(o.get("id"));
    let mut response_metadata = Metadata::new();
    for (key, v) in [
        ("finish_reason", choice.get("finish_reason")),
        ("model", o.get("model")),
        ("system_fingerprint", o.get("system_fingerprint")),
    ] {
        if let Some(v) = v.filter(|v| !v.is_null()) {
            response_metadata.insert(key.into(), v.clone());
        }
    }
    let usage = o.get("usage").and_then(Value::as_object).map(usage);
    Ok(ProviderChatResult {
        messages: vec![m],
        usage,
        raw: Some(value),
        request_id: None,
        response_metadata,
    })
}

/// A tool call `{"id", "type": "function", "function": {"name",
/// "arguments"}}`, if well-formed.
fn tool_call(c: &Value) -> Option<ToolCallRecord> {
    let f = c.get("function")?.as_object()?;
    let name = f.get("name")?.as_str()?;
    let arguments = match f.get("arguments") {
        None | Some(Value::Null) => "{}".to_owned(),
        Some(Value::String(s)) => s.clone(),
        Some(v @ Value::Object(_)) => v.to_string(),
        Some(_) => return None,
    };
    let id = match c.get("id") {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        None | Some(Value::Null) | Some(Value::String(_)) => {
            format!("call_{}", Uuid::now_v7().simple())
        }
        Some(_) => return None,
    };
    Some(ToolCallRecord::new(id.as_str(), name, arguments))
}

/// The usage object of a response or of a stream's last chunk.
fn usage(u: &Map<String, Value>) -> CallUsage {
    let details = u.get("prompt_tokens_details");
    let tokens = TokenUsage {
        input_tokens: count(u.get("prompt_tokens")),
        output_tokens: count(u.get("completion_tokens")),
        cache_read_tokens: count(details.and_then(|d| d.get("cached_tokens"))),
        cache_write_tokens: 0,
    };
    let mut breakdown = Metadata::new();
    for (key, v) in u {
        match key.as_str() {
            "prompt_tokens" | "completion_tokens" | "total_tokens" => {}
            _ if v.is_null() => {}
            "prompt_tokens_details" => {
                if let Value::Object(d) = v {
                    let mut rest = d.clone();
                    rest.remove("cached_tokens");
                    if !rest.is_empty() {
                        breakdown.insert(key.clone(), Value::Object(rest));
                    }
                }
            }
            _ => {
                breakdown.insert(key.clone(), v.clone());
            }
        }
    }
    CallUsage {
        tokens,
        total_tokens: u.get("total_tokens").and_then(Value::as_u64),
        breakdown,
    }
}

/// The message and code of an OpenAI-style error body:
/// `{"error": {"message", "type", "code"}}`, `{"error": "text"}` (Ollama)
/// or `{"message", "type", "code"}` (vLLM).
fn error_fields(v: &Value) -> (Option<String>, Option<String>) {
    let fields = |o: &Value| {
        let message = text_of(o.get("message")).or_else(|| text_of(o.get("detail")));
        let code = text_of(o.get("code")).or_else(|| text_of(o.get("type")));
        (message, code)
    };
    match v.get("error") {
        Some(e @ Value::Object(_)) => fields(e),
        Some(Value::String(s)) => (Some(s.clone()), None),
        _ => fields(v),
    }
}

/// The error of a failed chat-completions call: category from `status`
/// (`auth` for 401 and 403, `rate_limit` for 429, `server` for 5xx, else
/// `client`), message and code (`code`, else `type`) from the body
/// (`{"error": {"message", "type", "code"}}`, also `{"error": "text"}`
/// and a top-level `{"message", "code"}`), the body as `raw` (JSON, or a
/// JSON string when it is not JSON). The request id is the caller's to set.
pub fn parse_openai_error(status: u16, body: &[u8]) -> ProviderError {
    http_error(status, body, error_fields)
}

/// An error sent in a body or a stream with a success status.
pub(super) fn in_band_error(v: &Value) -> ProviderError {
    let (message, code) = error_fields(v);
    let category = code.as_deref().map_or("server", type_category);
    let mut e = ProviderError::new(
        category,
        message
            .filter(|m| !m.trim().is_empty())
            .unwrap_or_else(|| "the provider reported an error".into()),
    );
    e.code = code;
    e.raw = Some(v.clone());
    e
}
