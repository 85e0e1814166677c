//! A provider's conversation imported as a session: the events it becomes,
//! and the streaming import of a conversation file, which never holds the
//! whole conversation (`provider/stream.rs` reads it a message at a time;
//! the events go to the store in chunks, without a fold).

use std::path::Path;

use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::event::{Envelope, Event};
use crate::format;
use crate::journal::{Journal, intent};
use crate::model::{EvaluationId, InnerMessage, SessionId, now};
use crate::provider::ConversationFormat;
use crate::session::Session;
use crate::store::Durability;

/// An import into a database appends each session in chunks of this many
/// events (one sled batch each: a batch of a whole large conversation made
/// sled hold many times its size in memory).
pub(super) const IMPORT_CHUNK: usize = 1024;

/// Kind of the `Custom` event that keeps an imported request's other
/// fields with its evaluation: `{"format", "evaluation", "fields"}` as JSON.
pub const REQUEST_FIELDS: &str = "agent_journal.request_fields";

/// A chunk of an import is written once its frames hold this many bytes
/// (or it has [`IMPORT_CHUNK`] events): each chunk passes through the
/// write-ahead log's buffer whole.
const CHUNK_BYTES: usize = 1 << 20;

/// The events of an imported conversation, made as its messages come (in
/// evaluation order, each evaluation's together).
pub(super) struct Events<'a> {
    format: ConversationFormat,
    fields: Option<&'a Map<String, Value>>,
    evaluation: Option<EvaluationId>,
}

/// Whether a call id was derived from its place (Ollama's calls, and
/// Gemini's without an id: `provider::ollama`, `provider::gemini`).
fn derived(format: ConversationFormat, m: &InnerMessage) -> bool {
    matches!(
        format,
        ConversationFormat::Ollama | ConversationFormat::Gemini
    ) && m.tool_calls.iter().any(|c| {
        let id = c.call_id.as_str();
        id.starts_with("ollama-") || id.starts_with("gemini-")
    })
}

impl<'a> Events<'a> {
    pub(super) fn new(format: ConversationFormat, fields: Option<&'a Map<String, Value>>) -> Self {
        Events {
            format,
            fields: fields.filter(|f| !f.is_empty()),
            evaluation: None,
        }
    }

    /// The session's first event: labelled with the format, and with
    /// `tool_call_ids: derived-by-position` if `derived`.
    pub(super) fn opening(&self, derived: bool) -> Event {
        let mut labels = vec![("imported".to_owned(), self.format.name().to_owned())];
        if derived {
            labels.push(("tool_call_ids".into(), "derived-by-position".into()));
        }
        Event::SessionOpened { labels }
    }

    /// Whether any of `messages` has a call id derived from its place.
    pub(super) fn any_derived<'m>(
        &self,
        mut messages: impl Iterator<Item = &'m InnerMessage>,
    ) -> bool {
        messages.any(|m| derived(self.format, m))
    }

    /// The events of message `m`: its evaluation's start (and the request
    /// fields) before the first message of each evaluation, then the
    /// message.
    pub(super) fn message(
        &mut self,
        m: InnerMessage,
        emit: &mut dyn FnMut(Event) -> Result<()>,
    ) -> Result<()> {
        if self.evaluation != Some(m.evaluation_id) {
            let evaluation_id = m.evaluation_id;
            self.evaluation = Some(evaluation_id);
            emit(Event::EvaluationStarted {
                evaluation_id,
                prompt_ns: m.prompt_ns.clone(),
                prompt_key: m.prompt_key.clone(),
                adapter: self.format.name().into(),
            })?;
            if let Some(f) = self.fields {
                let payload = serde_json::json!({
                    "format": self.format.name(),
                    "evaluation": evaluation_id.to_string(),
                    "fields": f,
                });
                emit(Event::Custom {
                    kind: REQUEST_FIELDS.into(),
                    payload: payload.to_string().into_bytes(),
                })?;
            }
        }
        emit(Event::Message(m))
    }
}

/// A conversation file that was read whole once and converted once (every
/// error found), ready to import: [`Journal::import_conversation_file`].
pub struct ConversationFile {
    file: crate::provider::StreamedConversation,
    messages: u64,
    derived: bool,
    labels: Vec<(String, String)>,
}

impl std::fmt::Debug for ConversationFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConversationFile")
            .field("format", &self.file.format())
            .field("messages", &self.messages)
            .field("derived_call_ids", &self.derived)
            .finish()
    }
}

impl ConversationFile {
    /// Reads the conversation in `path`, written in `format`, without
    /// keeping it: checks it is at most `limit` bytes, that it is JSON
    /// (JSON Lines: every line a message) and that it converts (the errors
    /// [`ConversationFormat::parse`] reports for the same text), in two
    /// passes over the file that each hold one message at a time.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] naming what is wrong and where, a file past
    /// the limit, or no messages; [`Error::Io`] if it cannot be read.
    pub fn open(path: &Path, format: ConversationFormat, limit: u64) -> Result<Self> {
        Self::open_with(path, format, limit, false)
    }

    /// [`ConversationFile::open`], refusing instead of keeping the items
    /// and content blocks whose type the journal does not model ([opaque
    /// items](crate::provider::opaque)).
    ///
    /// # Errors
    /// As `open`; [`Error::Unmodeled`] naming the first opaque item's path
    /// and type.
    pub fn open_strict(path: &Path, format: ConversationFormat, limit: u64) -> Result<Self> {
        Self::open_with(path, format, limit, true)
    }

    /// [`ConversationFile::open`] (or, if `strict`, `open_strict`) over
    /// text already read, such as standard input a caller read once within
    /// its own limit (a pipe cannot be read in passes).
    ///
    /// # Errors
    /// As `open` and `open_strict`, but for the limit and reading.
    pub fn from_bytes(bytes: Vec<u8>, format: ConversationFormat, strict: bool) -> Result<Self> {
        Self::opened(format.open_bytes(bytes)?, strict)
    }

    fn open_with(
        path: &Path,
        format: ConversationFormat,
        limit: u64,
        strict: bool,
    ) -> Result<Self> {
        Self::opened(format.open_file(path, limit)?, strict)
    }

    fn opened(mut file: crate::provider::StreamedConversation, strict: bool) -> Result<Self> {
        let format = file.format();
        if strict {
            file.set_strict();
        }
        let (mut messages, mut derived) = (0u64, false);
        file.messages(EvaluationId::new(), "", "", &mut |m| {
            messages += 1;
            derived |= self::derived(format, &m);
            Ok(())
        })?;
        if messages == 0 {
            return Err(Error::InvalidInput(
                "the conversation has no messages".into(),
            ));
        }
        Ok(ConversationFile {
            file,
            messages,
            derived,
            labels: Vec::new(),
        })
    }

    /// Adds a label to the session its import opens (after `imported` and
    /// the others the import writes), as a caller records where the file
    /// came from (the CLI: `import.sha256`, its content hash).
    pub fn label(&mut self, key: impl Into<String>, value: impl Into<String>) {
        self.labels.push((key.into(), value.into()));
    }

    /// The messages it holds.
    pub fn messages(&self) -> u64 {
        self.messages
    }

    /// The request's other fields (see
    /// [`ConversationFormat::request_fields`]).
    pub fn request_fields(&self) -> Option<Map<String, Value>> {
        self.file.request_fields()
    }
}

impl Journal {
    /// Imports a conversation file ([`ConversationFile::open`]) as a new
    /// session, as [`Journal::import_conversation`] imports its text, in one
    /// more pass over the file: the events go to the store in chunks as
    /// they are made, without folding them, so memory holds a turn of the
    /// conversation, not the conversation. All or nothing, even across a
    /// crash (the import intent, as [`Journal::import_journal`]); the
    /// session's state is folded when it is next opened.
    ///
    /// Returns the session's id and its number of events.
    ///
    /// # Errors
    /// What reading the file or writing the store can fail with; nothing
    /// is left of the session then.
    pub fn import_conversation_file(
        &self,
        file: &ConversationFile,
        prompt_ns: &str,
        prompt_key: &str,
    ) -> Result<(SessionId, u64)> {
        let fields = file.request_fields();
        let mut events = Events::new(file.file.format(), fields.as_ref());
        let mut opening = events.opening(file.derived);
        if let Event::SessionOpened { labels } = &mut opening {
            labels.extend(file.labels.iter().cloned());
        }
        let evaluation = EvaluationId::new();
        let made = self.import_streams(1, |_, emit| {
            emit(opening.clone())?;
            file.file
                .messages(evaluation, prompt_ns, prompt_key, &mut |m| {
                    events.message(m, emit)
                })
        })?;
        made.first()
            .copied()
            .ok_or_else(|| Error::Storage("the import made no session".into()))
    }

    /// Creates `count` sessions, session `i` from the events `fill(i, ..)`
    /// emits, all or nothing even across a crash. In a database they go to
    /// the store in chunks of [`IMPORT_CHUNK`] events (or [`CHUNK_BYTES`])
    /// as they come, each durable, under the import intent naming every
    /// session (as [`Journal::create_imported`]); elsewhere they are
    /// collected and appended a session at a time. Returns each session's
    /// id and number of events.
    pub(crate) fn import_streams(
        &self,
        count: usize,
        mut fill: impl FnMut(usize, &mut dyn FnMut(Event) -> Result<()>) -> Result<()>,
    ) -> Result<Vec<(SessionId, u64)>> {
        let Some(path) = intent::intent_path(self) else {
            let mut all = Vec::with_capacity(count);
            for i in 0..count {
                let mut events = Vec::new();
                fill(i, &mut |e| {
                    events.push(e);
                    Ok(())
                })?;
                all.push(events);
            }
            let counts: Vec<u64> = all.iter().map(|e| e.len() as u64).collect();
            let made = self.create_imported(all.into_iter())?;
            return Ok(made.iter().map(Session::id).zip(counts).collect());
        };
        // A write path: refused at once by a poisoned journal.
        self.inner.poison.check()?;
        let _one_at_a_time = intent::one_import_at_a_time();
        self.roll_back_interrupted_import()?;
        let ids: Vec<SessionId> = (0..count).map(|_| SessionId::new()).collect();
        intent::write(&path, &ids)?;
        let limit = self.inner.config.max_event_bytes;
        let mut made = Vec::with_capacity(count);
        let result = (|| -> Result<()> {
            for (i, &id) in ids.iter().enumerate() {
                let mut chunk: Vec<Vec<u8>> = Vec::with_capacity(IMPORT_CHUNK);
                let (mut written, mut bytes) = (0u64, 0usize);
                // Each chunk made durable before the next: a `Synced`
                // journal would otherwise queue every record for its log
                // until the end.
                let put = |chunk: &mut Vec<Vec<u8>>, written: &mut u64| {
                    let n = chunk.len() as u64;
                    self.inner.write(|store| {
                        store.append(id, *written, chunk)?;
                        store.flush(Durability::Synced)
                    })?;
                    *written += n;
                    chunk.clear();
                    Ok::<(), Error>(())
                };
                fill(i, &mut |event| {
                    let env = Envelope {
                        session: id,
                        seq: written + chunk.len() as u64,
                        at: now(),
                        event,
                    };
                    let frame = format::encode_frame(&env, limit)?;
                    bytes += frame.len();
                    chunk.push(frame);
                    if chunk.len() == IMPORT_CHUNK || bytes >= CHUNK_BYTES {
                        bytes = 0;
                        put(&mut chunk, &mut written)?;
                    }
                    Ok(())
                })?;
                // Durable before the intent goes, whatever the configuration.
                put(&mut chunk, &mut written)?;
                made.push((id, written));
            }
            Ok(())
        })();
        if let Err(e) = result {
            for &id in &ids {
                self.forget(id);
            }
            // If the rollback fails too (a poisoned journal refuses it), the
            // intent stays and the next open rolls the import back.
            if self.remove_imported(&ids).is_ok() {
                let _ = intent::remove(&path);
            }
            return Err(e);
        }
        intent::remove(&path)?;
        Ok(made)
    }
}
