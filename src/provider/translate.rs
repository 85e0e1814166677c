//! What an export to another provider's format leaves out, or adds.
//!
//! A message imported from one provider keeps the provider's original in
//! its payload; exported to another provider it is rebuilt from its
//! neutral fields (text, tool calls, tool results), so every other part of
//! the original (images, documents, thinking and its signature, reasoning
//! items, server-side tool blocks, an error flag on a tool result, ...) is
//! not in the export. It stays in the journal; [`translation_notes`] names
//! each such part, and each message an export adds that the source did not
//! have, so that the command line can say so.

use serde_json::Value;

use super::conversation_format::ConversationFormat;
use super::payload::tagged;
use crate::model::{InnerMessage, Role};

/// One thing an export leaves out or adds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TranslationNote {
    /// The index of the message in the exported list (0-based).
    pub message: usize,
    /// The part left out (`image`, `thinking`, `reasoning`, `is_error`,
    /// ...), or `added` for a message the source did not have.
    pub kind: String,
    /// Which provider's format the part came from, and a word on it.
    pub detail: String,
}

/// The kinds of content parts every format carries over (text, tool calls,
/// tool results).
const CARRIED: &[&str] = &[
    "text",
    "input_text",
    "output_text",
    "tool_use",
    "tool_result",
    "function_call",
    "function_call_output",
    "custom_tool_call",
    "custom_tool_call_output",
    "message",
];

fn provider_of(format: ConversationFormat) -> Option<&'static str> {
    match format {
        ConversationFormat::OpenAi => Some(super::payload::OPENAI),
        ConversationFormat::Anthropic => Some(super::payload::ANTHROPIC),
        ConversationFormat::OpenAiResponses => Some(super::responses::RESPONSES),
        ConversationFormat::Gemini => Some(super::gemini::GEMINI),
        ConversationFormat::Ollama => Some(super::ollama::OLLAMA),
        ConversationFormat::Jsonl => None,
    }
}

/// The payload's provider and its original JSON, if any.
fn original(m: &InnerMessage) -> Option<(String, Value)> {
    let v: Value = serde_json::from_str(m.provider_payload.as_deref()?).ok()?;
    let provider = v.get("provider")?.as_str()?.to_owned();
    let body = v
        .get("message")
        .or_else(|| v.get("items"))
        .or_else(|| v.get("system"))?
        .clone();
    Some((provider, body))
}

/// The parts of an original message not carried over, by kind.
fn left_out(provider: &str, body: &Value) -> Vec<String> {
    let mut out = Vec::new();
    fn parts(list: Option<&Value>, out: &mut Vec<String>) {
        for p in list.and_then(Value::as_array).into_iter().flatten() {
            let kind = p
                .get("type")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .or_else(|| {
                    // Gemini parts are keyed by what they hold.
                    p.as_object().and_then(|o| {
                        o.keys()
                            .find(|k| {
                                !matches!(k.as_str(), "text" | "thoughtSignature" | "thought")
                            })
                            .cloned()
                    })
                });
            let thought = p.get("thought").and_then(Value::as_bool) == Some(true);
            match kind.as_deref() {
                _ if thought => out.push("thought".to_owned()),
                Some("functionCall" | "functionResponse") => {}
                Some(k)
                    if CARRIED.contains(&k)
                        && p.get("is_error").and_then(Value::as_bool) == Some(true) =>
                {
                    out.push("is_error".to_owned());
                }
                Some(k) if CARRIED.contains(&k) => {}
                Some(k) => out.push(k.to_owned()),
                None => {}
            }
            if p.get("thoughtSignature").is_some() {
                out.push("thoughtSignature".to_owned());
            }
        }
    }
    match provider {
        // Responses: a list of items, some of them messages with parts.
        super::responses::RESPONSES => {
            for item in body.as_array().into_iter().flatten() {
                match item.get("type").and_then(Value::as_str) {
                    None | Some("message") => parts(item.get("content"), &mut out),
                    Some(t) if CARRIED.contains(&t) => {}
                    Some(t) => out.push(t.to_owned()),
                }
            }
        }
        super::gemini::GEMINI => parts(body.get("parts"), &mut out),
        _ => {
            parts(body.get("content"), &mut out);
            for key in ["images", "thinking", "refusal", "audio"] {
                match body.get(key) {
                    None | Some(Value::Null) => {}
                    Some(Value::Array(a)) => {
                        out.extend(a.iter().map(|_| key.trim_end_matches('s').to_owned()))
                    }
                    Some(_) => out.push(key.to_owned()),
                }
            }
        }
    }
    out
}

/// What exporting `messages` to `target` leaves out of them, and the
/// messages it adds: a result for a call that never got one, a first user
/// message where the format needs one.
pub fn translation_notes(
    messages: &[InnerMessage],
    target: ConversationFormat,
) -> Vec<TranslationNote> {
    let Some(target_provider) = provider_of(target) else {
        return Vec::new();
    };
    let mut notes = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        // The rest of a message whose whole original is on its first part.
        if matches!(
            tagged(m, super::payload::ANTHROPIC),
            Some(super::payload::Tagged::PartOf(_))
        ) || matches!(
            tagged(m, super::gemini::GEMINI),
            Some(super::payload::Tagged::PartOf(_))
        ) {
            continue;
        }
        let Some((provider, body)) = original(m) else {
            continue;
        };
        if provider == target_provider {
            continue;
        }
        for kind in left_out(&provider, &body) {
            // Carried across as the target's own parts (`media.rs`), or
            // marked in the text (`openai::ERROR_MARK`).
            let translated = match (provider.as_str(), target) {
                (super::payload::ANTHROPIC, ConversationFormat::OpenAi) => {
                    kind == "is_error" || media_carried(&body, &kind)
                }
                (super::payload::OPENAI, ConversationFormat::Anthropic) => {
                    matches!(kind.as_str(), "image_url" | "file") && openai_carried(&body, &kind)
                }
                _ => false,
            };
            if translated {
                continue;
            }
            notes.push(TranslationNote {
                message: i,
                kind,
                detail: format!("from {provider}, not in {}", target.name()),
            });
        }
    }
    // Calls without a result get one saying they were interrupted.
    let answered: std::collections::HashSet<&str> = messages
        .iter()
        .filter_map(|m| m.tool_call_id.as_ref().map(|c| c.as_str()))
        .collect();
    for (i, m) in messages.iter().enumerate() {
        for c in &m.tool_calls {
            if !answered.contains(c.call_id.as_str()) {
                notes.push(TranslationNote {
                    message: i,
                    kind: "added".into(),
                    detail: format!(
                        "a result for call {} saying it was interrupted (every call needs one)",
                        c.call_id
                    ),
                });
            }
        }
    }
    if target == ConversationFormat::Anthropic
        && messages
            .iter()
            .find(|m| m.role != Role::System)
            .is_some_and(|m| m.role == Role::Assistant)
    {
        notes.push(TranslationNote {
            message: 0,
            kind: "added".into(),
            detail: format!(
                "a first user message {:?} (Anthropic needs one before the assistant)",
                super::anthropic::LEADING_USER_TEXT
            ),
        });
    }
    notes
}

/// True when every block of kind `kind` in an Anthropic original has an
/// OpenAI equivalent (`media::anthropic_to_openai`).
fn media_carried(body: &Value, kind: &str) -> bool {
    body.get("content")
        .and_then(Value::as_array)
        .is_some_and(|blocks| {
            blocks
                .iter()
                .filter(|b| b.get("type").and_then(Value::as_str) == Some(kind))
                .all(|b| super::media::anthropic_to_openai(b).is_some())
        })
}

/// True when every part of kind `kind` in an OpenAI original has an
/// Anthropic equivalent (`media::openai_to_anthropic`).
fn openai_carried(body: &Value, kind: &str) -> bool {
    body.get("content")
        .and_then(Value::as_array)
        .is_some_and(|parts| {
            parts
                .iter()
                .filter(|p| p.get("type").and_then(Value::as_str) == Some(kind))
                .all(|p| super::media::openai_to_anthropic(p).is_some())
        })
}
