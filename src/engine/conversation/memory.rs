//! `InMemoryConversationStore`: conversations folded in memory, for tests
//! and short-lived use (the spec's section 5.2). Nothing survives the
//! process.

use std::collections::BTreeMap;
use std::sync::Mutex;

use crate::error::{Error, Result};
use crate::event::conversation::{
    CompactionRecord, Conversation, ConversationEvent, ConversationId, ConversationMessage, TurnId,
};
use crate::event::{Envelope, Event};
use crate::model::now;
use crate::state::SessionState;

use super::records::{by_created, conversation_of, message_events, owned, turn_events, turn_of};
use super::store::{ConversationStore, ConversationTurn, HistoryWindow, Page};

/// Conversations kept in memory: each a state folded from the same events
/// the journal store appends, so both behave alike. Thread-safe.
#[derive(Default)]
pub struct InMemoryConversationStore {
    conversations: Mutex<BTreeMap<ConversationId, SessionState>>,
}

impl InMemoryConversationStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn with<T>(
        &self,
        id: ConversationId,
        f: impl FnOnce(&mut SessionState) -> Result<T>,
    ) -> Result<T> {
        let mut all = self.conversations.lock().unwrap_or_else(|p| p.into_inner());
        let state = all.get_mut(&id).ok_or(Error::NotAConversation(id))?;
        f(state)
    }
}

fn fold(state: &mut SessionState, id: ConversationId, events: Vec<Event>) {
    for event in events {
        let seq = state.last_seq().map_or(0, |s| s + 1);
        state.apply_owned(Envelope {
            session: id,
            seq,
            at: now(),
            event,
        });
    }
}

impl ConversationStore for InMemoryConversationStore {
    fn create_conversation(
        &self,
        conversation: &Conversation,
        initial_messages: &[ConversationMessage],
    ) -> Result<()> {
        let id = conversation.id;
        let mut all = self.conversations.lock().unwrap_or_else(|p| p.into_inner());
        if all.contains_key(&id) {
            return Err(Error::ConversationExists(id));
        }
        let mut state = SessionState::new();
        fold(
            &mut state,
            id,
            vec![
                Event::SessionOpened { labels: Vec::new() },
                Event::Conversation(Box::new(ConversationEvent::Created(conversation.clone()))),
            ],
        );
        let events = message_events(&state, id, initial_messages);
        fold(&mut state, id, events);
        all.insert(id, state);
        Ok(())
    }

    fn get_conversation(&self, id: ConversationId) -> Result<Option<Conversation>> {
        let all = self.conversations.lock().unwrap_or_else(|p| p.into_inner());
        Ok(all.get(&id).and_then(|s| conversation_of(s, id)))
    }

    fn update_conversation(&self, conversation: &Conversation) -> Result<()> {
        let id = conversation.id;
        self.with(id, |state| {
            let event = ConversationEvent::Updated(conversation.clone());
            fold(state, id, vec![Event::Conversation(Box::new(event))]);
            Ok(())
        })
    }

    fn append_messages(&self, id: ConversationId, messages: &[ConversationMessage]) -> Result<()> {
        self.with(id, |state| {
            let events = message_events(state, id, messages);
            fold(state, id, events);
            Ok(())
        })
    }

    fn get_messages(&self, id: ConversationId, page: Page) -> Result<Vec<ConversationMessage>> {
        self.with(id, |state| {
            Ok(by_created(state.conversation_log().messages(), page, id))
        })
    }

    fn unanswered_messages(&self, id: ConversationId) -> Result<Vec<ConversationMessage>> {
        self.with(id, |state| {
            Ok(owned(state.conversation_log().unanswered().to_vec(), id))
        })
    }

    fn create_turn(&self, turn: &ConversationTurn) -> Result<()> {
        let id = turn.conversation_id;
        self.with(id, |state| {
            let events = turn_events(state, id, turn);
            fold(state, id, events);
            Ok(())
        })
    }

    fn update_turn(&self, turn: &ConversationTurn) -> Result<()> {
        let id = turn.conversation_id;
        self.with(id, |state| {
            if state.conversation_log().turn(turn.id).is_none() {
                return Err(Error::TurnNotFound {
                    conversation: id,
                    turn: turn.id.0,
                });
            }
            let events = turn_events(state, id, turn);
            fold(state, id, events);
            Ok(())
        })
    }

    fn get_turn(&self, id: ConversationId, turn: TurnId) -> Result<Option<ConversationTurn>> {
        self.with(id, |state| {
            Ok(state
                .conversation_log()
                .turn(turn)
                .map(|r| turn_of(state, id, r)))
        })
    }

    fn list_turns(&self, id: ConversationId, page: Page) -> Result<Vec<ConversationTurn>> {
        self.with(id, |state| {
            let records = page.select(state.conversation_log().turns());
            Ok(records.iter().map(|r| turn_of(state, id, r)).collect())
        })
    }

    fn list_conversations(&self) -> Result<Vec<ConversationId>> {
        let all = self.conversations.lock().unwrap_or_else(|p| p.into_inner());
        Ok(all.keys().copied().collect())
    }

    fn history(&self, id: ConversationId, window: Option<usize>) -> Result<HistoryWindow> {
        self.with(id, |state| {
            Ok(HistoryWindow::of(state.conversation_log(), id, window))
        })
    }

    fn record_compaction(&self, id: ConversationId, record: &CompactionRecord) -> Result<()> {
        self.with(id, |state| {
            let event = ConversationEvent::Compacted(record.clone());
            fold(state, id, vec![Event::Conversation(Box::new(event))]);
            Ok(())
        })
    }
}
