//! Events and their envelope.
//!
//! The encoding is bincode, which is not self-describing: enums are externally
//! tagged by variant index, so **variants are never reordered or edited**. A
//! change of an event's shape is a new variant appended at the end. JSON goes
//! in as `String`. Golden-bytes tests in `codec.rs` pin one of each variant.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::model::{CallId, EvaluationId, InnerMessage, SessionId, ToolStatus};

pub mod conversation;

use conversation::ConversationEvent;
pub use conversation::TokenUsage;

/// How an evaluation ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// It produced its final answer.
    Succeeded,
    /// It stopped with an error.
    Failed {
        /// What went wrong.
        error: String,
    },
    /// It was cancelled by the caller.
    Cancelled,
}

/// How a provider call ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderOutcome {
    /// A response was received.
    Ok,
    /// The call failed.
    Error {
        /// The provider's error.
        message: String,
    },
}

/// One round trip to a model provider.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderCallRecord {
    /// The evaluation it belongs to.
    pub evaluation_id: EvaluationId,
    /// The turn it produced.
    pub turn: u32,
    /// `"openai"`, `"anthropic"`, `"scripted"`, ...
    pub provider: String,
    /// The model name.
    pub model: String,
    /// Token usage reported by the provider.
    pub usage: TokenUsage,
    /// When the request was sent.
    #[serde(with = "crate::model::ts")]
    pub started_at: DateTime<Utc>,
    /// When the response (or error) arrived.
    #[serde(with = "crate::model::ts")]
    pub finished_at: DateTime<Utc>,
    /// How it ended.
    pub outcome: ProviderOutcome,
}

/// A captured adapter state (adapter-state spec), kept in a LOG slice.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdapterStateSnapshot {
    /// Id of this capture.
    pub snapshot_id: Uuid,
    /// The adapter type (`"claude_agent_sdk"`).
    pub adapter_type: String,
    /// The adapter-specific state, as JSON text.
    pub state: String,
    /// Whether the state can be used to resume.
    pub resumable: bool,
    /// When it was captured.
    #[serde(with = "crate::model::ts")]
    pub captured_at: DateTime<Utc>,
    /// The evaluation that produced it.
    pub evaluation_id: Option<EvaluationId>,
    /// The capture this one replaces, if any.
    pub supersedes: Option<Uuid>,
}

/// Everything that can happen in a session.
///
/// Never reorder or edit a variant: append new ones at the end.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Event {
    /// The first event of every session (seq 0).
    SessionOpened {
        /// Free-form labels (`("agent", "demo")`).
        labels: Vec<(String, String)>,
    },
    /// An evaluation (one agent run) started.
    EvaluationStarted {
        /// Its id.
        evaluation_id: EvaluationId,
        /// Prompt namespace.
        prompt_ns: String,
        /// Prompt key.
        prompt_key: String,
        /// The adapter (provider integration) running it.
        adapter: String,
    },
    /// A message of any role.
    Message(InnerMessage),
    /// A tool call changed status.
    ToolStatus {
        /// The evaluation of the call.
        evaluation_id: EvaluationId,
        /// The provider's call id.
        call_id: CallId,
        /// The new status.
        status: ToolStatus,
        /// For `Failed`: why.
        error: Option<String>,
    },
    /// A provider round trip.
    ProviderCall(ProviderCallRecord),
    /// An adapter state was captured.
    AdapterState(AdapterStateSnapshot),
    /// Messages up to `through_sequence` were compacted.
    Compacted {
        /// The evaluation compacted.
        evaluation_id: EvaluationId,
        /// Messages with `sequence <= through_sequence` are summarized.
        through_sequence: u64,
        /// The summary that replaces them, if any.
        summary: Option<String>,
    },
    /// An evaluation ended.
    EvaluationFinished {
        /// Its id.
        evaluation_id: EvaluationId,
        /// How it ended.
        outcome: Outcome,
    },
    /// An application event; fold it with an application slice.
    Custom {
        /// The application's name for the event kind.
        kind: String,
        /// Its payload, in whatever encoding the application chooses.
        payload: Vec<u8>,
    },
    /// A change made by the conversation engine: a conversation, a message,
    /// a turn or a provider call (see [`ConversationEvent`]).
    Conversation(Box<ConversationEvent>),
    /// This session is a fork that reads its parent's events `0..=at`
    /// (same seqs and times) instead of copying them: the first event
    /// stored in the fork, read at seq `at + 1`, before the fork's own
    /// events ([`Session::fork`](crate::Session::fork)).
    ForkPoint {
        /// The session it branches from.
        parent: SessionId,
        /// The last seq of the parent the fork includes.
        at: u64,
    },
}

impl Event {
    /// A short name of the variant (`"Message"`), for timelines.
    pub fn kind(&self) -> &'static str {
        match self {
            Event::SessionOpened { .. } => "SessionOpened",
            Event::EvaluationStarted { .. } => "EvaluationStarted",
            Event::Message(_) => "Message",
            Event::ToolStatus { .. } => "ToolStatus",
            Event::ProviderCall(_) => "ProviderCall",
            Event::AdapterState(_) => "AdapterState",
            Event::Compacted { .. } => "Compacted",
            Event::EvaluationFinished { .. } => "EvaluationFinished",
            Event::ForkPoint { .. } => "ForkPoint",
            Event::Custom { .. } => "Custom",
            Event::Conversation(c) => c.kind(),
        }
    }

    /// The evaluation the event belongs to, if any.
    pub fn evaluation_id(&self) -> Option<EvaluationId> {
        match self {
            Event::EvaluationStarted { evaluation_id, .. }
            | Event::ToolStatus { evaluation_id, .. }
            | Event::Compacted { evaluation_id, .. }
            | Event::EvaluationFinished { evaluation_id, .. } => Some(*evaluation_id),
            Event::Message(m) => Some(m.evaluation_id),
            Event::ProviderCall(p) => Some(p.evaluation_id),
            Event::AdapterState(a) => a.evaluation_id,
            Event::SessionOpened { .. }
            | Event::ForkPoint { .. }
            | Event::Custom { .. }
            | Event::Conversation(_) => None,
        }
    }
}

/// An event with its place in the journal.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Envelope {
    /// The session (stream) it belongs to.
    pub session: SessionId,
    /// Its position in the stream: 0, 1, 2, ... with no gaps.
    pub seq: u64,
    /// When it was appended (microsecond precision).
    #[serde(with = "crate::model::ts")]
    pub at: DateTime<Utc>,
    /// The event.
    pub event: Event,
}
