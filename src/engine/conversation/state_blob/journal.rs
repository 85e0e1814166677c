//! Conversions between a state blob and a conversation of a journal.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use crate::error::{Error, Result};
use crate::event::conversation::{Conversation, ConversationId, ConversationMessage, Metadata};
use crate::journal::Journal;
use crate::model::{MessageId, SessionId, now};

use super::super::journal_store::JournalConversationStore;
use super::super::store::ConversationStore;
use super::{DEFAULT_MAX_STATE_BYTES, STATE_BLOB_VERSION, StateBlob, summary_message};

/// The key, in an imported conversation's metadata, of what the blob held
/// besides its messages: `{"version", "provider", "processed_length",
/// "stored_system", "unknown"}`; and, in an imported message's metadata,
/// of the members of the message this version does not know. Export reads
/// both back, so blob -> journal -> blob gives the blob back.
pub const STATE_BLOB_METADATA: &str = "state_blob";

/// The key, in an imported message's metadata, of the wire message it was
/// read as when the blob keeps that as it came (a role or a tool call this
/// version does not rebuild member for member); export writes it back.
pub const STATE_BLOB_WIRE: &str = "state_blob_wire";

/// Options of [`import_state_blob`].
#[derive(Clone, Debug)]
pub struct ImportStateBlob {
    /// The conversation's id. Default: a new one.
    pub id: Option<ConversationId>,
    /// Its agent. Default: `"state-blob"`.
    pub agent: String,
    /// Its title. Default: none.
    pub title: Option<String>,
    /// Its subject. Default: none.
    pub subject_id: Option<String>,
    /// The provider the blob must have been made with. Default: none (any).
    pub provider: Option<String>,
    /// The largest blob read. Default: [`DEFAULT_MAX_STATE_BYTES`].
    pub max_bytes: usize,
    /// More metadata for the conversation. Default: none.
    pub metadata: Metadata,
}

impl Default for ImportStateBlob {
    fn default() -> Self {
        Self {
            id: None,
            agent: "state-blob".into(),
            title: None,
            subject_id: None,
            provider: None,
            max_bytes: DEFAULT_MAX_STATE_BYTES,
            metadata: Metadata::new(),
        }
    }
}

/// Imports `blob` as a new conversation of `journal`, written in one atomic
/// batch (through [`JournalConversationStore`]'s `create_conversation`):
/// its messages, in order, each with the new conversation's id (a message
/// whose id repeats an earlier one's gets a new id, since a conversation
/// keeps one message per id); the blob's provider, `processed_length`, its
/// leading system messages' count (`stored_system`: in a blob they are
/// stored context, not instructions) and its unknown members in the
/// conversation's metadata under [`STATE_BLOB_METADATA`]; each message's
/// unknown members in its metadata under the same key, and the wire
/// message kept as it came, if any, under [`STATE_BLOB_WIRE`].
///
/// The blob's leading system messages become the conversation's leading
/// system messages, so the engine sends them first on every turn, as
/// [`chat_with_state`](super::chat_with_state) did.
///
/// # Errors
/// [`Error::InvalidInput`] naming the reason when the blob does not decode
/// (here a [`Degradation`](super::Degradation) is an error: the caller
/// asked for this blob); [`Error::ConversationExists`] when `id` is taken;
/// a storage error.
pub fn import_state_blob(
    journal: &Journal,
    blob: &[u8],
    options: &ImportStateBlob,
) -> Result<SessionId> {
    let decoded = StateBlob::decode(blob, options.provider.as_deref(), options.max_bytes)
        .map_err(|d| Error::InvalidInput(format!("state blob ({}): {d}", d.kind())))?;
    decoded.import(journal, options)
}

impl StateBlob {
    /// Imports this blob as a new conversation of `journal`, as
    /// [`import_state_blob`] does (`options.provider` and
    /// `options.max_bytes` are not used: the blob is decoded already).
    ///
    /// # Errors
    /// As [`import_state_blob`], but for decoding.
    pub fn import(&self, journal: &Journal, options: &ImportStateBlob) -> Result<SessionId> {
        let mut seen = BTreeSet::new();
        let mut messages = Vec::with_capacity(self.messages.len());
        for m in &self.messages {
            let mut m = m.clone();
            if let Some(extra) = self.unknown_fields(m.id) {
                m.metadata
                    .insert(STATE_BLOB_METADATA.into(), Value::Object(extra.clone()));
            }
            if let Some(wire) = self.kept_wire(m.id) {
                m.metadata.insert(STATE_BLOB_WIRE.into(), wire.clone());
            }
            if !seen.insert(m.id) {
                m.id = MessageId::new();
            }
            messages.push(m);
        }
        let stored_system = self
            .messages
            .iter()
            .take_while(|m| m.role == crate::model::Role::System)
            .count();
        let mut metadata = options.metadata.clone();
        metadata.insert(
            STATE_BLOB_METADATA.into(),
            json!({
                "version": STATE_BLOB_VERSION,
                "provider": self.provider,
                "processed_length": self.processed_length,
                "stored_system": stored_system,
                "unknown": Value::Object(self.unknown_members().clone()),
            }),
        );
        let at = now();
        let conversation = Conversation {
            id: options.id.unwrap_or_default(),
            agent: options.agent.clone(),
            subject_id: options.subject_id.clone(),
            title: options.title.clone(),
            created_at: at,
            updated_at: at,
            metadata,
        };
        JournalConversationStore::new(journal.clone())
            .create_conversation(&conversation, &messages)?;
        Ok(conversation.id)
    }
}

/// The state blob of conversation `id`; see [`state_blob_of`].
///
/// # Errors
/// As [`state_blob_of`].
pub fn export_state_blob(journal: &Journal, id: SessionId) -> Result<Vec<u8>> {
    export_state_blob_for(journal, id, None)
}

/// The state blob of conversation `id`, for `provider` when given; see
/// [`state_blob_of`].
///
/// # Errors
/// As [`state_blob_of`].
pub fn export_state_blob_for(
    journal: &Journal,
    id: SessionId,
    provider: Option<&str>,
) -> Result<Vec<u8>> {
    Ok(state_blob_of(journal, id, provider)?.encode())
}

/// Conversation `id` of `journal` as a state blob:
///
/// - messages: what is still sent to the provider without the leading
///   system messages (which a blob's caller supplies fresh), that is
///   [`ConversationLog::sendable`](crate::state::ConversationLog::sendable); with,
///   first, the summary of the last compaction, if it wrote one, as a
///   system message marked [`SUMMARY_MARKER`](super::SUMMARY_MARKER); and,
///   before that, for a conversation imported from a blob, the blob's own
///   leading system messages (`stored_system`). Each message's
///   `conversation_id` is the nil id (a blob belongs to no conversation),
///   and unknown members kept at import are restored.
/// - provider: `provider` if given; else that of the conversation's last
///   provider call; else the one recorded at import; else, for an
///   inner-loop session, the adapter of its latest evaluation (an imported
///   chat's format).
/// - processed_length: the number of messages; for an imported
///   conversation with no provider call and no compaction since, the
///   `processed_length` recorded at import.
///
/// # Errors
/// [`Error::SessionNotFound`]; [`Error::NotAConversation`] when the
/// session holds no message (an inner-loop session's evaluations are read
/// as turns: [`Session::conversation_at`](crate::Session::conversation_at)); [`Error::InvalidInput`] when no provider
/// is given, called, or recorded.
pub fn state_blob_of(
    journal: &Journal,
    id: SessionId,
    provider: Option<&str>,
) -> Result<StateBlob> {
    let session = journal.session(id)?;
    let log = match session.head() {
        0 => None,
        head => session.conversation_at(head - 1)?,
    }
    .ok_or(Error::NotAConversation(id))?;
    let info = log.info().ok_or(Error::NotAConversation(id))?;
    let recorded = info
        .metadata
        .get(STATE_BLOB_METADATA)
        .and_then(Value::as_object);
    let field = |k: &str| recorded.and_then(|r| r.get(k));
    let provider = provider
        .map(str::to_owned)
        .or_else(|| log.calls().last().map(|c| c.provider.clone()))
        .or_else(|| field("provider").and_then(Value::as_str).map(str::to_owned))
        .or_else(|| {
            let state = session.state();
            let adapter = &state.evaluations().latest()?.adapter;
            (!adapter.is_empty()).then(|| adapter.clone())
        })
        .ok_or_else(|| {
            Error::InvalidInput(format!(
                "conversation {id} made no provider call and records no provider: name one"
            ))
        })?;
    let stored_system = field("stored_system")
        .and_then(Value::as_u64)
        .map_or(0, |n| usize::try_from(n).unwrap_or(usize::MAX))
        .min(log.leading_system().len());
    let mut messages: Vec<ConversationMessage> = log.leading_system()[..stored_system].to_vec();
    if let Some(summary) = log.summary() {
        let mut m = summary_message(summary);
        if let Some(c) = log.compactions().last() {
            m.created_at = c.at;
        }
        messages.push(m);
    }
    messages.extend_from_slice(log.sendable());
    let mut blob = StateBlob::new(provider);
    for m in &mut messages {
        m.conversation_id = ConversationId::from_bytes([0; 16]);
        if let Some(Value::Object(extra)) = m.metadata.remove(STATE_BLOB_METADATA) {
            blob.keep_unknown(m.id, extra);
        }
        if let Some(wire) = m.metadata.remove(STATE_BLOB_WIRE) {
            blob.keep_wire(m.id, wire);
        }
    }
    if let Some(Value::Object(unknown)) = field("unknown") {
        blob.set_unknown_members(unknown.clone());
    }
    let untouched = log.calls().is_empty() && log.compactions().is_empty();
    blob.processed_length = match field("processed_length").and_then(Value::as_u64) {
        Some(n) if untouched => usize::try_from(n).unwrap_or(usize::MAX),
        _ => messages.len(),
    }
    .min(messages.len());
    blob.messages = messages;
    Ok(blob)
}
