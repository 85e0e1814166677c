//! The `ConversationLog` slice: the conversation engine's records folded
//! from [`ConversationEvent`]s (latest record of each turn and provider
//! call wins; a message id seen twice is kept once).

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use uuid::Uuid;

use crate::event::conversation::{
    CompactionRecord, Conversation, ConversationEvent, ConversationMessage, MessageRole,
    ProviderCallRecord, TurnId, TurnRecord, TurnStatus,
};
use crate::model::MessageId;

/// The conversation a session holds, if the conversation engine made it
/// (state slice). Every lookup is O(log n); reading the last `k` messages
/// is O(k).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
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
            .take_while(|m| m.role == MessageRole::System)
            .count();
        let compacted_from = usize::try_from(raw.compacted_from)
            .unwrap_or(usize::MAX)
            .min(raw.messages.len());
        Ok(Self {
            leading_system,
            compacted_from,
            compactions: raw.compactions,
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

    /// Folds one conversation event. For a message, returns true when it is
    /// new (the caller folds its tool calls).
    pub(crate) fn apply(&mut self, event: &ConversationEvent) -> bool {
        match event {
            ConversationEvent::Created(c) | ConversationEvent::Updated(c) => {
                self.info = Some(c.clone());
            }
            ConversationEvent::Message(m) => {
                if self.message_index.contains_key(&m.id) {
                    return false;
                }
                self.message_index.insert(m.id, self.messages.len());
                if m.role == MessageRole::System && self.leading_system == self.messages.len() {
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
                    Some(&i) => self.turns[i] = t.clone(),
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
