//! `JournalConversationStore`: each conversation is a session of a
//! [`Journal`]; each change is appended as events and read back from the
//! session's folded state.

use std::collections::BTreeMap;
use std::sync::Mutex;

use crate::error::{Error, Result};
use crate::event::Event;
use crate::event::conversation::{
    CompactionRecord, Conversation, ConversationEvent, ConversationId, ConversationMessage, TurnId,
};
use crate::journal::Journal;
use crate::session::Session;
use crate::state::SessionState;

use super::records::{by_created, conversation_of, message_events, owned, turn_events, turn_of};
use super::store::{ConversationStore, ConversationTurn, HistoryWindow, Page};

/// The label every conversation session carries: `("kind", "conversation")`.
pub const CONVERSATION_LABEL: (&str, &str) = ("kind", "conversation");

/// Conversations stored in a journal: a conversation is a session whose
/// stream starts with `SessionOpened` (labelled
/// [`CONVERSATION_LABEL`] and `("agent", ...)`) and `ConversationCreated`;
/// every method that changes something appends its events in one batch
/// (all or nothing, durable as the journal's [`Durability`](crate::Durability)
/// says when it returns).
///
/// Sessions it opened stay open in it (their states in memory) until it is
/// dropped or [`close`](Self::close) is called.
pub struct JournalConversationStore {
    journal: Journal,
    open: Mutex<BTreeMap<ConversationId, Session>>,
}

impl JournalConversationStore {
    /// A store over `journal`.
    pub fn new(journal: Journal) -> Self {
        Self {
            journal,
            open: Mutex::new(BTreeMap::new()),
        }
    }

    /// The journal it writes to.
    pub fn journal(&self) -> &Journal {
        &self.journal
    }

    /// The session of conversation `id`.
    ///
    /// # Errors
    /// [`Error::NotAConversation`] when there is no such session, or it
    /// holds no conversation.
    pub fn session(&self, id: ConversationId) -> Result<Session> {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(s) = open.get(&id) {
            return Ok(s.clone());
        }
        let session = match self.journal.session(id) {
            Ok(s) => s,
            Err(Error::SessionNotFound(_)) => return Err(Error::NotAConversation(id)),
            Err(e) => return Err(e),
        };
        if !session.state().conversation_log().is_conversation() {
            return Err(Error::NotAConversation(id));
        }
        open.insert(id, session.clone());
        Ok(session)
    }

    /// Forgets the open session of conversation `id` (its state is dropped
    /// once no other handle holds it).
    pub fn close(&self, id: ConversationId) {
        self.open
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&id);
    }

    /// Reads conversation `id`'s state with `f` (the state guard is
    /// released before anything is appended).
    fn read<T>(&self, id: ConversationId, f: impl FnOnce(&SessionState) -> T) -> Result<T> {
        let session = self.session(id)?;
        let state = session.state();
        Ok(f(&state))
    }

    /// Appends the events `make` computes from the state, if any.
    fn change(
        &self,
        id: ConversationId,
        make: impl FnOnce(&SessionState) -> Result<Vec<Event>>,
    ) -> Result<()> {
        let session = self.session(id)?;
        let mut events = {
            let state = session.state();
            make(&state)?
        };
        match events.len() {
            0 => Ok(()),
            1 => session.append(events.remove(0)).map(drop),
            _ => session.append_batch(events).map(drop),
        }
    }
}

fn optional<T>(r: Result<T>) -> Result<Option<T>> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(Error::NotAConversation(_)) => Ok(None),
        Err(e) => Err(e),
    }
}

impl ConversationStore for JournalConversationStore {
    fn create_conversation(
        &self,
        conversation: &Conversation,
        initial_messages: &[ConversationMessage],
    ) -> Result<()> {
        let id = conversation.id;
        if self.journal.stream_len(id)?.is_some() {
            return Err(Error::ConversationExists(id));
        }
        let labels = vec![
            (
                CONVERSATION_LABEL.0.to_owned(),
                CONVERSATION_LABEL.1.to_owned(),
            ),
            ("agent".to_owned(), conversation.agent.clone()),
        ];
        let mut events = vec![
            Event::SessionOpened { labels },
            Event::Conversation(Box::new(ConversationEvent::Created(conversation.clone()))),
        ];
        events.extend(message_events(&SessionState::new(), id, initial_messages));
        let session = match self.journal.create_session_from(id, events) {
            Ok(s) => s,
            Err(Error::Conflict { .. }) => return Err(Error::ConversationExists(id)),
            Err(e) => return Err(e),
        };
        self.open
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id, session);
        Ok(())
    }

    fn get_conversation(&self, id: ConversationId) -> Result<Option<Conversation>> {
        Ok(optional(self.read(id, |s| conversation_of(s, id)))?.flatten())
    }

    fn update_conversation(&self, conversation: &Conversation) -> Result<()> {
        let event = ConversationEvent::Updated(conversation.clone());
        self.change(conversation.id, |_| {
            Ok(vec![Event::Conversation(Box::new(event))])
        })
    }

    fn append_messages(&self, id: ConversationId, messages: &[ConversationMessage]) -> Result<()> {
        self.change(id, |s| Ok(message_events(s, id, messages)))
    }

    fn get_messages(&self, id: ConversationId, page: Page) -> Result<Vec<ConversationMessage>> {
        self.read(id, |s| {
            by_created(s.conversation_log().messages(), page, id)
        })
    }

    fn unanswered_messages(&self, id: ConversationId) -> Result<Vec<ConversationMessage>> {
        self.read(id, |s| {
            owned(s.conversation_log().unanswered().to_vec(), id)
        })
    }

    fn create_turn(&self, turn: &ConversationTurn) -> Result<()> {
        let id = turn.conversation_id;
        self.change(id, |s| Ok(turn_events(s, id, turn)))
    }

    fn update_turn(&self, turn: &ConversationTurn) -> Result<()> {
        let id = turn.conversation_id;
        self.change(id, |s| {
            if s.conversation_log().turn(turn.id).is_none() {
                return Err(Error::TurnNotFound {
                    conversation: id,
                    turn: turn.id.0,
                });
            }
            Ok(turn_events(s, id, turn))
        })
    }

    fn get_turn(&self, id: ConversationId, turn: TurnId) -> Result<Option<ConversationTurn>> {
        self.read(id, |s| {
            s.conversation_log().turn(turn).map(|r| turn_of(s, id, r))
        })
    }

    fn list_turns(&self, id: ConversationId, page: Page) -> Result<Vec<ConversationTurn>> {
        self.read(id, |s| {
            let records = page.select(s.conversation_log().turns());
            records.iter().map(|r| turn_of(s, id, r)).collect()
        })
    }

    fn list_conversations(&self) -> Result<Vec<ConversationId>> {
        let mut out = Vec::new();
        for id in self.journal.sessions()? {
            if optional(self.session(id))?.is_some() {
                out.push(id);
            }
        }
        Ok(out)
    }

    fn history(&self, id: ConversationId, window: Option<usize>) -> Result<HistoryWindow> {
        self.read(id, |s| HistoryWindow::of(s.conversation_log(), id, window))
    }

    fn record_compaction(&self, id: ConversationId, record: &CompactionRecord) -> Result<()> {
        let event = ConversationEvent::Compacted(record.clone());
        self.change(id, |_| Ok(vec![Event::Conversation(Box::new(event))]))
    }
}
