//! The `Conversation` slice: the conversation-state spec's view, by message id.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::model::{EvaluationId, InnerMessage, MessageId, Role};
use crate::state::Messages;
use crate::state::keys::EvalKey;

/// The ids of one turn's messages: the assistant message and the tool results
/// of its calls. Ids are stored with their `sequence` so they keep message order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnIds {
    /// The turn number (`InnerMessage::turn`, 1 for the first assistant message).
    pub turn_number: u32,
    /// `(sequence, message_id)` of the assistant message (the lowest, if a turn
    /// has several).
    pub assistant: Option<(u64, MessageId)>,
    /// `(sequence, message_id)` of the tool-role messages of the turn,
    /// sorted, distinct.
    pub tools: Vec<(u64, MessageId)>,
}

impl TurnIds {
    fn numbered(turn_number: u32) -> Self {
        TurnIds {
            turn_number,
            ..TurnIds::default()
        }
    }

    /// The assistant message's id.
    pub fn assistant_id(&self) -> Option<MessageId> {
        self.assistant.map(|(_, id)| id)
    }

    /// The tool messages' ids, in sequence order.
    pub fn tool_message_ids(&self) -> impl Iterator<Item = MessageId> + '_ {
        self.tools.iter().map(|(_, id)| *id)
    }
}

/// One evaluation's conversation, by message id.
///
/// Sorted vectors, not trees: messages nearly always come in order, so an
/// insert is a push, and a tree's node per turn took more memory than the
/// messages' own index (a third of the frames' bytes).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ConversationIds {
    /// The system message (the lowest sequence, if several).
    pub(crate) system: Option<(u64, MessageId)>,
    /// The user messages, sorted, distinct.
    pub(crate) users: Vec<(u64, MessageId)>,
    /// The turns, sorted by number, distinct.
    pub(crate) turns: Vec<TurnIds>,
}

/// Inserts `x` into the sorted, distinct `v` unless it is there (a push
/// when it sorts last, as nearly always).
fn insert_sorted<T: Ord>(v: &mut Vec<T>, x: T) {
    if v.last().is_none_or(|last| *last < x) {
        v.push(x);
    } else if let Err(i) = v.binary_search(&x) {
        v.insert(i, x);
    }
}

/// The conversation-state spec's view of every evaluation: its system
/// message, its user messages and its turns (assistant message + tool
/// results), by `InnerMessage::turn` (state slice).
///
/// It stores message ids, not copies: resolve them against [`Messages`] with
/// [`Conversation::view`]. It depends only on the set of distinct messages,
/// never on their arrival order. O(log n) per message.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Conversation {
    evals: BTreeMap<EvalKey, ConversationIds>,
}

/// A turn resolved against [`Messages`] (the conversation-state spec's
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

/// One evaluation's conversation resolved against [`Messages`].
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

impl Conversation {
    /// The evaluation's turns (ids only), by number.
    pub fn turns(&self, eval: EvaluationId) -> impl Iterator<Item = &TurnIds> + '_ {
        self.evals
            .get(&eval.into())
            .into_iter()
            .flat_map(|c| c.turns.iter())
    }

    /// The system message id of an evaluation.
    pub fn system_message_id(&self, eval: EvaluationId) -> Option<MessageId> {
        self.evals.get(&eval.into())?.system.map(|(_, id)| id)
    }

    /// The user message ids of an evaluation, by sequence.
    pub fn user_message_ids(&self, eval: EvaluationId) -> impl Iterator<Item = MessageId> + '_ {
        self.evals
            .get(&eval.into())
            .into_iter()
            .flat_map(|c| c.users.iter().map(|(_, id)| *id))
    }

    /// The evaluations that have a conversation, in id order.
    pub fn evaluations(&self) -> impl Iterator<Item = EvaluationId> + '_ {
        self.evals.keys().map(|k| k.id())
    }

    /// The conversation of `eval` with its messages looked up in `messages`
    /// (normally the same state's [`Messages`]); `None` if it has none.
    pub fn view<'a>(
        &self,
        eval: EvaluationId,
        messages: &'a Messages,
    ) -> Option<ConversationView<'a>> {
        let c = self.evals.get(&eval.into())?;
        let look = |k: &(u64, MessageId)| messages.get_at(eval, k.0, k.1);
        let system_message = c.system.as_ref().and_then(look);
        let user_messages: Vec<&InnerMessage> = c.users.iter().filter_map(look).collect();
        let turns: Vec<TurnView<'a>> = c
            .turns
            .iter()
            .map(|t| {
                let assistant_message = t.assistant.as_ref().and_then(look);
                TurnView {
                    turn_number: t.turn_number,
                    assistant_message,
                    tool_messages: t.tools.iter().filter_map(look).collect(),
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

    /// Folds a (new, not duplicate) message.
    pub(crate) fn on_message(&mut self, m: &InnerMessage) {
        self.on_parts(m.evaluation_id, (m.sequence, m.message_id), m.role, m.turn);
    }

    /// Folds a (new, not duplicate) message given by the parts it looks at.
    pub(crate) fn on_parts(
        &mut self,
        eval: EvaluationId,
        key: (u64, MessageId),
        role: Role,
        turn_number: u32,
    ) {
        let c = self.evals.entry(eval.into()).or_default();
        let lowest = |slot: &mut Option<(u64, MessageId)>| {
            if slot.is_none_or(|s| key < s) {
                *slot = Some(key);
            }
        };
        match role {
            Role::System => lowest(&mut c.system),
            Role::User | Role::Other => insert_sorted(&mut c.users, key),
            Role::Assistant => lowest(&mut turn(c, turn_number).assistant),
            Role::Tool => insert_sorted(&mut turn(c, turn_number).tools, key),
        }
    }

    /// Rebuilds the slice from the messages.
    pub(crate) fn from_messages(messages: &Messages) -> Self {
        let mut out = Conversation::default();
        for m in messages.iter() {
            out.on_message(m);
        }
        out
    }

    /// Adds the conversation of evaluation `eval` (not there yet) from its
    /// messages as `(key, role, turn)`, sorted by key: the same as folding
    /// them, built in one pass. Reorders `msgs`.
    pub(crate) fn push_sorted(
        &mut self,
        eval: EvaluationId,
        msgs: &mut Vec<((u64, MessageId), Role, u32)>,
    ) {
        let mut c = ConversationIds {
            system: msgs
                .iter()
                .find(|(_, role, _)| *role == Role::System)
                .map(|(k, ..)| *k),
            ..ConversationIds::default()
        };
        c.users = msgs
            .iter()
            .filter(|(_, role, _)| matches!(role, Role::User | Role::Other))
            .map(|(k, ..)| *k)
            .collect();
        msgs.retain(|(_, role, _)| matches!(role, Role::Assistant | Role::Tool));
        // Stable: keys stay sorted within a turn.
        msgs.sort_by_key(|(_, _, turn)| *turn);
        c.turns = msgs
            .chunk_by(|a, b| a.2 == b.2)
            .filter_map(|group| {
                let turn_number = group.first()?.2;
                let assistant = group
                    .iter()
                    .find(|(_, role, _)| *role == Role::Assistant)
                    .map(|(k, ..)| *k);
                let tools = group
                    .iter()
                    .filter(|(_, role, _)| *role == Role::Tool)
                    .map(|(k, ..)| *k)
                    .collect();
                Some(TurnIds {
                    turn_number,
                    assistant,
                    tools,
                })
            })
            .collect();
        self.evals.insert(eval.into(), c);
    }

    /// Gives back the room kept for more messages of `eval` (a finished
    /// evaluation's). A message that still comes is inserted as usual.
    pub(crate) fn shrink(&mut self, eval: EvaluationId) {
        if let Some(c) = self.evals.get_mut(&eval.into()) {
            c.users.shrink_to_fit();
            c.turns.shrink_to_fit();
        }
    }

    /// Moves in the evaluations of `other`, which this one does not have.
    pub(crate) fn append(&mut self, other: &mut Conversation) {
        self.evals.append(&mut other.evals);
    }

    pub(crate) fn entries(&self) -> impl Iterator<Item = (EvaluationId, &ConversationIds)> + '_ {
        self.evals.iter().map(|(k, v)| (k.id(), v))
    }
}

/// The turn `number` of `c`, made if it is not there (at the end, nearly
/// always: turns come in order).
fn turn(c: &mut ConversationIds, number: u32) -> &mut TurnIds {
    let i = match c.turns.last() {
        Some(t) if t.turn_number == number => c.turns.len() - 1,
        Some(t) if t.turn_number > number => {
            match c.turns.binary_search_by_key(&number, |t| t.turn_number) {
                Ok(i) => i,
                Err(i) => {
                    c.turns.insert(i, TurnIds::numbered(number));
                    i
                }
            }
        }
        _ => {
            c.turns.push(TurnIds::numbered(number));
            c.turns.len() - 1
        }
    };
    &mut c.turns[i]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_messages_into_turns_whatever_the_order() {
        let eval = EvaluationId::new();
        let sys = InnerMessage::new(Role::System, "s", eval, 0);
        let user = InnerMessage::new(Role::User, "u", eval, 1);
        // Another role counts as a user's message, folded or built in bulk.
        let other = InnerMessage::new(Role::Other, "o", eval, 5);
        let mut a = InnerMessage::new(Role::Assistant, "a", eval, 2);
        a.turn = 1;
        let mut t2 = InnerMessage::new(Role::Tool, "r2", eval, 4);
        t2.turn = 1;
        let mut t1 = InnerMessage::new(Role::Tool, "r1", eval, 3);
        t1.turn = 1;
        let mut msgs = Messages::default();
        let mut c = Conversation::default();
        for m in [&t2, &a, &other, &user, &t1, &sys] {
            assert!(msgs.insert(m));
            c.on_message(m);
        }
        assert_eq!(c, Conversation::from_messages(&msgs));
        let mut sorted: Vec<_> = msgs
            .iter()
            .map(|m| ((m.sequence, m.message_id), m.role, m.turn))
            .collect();
        let mut bulk = Conversation::default();
        bulk.push_sorted(eval, &mut sorted);
        assert_eq!(bulk, c);
        let v = c.view(eval, &msgs).expect("view");
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
        assert_eq!(c.turns(eval).count(), 1);
    }
}
