//! The conversation engine's records (agent-conversation-core spec, section
//! 4) and the events that carry them.
//!
//! A conversation is a session. Each record is appended whole whenever it
//! changes, never updated in place: a turn going from `running` to
//! `succeeded` is a second [`ConversationEvent::Turn`] with the same id, and
//! the fold keeps the latest. Free-form values (`content`, `metadata`, an
//! error's `raw`) are JSON; bincode stores them as JSON text.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

use crate::model::{
    CallId, EvaluationId, InnerMessage, MessageId, Role, SessionId, ToolCallRecord,
};

/// Free-form metadata: a JSON object's members, in key order.
pub type Metadata = BTreeMap<String, Value>;

/// The id of a conversation: the id of the session that holds it.
pub type ConversationId = SessionId;

/// The id of a turn (UUIDv7, so id order is creation order). A turn's tool
/// calls are keyed in the session's tool calls by
/// [`as_evaluation`](TurnId::as_evaluation), as an evaluation's are.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TurnId(pub Uuid);

impl TurnId {
    /// A new id.
    pub fn new() -> Self {
        Self(Uuid::now_v7())
    }

    /// The same id as an [`EvaluationId`]: the key of the turn's tool calls.
    pub fn as_evaluation(&self) -> EvaluationId {
        EvaluationId(self.0)
    }
}

impl Default for TurnId {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Display for TurnId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0.hyphenated(), f)
    }
}

impl fmt::Debug for TurnId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TurnId({})", self.0.hyphenated())
    }
}

impl FromStr for TurnId {
    type Err = uuid::Error;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Uuid::parse_str(s).map(Self)
    }
}

/// Stores a JSON value as JSON text in bincode (which cannot hold a
/// self-describing value) and as itself in JSON.
pub(crate) mod json_text {
    use serde::de::{DeserializeOwned, Error as _};
    use serde::ser::Error as _;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub(crate) fn serialize<T: Serialize, S: Serializer>(v: &T, s: S) -> Result<S::Ok, S::Error> {
        if s.is_human_readable() {
            v.serialize(s)
        } else {
            let text = serde_json::to_string(v).map_err(S::Error::custom)?;
            s.serialize_str(&text)
        }
    }

    pub(crate) fn deserialize<'de, T: DeserializeOwned, D: Deserializer<'de>>(
        d: D,
    ) -> Result<T, D::Error> {
        if d.is_human_readable() {
            T::deserialize(d)
        } else {
            let text = String::deserialize(d)?;
            serde_json::from_str(&text).map_err(D::Error::custom)
        }
    }
}

/// A conversation (the spec's `Conversation`): a long-lived thread between an
/// agent and its participants. Its id is its session's.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Conversation {
    /// Its id (= the session's).
    pub id: ConversationId,
    /// The agent mainly responsible for it.
    pub agent: String,
    /// A human or tenant identifier.
    pub subject_id: Option<String>,
    /// A title for user interfaces.
    pub title: Option<String>,
    /// When it was created.
    #[serde(with = "crate::model::ts")]
    pub created_at: DateTime<Utc>,
    /// When it last changed (a turn finished, its fields were updated).
    #[serde(with = "crate::model::ts")]
    pub updated_at: DateTime<Utc>,
    /// Free-form metadata (scenario, experiment cohort, ...).
    #[serde(with = "json_text")]
    pub metadata: Metadata,
}

/// A message of a conversation (the spec's `ConversationMessage`).
///
/// The spec's fields, plus what a tool exchange needs: the assistant's
/// `tool_calls` and a tool message's `tool_call_id`, and the turn that
/// produced the message (none for messages appended from outside a turn).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConversationMessage {
    /// Its id (UUIDv7).
    pub id: MessageId,
    /// The conversation it belongs to.
    pub conversation_id: ConversationId,
    /// Who speaks.
    pub role: Role,
    /// Text (a JSON string) or any structured JSON.
    #[serde(with = "json_text")]
    pub content: Value,
    /// The speaker's name (an agent, a tool, a user label).
    pub name: Option<String>,
    /// When it was created (microseconds).
    #[serde(with = "crate::model::ts")]
    pub created_at: DateTime<Utc>,
    /// The provider's id of the message, for debugging.
    pub provider_message_id: Option<String>,
    /// Free-form metadata (token counts, UI hints).
    #[serde(with = "json_text")]
    pub metadata: Metadata,
    /// The turn that produced it.
    pub turn_id: Option<TurnId>,
    /// The tool calls an assistant message makes (their status here is
    /// ignored: the session's tool calls hold it).
    pub tool_calls: Vec<ToolCallRecord>,
    /// For a tool message: the call it answers.
    pub tool_call_id: Option<CallId>,
}

impl ConversationMessage {
    /// A message of `role` with text `content`, created now, in no
    /// conversation yet (the store sets `conversation_id` when it is appended).
    pub fn new(role: Role, content: impl Into<String>) -> Self {
        Self::json(role, Value::String(content.into()))
    }

    /// A message of `role` with structured `content`.
    pub fn json(role: Role, content: Value) -> Self {
        Self {
            id: MessageId::new(),
            conversation_id: SessionId(Uuid::nil()),
            role,
            content,
            name: None,
            created_at: crate::model::now(),
            provider_message_id: None,
            metadata: Metadata::new(),
            turn_id: None,
            tool_calls: Vec::new(),
            tool_call_id: None,
        }
    }

    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Self::new(Role::User, content)
    }

    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        Self::new(Role::System, content)
    }

    /// An assistant message.
    pub fn assistant(content: impl Into<String>) -> Self {
        Self::new(Role::Assistant, content)
    }

    /// The message as an [`InnerMessage`] of evaluation `eval` at
    /// `sequence`, for the exports of the provider formats: the same role
    /// (the formats send `Other` as a user message), structured content as
    /// its JSON text; the turn number is left at 0 and the prompt empty.
    pub fn to_inner(&self, eval: EvaluationId, sequence: u64) -> InnerMessage {
        let mut m = InnerMessage::new(self.role, self.text(), eval, sequence);
        m.message_id = self.id;
        m.created_at = self.created_at;
        m.tool_calls = self.tool_calls.clone();
        m.tool_call_id = self.tool_call_id.clone();
        if self.role == Role::Tool {
            m.tool_name = self.name.clone();
        }
        m
    }

    /// An inner-loop message as a message of conversation `conversation`:
    /// the same id, role, text, time and tool exchange; its turn is its
    /// evaluation (the same id); a tool message's tool name is its `name`;
    /// its place in the evaluation (`sequence`) and the inner loop's round
    /// (`turn`) are in `metadata`. [`to_inner`](Self::to_inner) reads it
    /// back.
    pub fn from_inner(m: &InnerMessage, conversation: ConversationId) -> Self {
        let mut metadata = Metadata::new();
        metadata.insert("sequence".into(), Value::from(m.sequence));
        metadata.insert("inner_loop_turn".into(), Value::from(m.turn));
        Self {
            id: m.message_id,
            conversation_id: conversation,
            role: m.role,
            content: Value::String(m.content.clone()),
            name: m.tool_name.clone(),
            created_at: m.created_at,
            provider_message_id: None,
            metadata,
            turn_id: Some(TurnId(m.evaluation_id.0)),
            tool_calls: m.tool_calls.clone(),
            tool_call_id: m.tool_call_id.clone(),
        }
    }

    /// The content as text: the string itself; for an Anthropic block list
    /// with thinking in it (`thinking` or `redacted_thinking` blocks, which
    /// the Anthropic adapter keeps so they are sent back), its `text`
    /// blocks joined; else the JSON text of structured content.
    pub fn text(&self) -> String {
        match &self.content {
            Value::String(s) => s.clone(),
            Value::Null => String::new(),
            Value::Array(blocks) if blocks.iter().any(is_thinking) => blocks
                .iter()
                .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect(),
            other => other.to_string(),
        }
    }
}

/// An Anthropic `thinking` or `redacted_thinking` block.
fn is_thinking(b: &Value) -> bool {
    matches!(
        b.get("type").and_then(Value::as_str),
        Some("thinking" | "redacted_thinking")
    )
}

/// Where a turn is in its life (the spec's `TurnStatus`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TurnStatus {
    /// Created, not started.
    Pending,
    /// Being executed; left so by a dead process, it is *interrupted*.
    Running,
    /// Finished with output.
    Succeeded,
    /// Finished with an error.
    Failed,
    /// Stopped by the caller.
    Cancelled,
}

impl TurnStatus {
    /// The lowercase name (`"running"`).
    pub fn as_str(&self) -> &'static str {
        match self {
            TurnStatus::Pending => "pending",
            TurnStatus::Running => "running",
            TurnStatus::Succeeded => "succeeded",
            TurnStatus::Failed => "failed",
            TurnStatus::Cancelled => "cancelled",
        }
    }

    /// True for succeeded, failed and cancelled.
    pub fn is_finished(&self) -> bool {
        matches!(
            self,
            TurnStatus::Succeeded | TurnStatus::Failed | TurnStatus::Cancelled
        )
    }
}

/// Why a turn failed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnError {
    /// What went wrong.
    pub message: String,
    /// A machine-readable code (`"rate_limited"`, `"interrupted"`, an HTTP status).
    pub code: Option<String>,
    /// The provider whose call failed.
    pub provider: Option<String>,
    /// The provider's error body, as it came; `null` when there was none.
    #[serde(with = "json_text")]
    pub raw: Value,
}

/// A turn as recorded: its header, with messages named by id. The store
/// gives it out with its messages and calls as a `ConversationTurn`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnRecord {
    /// Its id.
    pub id: TurnId,
    /// The agent handling it.
    pub agent: String,
    /// Its status.
    pub status: TurnStatus,
    /// `"user_message"`, `"tool_result"`, `"system_trigger"`, ...
    pub trigger_type: Option<String>,
    /// The messages that triggered it.
    pub input_messages: Vec<MessageId>,
    /// The messages it produced (assistant and tool), in order.
    pub output_messages: Vec<MessageId>,
    /// When it started.
    #[serde(with = "crate::model::ts")]
    pub started_at: DateTime<Utc>,
    /// When it finished.
    #[serde(with = "crate::model::ts::option")]
    pub finished_at: Option<DateTime<Utc>>,
    /// Why it failed.
    pub error: Option<TurnError>,
    /// Free-form metadata (routing decisions, the plan).
    #[serde(with = "json_text")]
    pub metadata: Metadata,
}

/// The kind of a provider call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderOperation {
    /// A chat completion.
    Chat,
    /// An embedding.
    Embedding,
    /// Anything else.
    Other,
}

/// Token usage of one provider call, the one usage type of both the inner
/// loop's records and the conversation engine's (the agent-conversation-core
/// spec's `TokenUsage`): the counts every provider reports, the total if it
/// gave one, and its own breakdown.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenUsage {
    /// Prompt (input) tokens, as the provider counts them: OpenAI's count
    /// includes the tokens read from its cache, Anthropic's does not (its
    /// cache reads and writes are only in the two fields below).
    pub input_tokens: u64,
    /// Completion (output) tokens.
    pub output_tokens: u64,
    /// Input tokens read from the provider's prompt cache.
    pub cache_read_tokens: u64,
    /// Input tokens written to the provider's prompt cache.
    pub cache_write_tokens: u64,
    /// The total, as the provider reported it (`None`: not reported).
    pub total_tokens: Option<u64>,
    /// The provider's own breakdown (per cache type, reasoning tokens, ...).
    #[serde(with = "json_text")]
    pub breakdown: Metadata,
}

impl TokenUsage {
    /// Input plus output tokens (whatever `total_tokens` says).
    pub fn total(&self) -> u64 {
        self.input_tokens.saturating_add(self.output_tokens)
    }

    /// The four counts of `other` added to these (saturating); the
    /// reported total and the breakdown are a call's own and are not summed.
    pub fn add_counts(&mut self, other: &TokenUsage) {
        self.input_tokens = self.input_tokens.saturating_add(other.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(other.output_tokens);
        self.cache_read_tokens = self
            .cache_read_tokens
            .saturating_add(other.cache_read_tokens);
        self.cache_write_tokens = self
            .cache_write_tokens
            .saturating_add(other.cache_write_tokens);
    }
}

/// How a provider call ended (compatible with resilient-http-core's
/// `RequestOutcome`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallOutcome {
    /// True when a response was received and used.
    pub ok: bool,
    /// The HTTP status, for HTTP adapters.
    pub status: Option<u16>,
    /// `"timeout"`, `"rate_limit"`, `"server"`, `"client"`, `"network"`,
    /// `"parse"`, `"interrupted"`, ...
    pub error_category: Option<String>,
    /// The error message, when not ok.
    pub error: Option<String>,
    /// Attempts made (1 without retries).
    pub attempts: u32,
}

/// A tool as a model sees it: name, description and JSON-schema parameters.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// The name the model calls it by.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// The JSON schema of its arguments (an object schema).
    #[serde(with = "json_text")]
    pub parameters: Value,
}

/// One provider invocation of a turn (the spec's `ProviderCallRecord`).
/// Appended when it starts (`finished_at` none) and again when it ends.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderCallRecord {
    /// Its id (UUIDv7).
    pub id: Uuid,
    /// The conversation.
    pub conversation_id: ConversationId,
    /// The turn.
    pub turn_id: TurnId,
    /// The adapter's provider id (`"openai"`).
    pub provider: String,
    /// The model asked for.
    pub model: String,
    /// What kind of call.
    pub operation: ProviderOperation,
    /// The provider's request id (`x-request-id`), if it sent one.
    pub request_id: Option<String>,
    /// `conversation:turn`, the turn's run id.
    pub correlation_id: Option<String>,
    /// The previous turn's run id.
    pub parent_correlation_id: Option<String>,
    /// Metadata about the request, never sent to the provider.
    #[serde(with = "json_text")]
    pub request_metadata: Metadata,
    /// Metadata about the response (finish reason, the model that answered).
    #[serde(with = "json_text")]
    pub response_metadata: Metadata,
    /// Request-level fields as sent (temperature, max tokens, tool choice).
    #[serde(with = "json_text")]
    pub parameters: Metadata,
    /// The tools offered.
    pub tools: Vec<ToolSpec>,
    /// The conversation messages the request was built from, in order.
    pub sent_messages: Vec<MessageId>,
    /// Token usage.
    pub usage: Option<TokenUsage>,
    /// How it ended (none while in progress).
    pub outcome: Option<CallOutcome>,
    /// When it started.
    #[serde(with = "crate::model::ts")]
    pub started_at: DateTime<Utc>,
    /// When it ended.
    #[serde(with = "crate::model::ts::option")]
    pub finished_at: Option<DateTime<Utc>>,
}

/// A compaction of a conversation's history: from now on, the messages
/// before `first_kept` (after the leading system messages) are not sent to
/// the provider; `summary`, if any, is sent in their place. Nothing is
/// deleted: the journal keeps every message.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompactionRecord {
    /// The turn after which it ran (none when made by hand).
    pub turn_id: Option<TurnId>,
    /// The first message still sent (a user message).
    pub first_kept: MessageId,
    /// The strategy (`"message_limit"`, `"token_limit"`, `"summary"`, ...).
    pub strategy: String,
    /// The summary of the dropped span, if the strategy wrote one.
    pub summary: Option<String>,
    /// Messages sent before it (leading system messages excluded).
    pub messages_before: u64,
    /// Messages sent after it.
    pub messages_after: u64,
    /// The tokens the last provider call reported (input + output), if known.
    pub tokens_before: Option<u64>,
    /// When it was made.
    #[serde(with = "crate::model::ts")]
    pub at: DateTime<Utc>,
}

/// What the conversation engine appends. Variants are only ever added at
/// the end, as [`Event`](crate::Event)'s.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ConversationEvent {
    /// The conversation was created (the first event after `SessionOpened`).
    Created(Conversation),
    /// Its fields changed (the whole record, latest wins).
    Updated(Conversation),
    /// A message was appended.
    Message(ConversationMessage),
    /// A turn was created or changed (the whole header, latest wins).
    Turn(TurnRecord),
    /// A provider call started or ended (the whole record, latest wins).
    ProviderCall(ProviderCallRecord),
    /// The history sent to the provider was compacted.
    Compacted(CompactionRecord),
}

impl ConversationEvent {
    /// A short name (`"TurnChanged"`), for timelines.
    pub fn kind(&self) -> &'static str {
        match self {
            ConversationEvent::Created(_) => "ConversationCreated",
            ConversationEvent::Updated(_) => "ConversationUpdated",
            ConversationEvent::Message(_) => "ConversationMessage",
            ConversationEvent::Turn(_) => "TurnChanged",
            ConversationEvent::ProviderCall(_) => "ProviderCallChanged",
            ConversationEvent::Compacted(_) => "HistoryCompacted",
        }
    }
}
