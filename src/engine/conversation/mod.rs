//! The conversation engine (agent-conversation-core spec): conversations,
//! turns with a status lifecycle, provider call records with correlation
//! ids, stores, provider adapters, history builder, turn planner and hooks.
//!
//! Built on the journal: a conversation is a session, and every change the
//! engine makes is an appended event (a turn's status change is a new
//! record of the turn, never an update in place), so a crash in the middle
//! of a turn is visible ([`ConversationEngine::interrupted_turns`]) and
//! recoverable ([`ConversationEngine::resume_turn`]) like a crash in the
//! middle of a tool.
//!
//! ```
//! use std::sync::Arc;
//! use agent_journal::Journal;
//! use agent_journal::conversation::{
//!     ConversationEngine, ConversationEngineConfig, ConversationMessage, CreateConversation,
//!     JournalConversationStore, RunTurn, ScriptedAdapter, ScriptedReply, TurnStatus,
//! };
//!
//! # fn main() -> agent_journal::Result<()> {
//! let store = Arc::new(JournalConversationStore::new(Journal::memory()));
//! let adapter = Arc::new(ScriptedAdapter::new(vec![vec![ScriptedReply::text("Hello!")]]));
//! let engine = ConversationEngine::new(
//!     ConversationEngineConfig::new("greeter", store).provider(adapter, "scripted-1"),
//! );
//! let conversation = engine.create_conversation(CreateConversation {
//!     initial_messages: vec![ConversationMessage::user("Hi")],
//!     ..Default::default()
//! })?;
//! let turn = engine.run_turn(conversation.id, RunTurn::default())?;
//! assert_eq!(turn.status, TurnStatus::Succeeded);
//! assert_eq!(turn.output_messages[0].text(), "Hello!");
//! # Ok(())
//! # }
//! ```

// A provider error carries the provider's whole story (message, code,
// status, category, raw body, request id); it comes once per failed network
// call, where boxing it would only make adapters harder to write.
#![allow(clippy::result_large_err)]

mod adapter;
mod compaction;
mod engine;
#[cfg(feature = "http")]
pub mod http;
mod interrupted;
mod journal_store;
mod memory;
mod order;
mod plan;
mod records;
mod resume;
mod scripted;
pub mod state_blob;
mod step;
mod store;

pub use crate::event::conversation::{
    CallOutcome, CompactionRecord, Conversation, ConversationEvent, ConversationId,
    ConversationMessage, Metadata, ProviderCallRecord, ProviderOperation, ToolSpec, TurnError,
    TurnId, TurnRecord, TurnStatus,
};
pub use adapter::{
    AgentContext, ChatInputMessage, ProviderAdapter, ProviderCallOptions, ProviderChatRequest,
    ProviderChatResult, ProviderError, ProviderStreamChunk,
};
pub use compaction::{
    Compaction, CompactionRequest, CompactionStrategy, CompactionTrigger, Compactor,
    CompositeCompactor, CompositeTrigger, MessageLimitCompactor, SUMMARY_INSTRUCTIONS,
    SplitCompactor, SummarizingStrategy, TokenLimitCompactor, advance_to_first_user_message,
    compaction_boundary, is_natural_stop,
};
pub use engine::{
    ConversationEngine, ConversationEngineConfig, CreateConversation, InterruptedTurns, RunTurn,
};
pub use journal_store::{CONVERSATION_LABEL, JournalConversationStore};
pub use memory::InMemoryConversationStore;
pub use plan::{
    ConversationHooks, DefaultHistoryBuilder, HistoryBuilder, HistoryContext, PlanInput,
    PlannedTurn, SENT_SUMMARY, SUMMARY_PREFIX, TurnPlanner, approximate_tokens, rebuild_request,
};
pub use resume::{ANSWERED_INTERRUPTED, CANCELLED_TOOL, INTERRUPTED_CALL, ResumeTurn};
pub use scripted::{ScriptedAdapter, ScriptedReply};
pub use store::{ConversationStore, ConversationTurn, HistoryWindow, Order, Page};
