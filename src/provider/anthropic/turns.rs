//! The user turns of a rebuilt Anthropic request: the captured messages
//! they were sent as, consecutive, or one message built from their parts.

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::{ANTHROPIC, Content, Out, Piece, Res, push, user_blocks, user_slot, verbatim_user};
use crate::model::{InnerMessage, MessageId};
use crate::provider::read::Block;
use crate::provider::tagged_message;

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
