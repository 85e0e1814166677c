//! The JSON readers the importers and the validators share: an OpenAI
//! message's role, `tool_call_id` and `tool_calls`; an Anthropic message's
//! role and content blocks, a request's top-level `system`, and the text of a
//! `tool_result`.
//!
//! Each reader checks the shape it reads and, when it is wrong, returns the
//! message text of the error, prefixed with the path it was given
//! (`messages[3]`, `messages[3].content[1]`). The validators return that text
//! as it is, wrapped in [`Error::InvalidInput`](crate::Error::InvalidInput),
//! and so do the importers: both report a malformed message the same way.

use serde_json::{Map, Value};

use crate::model::{InnerMessage, Role};

/// The role of an OpenAI message.
pub(crate) fn openai_role<'a>(obj: &'a Map<String, Value>, path: &str) -> Result<&'a str, String> {
    match obj.get("role") {
        None => Err(format!("{path}: missing \"role\"")),
        Some(Value::String(r)) => match r.as_str() {
            "system" | "developer" | "user" | "assistant" | "tool" => Ok(r),
            other => Err(format!(
                "{path}: invalid role \"{other}\" (expected system, developer, user, assistant or tool)"
            )),
        },
        Some(other) => Err(format!(
            "{path}: \"role\" must be a string, found {}",
            kind(other)
        )),
    }
}

/// The `tool_call_id` of an OpenAI tool message.
pub(crate) fn openai_tool_call_id<'a>(
    obj: &'a Map<String, Value>,
    path: &str,
) -> Result<&'a str, String> {
    match obj.get("tool_call_id") {
        Some(Value::String(id)) => Ok(id),
        None | Some(Value::Null) => Err(format!("{path}: a tool message needs a \"tool_call_id\"")),
        Some(other) => Err(format!(
            "{path}: \"tool_call_id\" must be a string, found {}",
            kind(other)
        )),
    }
}

/// One call of an OpenAI assistant message.
pub(crate) struct OpenAiCall<'a> {
    pub id: &'a str,
    pub name: &'a str,
    pub arguments: &'a str,
}

/// The `tool_calls` of an OpenAI assistant message (none when absent or null).
pub(crate) fn openai_tool_calls<'a>(
    obj: &'a Map<String, Value>,
    path: &str,
) -> Result<Vec<OpenAiCall<'a>>, String> {
    let list = match obj.get("tool_calls") {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(a)) if a.is_empty() => {
            return Err(format!(
                "{path}: \"tool_calls\" is an empty array (omit it when there are no calls)"
            ));
        }
        Some(Value::Array(a)) => a,
        Some(other) => {
            return Err(format!(
                "{path}: \"tool_calls\" must be an array, found {}",
                kind(other)
            ));
        }
    };
    let mut out: Vec<OpenAiCall<'a>> = Vec::with_capacity(list.len());
    for (j, c) in list.iter().enumerate() {
        let p = format!("{path}.tool_calls[{j}]");
        let c = c
            .as_object()
            .ok_or_else(|| format!("{p}: expected an object, found {}", kind(c)))?;
        let id = match c.get("id") {
            Some(Value::String(s)) => s.as_str(),
            None => return Err(format!("{p}: missing \"id\"")),
            Some(other) => {
                return Err(format!(
                    "{p}: \"id\" must be a string, found {}",
                    kind(other)
                ));
            }
        };
        match c.get("type") {
            Some(Value::String(t)) if t == "function" => {}
            Some(Value::String(t)) => {
                return Err(format!(
                    "{p}: unsupported tool call type \"{t}\" (expected \"function\")"
                ));
            }
            None => return Err(format!("{p}: missing \"type\": \"function\"")),
            Some(other) => {
                return Err(format!(
                    "{p}: \"type\" must be a string, found {}",
                    kind(other)
                ));
            }
        }
        let f = match c.get("function") {
            Some(Value::Object(f)) => f,
            None => return Err(format!("{p}: missing \"function\"")),
            Some(other) => {
                return Err(format!(
                    "{p}: \"function\" must be an object, found {}",
                    kind(other)
                ));
            }
        };
        let name = match f.get("name") {
            Some(Value::String(s)) => s.as_str(),
            None => return Err(format!("{p}.function: missing \"name\"")),
            Some(other) => {
                return Err(format!(
                    "{p}.function: \"name\" must be a string, found {}",
                    kind(other)
                ));
            }
        };
        let arguments = match f.get("arguments") {
            Some(Value::String(s)) => s.as_str(),
            None => return Err(format!("{p}.function: missing \"arguments\"")),
            Some(other) => {
                return Err(format!(
                    "{p}.function: \"arguments\" must be a string (JSON text), found {}",
                    kind(other)
                ));
            }
        };
        if let Some(k) = out.iter().position(|o| o.id == id) {
            return Err(format!(
                "{p}: tool call id \"{id}\" appears twice in this message (first at tool_calls[{k}])"
            ));
        }
        out.push(OpenAiCall {
            id,
            name,
            arguments,
        });
    }
    Ok(out)
}

/// The role of an Anthropic message (`user` or `assistant`).
pub(crate) fn anthropic_role<'a>(
    obj: &'a Map<String, Value>,
    path: &str,
) -> Result<&'a str, String> {
    match obj.get("role") {
        None => Err(format!("{path}: missing \"role\"")),
        Some(Value::String(r)) => match r.as_str() {
            "user" | "assistant" => Ok(r),
            "system" => Err(format!(
                "{path}: role \"system\" is not allowed in messages (the system prompt goes in the top-level \"system\")"
            )),
            other => Err(format!(
                "{path}: invalid role \"{other}\" (expected user or assistant)"
            )),
        },
        Some(other) => Err(format!(
            "{path}: \"role\" must be a string, found {}",
            kind(other)
        )),
    }
}

/// The text of an Anthropic top-level `system` (text blocks joined by a
/// newline).
pub(crate) fn anthropic_system(v: &Value) -> Result<String, String> {
    match v {
        Value::String(s) => Ok(s.clone()),
        Value::Array(blocks) => {
            let mut parts = Vec::with_capacity(blocks.len());
            for (j, b) in blocks.iter().enumerate() {
                let p = format!("system[{j}]");
                let b = b
                    .as_object()
                    .ok_or_else(|| format!("{p}: expected a text block, found {}", kind(b)))?;
                match b.get("type").and_then(Value::as_str) {
                    Some("text") => {}
                    Some(t) => return Err(format!("{p}: expected a text block, found \"{t}\"")),
                    None => return Err(format!("{p}: missing \"type\"")),
                }
                match b.get("text") {
                    Some(Value::String(s)) => parts.push(s.as_str()),
                    _ => return Err(format!("{p}: a text block needs a string \"text\"")),
                }
            }
            Ok(parts.join("\n"))
        }
        other => Err(format!(
            "system: must be a string or an array of text blocks, found {}",
            kind(other)
        )),
    }
}

/// One content block of an Anthropic message.
pub(crate) enum Block<'a> {
    Text(&'a str),
    ToolUse {
        id: &'a str,
        name: &'a str,
        input: &'a Value,
    },
    ToolResult {
        id: &'a str,
        content: Option<&'a Value>,
        is_error: bool,
    },
    /// Any other block (`thinking`, `image`, ...), kept only in payloads.
    Other,
}

/// The content blocks of an Anthropic message (a string content is one text
/// block).
pub(crate) fn anthropic_blocks<'a>(
    obj: &'a Map<String, Value>,
    path: &str,
) -> Result<Vec<Block<'a>>, String> {
    match obj.get("content") {
        Some(Value::String(s)) => Ok(vec![Block::Text(s)]),
        Some(Value::Array(a)) => a
            .iter()
            .enumerate()
            .map(|(j, b)| anthropic_block(b, &format!("{path}.content[{j}]")))
            .collect(),
        None => Err(format!("{path}: missing \"content\"")),
        Some(other) => Err(format!(
            "{path}: \"content\" must be a string or an array of content blocks, found {}",
            kind(other)
        )),
    }
}

fn string_field<'a>(
    b: &'a Map<String, Value>,
    key: &str,
    what: &str,
    p: &str,
) -> Result<&'a str, String> {
    match b.get(key) {
        Some(Value::String(s)) => Ok(s),
        None => Err(format!("{p}: {what} block without \"{key}\"")),
        Some(other) => Err(format!(
            "{p}: {what} \"{key}\" must be a string, found {}",
            kind(other)
        )),
    }
}

fn anthropic_block<'a>(b: &'a Value, p: &str) -> Result<Block<'a>, String> {
    let b = b
        .as_object()
        .ok_or_else(|| format!("{p}: expected a content block object, found {}", kind(b)))?;
    let ty = match b.get("type") {
        Some(Value::String(t)) => t.as_str(),
        None => return Err(format!("{p}: missing \"type\"")),
        Some(other) => {
            return Err(format!(
                "{p}: \"type\" must be a string, found {}",
                kind(other)
            ));
        }
    };
    match ty {
        "text" => Ok(Block::Text(string_field(b, "text", "text", p)?)),
        "tool_use" => {
            let id = string_field(b, "id", "tool_use", p)?;
            let name = string_field(b, "name", "tool_use", p)?;
            match b.get("input") {
                Some(input @ Value::Object(_)) => Ok(Block::ToolUse { id, name, input }),
                None => Err(format!("{p}: tool_use block without \"input\"")),
                Some(other) => Err(format!(
                    "{p}: tool_use \"input\" must be an object, found {}",
                    kind(other)
                )),
            }
        }
        "tool_result" => {
            let id = string_field(b, "tool_use_id", "tool_result", p)?;
            let content = b.get("content");
            match content {
                None | Some(Value::String(_)) => {}
                Some(Value::Array(parts)) => {
                    for (k, part) in parts.iter().enumerate() {
                        match anthropic_block(part, &format!("{p}.content[{k}]"))? {
                            Block::ToolUse { .. } | Block::ToolResult { .. } => {
                                return Err(format!(
                                    "{p}.content[{k}]: a tool_result cannot contain tool blocks"
                                ));
                            }
                            Block::Text(_) | Block::Other => {}
                        }
                    }
                }
                Some(other) => {
                    return Err(format!(
                        "{p}: tool_result \"content\" must be a string or an array of content blocks, found {}",
                        kind(other)
                    ));
                }
            }
            let is_error = match b.get("is_error") {
                None | Some(Value::Null) => false,
                Some(Value::Bool(e)) => *e,
                Some(other) => {
                    return Err(format!(
                        "{p}: tool_result \"is_error\" must be a boolean, found {}",
                        kind(other)
                    ));
                }
            };
            Ok(Block::ToolResult {
                id,
                content,
                is_error,
            })
        }
        _ => Ok(Block::Other),
    }
}

/// The text of a `tool_result`'s content (its text blocks joined by a
/// newline). The content was checked by [`anthropic_blocks`].
pub(crate) fn tool_result_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// A JSON object.
pub(crate) type JsonObject = serde_json::Map<String, Value>;

/// The messages of a provider input: the value itself when it is an array,
/// else the `"messages"` array of a request object (returned too, for its
/// other fields). `expected` describes the accepted shapes in errors.
pub(crate) fn message_list<'a>(
    value: &'a Value,
    expected: &str,
) -> crate::error::Result<(Option<&'a JsonObject>, &'a Vec<Value>)> {
    match value {
        Value::Array(a) => Ok((None, a)),
        Value::Object(o) => match o.get("messages") {
            Some(Value::Array(a)) => Ok((Some(o), a)),
            Some(other) => Err(crate::error::Error::InvalidInput(format!(
                "\"messages\" must be an array, found {}",
                kind(other)
            ))),
            None => Err(crate::error::Error::InvalidInput(format!(
                "{expected}; the object has no \"messages\""
            ))),
        },
        other => Err(crate::error::Error::InvalidInput(format!(
            "{expected}, found {}",
            kind(other)
        ))),
    }
}

/// The JSON type of a value, for error messages.
pub(crate) fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A new message of an import, with the fields every import sets.
pub(crate) fn imported(
    role: Role,
    content: String,
    evaluation_id: crate::model::EvaluationId,
    sequence: usize,
    prompt_ns: &str,
    prompt_key: &str,
) -> InnerMessage {
    let mut m = InnerMessage::new(role, content, evaluation_id, sequence as u64);
    m.prompt_ns = prompt_ns.to_owned();
    m.prompt_key = prompt_key.to_owned();
    m
}
