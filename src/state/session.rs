//! `SessionState`: the built-in slices, the application slices, and the
//! binary snapshot of them.

use std::fmt;

use crate::event::conversation::ConversationEvent;
use crate::event::{Envelope, Event};
use crate::model::{EvaluationId, SessionId};
use crate::state::messages::{PeekedMessage, PlainBytes};
use crate::state::{
    AdapterStates, ConversationLog, ConversationView, DynSlice, Evaluations, Messages, Slice,
    SlicePolicy, SliceRegistry, ToolCalls, Usage,
};

/// The state of a session: every slice folded from its events.
///
/// `fold(events[0..=N])` is the state at event N. Folding is pure and
/// deterministic, so a state decoded from a snapshot and folded on from the
/// snapshot's seq equals the state folded from zero.
///
/// ```
/// use agent_journal::{Envelope, Event, SessionId};
/// use agent_journal::format::now;
/// use agent_journal::state::SessionState;
///
/// let mut state = SessionState::new();
/// state.apply(&Envelope {
///     session: SessionId::new(),
///     seq: 0,
///     at: now(),
///     event: Event::SessionOpened { labels: vec![("agent".into(), "demo".into())] },
/// });
/// assert_eq!(state.last_seq(), Some(0));
/// assert_eq!(state.labels(), &[("agent".to_owned(), "demo".to_owned())]);
/// ```
pub struct SessionState {
    pub(crate) messages: Messages,
    pub(crate) tool_calls: ToolCalls,
    pub(crate) evaluations: Evaluations,
    pub(crate) conversations: ConversationLog,
    pub(crate) adapter_states: AdapterStates,
    pub(crate) usage: Usage,
    pub(crate) labels: Vec<(String, String)>,
    pub(crate) forked_from: Option<(SessionId, u64)>,
    pub(crate) last_seq: Option<u64>,
    pub(crate) events_applied: u64,
    pub(crate) app: Vec<Box<dyn DynSlice>>,
    /// What changed since the snapshot the state was last written as or
    /// read from (not part of the state: equality ignores it).
    pub(crate) marks: Marks,
}

/// What changed in a [`SessionState`] since a snapshot: what a delta
/// snapshot holds (`state/delta.rs`). The tool calls and the conversation
/// engine's log record their own changes.
#[derive(Clone, Debug, Default)]
pub(crate) struct Marks {
    /// The seq of that snapshot; `None` while nothing is recorded (the
    /// next snapshot is whole).
    pub(crate) at: Option<u64>,
    /// Messages added since, by evaluation and key.
    pub(crate) messages: Vec<(EvaluationId, (u64, crate::model::MessageId))>,
    /// Evaluations whose record or usage changed since (repeats allowed).
    pub(crate) evaluations: Vec<EvaluationId>,
    /// The number of adapter states then.
    pub(crate) adapter_states: usize,
}

impl Marks {
    fn evaluation(&mut self, eval: EvaluationId) {
        if self.at.is_some() && self.evaluations.last() != Some(&eval) {
            self.evaluations.push(eval);
        }
    }

    fn message(&mut self, eval: EvaluationId, key: (u64, crate::model::MessageId)) {
        if self.at.is_some() {
            self.messages.push((eval, key));
        }
    }
}

impl Default for SessionState {
    fn default() -> Self {
        Self::new()
    }
}

impl SessionState {
    /// An empty state with the built-in slices only.
    pub fn new() -> Self {
        Self {
            messages: Messages::default(),
            tool_calls: ToolCalls::default(),
            evaluations: Evaluations::default(),
            conversations: ConversationLog::default(),
            adapter_states: AdapterStates::default(),
            usage: Usage::default(),
            labels: Vec::new(),
            forked_from: None,
            last_seq: None,
            events_applied: 0,
            app: Vec::new(),
            marks: Marks::default(),
        }
    }

    /// Records from now on what changes, as after a snapshot at `seq` (the
    /// state's last event): the next snapshot can be a delta on it.
    pub(crate) fn mark(&mut self, seq: u64) {
        self.marks = Marks {
            at: Some(seq),
            messages: Vec::new(),
            evaluations: Vec::new(),
            adapter_states: self.adapter_states.len(),
        };
        self.tool_calls.mark();
        self.conversations.mark();
    }

    /// Stops recording changes: the next snapshot is whole.
    pub(crate) fn unmark(&mut self) {
        self.marks = Marks::default();
        self.tool_calls.unmark();
        self.conversations.unmark();
    }

    /// An empty state with the built-in slices and every slice of `registry`
    /// at its default value.
    pub fn with_slices(registry: &SliceRegistry) -> Self {
        let mut s = Self::new();
        s.app = registry.factories().iter().map(|f| (f.make)()).collect();
        s
    }

    /// Folds one event into every slice and records its seq.
    ///
    /// A `Message` whose `message_id` was already seen changes no built-in
    /// slice; application slices see every envelope, duplicates included.
    /// [`apply_owned`](Self::apply_owned) does the same without copying the message.
    pub fn apply(&mut self, envelope: &Envelope) {
        if self.fold(envelope) {
            if let Event::Message(m) = &envelope.event {
                self.marks
                    .message(m.evaluation_id, (m.sequence, m.message_id));
                self.messages.insert_claimed(m.clone());
            }
        }
    }

    /// [`apply`](Self::apply) of an owned envelope: a new message is moved
    /// into the [`Messages`] slice instead of copied. The state is the same.
    pub fn apply_owned(&mut self, envelope: Envelope) {
        if self.fold(&envelope) {
            if let Event::Message(m) = envelope.event {
                self.marks
                    .message(m.evaluation_id, (m.sequence, m.message_id));
                self.messages.insert_claimed(m);
            }
        }
    }

    /// [`apply_owned`](Self::apply_owned) of an envelope decoded from
    /// `frame`, in which its message's bincode (if the event is a
    /// `Message`) runs from `start` to the end
    /// ([`message_start`](crate::format::message::message_start)): a new
    /// message is kept as those bytes of the frame (shared, not copied) and
    /// decoded again on first access, instead of staying decoded. The state
    /// is the same.
    pub(crate) fn apply_framed(
        &mut self,
        envelope: Envelope,
        frame: &crate::format::SharedBytes,
        start: usize,
    ) {
        if self.fold(&envelope) {
            if let Event::Message(m) = &envelope.event {
                self.marks
                    .message(m.evaluation_id, (m.sequence, m.message_id));
                self.messages.insert_claimed_framed(m, frame, start);
            }
        }
    }

    /// Folds a plain message found in a frame body by
    /// [`peek_message`](crate::state::messages::peek_message) without
    /// decoding it: it is kept as its bytes, decoded on first access. The
    /// state is the same as after [`apply_owned`](Self::apply_owned) of the
    /// decoded envelope. Returns false, and changes nothing, when that
    /// takes more than the message's ids (application slices see whole
    /// envelopes; a first message may set its evaluation's prompt): decode
    /// and apply it then.
    ///
    /// `frame` is the frame the envelope came in, if it can be kept (the
    /// message then stays in it, uncopied), with where the envelope starts.
    pub(crate) fn fold_plain_message(
        &mut self,
        m: &PeekedMessage<'_>,
        frame: Option<(&crate::format::SharedBytes, usize)>,
    ) -> bool {
        let ids = &m.ids;
        let eval = ids.evaluation_id;
        if !self.app.is_empty() || self.evaluations.wants_prompt(eval) {
            return false;
        }
        self.last_seq = Some(m.seq);
        self.events_applied = self.events_applied.saturating_add(1);
        if self.messages.claim_id(ids.message_id, eval, ids.sequence) {
            let key = (ids.sequence, ids.message_id);
            self.marks.evaluation(eval);
            self.marks.message(eval, key);
            self.evaluations.on_turn(eval, ids.turn, m.seq);
            let shared = frame.and_then(|(f, at)| f.try_slice(at + m.start..f.len()));
            let bytes = match shared {
                Some(bytes) => PlainBytes::Shared(bytes),
                None => PlainBytes::Copy(m.body),
            };
            self.messages.insert_claimed_plain(eval, key, bytes);
        }
        true
    }

    /// Folds `envelope` into every slice except the insertion of a new
    /// message into [`Messages`], which it leaves to the caller: returns
    /// true when the envelope is a message not seen before, whose id it
    /// claimed (the caller must insert it with `insert_claimed`).
    fn fold(&mut self, envelope: &Envelope) -> bool {
        // Application code first: should it panic, no built-in slice has
        // seen the envelope (and no id is claimed without its message).
        for s in &mut self.app {
            s.apply(envelope);
        }
        self.last_seq = Some(envelope.seq);
        self.events_applied = self.events_applied.saturating_add(1);
        let mut new_message = false;
        match &envelope.event {
            Event::SessionOpened { labels } => self.labels.clone_from(labels),
            Event::EvaluationStarted {
                evaluation_id,
                prompt_ns,
                prompt_key,
                adapter,
            } => {
                self.marks.evaluation(*evaluation_id);
                self.evaluations.on_started(
                    *evaluation_id,
                    prompt_ns,
                    prompt_key,
                    adapter,
                    envelope.at,
                    envelope.seq,
                )
            }
            Event::Message(m) => {
                if self.messages.claim(m) {
                    new_message = true;
                    self.marks.evaluation(m.evaluation_id);
                    self.tool_calls.on_message(m);
                    self.evaluations.on_message(m, envelope.seq);
                }
            }
            Event::ToolStatus {
                evaluation_id,
                call_id,
                status,
                error,
            } => {
                self.messages.set_status(*evaluation_id, call_id, *status);
                self.tool_calls.on_status(
                    *evaluation_id,
                    call_id,
                    *status,
                    error.as_ref(),
                    envelope.at,
                );
            }
            Event::ProviderCall(p) => {
                self.marks.evaluation(p.evaluation_id);
                self.usage.on_provider_call(p)
            }
            Event::AdapterState(a) => self.adapter_states.push(a),
            Event::Compacted {
                evaluation_id,
                through_sequence,
                summary,
            } => {
                self.marks.evaluation(*evaluation_id);
                self.evaluations
                    .on_compacted(*evaluation_id, *through_sequence, summary)
            }
            Event::EvaluationFinished {
                evaluation_id,
                outcome,
            } => {
                self.marks.evaluation(*evaluation_id);
                self.evaluations
                    .on_finished(*evaluation_id, outcome, envelope.at);
                // Its messages are in: no room kept for more.
                self.messages.shrink(*evaluation_id);
            }
            // A fork's own marker, after the prefix it shares (which may
            // hold its ancestors' markers): the last one folded wins.
            Event::ForkPoint { parent, at } => self.forked_from = Some((*parent, *at)),
            Event::Custom { .. } => {}
            Event::Conversation(c) => {
                if self.conversations.apply(c) {
                    if let ConversationEvent::Message(m) = &**c {
                        if let Some(turn) = m.turn_id {
                            self.tool_calls.on_calls(
                                turn.as_evaluation(),
                                m.created_at,
                                m.id,
                                &m.tool_calls,
                                m.tool_call_id.as_ref(),
                                false,
                            );
                        }
                    }
                }
            }
        }
        new_message
    }

    /// The seq of the last applied envelope.
    pub fn last_seq(&self) -> Option<u64> {
        self.last_seq
    }

    /// Number of envelopes applied (duplicates included).
    pub fn events_applied(&self) -> u64 {
        self.events_applied
    }

    /// Every message, ordered and deduplicated.
    pub fn messages(&self) -> &Messages {
        &self.messages
    }

    /// Every tool call and its lifecycle.
    pub fn tool_calls(&self) -> &ToolCalls {
        &self.tool_calls
    }

    /// Every evaluation.
    pub fn evaluations(&self) -> &Evaluations {
        &self.evaluations
    }

    /// The conversation engine's records (empty unless the session holds a
    /// conversation the engine made).
    pub fn conversation_log(&self) -> &ConversationLog {
        &self.conversations
    }

    /// One evaluation's conversation (the conversation-state spec's view),
    /// read from its messages: `None` if it has none. O(its messages).
    pub fn conversation_view(&self, eval: EvaluationId) -> Option<ConversationView<'_>> {
        crate::state::conversation::view(eval, &self.messages)
    }

    /// The captured adapter states (LOG slice).
    pub fn adapter_states(&self) -> &AdapterStates {
        &self.adapter_states
    }

    /// Token usage.
    pub fn usage(&self) -> &Usage {
        &self.usage
    }

    /// The labels of `SessionOpened`.
    pub fn labels(&self) -> &[(String, String)] {
        &self.labels
    }

    /// The parent session and seq, if this session is a fork.
    pub fn forked_from(&self) -> Option<(SessionId, u64)> {
        self.forked_from
    }

    /// The application slice of type `S`, if registered.
    pub fn slice<S: Slice>(&self) -> Option<&S> {
        self.app.iter().find_map(|s| s.as_any().downcast_ref::<S>())
    }

    /// Restores `other` into this state with WINK's semantics: every STATE
    /// slice (and the seq, labels and fork origin) is taken from `other`;
    /// every LOG slice ([`AdapterStates`], application slices with
    /// [`SlicePolicy::Log`]) is kept from `self`.
    ///
    /// Application slices are matched by name. A STATE slice `other` lacks
    /// is reset to its default; a LOG slice only `other` has starts empty.
    pub fn restore(&mut self, other: SessionState) {
        let SessionState {
            messages,
            tool_calls,
            evaluations,
            conversations,
            adapter_states: _,
            usage,
            labels,
            forked_from,
            last_seq,
            events_applied,
            app: mut theirs,
            marks: _,
        } = other;
        // Not the state any snapshot holds: the next one is whole.
        self.unmark();
        self.messages = messages;
        self.tool_calls = tool_calls;
        self.evaluations = evaluations;
        self.conversations = conversations;
        self.usage = usage;
        self.labels = labels;
        self.forked_from = forked_from;
        self.last_seq = last_seq;
        self.events_applied = events_applied;
        let mut out: Vec<Box<dyn DynSlice>> = Vec::with_capacity(self.app.len());
        for mine in self.app.drain(..) {
            let found = theirs.iter().position(|t| t.name() == mine.name());
            let taken = found.map(|i| theirs.remove(i));
            out.push(match (mine.policy(), taken) {
                (SlicePolicy::Log, _) => mine,
                (SlicePolicy::State, Some(t)) => t,
                (SlicePolicy::State, None) => mine.fresh(),
            });
        }
        for t in theirs {
            out.push(match t.policy() {
                SlicePolicy::State => t,
                SlicePolicy::Log => t.fresh(),
            });
        }
        self.app = out;
    }
}

impl Clone for SessionState {
    fn clone(&self) -> Self {
        Self {
            messages: self.messages.clone(),
            tool_calls: self.tool_calls.clone(),
            evaluations: self.evaluations.clone(),
            conversations: self.conversations.clone(),
            adapter_states: self.adapter_states.clone(),
            usage: self.usage.clone(),
            labels: self.labels.clone(),
            forked_from: self.forked_from,
            last_seq: self.last_seq,
            events_applied: self.events_applied,
            app: self.app.iter().map(|s| s.clone_box()).collect(),
            marks: self.marks.clone(),
        }
    }
}

impl PartialEq for SessionState {
    /// Built-in slices compare by value; application slices by name and by
    /// their bincode bytes, in registration order.
    fn eq(&self, other: &Self) -> bool {
        self.last_seq == other.last_seq
            && self.events_applied == other.events_applied
            && self.labels == other.labels
            && self.forked_from == other.forked_from
            && self.messages == other.messages
            && self.tool_calls == other.tool_calls
            && self.evaluations == other.evaluations
            && self.conversations == other.conversations
            && self.adapter_states == other.adapter_states
            && self.usage == other.usage
            && self.app.len() == other.app.len()
            && self.app.iter().zip(&other.app).all(|(a, b)| {
                a.name() == b.name()
                    && match (a.encode(u64::MAX), b.encode(u64::MAX)) {
                        (Ok(x), Ok(y)) => x == y,
                        _ => false,
                    }
            })
    }
}

impl fmt::Debug for SessionState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SessionState")
            .field("last_seq", &self.last_seq)
            .field("events_applied", &self.events_applied)
            .field("labels", &self.labels)
            .field("forked_from", &self.forked_from)
            .field("messages", &self.messages)
            .field("tool_calls", &self.tool_calls)
            .field("evaluations", &self.evaluations)
            .field("adapter_states", &self.adapter_states)
            .field("usage", &self.usage)
            .field(
                "app_slices",
                &self.app.iter().map(|s| s.name()).collect::<Vec<_>>(),
            )
            .finish()
    }
}
