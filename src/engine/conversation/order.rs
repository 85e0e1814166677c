//! The order a provider must see messages in, and the check the engine
//! makes before it sends a history: every tool call answered, right after
//! the message that made it.

use std::collections::BTreeMap;

use crate::event::conversation::{ConversationMessage, TurnId};
use crate::model::Role;
use crate::model::{CallId, MessageId};
use crate::state::ConversationLog;

use super::adapter::ChatInputMessage;

/// Puts `messages` (a suffix of the log, in append order) in the order a
/// provider must see them: each turn's output messages right after the
/// turn's input, before any message appended after that input.
///
/// Append order differs only when a turn was interrupted and messages were
/// appended before it was settled: the tool results that settle it are
/// appended after a user message that the provider must see after them.
/// A turn whose input is older than `messages` goes first (its calls were
/// cut off: the history builder drops results that lead). Stable and O(n)
/// when the order is already right (nearly always).
pub(crate) fn send_order(log: &ConversationLog, messages: &mut Vec<ConversationMessage>) {
    let pos: BTreeMap<MessageId, usize> = messages
        .iter()
        .enumerate()
        .map(|(i, m)| (m.id, i))
        .collect();
    let mut anchors: BTreeMap<TurnId, usize> = BTreeMap::new();
    let keys: Vec<(usize, u8, usize)> = messages
        .iter()
        .enumerate()
        .map(|(i, m)| match m.turn_id {
            None => (i + 1, 0, i),
            Some(t) => {
                let anchor = *anchors.entry(t).or_insert_with(|| match log.turn(t) {
                    Some(r) if !r.input_messages.is_empty() => r
                        .input_messages
                        .iter()
                        .filter_map(|id| pos.get(id))
                        .max()
                        .map_or(0, |p| p + 1),
                    _ => i + 1,
                });
                (anchor, 1, i)
            }
        })
        .collect();
    if keys.windows(2).all(|w| w[0] < w[1]) {
        return;
    }
    let mut order: Vec<usize> = (0..messages.len()).collect();
    order.sort_by_key(|&i| keys[i]);
    let mut old: Vec<Option<ConversationMessage>> = messages.drain(..).map(Some).collect();
    messages.extend(order.into_iter().filter_map(|i| old[i].take()));
}

/// Drops from `messages` (in send order) what comes after turn `turn`'s
/// block (its input, then its outputs): messages appended while the turn
/// was running or interrupted are the next turn's input, not this one's.
/// Keeps everything when no message of the turn is there.
pub(crate) fn cut_after_turn(
    messages: &mut Vec<ConversationMessage>,
    turn: TurnId,
    input: &[MessageId],
) {
    let last = messages
        .iter()
        .rposition(|m| m.turn_id == Some(turn) || input.contains(&m.id));
    if let Some(k) = last {
        messages.truncate(k + 1);
    }
}

/// The first tool call of `messages` left without a result (or a result
/// that answers no call of the message before it), described; `None` when
/// every call is answered by tool messages right after the assistant
/// message that made it, as OpenAI and Anthropic require.
pub(crate) fn unanswered_call(messages: &[ChatInputMessage]) -> Option<String> {
    let mut open: Vec<(&CallId, &str, bool)> = Vec::new();
    let mut at = 0;
    let unanswered = |open: &[(&CallId, &str, bool)], at: usize, before: String| {
        open.iter().find(|(_, _, done)| !done).map(|(id, name, _)| {
            format!(
                "messages[{at}]: tool call {:?} ({name}) has no result {before}",
                id.as_str()
            )
        })
    };
    for (i, m) in messages.iter().enumerate() {
        if m.role == Role::Tool {
            let id = m.tool_call_id.as_ref();
            match open.iter_mut().find(|(c, _, done)| Some(*c) == id && !done) {
                Some(slot) => slot.2 = true,
                None => {
                    return Some(format!(
                        "messages[{i}]: tool result for {:?} answers no call of the assistant message before it",
                        id.map_or("", |c| c.as_str())
                    ));
                }
            }
            continue;
        }
        if let Some(e) = unanswered(&open, at, format!("before messages[{i}]")) {
            return Some(e);
        }
        open = m
            .tool_calls
            .iter()
            .map(|c| (&c.call_id, c.name.as_str(), false))
            .collect();
        at = i;
    }
    unanswered(&open, at, "at the end of the history".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ToolCallRecord;

    fn tool(call: &str) -> ChatInputMessage {
        let mut m = ConversationMessage::new(Role::Tool, "r");
        m.tool_call_id = Some(call.into());
        ChatInputMessage::from(&m)
    }

    #[test]
    fn calls_must_be_answered_right_after_their_message() {
        let user = ChatInputMessage::from(&ConversationMessage::user("u"));
        let mut a = ConversationMessage::assistant("");
        a.tool_calls = vec![
            ToolCallRecord::new("c1", "t", "{}"),
            ToolCallRecord::new("c2", "t", "{}"),
        ];
        let a = ChatInputMessage::from(&a);
        let ok = [
            user.clone(),
            a.clone(),
            tool("c2"),
            tool("c1"),
            user.clone(),
        ];
        assert_eq!(unanswered_call(&ok), None);
        let late = [a.clone(), tool("c1"), user.clone(), tool("c2")];
        assert!(unanswered_call(&late).is_some_and(|e| e.contains("\"c2\"")));
        let open = [user.clone(), a.clone(), tool("c1")];
        assert!(unanswered_call(&open).is_some_and(|e| e.contains("at the end")));
        let orphan = [user.clone(), tool("c1")];
        assert!(unanswered_call(&orphan).is_some_and(|e| e.contains("answers no call")));
        let twice = [a, tool("c1"), tool("c1"), tool("c2")];
        assert!(unanswered_call(&twice).is_some());
    }
}
