//! Reading a Messages API response: a whole body, an error body, and an
//! `error` sent with a success status (shared with the stream's parser).

use serde_json::{Map, Value};
use uuid::Uuid;

use super::transport::{bad_body, count, http_error, parse_error, text_of, type_category};
use crate::engine::conversation::adapter::{ProviderChatResult, ProviderError};
use crate::event::TokenUsage;
use crate::event::conversation::{ConversationMessage, Metadata};
use crate::model::Role;
use crate::model::ToolCallRecord;

/// Parses a Messages API response body (`{"id", "type": "message", "model",
/// "content": [blocks], "stop_reason", "stop_sequence", "usage"}`).
///
/// The result is one assistant message: its `text` blocks concatenated,
/// each `tool_use` block a tool call (arguments: the JSON text of its
/// `input`; a block without an id gets `toolu_<uuid>`). When the content
/// has any other block (`thinking` with its `signature`,
/// `redacted_thinking`, a server tool's), the message's content is the
/// whole block list as it came instead of the text, so that it is sent
/// back unchanged (extended thinking requires its blocks, signatures
/// intact, in a tool loop): [`anthropic_request_body`](super::anthropic_request_body) sends an assistant
/// message's blocks as they are and adds a `tool_use` block only for a call
/// not among them.
/// Usage: `input_tokens`, `output_tokens`, `cache_read_input_tokens` and
/// `cache_creation_input_tokens` (cache writes); other members
/// (`cache_creation`, `server_tool_use`, `service_tier`) go to the
/// breakdown. No total is reported. `stop_reason`, `stop_sequence` and
/// `model` go to the response metadata.
///
/// # Errors
/// `parse` (with the body as `raw`) when the body is not a JSON object,
/// its `content` is not an array, or a block is malformed (a `tool_use`
/// without a name); a body of type `error` is that error (category from
/// its type).
pub fn parse_anthropic_response(body: &[u8]) -> Result<ProviderChatResult, ProviderError> {
    let value: Value = serde_json::from_slice(body).map_err(|e| bad_body(e, body))?;
    result_from_message(value)
}

/// The result of a parsed message object.
pub(super) fn result_from_message(value: Value) -> Result<ProviderChatResult, ProviderError> {
    let invalid = |reason: &str, value: &Value| {
        let mut e = parse_error(format!("the response is not valid: {reason}"));
        e.raw = Some(value.clone());
        e
    };
    let Some(o) = value.as_object() else {
        return Err(invalid("not a JSON object", &value));
    };
    if o.get("type").and_then(Value::as_str) == Some("error")
        || o.get("error").is_some_and(|e| !e.is_null())
    {
        return Err(in_band_error(&value));
    }
    let blocks = match o.get("content") {
        None | Some(Value::Null) => &[][..],
        Some(Value::Array(b)) => &b[..],
        Some(_) => return Err(invalid("content is not an array", &value)),
    };
    let mut text = String::new();
    let mut calls = Vec::new();
    for (k, b) in blocks.iter().enumerate() {
        match b.get("type").and_then(Value::as_str) {
            Some("text") => {
                if let Some(t) = b.get("text").and_then(Value::as_str) {
                    text.push_str(t);
                }
            }
            Some("tool_use") => match tool_use(b) {
                Some(c) => calls.push(c),
                None => return Err(invalid(&format!("content[{k}] is malformed"), &value)),
            },
            _ => {} // thinking, redacted_thinking, server tools: below
        }
    }
    let keep_blocks = blocks.iter().any(|b| {
        !matches!(
            b.get("type").and_then(Value::as_str),
            Some("text" | "tool_use")
        )
    });
    let mut m = if keep_blocks {
        ConversationMessage::json(Role::Assistant, Value::Array(blocks.to_vec()))
    } else {
        ConversationMessage::assistant(text)
    };
    m.tool_calls = calls;
    m.provider_message_id = text_of(o.get("id"));
    let mut response_metadata = Metadata::new();
    for key in ["stop_reason", "stop_sequence", "model"] {
        if let Some(v) = o.get(key).filter(|v| !v.is_null()) {
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

/// A `tool_use` block as a call, if well-formed.
fn tool_use(b: &Value) -> Option<ToolCallRecord> {
    let name = b.get("name")?.as_str()?;
    let arguments = match b.get("input") {
        None | Some(Value::Null) => "{}".to_owned(),
        // A streamed input that was not valid JSON, kept as it came.
        Some(Value::String(s)) => s.clone(),
        Some(v) => v.to_string(),
    };
    let id = match b.get("id") {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        None | Some(Value::Null) | Some(Value::String(_)) => {
            format!("toolu_{}", Uuid::now_v7().simple())
        }
        Some(_) => return None,
    };
    Some(ToolCallRecord::new(id.as_str(), name, arguments))
}

/// A Messages API usage object.
fn usage(u: &Map<String, Value>) -> TokenUsage {
    let breakdown = u
        .iter()
        .filter(|(k, v)| {
            !v.is_null()
                && !matches!(
                    k.as_str(),
                    "input_tokens"
                        | "output_tokens"
                        | "cache_read_input_tokens"
                        | "cache_creation_input_tokens"
                )
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    TokenUsage {
        input_tokens: count(u.get("input_tokens")),
        output_tokens: count(u.get("output_tokens")),
        cache_read_tokens: count(u.get("cache_read_input_tokens")),
        cache_write_tokens: count(u.get("cache_creation_input_tokens")),
        total_tokens: None,
        breakdown,
    }
}

/// The message and type of an Anthropic error body:
/// `{"type": "error", "error": {"type", "message"}}`.
fn error_fields(v: &Value) -> (Option<String>, Option<String>) {
    match v.get("error") {
        Some(e @ Value::Object(_)) => (text_of(e.get("message")), text_of(e.get("type"))),
        Some(Value::String(s)) => (Some(s.clone()), None),
        _ => (text_of(v.get("message")), None),
    }
}

/// The error of a failed Messages API call: category from `status`
/// (`auth` for 401 and 403, `rate_limit` for 429, `server` for 5xx, 529
/// included, else `client`), message and code (the error's `type`, such as
/// `"rate_limit_error"`) from the body, the body as `raw` (JSON, or a JSON
/// string when it is not JSON). The request id is the caller's to set.
pub fn parse_anthropic_error(status: u16, body: &[u8]) -> ProviderError {
    http_error(status, body, error_fields)
}

/// An error sent with a success status: a body or a stream event of type
/// `error`.
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
