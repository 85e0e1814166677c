//! The `Messages` slice: every message of the session, ordered and deduplicated.

mod index;
mod run;
mod section;
mod slot;

use crate::format::SharedBytes;
use std::collections::BTreeMap;
use std::fmt;

use serde::ser::{SerializeSeq, SerializeStruct};
use serde::{Deserialize, Serialize, Serializer};

pub(crate) use crate::format::message::{PeekedMessage, peek_message};
use crate::model::{CallId, EvaluationId, InnerMessage, MessageId, ToolStatus};
use crate::state::hash::FastMap;
use crate::state::keys::EvalKey;
use index::Index;
use run::EvalMessages;
pub(crate) use section::{apply_delta_section, read_section, write_delta_section, write_section};
use slot::{CallSlot, Slot};

/// Where the bytes of a plain message come from.
pub(crate) enum PlainBytes<'a> {
    /// Bytes to copy.
    Copy(&'a [u8]),
    /// A part of a shared frame: kept, not copied.
    Shared(SharedBytes),
}

/// Every [`InnerMessage`] of the session (state slice).
///
/// Ordered by evaluation id (UUIDv7: creation order, unless the clock
/// stepped back; [`Evaluations::latest`](crate::state::Evaluations::latest) goes by
/// the stream instead), then by
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
/// moves up a four-level lattice). Binary snapshots hold each message as its
/// own bincode bytes next to its ids, and the call statuses: decoding one
/// rebuilds the indexes without decoding the messages, which stay as bytes
/// in the snapshot's buffer until first read (then they are decoded once and
/// kept), and are copied as they are into the next snapshot.
#[derive(Clone, Default, Deserialize)]
#[serde(try_from = "MessagesRepr")]
pub struct Messages {
    by_eval: BTreeMap<EvalKey, EvalMessages>,
    index: Index,
    calls: FastMap<EvaluationId, FastMap<CallId, CallSlot>>,
}

fn join(a: ToolStatus, b: ToolStatus) -> ToolStatus {
    if b.rank() > a.rank() { b } else { a }
}

impl Messages {
    /// Ids the index can take before it must grow.
    #[cfg(test)]
    pub(crate) fn index_spare(&self) -> usize {
        self.index.spare()
    }

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
        self.by_eval.iter().flat_map(move |(eval, m)| {
            let eval = eval.id();
            let calls = self.calls.get(&eval);
            m.iter().map(move |(k, s)| s.get(calls, eval, *k))
        })
    }

    /// The messages of one evaluation, by `(sequence, message_id)`.
    pub fn for_evaluation(&self, eval: EvaluationId) -> impl Iterator<Item = &InnerMessage> + '_ {
        let calls = self.calls.get(&eval);
        self.by_eval
            .get(&eval.into())
            .into_iter()
            .flat_map(move |m| m.iter().map(move |(k, s)| s.get(calls, eval, *k)))
    }

    /// The message with this id.
    pub fn get(&self, message_id: MessageId) -> Option<&InnerMessage> {
        let (eval, sequence) = self.index.get(&message_id)?;
        self.get_at(eval, sequence, message_id)
    }

    /// The last message of an evaluation (highest sequence).
    pub fn last_for(&self, eval: EvaluationId) -> Option<&InnerMessage> {
        let (k, s) = self.by_eval.get(&eval.into())?.last()?;
        Some(s.get(self.calls.get(&eval), eval, *k))
    }

    /// The evaluations that have messages, in id order.
    pub fn evaluations(&self) -> impl Iterator<Item = EvaluationId> + '_ {
        self.by_eval.keys().map(|k| k.id())
    }

    pub(crate) fn get_at(
        &self,
        eval: EvaluationId,
        sequence: u64,
        message_id: MessageId,
    ) -> Option<&InnerMessage> {
        let key = (sequence, message_id);
        let s = self.by_eval.get(&eval.into())?.get(&key)?;
        Some(s.get(self.calls.get(&eval), eval, key))
    }

    /// Inserts a copy of a message; returns false (and changes nothing) when
    /// a message with its id is already there.
    #[cfg(test)]
    pub(crate) fn insert(&mut self, message: &InnerMessage) -> bool {
        self.claim(message) && {
            self.insert_claimed(message.clone());
            true
        }
    }

    /// Inserts a message, moving it in; returns false (and changes nothing)
    /// when a message with its id is already there.
    pub(crate) fn insert_owned(&mut self, message: InnerMessage) -> bool {
        self.claim(&message) && {
            self.insert_claimed(message);
            true
        }
    }

    /// Claims the id of `message` in the index: false (and nothing changes)
    /// if it is taken. A claimed message must then be inserted with
    /// [`insert_claimed`](Self::insert_claimed) before anything else reads
    /// or changes the slice.
    pub(crate) fn claim(&mut self, message: &InnerMessage) -> bool {
        self.index.claim(
            message.message_id,
            (message.evaluation_id, message.sequence),
        )
    }

    /// Claims a message id, as [`claim`](Self::claim) does.
    pub(crate) fn claim_id(&mut self, id: MessageId, eval: EvaluationId, sequence: u64) -> bool {
        self.index.claim(id, (eval, sequence))
    }

    /// Inserts a plain message (no tool calls, not a tool result) whose id
    /// was just claimed, as its checked bincode `bytes`: decoded on first
    /// access. The same as inserting the decoded message.
    pub(crate) fn insert_claimed_plain(
        &mut self,
        eval: EvaluationId,
        key: (u64, MessageId),
        bytes: PlainBytes<'_>,
    ) {
        let slot = match bytes {
            PlainBytes::Copy(b) => Slot::shared(SharedBytes::from(b.to_vec())),
            PlainBytes::Shared(bytes) => Slot::shared(bytes),
        };
        self.by_eval
            .entry(eval.into())
            .or_default()
            .insert(key, slot);
    }

    /// Inserts a message whose id was just [`claim`](Self::claim)ed.
    pub(crate) fn insert_claimed(&mut self, mut message: InnerMessage) {
        let (eval, key) = self.join_calls(&message);
        if let Some(calls) = self.calls.get(&eval) {
            for record in &mut message.tool_calls {
                if let Some(slot) = calls.get(&record.call_id) {
                    record.status = slot.status;
                }
            }
        }
        self.by_eval
            .entry(eval.into())
            .or_default()
            .insert(key, Slot::owned(message));
    }

    /// Inserts a message whose id was just [`claim`](Self::claim)ed, decoded
    /// from `frame` (a whole envelope's frame) where its bincode runs from
    /// `start` to the end: the same as [`insert_claimed`](Self::insert_claimed),
    /// but the message is kept as those bytes (shared, not copied) and
    /// decoded again on first access.
    pub(crate) fn insert_claimed_framed(
        &mut self,
        message: &InnerMessage,
        frame: &SharedBytes,
        start: usize,
    ) {
        let (eval, key) = self.join_calls(message);
        let slot = match frame.try_slice(start..frame.len()) {
            Some(bytes) => Slot::shared(bytes),
            // (Not from the envelope's frame: kept decoded.)
            None => Slot::owned(message.clone()),
        };
        self.by_eval
            .entry(eval.into())
            .or_default()
            .insert(key, slot);
    }

    /// Joins the statuses of the tool calls `message` makes into their
    /// slots (the older messages holding a call whose status rose take it),
    /// and records `message` as a holder of each: what inserting it takes
    /// besides its slot. Returns its evaluation and key.
    fn join_calls(&mut self, message: &InnerMessage) -> (EvaluationId, (u64, MessageId)) {
        let eval = message.evaluation_id;
        let key = (message.sequence, message.message_id);
        if !message.tool_calls.is_empty() {
            let msgs = self.by_eval.entry(eval.into()).or_default();
            let calls = self.calls.entry(eval).or_default();
            for record in &message.tool_calls {
                let Some(slot) = slot_mut(calls, &record.call_id) else {
                    continue;
                };
                let status = join(slot.status, record.status);
                if status != slot.status {
                    slot.status = status;
                    propagate(msgs, slot, &record.call_id);
                }
                if slot.holders.last() != Some(&key) {
                    slot.holders.push(key);
                }
            }
        }
        (eval, key)
    }

    /// Gives back the room kept for more messages of `eval` (a finished
    /// evaluation's). A message that still comes is inserted as usual.
    pub(crate) fn shrink(&mut self, eval: EvaluationId) {
        if let Some(m) = self.by_eval.get_mut(&eval.into()) {
            m.shrink();
        }
    }

    /// Folds a `ToolStatus` event.
    pub(crate) fn set_status(&mut self, eval: EvaluationId, call_id: &CallId, status: ToolStatus) {
        if status == ToolStatus::Pending && self.call(eval, call_id).is_none() {
            // Pending is the bottom of the lattice: nothing to remember.
            return;
        }
        let Some(slot) = slot_mut(self.calls.entry(eval).or_default(), call_id) else {
            return;
        };
        if status.rank() > slot.status.rank() {
            slot.status = status;
            if let Some(msgs) = self.by_eval.get_mut(&eval.into()) {
                propagate(msgs, slot, call_id);
            }
        }
    }

    /// The joined status of calls no message holds yet (status above Pending).
    pub(crate) fn orphan_statuses(&self) -> Vec<(EvaluationId, &CallId, ToolStatus)> {
        let mut v: Vec<_> = self
            .call_slots()
            .filter(|(_, _, slot)| slot.holders.is_empty())
            .map(|(eval, call, slot)| (eval, call, slot.status))
            .collect();
        v.sort_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
        v
    }

    /// Every call slot, in no particular order.
    fn call_slots(&self) -> impl Iterator<Item = (EvaluationId, &CallId, &CallSlot)> + '_ {
        self.calls
            .iter()
            .flat_map(|(eval, c)| c.iter().map(move |(id, slot)| (*eval, id, slot)))
    }

    fn call(&self, eval: EvaluationId, call_id: &CallId) -> Option<&CallSlot> {
        self.calls.get(&eval)?.get(call_id)
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

/// The slot of `id`, created if there is none (the id is cloned only then).
/// Always `Some`.
fn slot_mut<'a>(calls: &'a mut FastMap<CallId, CallSlot>, id: &CallId) -> Option<&'a mut CallSlot> {
    if !calls.contains_key(id) {
        calls.insert(id.clone(), CallSlot::default());
    }
    calls.get_mut(id)
}

/// Gives the messages holding call `call_id` its new status (see
/// [`Slot::forget`]).
fn propagate(msgs: &mut EvalMessages, slot: &CallSlot, call_id: &CallId) {
    for holder in &slot.holders {
        if let Some(s) = msgs.get_mut(holder) {
            s.forget(call_id, slot.status);
        }
    }
}

impl PartialEq for Messages {
    /// Equal messages and equal call statuses (indexes are derived from
    /// them). Two messages both held as the same bytes are equal without
    /// being decoded.
    fn eq(&self, other: &Self) -> bool {
        let same = |eval: EvaluationId, k: (u64, MessageId), x: &Slot, y: &Slot| {
            matches!((x.raw_bytes(), y.raw_bytes()), (Some(p), Some(q)) if p == q)
                || x.get(self.calls.get(&eval), eval, k) == y.get(other.calls.get(&eval), eval, k)
        };
        self.index.len() == other.index.len()
            && self.by_eval.len() == other.by_eval.len()
            && self
                .by_eval
                .iter()
                .zip(&other.by_eval)
                .all(|((e, m), (f, n))| {
                    e == f
                        && m.len() == n.len()
                        && m.iter()
                            .zip(n.iter())
                            .all(|((k, x), (l, y))| k == l && same(e.id(), *k, x, y))
                })
            && self.call_slots().count() == other.call_slots().count()
            && self
                .call_slots()
                .all(|(eval, id, slot)| other.call(eval, id).map(|o| o.status) == Some(slot.status))
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
            if out.call(eval, &call).is_some() || status == ToolStatus::Pending {
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
