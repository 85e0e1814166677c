//! OpenAI chat-completions messages.
//!
//! `{"role": "system" | "developer" | "user", "content": ...}`,
//! `{"role": "assistant", "content": ..., "tool_calls": [{"id", "type":
//! "function", "function": {"name", "arguments"}}]}` and
//! `{"role": "tool", "tool_call_id", "content"}`. A `developer` message is a
//! [`Role::System`] message.

use std::borrow::Borrow;
use std::collections::HashMap;

use serde_json::{Map, Value, json};

use super::history::{Res, Turn};
use super::payload::{OPENAI, tagged_message};
use super::read::{imported, kind, message_list};
use super::read::{openai_role, openai_tool_call_id, openai_tool_calls};
use super::window::Window;
use crate::error::{Error, Result};
use crate::model::INTERRUPTED_RESULT;
use crate::model::{CallId, EvaluationId, InnerMessage, Role, ToolCallRecord, ToolStatus};

/// What starts the text of a tool result that failed, in a format without
/// an error flag, when its original had one.
pub const ERROR_MARK: &str = "[error] ";

/// The `provider_payload` for a message received from OpenAI:
/// `{"provider": "openai", "message": <message>}` as JSON text.
pub fn payload(message: &Value) -> String {
    super::payload::tag(OPENAI, "message", message)
}

/// The messages as a chat-completions message list, always a valid history
/// (see [the resume rule](super#the-resume-rule-every-rebuilt-history-is-valid)).
///
/// A message whose payload was captured from OpenAI is emitted as that
/// payload; the others are built from their neutral fields.
pub(crate) fn to_messages(messages: &[InnerMessage]) -> Vec<Value> {
    super::history::render_plan(messages, plain, assistant, result)
}

/// A system or user message.
fn plain(m: &InnerMessage) -> Value {
    if let Some(p) = tagged_message(m, OPENAI) {
        let role = p.get("role").and_then(Value::as_str);
        let agrees = match m.role {
            Role::System => matches!(role, Some("system" | "developer")),
            Role::User => role == Some("user"),
            _ => false,
        };
        if agrees {
            return Value::Object(p);
        }
    }
    // Images and documents of an Anthropic original, as content parts.
    let media = super::media::anthropic_media_as_openai(m);
    if m.role == Role::User && !media.is_empty() {
        let mut parts = Vec::with_capacity(media.len() + 1);
        if !m.content.is_empty() {
            parts.push(json!({"type": "text", "text": m.content}));
        }
        parts.extend(media);
        return json!({"role": "user", "content": parts});
    }
    json!({"role": m.role.as_provider_str(), "content": m.content})
}

fn assistant(t: &Turn<'_>) -> Value {
    if t.complete {
        if let Some(p) = tagged_message(t.msg, OPENAI) {
            let agrees = p.get("role").and_then(Value::as_str) == Some("assistant")
                && openai_tool_calls(&p, "").is_ok_and(|calls| {
                    calls.len() == t.calls.len()
                        && calls
                            .iter()
                            .zip(&t.calls)
                            .all(|(a, b)| a.id == b.call_id.as_str())
                });
            if agrees {
                return Value::Object(p);
            }
        }
    }
    let mut o = Map::new();
    o.insert("role".to_owned(), json!("assistant"));
    let content = if t.msg.content.is_empty() && !t.calls.is_empty() {
        Value::Null
    } else {
        Value::String(t.msg.content.clone())
    };
    o.insert("content".to_owned(), content);
    if !t.calls.is_empty() {
        let calls = t
            .calls
            .iter()
            .map(|c| {
                json!({
                    "id": c.call_id.as_str(),
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                })
            })
            .collect();
        o.insert("tool_calls".to_owned(), Value::Array(calls));
    }
    Value::Object(o)
}

fn result(r: &Res<'_>) -> Value {
    match r {
        Res::Real { msg, call } => {
            if let Some(p) = tagged_message(msg, OPENAI) {
                let agrees = p.get("role").and_then(Value::as_str) == Some("tool")
                    && p.get("tool_call_id").and_then(Value::as_str) == Some(call.call_id.as_str());
                if agrees {
                    return Value::Object(p);
                }
            }
            // Chat completions has no error flag: a failed result that
            // carried one (an Anthropic `is_error`) says so in its text.
            let from_anthropic = super::payload::tagged(msg, super::payload::ANTHROPIC).is_some();
            let content = if from_anthropic && call.status == ToolStatus::Failed {
                format!("{ERROR_MARK}{}", msg.content)
            } else {
                msg.content.clone()
            };
            json!({"role": "tool", "tool_call_id": call.call_id.as_str(), "content": content})
        }
        Res::Synthetic(call) => json!({
            "role": "tool",
            "tool_call_id": call.call_id.as_str(),
            "content": INTERRUPTED_RESULT,
        }),
    }
}

fn invalid(reason: String) -> Error {
    Error::InvalidInput(reason)
}

/// Where a call was made, while importing.
struct Made {
    /// Index of the assistant message in the output, and of the call in it.
    out: usize,
    pos: usize,
    /// Index of the assistant message in the input.
    at: usize,
    turn: u32,
    /// Index of its result in the input, once seen.
    result: Option<usize>,
}

const EXPECTED: &str = "expected an array of messages or an object with a \"messages\" array";

/// Imports a chat-completions message list: a JSON array of messages, or a
/// request body with a `"messages"` array.
///
/// Messages are numbered `sequence` 0.. in order. An assistant message
/// starts a new turn (the first is turn 1); a tool result carries the turn of
/// the assistant message that made its call; other messages carry the
/// current turn (0 before the first assistant message). Every message keeps
/// the original in its payload ([`payload`]). Content given as an array of
/// parts is flattened to its text (text parts joined by a newline; for an
/// assistant, text and refusal parts concatenated); an assistant message with
/// null content and a `refusal` has the refusal as its content. A call's
/// status is `Completed` when a result for it follows, else `Pending`.
///
/// The elements of its list (`items`) come one at a time: the whole
/// request's, or (`provider/stream.rs`) read from a file, `skeleton` then
/// being the request without them. Each message is handed on to `out` once
/// no later element can change it.
///
/// # Errors
/// [`Error::InvalidInput`] naming the message (`messages[3]: tool result for
/// unknown call "call_9"`): not an array or request object, a message that
/// is not an object, a missing or invalid role, content of a wrong type, a
/// malformed tool call (arguments not a string, ...), a call id used twice,
/// a tool message without `tool_call_id`, for a call no earlier assistant
/// message made, or a second result for a call.
pub(crate) fn from_parts<V: Borrow<Value>>(
    skeleton: &Value,
    items: impl IntoIterator<Item = Result<V>>,
    evaluation_id: EvaluationId,
    prompt_ns: &str,
    prompt_key: &str,
    out: &mut Window<'_>,
) -> Result<()> {
    message_list(skeleton, EXPECTED)?;
    let mut made: HashMap<String, Made> = HashMap::new();
    let mut turn = 0u32;
    for (i, m) in items.into_iter().enumerate() {
        let m = m?;
        let m = m.borrow();
        let path = format!("messages[{i}]");
        let obj = m
            .as_object()
            .ok_or_else(|| invalid(format!("{path}: expected an object, found {}", kind(m))))?;
        let role = match openai_role(obj, &path).map_err(invalid)? {
            "system" | "developer" => Role::System,
            "user" => Role::User,
            "assistant" => Role::Assistant,
            _ => Role::Tool,
        };
        let content = content_text(obj, role, &path)?;
        let mut msg = imported(role, content, evaluation_id, i, prompt_ns, prompt_key);
        msg.provider_payload = Some(payload(m));
        match role {
            Role::Assistant => {
                turn += 1;
                msg.turn = turn;
                for (pos, c) in openai_tool_calls(obj, &path)
                    .map_err(invalid)?
                    .into_iter()
                    .enumerate()
                {
                    if let Some(first) = made.get(c.id) {
                        return Err(invalid(format!(
                            "{path}.tool_calls[{pos}]: duplicate tool call id \"{}\" (already used by messages[{}])",
                            c.id, first.at
                        )));
                    }
                    made.insert(
                        c.id.to_owned(),
                        Made {
                            out: out.len(),
                            pos,
                            at: i,
                            turn,
                            result: None,
                        },
                    );
                    msg.tool_calls
                        .push(ToolCallRecord::new(c.id, c.name, c.arguments));
                }
            }
            Role::Tool => {
                let id = openai_tool_call_id(obj, &path).map_err(invalid)?;
                let call = made.get_mut(id).ok_or_else(|| {
                    invalid(format!("{path}: tool result for unknown call \"{id}\""))
                })?;
                if let Some(first) = call.result {
                    return Err(invalid(format!(
                        "{path}: second result for call \"{id}\" (the first is messages[{first}])"
                    )));
                }
                call.result = Some(i);
                let record = &mut out.at_mut(call.out)?.tool_calls[call.pos];
                record.status = ToolStatus::Completed;
                msg.tool_name = Some(record.name.clone());
                msg.tool_call_id = Some(CallId::from(id));
                msg.turn = call.turn;
            }
            Role::System | Role::User | Role::Other => msg.turn = turn,
        }
        out.push(msg);
        out.settle()?;
    }
    Ok(())
}

/// The text of a message's content.
fn content_text(obj: &Map<String, Value>, role: Role, path: &str) -> Result<String> {
    let assistant = role == Role::Assistant;
    match obj.get("content") {
        Some(Value::String(s)) => Ok(s.clone()),
        None | Some(Value::Null) if assistant => Ok(obj
            .get("refusal")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()),
        None | Some(Value::Null) => Err(invalid(format!(
            "{path}: a {role} message needs \"content\""
        ))),
        Some(Value::Array(parts)) => {
            let mut texts = Vec::with_capacity(parts.len());
            for (j, part) in parts.iter().enumerate() {
                let p = format!("{path}.content[{j}]");
                let part = part.as_object().ok_or_else(|| {
                    invalid(format!(
                        "{p}: expected a content part object, found {}",
                        kind(part)
                    ))
                })?;
                let ty = part
                    .get("type")
                    .and_then(Value::as_str)
                    .ok_or_else(|| invalid(format!("{p}: missing \"type\"")))?;
                let key = match ty {
                    "text" => "text",
                    "refusal" => "refusal",
                    _ => continue, // images, audio, files: kept in the payload
                };
                match part.get(key) {
                    Some(Value::String(s)) => texts.push(s.as_str()),
                    _ => {
                        return Err(invalid(format!(
                            "{p}: a {ty} part needs a string \"{key}\""
                        )));
                    }
                }
            }
            Ok(texts.join(if assistant { "" } else { "\n" }))
        }
        Some(other) => Err(invalid(format!(
            "{path}: \"content\" must be a string or an array of content parts{}, found {}",
            if assistant { " or null" } else { "" },
            kind(other)
        ))),
    }
}
