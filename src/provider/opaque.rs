//! Opaque items: the items and content blocks of a provider's format whose
//! type the journal does not model (an OpenAI Responses item newer than
//! its list, an Anthropic or Claude Code content block, or one inside a
//! `tool_result` block's content, a Gemini part).
//!
//! An import keeps such an item verbatim in its message's
//! [`provider_payload`](crate::InnerMessage::provider_payload), so an export
//! to the same format gives it back equal as a JSON value; its text adds
//! nothing to the message's neutral fields, so an export to another format
//! drops it. [`opaque_types`] names them (the CLI's `log` and `show` print
//! `[opaque TYPE]`); an import under `strict` refuses them instead with
//! [`Error::Unmodeled`].
//!
//! ```
//! use agent_journal::provider::{ConversationFormat, opaque};
//! use agent_journal::EvaluationId;
//!
//! let input = r#"[{"role": "user", "content": "Patch it"},
//!     {"type": "apply_patch_call", "call_id": "p1", "operation": {"path": "a.rs"}}]"#;
//! let f = ConversationFormat::OpenAiResponses;
//! let messages = f.parse(input, EvaluationId::new(), "ns", "key")?;
//! assert_eq!(opaque::opaque_types(&messages[1]), ["apply_patch_call"]);
//! let back: serde_json::Value = serde_json::from_str(input).unwrap();
//! assert_eq!(f.to_json(&messages), back);
//! assert!(f.parse_strict(input, EvaluationId::new(), "ns", "key").is_err());
//! # Ok::<(), agent_journal::Error>(())
//! ```

use serde_json::Value;

use super::ConversationFormat;
use super::payload::{ANTHROPIC, OPENAI};
use crate::error::{Error, Result};
use crate::model::InnerMessage;

/// Anthropic content blocks the journal models (their text, calls and
/// results read; images, documents and thinking kept and understood).
pub const ANTHROPIC_BLOCKS: &[&str] = &[
    "text",
    "image",
    "document",
    "tool_use",
    "tool_result",
    "thinking",
    "redacted_thinking",
];

/// OpenAI Responses input items the journal models: messages, calls and
/// their outputs, reasoning, and the server-side tool items it keeps as
/// they are.
pub const RESPONSES_ITEMS: &[&str] = &[
    "message",
    "function_call",
    "function_call_output",
    "custom_tool_call",
    "custom_tool_call_output",
    "reasoning",
    "web_search_call",
    "file_search_call",
    "computer_call",
    "computer_call_output",
    "code_interpreter_call",
    "image_generation_call",
    "local_shell_call",
    "local_shell_call_output",
    "mcp_call",
    "mcp_list_tools",
    "mcp_approval_request",
    "mcp_approval_response",
    "item_reference",
];

/// The members of a Gemini part that say what it is and that the journal
/// models.
pub const GEMINI_PARTS: &[&str] = &[
    "text",
    "inlineData",
    "fileData",
    "functionCall",
    "functionResponse",
    "executableCode",
    "codeExecutionResult",
];

/// Members of a Gemini part that qualify it rather than say what it is.
const GEMINI_QUALIFIERS: &[&str] = &[
    "thought",
    "thoughtSignature",
    "videoMetadata",
    "partMetadata",
];

/// OpenAI chat-completions content parts the journal models.
pub const OPENAI_PARTS: &[&str] = &["text", "image_url", "input_audio", "file", "refusal"];

/// The type of a Gemini part the journal does not model (its first member
/// that is not a qualifier), if it is one.
fn gemini_unmodeled(part: &Value) -> Option<String> {
    let o = part.as_object()?;
    if o.keys().any(|k| GEMINI_PARTS.contains(&k.as_str())) {
        return None;
    }
    o.keys()
        .find(|k| !GEMINI_QUALIFIERS.contains(&k.as_str()))
        .cloned()
}

/// The `type` of a block or item if it is not among `known`.
fn typed_unmodeled(v: &Value, known: &[&str]) -> Option<String> {
    let t = v.get("type")?.as_str()?;
    (!known.contains(&t)).then(|| t.to_owned())
}

/// The first unmodeled piece of one Anthropic content block: the block
/// itself (path suffix `""`), or a block inside a `tool_result`'s content
/// (suffix `.content[K]`), with its type. A `tool_result`'s content holds
/// blocks of the same kinds (text, image, document), so the same list
/// says which are modeled.
pub(crate) fn anthropic_block_unmodeled(block: &Value) -> Option<(String, String)> {
    anthropic_block_all(block).into_iter().next()
}

/// Every unmodeled piece of one Anthropic content block, as
/// [`anthropic_block_unmodeled`] names the first.
fn anthropic_block_all(block: &Value) -> Vec<(String, String)> {
    if let Some(t) = typed_unmodeled(block, ANTHROPIC_BLOCKS) {
        return vec![(String::new(), t)];
    }
    if block.get("type").and_then(Value::as_str) != Some("tool_result") {
        return Vec::new();
    }
    blocks_unmodeled(block.get("content"), ANTHROPIC_BLOCKS)
        .into_iter()
        .map(|(k, t)| (format!(".content[{k}]"), t))
        .collect()
}

/// The unmodeled blocks of an Anthropic message's `content`, those nested
/// in a `tool_result` included, each with its path below the message
/// (`content[J]`, `content[J].content[K]`).
pub(crate) fn anthropic_unmodeled(message: &Value) -> Vec<(String, String)> {
    message
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
        .flat_map(|(j, b)| {
            anthropic_block_all(b)
                .into_iter()
                .map(move |(below, t)| (format!("content[{j}]{below}"), t))
        })
        .collect()
}

fn blocks_unmodeled(content: Option<&Value>, known: &[&str]) -> Vec<(usize, String)> {
    content
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
        .filter_map(|(j, b)| typed_unmodeled(b, known).map(|t| (j, t)))
        .collect()
}

/// The types of the opaque items a message keeps in its payload (items or
/// blocks of its provider's format that the journal does not model), in
/// their order; empty for a message with none, or with no payload.
pub fn opaque_types(m: &InnerMessage) -> Vec<String> {
    let Some(text) = m.provider_payload.as_deref() else {
        return Vec::new();
    };
    // Most payloads have nothing opaque: parsed only when a known format
    // tags them.
    let Ok(Value::Object(p)) = serde_json::from_str::<Value>(text) else {
        return Vec::new();
    };
    let provider = p.get("provider").and_then(Value::as_str).unwrap_or("");
    match provider {
        ANTHROPIC => p
            .get("message")
            .map(|msg| {
                anthropic_unmodeled(msg)
                    .into_iter()
                    .map(|(_, t)| t)
                    .collect()
            })
            .unwrap_or_default(),
        OPENAI => p
            .get("message")
            .map(|msg| {
                blocks_unmodeled(msg.get("content"), OPENAI_PARTS)
                    .into_iter()
                    .map(|(_, t)| t)
                    .collect()
            })
            .unwrap_or_default(),
        super::responses::RESPONSES => p
            .get("items")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|i| typed_unmodeled(i, RESPONSES_ITEMS))
            .collect(),
        super::gemini::GEMINI => p
            .get("message")
            .and_then(|c| c.get("parts"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(gemini_unmodeled)
            .collect(),
        _ => Vec::new(),
    }
}

/// Refuses element `i` of `format`'s message list when it is, or holds, an
/// item of a type the journal does not model (`strict` imports).
///
/// # Errors
/// [`Error::Unmodeled`] naming the item's path and type.
pub(crate) fn refuse(format: ConversationFormat, i: usize, item: &Value) -> Result<()> {
    let found = match format {
        ConversationFormat::Anthropic => anthropic_unmodeled(item)
            .into_iter()
            .next()
            .map(|(at, t)| (format!("messages[{i}].{at}"), t)),
        ConversationFormat::OpenAi => blocks_unmodeled(item.get("content"), OPENAI_PARTS)
            .into_iter()
            .next()
            .map(|(j, t)| (format!("messages[{i}].content[{j}]"), t)),
        ConversationFormat::OpenAiResponses => {
            typed_unmodeled(item, RESPONSES_ITEMS).map(|t| (format!("input[{i}]"), t))
        }
        ConversationFormat::Gemini => item
            .get("parts")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
            .find_map(|(j, p)| {
                gemini_unmodeled(p).map(|t| (format!("contents[{i}].parts[{j}]"), t))
            }),
        ConversationFormat::Ollama | ConversationFormat::Jsonl => None,
    };
    match found {
        Some((at, kind)) => Err(Error::Unmodeled { at, kind }),
        None => Ok(()),
    }
}
