//! The messages of a rebuilt Anthropic request ([`Out`], merged when two
//! in a row have one role) and its user turns: the captured messages they
//! were sent as, consecutive, or one message built from their parts (tool
//! results first, then the user messages).

use std::collections::HashMap;

use serde_json::{Map, Value, json};

use crate::model::{INTERRUPTED_RESULT, InnerMessage, MessageId, ToolStatus};
use crate::provider::history::Res;
use crate::provider::media::openai_images_as_anthropic;
use crate::provider::payload::{ANTHROPIC, Tagged, tagged, tagged_message};
use crate::provider::read::{Block, anthropic_blocks};

/// The content of an emitted message.
pub(super) enum Content {
    /// A captured message, as it was.
    Verbatim(Map<String, Value>),
    /// Content blocks built here.
    Blocks(Vec<Value>),
}

impl Content {
    fn into_blocks(self) -> Vec<Value> {
        match self {
            Content::Blocks(b) => b,
            Content::Verbatim(mut m) => match m.remove("content") {
                Some(Value::String(s)) => vec![text_block(&s)],
                Some(Value::Array(a)) => a,
                _ => Vec::new(),
            },
        }
    }
}

pub(super) struct Out {
    pub(super) role: &'static str,
    pub(super) content: Content,
}

impl Out {
    pub(super) fn finish(self) -> Value {
        match self.content {
            Content::Verbatim(m) => Value::Object(m),
            Content::Blocks(mut b) => {
                let content = if b.is_empty() {
                    Value::String(String::new())
                } else if b.len() == 1 && is_plain_text(&b[0]) {
                    b.remove(0)
                        .get_mut("text")
                        .map(Value::take)
                        .unwrap_or_default()
                } else {
                    Value::Array(b)
                };
                json!({"role": self.role, "content": content})
            }
        }
    }
}

/// Appends a message, merging it into the previous one if it has the same
/// role (roles must alternate).
pub(super) fn push(out: &mut Vec<Out>, role: &'static str, content: Content) {
    if let Some(last) = out.last_mut() {
        if last.role == role {
            let prev = std::mem::replace(&mut last.content, Content::Blocks(Vec::new()));
            let mut blocks = prev.into_blocks();
            blocks.extend(content.into_blocks());
            last.content = Content::Blocks(blocks);
            return;
        }
    }
    out.push(Out { role, content });
}

pub(super) fn text_block(text: &str) -> Value {
    json!({"type": "text", "text": text})
}

/// `{"type": "text", "text": <string>}` and nothing else.
fn is_plain_text(b: &Value) -> bool {
    b.as_object().is_some_and(|o| {
        o.len() == 2
            && o.get("type").and_then(Value::as_str) == Some("text")
            && o.get("text").is_some_and(Value::is_string)
    })
}

/// What goes into one user message.
pub(super) enum Piece<'r, 'a> {
    Result(&'r Res<'a>),
    User(&'a InnerMessage),
}

/// The captured Anthropic message `m` is (part of), if any.
fn original_of(
    m: &InnerMessage,
    by_id: &HashMap<MessageId, &InnerMessage>,
) -> Option<Map<String, Value>> {
    match tagged(m, ANTHROPIC)? {
        Tagged::Message(orig) => Some(orig),
        Tagged::PartOf(id) => tagged_message(by_id.get(&id)?, ANTHROPIC),
        Tagged::System(_) => None,
    }
}

/// The blocks of a captured user message, each with what it is.
fn user_blocks(orig: &Map<String, Value>) -> Option<Vec<(Value, Block<'_>)>> {
    if orig.get("role").and_then(Value::as_str) != Some("user") {
        return None;
    }
    let parsed = anthropic_blocks(orig, "").ok()?;
    let raw: Vec<Value> = match orig.get("content")? {
        Value::String(s) => vec![text_block(s)],
        Value::Array(a) => a.clone(),
        _ => return None,
    };
    Some(raw.into_iter().zip(parsed).collect())
}

/// The user message made of `pieces` (results first, then user messages).
fn user_slot(
    pieces: &[Piece<'_, '_>],
    by_id: &HashMap<MessageId, &InnerMessage>,
) -> Option<Content> {
    if pieces.is_empty() {
        return None;
    }
    if let Some(orig) = verbatim_user(pieces) {
        return Some(Content::Verbatim(orig));
    }
    let mut blocks = Vec::new();
    for p in pieces {
        match p {
            Piece::Result(Res::Real { msg, call }) => {
                let original = original_of(msg, by_id).and_then(|orig| {
                    user_blocks(&orig)?
                        .into_iter()
                        .find_map(|(raw, b)| match b {
                            Block::ToolResult { id, .. } if id == call.call_id.as_str() => {
                                Some(raw)
                            }
                            _ => None,
                        })
                });
                blocks.push(original.unwrap_or_else(|| {
                    tool_result(
                        call.call_id.as_str(),
                        &msg.content,
                        call.status == ToolStatus::Failed,
                    )
                }));
            }
            Piece::Result(Res::Synthetic(call)) => {
                blocks.push(tool_result(call.call_id.as_str(), INTERRUPTED_RESULT, true));
            }
            Piece::User(m) => match original_of(m, by_id).as_ref().and_then(user_blocks) {
                Some(parts) => blocks.extend(parts.into_iter().filter_map(|(raw, b)| match b {
                    Block::ToolResult { .. } | Block::ToolUse { .. } => None,
                    _ => Some(raw),
                })),
                None => {
                    if !m.content.is_empty() {
                        blocks.push(text_block(&m.content));
                    }
                    // Images of an OpenAI original, as image blocks.
                    blocks.extend(openai_images_as_anthropic(m));
                }
            },
        }
    }
    Some(Content::Blocks(blocks))
}

fn tool_result(id: &str, content: &str, is_error: bool) -> Value {
    let mut b = json!({"type": "tool_result", "tool_use_id": id, "content": content});
    if is_error {
        b["is_error"] = Value::Bool(true);
    }
    b
}

/// The captured message the pieces are exactly (its leader first, its other
/// parts after, no synthetic result), if they are.
fn verbatim_user(pieces: &[Piece<'_, '_>]) -> Option<Map<String, Value>> {
    let leader = match pieces.first()? {
        Piece::Result(Res::Real { msg, .. }) | Piece::User(msg) => *msg,
        Piece::Result(Res::Synthetic(_)) => return None,
    };
    let orig = tagged_message(leader, ANTHROPIC)?;
    let ids = {
        let blocks = user_blocks(&orig)?;
        let mut ids: Vec<String> = Vec::new();
        let mut other = false;
        for (_, b) in &blocks {
            match b {
                Block::ToolResult { id, .. } => {
                    if other || ids.iter().any(|i| i == id) {
                        return None; // results must come first, once each
                    }
                    ids.push((*id).to_owned());
                }
                Block::ToolUse { .. } => return None,
                _ => other = true,
            }
        }
        if pieces.len() != ids.len() + usize::from(other) {
            return None;
        }
        ids
    };
    let mut results = 0;
    for (k, p) in pieces.iter().enumerate() {
        let m = match p {
            Piece::Result(Res::Real { msg, call }) => {
                if !ids.iter().any(|i| i == call.call_id.as_str()) {
                    return None;
                }
                results += 1;
                *msg
            }
            Piece::Result(Res::Synthetic(_)) => return None,
            Piece::User(m) => *m,
        };
        if k > 0 {
            match tagged(m, ANTHROPIC) {
                Some(Tagged::PartOf(id)) if id == leader.message_id => {}
                _ => return None,
            }
        }
    }
    (results == ids.len()).then_some(orig)
}

/// Emits the user turn made of `pieces`: the captured user messages they
/// are, one after another, as the provider was sent them (consecutive user
/// messages, which the API takes as one turn), else one message built from
/// them.
pub(super) fn push_users(
    out: &mut Vec<Out>,
    pieces: &[Piece<'_, '_>],
    by_id: &HashMap<MessageId, &InnerMessage>,
) {
    if let Some(messages) = verbatim_users(pieces) {
        out.extend(messages.into_iter().map(|m| Out {
            role: "user",
            content: Content::Verbatim(m),
        }));
    } else if let Some(c) = user_slot(pieces, by_id) {
        push(out, "user", c);
    }
}

/// The captured user messages `pieces` are exactly, in order, when there
/// are several (one is [`verbatim_user`]'s).
fn verbatim_users(pieces: &[Piece<'_, '_>]) -> Option<Vec<Map<String, Value>>> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < pieces.len() {
        let leader = match &pieces[i] {
            Piece::Result(Res::Real { msg, .. }) | Piece::User(msg) => *msg,
            Piece::Result(Res::Synthetic(_)) => return None,
        };
        let orig = tagged_message(leader, ANTHROPIC)?;
        let blocks = user_blocks(&orig)?;
        let is_result = |b: &Block<'_>| matches!(b, Block::ToolResult { .. });
        let results = blocks.iter().filter(|(_, b)| is_result(b)).count();
        let other = blocks.iter().any(|(_, b)| !is_result(b));
        let len = results + usize::from(other);
        if len == 0 || i + len > pieces.len() {
            return None;
        }
        out.push(verbatim_user(&pieces[i..i + len])?);
        i += len;
    }
    (out.len() > 1).then_some(out)
}
