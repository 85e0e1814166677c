//! The conversation an inner-loop session holds (a demo run, an imported
//! chat, an application's evaluations), in the conversation engine's
//! records: one model read through one set of operations.
//!
//! Each evaluation is a turn with the same id (its tool calls are already
//! keyed by it, see [`TurnId::as_evaluation`]); its system, user and other
//! messages are the turn's inputs and its assistant and tool messages its
//! outputs; each provider round trip is a provider call of the turn, sent
//! the evaluation's messages so far (what the inner loop sends); each
//! `Compacted` event is a compaction whose first kept message is the
//! evaluation's first message after `through_sequence`; `EvaluationFinished`
//! sets the turn's status (an evaluation never finished is a turn left
//! `running`: interrupted). Events of other kinds change nothing here.
//!
//! The records are derived, not stored: ids of provider calls are UUIDv5 of
//! the session and the event's seq, so the same events always give the
//! same records.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde_json::Value;
use uuid::Uuid;

use crate::event::conversation::{
    CallOutcome, CompactionRecord, Conversation, ConversationEvent, ConversationMessage, Metadata,
    ProviderCallRecord, ProviderOperation, TurnError, TurnId, TurnRecord, TurnStatus,
};
use crate::event::{Envelope, Event, Outcome, ProviderOutcome};
use crate::model::{EvaluationId, MessageId, Role, SessionId};

use super::ConversationLog;

impl ConversationLog {
    /// The conversation an inner-loop session holds (a run of the inner
    /// loop, an imported chat), read as the conversation engine's records
    /// from its events, in order:
    ///
    /// - `SessionOpened` is the conversation (agent: the `agent` label,
    ///   else `inner_loop`; metadata: the labels);
    /// - each evaluation is a turn with the same id, agent its adapter,
    ///   trigger `evaluation`, prompt in its metadata; system, user and
    ///   other messages are its inputs, assistant and tool messages its
    ///   outputs; `EvaluationFinished` sets its status (never finished:
    ///   `running`, an interrupted turn);
    /// - each message is a [`ConversationMessage::from_inner`];
    /// - each provider round trip is a provider call of the turn (id: a
    ///   UUIDv5 of the session and the event's seq), sent the evaluation's
    ///   messages so far that no compaction dropped;
    /// - each `Compacted` event is a compaction whose first kept message is
    ///   the evaluation's first after `through_sequence`.
    ///
    /// [`is_conversation`](Self::is_conversation) is true when the events
    /// hold `SessionOpened`. The records are derived, so the same events
    /// always give equal logs. O(events).
    pub fn of_inner_loop<'a>(
        session: SessionId,
        events: impl IntoIterator<Item = &'a Envelope>,
    ) -> ConversationLog {
        let mut b = InnerLoopLog::new(session);
        for env in events {
            b.push(env);
        }
        b.finish()
    }
}

/// Builds a [`ConversationLog`] from an inner-loop session's events, one
/// at a time (memory: the records it returns).
#[derive(Debug)]
pub(crate) struct InnerLoopLog {
    session: SessionId,
    log: ConversationLog,
    /// Each evaluation's turn record, finished or not, in start order.
    turns: BTreeMap<EvaluationId, TurnRecord>,
    /// Each evaluation's messages: (sequence, id), in fold order.
    messages: BTreeMap<EvaluationId, Vec<(u64, MessageId, bool)>>,
    /// Each evaluation's highest `through_sequence` compacted.
    compacted: BTreeMap<EvaluationId, u64>,
}

impl InnerLoopLog {
    pub(crate) fn new(session: SessionId) -> Self {
        Self {
            session,
            log: ConversationLog::default(),
            turns: BTreeMap::new(),
            messages: BTreeMap::new(),
            compacted: BTreeMap::new(),
        }
    }

    /// The turn of `eval`, started at `at` if it was not yet (an import
    /// may hold messages without an `EvaluationStarted`).
    fn turn(&mut self, eval: EvaluationId, at: DateTime<Utc>) -> &mut TurnRecord {
        let log = &mut self.log;
        self.turns.entry(eval).or_insert_with(|| {
            let t = turn_record(eval, "", at, Metadata::new());
            log.apply(&ConversationEvent::Turn(t.clone()));
            t
        })
    }

    pub(crate) fn push(&mut self, env: &Envelope) {
        match &env.event {
            Event::SessionOpened { labels } => {
                let agent = labels
                    .iter()
                    .find(|(k, _)| k == "agent")
                    .map_or("inner_loop", |(_, v)| v.as_str());
                let metadata = labels
                    .iter()
                    .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                    .collect();
                let info = Conversation {
                    id: self.session,
                    agent: agent.to_owned(),
                    subject_id: None,
                    title: None,
                    created_at: env.at,
                    updated_at: env.at,
                    metadata,
                };
                self.log.apply(&ConversationEvent::Created(info));
            }
            Event::EvaluationStarted {
                evaluation_id,
                prompt_ns,
                prompt_key,
                adapter,
            } => {
                let mut metadata = Metadata::new();
                metadata.insert("prompt_ns".into(), Value::String(prompt_ns.clone()));
                metadata.insert("prompt_key".into(), Value::String(prompt_key.clone()));
                let t = turn_record(*evaluation_id, adapter, env.at, metadata);
                if !self.turns.contains_key(evaluation_id) {
                    self.log.apply(&ConversationEvent::Turn(t.clone()));
                }
                self.turns.insert(*evaluation_id, t);
            }
            Event::Message(m) => {
                let cm = ConversationMessage::from_inner(m, self.session);
                if !self.log.apply(&ConversationEvent::Message(cm)) {
                    return;
                }
                self.messages.entry(m.evaluation_id).or_default().push((
                    m.sequence,
                    m.message_id,
                    m.role == Role::System,
                ));
                let t = self.turn(m.evaluation_id, m.created_at);
                match m.role {
                    Role::Assistant | Role::Tool => t.output_messages.push(m.message_id),
                    Role::System | Role::User | Role::Other => t.input_messages.push(m.message_id),
                }
            }
            Event::ProviderCall(p) => {
                let sent = self.sent(p.evaluation_id);
                let mut request_metadata = Metadata::new();
                request_metadata.insert("inner_loop_turn".into(), Value::from(p.turn));
                let (ok, error) = match &p.outcome {
                    ProviderOutcome::Ok => (true, None),
                    ProviderOutcome::Error { message } => (false, Some(message.clone())),
                };
                let call = ProviderCallRecord {
                    id: Uuid::new_v5(&self.session.0, &env.seq.to_be_bytes()),
                    conversation_id: self.session,
                    turn_id: TurnId(p.evaluation_id.0),
                    provider: p.provider.clone(),
                    model: p.model.clone(),
                    operation: ProviderOperation::Chat,
                    request_id: None,
                    correlation_id: None,
                    parent_correlation_id: None,
                    request_metadata,
                    response_metadata: Metadata::new(),
                    parameters: Metadata::new(),
                    tools: Vec::new(),
                    sent_messages: sent,
                    usage: Some(p.usage.clone()),
                    outcome: Some(CallOutcome {
                        ok,
                        status: None,
                        error_category: None,
                        error,
                        attempts: 1,
                    }),
                    started_at: p.started_at,
                    finished_at: Some(p.finished_at),
                };
                self.turn(p.evaluation_id, p.started_at);
                self.log.apply(&ConversationEvent::ProviderCall(call));
            }
            Event::Compacted {
                evaluation_id,
                through_sequence,
                summary,
            } => {
                let through = self.compacted.entry(*evaluation_id).or_default();
                *through = (*through).max(*through_sequence);
                let through = *through;
                let all = self
                    .messages
                    .get(evaluation_id)
                    .map_or(&[][..], Vec::as_slice);
                let kept = all.iter().filter(|(s, ..)| *s > through);
                let Some(&(_, first_kept, _)) = kept.clone().min() else {
                    return;
                };
                let record = CompactionRecord {
                    turn_id: Some(TurnId(evaluation_id.0)),
                    first_kept,
                    strategy: "compacted".into(),
                    summary: summary.clone(),
                    messages_before: all.len() as u64,
                    messages_after: kept.count() as u64,
                    tokens_before: None,
                    at: env.at,
                };
                self.log.apply(&ConversationEvent::Compacted(record));
            }
            Event::EvaluationFinished {
                evaluation_id,
                outcome,
            } => {
                let t = self.turn(*evaluation_id, env.at);
                t.finished_at = Some(env.at);
                (t.status, t.error) = match outcome {
                    Outcome::Succeeded => (TurnStatus::Succeeded, None),
                    Outcome::Cancelled => (TurnStatus::Cancelled, None),
                    Outcome::Failed { error } => (
                        TurnStatus::Failed,
                        Some(TurnError {
                            message: error.clone(),
                            code: None,
                            provider: None,
                            raw: Value::Null,
                        }),
                    ),
                };
            }
            Event::ToolStatus { .. }
            | Event::AdapterState(_)
            | Event::Custom { .. }
            | Event::Conversation(_)
            | Event::ForkPoint { .. } => {}
        }
    }

    /// The messages of `eval` a provider call is sent now, as the inner
    /// loop sends them: the evaluation's leading system messages, then
    /// those after its compaction, by sequence.
    fn sent(&self, eval: EvaluationId) -> Vec<MessageId> {
        let through = self.compacted.get(&eval).copied();
        let mut all = self.messages.get(&eval).cloned().unwrap_or_default();
        if !all.is_sorted() {
            all.sort_unstable();
        }
        let mut leading = true;
        all.into_iter()
            .filter(|&(s, _, system)| {
                leading &= system;
                leading || through.is_none_or(|t| s > t)
            })
            .map(|(_, id, _)| id)
            .collect()
    }

    pub(crate) fn finish(mut self) -> ConversationLog {
        for t in std::mem::take(&mut self.turns).into_values() {
            self.log.apply(&ConversationEvent::Turn(t));
        }
        self.log
    }
}

fn turn_record(
    eval: EvaluationId,
    agent: &str,
    at: DateTime<Utc>,
    metadata: Metadata,
) -> TurnRecord {
    TurnRecord {
        id: TurnId(eval.0),
        agent: agent.to_owned(),
        status: TurnStatus::Running,
        trigger_type: Some("evaluation".into()),
        input_messages: Vec::new(),
        output_messages: Vec::new(),
        started_at: at,
        finished_at: None,
        error: None,
        metadata,
    }
}
