//! The pluggable parts of a turn (the spec's sections 7.2 to 7.4): which
//! messages are sent (`HistoryBuilder`), to which provider and model
//! (`TurnPlanner`), and what is told to whom along the way (`ConversationHooks`);
//! and the request of a past call rebuilt as the default history builder
//! built it (`rebuild_request`).

use crate::error::Error;
use crate::event::conversation::{Conversation, ConversationMessage, Metadata, TurnId};
use crate::model::Role;
use crate::state::ConversationLog;

use super::adapter::{ChatInputMessage, ProviderChatRequest, ProviderStreamChunk};
use super::store::ConversationTurn;

/// What a history builder sees.
#[derive(Clone, Copy, Debug)]
pub struct HistoryContext<'a> {
    /// The conversation.
    pub conversation: &'a Conversation,
    /// The conversation's leading system messages (before its first other
    /// message), whatever the window.
    pub system: &'a [ConversationMessage],
    /// The summary of the compacted messages, sent in their place.
    pub summary: Option<&'a str>,
    /// The most recent messages, oldest first: all of them, or the
    /// builder's [`window`](HistoryBuilder::window).
    pub messages: &'a [ConversationMessage],
    /// The turn being run.
    pub next_turn_id: TurnId,
    /// Its agent.
    pub agent: &'a str,
}

/// Chooses and shapes the messages sent for a turn (the spec's `HistoryBuilder`).
pub trait HistoryBuilder: Send + Sync {
    /// The number of most recent messages it needs; all when none (the
    /// default). The engine reads only these, so a turn's cost does not
    /// grow with the conversation's length beyond the window.
    fn window(&self) -> Option<usize> {
        None
    }

    /// The messages to send.
    fn build_history(&self, ctx: &HistoryContext<'_>) -> Vec<ChatInputMessage>;
}

/// The default history: every message not compacted, or the most recent
/// ones within a count and an approximate token budget (4 characters a
/// token), always after the leading system messages and the compaction's
/// summary (as a system message, [`SUMMARY_PREFIX`] then the summary), never
/// starting inside a tool exchange (a tool result whose call was cut off is
/// dropped with it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DefaultHistoryBuilder {
    /// At most this many messages besides the leading system ones.
    pub max_messages: Option<usize>,
    /// At most about this many tokens besides the leading system messages.
    pub max_tokens: Option<u64>,
}

/// What starts the system message that carries a compaction's summary.
pub const SUMMARY_PREFIX: &str = "Summary of the earlier conversation:\n";

/// The key, in a provider call's `request_metadata`, of the compaction
/// summary the request carried (when the history had one), so the request
/// can be rebuilt ([`rebuild_request`](super::rebuild_request)).
pub const SENT_SUMMARY: &str = "history_summary";

/// About how many tokens a message takes: 4 characters a token, plus 4.
pub fn approximate_tokens(m: &ChatInputMessage) -> u64 {
    let args: usize = m.tool_calls.iter().map(|c| c.arguments.len()).sum();
    (m.text().len() + args) as u64 / 4 + 4
}

impl HistoryBuilder for DefaultHistoryBuilder {
    fn window(&self) -> Option<usize> {
        self.max_messages
            .map(|n| n + 1)
            .filter(|_| self.max_tokens.is_none())
    }

    fn build_history(&self, ctx: &HistoryContext<'_>) -> Vec<ChatInputMessage> {
        let system_ids: std::collections::BTreeSet<_> = ctx.system.iter().map(|m| m.id).collect();
        let rest: Vec<&ConversationMessage> = ctx
            .messages
            .iter()
            .filter(|m| !system_ids.contains(&m.id))
            .collect();
        let mut start = rest.len() - self.max_messages.unwrap_or(rest.len()).min(rest.len());
        if let Some(budget) = self.max_tokens {
            let mut used = 0u64;
            let mut k = rest.len();
            while k > start {
                let t = approximate_tokens(&ChatInputMessage::from(rest[k - 1]));
                if used + t > budget {
                    break;
                }
                used += t;
                k -= 1;
            }
            start = k;
        }
        while rest.get(start).is_some_and(|m| m.role == Role::Tool) {
            start += 1;
        }
        let mut out: Vec<ChatInputMessage> =
            ctx.system.iter().map(ChatInputMessage::from).collect();
        if let Some(summary) = ctx.summary {
            let m = ConversationMessage::system(format!("{SUMMARY_PREFIX}{summary}"));
            let mut m = ChatInputMessage::from(&m);
            m.source = None;
            out.push(m);
        }
        out.extend(rest[start..].iter().copied().map(ChatInputMessage::from));
        out
    }
}

/// What a planner sees (the spec's `PlanTurnInput`).
#[derive(Clone, Copy, Debug)]
pub struct PlanInput<'a> {
    /// The conversation.
    pub conversation: &'a Conversation,
    /// The messages the engine read (the history builder's window).
    pub messages: &'a [ConversationMessage],
    /// The agent.
    pub agent: &'a str,
    /// The caller's hints (`"provider"`, `"model"`, anything).
    pub hints: &'a Metadata,
    /// The configured providers, in id order.
    pub providers: &'a [String],
}

/// A planner's decision (the spec's `PlannedTurn`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedTurn {
    /// The provider id.
    pub provider: String,
    /// The model.
    pub model: String,
    /// Request-level fields (`temperature`, `max_tokens`, `tool_choice`).
    pub parameters: Metadata,
}

/// Chooses provider, model and parameters for a turn (the spec's `TurnPlanner`).
pub trait TurnPlanner: Send + Sync {
    /// The plan; an error fails the turn.
    fn plan_turn(&self, input: &PlanInput<'_>) -> Result<PlannedTurn, Error>;
}

/// Instrumentation and side effects around turns (the spec's
/// `ConversationHooks`). Every method defaults to doing nothing.
pub trait ConversationHooks: Send + Sync {
    /// A conversation was created (after it is stored).
    fn on_conversation_created(&self, _conversation: &Conversation) {}
    /// A turn is about to make its first provider call (it is stored as running).
    fn before_turn(&self, _turn: &ConversationTurn, _conversation: &Conversation) {}
    /// A chunk of a streamed response arrived.
    fn on_chunk(&self, _turn: &ConversationTurn, _chunk: &ProviderStreamChunk) {}
    /// A turn succeeded (after it is stored as succeeded).
    fn after_turn_success(&self, _turn: &ConversationTurn, _conversation: &Conversation) {}
    /// A turn failed (after it is stored as failed); `error` is what
    /// `run_turn` returns.
    fn after_turn_error(
        &self,
        _turn: &ConversationTurn,
        _error: &Error,
        _conversation: &Conversation,
    ) {
    }
}

/// The request of provider call `call` of the conversation in `log`, rebuilt
/// from what its record keeps: the model, the parameters and tools as sent,
/// and the messages it was built from (`sent_messages`), with the summary
/// it carried after the leading system messages, as the default history
/// builder places it. Exact for the default history builder; a custom
/// builder that rewrites messages sent something else. `None` when there is
/// no such call.
pub fn rebuild_request(log: &ConversationLog, call: uuid::Uuid) -> Option<ProviderChatRequest> {
    let record = log.call(call)?;
    let mut messages: Vec<ChatInputMessage> = record
        .sent_messages
        .iter()
        .filter_map(|id| log.message(*id))
        .map(ChatInputMessage::from)
        .collect();
    if let Some(summary) = record
        .request_metadata
        .get(SENT_SUMMARY)
        .and_then(|v| v.as_str())
    {
        let at = messages
            .iter()
            .take_while(|m| m.role == Role::System)
            .count();
        let text = format!("{SUMMARY_PREFIX}{summary}");
        let mut m = ChatInputMessage::from(&ConversationMessage::system(text));
        m.source = None;
        messages.insert(at, m);
    }
    Some(ProviderChatRequest {
        messages,
        model: record.model.clone(),
        parameters: record.parameters.clone(),
        tools: record.tools.clone(),
    })
}
