//! Anthropic Messages API requests.
//!
//! `{"system": ..., "messages": [{"role": "user" | "assistant", "content":
//! <string or content blocks>}]}`. Tool calls are `tool_use` blocks of an
//! assistant message; their results are `tool_result` blocks at the start of
//! the next user message, which the import splits into one
//! [`Role::Tool`] message per result (see [payload
//! tagging](super#payload-tagging)).

mod turns;

use std::borrow::Borrow;
use std::collections::HashMap;

use serde_json::{Map, Value, json};

use self::turns::{Content, Out, Piece, push, push_users, text_block};
use super::history::{Turn, plan};
use super::payload::{ANTHROPIC, Tagged, tag, tagged, tagged_message};
use super::read::{Block, anthropic_blocks, anthropic_role, anthropic_system, tool_result_text};
use super::read::{imported, kind, message_list};
use super::window::Window;
use crate::error::{Error, Result};
use crate::model::{
    CallId, EvaluationId, InnerMessage, MessageId, Role, ToolCallRecord, ToolStatus,
};

/// The text of the user message the export puts first when a history
/// starts with an assistant message (the API wants a user message first).
pub const LEADING_USER_TEXT: &str = "[conversation start]";

/// The `provider_payload` for a message received from Anthropic:
/// `{"provider": "anthropic", "message": <message>}` as JSON text.
pub fn payload(message: &Value) -> String {
    tag(ANTHROPIC, "message", message)
}

/// The `provider_payload` for the system message of an Anthropic request:
/// `{"provider": "anthropic", "system": <the top-level "system">}`.
pub fn system_payload(system: &Value) -> String {
    tag(ANTHROPIC, "system", system)
}

/// The messages as a Messages API request `{"system"?, "messages"}`, always a
/// valid history (see [the resume
/// rule](super#the-resume-rule-every-rebuilt-history-is-valid)).
///
/// - System messages, wherever they are, become the top-level `system`: the
///   original value when there is one system message captured from Anthropic,
///   else the texts joined by a blank line (or the text blocks, when one of
///   them had blocks); the key is omitted when there are none.
/// - An assistant message is its Anthropic payload when it has one that
///   makes the same calls, else a text block and one `tool_use` block per call
///   (`input` is the arguments parsed as a JSON object; empty arguments are
///   `{}`, arguments that are not a JSON object are `{"arguments": <text>}`).
/// - The results of an assistant's calls are `tool_result` blocks (with
///   `is_error: true` when the call failed) at the start of the next user
///   message, together with the user messages that follow before the next
///   assistant message: roles alternate. A user message whose tool results
///   and text are exactly those of one captured Anthropic message is that
///   message; pieces that are exactly several captured messages in a row
///   are those messages, consecutive (the API takes them as one turn), so
///   an imported request exports as it was.
/// - Two assistant messages in a row are merged into one; a history that
///   starts with an assistant message gets a first user message saying
///   [`LEADING_USER_TEXT`].
pub(crate) fn to_request(messages: &[InnerMessage]) -> Value {
    let plan = plan(messages);
    let by_id: HashMap<MessageId, &InnerMessage> =
        messages.iter().map(|m| (m.message_id, m)).collect();
    let mut systems: Vec<&InnerMessage> = Vec::new();
    let mut out: Vec<Out> = Vec::new();

    let mut pieces = Vec::new();
    for m in &plan.head {
        match m.role {
            Role::System => systems.push(m),
            _ => pieces.push(Piece::User(m)),
        }
    }
    push_users(&mut out, &pieces, &by_id);
    for t in &plan.turns {
        push(&mut out, "assistant", assistant(t));
        let mut pieces: Vec<Piece<'_, '_>> = t.results.iter().map(Piece::Result).collect();
        for m in &t.after {
            match m.role {
                Role::System => systems.push(m),
                _ => pieces.push(Piece::User(m)),
            }
        }
        push_users(&mut out, &pieces, &by_id);
    }
    if out.first().is_some_and(|o| o.role == "assistant") {
        out.insert(
            0,
            Out {
                role: "user",
                content: Content::Blocks(vec![text_block(LEADING_USER_TEXT)]),
            },
        );
    }

    let mut request = Map::new();
    if let Some(s) = system(&systems) {
        request.insert("system".to_owned(), s);
    }
    request.insert(
        "messages".to_owned(),
        Value::Array(out.into_iter().map(Out::finish).collect()),
    );
    Value::Object(request)
}

fn system(systems: &[&InnerMessage]) -> Option<Value> {
    let payload = |m: &InnerMessage| match tagged(m, ANTHROPIC) {
        Some(Tagged::System(v)) if anthropic_system(&v).is_ok() => Some(v),
        _ => None,
    };
    match systems {
        [] => None,
        [one] => Some(payload(one).unwrap_or_else(|| Value::String(one.content.clone()))),
        many => {
            let parts: Vec<(Option<Value>, &str)> = many
                .iter()
                .map(|m| (payload(m), m.content.as_str()))
                .collect();
            if parts
                .iter()
                .any(|(p, _)| matches!(p, Some(Value::Array(_))))
            {
                let mut blocks = Vec::new();
                for (p, text) in parts {
                    match p {
                        Some(Value::Array(a)) => blocks.extend(a),
                        _ => blocks.push(text_block(text)),
                    }
                }
                Some(Value::Array(blocks))
            } else {
                let texts: Vec<&str> = parts.iter().map(|(_, t)| *t).collect();
                Some(Value::String(texts.join("\n\n")))
            }
        }
    }
}

/// An assistant message and its calls.
fn assistant(t: &Turn<'_>) -> Content {
    if t.complete {
        if let Some(orig) = tagged_message(t.msg, ANTHROPIC) {
            let agrees = orig.get("role").and_then(Value::as_str) == Some("assistant")
                && anthropic_blocks(&orig, "").is_ok_and(|blocks| {
                    let mut uses = Vec::new();
                    for b in &blocks {
                        match b {
                            Block::ToolResult { .. } => return false,
                            Block::ToolUse { id, .. } => uses.push(*id),
                            _ => {}
                        }
                    }
                    uses.len() == t.calls.len()
                        && uses
                            .iter()
                            .zip(&t.calls)
                            .all(|(a, b)| *a == b.call_id.as_str())
                });
            if agrees {
                return Content::Verbatim(orig);
            }
        }
    }
    let mut blocks = Vec::with_capacity(t.calls.len() + 1);
    if !t.msg.content.is_empty() || t.calls.is_empty() {
        blocks.push(text_block(&t.msg.content));
    }
    for c in &t.calls {
        blocks.push(json!({
            "type": "tool_use",
            "id": c.call_id.as_str(),
            "name": c.name,
            "input": input(&c.arguments),
        }));
    }
    Content::Blocks(blocks)
}

/// A tool call's `input` from its arguments text.
fn input(arguments: &str) -> Value {
    match serde_json::from_str::<Value>(arguments) {
        Ok(v @ Value::Object(_)) => v,
        _ if arguments.trim().is_empty() => Value::Object(Map::new()),
        _ => json!({ "arguments": arguments }),
    }
}

fn invalid(reason: String) -> Error {
    Error::InvalidInput(reason)
}

/// Where a call was made, while importing.
struct Made {
    out: usize,
    pos: usize,
    at: String,
    turn: u32,
    result: Option<String>,
}

const EXPECTED: &str =
    "expected a request object with a \"messages\" array or an array of messages";

/// Imports a Messages API request (`{"system"?, "messages": [...]}`; other
/// request fields such as `model` or `tools` are not messages and are not
/// kept) or a bare messages array.
///
/// The system prompt is message 0 (text blocks joined by a newline), then
/// messages are numbered `sequence` in order. A user message with
/// `tool_result` blocks becomes one [`Role::Tool`] message per result
/// (`tool_call_id` = `tool_use_id`, `tool_name` from the `tool_use`, content
/// the result's text), then a [`Role::User`] message for its other blocks, if
/// any (see [payload tagging](super#payload-tagging)). Turns are numbered as
/// in [`openai::from_messages`](super::openai::from_messages). The text of an
/// assistant message is its text blocks concatenated (citations split one
/// text into several blocks), of a user message its text blocks joined by a
/// newline; `thinking` and other blocks are kept in the payload. A call's
/// status is `Completed` when a result follows, `Failed` when that result
/// has `is_error: true`, else `Pending`. A `tool_use`'s arguments are its
/// `input` as JSON text.
///
/// # Errors
/// [`Error::InvalidInput`] naming the message and block: not a request
/// object or array, a message that is not an object, a missing or invalid
/// role (`system` inside messages included), content of a wrong type, a
/// malformed block, a `tool_use` id used twice, a `tool_result` for a
/// `tool_use` no earlier assistant message made, or a second result for one.
///
/// The messages come one at a time (`items`; `skeleton` is the request
/// without them, its `system` included), each handed on to `out` once no
/// later message can change it
/// ([`stream::convert_whole_with`](super::stream::convert_whole_with) converts a
/// request given whole).
pub(crate) fn from_parts<V: Borrow<Value>>(
    skeleton: &Value,
    items: impl IntoIterator<Item = Result<V>>,
    evaluation_id: EvaluationId,
    prompt_ns: &str,
    prompt_key: &str,
    out: &mut Window<'_>,
) -> Result<()> {
    let (request, _) = message_list(skeleton, EXPECTED)?;
    let system = request.and_then(|o| o.get("system"));
    let new =
        |role, content, seq| imported(role, content, evaluation_id, seq, prompt_ns, prompt_key);

    if let Some(s) = system {
        let text = anthropic_system(s).map_err(invalid)?;
        let mut m = new(Role::System, text, 0);
        m.provider_payload = Some(system_payload(s));
        out.push(m);
    }
    let mut made: HashMap<String, Made> = HashMap::new();
    let mut turn = 0u32;
    for (i, m) in items.into_iter().enumerate() {
        out.settle()?;
        let m = m?;
        let m = m.borrow();
        let path = format!("messages[{i}]");
        let obj = m
            .as_object()
            .ok_or_else(|| invalid(format!("{path}: expected an object, found {}", kind(m))))?;
        let role = anthropic_role(obj, &path).map_err(invalid)?;
        let blocks = anthropic_blocks(obj, &path).map_err(invalid)?;
        if role == "assistant" {
            turn += 1;
            let mut texts = Vec::new();
            let mut calls = Vec::new();
            for (j, b) in blocks.iter().enumerate() {
                let bpath = format!("{path}.content[{j}]");
                match b {
                    Block::Text(s) => texts.push(*s),
                    Block::ToolUse { id, name, input } => {
                        if let Some(first) = made.get(*id) {
                            return Err(invalid(format!(
                                "{bpath}: duplicate tool_use id \"{id}\" (already used at {})",
                                first.at
                            )));
                        }
                        made.insert(
                            (*id).to_owned(),
                            Made {
                                out: out.len(),
                                pos: calls.len(),
                                at: bpath,
                                turn,
                                result: None,
                            },
                        );
                        calls.push(ToolCallRecord::new(*id, *name, input.to_string()));
                    }
                    Block::ToolResult { .. } => {
                        return Err(invalid(format!(
                            "{bpath}: tool_result in an assistant message (results go in the next user message)"
                        )));
                    }
                    Block::Other => {}
                }
            }
            let mut msg = new(Role::Assistant, texts.concat(), out.len());
            msg.turn = turn;
            msg.tool_calls = calls;
            msg.provider_payload = Some(payload(m));
            out.push(msg);
            continue;
        }

        let first = out.len();
        let mut texts = Vec::new();
        let mut other = false;
        for (j, b) in blocks.iter().enumerate() {
            let bpath = format!("{path}.content[{j}]");
            match b {
                Block::ToolResult {
                    id,
                    content,
                    is_error,
                } => {
                    let call = made.get_mut(*id).ok_or_else(|| {
                        invalid(format!(
                            "{bpath}: tool_result for unknown tool_use \"{id}\""
                        ))
                    })?;
                    if let Some(f) = &call.result {
                        return Err(invalid(format!(
                            "{bpath}: second tool_result for tool_use \"{id}\" (the first is {f})"
                        )));
                    }
                    call.result = Some(bpath);
                    let record = &mut out.at_mut(call.out)?.tool_calls[call.pos];
                    record.status = if *is_error {
                        ToolStatus::Failed
                    } else {
                        ToolStatus::Completed
                    };
                    let name = record.name.clone();
                    let mut msg = new(Role::Tool, tool_result_text(*content), out.len());
                    msg.tool_call_id = Some(CallId::from(*id));
                    msg.tool_name = Some(name);
                    msg.turn = call.turn;
                    out.push(msg);
                }
                Block::ToolUse { .. } => {
                    return Err(invalid(format!("{bpath}: tool_use in a user message")));
                }
                Block::Text(s) => {
                    texts.push(*s);
                    other = true;
                }
                Block::Other => other = true,
            }
        }
        if other || out.len() == first {
            let mut msg = new(Role::User, texts.join("\n"), out.len());
            msg.turn = turn;
            out.push(msg);
        }
        let lead = out.at_mut(first)?;
        lead.provider_payload = Some(payload(m));
        let lead = json!(lead.message_id.to_string());
        for part in first + 1..out.len() {
            out.at_mut(part)?.provider_payload = Some(tag(ANTHROPIC, "part_of", &lead));
        }
    }
    out.settle()
}
