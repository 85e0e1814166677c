//! The `ToolCalls` slice: one record per tool call with its lifecycle.

use std::collections::hash_map::Entry;
use std::hash::BuildHasher;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize, Serializer};

use crate::model::{CallId, EvaluationId, InnerMessage, MessageId, ToolCallRecord, ToolStatus};
use crate::state::hash::{FastMap, FastState};
use crate::state::list_delta::ListDelta;

/// One tool call of an evaluation and what became of it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCallInfo {
    /// The evaluation of the call.
    pub evaluation_id: EvaluationId,
    /// The provider's id of the call.
    pub call_id: CallId,
    /// The tool's name (empty until the assistant message is seen).
    pub name: String,
    /// The arguments as JSON text (empty until the assistant message is seen).
    pub arguments: String,
    /// The highest-ranked status seen ([`ToolStatus::rank`]).
    pub status: ToolStatus,
    /// `created_at` of the assistant message that made the call.
    #[serde(with = "crate::model::ts::option")]
    pub requested_at: Option<DateTime<Utc>>,
    /// When the first `Started` status was appended.
    #[serde(with = "crate::model::ts::option")]
    pub started_at: Option<DateTime<Utc>>,
    /// When the status last moved up to a terminal one.
    #[serde(with = "crate::model::ts::option")]
    pub finished_at: Option<DateTime<Utc>>,
    /// The tool-role message holding the result (first one seen).
    pub result: Option<MessageId>,
    /// The error of the last `ToolStatus` event that carried one.
    pub error: Option<String>,
}

impl ToolCallInfo {
    fn new(evaluation_id: EvaluationId, call_id: CallId) -> Self {
        Self {
            evaluation_id,
            call_id,
            name: String::new(),
            arguments: String::new(),
            status: ToolStatus::Pending,
            requested_at: None,
            started_at: None,
            finished_at: None,
            result: None,
            error: None,
        }
    }
}

/// Every tool call of the session, in first-seen order (state slice).
///
/// A call is keyed by `(evaluation_id, call_id)` and created by whichever
/// comes first: the assistant message that makes it, a `ToolStatus` event, or
/// its tool-role result message. O(1) per event; the index is rebuilt on decode.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(try_from = "Vec<ToolCallInfo>")]
pub struct ToolCalls {
    calls: Vec<ToolCallInfo>,
    by_eval: FastMap<EvaluationId, EvalCalls>,
    /// The number of calls at the last snapshot, while changes are recorded
    /// for a delta snapshot ([`mark`](Self::mark)).
    marked: Option<usize>,
    /// Calls below `marked` changed since (repeats allowed).
    touched: Vec<usize>,
}

/// The calls of one evaluation: by id, and in first-seen order (indexes
/// into `ToolCalls::calls`).
///
/// The index is keyed by the call id's hash, not by a copy of the id:
/// decoding a snapshot made one copy per call (125,000 allocations for a
/// million-event session, a third of decoding the calls). The call found
/// under a hash is checked to have the id; an id whose hash another id of
/// the evaluation took first goes in `collided`, under its own copy.
#[derive(Clone, Debug, Default)]
struct EvalCalls {
    by_hash: FastMap<u64, usize>,
    collided: FastMap<CallId, usize>,
    order: Vec<usize>,
}

fn call_hash(id: &CallId) -> u64 {
    FastState::default().hash_one(id)
}

impl EvalCalls {
    /// Where call `id` is in `calls`, if this evaluation has it.
    fn find(&self, calls: &[ToolCallInfo], id: &CallId) -> Option<usize> {
        self.find_hashed(calls, id, call_hash(id))
    }

    /// [`find`](Self::find), with `hash` the id's [`call_hash`].
    fn find_hashed(&self, calls: &[ToolCallInfo], id: &CallId, hash: u64) -> Option<usize> {
        match self.by_hash.get(&hash) {
            Some(&i) if calls.get(i).is_some_and(|c| c.call_id == *id) => Some(i),
            // The hash is another id's: `id`, if it is here, collided.
            Some(_) => self.collided.get(id).copied(),
            None => None,
        }
    }

    /// Adds call `id` (whose hash is `hash`), not there yet, at `i` of
    /// `calls`.
    fn add_hashed(&mut self, id: &CallId, i: usize, hash: u64) {
        match self.by_hash.entry(hash) {
            Entry::Vacant(v) => {
                v.insert(i);
            }
            Entry::Occupied(_) => {
                self.collided.insert(id.clone(), i);
            }
        }
        self.order.push(i);
    }
}

impl ToolCalls {
    /// The call `call_id` of evaluation `eval`.
    pub fn get(&self, eval: EvaluationId, call_id: &CallId) -> Option<&ToolCallInfo> {
        let i = self.by_eval.get(&eval)?.find(&self.calls, call_id)?;
        self.calls.get(i)
    }

    /// All calls, in first-seen order.
    pub fn iter(&self) -> impl Iterator<Item = &ToolCallInfo> + '_ {
        self.calls.iter()
    }

    /// The calls of one evaluation, in first-seen order.
    pub fn for_evaluation(&self, eval: EvaluationId) -> impl Iterator<Item = &ToolCallInfo> + '_ {
        self.by_eval
            .get(&eval)
            .into_iter()
            .flat_map(|e| &e.order)
            .filter_map(|i| self.calls.get(*i))
    }

    /// Calls of `eval` that never started: status `Pending` and no result message.
    pub fn pending(&self, eval: EvaluationId) -> impl Iterator<Item = &ToolCallInfo> + '_ {
        self.for_evaluation(eval)
            .filter(|c| c.status == ToolStatus::Pending && c.result.is_none())
    }

    /// Calls of `eval` that are in doubt: `Started`, with no terminal status
    /// and no result message (they may or may not have had their effect).
    pub fn in_doubt(&self, eval: EvaluationId) -> impl Iterator<Item = &ToolCallInfo> + '_ {
        self.for_evaluation(eval)
            .filter(|c| c.status == ToolStatus::Started && c.result.is_none())
    }

    /// Number of calls.
    pub fn len(&self) -> usize {
        self.calls.len()
    }

    /// True when there is no call.
    pub fn is_empty(&self) -> bool {
        self.calls.is_empty()
    }

    fn entry(&mut self, eval: EvaluationId, call_id: &CallId) -> &mut ToolCallInfo {
        let e = self.by_eval.entry(eval).or_default();
        let hash = call_hash(call_id);
        let i = match e.find_hashed(&self.calls, call_id, hash) {
            Some(i) => i,
            None => {
                let i = self.calls.len();
                self.calls.push(ToolCallInfo::new(eval, call_id.clone()));
                e.add_hashed(call_id, i, hash);
                i
            }
        };
        if self.marked.is_some_and(|m| i < m) {
            self.touched.push(i);
        }
        &mut self.calls[i]
    }

    /// Folds a (new, not duplicate) message.
    pub(crate) fn on_message(&mut self, m: &InnerMessage) {
        self.on_calls(
            m.evaluation_id,
            m.created_at,
            m.message_id,
            &m.tool_calls,
            m.tool_call_id.as_ref(),
            true,
        );
    }

    /// Folds the calls a message makes (`calls`) or answers (`answers`):
    /// of an inner-loop message, or of a conversation message, whose turn
    /// id is its `eval`. With `statuses`, a call's status in the message
    /// counts (inner-loop messages carry it); a conversation message's is
    /// ignored (its `ToolStatus` events alone say it).
    pub(crate) fn on_calls(
        &mut self,
        eval: EvaluationId,
        created_at: DateTime<Utc>,
        message_id: MessageId,
        calls: &[ToolCallRecord],
        answers: Option<&CallId>,
        statuses: bool,
    ) {
        for record in calls {
            let info = self.entry(eval, &record.call_id);
            if info.requested_at.is_none() {
                info.requested_at = Some(created_at);
                info.name.clone_from(&record.name);
                info.arguments.clone_from(&record.arguments);
            }
            if statuses && record.status.rank() > info.status.rank() {
                info.status = record.status;
            }
        }
        if let Some(call_id) = answers {
            let info = self.entry(eval, call_id);
            if info.result.is_none() {
                info.result = Some(message_id);
            }
        }
    }

    /// Folds a `ToolStatus` event appended at `at`.
    pub(crate) fn on_status(
        &mut self,
        eval: EvaluationId,
        call_id: &CallId,
        status: ToolStatus,
        error: Option<&String>,
        at: DateTime<Utc>,
    ) {
        let info = self.entry(eval, call_id);
        if status == ToolStatus::Started && info.started_at.is_none() {
            info.started_at = Some(at);
        }
        if status.rank() > info.status.rank() {
            info.status = status;
            if status.is_terminal() {
                info.finished_at = Some(at);
            }
        }
        if let Some(e) = error {
            info.error = Some(e.clone());
        }
    }

    /// Builds the slice from calls in listing order. Fails on a repeated
    /// `(evaluation_id, call_id)`, with the item's index.
    pub(crate) fn from_items(mut items: Vec<ToolCallInfo>) -> Result<Self, (usize, String)> {
        let mut by_eval: FastMap<EvaluationId, EvalCalls> = FastMap::default();
        for (i, info) in items.iter().enumerate() {
            let e = by_eval.entry(info.evaluation_id).or_default();
            let hash = call_hash(&info.call_id);
            if e.find_hashed(&items, &info.call_id, hash).is_some() {
                return Err((
                    i,
                    format!(
                        "duplicate tool call {} of evaluation {}",
                        info.call_id, info.evaluation_id
                    ),
                ));
            }
            e.add_hashed(&info.call_id, i, hash);
        }
        // Room for the calls still to come, made now: a decoded snapshot's
        // vector is full, and its first new call would otherwise copy every
        // call (25 MB for a million-event session) inside an append.
        items.reserve(items.len() / 8 + 16);
        Ok(Self {
            calls: items,
            by_eval,
            marked: None,
            touched: Vec::new(),
        })
    }

    /// Records from now on which calls change, for a delta snapshot.
    pub(crate) fn mark(&mut self) {
        self.marked = Some(self.calls.len());
        self.touched.clear();
    }

    /// Stops recording changes.
    pub(crate) fn unmark(&mut self) {
        self.marked = None;
        self.touched = Vec::new();
    }

    /// The calls changed or added since [`mark`](Self::mark), by index.
    fn changed_since_mark(&self) -> (usize, Vec<usize>) {
        let before = self.marked.unwrap_or(0).min(self.calls.len());
        let mut changed = self.touched.clone();
        changed.sort_unstable();
        changed.dedup();
        (before, changed)
    }

    /// The keys of the calls changed or added since [`mark`](Self::mark).
    pub(crate) fn changed_keys(&self) -> Vec<(EvaluationId, &CallId)> {
        let (before, changed) = self.changed_since_mark();
        changed
            .into_iter()
            .chain(before..self.calls.len())
            .filter_map(|i| self.calls.get(i))
            .map(|c| (c.evaluation_id, &c.call_id))
            .collect()
    }

    /// What changed since [`mark`](Self::mark), for a delta snapshot.
    pub(crate) fn delta(&self) -> ListDelta<&ToolCallInfo> {
        let (before, changed) = self.changed_since_mark();
        ListDelta {
            before: before as u64,
            changed: changed
                .into_iter()
                .filter_map(|i| Some((i as u64, self.calls.get(i)?)))
                .collect(),
            added: self.calls[before..].iter().collect(),
        }
    }

    /// Applies a delta made by [`delta`](Self::delta) of the state this
    /// one is. Fails (the slice then half changed) when it does not fit:
    /// another count of calls before it, a changed call that is another
    /// call, an added call already there.
    pub(crate) fn apply_delta(&mut self, d: ListDelta<ToolCallInfo>) -> Result<(), String> {
        if d.before != self.calls.len() as u64 {
            return Err(format!(
                "tool calls: the delta follows {} calls, the state has {}",
                d.before,
                self.calls.len()
            ));
        }
        for (i, info) in d.changed {
            let old = usize::try_from(i)
                .ok()
                .and_then(|i| self.calls.get_mut(i))
                .ok_or_else(|| format!("tool calls: changed call {i} is past the end"))?;
            if (old.evaluation_id, &old.call_id) != (info.evaluation_id, &info.call_id) {
                return Err(format!("tool calls: changed call {i} is another call"));
            }
            *old = info;
        }
        for info in d.added {
            let e = self.by_eval.entry(info.evaluation_id).or_default();
            let hash = call_hash(&info.call_id);
            if e.find_hashed(&self.calls, &info.call_id, hash).is_some() {
                return Err(format!("tool calls: added call {} is there", info.call_id));
            }
            e.add_hashed(&info.call_id, self.calls.len(), hash);
            self.calls.push(info);
        }
        Ok(())
    }
}

#[cfg(test)]
impl ToolCalls {
    /// Calls the vector can take before it must grow.
    pub(crate) fn spare(&self) -> usize {
        self.calls.capacity() - self.calls.len()
    }
}

impl PartialEq for ToolCalls {
    /// Equal calls in equal order (the indexes are derived from them).
    fn eq(&self, other: &Self) -> bool {
        self.calls == other.calls
    }
}

impl Serialize for ToolCalls {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.calls.serialize(s)
    }
}

impl TryFrom<Vec<ToolCallInfo>> for ToolCalls {
    type Error = String;
    fn try_from(items: Vec<ToolCallInfo>) -> Result<Self, String> {
        ToolCalls::from_items(items).map_err(|(i, e)| format!("tool_calls[{i}]: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Role, ToolCallRecord, now};

    #[test]
    fn ids_whose_hashes_collide_are_told_apart() {
        let eval = EvaluationId::new();
        let ids: Vec<CallId> = ["a", "b", "c"].iter().map(|s| CallId::from(*s)).collect();
        let calls: Vec<ToolCallInfo> = ids
            .iter()
            .map(|id| ToolCallInfo::new(eval, id.clone()))
            .collect();
        let mut e = EvalCalls::default();
        // All three under one hash: the first owns it, the others collide.
        for (i, id) in ids.iter().enumerate() {
            assert_eq!(e.find_hashed(&calls, id, 7), None);
            e.add_hashed(id, i, 7);
        }
        for (i, id) in ids.iter().enumerate() {
            assert_eq!(e.find_hashed(&calls, id, 7), Some(i), "{id}");
        }
        assert_eq!(e.find_hashed(&calls, &CallId::from("d"), 7), None);
        assert_eq!(e.find_hashed(&calls, &CallId::from("a"), 8), None);
        assert_eq!(e.order, [0, 1, 2]);
        assert_eq!(e.collided.len(), 2);
        // With real hashes, through the slice.
        let t = ToolCalls::from_items(calls.clone()).expect("distinct");
        for id in &ids {
            assert_eq!(t.get(eval, id).map(|c| &c.call_id), Some(id));
        }
        assert!(t.get(eval, &CallId::from("d")).is_none());
        assert!(t.get(EvaluationId::new(), &ids[0]).is_none());
        let mut twice = calls.clone();
        twice.push(calls[1].clone());
        assert_eq!(
            ToolCalls::from_items(twice).map(|_| ()).map_err(|(i, _)| i),
            Err(3)
        );
    }

    #[test]
    fn lifecycle_pending_started_completed() {
        let eval = EvaluationId::new();
        let mut a = InnerMessage::new(Role::Assistant, "", eval, 1);
        a.tool_calls = vec![
            ToolCallRecord::new("c1", "ls", "{}"),
            ToolCallRecord::new("c2", "rm", "{}"),
        ];
        let mut t = ToolCalls::default();
        t.on_message(&a);
        let c1 = CallId::from("c1");
        t.on_status(eval, &c1, ToolStatus::Started, None, now());
        assert_eq!(t.pending(eval).count(), 1);
        assert_eq!(t.in_doubt(eval).count(), 1);
        t.on_status(eval, &c1, ToolStatus::Completed, None, now());
        let mut r = InnerMessage::new(Role::Tool, "ok", eval, 2);
        r.tool_call_id = Some(c1.clone());
        t.on_message(&r);
        let info = t.get(eval, &c1).expect("call");
        assert_eq!(info.status, ToolStatus::Completed);
        assert_eq!(info.result, Some(r.message_id));
        assert!(info.started_at.is_some() && info.finished_at.is_some());
        assert_eq!(info.name, "ls");
        assert_eq!(t.in_doubt(eval).count(), 0);
        assert_eq!(t.len(), 2);
    }
}
