//! Checks that a message list is a history the provider accepts.
//!
//! Both checks are structural: roles, tool-call ids, where each result is.
//! An error is an [`Error::InvalidInput`] naming the message (`messages[3]`,
//! `messages[3].content[1]`) and what is wrong with it. An empty list passes
//! (the APIs additionally want at least one message, which is the caller's
//! concern).

use std::collections::HashMap;

use serde_json::Value;

use super::read::kind;
use super::read::{
    Block, anthropic_blocks, anthropic_role, anthropic_system, openai_role, openai_tool_call_id,
    openai_tool_calls,
};
use crate::error::{Error, Result};

/// Checks an OpenAI chat-completions message list:
///
/// - every message is an object with a role among `system`, `developer`,
///   `user`, `assistant` and `tool`;
/// - an assistant's `tool_calls`, when present, is a non-empty array of
///   `{"id", "type": "function", "function": {"name", "arguments": <string>}}`
///   with ids unique in the message;
/// - every call is answered by exactly one `tool` message, and those come
///   directly after the assistant message (only tool messages between: the
///   API rejects a user message before the results);
/// - no `tool` message answers a call that the assistant message it follows
///   did not make.
///
/// # Errors
/// [`Error::InvalidInput`] with the first problem found, naming the message
/// (`messages[3]: tool result for "c2", a call the preceding assistant
/// message (messages[1]) did not make`).
pub fn openai(messages: &[Value]) -> Result<()> {
    check_openai(messages).map_err(Error::InvalidInput)
}

/// [`openai`], with the problem as the bare message text.
fn check_openai(messages: &[Value]) -> Result<(), String> {
    struct Open<'a> {
        at: usize,
        calls: Vec<(&'a str, Option<usize>)>,
    }
    fn close(open: &Open<'_>, next: Option<usize>) -> Result<(), String> {
        match open.calls.iter().find(|(_, answered)| answered.is_none()) {
            None => Ok(()),
            Some((id, _)) => Err(format!(
                "messages[{}]: tool call \"{id}\" has no result (expected a tool message for it {})",
                open.at,
                match next {
                    Some(i) => format!("before messages[{i}]"),
                    None => "before the end of the history".to_owned(),
                }
            )),
        }
    }

    let mut open: Option<Open<'_>> = None;
    let mut made: HashMap<&str, usize> = HashMap::new();
    for (i, m) in messages.iter().enumerate() {
        let path = format!("messages[{i}]");
        let obj = m
            .as_object()
            .ok_or_else(|| format!("{path}: expected an object, found {}", kind(m)))?;
        let role = openai_role(obj, &path)?;
        if role != "tool" {
            if let Some(o) = open.take() {
                close(&o, Some(i))?;
            }
        }
        match role {
            "assistant" => {
                let calls = openai_tool_calls(obj, &path)?;
                if !calls.is_empty() {
                    for c in &calls {
                        made.insert(c.id, i);
                    }
                    open = Some(Open {
                        at: i,
                        calls: calls.iter().map(|c| (c.id, None)).collect(),
                    });
                }
            }
            "tool" => {
                let id = openai_tool_call_id(obj, &path)?;
                match open.as_mut() {
                    Some(o) => match o.calls.iter_mut().find(|(c, _)| *c == id) {
                        Some((_, Some(first))) => {
                            return Err(format!(
                                "{path}: second result for tool call \"{id}\" (the first is messages[{first}])"
                            ));
                        }
                        Some((_, slot)) => *slot = Some(i),
                        None => {
                            return Err(format!(
                                "{path}: tool result for \"{id}\", a call the preceding assistant message (messages[{}]) did not make",
                                o.at
                            ));
                        }
                    },
                    None => {
                        return Err(match made.get(id) {
                            Some(a) => format!(
                                "{path}: tool result for \"{id}\" does not directly follow its assistant message (messages[{a}]); only tool messages may come between"
                            ),
                            None => format!(
                                "{path}: tool result for \"{id}\", which no earlier assistant message called"
                            ),
                        });
                    }
                }
            }
            _ => {}
        }
    }
    match open {
        Some(o) => close(&o, None),
        None => Ok(()),
    }
}

/// Checks an Anthropic Messages request (`{"system"?, "messages": [...]}`,
/// or a bare messages array):
///
/// - `system`, when present, is a string or an array of text blocks;
/// - messages are objects with role `user` or `assistant` (no `system` role
///   inside messages), starting with `user`; consecutive messages of one role
///   make one turn, as the API combines them, and the rules below hold for
///   turns ("message" there means turn);
/// - `content` is a string or an array of typed content blocks; `tool_use`
///   blocks have a string `id` and `name` and an object `input`, with ids
///   unique in the request; they appear only in assistant messages, and
///   `tool_result` blocks only in user messages, before any other block;
/// - every `tool_use` has exactly one `tool_result` in the immediately
///   following user message, and every `tool_result` answers a `tool_use` of
///   the immediately preceding assistant message.
///
/// # Errors
/// [`Error::InvalidInput`] with the first problem found, naming the message
/// and the block (`messages[1].content[1]: tool_use "c3" has no tool_result
/// in the next message (messages[2])`).
pub fn anthropic(request: &Value) -> Result<()> {
    check_anthropic(request).map_err(Error::InvalidInput)
}

/// A turn: its role, the path of its first message, its blocks with their paths.
type Turn<'a> = (&'a str, String, Vec<(String, Block<'a>)>);

/// [`anthropic`], with the problem as the bare message text.
fn check_anthropic(request: &Value) -> Result<(), String> {
    let messages = match request {
        Value::Array(a) => a,
        Value::Object(o) => {
            if let Some(s) = o.get("system") {
                anthropic_system(s)?;
            }
            match o.get("messages") {
                Some(Value::Array(a)) => a,
                Some(other) => {
                    return Err(format!(
                        "\"messages\" must be an array, found {}",
                        kind(other)
                    ));
                }
                None => return Err("missing \"messages\"".to_owned()),
            }
        }
        other => {
            return Err(format!(
                "expected a request object or a messages array, found {}",
                kind(other)
            ));
        }
    };

    // The API makes one turn of consecutive messages of one role (their
    // blocks in order): the rules below hold for turns.
    let mut turns: Vec<Turn<'_>> = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        let path = format!("messages[{i}]");
        let obj = m
            .as_object()
            .ok_or_else(|| format!("{path}: expected an object, found {}", kind(m)))?;
        let role = anthropic_role(obj, &path)?;
        if turns.is_empty() && role != "user" {
            return Err(format!(
                "{path}: the first message must have role \"user\", found \"{role}\""
            ));
        }
        let blocks: Vec<(String, Block<'_>)> = anthropic_blocks(obj, &path)?
            .into_iter()
            .enumerate()
            .map(|(j, b)| (format!("{path}.content[{j}]"), b))
            .collect();
        match turns.last_mut() {
            Some((r, _, bs)) if *r == role => bs.extend(blocks),
            _ => turns.push((role, path, blocks)),
        }
    }

    let mut uses: HashMap<&str, String> = HashMap::new();
    // The tool_use blocks of the previous turn, if it was an assistant's:
    // (id, block path, answered).
    let mut open: Option<Vec<(&str, String, bool)>> = None;
    for (role, path, blocks) in turns {
        if role == "assistant" {
            let mut calls = Vec::new();
            for (bpath, b) in &blocks {
                let bpath = bpath.clone();
                match b {
                    Block::ToolResult { .. } => {
                        return Err(format!(
                            "{bpath}: tool_result in an assistant message (results go in the next user message)"
                        ));
                    }
                    Block::ToolUse { id, .. } => {
                        if let Some(first) = uses.get(id) {
                            return Err(format!(
                                "{bpath}: tool_use id \"{id}\" is used twice (first at {first})"
                            ));
                        }
                        uses.insert(id, bpath.clone());
                        calls.push((*id, bpath, false));
                    }
                    _ => {}
                }
            }
            if !calls.is_empty() {
                open = Some(calls);
            }
            continue;
        }
        // A user message: it answers the previous assistant message's calls.
        let mut expected = open.take();
        let mut other_seen = false;
        for (bpath, b) in &blocks {
            match b {
                Block::ToolUse { .. } => {
                    return Err(format!("{bpath}: tool_use in a user message"));
                }
                Block::ToolResult { id, .. } => {
                    if other_seen {
                        return Err(format!(
                            "{bpath}: tool_result after other content; tool_result blocks must come first in a user message"
                        ));
                    }
                    let slot = expected
                        .as_mut()
                        .and_then(|calls| calls.iter_mut().find(|(c, _, _)| c == id));
                    match slot {
                        Some((_, _, answered)) if *answered => {
                            return Err(format!(
                                "{bpath}: second tool_result for tool_use \"{id}\""
                            ));
                        }
                        Some((_, _, answered)) => *answered = true,
                        None => {
                            return Err(match uses.get(id) {
                                Some(at) => format!(
                                    "{bpath}: tool_result for \"{id}\" is not in the message right after its tool_use ({at})"
                                ),
                                None => format!(
                                    "{bpath}: tool_result for \"{id}\", which no tool_use of the preceding assistant message made"
                                ),
                            });
                        }
                    }
                }
                _ => other_seen = true,
            }
        }
        if let Some(calls) = expected {
            if let Some((id, at, _)) = calls.iter().find(|(_, _, answered)| !answered) {
                return Err(format!(
                    "{at}: tool_use \"{id}\" has no tool_result in the next message ({path})"
                ));
            }
        }
    }
    if let Some(calls) = open {
        if let Some((id, at, _)) = calls.first() {
            return Err(format!(
                "{at}: tool_use \"{id}\" has no tool_result (no message follows)"
            ));
        }
    }
    Ok(())
}
