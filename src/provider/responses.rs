//! OpenAI Responses API `input` items.
//!
//! `{"type": "message", "role", "content"}` (or the short `{"role",
//! "content"}`), `function_call` (`call_id`, `name`, `arguments`),
//! `function_call_output` (`call_id`, `output`), `reasoning` (its summary and
//! `encrypted_content` kept), `custom_tool_call` (`call_id`, `name`,
//! `input`) and `custom_tool_call_output`; the server-side tool items
//! (`web_search_call`, `file_search_call`, `computer_call`,
//! `code_interpreter_call`, `image_generation_call`, `local_shell_call`,
//! `mcp_call`, `mcp_list_tools`, `mcp_approval_request`, ...) are kept as
//! they are. An item of any other type (`apply_patch_call`,
//! `tool_search_call`, whatever the API adds next) is an [opaque
//! item](super::opaque): kept verbatim with the assistant's items around it,
//! given back by an export to this format, dropped by an export to another
//! (refused by a `strict` import).
//!
//! The assistant's items between two inputs (reasoning, its message, its
//! calls, server-side items) are one [`Role::Assistant`] message whose
//! payload keeps them in order, so that an export to this format gives the
//! same items back; each output is a [`Role::Tool`] message.

use std::borrow::Borrow;
use std::collections::HashMap;

use serde_json::{Map, Value, json};

use super::history::{Res, Turn, plan};
use super::read::{imported, kind};
use super::window::Window;
use crate::error::{Error, Result};
use crate::model::INTERRUPTED_RESULT;
use crate::model::{EvaluationId, InnerMessage, Role, ToolCallRecord, ToolStatus};

/// The tag of a Responses payload.
pub(crate) const RESPONSES: &str = "openai-responses";

fn invalid(s: impl Into<String>) -> Error {
    Error::InvalidInput(s.into())
}

/// `{"provider": "openai-responses", "items": [...]}` as JSON text.
fn payload(items: Vec<Value>) -> String {
    super::payload::tag(RESPONSES, "items", &Value::Array(items))
}

/// The items in `m`'s payload, if it came from this format.
fn items_of(m: &InnerMessage) -> Option<Vec<Value>> {
    let v: Value = serde_json::from_str(m.provider_payload.as_deref()?).ok()?;
    if v.get("provider").and_then(Value::as_str) != Some(RESPONSES) {
        return None;
    }
    v.get("items").and_then(Value::as_array).cloned()
}

/// The text of a message's `content`: a string, or its text parts.
fn text_of(content: Option<&Value>, joiner: &str) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(joiner),
        _ => String::new(),
    }
}

fn field<'a>(o: &'a Map<String, Value>, key: &str, path: &str) -> Result<&'a str> {
    o.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| invalid(format!("{path}: no string \"{key}\"")))
}

/// The `input` of a request (the value itself if it is not an object).
fn input_of(value: &Value) -> Result<&Value> {
    match value {
        Value::Object(o) => o
            .get("input")
            .ok_or_else(|| invalid("expected an array of input items or a request with \"input\"")),
        other => Ok(other),
    }
}

/// Reads Responses `input` items (an array, a request body holding
/// `input`, or an input string: one user message). Calls are `Completed`
/// when an output follows, else `Pending`.
///
/// The elements of its list (`items`) come one at a time: the whole
/// request's, or (`provider/stream.rs`) read from a file, `skeleton` then
/// being the request without them. Each message is handed on to `out` once
/// no later element can change it.
///
/// # Errors
/// [`Error::InvalidInput`] naming the item: not an object, no type, an
/// unknown role, a call without `call_id`, `name` or `arguments`, a `call_id`
/// used twice, an output for no earlier call, or a second output for one.
pub(crate) fn from_parts<V: Borrow<Value>>(
    skeleton: &Value,
    items: impl IntoIterator<Item = Result<V>>,
    evaluation_id: EvaluationId,
    prompt_ns: &str,
    prompt_key: &str,
    out: &mut Window<'_>,
) -> Result<()> {
    let new =
        |role, content, seq| imported(role, content, evaluation_id, seq, prompt_ns, prompt_key);
    match input_of(skeleton)? {
        Value::String(s) => {
            let item = json!({"role": "user", "content": s});
            let mut m = new(Role::User, s.clone(), 0);
            m.provider_payload = Some(payload(vec![item]));
            out.push(m);
            return Ok(());
        }
        Value::Array(_) => {}
        other => {
            return Err(invalid(format!(
                "expected input items, found {}",
                kind(other)
            )));
        }
    }
    let mut group: Vec<Value> = Vec::new();
    let mut texts: Vec<String> = Vec::new();
    let mut calls: Vec<ToolCallRecord> = Vec::new();
    // call id -> (message index, position, answered)
    let mut made: HashMap<String, (usize, usize, bool, String)> = HashMap::new();
    let mut turn = 0u32;
    let flush = |out: &mut Window<'_>,
                 group: &mut Vec<Value>,
                 texts: &mut Vec<String>,
                 calls: &mut Vec<ToolCallRecord>,
                 turn: &mut u32| {
        if group.is_empty() {
            return;
        }
        *turn += 1;
        let mut m = new(Role::Assistant, texts.concat(), out.len());
        m.turn = *turn;
        m.tool_calls = std::mem::take(calls);
        m.provider_payload = Some(payload(std::mem::take(group)));
        texts.clear();
        out.push(m);
    };
    for (i, item) in items.into_iter().enumerate() {
        out.settle()?;
        let item = item?;
        let item = item.borrow();
        let path = format!("input[{i}]");
        let o = item
            .as_object()
            .ok_or_else(|| invalid(format!("{path}: expected an object, found {}", kind(item))))?;
        let ty = match o.get("type").and_then(Value::as_str) {
            Some(t) => t,
            None if o.contains_key("role") => "message",
            None => return Err(invalid(format!("{path}: no \"type\""))),
        };
        match ty {
            "message" => {
                let role = field(o, "role", &path)?;
                if role == "assistant" {
                    texts.push(text_of(o.get("content"), ""));
                    group.push(item.clone());
                    continue;
                }
                let role = match role {
                    "user" => Role::User,
                    "system" | "developer" => Role::System,
                    other => return Err(invalid(format!("{path}: unknown role {other:?}"))),
                };
                flush(out, &mut group, &mut texts, &mut calls, &mut turn);
                let mut m = new(role, text_of(o.get("content"), "\n"), out.len());
                m.turn = turn;
                m.provider_payload = Some(payload(vec![item.clone()]));
                out.push(m);
            }
            "function_call" | "custom_tool_call" => {
                let id = field(o, "call_id", &path)?;
                let name = field(o, "name", &path)?;
                let args = field(
                    o,
                    if ty == "function_call" {
                        "arguments"
                    } else {
                        "input"
                    },
                    &path,
                )?;
                if made.contains_key(id) {
                    return Err(invalid(format!("{path}: duplicate call_id {id:?}")));
                }
                made.insert(
                    id.to_owned(),
                    (out.len(), calls.len(), false, name.to_owned()),
                );
                calls.push(ToolCallRecord::new(id, name, args));
                group.push(item.clone());
            }
            "reasoning" => group.push(item.clone()),
            "function_call_output" | "custom_tool_call_output" => {
                flush(out, &mut group, &mut texts, &mut calls, &mut turn);
                let id = field(o, "call_id", &path)?;
                let Some((at, pos, answered, name)) = made.get_mut(id) else {
                    return Err(invalid(format!(
                        "{path}: {ty} for call_id {id:?}, which no earlier call made"
                    )));
                };
                if *answered {
                    return Err(invalid(format!(
                        "{path}: a second output for call_id {id:?}"
                    )));
                }
                *answered = true;
                out.at_mut(*at)?.tool_calls[*pos].status = ToolStatus::Completed;
                let mut m = new(Role::Tool, text_of(o.get("output"), ""), out.len());
                m.turn = turn;
                m.tool_call_id = Some(id.into());
                m.tool_name = Some(name.clone());
                m.provider_payload = Some(payload(vec![item.clone()]));
                out.push(m);
            }
            // Server-side items, and opaque ones: the assistant's, kept.
            _ => group.push(item.clone()),
        }
    }
    flush(out, &mut group, &mut texts, &mut calls, &mut turn);
    out.settle()
}

/// The calls among `items` (`function_call`, `custom_tool_call`), by id.
fn call_ids(items: &[Value]) -> Vec<&str> {
    items
        .iter()
        .filter(|i| {
            matches!(
                i.get("type").and_then(Value::as_str),
                Some("function_call" | "custom_tool_call")
            )
        })
        .filter_map(|i| i.get("call_id").and_then(Value::as_str))
        .collect()
}

/// A system or user message as an item.
fn plain(m: &InnerMessage) -> Value {
    if let Some(items) = items_of(m)
        && let [item] = items.as_slice()
    {
        let role = item.get("role").and_then(Value::as_str);
        let agrees = match m.role {
            Role::System => matches!(role, Some("system" | "developer")),
            Role::User => role == Some("user"),
            _ => false,
        };
        if agrees {
            return item.clone();
        }
    }
    json!({"type": "message", "role": m.role.as_provider_str(), "content": m.content})
}

fn assistant(t: &Turn<'_>, out: &mut Vec<Value>) {
    if t.complete
        && let Some(items) = items_of(t.msg)
    {
        let ids = call_ids(&items);
        let same = ids.len() == t.calls.len()
            && ids
                .iter()
                .zip(&t.calls)
                .all(|(a, b)| *a == b.call_id.as_str());
        if same {
            out.extend(items);
            return;
        }
    }
    if !t.msg.content.is_empty() {
        out.push(json!({"type": "message", "role": "assistant",
            "content": [{"type": "output_text", "text": t.msg.content, "annotations": []}]}));
    }
    for c in &t.calls {
        out.push(
            json!({"type": "function_call", "call_id": c.call_id.as_str(),
            "name": c.name, "arguments": c.arguments}),
        );
    }
}

fn result(r: &Res<'_>) -> Value {
    match r {
        Res::Real { msg, call } => {
            if let Some(items) = items_of(msg)
                && let [item] = items.as_slice()
                && item.get("call_id").and_then(Value::as_str) == Some(call.call_id.as_str())
            {
                return item.clone();
            }
            json!({"type": "function_call_output", "call_id": call.call_id.as_str(), "output": msg.content})
        }
        Res::Synthetic(call) => json!({"type": "function_call_output",
            "call_id": call.call_id.as_str(), "output": INTERRUPTED_RESULT}),
    }
}

/// The messages as Responses `input` items, every call answered once (an
/// unfinished one gets [`INTERRUPTED_RESULT`]); messages imported from this
/// format give back their items.
pub(crate) fn to_input(messages: &[InnerMessage]) -> Vec<Value> {
    let plan = plan(messages);
    let mut out = Vec::with_capacity(messages.len());
    out.extend(plan.head.iter().map(|m| plain(m)));
    for t in &plan.turns {
        assistant(t, &mut out);
        out.extend(t.results.iter().map(result));
        out.extend(t.after.iter().map(|m| plain(m)));
    }
    out
}
