//! Conversation storage (the spec's section 5): the whole turn as the store
//! hands it out, the query options, and the `ConversationStore` trait.

use chrono::{DateTime, Utc};

use crate::error::Result;
use crate::event::conversation::{
    CompactionRecord, Conversation, ConversationId, ConversationMessage, Metadata,
    ProviderCallRecord, TurnError, TurnId, TurnRecord, TurnStatus,
};
use crate::model::ToolCallRecord;

/// A turn with its messages and calls (the spec's `ConversationTurn`).
#[derive(Clone, Debug, PartialEq)]
pub struct ConversationTurn {
    /// Its id.
    pub id: TurnId,
    /// The conversation.
    pub conversation_id: ConversationId,
    /// The agent handling it.
    pub agent: String,
    /// The messages that triggered it.
    pub input_messages: Vec<ConversationMessage>,
    /// The messages it produced (assistant and tool), in order.
    pub output_messages: Vec<ConversationMessage>,
    /// Its provider calls, in the order started.
    pub provider_calls: Vec<ProviderCallRecord>,
    /// The tool calls its assistant messages made, each with its status.
    pub tool_calls: Vec<ToolCallRecord>,
    /// Its status.
    pub status: TurnStatus,
    /// `"user_message"`, `"tool_result"`, `"system_trigger"`, ...
    pub trigger_type: Option<String>,
    /// When it started.
    pub started_at: DateTime<Utc>,
    /// When it finished.
    pub finished_at: Option<DateTime<Utc>>,
    /// Why it failed.
    pub error: Option<TurnError>,
    /// Free-form metadata.
    pub metadata: Metadata,
}

impl ConversationTurn {
    /// The header the journal records (messages by id).
    pub fn record(&self) -> TurnRecord {
        TurnRecord {
            id: self.id,
            agent: self.agent.clone(),
            status: self.status,
            trigger_type: self.trigger_type.clone(),
            input_messages: self.input_messages.iter().map(|m| m.id).collect(),
            output_messages: self.output_messages.iter().map(|m| m.id).collect(),
            started_at: self.started_at,
            finished_at: self.finished_at,
            error: self.error.clone(),
            metadata: self.metadata.clone(),
        }
    }

    /// Input plus output tokens of every call.
    pub fn total_tokens(&self) -> u64 {
        self.provider_calls
            .iter()
            .filter_map(|c| c.usage.as_ref())
            .map(|u| u.total())
            .sum()
    }
}

/// The order of a listing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Order {
    /// Oldest first (the default).
    #[default]
    Asc,
    /// Newest first.
    Desc,
}

/// Options of `get_messages` and `list_turns`: at most `limit` items (all
/// when none), from the oldest or the newest. With `Desc` and a limit, the
/// newest `limit` items, newest first.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Page {
    /// At most this many; all when none.
    pub limit: Option<usize>,
    /// Oldest or newest first.
    pub order: Order,
}

impl Page {
    /// Everything, oldest first.
    pub fn all() -> Self {
        Self::default()
    }

    /// The newest `n`, newest first.
    pub fn last(n: usize) -> Self {
        Self {
            limit: Some(n),
            order: Order::Desc,
        }
    }

    /// The items of `items` (oldest first) this page selects, cloned.
    pub(crate) fn select<T: Clone>(&self, items: &[T]) -> Vec<T> {
        let n = self.limit.unwrap_or(items.len()).min(items.len());
        match self.order {
            Order::Asc => items[..n].to_vec(),
            Order::Desc => items[items.len() - n..].iter().rev().cloned().collect(),
        }
    }
}

/// Where conversations live (the spec's `ConversationStore`). Implemented
/// by [`JournalConversationStore`](super::JournalConversationStore) (each
/// conversation a session, each change an appended event) and
/// [`InMemoryConversationStore`](super::InMemoryConversationStore); both
/// pass the same test suite.
///
/// `update_turn` stores everything of the turn that changed: its header,
/// each new or changed provider call, each output message not yet stored,
/// and each tool call's new status. Tool statuses and messages are stored
/// before it returns, so a tool may run once `Started` is stored.
pub trait ConversationStore: Send + Sync {
    /// Stores a new conversation with its first messages, atomically (the
    /// spec's `createConversation` then `appendMessages`, as one write: a
    /// crash never leaves a conversation without its system prompt).
    ///
    /// # Errors
    /// [`Error::ConversationExists`](crate::Error::ConversationExists).
    fn create_conversation(
        &self,
        conversation: &Conversation,
        initial_messages: &[ConversationMessage],
    ) -> Result<()>;

    /// The conversation, if it exists.
    fn get_conversation(&self, id: ConversationId) -> Result<Option<Conversation>>;

    /// Replaces a conversation's fields.
    ///
    /// # Errors
    /// [`Error::NotAConversation`](crate::Error::NotAConversation).
    fn update_conversation(&self, conversation: &Conversation) -> Result<()>;

    /// Appends messages (their `conversation_id` is set to `id`); a message
    /// whose id is already stored is skipped.
    fn append_messages(&self, id: ConversationId, messages: &[ConversationMessage]) -> Result<()>;

    /// Messages by `created_at` (ties in append order), paged: the spec's
    /// default order. [`ConversationLog::messages`](crate::state::ConversationLog::messages)
    /// gives append order.
    fn get_messages(&self, id: ConversationId, page: Page) -> Result<Vec<ConversationMessage>>;

    /// The messages appended since the last turn took its input: what the
    /// next turn answers.
    fn unanswered_messages(&self, id: ConversationId) -> Result<Vec<ConversationMessage>>;

    /// Stores a new turn (as [`update_turn`](Self::update_turn) does).
    fn create_turn(&self, turn: &ConversationTurn) -> Result<()>;

    /// Stores what changed in a turn.
    ///
    /// # Errors
    /// [`Error::TurnNotFound`](crate::Error::TurnNotFound).
    fn update_turn(&self, turn: &ConversationTurn) -> Result<()>;

    /// The turn, if it exists.
    fn get_turn(&self, id: ConversationId, turn: TurnId) -> Result<Option<ConversationTurn>>;

    /// Turns by creation order, paged.
    fn list_turns(&self, id: ConversationId, page: Page) -> Result<Vec<ConversationTurn>>;

    /// Every conversation's id, oldest first.
    fn list_conversations(&self) -> Result<Vec<ConversationId>>;

    /// What may be sent to the provider: the leading system messages, the
    /// summary of the last compaction, and the last `window` messages (all
    /// when none) of those not compacted. Costs O(window), not O(history).
    fn history(&self, id: ConversationId, window: Option<usize>) -> Result<HistoryWindow>;

    /// Records a compaction (appends it; nothing is deleted).
    fn record_compaction(&self, id: ConversationId, record: &CompactionRecord) -> Result<()>;
}

/// What [`ConversationStore::history`] returns.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HistoryWindow {
    /// The leading system messages.
    pub system: Vec<ConversationMessage>,
    /// The summary sent in place of compacted messages, if any.
    pub summary: Option<String>,
    /// The most recent messages not compacted (the window), in the order
    /// they are sent: append order, except that a turn's output messages
    /// come right after its input even when a message was appended between
    /// them (an interrupted turn settled after new input came).
    pub messages: Vec<ConversationMessage>,
    /// How many messages are not compacted (the window's messages among them).
    pub sendable: usize,
}
