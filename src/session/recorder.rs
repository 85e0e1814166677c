//! The `Evaluation` recorder of the inner-messages spec.
//!
//! It numbers messages exactly as the spec does: the system message is
//! `sequence` 0 at `turn` 0; every message takes the next sequence; an
//! assistant message increments the turn first, and the tool results that
//! follow carry that turn.

use std::sync::{Mutex, MutexGuard};

use crate::error::{Error, Result};
use crate::event::{AdapterStateSnapshot, Event, Outcome, ProviderCallRecord};
use crate::model::{
    CallId, EvaluationId, InnerMessage, MessageId, Role, ToolCallRecord, ToolStatus, now,
};
use crate::session::Session;

struct Counters {
    next_sequence: u64,
    turn: u32,
}

/// Records one evaluation (one agent run) of a session, message by message.
///
/// Each method appends (durably, as configured) before it returns, so a
/// crash at any point leaves the journal describing exactly what happened.
pub struct Evaluation {
    session: Session,
    id: EvaluationId,
    prompt_ns: String,
    prompt_key: String,
    counters: Mutex<Counters>,
}

impl std::fmt::Debug for Evaluation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let c = self.counters();
        f.debug_struct("Evaluation")
            .field("id", &self.id)
            .field("session", &self.session.id())
            .field("next_sequence", &c.next_sequence)
            .field("turn", &c.turn)
            .finish()
    }
}

impl Evaluation {
    pub(crate) fn new(
        session: Session,
        id: EvaluationId,
        prompt_ns: String,
        prompt_key: String,
        next_sequence: u64,
        turn: u32,
    ) -> Self {
        Self {
            session,
            id,
            prompt_ns,
            prompt_key,
            counters: Mutex::new(Counters {
                next_sequence,
                turn,
            }),
        }
    }

    fn counters(&self) -> MutexGuard<'_, Counters> {
        self.counters.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The evaluation's id.
    pub fn id(&self) -> EvaluationId {
        self.id
    }

    /// The session it records into.
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// The prompt identity `(namespace, key)` it runs.
    pub fn prompt(&self) -> (&str, &str) {
        (&self.prompt_ns, &self.prompt_key)
    }

    /// The sequence the next message will get.
    pub fn next_sequence(&self) -> u64 {
        self.counters().next_sequence
    }

    /// The current turn (number of assistant messages so far).
    pub fn turn(&self) -> u32 {
        self.counters().turn
    }

    fn message(&self, role: Role, content: String) -> InnerMessage {
        let mut m = InnerMessage::new(role, content, self.id, 0);
        m.prompt_ns.clone_from(&self.prompt_ns);
        m.prompt_key.clone_from(&self.prompt_key);
        m
    }

    /// Assigns sequence and turn and appends `events_after` in the same atomic
    /// batch as the message. Counters advance only if the append succeeds.
    fn record(
        &self,
        mut msg: InnerMessage,
        new_turn: bool,
        events_after: Vec<Event>,
    ) -> Result<MessageId> {
        let mut c = self.counters();
        let turn = if new_turn { c.turn + 1 } else { c.turn };
        msg.sequence = c.next_sequence;
        msg.turn = turn;
        let id = msg.message_id;
        let mut events = Vec::with_capacity(1 + events_after.len());
        events.push(Event::Message(msg));
        events.extend(events_after);
        self.session.append_batch(events)?;
        c.next_sequence += 1;
        c.turn = turn;
        Ok(id)
    }

    /// Records the system prompt.
    pub fn system(&self, content: impl Into<String>) -> Result<MessageId> {
        self.record(
            self.message(Role::System, content.into()),
            false,
            Vec::new(),
        )
    }

    /// Records a user message.
    pub fn user(&self, content: impl Into<String>) -> Result<MessageId> {
        self.record(self.message(Role::User, content.into()), false, Vec::new())
    }

    /// Records an assistant message and the tool calls it makes (all
    /// `Pending`); starts a new turn.
    pub fn assistant(
        &self,
        content: impl Into<String>,
        tool_calls: Vec<ToolCallRecord>,
    ) -> Result<MessageId> {
        self.assistant_with_payload(content, tool_calls, None)
    }

    /// [`Evaluation::assistant`] keeping the provider's message verbatim
    /// (JSON text) for exact re-export.
    pub fn assistant_with_payload(
        &self,
        content: impl Into<String>,
        tool_calls: Vec<ToolCallRecord>,
        provider_payload: Option<String>,
    ) -> Result<MessageId> {
        let mut m = self.message(Role::Assistant, content.into());
        m.tool_calls = tool_calls
            .into_iter()
            .map(|mut t| {
                t.status = ToolStatus::Pending;
                t
            })
            .collect();
        m.provider_payload = provider_payload;
        self.record(m, true, Vec::new())
    }

    /// Records any message as given (role, content, tool fields, payload),
    /// assigning its sequence and turn. An assistant message starts a turn.
    pub fn record_message(&self, mut message: InnerMessage) -> Result<MessageId> {
        message.evaluation_id = self.id;
        let new_turn = message.role == Role::Assistant;
        self.record(message, new_turn, Vec::new())
    }

    fn tool_name(&self, call_id: &CallId) -> Result<String> {
        let state = self.session.state();
        state
            .tool_calls()
            .get(self.id, call_id)
            .map(|c| c.name.clone())
            .ok_or_else(|| {
                Error::InvalidInput(format!("no tool call {call_id} in evaluation {}", self.id))
            })
    }

    fn status(&self, call_id: &CallId, status: ToolStatus, error: Option<String>) -> Event {
        Event::ToolStatus {
            evaluation_id: self.id,
            call_id: call_id.clone(),
            status,
            error,
        }
    }

    /// Records that a tool call is about to run. A crash after this and
    /// before its result leaves the call *in doubt*.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] if no assistant message made this call.
    pub fn tool_started(&self, call_id: impl Into<CallId>) -> Result<u64> {
        let call_id = call_id.into();
        self.tool_name(&call_id)?;
        self.session
            .append(self.status(&call_id, ToolStatus::Started, None))
    }

    /// Records a tool's result and marks the call `Completed`, atomically.
    pub fn tool_result(
        &self,
        call_id: impl Into<CallId>,
        content: impl Into<String>,
    ) -> Result<MessageId> {
        let call_id = call_id.into();
        let name = self.tool_name(&call_id)?;
        let mut m = self.message(Role::Tool, content.into());
        m.tool_call_id = Some(call_id.clone());
        m.tool_name = Some(name);
        let done = self.status(&call_id, ToolStatus::Completed, None);
        self.record(m, false, vec![done])
    }

    /// Records a tool's failure (as a tool message carrying the error, so
    /// the model sees it) and marks the call `Failed`, atomically.
    pub fn tool_failed(
        &self,
        call_id: impl Into<CallId>,
        error: impl Into<String>,
    ) -> Result<MessageId> {
        let call_id = call_id.into();
        let error = error.into();
        let name = self.tool_name(&call_id)?;
        let mut m = self.message(Role::Tool, error.clone());
        m.tool_call_id = Some(call_id.clone());
        m.tool_name = Some(name);
        let failed = self.status(&call_id, ToolStatus::Failed, Some(error));
        self.record(m, false, vec![failed])
    }

    /// Records a provider round trip (usage, timing, outcome).
    pub fn provider_call(&self, mut record: ProviderCallRecord) -> Result<u64> {
        record.evaluation_id = self.id;
        self.session.append(Event::ProviderCall(record))
    }

    /// Records a captured adapter state; it supersedes the session's
    /// latest capture of the same adapter type, if any.
    pub fn adapter_state(
        &self,
        adapter_type: &str,
        state_json: String,
        resumable: bool,
    ) -> Result<u64> {
        let supersedes = self
            .session
            .state()
            .adapter_states()
            .latest(adapter_type)
            .map(|s| s.snapshot_id);
        self.session
            .append(Event::AdapterState(AdapterStateSnapshot {
                snapshot_id: uuid::Uuid::now_v7(),
                adapter_type: adapter_type.to_owned(),
                state: state_json,
                resumable,
                captured_at: now(),
                evaluation_id: Some(self.id),
                supersedes,
            }))
    }

    /// Records the end of the evaluation.
    pub fn finish(&self, outcome: Outcome) -> Result<u64> {
        self.session.append(Event::EvaluationFinished {
            evaluation_id: self.id,
            outcome,
        })
    }
}

/// Starting and continuing evaluations: the ways to get a recorder.
impl Session {
    /// Starts an evaluation (appends `EvaluationStarted`) and returns its
    /// recorder, which assigns `sequence` and `turn` to every message.
    pub fn start_evaluation(&self, prompt_ns: &str, prompt_key: &str) -> Result<Evaluation> {
        self.start_evaluation_with(prompt_ns, prompt_key, "agent-journal")
    }

    /// [`Session::start_evaluation`] naming the adapter that runs it.
    pub fn start_evaluation_with(
        &self,
        prompt_ns: &str,
        prompt_key: &str,
        adapter: &str,
    ) -> Result<Evaluation> {
        let evaluation_id = EvaluationId::new();
        self.append(Event::EvaluationStarted {
            evaluation_id,
            prompt_ns: prompt_ns.to_owned(),
            prompt_key: prompt_key.to_owned(),
            adapter: adapter.to_owned(),
        })?;
        Ok(Evaluation::new(
            self.clone(),
            evaluation_id,
            prompt_ns.to_owned(),
            prompt_key.to_owned(),
            0,
            0,
        ))
    }

    /// Starts an evaluation together with its opening messages (system
    /// prompt, user request, ...) in one atomic append, so that a crash never
    /// leaves an evaluation without the prompts it needs to be resumed.
    pub fn start_evaluation_with_messages(
        &self,
        prompt_ns: &str,
        prompt_key: &str,
        adapter: &str,
        opening: &[(crate::model::Role, String)],
    ) -> Result<Evaluation> {
        let evaluation_id = EvaluationId::new();
        let mut events = vec![Event::EvaluationStarted {
            evaluation_id,
            prompt_ns: prompt_ns.to_owned(),
            prompt_key: prompt_key.to_owned(),
            adapter: adapter.to_owned(),
        }];
        for (sequence, (role, content)) in opening.iter().enumerate() {
            let mut m = crate::model::InnerMessage::new(
                *role,
                content.clone(),
                evaluation_id,
                sequence as u64,
            );
            m.prompt_ns = prompt_ns.to_owned();
            m.prompt_key = prompt_key.to_owned();
            events.push(Event::Message(m));
        }
        self.append_batch(events)?;
        Ok(Evaluation::new(
            self.clone(),
            evaluation_id,
            prompt_ns.to_owned(),
            prompt_key.to_owned(),
            opening.len() as u64,
            0,
        ))
    }

    /// A recorder that continues an existing evaluation where its messages
    /// stop (next `sequence`, current `turn`).
    ///
    /// # Errors
    /// [`Error::ConversationNotFound`] if the evaluation is not in this session.
    pub fn evaluation(&self, evaluation_id: EvaluationId) -> Result<Evaluation> {
        let state = self.state();
        let info = state
            .evaluations()
            .get(evaluation_id)
            .ok_or(Error::ConversationNotFound(self.id()))?;
        let (next_sequence, turn) = match state.messages().last_for(evaluation_id) {
            Some(m) => (
                m.sequence + 1,
                state
                    .messages()
                    .for_evaluation(evaluation_id)
                    .map(|m| m.turn)
                    .max()
                    .unwrap_or(0),
            ),
            None => (0, 0),
        };
        let (ns, key) = (info.prompt_ns.clone(), info.prompt_key.clone());
        drop(state);
        Ok(Evaluation::new(
            self.clone(),
            evaluation_id,
            ns,
            key,
            next_sequence,
            turn,
        ))
    }
}

/// An evaluation handle is `Send + Sync` (checked at compile time), as the
/// journal's and a session's are.
#[allow(dead_code)]
fn _assert_evaluation_is_send_sync() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Evaluation>();
}
