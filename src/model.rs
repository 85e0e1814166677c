//! The data model: ids, roles, tool-call status, messages.
//!
//! Names follow the inner-messages spec (`InnerMessage`, `ToolCallRecord`).
//! Two numbers are never confused: an envelope's `seq` is the position in the
//! session's stream; [`InnerMessage::sequence`] is the position of a message
//! inside its evaluation (system = 0).

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, SubsecRound, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

macro_rules! uuid_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub Uuid);

        impl $name {
            /// A new id (UUIDv7: byte order is creation order).
            pub fn new() -> Self {
                Self(Uuid::now_v7())
            }
            /// The 16 bytes of the id, as stored in keys.
            pub fn as_bytes(&self) -> &[u8; 16] {
                self.0.as_bytes()
            }
            /// The id from its 16 bytes.
            pub fn from_bytes(bytes: [u8; 16]) -> Self {
                Self(Uuid::from_bytes(bytes))
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::new()
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.0.hyphenated(), f)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({})", stringify!($name), self.0.hyphenated())
            }
        }

        impl FromStr for $name {
            type Err = uuid::Error;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Uuid::parse_str(s).map(Self)
            }
        }
    };
}

uuid_id!(
    /// Identifies a session (one event stream).
    SessionId
);
uuid_id!(
    /// Identifies one evaluation (one agent run) inside a session.
    EvaluationId
);
uuid_id!(
    /// Identifies one message; messages are deduplicated by it.
    MessageId
);

/// The provider's tool-call id (`call_abc`, `toolu_01...`).
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct CallId(pub String);

/// Maps keyed by `CallId` can be searched with a `&str` (the derived
/// `Hash`, `Eq` and `Ord` are the string's).
impl std::borrow::Borrow<str> for CallId {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl CallId {
    /// The id as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for CallId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for CallId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CallId({:?})", self.0)
    }
}

impl From<&str> for CallId {
    fn from(s: &str) -> Self {
        CallId(s.to_owned())
    }
}

impl From<String> for CallId {
    fn from(s: String) -> Self {
        CallId(s)
    }
}

/// Who wrote a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The system prompt.
    System,
    /// The user.
    User,
    /// The model.
    Assistant,
    /// A tool result.
    Tool,
    /// Anything else (an observer, another agent, a UI event). A provider
    /// request carries it as a user message.
    Other,
}

impl Role {
    /// The lowercase name (`"assistant"`).
    pub fn as_str(&self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
            Role::Other => "other",
        }
    }

    /// The role a provider request gives it: `"user"` for [`Role::Other`]
    /// (no provider API has another), its own name for the rest.
    pub fn as_provider_str(&self) -> &'static str {
        match self {
            Role::Other => "user",
            r => r.as_str(),
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The lifecycle of a tool call.
///
/// `Pending` (requested by the model) -> `Started` (appended right before the
/// handler runs) -> `Completed` or `Failed`. A call that is `Started` with no
/// result after a crash is *in doubt*: it may or may not have had its effect.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum ToolStatus {
    /// Requested by the assistant, not started.
    #[default]
    Pending,
    /// The handler was about to run (ours, not the spec's).
    Started,
    /// The handler returned a result.
    Completed,
    /// The handler failed (or the call was recorded as interrupted).
    Failed,
}

impl ToolStatus {
    /// Rank in the lifecycle lattice; reducers keep the highest rank seen, so
    /// the folded status does not depend on the order events arrive in.
    /// `Completed` outranks `Failed`.
    pub fn rank(self) -> u8 {
        match self {
            ToolStatus::Pending => 0,
            ToolStatus::Started => 1,
            ToolStatus::Failed => 2,
            ToolStatus::Completed => 3,
        }
    }

    /// True for `Completed` and `Failed`.
    pub fn is_terminal(self) -> bool {
        matches!(self, ToolStatus::Completed | ToolStatus::Failed)
    }

    /// The lowercase name.
    pub fn as_str(&self) -> &'static str {
        match self {
            ToolStatus::Pending => "pending",
            ToolStatus::Started => "started",
            ToolStatus::Completed => "completed",
            ToolStatus::Failed => "failed",
        }
    }
}

impl fmt::Display for ToolStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A tool call made by the assistant.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCallRecord {
    /// The provider's id of the call.
    pub call_id: CallId,
    /// The tool's name.
    pub name: String,
    /// The arguments as JSON text, exactly as the provider gave them.
    pub arguments: String,
    /// The status, kept current by the reducer from `ToolStatus` events.
    pub status: ToolStatus,
}

impl ToolCallRecord {
    /// A pending call.
    pub fn new(
        call_id: impl Into<CallId>,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) -> Self {
        Self {
            call_id: call_id.into(),
            name: name.into(),
            arguments: arguments.into(),
            status: ToolStatus::Pending,
        }
    }
}

/// One message of a conversation, provider-neutral.
///
/// Serialized field by field in this order; in a binary encoding (frames)
/// the parts of `provider_payload` that repeat `content` or a call's
/// `arguments` are stored once (`src/format/splice.rs`, `docs/format.md`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InnerMessage {
    /// Who wrote it.
    pub role: Role,
    /// Its text.
    pub content: String,
    /// The evaluation it belongs to.
    pub evaluation_id: EvaluationId,
    /// Position inside its evaluation: system = 0, then incrementing.
    pub sequence: u64,
    /// For assistant messages: the tool calls it made.
    pub tool_calls: Vec<ToolCallRecord>,
    /// For tool messages: the call this is the result of.
    pub tool_call_id: Option<CallId>,
    /// For tool messages: the tool's name.
    pub tool_name: Option<String>,
    /// Provider round trip: 0 for the system and first user messages, then
    /// incremented by each assistant message.
    pub turn: u32,
    /// Prompt namespace (prompt identity for resume validation).
    pub prompt_ns: String,
    /// Prompt key.
    pub prompt_key: String,
    /// When it was created (microsecond precision).
    pub created_at: DateTime<Utc>,
    /// Its id; messages are deduplicated by it.
    pub message_id: MessageId,
    /// The message exactly as the provider API had it (JSON text), when known.
    pub provider_payload: Option<String>,
}

impl InnerMessage {
    /// A message with the given role and content and every other field at its
    /// neutral value; `created_at` is now and `message_id` is new.
    pub fn new(
        role: Role,
        content: impl Into<String>,
        evaluation_id: EvaluationId,
        sequence: u64,
    ) -> Self {
        Self {
            role,
            content: content.into(),
            evaluation_id,
            sequence,
            tool_calls: Vec::new(),
            tool_call_id: None,
            tool_name: None,
            turn: 0,
            prompt_ns: String::new(),
            prompt_key: String::new(),
            created_at: now(),
            message_id: MessageId::new(),
            provider_payload: None,
        }
    }
}

/// The error recorded for a tool call that was running when its process
/// died (in doubt), whose tool must never run twice
/// ([`Idempotency::Never`](crate::agent::Idempotency::Never)), when the caller asks
/// to record it as failed so the conversation can go on. The model sees it
/// as the call's result.
pub const INTERRUPTED_ERROR: &str = "interrupted: the process stopped while this tool was running; it was not run again because it must never run twice";

/// The content of the result given to a tool call that has none in a
/// rebuilt provider history (every call must be answered before the next
/// assistant message). Nothing is recorded: the journal keeps the call as
/// it was.
pub const INTERRUPTED_RESULT: &str = "[interrupted: the tool call did not complete]";

/// The current time truncated to microseconds, the precision stored on disk.
///
/// Every timestamp the crate creates goes through this, so that a value read
/// back equals the value written.
pub fn now() -> DateTime<Utc> {
    Utc::now().trunc_subsecs(6)
}

/// Serde for timestamps: microseconds since the epoch (`i64`) in binary
/// formats, RFC 3339 text in human-readable ones (JSON).
pub mod ts {
    use chrono::{DateTime, TimeZone, Utc};
    use serde::{Deserialize, Deserializer, Serializer, de::Error as _};

    /// Serializes a timestamp.
    pub fn serialize<S: Serializer>(t: &DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
        if s.is_human_readable() {
            s.serialize_str(&t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true))
        } else {
            s.serialize_i64(t.timestamp_micros())
        }
    }

    /// Deserializes a timestamp.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<DateTime<Utc>, D::Error> {
        if d.is_human_readable() {
            let s = String::deserialize(d)?;
            DateTime::parse_from_rfc3339(&s)
                .map(|t| t.with_timezone(&Utc))
                .map_err(|e| D::Error::custom(format!("invalid timestamp {s:?}: {e}")))
        } else {
            let micros = i64::deserialize(d)?;
            Utc.timestamp_micros(micros)
                .single()
                .ok_or_else(|| D::Error::custom(format!("timestamp out of range: {micros} us")))
        }
    }

    /// The same for `Option<DateTime<Utc>>`.
    pub mod option {
        use chrono::{DateTime, Utc};
        use serde::{Deserialize, Deserializer, Serialize, Serializer};

        #[derive(Serialize, Deserialize)]
        struct W(#[serde(with = "super")] DateTime<Utc>);

        /// Serializes an optional timestamp.
        pub fn serialize<S: Serializer>(
            t: &Option<DateTime<Utc>>,
            s: S,
        ) -> Result<S::Ok, S::Error> {
            t.map(W).serialize(s)
        }

        /// Deserializes an optional timestamp.
        pub fn deserialize<'de, D: Deserializer<'de>>(
            d: D,
        ) -> Result<Option<DateTime<Utc>>, D::Error> {
            Ok(Option::<W>::deserialize(d)?.map(|w| w.0))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_created_later_sort_later() {
        let a = SessionId::new();
        let b = SessionId::new();
        assert!(a < b);
        assert!(a.as_bytes() < b.as_bytes());
    }

    #[test]
    fn id_round_trips_through_text() {
        let a = EvaluationId::new();
        assert_eq!(a.to_string().parse::<EvaluationId>().ok(), Some(a));
        assert!("eval-10".parse::<EvaluationId>().is_err());
    }

    #[test]
    fn now_is_truncated_to_micros() {
        let t = now();
        assert_eq!(t.timestamp_subsec_nanos() % 1_000, 0);
    }

    #[test]
    fn status_rank_is_a_lattice_with_completed_on_top() {
        use ToolStatus::*;
        let all = [Pending, Started, Failed, Completed];
        for w in all.windows(2) {
            assert!(w[0].rank() < w[1].rank());
        }
        assert!(!Started.is_terminal() && Failed.is_terminal());
    }
}
