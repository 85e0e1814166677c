//! Resume: where an evaluation stopped and what is left to do.
//!
//! ```
//! use agent_journal::resume::ResumeState;
//! use agent_journal::{Journal, ToolCallRecord};
//!
//! # fn main() -> agent_journal::Result<()> {
//! let journal = Journal::memory();
//! let session = journal.create_session()?;
//! let eval = session.start_evaluation("support", "triage")?;
//! eval.user("What is in /tmp?")?;
//! eval.assistant("Looking.", vec![ToolCallRecord::new("call_1", "list_dir", "{}")])?;
//! eval.tool_started("call_1")?;
//! // The process stops here.
//!
//! let plan = session.resume_plan()?;
//! assert_eq!(plan.crash_point, session.head() - 1); // the last event recorded
//! assert_eq!(plan.in_doubt.len(), 1); // started, never finished
//! assert!(matches!(plan.state, ResumeState::InDoubt(_)));
//! # Ok(())
//! # }
//! ```
//!
//! The promise: a tool call that finished is never run again (its result is
//! in the journal); one that never started runs; one that was running when
//! the process died (*in doubt*) follows the tool's
//! [`Idempotency`](crate::agent::Idempotency), never silently re-run.

pub use crate::model::{INTERRUPTED_ERROR, INTERRUPTED_RESULT};

use crate::error::{Error, Result};
use crate::event::Outcome;
use crate::model::{EvaluationId, InnerMessage, Role, SessionId};
use crate::session::Session;
use crate::state::{SessionState, ToolCallInfo};

/// Where an evaluation stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ResumeState {
    /// Started, but no message was recorded yet.
    NotStarted,
    /// The history is complete up to a request: the next step is a provider call.
    AwaitingProvider,
    /// Tool calls that never started (and none in doubt): run them.
    PendingTools(Vec<ToolCallInfo>),
    /// Tool calls that started and have no result: they may or may not have
    /// had their effect. Pending calls, if any, are in [`ResumePlan::pending`].
    InDoubt(Vec<ToolCallInfo>),
    /// The final answer is recorded (an assistant message with no tool
    /// calls); only the `EvaluationFinished` event is missing.
    Answered,
    /// The evaluation finished.
    Finished(Outcome),
}

impl ResumeState {
    /// A short name in snake_case, as the CLI's text and JSON print it
    /// (`"in_doubt"`).
    pub fn name(&self) -> &'static str {
        match self {
            ResumeState::NotStarted => "not_started",
            ResumeState::AwaitingProvider => "awaiting_provider",
            ResumeState::PendingTools(_) => "pending_tools",
            ResumeState::InDoubt(_) => "in_doubt",
            ResumeState::Answered => "answered",
            ResumeState::Finished(_) => "finished",
        }
    }
}

/// What resuming an evaluation needs: its messages, the crash point, the
/// counters to continue with, and what is left to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResumePlan {
    /// The session read.
    pub session: SessionId,
    /// The evaluation to continue (the last started in the stream; see
    /// [`Evaluations::latest`](crate::state::Evaluations::latest)).
    pub evaluation_id: EvaluationId,
    /// Its prompt namespace.
    pub prompt_ns: String,
    /// Its prompt key.
    pub prompt_key: String,
    /// Its messages, ordered by sequence. The provider request that goes on
    /// from here is [`ConversationFormat::to_json`](crate::provider::ConversationFormat::to_json)
    /// of them: valid for the provider whatever the state (a call still
    /// unfinished gets an explicit "interrupted" result; the engine runs
    /// such calls before it rebuilds a request).
    pub messages: Vec<InnerMessage>,
    /// The last durable seq of the session: where the process stopped.
    pub crash_point: u64,
    /// The sequence the next message gets.
    pub next_sequence: u64,
    /// The current turn (number of assistant messages).
    pub turn: u32,
    /// Calls requested and never started.
    pub pending: Vec<ToolCallInfo>,
    /// Calls started and never finished.
    pub in_doubt: Vec<ToolCallInfo>,
    /// What is left to do.
    pub state: ResumeState,
}

impl ResumePlan {
    /// Builds the plan of `evaluation_id` from a folded state.
    pub(crate) fn from_state(
        session: SessionId,
        state: &SessionState,
        evaluation_id: EvaluationId,
        crash_point: u64,
    ) -> Result<ResumePlan> {
        let info = state
            .evaluations()
            .get(evaluation_id)
            .ok_or(Error::ConversationNotFound(session))?;
        let messages: Vec<InnerMessage> = state
            .messages()
            .for_evaluation(evaluation_id)
            .cloned()
            .collect();
        let pending: Vec<ToolCallInfo> =
            state.tool_calls().pending(evaluation_id).cloned().collect();
        let in_doubt: Vec<ToolCallInfo> = state
            .tool_calls()
            .in_doubt(evaluation_id)
            .cloned()
            .collect();
        let next_sequence = messages.last().map(|m| m.sequence + 1).unwrap_or(0);
        let turn = messages.iter().map(|m| m.turn).max().unwrap_or(0);
        let last = messages.last();
        let resume_state = if let Some(outcome) = &info.outcome {
            ResumeState::Finished(outcome.clone())
        } else if !in_doubt.is_empty() {
            ResumeState::InDoubt(in_doubt.clone())
        } else if !pending.is_empty() {
            ResumeState::PendingTools(pending.clone())
        } else if messages.is_empty() {
            ResumeState::NotStarted
        } else if matches!(last, Some(m) if m.role == Role::Assistant && m.tool_calls.is_empty()) {
            ResumeState::Answered
        } else {
            ResumeState::AwaitingProvider
        };
        let (prompt_ns, prompt_key) = match messages.first() {
            Some(m) if info.prompt_ns.is_empty() && info.prompt_key.is_empty() => {
                (m.prompt_ns.clone(), m.prompt_key.clone())
            }
            _ => (info.prompt_ns.clone(), info.prompt_key.clone()),
        };
        Ok(ResumePlan {
            session,
            evaluation_id,
            prompt_ns,
            prompt_key,
            messages,
            crash_point,
            next_sequence,
            turn,
            pending,
            in_doubt,
            state: resume_state,
        })
    }

    /// Checks the prompt identity the caller resumes with.
    ///
    /// # Errors
    /// [`Error::PromptMismatch`] naming both identities.
    pub fn check_prompt(&self, prompt_ns: &str, prompt_key: &str) -> Result<()> {
        if (prompt_ns, prompt_key) != (self.prompt_ns.as_str(), self.prompt_key.as_str()) {
            return Err(Error::PromptMismatch {
                expected: format!("{}/{}", self.prompt_ns, self.prompt_key),
                found: format!("{prompt_ns}/{prompt_key}"),
            });
        }
        Ok(())
    }

    /// True if nothing is left to do.
    pub fn is_finished(&self) -> bool {
        matches!(self.state, ResumeState::Finished(_))
    }
}

impl Session {
    /// The resume plan of the latest evaluation of this session: the last
    /// one started in its stream ([`Evaluations::latest`](crate::state::Evaluations::latest)),
    /// whatever its id.
    ///
    /// # Errors
    /// [`Error::ConversationNotFound`] if no evaluation was ever started.
    pub fn resume_plan(&self) -> Result<ResumePlan> {
        let state = self.state();
        let eval = state
            .evaluations()
            .latest()
            .map(|e| e.evaluation_id)
            .ok_or(Error::ConversationNotFound(self.id()))?;
        let crash_point = state.last_seq().unwrap_or(0);
        ResumePlan::from_state(self.id(), &state, eval, crash_point)
    }

    /// The resume plan of a given evaluation.
    ///
    /// # Errors
    /// [`Error::ConversationNotFound`] if it is not in this session.
    pub fn resume_plan_for(&self, evaluation_id: EvaluationId) -> Result<ResumePlan> {
        let state = self.state();
        let crash_point = state.last_seq().unwrap_or(0);
        ResumePlan::from_state(self.id(), &state, evaluation_id, crash_point)
    }
}
