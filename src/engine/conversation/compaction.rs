//! Compaction (goaitools' "Conversation History Compaction"): what is sent
//! to the provider shrinks; nothing is deleted. A compactor returns where
//! the history sent from now on starts (always a user message that no tool
//! exchange spans, so a tool exchange is never cut; see
//! [`compaction_boundary`]) and an optional summary of what it drops; the
//! engine records that as a `HistoryCompacted` event.

use std::collections::HashMap;
use std::sync::Arc;

use crate::error::Result;
use crate::event::conversation::{ConversationMessage, Metadata, TokenUsage};
use crate::model::CallId;
use crate::model::Role;

use super::adapter::{ChatInputMessage, ProviderAdapter, ProviderCallOptions, ProviderChatRequest};
use super::plan::approximate_tokens;

/// What a compactor sees (goaitools' `CompactionRequest`).
#[derive(Clone, Copy, Debug)]
pub struct CompactionRequest<'a> {
    /// The messages sent now, without the leading system messages.
    pub state_messages: &'a [ConversationMessage],
    /// The leading system messages (context; never compacted).
    pub leading_system: &'a [ConversationMessage],
    /// The summary sent now in place of earlier compacted messages.
    pub summary: Option<&'a str>,
    /// The token usage the last provider call reported.
    pub last_usage: Option<&'a TokenUsage>,
    /// The provider id of the last call.
    pub provider: &'a str,
}

/// A compactor's decision: send `state_messages[keep_from..]` from now on
/// (`keep_from` > 0, at a user message), with `summary` in place of the rest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Compaction {
    /// The index, in the request's `state_messages`, of the first message kept.
    pub keep_from: usize,
    /// A summary of the messages dropped (and of the summary they had), if any.
    pub summary: Option<String>,
    /// The strategy's name, recorded with the compaction.
    pub strategy: String,
}

/// Decides whether and how to compact (goaitools' `Compactor`).
pub trait Compactor: Send + Sync {
    /// `None` when nothing is to be compacted (under the limits, or no
    /// user-message boundary to cut at).
    ///
    /// # Errors
    /// A summarising compactor's provider error; the engine then records no
    /// compaction and the turn still succeeds.
    fn compact(&self, request: &CompactionRequest<'_>) -> Result<Option<Compaction>>;
}

/// When to compact (goaitools' `CompactionTrigger`).
pub trait CompactionTrigger: Send + Sync {
    /// True when the history should be compacted now.
    fn should_compact(&self, request: &CompactionRequest<'_>) -> bool;
}

/// How to compact (goaitools' `CompactionStrategy`): asked only when a
/// trigger fired.
pub trait CompactionStrategy: Send + Sync {
    /// Where to cut; `None` when no boundary allows a cut.
    ///
    /// # Errors
    /// As [`Compactor::compact`].
    fn apply(&self, request: &CompactionRequest<'_>) -> Result<Option<Compaction>>;
}

/// True when a provider call ended at a **natural stop**, the only ending
/// after which a conversation is compacted (goaitools': "when finish
/// reason is `stop`"), by the engine and by
/// [`chat_with_state`](super::state_blob::chat_with_state) alike.
///
/// `metadata` is a call's response metadata, as the adapters fill it:
///
/// - OpenAI-compatible (`finish_reason`): only `"stop"`.
/// - Anthropic (`stop_reason`): `"end_turn"` and `"stop_sequence"`. A
///   caller's stop sequence counts because OpenAI reports the same ending
///   as `"stop"` too: the answer ended where the caller said it ends, so
///   the two providers agree.
///
/// Everything else is not a stop: `length` and `max_tokens` (the answer was
/// cut), `tool_calls` and `tool_use` (a tool loop goes on),
/// `content_filter`, `refusal`, `pause_turn`, any other value, a `null`
/// reason and no reason at all (an adapter that reports none never
/// triggers a compaction; the [`ScriptedAdapter`](super::ScriptedAdapter)
/// reports `"stop"` for an answer without calls).
pub fn is_natural_stop(metadata: &Metadata) -> bool {
    let reason = |key: &str| metadata.get(key).and_then(serde_json::Value::as_str);
    matches!(reason("finish_reason"), Some("stop"))
        || matches!(reason("stop_reason"), Some("end_turn" | "stop_sequence"))
}

/// Which indices of `messages` a history may start at: a user message
/// that no tool exchange spans (no tool result at or after it answers a
/// call made before it). Cutting anywhere else would split an assistant
/// message with calls from its results, or send a result whose call is
/// gone, which OpenAI and Anthropic reject.
fn boundaries(messages: &[ConversationMessage]) -> Vec<bool> {
    let mut made: HashMap<&CallId, usize> = HashMap::new();
    // +1 where a span (call at i, result at j) starts covering (i + 1),
    // -1 where it stops (j + 1): the running sum counts the spans over k.
    let mut spans = vec![0i64; messages.len() + 1];
    for (j, m) in messages.iter().enumerate() {
        if m.role == Role::Tool
            && let Some(&i) = m.tool_call_id.as_ref().and_then(|id| made.get(id))
        {
            spans[i + 1] += 1;
            spans[j + 1] -= 1;
        }
        for c in &m.tool_calls {
            made.insert(&c.call_id, j);
        }
    }
    let mut open = 0;
    messages
        .iter()
        .enumerate()
        .map(|(k, m)| {
            open += spans[k];
            open == 0 && m.role == Role::User
        })
        .collect()
}

/// The index of the first user message at or after `from` that no tool
/// exchange spans, if any (goaitools' `AdvanceToFirstUserMessage`): a
/// place compaction may cut. A user message normally never sits inside a
/// tool exchange (an assistant message with calls, then its results); one
/// that does (a history written by hand, say) is skipped.
pub fn advance_to_first_user_message(
    messages: &[ConversationMessage],
    from: usize,
) -> Option<usize> {
    let ok = boundaries(messages);
    (from..messages.len()).find(|&i| ok[i])
}

/// Where a compactor that would drop `messages[..from]` cuts: the first
/// user-message boundary at or after `from`
/// ([`advance_to_first_user_message`]); when there is none (the messages
/// from `from` on are one long tool loop: a user message, then many
/// assistant messages with calls and their results), the latest boundary
/// before `from`, so the last turn is kept whole. `None` when that is the
/// start (nothing can be dropped) or the messages hold no boundary.
///
/// goaitools' `AdvanceToFirstUserMessage` returns an empty history in the
/// second case, which drops the turn just answered (its question and its
/// tool results) from what the model sees next; keeping the last turn
/// bounds the history as well: after a cut, at most `max(len - from,
/// messages from the latest boundary on)` messages are left.
pub fn compaction_boundary(messages: &[ConversationMessage], from: usize) -> Option<usize> {
    let ok = boundaries(messages);
    let k = (from..messages.len())
        .find(|&i| ok[i])
        .or_else(|| (0..from.min(messages.len())).rev().find(|&i| ok[i]))?;
    (k > 0).then_some(k)
}

/// A cut at [`compaction_boundary`]`(messages, from)`, if it drops anything.
fn cut(messages: &[ConversationMessage], from: usize, strategy: &str) -> Option<Compaction> {
    let k = compaction_boundary(messages, from)?;
    Some(Compaction {
        keep_from: k,
        summary: None,
        strategy: strategy.to_owned(),
    })
}

/// Keeps the last `max_messages` messages (fewer, to start at a user
/// message). Trigger: more than `max_messages` are sent.
///
/// When the last `max_messages` hold no user message (turns of many tool
/// calls, or one tool loop longer than the limit), it keeps the last turn
/// whole, from its user message ([`compaction_boundary`]): so after a
/// compaction at most `max(max_messages, the last turn's length)` messages
/// are left, and never a tool result without its call. goaitools keeps
/// nothing in that case.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MessageLimitCompactor {
    /// The most messages kept (leading system messages aside).
    pub max_messages: usize,
}

impl CompactionTrigger for MessageLimitCompactor {
    fn should_compact(&self, r: &CompactionRequest<'_>) -> bool {
        r.state_messages.len() > self.max_messages
    }
}

impl CompactionStrategy for MessageLimitCompactor {
    fn apply(&self, r: &CompactionRequest<'_>) -> Result<Option<Compaction>> {
        let from = r.state_messages.len().saturating_sub(self.max_messages);
        Ok(cut(r.state_messages, from, "message_limit"))
    }
}

impl Compactor for MessageLimitCompactor {
    fn compact(&self, r: &CompactionRequest<'_>) -> Result<Option<Compaction>> {
        if !self.should_compact(r) {
            return Ok(None);
        }
        self.apply(r)
    }
}

/// Drops the oldest messages once the provider reports more than
/// `max_tokens` (input plus output of the last call), down to about
/// `target_tokens` (default: 75% of the maximum). The tokens of each
/// message are the reported total shared out in proportion to each
/// message's approximate size. The cut follows [`compaction_boundary`]:
/// when the target is reached only inside the last turn, the last turn is
/// kept whole.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TokenLimitCompactor {
    /// Compact above this many tokens.
    pub max_tokens: u64,
    /// Compact down to this many; default 75% of `max_tokens`.
    pub target_tokens: Option<u64>,
}

impl TokenLimitCompactor {
    fn used(r: &CompactionRequest<'_>) -> Option<u64> {
        r.last_usage.map(|u| u.total())
    }

    /// The target: given, or 75% of the maximum.
    pub fn target(&self) -> u64 {
        self.target_tokens
            .unwrap_or(self.max_tokens / 4 * 3 + self.max_tokens % 4 * 3 / 4)
    }
}

impl CompactionTrigger for TokenLimitCompactor {
    fn should_compact(&self, r: &CompactionRequest<'_>) -> bool {
        Self::used(r).is_some_and(|used| used > self.max_tokens)
    }
}

impl CompactionStrategy for TokenLimitCompactor {
    fn apply(&self, r: &CompactionRequest<'_>) -> Result<Option<Compaction>> {
        let Some(used) = Self::used(r) else {
            return Ok(None);
        };
        let size = |m: &ConversationMessage| approximate_tokens(&ChatInputMessage::from(m));
        let fixed: u64 = r.leading_system.iter().map(size).sum::<u64>()
            + r.summary.map_or(0, |s| s.len() as u64 / 4 + 4);
        let sizes: Vec<u64> = r.state_messages.iter().map(size).collect();
        let estimate: u64 = fixed + sizes.iter().sum::<u64>();
        // Scale the estimate to what the provider reported.
        let scaled = |approx: u64| approx.saturating_mul(used) / estimate.max(1);
        let target = self.target();
        let mut kept = scaled(estimate);
        let mut from = 0;
        while from < sizes.len() && kept > target {
            kept = kept.saturating_sub(scaled(sizes[from]));
            from += 1;
        }
        Ok(cut(r.state_messages, from, "token_limit"))
    }
}

impl Compactor for TokenLimitCompactor {
    fn compact(&self, r: &CompactionRequest<'_>) -> Result<Option<Compaction>> {
        if !self.should_compact(r) {
            return Ok(None);
        }
        self.apply(r)
    }
}

/// Tries each compactor in order; the first that compacts wins: compacts
/// if any limit is exceeded.
#[derive(Clone, Default)]
pub struct CompositeCompactor {
    /// The compactors, in order.
    pub compactors: Vec<Arc<dyn Compactor>>,
}

impl Compactor for CompositeCompactor {
    fn compact(&self, r: &CompactionRequest<'_>) -> Result<Option<Compaction>> {
        for c in &self.compactors {
            if let Some(done) = c.compact(r)? {
                return Ok(Some(done));
            }
        }
        Ok(None)
    }
}

/// Fires when any of its triggers fires.
#[derive(Clone, Default)]
pub struct CompositeTrigger {
    /// The triggers.
    pub triggers: Vec<Arc<dyn CompactionTrigger>>,
}

impl CompactionTrigger for CompositeTrigger {
    fn should_compact(&self, r: &CompactionRequest<'_>) -> bool {
        self.triggers.iter().any(|t| t.should_compact(r))
    }
}

/// A trigger (when) with a strategy (how).
#[derive(Clone)]
pub struct SplitCompactor {
    /// When.
    pub trigger: Arc<dyn CompactionTrigger>,
    /// How.
    pub strategy: Arc<dyn CompactionStrategy>,
}

impl Compactor for SplitCompactor {
    fn compact(&self, r: &CompactionRequest<'_>) -> Result<Option<Compaction>> {
        if !self.trigger.should_compact(r) {
            return Ok(None);
        }
        self.strategy.apply(r)
    }
}

/// The default instructions of [`SummarizingStrategy`].
pub const SUMMARY_INSTRUCTIONS: &str = "Summarise the conversation below for yourself, to continue it later: \
keep every fact, decision, name, number and open question; drop pleasantries. Answer with the summary only.";

/// Cuts where `cut` says, then asks a provider to summarise what is
/// dropped (with the earlier summary, if any); the summary is recorded
/// with the compaction and sent in place of the dropped messages.
#[derive(Clone)]
pub struct SummarizingStrategy {
    /// Where to cut (a [`MessageLimitCompactor`], say).
    pub cut: Arc<dyn CompactionStrategy>,
    /// The provider that writes the summary.
    pub adapter: Arc<dyn ProviderAdapter>,
    /// Its model.
    pub model: String,
    /// The instructions (default [`SUMMARY_INSTRUCTIONS`]).
    pub instructions: String,
    /// The options passed to the adapter.
    pub options: ProviderCallOptions,
}

impl CompactionStrategy for SummarizingStrategy {
    fn apply(&self, r: &CompactionRequest<'_>) -> Result<Option<Compaction>> {
        let Some(mut done) = self.cut.apply(r)? else {
            return Ok(None);
        };
        let mut transcript = String::new();
        if let Some(s) = r.summary {
            transcript.push_str(&format!("(summary of what came before) {s}\n"));
        }
        for m in &r.state_messages[..done.keep_from] {
            transcript.push_str(&format!("{}: {}\n", m.role.as_str(), m.text()));
            for c in &m.tool_calls {
                transcript.push_str(&format!("  calls {}({})\n", c.name, c.arguments));
            }
        }
        let request = ProviderChatRequest {
            messages: vec![
                ChatInputMessage::from(&ConversationMessage::system(self.instructions.clone())),
                ChatInputMessage::from(&ConversationMessage::user(transcript)),
            ],
            model: self.model.clone(),
            parameters: Metadata::new(),
            tools: Vec::new(),
        };
        let result = self
            .adapter
            .send_chat(&request, &self.options)
            .map_err(|e| crate::error::Error::ProviderFailed {
                provider: self.adapter.id().to_owned(),
                message: e.message,
            })?;
        let text: Vec<String> = result.messages.iter().map(|m| m.text()).collect();
        done.summary = Some(text.join("\n"));
        done.strategy = format!("summary({})", done.strategy);
        Ok(Some(done))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ToolCallRecord;

    fn call(ids: &[&str]) -> ConversationMessage {
        let mut m = ConversationMessage::assistant("");
        m.tool_calls = ids
            .iter()
            .map(|id| ToolCallRecord::new(*id, "t", "{}"))
            .collect();
        m
    }

    fn result(id: &str) -> ConversationMessage {
        let mut m = ConversationMessage::new(Role::Tool, "r");
        m.tool_call_id = Some(CallId(id.into()));
        m
    }

    /// A turn: a user message, `loops` tool round trips, an answer.
    fn turn(n: usize, loops: usize) -> Vec<ConversationMessage> {
        let mut out = vec![ConversationMessage::user(format!("u{n}"))];
        for l in 0..loops {
            let id = format!("c{n}_{l}");
            out.push(call(&[&id]));
            out.push(result(&id));
        }
        out.push(ConversationMessage::assistant(format!("a{n}")));
        out
    }

    #[test]
    fn a_tool_loop_longer_than_the_limit_keeps_the_last_turn_whole() {
        // Turns of 5 messages (2 loops), limit 4: the last 4 hold no user message.
        let m: Vec<_> = (0..3).flat_map(|n| turn(n, 2)).collect();
        let c = MessageLimitCompactor { max_messages: 4 };
        let r = CompactionRequest {
            state_messages: &m,
            leading_system: &[],
            summary: None,
            last_usage: None,
            provider: "p",
        };
        let done = c.compact(&r).expect("ok").expect("compacts");
        assert_eq!(done.keep_from, 12);
        assert_eq!(m[12].text(), "u2");
        // Where a user message of the last N exists, the cut is still there.
        assert_eq!(compaction_boundary(&m, 5), Some(6));
        // Nothing before the only boundary: nothing to drop.
        assert_eq!(compaction_boundary(&turn(0, 9), 10), None);
    }

    #[test]
    fn a_user_message_inside_a_tool_exchange_is_no_boundary() {
        // u0, call c, u1 (misplaced), result c, a, u2, a
        let m = vec![
            ConversationMessage::user("u0"),
            call(&["c"]),
            ConversationMessage::user("u1"),
            result("c"),
            ConversationMessage::assistant("a"),
            ConversationMessage::user("u2"),
            ConversationMessage::assistant("a"),
        ];
        assert_eq!(advance_to_first_user_message(&m, 1), Some(5));
        assert_eq!(compaction_boundary(&m, 6), Some(5));
        assert_eq!(compaction_boundary(&m[..5], 3), None);
    }

    #[test]
    fn the_token_limit_keeps_the_last_turn_when_its_target_lies_inside_it() {
        let m: Vec<_> = (0..2).flat_map(|n| turn(n, 6)).collect();
        let c = TokenLimitCompactor {
            max_tokens: 10,
            target_tokens: Some(1),
        };
        let usage = TokenUsage {
            input_tokens: 1000,
            ..Default::default()
        };
        let r = CompactionRequest {
            state_messages: &m,
            leading_system: &[],
            summary: None,
            last_usage: Some(&usage),
            provider: "p",
        };
        let done = c.compact(&r).expect("ok").expect("compacts");
        assert_eq!(m[done.keep_from].text(), "u1");
    }
}
