//! Ollama `/api/chat` requests: `{"model", "messages": [{"role", "content",
//! "images"?, "thinking"?, "tool_calls"?: [{"function": {"name",
//! "arguments": {...}}}], "tool_name"?}], ...}`.
//!
//! Ollama's tool calls carry no id. Each call gets one derived from its
//! place, `ollama-M-N` (message M, call N), and the session records that
//! they were derived: the label `ids=derived-by-position` on import, and
//! the payload keeps the message as Ollama sent it, so an export to Ollama
//! gives it back without them. A `tool` message answers the first
//! unanswered call of the last assistant message with its `tool_name`, or
//! the first unanswered one when it names none.

use std::borrow::Borrow;

use serde_json::{Map, Value, json};

use super::history::{Res, Turn};
use super::read::{imported, kind};
use super::window::Window;
use crate::error::{Error, Result};
use crate::model::INTERRUPTED_RESULT;
use crate::model::{EvaluationId, InnerMessage, Role, ToolCallRecord, ToolStatus};

/// The tag of an Ollama payload.
pub(crate) const OLLAMA: &str = "ollama";

fn invalid(s: impl Into<String>) -> Error {
    Error::InvalidInput(s.into())
}

fn message_of(m: &InnerMessage) -> Option<Map<String, Value>> {
    super::payload::tagged_message(m, OLLAMA)
}

const EXPECTED: &str =
    "expected a request object with a \"messages\" array or an array of messages";

/// Reads an Ollama chat request (or its `messages` array).
///
/// The elements of its list (`items`) come one at a time: the whole
/// request's, or (`provider/stream.rs`) read from a file, `skeleton` then
/// being the request without them. Each message is handed on to `out` once
/// no later element can change it.
///
/// # Errors
/// [`Error::InvalidInput`] naming the message: not an object, a missing or
/// unknown role, content that is not a string, a malformed tool call, or a
/// `tool` message that answers no call.
pub(crate) fn from_parts<V: Borrow<Value>>(
    skeleton: &Value,
    items: impl IntoIterator<Item = Result<V>>,
    evaluation_id: EvaluationId,
    prompt_ns: &str,
    prompt_key: &str,
    out: &mut Window<'_>,
) -> Result<()> {
    super::read::message_list(skeleton, EXPECTED)?;
    let new =
        |role, content, seq| imported(role, content, evaluation_id, seq, prompt_ns, prompt_key);
    // The last assistant message with calls: its index.
    let mut open: Option<usize> = None;
    let mut turn = 0u32;
    for (i, m) in items.into_iter().enumerate() {
        out.settle()?;
        let m = m?;
        let m = m.borrow();
        let path = format!("messages[{i}]");
        let o = m
            .as_object()
            .ok_or_else(|| invalid(format!("{path}: expected an object, found {}", kind(m))))?;
        let role = o
            .get("role")
            .and_then(Value::as_str)
            .ok_or_else(|| invalid(format!("{path}: no \"role\"")))?;
        let content = match o.get("content") {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(s)) => s.clone(),
            Some(other) => {
                return Err(invalid(format!(
                    "{path}.content: expected a string, found {}",
                    kind(other)
                )));
            }
        };
        let payload = Some(super::payload::tag(OLLAMA, "message", m));
        match role {
            "system" | "user" => {
                let r = if role == "system" {
                    Role::System
                } else {
                    Role::User
                };
                let mut msg = new(r, content, out.len());
                msg.turn = turn;
                msg.provider_payload = payload;
                out.push(msg);
            }
            "assistant" => {
                turn += 1;
                let mut calls = Vec::new();
                if let Some(list) = o.get("tool_calls") {
                    let list = list
                        .as_array()
                        .ok_or_else(|| invalid(format!("{path}.tool_calls: expected an array")))?;
                    for (n, c) in list.iter().enumerate() {
                        let f = c
                            .get("function")
                            .and_then(Value::as_object)
                            .ok_or_else(|| {
                                invalid(format!("{path}.tool_calls[{n}]: no \"function\" object"))
                            })?;
                        let name = f.get("name").and_then(Value::as_str).ok_or_else(|| {
                            invalid(format!("{path}.tool_calls[{n}].function: no \"name\""))
                        })?;
                        let args = match f.get("arguments") {
                            Some(Value::String(s)) => s.clone(),
                            Some(v) => v.to_string(),
                            None => "{}".into(),
                        };
                        calls.push(ToolCallRecord::new(format!("ollama-{i}-{n}"), name, args));
                    }
                }
                let mut msg = new(Role::Assistant, content, out.len());
                msg.turn = turn;
                msg.tool_calls = calls;
                msg.provider_payload = payload;
                open = (!msg.tool_calls.is_empty()).then_some(out.len());
                out.push(msg);
            }
            "tool" => {
                let name = o
                    .get("tool_name")
                    .or_else(|| o.get("name"))
                    .and_then(Value::as_str);
                let at = open.ok_or_else(|| {
                    invalid(format!("{path}: a tool result with no earlier tool call"))
                })?;
                let answered: Vec<String> = out
                    .from(at + 1)
                    .filter_map(|m| m.tool_call_id.as_ref().map(|c| c.as_str().to_owned()))
                    .collect();
                // (Written already: every call of it was answered.)
                let call = out
                    .at_mut(at)
                    .ok()
                    .and_then(|m| {
                        m.tool_calls
                            .iter_mut()
                            .filter(|c| !answered.iter().any(|a| a == c.call_id.as_str()))
                            .find(|c| name.is_none_or(|n| n == c.name))
                    })
                    .ok_or_else(|| {
                        invalid(format!(
                            "{path}: a tool result{} that answers no call of the last assistant message",
                            name.map(|n| format!(" for {n:?}")).unwrap_or_default()
                        ))
                    })?;
                call.status = ToolStatus::Completed;
                let (id, tool) = (call.call_id.clone(), call.name.clone());
                let mut msg = new(Role::Tool, content, out.len());
                msg.turn = turn;
                msg.tool_call_id = Some(id);
                msg.tool_name = Some(tool);
                msg.provider_payload = payload;
                out.push(msg);
            }
            other => return Err(invalid(format!("{path}: unknown role {other:?}"))),
        }
    }
    out.settle()
}

fn plain(m: &InnerMessage) -> Value {
    if let Some(p) = message_of(m)
        && p.get("role").and_then(Value::as_str) == Some(m.role.as_str())
    {
        return Value::Object(p);
    }
    json!({"role": m.role.as_provider_str(), "content": m.content})
}

fn assistant(t: &Turn<'_>) -> Value {
    if t.complete
        && let Some(p) = message_of(t.msg)
    {
        let n = p
            .get("tool_calls")
            .and_then(Value::as_array)
            .map_or(0, Vec::len);
        if p.get("role").and_then(Value::as_str) == Some("assistant") && n == t.calls.len() {
            return Value::Object(p);
        }
    }
    let mut o = Map::new();
    o.insert("role".into(), json!("assistant"));
    o.insert("content".into(), json!(t.msg.content));
    if !t.calls.is_empty() {
        let calls: Vec<Value> = t
            .calls
            .iter()
            .map(|c| {
                let args = serde_json::from_str::<Value>(&c.arguments)
                    .unwrap_or_else(|_| Value::String(c.arguments.clone()));
                json!({"function": {"name": c.name, "arguments": args}})
            })
            .collect();
        o.insert("tool_calls".into(), Value::Array(calls));
    }
    Value::Object(o)
}

fn result(r: &Res<'_>) -> Value {
    match r {
        Res::Real { msg, call } => {
            if let Some(p) = message_of(msg)
                && p.get("role").and_then(Value::as_str) == Some("tool")
            {
                return Value::Object(p);
            }
            json!({"role": "tool", "content": msg.content, "tool_name": call.name})
        }
        Res::Synthetic(call) => {
            json!({"role": "tool", "content": INTERRUPTED_RESULT, "tool_name": call.name})
        }
    }
}

/// The messages as an Ollama `messages` array, every call answered once;
/// messages imported from Ollama give back what Ollama sent.
pub(crate) fn to_messages(messages: &[InnerMessage]) -> Vec<Value> {
    super::history::render_plan(messages, plain, assistant, result)
}
