//! Reading a chat-completions response: a whole body, an error body, and
//! an error sent with a success status (shared with the stream's parser).

use serde_json::{Map, Value};
use uuid::Uuid;

use super::transport::{bad_body, count, http_error, parse_error, text_of, type_category};
use crate::engine::conversation::adapter::{ProviderChatResult, ProviderError};
use crate::event::TokenUsage;
use crate::event::conversation::{ConversationMessage, Metadata};
use crate::model::ToolCallRecord;

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
fn usage(u: &Map<String, Value>) -> TokenUsage {
    let details = u.get("prompt_tokens_details");
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
    TokenUsage {
        input_tokens: count(u.get("prompt_tokens")),
        output_tokens: count(u.get("completion_tokens")),
        cache_read_tokens: count(details.and_then(|d| d.get("cached_tokens"))),
        cache_write_tokens: 0,
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
