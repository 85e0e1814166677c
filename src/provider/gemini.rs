//! Gemini `generateContent` requests: `{"systemInstruction": {"parts":
//! [...]}, "contents": [{"role": "user" | "model", "parts": [{"text"},
//! {"inlineData": {"mimeType", "data"}}, {"functionCall": {"id"?, "name",
//! "args"}}, {"functionResponse": {"id"?, "name", "response"}}]}], ...}`.
//!
//! A `user` content of `functionResponse` parts answers calls: by `id` when
//! it has one, else the first unanswered call of that name in the last
//! `model` content. A call without
//! an `id` gets one derived from its place, `gemini-M-N` (content M, part
//! N), and the session is labelled `tool_call_ids=derived-by-position`. Each
//! message keeps its content as Gemini sent it, so an export to Gemini gives
//! it back (other parts, `thoughtSignature`s and unknown fields included).

use std::borrow::Borrow;

use serde_json::{Map, Value, json};

use super::history::{Res, Turn, plan};
use super::read::{imported, kind};
use super::window::Window;
use crate::error::{Error, Result};
use crate::model::INTERRUPTED_RESULT;
use crate::model::{EvaluationId, InnerMessage, Role, ToolCallRecord, ToolStatus};

/// The tag of a Gemini payload.
pub(crate) const GEMINI: &str = "gemini";

fn invalid(s: impl Into<String>) -> Error {
    Error::InvalidInput(s.into())
}

fn texts(parts: &[Value]) -> String {
    parts
        .iter()
        .filter(|p| !p.get("thought").and_then(Value::as_bool).unwrap_or(false))
        .filter_map(|p| p.get("text").and_then(Value::as_str))
        .collect::<Vec<_>>()
        .concat()
}

/// The contents of a request (or the array it is).
fn shape(value: &Value) -> Result<&Vec<Value>> {
    Ok(match value {
        Value::Object(o) => o
            .get("contents")
            .and_then(Value::as_array)
            .ok_or_else(|| invalid("expected a request with a \"contents\" array"))?,
        Value::Array(a) => a,
        other => {
            return Err(invalid(format!(
                "expected a request object, found {}",
                kind(other)
            )));
        }
    })
}

/// Reads a Gemini `generateContent` request (or its `contents` array).
///
/// The elements of its list (`items`) come one at a time: the whole
/// request's, or (`provider/stream.rs`) read from a file, `skeleton` then
/// being the request without them. Each message is handed on to `out` once
/// no later element can change it.
///
/// # Errors
/// [`Error::InvalidInput`] naming the content and part: not an object, an
/// unknown role, `parts` not an array, a `functionCall` without a name, a
/// call id used twice, or a `functionResponse` that answers no call.
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
    shape(skeleton)?;
    let request = skeleton.as_object();
    if let Some(sys) = request.and_then(|o| {
        o.get("systemInstruction")
            .or_else(|| o.get("system_instruction"))
    }) {
        let parts = sys
            .get("parts")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let mut m = new(Role::System, texts(&parts), 0);
        m.provider_payload = Some(super::payload::tag(GEMINI, "system", sys));
        out.push(m);
    }
    // (message index, call index, answered), and every id given.
    let mut calls_made: Vec<(usize, usize, bool)> = Vec::new();
    let mut ids: std::collections::HashSet<String> = std::collections::HashSet::new();
    // The last model content: responses without an id answer its calls.
    let mut last_model: Option<usize> = None;
    let mut turn = 0u32;
    for (i, c) in items.into_iter().enumerate() {
        out.settle()?;
        let c = c?;
        let c = c.borrow();
        let path = format!("contents[{i}]");
        let o = c
            .as_object()
            .ok_or_else(|| invalid(format!("{path}: expected an object, found {}", kind(c))))?;
        let role = o.get("role").and_then(Value::as_str).unwrap_or("user");
        let parts = o
            .get("parts")
            .and_then(Value::as_array)
            .ok_or_else(|| invalid(format!("{path}: \"parts\" must be an array")))?;
        let payload = Some(super::payload::tag(GEMINI, "message", c));
        match role {
            "model" => {
                turn += 1;
                let mut calls = Vec::new();
                for (n, p) in parts.iter().enumerate() {
                    let Some(f) = p.get("functionCall") else {
                        continue;
                    };
                    let name = f.get("name").and_then(Value::as_str).ok_or_else(|| {
                        invalid(format!("{path}.parts[{n}].functionCall: no \"name\""))
                    })?;
                    let id = match f.get("id").and_then(Value::as_str) {
                        Some(id) => id.to_owned(),
                        None => format!("gemini-{i}-{n}"),
                    };
                    if !ids.insert(id.clone()) {
                        return Err(invalid(format!(
                            "{path}.parts[{n}]: call id {id:?} used twice"
                        )));
                    }
                    let args = f.get("args").cloned().unwrap_or_else(|| json!({}));
                    calls_made.push((out.len(), calls.len(), false));
                    calls.push(ToolCallRecord::new(id, name, args.to_string()));
                }
                let mut m = new(Role::Assistant, texts(parts), out.len());
                m.turn = turn;
                m.tool_calls = calls;
                m.provider_payload = payload;
                last_model = Some(out.len());
                out.push(m);
            }
            "user" | "function" => {
                let responses: Vec<(usize, &Value)> = parts
                    .iter()
                    .enumerate()
                    .filter_map(|(n, p)| p.get("functionResponse").map(|f| (n, f)))
                    .collect();
                if responses.is_empty() {
                    let mut m = new(Role::User, texts(parts), out.len());
                    m.turn = turn;
                    m.provider_payload = payload;
                    out.push(m);
                    continue;
                }
                let first = out.len();
                for (n, f) in responses {
                    let id = f.get("id").and_then(Value::as_str);
                    let name = f.get("name").and_then(Value::as_str);
                    let slot = calls_made.iter_mut().find(|(m, k, answered)| {
                        // (An unanswered call's message is still held.)
                        let Some(c) = out.get(*m).and_then(|msg| msg.tool_calls.get(*k)) else {
                            return false;
                        };
                        !*answered
                            && match id {
                                Some(id) => c.call_id.as_str() == id,
                                None => {
                                    Some(*m) == last_model && name.is_some_and(|nm| nm == c.name)
                                }
                            }
                    });
                    let Some((m, k, answered)) = slot else {
                        return Err(invalid(format!(
                            "{path}.parts[{n}]: a functionResponse for {} that answers no call",
                            id.or(name).unwrap_or("?")
                        )));
                    };
                    *answered = true;
                    let call = &mut out.at_mut(*m)?.tool_calls[*k];
                    call.status = ToolStatus::Completed;
                    let (call_id, tool) = (call.call_id.clone(), call.name.clone());
                    let response = f.get("response").cloned().unwrap_or(Value::Null);
                    let text = match &response {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    let mut m = new(Role::Tool, text, out.len());
                    m.turn = turn;
                    m.tool_call_id = Some(call_id);
                    m.tool_name = Some(tool);
                    // The whole content on the first of its results; the
                    // others point to it.
                    m.provider_payload = if out.len() == first {
                        payload.clone()
                    } else {
                        Some(super::payload::tag(
                            GEMINI,
                            "part_of",
                            &json!(out.get(first).map(|f| f.message_id.to_string())),
                        ))
                    };
                    out.push(m);
                }
            }
            other => return Err(invalid(format!("{path}: unknown role {other:?}"))),
        }
    }
    out.settle()
}

fn original(m: &InnerMessage) -> Option<Map<String, Value>> {
    super::payload::tagged_message(m, GEMINI)
}

fn plain(m: &InnerMessage) -> Value {
    if let Some(p) = original(m) {
        return Value::Object(p);
    }
    json!({"role": "user", "parts": [{"text": m.content}]})
}

fn assistant(t: &Turn<'_>) -> Value {
    if t.complete
        && let Some(p) = original(t.msg)
    {
        return Value::Object(p);
    }
    let mut parts = Vec::new();
    if !t.msg.content.is_empty() {
        parts.push(json!({"text": t.msg.content}));
    }
    for c in &t.calls {
        let args = serde_json::from_str::<Value>(&c.arguments).unwrap_or_else(|_| json!({}));
        let mut f = json!({"name": c.name, "args": args});
        if !c.call_id.as_str().starts_with("gemini-") {
            f["id"] = json!(c.call_id.as_str());
        }
        parts.push(json!({"functionCall": f}));
    }
    json!({"role": "model", "parts": parts})
}

/// The function responses of one turn, as `user` contents: the original
/// content of recorded results (once for all its parts), synthesized ones
/// for the others.
fn results(t: &Turn<'_>, out: &mut Vec<Value>) {
    let mut synthesized = Vec::new();
    for r in &t.results {
        match r {
            Res::Real { msg, .. } if original(msg).is_some() => {
                out.push(Value::Object(original(msg).expect("checked")));
            }
            // Part of a content already emitted by its first result.
            Res::Real { msg, .. }
                if matches!(
                    super::payload::tagged(msg, GEMINI),
                    Some(super::payload::Tagged::PartOf(_))
                ) => {}
            Res::Real { msg, call } => {
                synthesized.push(response(call, Value::String(msg.content.clone())))
            }
            Res::Synthetic(call) => synthesized.push(response(call, json!(INTERRUPTED_RESULT))),
        }
    }
    if !synthesized.is_empty() {
        out.push(json!({"role": "user", "parts": synthesized}));
    }
}

fn response(call: &ToolCallRecord, value: Value) -> Value {
    let mut f = json!({"name": call.name, "response": {"result": value}});
    if !call.call_id.as_str().starts_with("gemini-") {
        f["id"] = json!(call.call_id.as_str());
    }
    json!({"functionResponse": f})
}

/// The messages as a Gemini request: `systemInstruction` (when there is a
/// system message) and `contents`, every call answered once; messages
/// imported from Gemini give back what Gemini had.
pub(crate) fn to_request(messages: &[InnerMessage]) -> Value {
    let plan = plan(messages);
    let mut contents = Vec::new();
    let mut system: Option<Value> = None;
    for m in &plan.head {
        if m.role == Role::System {
            let sys = super::payload::tagged(m, GEMINI)
                .and_then(|t| match t {
                    super::payload::Tagged::System(s) => Some(s),
                    _ => None,
                })
                .unwrap_or_else(|| json!({"parts": [{"text": m.content}]}));
            system = Some(sys);
        } else {
            contents.push(plain(m));
        }
    }
    for t in &plan.turns {
        contents.push(assistant(t));
        results(t, &mut contents);
        contents.extend(
            t.after
                .iter()
                .filter(|m| m.role != Role::System)
                .map(|m| plain(m)),
        );
    }
    let mut out = Map::new();
    if let Some(s) = system {
        out.insert("systemInstruction".into(), s);
    }
    out.insert("contents".into(), Value::Array(contents));
    Value::Object(out)
}
