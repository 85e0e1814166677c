//! A blob's messages as the provider's own wire messages (goaitools keeps
//! "the raw messages received by the backend"), and the side record of
//! what a wire message cannot hold (our ids, times, turns, metadata).
//!
//! Two dialects, chosen by the blob's provider id:
//!
//! - **Anthropic** (a provider id starting with `anthropic`): Messages API
//!   message objects, `{"role": "user" | "assistant", "content": string |
//!   [blocks]}`. An assistant message's blocks are kept as they came
//!   (`thinking` with its `signature`, `redacted_thinking` with its `data`,
//!   `text`, `tool_use`); a tool result is a user message of one
//!   `tool_result` block. A stored system message (context, or a
//!   compaction's summary) is `{"role": "system", "content"}`, which our
//!   Anthropic adapter moves to the request's `system`.
//! - **OpenAI** chat completions (every other provider id):
//!   `{"role", "content", "name"?, "tool_calls"?: [{"id", "type":
//!   "function", "function": {"name", "arguments"}}], "tool_call_id"?}`.
//!
//! A wire message this module cannot rebuild member for member (a role it
//! does not know, such as `developer`; a tool call of another shape; no
//! `content`) is kept as it came and written back so; its members are
//! still read as well as they can be for the request.

use serde_json::{Map, Value, json};

use crate::event::conversation::{ConversationMessage, Metadata, TurnId};
use crate::model::Role;
use crate::model::{MessageId, ToolCallRecord, ToolStatus};

/// The wire dialect of a provider.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dialect {
    /// OpenAI chat-completions messages.
    OpenAi,
    /// Anthropic Messages API messages.
    Anthropic,
}

impl Dialect {
    /// The dialect of provider id `provider`.
    pub(crate) fn of(provider: &str) -> Self {
        if provider.starts_with("anthropic") {
            Dialect::Anthropic
        } else {
            Dialect::OpenAi
        }
    }
}

/// A wire message read back: the message (fresh id, created now, until a
/// side record says otherwise) and the members it does not know.
pub(crate) struct Read {
    pub(crate) message: ConversationMessage,
    pub(crate) unknown: Map<String, Value>,
}

/// True when [`to_wire`] of what [`from_wire`] reads of `o` (with its
/// unknown members) is `o` again, member for member; when not, the blob
/// keeps `o` as it came.
pub(crate) fn exact(d: Dialect, o: &Map<String, Value>) -> bool {
    let role = o.get("role").and_then(Value::as_str);
    let content = o.get("content");
    match d {
        Dialect::OpenAi => {
            let tool = role == Some("tool");
            matches!(role, Some("system" | "user" | "assistant" | "tool"))
                && content.is_some()
                && match o.get("name") {
                    Some(Value::String(n)) => !tool && valid_name(n),
                    _ => true,
                }
                && o.get("tool_calls").is_none_or(|c| openai_calls(c).1)
                && o.get("tool_call_id").is_none_or(Value::is_string)
        }
        Dialect::Anthropic => {
            matches!(role, Some("system" | "user" | "assistant"))
                && matches!(content, Some(Value::String(_) | Value::Array(_)))
        }
    }
}

/// `^[a-zA-Z0-9_-]{1,64}$`, the names OpenAI accepts.
fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// True when `name` goes on the wire (else in the side record).
fn name_on_wire(d: Dialect, m: &ConversationMessage) -> bool {
    d == Dialect::OpenAi && m.role != Role::Tool && m.name.as_deref().is_some_and(valid_name)
}

/// `m` as a wire message of dialect `d` (without unknown members).
pub(crate) fn to_wire(d: Dialect, m: &ConversationMessage) -> Map<String, Value> {
    match d {
        Dialect::OpenAi => openai(m),
        Dialect::Anthropic => anthropic(m),
    }
}

fn openai(m: &ConversationMessage) -> Map<String, Value> {
    let mut o = Map::new();
    let role = match m.role {
        Role::Other => "user",
        r => r.as_str(),
    };
    o.insert("role".into(), json!(role));
    o.insert("content".into(), m.content.clone());
    if name_on_wire(Dialect::OpenAi, m) {
        o.insert("name".into(), json!(m.name));
    }
    if !m.tool_calls.is_empty() {
        let calls = m
            .tool_calls
            .iter()
            .map(|c| {
                json!({"id": c.call_id.as_str(), "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments}})
            })
            .collect();
        o.insert("tool_calls".into(), Value::Array(calls));
    }
    if let Some(id) = &m.tool_call_id {
        o.insert("tool_call_id".into(), json!(id.as_str()));
    }
    o
}

/// A tool call's `input` from its arguments text (as the adapter sends it).
fn input(arguments: &str) -> Value {
    match serde_json::from_str::<Value>(arguments) {
        Ok(v @ Value::Object(_)) => v,
        _ if arguments.trim().is_empty() => Value::Object(Map::new()),
        _ => json!({ "arguments": arguments }),
    }
}

/// Text (or the JSON text of other JSON) as Anthropic content.
fn content_of(v: &Value) -> Value {
    match v {
        Value::String(_) | Value::Array(_) => v.clone(),
        Value::Null => Value::String(String::new()),
        other => Value::String(other.to_string()),
    }
}

fn anthropic(m: &ConversationMessage) -> Map<String, Value> {
    let mut o = Map::new();
    let (role, content) = match m.role {
        Role::System => ("system", content_of(&m.content)),
        Role::User | Role::Other => ("user", content_of(&m.content)),
        Role::Tool => {
            let id = m.tool_call_id.as_ref().map_or("", |c| c.as_str());
            let block = json!({"type": "tool_result", "tool_use_id": id,
                "content": content_of(&m.content)});
            ("user", Value::Array(vec![block]))
        }
        Role::Assistant => ("assistant", assistant_blocks(m)),
    };
    o.insert("role".into(), json!(role));
    o.insert("content".into(), content);
    o
}

/// An assistant message's Anthropic content: its blocks as they are (a
/// string stays a string when there are no calls), with a `tool_use`
/// block for each call not among them.
fn assistant_blocks(m: &ConversationMessage) -> Value {
    let mut blocks = match &m.content {
        Value::Array(a) => a.clone(),
        other if m.tool_calls.is_empty() => return content_of(other),
        Value::Null => Vec::new(),
        Value::String(s) if s.is_empty() => Vec::new(),
        other => vec![json!({"type": "text", "text": content_of(other)})],
    };
    for c in &m.tool_calls {
        let present = blocks.iter().any(|b| {
            b.get("type").and_then(Value::as_str) == Some("tool_use")
                && b.get("id").and_then(Value::as_str) == Some(c.call_id.as_str())
        });
        if !present {
            blocks.push(json!({"type": "tool_use", "id": c.call_id.as_str(),
                "name": c.name, "input": input(&c.arguments)}));
        }
    }
    Value::Array(blocks)
}

/// The calls of an assistant message's `tool_use` blocks (those with a
/// string id and name).
pub(crate) fn tool_uses(content: &Value) -> Vec<ToolCallRecord> {
    let Value::Array(blocks) = content else {
        return Vec::new();
    };
    blocks
        .iter()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_use"))
        .filter_map(|b| {
            let id = b.get("id")?.as_str()?;
            let name = b.get("name")?.as_str()?;
            let arguments = match b.get("input") {
                None | Some(Value::Null) => "{}".to_owned(),
                Some(Value::String(s)) => s.clone(),
                Some(v) => v.to_string(),
            };
            Some(ToolCallRecord::new(id, name, arguments))
        })
        .collect()
}

/// Reads wire message `o` of dialect `d`.
///
/// # Errors
/// Why it is not a message: no `role`, or one that is not a string.
pub(crate) fn from_wire(d: Dialect, mut o: Map<String, Value>) -> Result<Read, String> {
    let role = match o.remove("role") {
        Some(Value::String(r)) => r,
        Some(_) => return Err("`role` is not a string".into()),
        None => return Err("no `role`".into()),
    };
    let content = o.remove("content").unwrap_or(Value::Null);
    let mut m = ConversationMessage::json(Role::Other, Value::Null);
    match d {
        Dialect::OpenAi => {
            m.role = match role.as_str() {
                "system" => Role::System,
                "user" => Role::User,
                "assistant" => Role::Assistant,
                "tool" => Role::Tool,
                "developer" => Role::System,
                _ => Role::Other,
            };
            match o.remove("name") {
                Some(Value::String(n)) => m.name = Some(n),
                Some(other) => {
                    o.insert("name".into(), other);
                }
                None => {}
            }
            if let Some(calls) = o.remove("tool_calls") {
                m.tool_calls = openai_calls(&calls).0;
            }
            if let Some(Value::String(id)) = o.remove("tool_call_id") {
                m.tool_call_id = Some(id.as_str().into());
            }
            m.content = content;
        }
        Dialect::Anthropic => match role.as_str() {
            "assistant" => {
                m.role = Role::Assistant;
                m.tool_calls = tool_uses(&content);
                m.content = content;
            }
            "user" => match single_tool_result(&content) {
                Some((id, result)) if o.is_empty() => {
                    m.role = Role::Tool;
                    m.tool_call_id = Some(id.into());
                    m.content = result;
                }
                _ => {
                    m.role = Role::User;
                    m.content = content;
                }
            },
            "system" => {
                m.role = Role::System;
                m.content = content;
            }
            _ => m.content = content,
        },
    }
    Ok(Read {
        message: m,
        unknown: o,
    })
}

/// The calls of an OpenAI `tool_calls` member, and whether it has exactly
/// the shape [`to_wire`] writes (a non-empty array of `{"id", "type":
/// "function", "function": {"name", "arguments"}}`, strings all).
fn openai_calls(calls: &Value) -> (Vec<ToolCallRecord>, bool) {
    let Value::Array(a) = calls else {
        return (Vec::new(), false);
    };
    let mut shaped = !a.is_empty();
    let mut out = Vec::new();
    for c in a {
        let f = c.get("function");
        let text = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_owned);
        let (Some(id), Some(name)) = (text(c.get("id")), text(f.and_then(|f| f.get("name"))))
        else {
            shaped = false;
            continue;
        };
        let arguments = match f.and_then(|f| f.get("arguments")) {
            Some(Value::String(s)) => s.clone(),
            Some(other) => {
                shaped = false;
                other.to_string()
            }
            None => {
                shaped = false;
                String::new()
            }
        };
        shaped &= c.as_object().is_some_and(|o| o.len() == 3)
            && c.get("type").and_then(Value::as_str) == Some("function")
            && f.and_then(Value::as_object).is_some_and(|o| o.len() == 2);
        out.push(ToolCallRecord::new(id.as_str(), name, arguments));
    }
    (out, shaped)
}

/// The call id and result of content that is exactly one `{"type":
/// "tool_result", "tool_use_id", "content"}` block (content a string or
/// blocks): the form [`to_wire`] gives a tool message.
fn single_tool_result(content: &Value) -> Option<(String, Value)> {
    let [block] = content.as_array()?.as_slice() else {
        return None;
    };
    let b = block.as_object()?;
    let id = b.get("tool_use_id")?.as_str()?;
    let result = b.get("content")?;
    (b.len() == 3
        && b.get("type").and_then(Value::as_str) == Some("tool_result")
        && matches!(result, Value::String(_) | Value::Array(_)))
    .then(|| (id.to_owned(), result.clone()))
}

/// What the wire message of `m` in dialect `d` does not hold: `id` and
/// `created_at` always; `conversation_id` when not nil; `turn_id`,
/// `provider_message_id`, `metadata`, `name` (when not on the wire),
/// `role` (`"other"`, sent as a user message) and `tool_status` (the
/// calls' statuses other than pending, by call id) when set.
pub(crate) fn side_record(d: Dialect, m: &ConversationMessage) -> Value {
    let mut o = Map::new();
    o.insert("id".into(), json!(m.id));
    o.insert(
        "created_at".into(),
        json!(
            m.created_at
                .to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)
        ),
    );
    if !m.conversation_id.0.is_nil() {
        o.insert("conversation_id".into(), json!(m.conversation_id));
    }
    if let Some(t) = m.turn_id {
        o.insert("turn_id".into(), json!(t));
    }
    if let Some(p) = &m.provider_message_id {
        o.insert("provider_message_id".into(), json!(p));
    }
    if !m.metadata.is_empty() {
        o.insert("metadata".into(), json!(m.metadata));
    }
    if m.name.is_some() && !name_on_wire(d, m) {
        o.insert("name".into(), json!(m.name));
    }
    if m.role == Role::Other {
        o.insert("role".into(), json!("other"));
    }
    let statuses: Map<String, Value> = m
        .tool_calls
        .iter()
        .filter(|c| c.status != ToolStatus::Pending)
        .map(|c| (c.call_id.as_str().to_owned(), json!(c.status)))
        .collect();
    if !statuses.is_empty() {
        o.insert("tool_status".into(), Value::Object(statuses));
    }
    Value::Object(o)
}

/// Applies side record `r` to `m`: each member that reads is set, the
/// others are ignored (a side record never makes a blob fail).
pub(crate) fn apply_side(m: &mut ConversationMessage, r: &Value) {
    let get = |k: &str| r.get(k).cloned();
    if let Some(id) = get("id").and_then(|v| serde_json::from_value::<MessageId>(v).ok()) {
        m.id = id;
    }
    if let Some(Value::String(t)) = get("created_at")
        && let Ok(t) = chrono::DateTime::parse_from_rfc3339(&t)
    {
        m.created_at = t.with_timezone(&chrono::Utc);
    }
    if let Some(c) = get("conversation_id").and_then(|v| serde_json::from_value(v).ok()) {
        m.conversation_id = c;
    }
    if let Some(t) = get("turn_id").and_then(|v| serde_json::from_value::<TurnId>(v).ok()) {
        m.turn_id = Some(t);
    }
    if let Some(Value::String(p)) = get("provider_message_id") {
        m.provider_message_id = Some(p);
    }
    if let Some(meta) = get("metadata").and_then(|v| serde_json::from_value::<Metadata>(v).ok()) {
        m.metadata = meta;
    }
    if let Some(Value::String(n)) = get("name") {
        m.name = Some(n);
    }
    if get("role").as_ref().and_then(Value::as_str) == Some("other") {
        m.role = Role::Other;
    }
    if let Some(Value::Object(statuses)) = get("tool_status") {
        for c in &mut m.tool_calls {
            if let Some(s) = statuses
                .get(c.call_id.as_str())
                .and_then(|s| serde_json::from_value::<ToolStatus>(s.clone()).ok())
            {
                c.status = s;
            }
        }
    }
}
