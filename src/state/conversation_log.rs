//! The `ConversationLog` slice: the conversation engine's records folded
//! from [`ConversationEvent`]s (latest record of each turn and provider
//! call wins; a message id seen twice is kept once).

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use uuid::Uuid;

use crate::event::conversation::{
    CompactionRecord, Conversation, ConversationEvent, ConversationMessage, ProviderCallRecord,
    TurnId, TurnRecord, TurnStatus,
};
use crate::model::MessageId;
use crate::model::Role;
use crate::state::list_delta::ListDelta;

pub(crate) mod inner;

/// The conversation a session holds, if the conversation engine made it
/// (state slice). Every lookup is O(log n); reading the last `k` messages
/// is O(k).
#[derive(Clone, Debug, Default)]
pub struct ConversationLog {
    info: Option<Conversation>,
    messages: Vec<ConversationMessage>,
    message_index: BTreeMap<MessageId, usize>,
    turns: Vec<TurnRecord>,
    turn_index: BTreeMap<TurnId, usize>,
    calls: Vec<ProviderCallRecord>,
    call_index: BTreeMap<Uuid, usize>,
    calls_by_turn: BTreeMap<TurnId, Vec<usize>>,
    succeeded: u64,
    /// Messages before this index are inputs or outputs of a turn.
    answered: usize,
    /// The leading system messages: those before the first other one.
    leading_system: usize,
    /// Every compaction, in order.
    compactions: Vec<CompactionRecord>,
    /// Messages before this index are not sent (0: none compacted).
    compacted_from: usize,
    /// What changed since the last snapshot, while changes are recorded
    /// for a delta snapshot ([`mark`](Self::mark)).
    marked: Option<Mark>,
}

/// The lengths of a [`ConversationLog`]'s lists at the last snapshot, and
/// what changed below them since.
#[derive(Clone, Debug, Default)]
struct Mark {
    info: bool,
    messages: usize,
    turns: usize,
    calls: usize,
    compactions: usize,
    /// Turns and calls below the lengths changed since (repeats allowed).
    touched_turns: Vec<usize>,
    touched_calls: Vec<usize>,
}

impl PartialEq for ConversationLog {
    /// Equal records (the indexes are derived from them).
    fn eq(&self, other: &Self) -> bool {
        self.info == other.info
            && self.messages == other.messages
            && self.turns == other.turns
            && self.calls == other.calls
            && self.answered == other.answered
            && self.compactions == other.compactions
            && self.compacted_from == other.compacted_from
    }
}

impl Eq for ConversationLog {}

/// What changed in a [`ConversationLog`] since a snapshot, as a delta
/// snapshot holds it ([`ConversationLog::delta`]).
#[derive(Serialize)]
pub(crate) struct LogDeltaRef<'a> {
    info: Option<&'a Option<Conversation>>,
    messages: ListDelta<&'a ConversationMessage>,
    turns: ListDelta<&'a TurnRecord>,
    calls: ListDelta<&'a ProviderCallRecord>,
    compactions: ListDelta<&'a CompactionRecord>,
    answered: u64,
    compacted_from: u64,
}

/// [`LogDeltaRef`], read.
#[derive(Deserialize)]
pub(crate) struct LogDelta {
    info: Option<Option<Conversation>>,
    messages: ListDelta<ConversationMessage>,
    turns: ListDelta<TurnRecord>,
    calls: ListDelta<ProviderCallRecord>,
    compactions: ListDelta<CompactionRecord>,
    answered: u64,
    compacted_from: u64,
}

/// The items of `list` changed (`touched`, below `before`) or added since.
fn list_delta<'a, T>(list: &'a [T], before: usize, touched: &[usize]) -> ListDelta<&'a T> {
    let before = before.min(list.len());
    let mut changed = touched.to_vec();
    changed.sort_unstable();
    changed.dedup();
    ListDelta {
        before: before as u64,
        changed: changed
            .into_iter()
            .filter_map(|i| Some((i as u64, list.get(i)?)))
            .collect(),
        added: list[before..].iter().collect(),
    }
}

fn fits<T>(what: &str, d: &ListDelta<T>, len: usize) -> Result<(), String> {
    if d.before != len as u64 {
        return Err(format!(
            "conversation {what}: the delta follows {}, the state has {len}",
            d.before
        ));
    }
    Ok(())
}

#[derive(Serialize)]
struct RawRef<'a> {
    info: &'a Option<Conversation>,
    messages: &'a [ConversationMessage],
    turns: &'a [TurnRecord],
    calls: &'a [ProviderCallRecord],
    answered: u64,
    compactions: &'a [CompactionRecord],
    compacted_from: u64,
}

#[derive(Deserialize)]
struct Raw {
    info: Option<Conversation>,
    messages: Vec<ConversationMessage>,
    turns: Vec<TurnRecord>,
    calls: Vec<ProviderCallRecord>,
    answered: u64,
    compactions: Vec<CompactionRecord>,
    compacted_from: u64,
}

impl Serialize for ConversationLog {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        RawRef {
            info: &self.info,
            messages: &self.messages,
            turns: &self.turns,
            calls: &self.calls,
            answered: self.answered as u64,
            compactions: &self.compactions,
            compacted_from: self.compacted_from as u64,
        }
        .serialize(s)
    }
}

fn index<K: Ord>(keys: impl Iterator<Item = K>) -> BTreeMap<K, usize> {
    keys.enumerate().map(|(i, k)| (k, i)).collect()
}

fn is_ok(c: &ProviderCallRecord) -> bool {
    c.outcome.as_ref().is_some_and(|o| o.ok)
}

fn by_turn(calls: &[ProviderCallRecord]) -> BTreeMap<TurnId, Vec<usize>> {
    let mut out: BTreeMap<TurnId, Vec<usize>> = BTreeMap::new();
    for (i, c) in calls.iter().enumerate() {
        out.entry(c.turn_id).or_default().push(i);
    }
    out
}

impl<'de> Deserialize<'de> for ConversationLog {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = Raw::deserialize(d)?;
        let message_index = index(raw.messages.iter().map(|m| m.id));
        let leading_system = raw
            .messages
            .iter()
            .take_while(|m| m.role == Role::System)
            .count();
        let compacted_from = usize::try_from(raw.compacted_from)
            .unwrap_or(usize::MAX)
            .min(raw.messages.len());
        Ok(Self {
            leading_system,
            compacted_from,
            compactions: raw.compactions,
            marked: None,
            message_index,
            turn_index: index(raw.turns.iter().map(|t| t.id)),
            call_index: index(raw.calls.iter().map(|c| c.id)),
            calls_by_turn: by_turn(&raw.calls),
            succeeded: raw.calls.iter().filter(|c| is_ok(c)).count() as u64,
            answered: usize::try_from(raw.answered)
                .unwrap_or(usize::MAX)
                .min(raw.messages.len()),
            info: raw.info,
            messages: raw.messages,
            turns: raw.turns,
            calls: raw.calls,
        })
    }
}

impl ConversationLog {
    /// True when nothing was folded into it.
    pub fn is_empty(&self) -> bool {
        self.info.is_none()
            && self.messages.is_empty()
            && self.turns.is_empty()
            && self.calls.is_empty()
            && self.compactions.is_empty()
    }

    /// True when the session holds a conversation (it has a `Created` event).
    pub fn is_conversation(&self) -> bool {
        self.info.is_some()
    }

    /// The conversation's current fields.
    pub fn info(&self) -> Option<&Conversation> {
        self.info.as_ref()
    }

    /// Every message, in the order appended.
    pub fn messages(&self) -> &[ConversationMessage] {
        &self.messages
    }

    /// The message with id `id`.
    pub fn message(&self, id: MessageId) -> Option<&ConversationMessage> {
        self.message_index.get(&id).map(|&i| &self.messages[i])
    }

    /// The messages appended since the last turn took its input: what the
    /// next turn answers.
    pub fn unanswered(&self) -> &[ConversationMessage] {
        &self.messages[self.answered.min(self.messages.len())..]
    }

    /// Every turn, in creation order, each as last recorded.
    pub fn turns(&self) -> &[TurnRecord] {
        &self.turns
    }

    /// The turn with id `id`.
    pub fn turn(&self, id: TurnId) -> Option<&TurnRecord> {
        self.turn_index.get(&id).map(|&i| &self.turns[i])
    }

    /// Turns recorded as pending or running: in a process that is not
    /// running them, interrupted.
    pub fn unfinished(&self) -> impl Iterator<Item = &TurnRecord> + '_ {
        self.turns.iter().filter(|t| !t.status.is_finished())
    }

    /// Every provider call, in the order started.
    pub fn calls(&self) -> &[ProviderCallRecord] {
        &self.calls
    }

    /// The provider calls of turn `turn`, in the order started.
    pub fn calls_of(&self, turn: TurnId) -> impl Iterator<Item = &ProviderCallRecord> + '_ {
        self.calls_by_turn
            .get(&turn)
            .into_iter()
            .flatten()
            .map(|&i| &self.calls[i])
    }

    /// The call with id `id`.
    pub fn call(&self, id: Uuid) -> Option<&ProviderCallRecord> {
        self.call_index.get(&id).map(|&i| &self.calls[i])
    }

    /// The number of provider calls that ended with a response: a
    /// deterministic index for scripted providers (an interrupted call made
    /// again gets the index it had).
    pub fn succeeded_calls(&self) -> u64 {
        self.succeeded
    }

    /// Records from now on what changes, for a delta snapshot.
    pub(crate) fn mark(&mut self) {
        self.marked = Some(Mark {
            info: false,
            messages: self.messages.len(),
            turns: self.turns.len(),
            calls: self.calls.len(),
            compactions: self.compactions.len(),
            touched_turns: Vec::new(),
            touched_calls: Vec::new(),
        });
    }

    /// Stops recording changes.
    pub(crate) fn unmark(&mut self) {
        self.marked = None;
    }

    /// What changed since [`mark`](Self::mark) (everything, without one).
    pub(crate) fn delta(&self) -> LogDeltaRef<'_> {
        let m = self.marked.clone().unwrap_or_default();
        LogDeltaRef {
            info: (m.info || self.marked.is_none()).then_some(&self.info),
            messages: list_delta(&self.messages, m.messages, &[]),
            turns: list_delta(&self.turns, m.turns, &m.touched_turns),
            calls: list_delta(&self.calls, m.calls, &m.touched_calls),
            compactions: list_delta(&self.compactions, m.compactions, &[]),
            answered: self.answered as u64,
            compacted_from: self.compacted_from as u64,
        }
    }

    /// Applies a delta made by [`delta`](Self::delta) of the state this
    /// one is (refused, the log then half changed, if it does not fit).
    pub(crate) fn apply_delta(&mut self, d: LogDelta) -> Result<(), String> {
        fits("messages", &d.messages, self.messages.len())?;
        fits("turns", &d.turns, self.turns.len())?;
        fits("calls", &d.calls, self.calls.len())?;
        fits("compactions", &d.compactions, self.compactions.len())?;
        if !d.messages.changed.is_empty() || !d.compactions.changed.is_empty() {
            return Err("conversation: messages and compactions are only added to".into());
        }
        if let Some(info) = d.info {
            self.info = info;
        }
        for m in d.messages.added {
            if !self.apply(&ConversationEvent::Message(m)) {
                return Err("conversation: an added message is there".into());
            }
        }
        for (i, t) in d.turns.changed {
            if self.turns.get(i as usize).map(|x| x.id) != Some(t.id) {
                return Err(format!("conversation: changed turn {i} is another turn"));
            }
            self.apply(&ConversationEvent::Turn(t));
        }
        for t in d.turns.added {
            if self.turn_index.contains_key(&t.id) {
                return Err("conversation: an added turn is there".into());
            }
            self.apply(&ConversationEvent::Turn(t));
        }
        for (i, c) in d.calls.changed {
            if self.calls.get(i as usize).map(|x| x.id) != Some(c.id) {
                return Err(format!("conversation: changed call {i} is another call"));
            }
            self.apply(&ConversationEvent::ProviderCall(c));
        }
        for c in d.calls.added {
            if self.call_index.contains_key(&c.id) {
                return Err("conversation: an added call is there".into());
            }
            self.apply(&ConversationEvent::ProviderCall(c));
        }
        self.compactions.extend(d.compactions.added);
        self.answered = usize::try_from(d.answered)
            .unwrap_or(usize::MAX)
            .min(self.messages.len());
        self.compacted_from = usize::try_from(d.compacted_from)
            .unwrap_or(usize::MAX)
            .min(self.messages.len());
        Ok(())
    }

    /// Folds one conversation event. For a message, returns true when it is
    /// new (the caller folds its tool calls).
    pub(crate) fn apply(&mut self, event: &ConversationEvent) -> bool {
        match event {
            ConversationEvent::Created(c) | ConversationEvent::Updated(c) => {
                self.info = Some(c.clone());
                if let Some(m) = &mut self.marked {
                    m.info = true;
                }
            }
            ConversationEvent::Message(m) => {
                if self.message_index.contains_key(&m.id) {
                    return false;
                }
                self.message_index.insert(m.id, self.messages.len());
                if m.role == Role::System && self.leading_system == self.messages.len() {
                    self.leading_system += 1;
                }
                self.messages.push(m.clone());
                if m.turn_id.is_some() {
                    self.answered = self.messages.len();
                }
                return true;
            }
            ConversationEvent::Turn(t) => {
                for id in &t.input_messages {
                    if let Some(&i) = self.message_index.get(id) {
                        self.answered = self.answered.max(i + 1);
                    }
                }
                match self.turn_index.get(&t.id) {
                    Some(&i) => {
                        self.turns[i] = t.clone();
                        if let Some(m) = self.marked.as_mut().filter(|m| i < m.turns) {
                            m.touched_turns.push(i);
                        }
                    }
                    None => {
                        self.turn_index.insert(t.id, self.turns.len());
                        self.turns.push(t.clone());
                    }
                }
            }
            ConversationEvent::Compacted(c) => {
                if let Some(&i) = self.message_index.get(&c.first_kept) {
                    self.compacted_from = self.compacted_from.max(i);
                }
                self.compactions.push(c.clone());
            }
            ConversationEvent::ProviderCall(c) => match self.call_index.get(&c.id) {
                Some(&i) => {
                    if let Some(m) = self.marked.as_mut().filter(|m| i < m.calls) {
                        m.touched_calls.push(i);
                    }
                    let was = u64::from(is_ok(&self.calls[i]));
                    self.succeeded = self.succeeded.saturating_sub(was) + u64::from(is_ok(c));
                    let old = self.calls[i].turn_id;
                    if old != c.turn_id {
                        if let Some(list) = self.calls_by_turn.get_mut(&old) {
                            list.retain(|&k| k != i);
                            if list.is_empty() {
                                self.calls_by_turn.remove(&old);
                            }
                        }
                        let list = self.calls_by_turn.entry(c.turn_id).or_default();
                        let at = list.partition_point(|&k| k < i);
                        list.insert(at, i);
                    }
                    self.calls[i] = c.clone();
                }
                None => {
                    self.call_index.insert(c.id, self.calls.len());
                    self.calls_by_turn
                        .entry(c.turn_id)
                        .or_default()
                        .push(self.calls.len());
                    self.succeeded += u64::from(is_ok(c));
                    self.calls.push(c.clone());
                }
            },
        }
        false
    }

    /// The leading system messages (before the first other message): sent
    /// with every request, never compacted.
    pub fn leading_system(&self) -> &[ConversationMessage] {
        &self.messages[..self.leading_system]
    }

    /// The messages still sent to the provider after the leading system
    /// ones: all of them, or those from the last compaction's first kept
    /// message on.
    pub fn sendable(&self) -> &[ConversationMessage] {
        &self.messages[self.leading_system.max(self.compacted_from)..]
    }

    /// Every compaction, in order.
    pub fn compactions(&self) -> &[CompactionRecord] {
        &self.compactions
    }

    /// The summary sent in place of the compacted messages, if the last
    /// compaction wrote one.
    pub fn summary(&self) -> Option<&str> {
        self.compactions.last().and_then(|c| c.summary.as_deref())
    }

    /// The status of turn `id`, if it exists.
    pub fn turn_status(&self, id: TurnId) -> Option<TurnStatus> {
        self.turn(id).map(|t| t.status)
    }
}
