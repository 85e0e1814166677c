//! The portable conversation state blob (goaitools' `ChatWithState`): a
//! conversation kept by the caller as opaque bytes instead of in a journal.
//!
//! The blob is JSON:
//!
//! ```json
//! {"version": 1, "provider": "openai", "processed_length": 2, "messages": [...]}
//! ```
//!
//! - `version` is [`STATE_BLOB_VERSION`]; any other is discarded.
//! - `provider` is the id of the adapter that made it: a blob is
//!   provider-locked, and one made with another provider is discarded.
//! - `processed_length` is the number of messages the model has seen: the
//!   messages [`append_to_state`] adds after it are not counted until the
//!   next [`chat_with_state`].
//! - `messages` are the provider's raw wire messages, as goaitools keeps
//!   them ("the raw messages received by the backend"): OpenAI
//!   chat-completions message objects, or, for a provider id starting with
//!   `anthropic`, Messages API message objects with every content block
//!   (`thinking` with its `signature`, `redacted_thinking`, `tool_use`,
//!   `tool_result`) as it came. Members of a message (and of the blob)
//!   that this version does not know are kept and written back.
//! - `agent_journal` ([`SIDE_MEMBER`]) holds, per message, what a wire
//!   message cannot: our message id, its time, turn, metadata. goaitools
//!   ignores it; without it (a blob goaitools wrote) messages get fresh ids.
//!
//! Leading system messages (the instructions before the first other
//! message of a call) are never stored: the caller supplies them fresh on
//! every call. System messages after the first other message are context
//! (an event of the application) and are stored in order.
//!
//! Decoding degrades gracefully: bytes that are not a blob of this version
//! and provider ([`Degradation`]) start a fresh conversation, reported by
//! a `tracing::warn!` and by the `degraded` field of what is returned,
//! never by an error and never by a panic, whatever the bytes.
//!
//! [`import_state_blob`] and [`export_state_blob`] convert between a blob
//! and a conversation of a [`Journal`](crate::Journal). See
//! `docs/state-blob.md`.
//!
//! ```
//! use agent_journal::conversation::state_blob::{
//!     StateChatOptions, append_to_state, chat_with_state,
//! };
//! use agent_journal::conversation::{ScriptedAdapter, ScriptedReply};
//!
//! # fn main() -> agent_journal::Result<()> {
//! let adapter = ScriptedAdapter::new(vec![
//!     vec![ScriptedReply::text("Hello!")],
//!     vec![ScriptedReply::text("Warm and sunny.")],
//! ]);
//! let first = chat_with_state(
//!     &adapter,
//!     None,
//!     &StateChatOptions::new("scripted-1").system("You are helpful.").user("Hi"),
//! )?;
//! assert_eq!(first.text(), "Hello!");
//! // Store `first.state` anywhere; give it back with the next call.
//! let second = chat_with_state(
//!     &adapter,
//!     Some(&first.state),
//!     &StateChatOptions::new("scripted-1").system("You are helpful.").user("Weather?"),
//! )?;
//! assert_eq!(second.text(), "Warm and sunny.");
//! assert_eq!(second.processed_length, 4); // the system message is not stored
//! assert!(second.degraded.is_none());
//! # Ok(())
//! # }
//! ```

mod chat;
mod journal;
mod read;
mod wire;

use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde_json::{Map, Value, json};

use crate::event::conversation::ConversationMessage;
use crate::model::MessageId;
use crate::model::Role;

use super::plan::SUMMARY_PREFIX;
use wire::Dialect;

pub use chat::{StateChatOptions, StateChatResult, chat_with_state};
pub use journal::{
    ImportStateBlob, STATE_BLOB_METADATA, STATE_BLOB_WIRE, export_state_blob,
    export_state_blob_for, import_state_blob, state_blob_of,
};

/// The version of the blob this crate writes and reads.
pub const STATE_BLOB_VERSION: u64 = 1;

/// The default largest blob decoded: 64 MiB. A larger one degrades as
/// [`Degradation::TooLarge`] before it is parsed.
pub const DEFAULT_MAX_STATE_BYTES: usize = 64 * 1024 * 1024;

/// The top-level member of a blob that holds what the wire messages do
/// not: `{"messages": [side record, ...]}`, one record per message, in
/// order (`id`, `created_at`, and when set `conversation_id`, `turn_id`,
/// `provider_message_id`, `metadata`, `name`, `role`, `tool_status`).
/// goaitools ignores it (and drops it when it writes the blob again); a
/// record list whose length is not the number of messages is ignored.
pub const SIDE_MEMBER: &str = "agent_journal";

/// True for a `ConversationMessage` record rather than a wire message:
/// refused as [`Degradation::CorruptedMessage`], never misread.
fn is_record(o: &Map<String, Value>) -> bool {
    o.contains_key("id") && o.contains_key("conversation_id") && o.contains_key("created_at")
}

/// The metadata key (value `true`) of the system message that carries a
/// compaction's summary at the front of a blob's messages. Its content is
/// [`SUMMARY_PREFIX`] then the summary: what the engine's default history
/// builder sends.
pub const SUMMARY_MARKER: &str = "state_blob_summary";

/// Why a blob was discarded and a fresh conversation started. Reported, with
/// a `tracing::warn!`, instead of an error: the worst a bad blob does is
/// lose the conversation's history.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Degradation {
    /// The blob is over the size limit (checked before it is parsed).
    #[error("the state is {size} bytes, over the limit of {limit} bytes")]
    TooLarge {
        /// Its size in bytes.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// Not JSON, or not a blob's shape (not an object; `provider`,
    /// `processed_length` or `messages` missing or of the wrong type).
    /// Nesting deeper than serde_json's limit (128) lands here too.
    #[error("the state is not a valid state blob: {reason}")]
    InvalidJson {
        /// What is wrong, clipped to 200 characters.
        reason: String,
    },
    /// `version` is missing or not [`STATE_BLOB_VERSION`].
    #[error("the state has version {found}; only version {STATE_BLOB_VERSION} is read")]
    UnsupportedVersion {
        /// The version found, as JSON text (`missing` when absent), clipped
        /// to 64 characters.
        found: String,
    },
    /// The blob was made with another provider.
    #[error("the state was made with provider {found:?}, not {expected:?}")]
    ProviderMismatch {
        /// The provider of the call.
        expected: String,
        /// The blob's provider, clipped to 64 characters.
        found: String,
    },
    /// A message does not decode as a [`ConversationMessage`].
    #[error("message {index} of the state does not decode: {reason}")]
    CorruptedMessage {
        /// Its index in `messages`.
        index: usize,
        /// Why, clipped to 200 characters.
        reason: String,
    },
}

impl Degradation {
    /// A short name: `too_large`, `invalid_json`, `unsupported_version`,
    /// `provider_mismatch` or `corrupted_message`.
    pub fn kind(&self) -> &'static str {
        match self {
            Degradation::TooLarge { .. } => "too_large",
            Degradation::InvalidJson { .. } => "invalid_json",
            Degradation::UnsupportedVersion { .. } => "unsupported_version",
            Degradation::ProviderMismatch { .. } => "provider_mismatch",
            Degradation::CorruptedMessage { .. } => "corrupted_message",
        }
    }
}

/// What [`append_to_state`] and [`update_state_after_event`] return.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StateUpdate {
    /// The new state, to store in place of the old.
    pub state: Vec<u8>,
    /// Why the old state was discarded, if it was (the new one then holds
    /// only the appended messages).
    pub degraded: Option<Degradation>,
}

/// A decoded state blob. [`decode`](Self::decode) then
/// [`encode`](Self::encode) gives the same JSON document (compact, members
/// in key order), unknown members included; the unknown members of a
/// message are kept by its id, so messages that share an id share them.
#[derive(Clone, Debug, PartialEq)]
pub struct StateBlob {
    /// The provider id of the adapter that made it.
    pub provider: String,
    /// How many messages the model has seen (at most `messages.len()`;
    /// a larger value read is clipped to it).
    pub processed_length: usize,
    /// The stored messages, oldest first, leading system messages of the
    /// calls excluded.
    pub messages: Vec<ConversationMessage>,
    /// Members of the blob this version does not know.
    unknown: Map<String, Value>,
    /// Members of each message this version does not know, by message id.
    unknown_in: BTreeMap<MessageId, Map<String, Value>>,
    /// The wire messages written back as they came, by message id.
    raw: BTreeMap<MessageId, Value>,
}

/// The names of a serialized [`ConversationMessage`]'s members.
fn message_fields() -> &'static [String] {
    static FIELDS: OnceLock<Vec<String>> = OnceLock::new();
    FIELDS.get_or_init(|| match message_value(&ConversationMessage::user("")) {
        Value::Object(o) => o.keys().cloned().collect(),
        _ => Vec::new(),
    })
}

/// A message as JSON. Serializing a message cannot fail (every member is
/// JSON with string keys); were it to, the message would be written as
/// `null` and the blob read back as degraded, never a panic.
fn message_value(m: &ConversationMessage) -> Value {
    serde_json::to_value(m).unwrap_or(Value::Null)
}

/// `s`, clipped to `n` characters for a report (a blob's own strings
/// can be megabytes long).
fn clip(s: &str, n: usize) -> String {
    match s.char_indices().nth(n) {
        Some((i, _)) => format!("{}...", &s[..i]),
        None => s.to_owned(),
    }
}

impl StateBlob {
    /// An empty blob of `provider`.
    pub fn new(provider: impl Into<String>) -> Self {
        Self {
            provider: provider.into(),
            processed_length: 0,
            messages: Vec::new(),
            unknown: Map::new(),
            unknown_in: BTreeMap::new(),
            raw: BTreeMap::new(),
        }
    }

    /// Records the members of message `id` that a message does not have
    /// (two messages with one id share them).
    pub(crate) fn keep_unknown(&mut self, id: MessageId, members: Map<String, Value>) {
        let fields = message_fields();
        let extra: Map<String, Value> = members
            .into_iter()
            .filter(|(k, _)| !fields.iter().any(|f| f == k))
            .collect();
        if !extra.is_empty() {
            self.unknown_in.insert(id, extra);
        }
    }

    /// Message `m` as it is written in the blob: the wire message it was
    /// read as, if it could not be rebuilt member for member; else its wire
    /// message with the members this version does not know.
    pub fn wire_message(&self, m: &ConversationMessage) -> Value {
        if let Some(raw) = self.raw.get(&m.id) {
            return raw.clone();
        }
        let mut o = wire::to_wire(Dialect::of(&self.provider), m);
        if let Some(extra) = self.unknown_in.get(&m.id) {
            for (k, x) in extra {
                o.entry(k.clone()).or_insert_with(|| x.clone());
            }
        }
        Value::Object(o)
    }

    /// The blob as a JSON document.
    pub fn to_json(&self) -> Value {
        let dialect = Dialect::of(&self.provider);
        let messages = self.messages.iter().map(|m| self.wire_message(m)).collect();
        let side = self
            .messages
            .iter()
            .map(|m| wire::side_record(dialect, m))
            .collect();
        let mut top = self.unknown.clone();
        top.insert("version".into(), Value::from(STATE_BLOB_VERSION));
        top.insert("provider".into(), Value::String(self.provider.clone()));
        let processed = self.processed_length.min(self.messages.len());
        top.insert("processed_length".into(), Value::from(processed as u64));
        top.insert("messages".into(), Value::Array(messages));
        top.insert(
            SIDE_MEMBER.into(),
            json!({ "messages": Value::Array(side) }),
        );
        Value::Object(top)
    }

    /// The blob's bytes: its JSON document, compact.
    pub fn encode(&self) -> Vec<u8> {
        self.to_json().to_string().into_bytes()
    }

    /// The wire message message `id` was read as, when it is written back
    /// as it came (see [`wire_message`](Self::wire_message)).
    pub fn kept_wire(&self, id: MessageId) -> Option<&Value> {
        self.raw.get(&id)
    }

    /// Keeps `wire` as message `id`'s wire message, written back as it is.
    pub(crate) fn keep_wire(&mut self, id: MessageId, wire: Value) {
        self.raw.insert(id, wire);
    }

    /// The members of message `id` that this version does not know, if any.
    pub fn unknown_fields(&self, id: MessageId) -> Option<&Map<String, Value>> {
        self.unknown_in.get(&id)
    }

    /// The members of the blob that this version does not know.
    pub fn unknown_members(&self) -> &Map<String, Value> {
        &self.unknown
    }

    /// Sets the unknown members of the blob.
    pub(crate) fn set_unknown_members(&mut self, members: Map<String, Value>) {
        self.unknown = members;
    }

    /// Forgets the unknown members of messages no longer in the blob.
    pub(crate) fn prune_unknown(&mut self) {
        let ids: std::collections::BTreeSet<MessageId> =
            self.messages.iter().map(|m| m.id).collect();
        self.unknown_in.retain(|id, _| ids.contains(id));
        self.raw.retain(|id, _| ids.contains(id));
    }
}

/// True for the system message that carries a compaction's summary
/// (metadata [`SUMMARY_MARKER`] = `true`).
pub fn is_summary_message(m: &ConversationMessage) -> bool {
    m.role == Role::System && m.metadata.get(SUMMARY_MARKER) == Some(&Value::Bool(true))
}

/// The system message carrying `summary`: [`SUMMARY_PREFIX`] then the
/// summary, marked with [`SUMMARY_MARKER`].
pub fn summary_message(summary: &str) -> ConversationMessage {
    let mut m = ConversationMessage::system(format!("{SUMMARY_PREFIX}{summary}"));
    m.metadata.insert(SUMMARY_MARKER.into(), Value::Bool(true));
    m
}

/// The summary a summary message carries (its text without
/// [`SUMMARY_PREFIX`]).
fn summary_text(m: &ConversationMessage) -> String {
    let text = m.text();
    match text.strip_prefix(SUMMARY_PREFIX) {
        Some(s) => s.to_owned(),
        None => text,
    }
}

/// `state` decoded for `provider`, or a fresh blob and why (warned through
/// `tracing`). No state, or empty bytes, is a fresh conversation and no
/// degradation.
pub(crate) fn load(
    state: Option<&[u8]>,
    provider: &str,
    max_bytes: usize,
) -> (StateBlob, Option<Degradation>) {
    let Some(bytes) = state.filter(|b| !b.is_empty()) else {
        return (StateBlob::new(provider), None);
    };
    match StateBlob::decode(bytes, Some(provider), max_bytes) {
        Ok(blob) => (blob, None),
        Err(d) => {
            tracing::warn!(
                provider,
                kind = d.kind(),
                reason = %d,
                "discarding the conversation state; starting a fresh conversation"
            );
            (StateBlob::new(provider), Some(d))
        }
    }
}

/// Appends `messages` to `state` without calling a provider (goaitools'
/// `AppendToState`): every message is stored as given, whatever its role;
/// `processed_length` is unchanged (the model has not seen them yet).
///
/// A state that does not decode for `provider` (or is over
/// [`DEFAULT_MAX_STATE_BYTES`]) is discarded: the result holds only
/// `messages`, and `degraded` says why. Never fails, never panics.
pub fn append_to_state(
    state: Option<&[u8]>,
    provider: &str,
    messages: &[ConversationMessage],
) -> StateUpdate {
    let (mut blob, degraded) = load(state, provider, DEFAULT_MAX_STATE_BYTES);
    blob.messages.extend_from_slice(messages);
    StateUpdate {
        state: blob.encode(),
        degraded,
    }
}

/// Records an application event (`"User has checked in at Harrogate
/// Theatre"`) in `state` as a **user** message holding `text`, as
/// goaitools' `UpdateStateAfterEvent` does, so the model can later be asked
/// about it. Otherwise as [`append_to_state`].
pub fn update_state_after_event(state: Option<&[u8]>, provider: &str, text: &str) -> StateUpdate {
    append_to_state(state, provider, &[ConversationMessage::user(text)])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_members_survive_a_round_trip() {
        let mut blob = StateBlob::new("p");
        blob.messages.push(ConversationMessage::user("hi"));
        let mut doc = blob.to_json();
        doc["messages"][0]["x_future"] = Value::from(7);
        doc["x_top"] = Value::from("kept");
        let decoded =
            StateBlob::decode(doc.to_string().as_bytes(), Some("p"), 1 << 20).expect("decodes");
        let id = decoded.messages[0].id;
        assert_eq!(decoded.unknown_fields(id).map(|m| m.len()), Some(1));
        assert_eq!(decoded.to_json(), doc);
    }

    #[test]
    fn a_long_provider_is_clipped_in_the_report() {
        let doc = serde_json::json!({"version": 1, "provider": "x".repeat(1000),
            "processed_length": 0, "messages": []});
        let d = StateBlob::decode(doc.to_string().as_bytes(), Some("p"), 1 << 20);
        assert!(matches!(d, Err(Degradation::ProviderMismatch { found, .. }) if found.len() == 67));
    }

    #[test]
    fn processed_length_is_clipped_to_the_messages() {
        let doc = serde_json::json!({"version": 1, "provider": "p",
            "processed_length": 99, "messages": []});
        let blob = StateBlob::decode(doc.to_string().as_bytes(), None, 1 << 20).expect("decodes");
        assert_eq!(blob.processed_length, 0);
    }
}
