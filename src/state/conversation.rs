//! The conversation-state spec's view of an evaluation: its system
//! message, its user messages and its turns (assistant message and tool
//! results, by `InnerMessage::turn`), read from the [`Messages`] slice when
//! asked for. Nothing is folded or stored for it: it depends only on the
//! set of distinct messages, never on their arrival order.

use chrono::{DateTime, Utc};

use crate::model::{EvaluationId, InnerMessage, Role};
use crate::state::Messages;

/// One turn of an evaluation (the conversation-state spec's
/// `ConversationTurn`).
#[derive(Clone, Debug, PartialEq)]
pub struct TurnView<'a> {
    /// The turn number.
    pub turn_number: u32,
    /// The assistant message, if it was recorded.
    pub assistant_message: Option<&'a InnerMessage>,
    /// The tool results of the turn, by sequence.
    pub tool_messages: Vec<&'a InnerMessage>,
    /// The evaluation it belongs to.
    pub evaluation_id: EvaluationId,
    /// The provider's own form of the assistant message (JSON text), if kept.
    pub provider_payload: Option<&'a str>,
    /// When the assistant message was created.
    pub created_at: Option<DateTime<Utc>>,
}

/// One evaluation's conversation (the conversation-state spec's
/// `ConversationState`).
#[derive(Clone, Debug, PartialEq)]
pub struct ConversationView<'a> {
    /// The evaluation.
    pub evaluation_id: EvaluationId,
    /// The system message.
    pub system_message: Option<&'a InnerMessage>,
    /// The user messages, by sequence.
    pub user_messages: Vec<&'a InnerMessage>,
    /// The turns, by number.
    pub turns: Vec<TurnView<'a>>,
    /// The prompt namespace (of the system message, else the first message).
    pub prompt_ns: &'a str,
    /// The prompt key.
    pub prompt_key: &'a str,
    /// When the conversation began (its system message, else its first).
    pub created_at: Option<DateTime<Utc>>,
    /// The spec's `state_id`: here the evaluation's id, which names the
    /// conversation state for its whole life (the journal never replaces a
    /// state, so one id per evaluation is enough).
    pub state_id: EvaluationId,
}

/// The conversation of `eval` in `messages`; `None` if it has no message.
/// The system message is the lowest-sequence system one; user (and other)
/// messages are listed by sequence; a turn holds the lowest-sequence
/// assistant message of its number and its tool messages by sequence,
/// turns by number. O(messages of `eval`).
pub(crate) fn view(eval: EvaluationId, messages: &Messages) -> Option<ConversationView<'_>> {
    let mut system_message = None;
    let mut user_messages = Vec::new();
    let mut parts: Vec<&InnerMessage> = Vec::new();
    let mut any = None;
    for m in messages.for_evaluation(eval) {
        any.get_or_insert(m);
        match m.role {
            Role::System => {
                system_message.get_or_insert(m);
            }
            Role::User | Role::Other => user_messages.push(m),
            Role::Assistant | Role::Tool => parts.push(m),
        }
    }
    any?;
    // Stable: by turn number, each turn's messages keep sequence order.
    parts.sort_by_key(|m| m.turn);
    let turns: Vec<TurnView<'_>> = parts
        .chunk_by(|a, b| a.turn == b.turn)
        .map(|group| {
            let assistant_message = group.iter().copied().find(|m| m.role == Role::Assistant);
            TurnView {
                turn_number: group[0].turn,
                assistant_message,
                tool_messages: group
                    .iter()
                    .copied()
                    .filter(|m| m.role == Role::Tool)
                    .collect(),
                evaluation_id: eval,
                provider_payload: assistant_message.and_then(|m| m.provider_payload.as_deref()),
                created_at: assistant_message.map(|m| m.created_at),
            }
        })
        .collect();
    let first = system_message
        .or_else(|| user_messages.first().copied())
        .or_else(|| turns.first().and_then(|t| t.assistant_message));
    Some(ConversationView {
        evaluation_id: eval,
        prompt_ns: first.map_or("", |m| m.prompt_ns.as_str()),
        prompt_key: first.map_or("", |m| m.prompt_key.as_str()),
        created_at: first.map(|m| m.created_at),
        state_id: eval,
        system_message,
        user_messages,
        turns,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_messages_into_turns_whatever_the_order() {
        let eval = EvaluationId::new();
        let sys = InnerMessage::new(Role::System, "s", eval, 0);
        let user = InnerMessage::new(Role::User, "u", eval, 1);
        // Another role counts as a user's message.
        let other = InnerMessage::new(Role::Other, "o", eval, 5);
        let mut a = InnerMessage::new(Role::Assistant, "a", eval, 2);
        a.turn = 1;
        let mut t2 = InnerMessage::new(Role::Tool, "r2", eval, 4);
        t2.turn = 1;
        let mut t1 = InnerMessage::new(Role::Tool, "r1", eval, 3);
        t1.turn = 1;
        let mut msgs = Messages::default();
        for m in [&t2, &a, &other, &user, &t1, &sys] {
            assert!(msgs.insert(m));
        }
        let v = view(eval, &msgs).expect("view");
        assert_eq!(v.system_message.map(|m| m.sequence), Some(0));
        assert_eq!(v.user_messages.len(), 2);
        assert_eq!(v.turns.len(), 1);
        assert_eq!(v.turns[0].assistant_message.map(|m| m.sequence), Some(2));
        let seqs: Vec<u64> = v.turns[0]
            .tool_messages
            .iter()
            .map(|m| m.sequence)
            .collect();
        assert_eq!(seqs, vec![3, 4]);
        assert!(view(EvaluationId::new(), &msgs).is_none());
    }
}
