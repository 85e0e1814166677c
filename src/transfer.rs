//! Sessions in and out of a journal: exported journal files (`.ajournal`),
//! conversations in a provider's format, Claude Code session logs, state
//! snapshots, and whole databases copied to another store.
//!
//! ```
//! use agent_journal::Journal;
//! use agent_journal::provider::ConversationFormat;
//!
//! # fn main() -> agent_journal::Result<()> {
//! # let dir = tempfile::tempdir().expect("tempdir");
//! let journal = Journal::memory();
//! let chat = r#"[{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}]"#;
//! let imported = journal.import_conversation(chat, ConversationFormat::OpenAi, "chat", "hi")?;
//! assert_eq!(imported.state().messages().len(), 2);
//!
//! let file = dir.path().join("chat.ajournal");
//! journal.export_journal(&[imported.id()], &file, |_| {})?;
//! let (sessions, damage) = Journal::memory().import_journal(&file)?;
//! assert_eq!(sessions.len(), 1);
//! assert!(damage.is_none());
//! # Ok(())
//! # }
//! ```
//!
//! Every file and database written here or by `maintenance` is written whole
//! or not at all.

// Whole sessions go to and come from exported journal files
// (`journal_file.rs`, with the import's intent file in `journal/intent.rs`);
// writes go through `store/atomic.rs`.

use std::collections::BTreeMap;

use crate::error::{Error, Result};
use crate::event::Event;
use crate::journal::{Journal, intent};
use crate::model::{EvaluationId, InnerMessage, SessionId};
use crate::provider::ConversationFormat;
use crate::session::Session;
use crate::store::Durability;

mod claude_code;
mod conversation;
mod copy;
mod journal_file;
mod snapshot;

pub use claude_code::{
    CLAUDE_CODE_SUMMARY, CLAUDE_CODE_SYSTEM, read_claude_code, read_claude_code_with,
};
use conversation::IMPORT_CHUNK;
pub use conversation::{ConversationFile, REQUEST_FIELDS};
pub use copy::CopyReport;

impl Session {
    /// The request fields recorded with evaluation `evaluation` (see
    /// [`Journal::import_messages`]): the format they came in, and the
    /// fields. Reads the session's events.
    ///
    /// # Errors
    /// What reading the events can fail with.
    pub fn request_fields(
        &self,
        evaluation: EvaluationId,
    ) -> Result<Option<(String, serde_json::Map<String, serde_json::Value>)>> {
        let mut found = None;
        let wanted = evaluation.to_string();
        self.for_each_event(.., |e| {
            if let Event::Custom { kind, payload } = &e.event
                && kind == REQUEST_FIELDS
                && let Ok(serde_json::Value::Object(mut o)) = serde_json::from_slice(payload)
                && o.get("evaluation").and_then(|v| v.as_str()) == Some(wanted.as_str())
                && let (Some(serde_json::Value::String(f)), Some(serde_json::Value::Object(fields))) =
                    (o.remove("format"), o.remove("fields"))
            {
                found = Some((f, fields));
            }
            Ok(())
        })?;
        Ok(found)
    }
}

impl Journal {
    /// Imports a conversation as a new session, in one atomic append:
    /// nothing is written unless the whole input is valid.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] naming what is wrong and where (invalid JSON,
    /// a tool result with no call, a call id used twice, a wrong role, ...).
    pub fn import_conversation(
        &self,
        text: &str,
        format: ConversationFormat,
        prompt_ns: &str,
        prompt_key: &str,
    ) -> Result<Session> {
        let messages = format.parse(text, EvaluationId::new(), prompt_ns, prompt_key)?;
        self.import_messages(messages, format, format.request_fields(text))
    }

    /// Imports messages [`ConversationFormat::parse`] read from `format` as
    /// a new session (see [`Journal::import_conversation`]): parse first,
    /// then open the journal, and bad input creates nothing.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for no messages.
    ///
    /// `fields`, the request body's other members
    /// ([`ConversationFormat::request_fields`]), are kept with the
    /// evaluation, as the provider had them, in a `Custom` event of kind
    /// [`REQUEST_FIELDS`] right after its start; `export --body` puts them
    /// back.
    pub fn import_messages(
        &self,
        messages: Vec<InnerMessage>,
        format: ConversationFormat,
        fields: Option<serde_json::Map<String, serde_json::Value>>,
    ) -> Result<Session> {
        if messages.is_empty() {
            return Err(Error::InvalidInput(
                "the conversation has no messages".into(),
            ));
        }
        let mut by_eval: BTreeMap<EvaluationId, Vec<InnerMessage>> = BTreeMap::new();
        for m in messages {
            by_eval.entry(m.evaluation_id).or_default().push(m);
        }
        let mut maker = conversation::Events::new(format, fields.as_ref());
        let mut events = vec![maker.opening(maker.any_derived(by_eval.values().flatten()))];
        for m in by_eval.into_values().flatten() {
            maker.message(m, &mut |e| {
                events.push(e);
                Ok(())
            })?;
        }
        let mut made = self.create_imported(std::iter::once(events))?;
        Ok(made.remove(0))
    }

    /// Creates one new session from each element of `sessions` (its events,
    /// made when it is its turn), all or nothing, even across a crash.
    ///
    /// In a database the import intent (`journal/intent.rs`) names the new
    /// sessions before anything is written and goes once they are durable;
    /// each session is appended in chunks of [`IMPORT_CHUNK`] events, so
    /// memory does not grow with a batch of the whole input. A failure
    /// deletes what was written; a crash leaves the intent, and the next
    /// open rolls the import back. Elsewhere (in memory, PostgreSQL) each
    /// session is one atomic append, and a failure deletes the sessions
    /// made before it.
    pub(crate) fn create_imported<I>(&self, sessions: I) -> Result<Vec<Session>>
    where
        I: ExactSizeIterator<Item = Vec<Event>>,
    {
        let ids: Vec<SessionId> = (0..sessions.len()).map(|_| SessionId::new()).collect();
        let Some(path) = intent::intent_path(self) else {
            let mut made: Vec<Session> = Vec::with_capacity(ids.len());
            for (id, events) in ids.into_iter().zip(sessions) {
                match self.create_session_from(id, events) {
                    Ok(s) => made.push(s),
                    Err(e) => {
                        for s in made {
                            let _ = self.delete_session(s.id(), true);
                        }
                        return Err(e);
                    }
                }
            }
            return Ok(made);
        };
        // A write path: refused at once by a poisoned journal.
        self.inner.poison.check()?;
        let _one_at_a_time = intent::one_import_at_a_time();
        self.roll_back_interrupted_import()?;
        intent::write(&path, &ids)?;
        let mut made = Vec::with_capacity(ids.len());
        let result = (|| -> Result<()> {
            for (&id, events) in ids.iter().zip(sessions) {
                let session = Session::empty(self.clone(), id);
                let mut events = events.into_iter();
                let mut at = 0u64;
                loop {
                    let chunk: Vec<Event> = events.by_ref().take(IMPORT_CHUNK).collect();
                    if chunk.is_empty() {
                        break;
                    }
                    let n = chunk.len() as u64;
                    session.append_batch_at(at, chunk)?;
                    at += n;
                }
                made.push(session);
            }
            // Durable before the intent goes, whatever the configuration.
            self.inner.write(|store| store.flush(Durability::Synced))
        })();
        if let Err(e) = result {
            drop(made);
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
        for s in &made {
            self.register(s);
        }
        Ok(made)
    }
}

impl Session {
    /// The messages of the latest evaluation after event `at` (default: the
    /// last), ordered by sequence: what
    /// [`ConversationFormat::to_text`](crate::provider::ConversationFormat::to_text)
    /// exports. For a session holding a conversation of the conversation
    /// engine, its messages in order (see
    /// [`ConversationMessage::to_inner`](crate::conversation::ConversationMessage::to_inner)).
    ///
    /// # Errors
    /// [`Error::ConversationNotFound`] without an evaluation;
    /// [`Error::SeqOutOfRange`] for `at` past the head.
    pub fn latest_conversation(&self, at: Option<u64>) -> Result<Vec<InnerMessage>> {
        let state = match at {
            Some(seq) => self.state_at(seq)?,
            None => self.state_cloned(),
        };
        let log = state.conversation_log();
        if log.is_conversation() {
            let eval = crate::model::EvaluationId(self.id().0);
            return Ok(log
                .messages()
                .iter()
                .enumerate()
                .map(|(i, m)| m.to_inner(eval, i as u64))
                .collect());
        }
        let eval = state
            .evaluations()
            .latest()
            .map(|e| e.evaluation_id)
            .ok_or(Error::ConversationNotFound(self.id()))?;
        Ok(state.messages().for_evaluation(eval).cloned().collect())
    }
}
