//! The `Messages` slice: every message of the session, ordered and deduplicated.

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use serde::ser::{SerializeSeq, SerializeStruct};
use serde::{Deserialize, Serialize, Serializer};

use crate::model::{CallId, EvaluationId, InnerMessage, MessageId, ToolStatus};

/// The status of one tool call, as joined from everything known about it.
#[derive(Clone, Debug, Default)]
struct CallSlot {
    /// The highest-ranked status seen, from `ToolStatus` events and from the
    /// records of the messages that made the call.
    status: ToolStatus,
    /// The messages (by `(sequence, message_id)`) whose `tool_calls` hold the call.
    holders: Vec<(u64, MessageId)>,
}

/// Every [`InnerMessage`] of the session (state slice).
///
/// Ordered by evaluation (UUIDv7 ids: id order is time order), then by
/// `(sequence, message_id)`, so the order never depends on arrival order.
/// Deduplicated by `message_id`: the first message with an id wins (copies of
/// one message, as at-least-once delivery produces, are simply ignored).
///
/// The status of a tool call inside its assistant message is the highest
/// [`ToolStatus::rank`] among the `ToolStatus` events of that call and the
/// message's own record, whatever order they arrived in; a status that
/// arrives before its assistant message is kept and applied when it comes.
///
/// Cost: O(log n) per message, O(1) amortized per status (a status only
/// moves up a four-level lattice). Binary snapshots hold the messages and the
/// statuses of calls no message holds yet; the indexes are rebuilt on decode.
#[derive(Clone, Default, Deserialize)]
#[serde(try_from = "MessagesRepr")]
pub struct Messages {
    by_eval: BTreeMap<EvaluationId, BTreeMap<(u64, MessageId), InnerMessage>>,
    index: HashMap<MessageId, (EvaluationId, u64)>,
    calls: HashMap<(EvaluationId, CallId), CallSlot>,
}

fn join(a: ToolStatus, b: ToolStatus) -> ToolStatus {
    if b.rank() > a.rank() { b } else { a }
}

impl Messages {
    /// Number of distinct messages.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// True when there is no message.
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// All messages, by evaluation then `(sequence, message_id)`.
    pub fn iter(&self) -> impl Iterator<Item = &InnerMessage> + '_ {
        self.by_eval.values().flat_map(|m| m.values())
    }

    /// The messages of one evaluation, by `(sequence, message_id)`.
    pub fn for_evaluation(&self, eval: EvaluationId) -> impl Iterator<Item = &InnerMessage> + '_ {
        self.by_eval.get(&eval).into_iter().flat_map(|m| m.values())
    }

    /// The message with this id.
    pub fn get(&self, message_id: MessageId) -> Option<&InnerMessage> {
        let (eval, sequence) = self.index.get(&message_id)?;
        self.get_at(*eval, *sequence, message_id)
    }

    /// The last message of an evaluation (highest sequence).
    pub fn last_for(&self, eval: EvaluationId) -> Option<&InnerMessage> {
        self.by_eval.get(&eval)?.values().next_back()
    }

    /// The evaluations that have messages, in id order.
    pub fn evaluations(&self) -> impl Iterator<Item = EvaluationId> + '_ {
        self.by_eval.keys().copied()
    }

    pub(crate) fn get_at(
        &self,
        eval: EvaluationId,
        sequence: u64,
        message_id: MessageId,
    ) -> Option<&InnerMessage> {
        self.by_eval.get(&eval)?.get(&(sequence, message_id))
    }

    /// Inserts a message; returns false (and changes nothing) when a message
    /// with its id is already there.
    pub(crate) fn insert(&mut self, message: &InnerMessage) -> bool {
        !self.index.contains_key(&message.message_id) && self.insert_owned(message.clone())
    }

    /// [`insert`](Self::insert) of an owned message.
    fn insert_owned(&mut self, mut message: InnerMessage) -> bool {
        if self.index.contains_key(&message.message_id) {
            return false;
        }
        let eval = message.evaluation_id;
        let key = (message.sequence, message.message_id);
        let msgs = self.by_eval.entry(eval).or_default();
        for record in &message.tool_calls {
            let slot = self
                .calls
                .entry((eval, record.call_id.clone()))
                .or_default();
            let status = join(slot.status, record.status);
            if status != slot.status {
                slot.status = status;
                propagate(msgs, slot, &record.call_id);
            }
            if slot.holders.last() != Some(&key) {
                slot.holders.push(key);
            }
        }
        for record in &mut message.tool_calls {
            if let Some(slot) = self.calls.get(&(eval, record.call_id.clone())) {
                record.status = slot.status;
            }
        }
        msgs.insert(key, message);
        self.index.insert(key.1, (eval, key.0));
        true
    }

    /// Folds a `ToolStatus` event.
    pub(crate) fn set_status(&mut self, eval: EvaluationId, call_id: &CallId, status: ToolStatus) {
        let key = (eval, call_id.clone());
        if status == ToolStatus::Pending && !self.calls.contains_key(&key) {
            // Pending is the bottom of the lattice: nothing to remember.
            return;
        }
        let slot = self.calls.entry(key).or_default();
        if status.rank() > slot.status.rank() {
            slot.status = status;
            if let Some(msgs) = self.by_eval.get_mut(&eval) {
                propagate(msgs, slot, call_id);
            }
        }
    }

    /// The joined status of calls no message holds yet (status above Pending).
    pub(crate) fn orphan_statuses(&self) -> Vec<(EvaluationId, &CallId, ToolStatus)> {
        let mut v: Vec<_> = self
            .calls
            .iter()
            .filter(|(_, slot)| slot.holders.is_empty())
            .map(|((eval, call), slot)| (*eval, call, slot.status))
            .collect();
        v.sort_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
        v
    }

    /// Builds the slice from messages (whose records carry their joined
    /// statuses). Fails on a repeated `message_id`, with the item's index.
    pub(crate) fn from_items(
        items: impl IntoIterator<Item = InnerMessage>,
    ) -> Result<Self, (usize, String)> {
        let mut out = Messages::default();
        for (i, m) in items.into_iter().enumerate() {
            let id = m.message_id;
            if !out.insert_owned(m) {
                return Err((i, format!("duplicate message_id {id}")));
            }
        }
        Ok(out)
    }
}

fn propagate(
    msgs: &mut BTreeMap<(u64, MessageId), InnerMessage>,
    slot: &CallSlot,
    call_id: &CallId,
) {
    for holder in &slot.holders {
        if let Some(m) = msgs.get_mut(holder) {
            for r in m.tool_calls.iter_mut().filter(|r| &r.call_id == call_id) {
                r.status = slot.status;
            }
        }
    }
}

impl PartialEq for Messages {
    /// Equal messages and equal call statuses (indexes are derived from them).
    fn eq(&self, other: &Self) -> bool {
        self.by_eval == other.by_eval
            && self.calls.len() == other.calls.len()
            && self
                .calls
                .iter()
                .all(|(k, slot)| other.calls.get(k).map(|o| o.status) == Some(slot.status))
    }
}

impl fmt::Debug for Messages {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Messages")
            .field("messages", &self.iter().collect::<Vec<_>>())
            .field("orphan_statuses", &self.orphan_statuses())
            .finish()
    }
}

struct AllMessages<'a>(&'a Messages);

impl Serialize for AllMessages<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for m in self.0.iter() {
            seq.serialize_element(m)?;
        }
        seq.end()
    }
}

impl Serialize for Messages {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("Messages", 2)?;
        st.serialize_field("messages", &AllMessages(self))?;
        st.serialize_field("orphans", &self.orphan_statuses())?;
        st.end()
    }
}

#[derive(Deserialize)]
struct MessagesRepr {
    messages: Vec<InnerMessage>,
    orphans: Vec<(EvaluationId, CallId, ToolStatus)>,
}

impl TryFrom<MessagesRepr> for Messages {
    type Error = String;
    fn try_from(repr: MessagesRepr) -> Result<Self, String> {
        let mut out =
            Messages::from_items(repr.messages).map_err(|(i, e)| format!("messages[{i}]: {e}"))?;
        for (i, (eval, call, status)) in repr.orphans.into_iter().enumerate() {
            if out.calls.contains_key(&(eval, call.clone())) || status == ToolStatus::Pending {
                return Err(format!(
                    "orphans[{i}]: status of call {call} is not an orphan"
                ));
            }
            out.set_status(eval, &call, status);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Role, ToolCallRecord};

    fn assistant(eval: EvaluationId, seq: u64, calls: &[&str]) -> InnerMessage {
        let mut m = InnerMessage::new(Role::Assistant, "a", eval, seq);
        m.tool_calls = calls
            .iter()
            .map(|c| ToolCallRecord::new(*c, "t", "{}"))
            .collect();
        m
    }

    #[test]
    fn orders_by_sequence_and_dedups_by_id() {
        let eval = EvaluationId::new();
        let a = InnerMessage::new(Role::System, "s", eval, 0);
        let b = InnerMessage::new(Role::User, "u", eval, 1);
        let mut m = Messages::default();
        assert!(m.insert(&b));
        assert!(m.insert(&a));
        assert!(!m.insert(&a));
        let seqs: Vec<u64> = m.iter().map(|x| x.sequence).collect();
        assert_eq!(seqs, vec![0, 1]);
        assert_eq!(m.len(), 2);
        assert_eq!(m.last_for(eval).map(|x| x.sequence), Some(1));
        assert_eq!(m.get(a.message_id).map(|x| x.sequence), Some(0));
    }

    #[test]
    fn status_before_or_after_its_message_gives_the_same_result() {
        let eval = EvaluationId::new();
        let msg = assistant(eval, 1, &["c1", "c2"]);
        let mut early = Messages::default();
        early.set_status(eval, &CallId::from("c1"), ToolStatus::Completed);
        early.set_status(eval, &CallId::from("c1"), ToolStatus::Started);
        early.insert(&msg);
        let mut late = Messages::default();
        late.insert(&msg);
        late.set_status(eval, &CallId::from("c1"), ToolStatus::Started);
        late.set_status(eval, &CallId::from("c1"), ToolStatus::Completed);
        assert_eq!(early, late);
        let got = late.get(msg.message_id).map(|m| m.tool_calls[0].status);
        assert_eq!(got, Some(ToolStatus::Completed));
        assert!(late.orphan_statuses().is_empty());
    }

    #[test]
    fn pending_status_for_an_unknown_call_is_not_remembered() {
        let mut m = Messages::default();
        m.set_status(EvaluationId::new(), &CallId::from("x"), ToolStatus::Pending);
        assert_eq!(m, Messages::default());
    }
}
