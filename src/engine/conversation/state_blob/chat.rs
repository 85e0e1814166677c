//! `chat_with_state`: one call of a conversation kept in a state blob, with
//! its tool loop and its compaction.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use serde_json::json;

use crate::engine::tool::{Tool, ToolContext};
use crate::error::{Error, Result};
use crate::event::conversation::{
    ConversationId, ConversationMessage, Metadata, TokenUsage, TurnId,
};
use crate::model::Role;
use crate::model::{ToolCallRecord, ToolStatus};

use super::super::adapter::{
    AgentContext, ChatInputMessage, ProviderAdapter, ProviderCallOptions, ProviderChatRequest,
    ProviderChatResult,
};
use super::super::compaction::{Compaction, CompactionRequest, Compactor, is_natural_stop};
use super::{
    DEFAULT_MAX_STATE_BYTES, Degradation, StateBlob, is_summary_message, load, summary_message,
    summary_text,
};

/// What [`chat_with_state`] sends and how (goaitools' chat options).
#[derive(Clone)]
pub struct StateChatOptions {
    /// The messages of this call, in order. Those before the first
    /// non-system message are the **leading system messages**: sent first,
    /// never stored (supply them on every call). The rest (user messages,
    /// and system messages after the first non-system one) are **new
    /// messages**: stored in order, after the state's. Default: none.
    pub messages: Vec<ConversationMessage>,
    /// The model. Default: empty (the adapter's choice).
    pub model: String,
    /// Request-level fields (`temperature`, `max_tokens`, ...). Default: none.
    pub parameters: Metadata,
    /// The tools the model may call, run in a loop: the assistant's calls
    /// run in order, their results are stored as tool messages, and the
    /// provider is called again. Default: none.
    pub tools: Vec<Arc<dyn Tool>>,
    /// Compacts the stored messages after a call that ended at a natural
    /// stop ([`is_natural_stop`](crate::conversation::is_natural_stop)).
    /// Default: none (the state grows).
    pub compactor: Option<Arc<dyn Compactor>>,
    /// Provider calls one `chat_with_state` may make (the tool loop's
    /// steps; at least 1). Default: 16.
    pub max_steps: u32,
    /// The largest state decoded. Default: [`DEFAULT_MAX_STATE_BYTES`].
    pub max_state_bytes: usize,
    /// The agent named in the adapter's call options. Default: `"state-chat"`.
    pub agent: String,
    /// Passed to the adapter as its call options' `metadata` (and the agent
    /// context's). Default: none.
    pub metadata: Metadata,
}

impl Default for StateChatOptions {
    fn default() -> Self {
        Self {
            messages: Vec::new(),
            model: String::new(),
            parameters: Metadata::new(),
            tools: Vec::new(),
            compactor: None,
            max_steps: 16,
            max_state_bytes: DEFAULT_MAX_STATE_BYTES,
            agent: "state-chat".into(),
            metadata: Metadata::new(),
        }
    }
}

impl fmt::Debug for StateChatOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let tools: Vec<&str> = self.tools.iter().map(|t| t.name()).collect();
        f.debug_struct("StateChatOptions")
            .field("messages", &self.messages)
            .field("model", &self.model)
            .field("parameters", &self.parameters)
            .field("tools", &tools)
            .field("compactor", &self.compactor.is_some())
            .field("max_steps", &self.max_steps)
            .field("max_state_bytes", &self.max_state_bytes)
            .field("agent", &self.agent)
            .field("metadata", &self.metadata)
            .finish()
    }
}

impl StateChatOptions {
    /// Options for `model`, the rest default.
    pub fn new(model: impl Into<String>) -> Self {
        Self {
            model: model.into(),
            ..Self::default()
        }
    }

    /// Adds a system message: a leading one if no other message came
    /// before it (not stored), else a stored one.
    pub fn system(self, text: impl Into<String>) -> Self {
        self.message(ConversationMessage::system(text))
    }

    /// Adds a user message.
    pub fn user(self, text: impl Into<String>) -> Self {
        self.message(ConversationMessage::user(text))
    }

    /// Adds a message.
    pub fn message(mut self, m: ConversationMessage) -> Self {
        self.messages.push(m);
        self
    }

    /// Adds a tool.
    pub fn tool(mut self, tool: Arc<dyn Tool>) -> Self {
        self.tools.push(tool);
        self
    }

    /// Sets the compactor.
    pub fn compactor(mut self, compactor: Arc<dyn Compactor>) -> Self {
        self.compactor = Some(compactor);
        self
    }

    /// The leading system messages: sent first, never stored.
    pub fn leading_system(&self) -> &[ConversationMessage] {
        &self.messages[..self.split()]
    }

    /// The new messages: stored, in order.
    pub fn new_messages(&self) -> &[ConversationMessage] {
        &self.messages[self.split()..]
    }

    fn split(&self) -> usize {
        self.messages
            .iter()
            .take_while(|m| m.role == Role::System)
            .count()
    }
}

/// What [`chat_with_state`] returns.
#[derive(Clone, Debug, PartialEq)]
pub struct StateChatResult {
    /// The provider's result of the last call: the final answer.
    pub response: ProviderChatResult,
    /// The new state, to store in place of the old.
    pub state: Vec<u8>,
    /// The number of messages the model has seen: every message of the
    /// new state (after a compaction, of what is left).
    pub processed_length: usize,
    /// Why the given state was discarded, if it was: the call then ran as
    /// the first of a fresh conversation.
    pub degraded: Option<Degradation>,
    /// What the compactor did, if it compacted.
    pub compaction: Option<Compaction>,
    /// The compactor's error, if it failed (the call still succeeded; the
    /// state is then not compacted).
    pub compaction_error: Option<String>,
}

impl StateChatResult {
    /// The text of the final answer's messages, joined with newlines.
    pub fn text(&self) -> String {
        let texts: Vec<String> = self.response.messages.iter().map(|m| m.text()).collect();
        texts.join("\n")
    }
}

/// One call of a conversation kept in `state` (goaitools' `ChatWithState`).
///
/// The state is decoded for `adapter.id()`; a state that does not decode
/// (invalid JSON, another version, another provider, a corrupted message,
/// over `options.max_state_bytes`) is discarded with a `tracing::warn!`, and
/// the call runs as the first of a fresh conversation, `degraded` saying
/// why. No state, or empty bytes, is a fresh conversation too.
///
/// The provider receives the options' leading system messages, then the
/// state's messages, then the options' new messages. Its answer is stored;
/// while the answer calls tools, each runs (an unknown tool, or a tool's
/// `Err`, gives its error text as the result), its result is stored as a
/// tool message, and the provider is called again with everything. The
/// messages of this call (answers and tool results) carry one new
/// [`TurnId`]; the assistant's tool calls are stored with their final
/// status (completed or failed).
///
/// After the last call, if it ended at a natural stop
/// ([`is_natural_stop`](crate::conversation::is_natural_stop): OpenAI
/// `stop`, Anthropic `end_turn` or `stop_sequence`; never `length`,
/// `max_tokens` or no reason) and a compactor is set, the compactor
/// sees the stored messages (a summary message at their front, see
/// [`SUMMARY_MARKER`](super::SUMMARY_MARKER), as the request's `summary`),
/// the leading system messages and the last call's usage. A compaction
/// really drops messages from the state: `state_messages[..keep_from]` go,
/// and a system message with the compaction's summary, if it wrote one,
/// goes first in their place (an earlier summary not carried over by the
/// compaction is dropped, as in a journal, where the last compaction's
/// summary is the one sent). Never during the tool loop. Each compaction
/// is logged: a `tracing::info!` with the provider, the strategy and the
/// numbers of messages dropped and kept.
///
/// # Errors
/// [`Error::ProviderFailed`] when a provider call fails, or when
/// `max_steps` calls were made and the model still calls tools. The given
/// state is then still the conversation's (nothing of this call is kept).
pub fn chat_with_state(
    adapter: &dyn ProviderAdapter,
    state: Option<&[u8]>,
    options: &StateChatOptions,
) -> Result<StateChatResult> {
    let provider = adapter.id().to_owned();
    let (mut blob, degraded) = load(state, &provider, options.max_state_bytes);
    let leading = options.leading_system();
    blob.messages.extend_from_slice(options.new_messages());
    let turn = TurnId::new();
    let call_options = call_options(adapter, options, turn);
    let specs: Vec<_> = options.tools.iter().map(|t| t.spec()).collect();
    let max_steps = options.max_steps.max(1);
    let mut steps = 0;
    let response = loop {
        if steps >= max_steps {
            return Err(Error::ProviderFailed {
                provider,
                message: format!(
                    "stopped after {max_steps} provider calls: the model still calls tools (max_steps)"
                ),
            });
        }
        steps += 1;
        let request = ProviderChatRequest {
            messages: leading
                .iter()
                .chain(&blob.messages)
                .map(ChatInputMessage::from)
                .collect(),
            model: options.model.clone(),
            parameters: options.parameters.clone(),
            tools: specs.clone(),
        };
        let result =
            adapter
                .send_chat(&request, &call_options)
                .map_err(|e| Error::ProviderFailed {
                    provider: provider.clone(),
                    message: e.message,
                })?;
        let first = blob.messages.len();
        let mut calls: Vec<ToolCallRecord> = Vec::new();
        for m in &result.messages {
            let mut m = m.clone();
            m.turn_id = Some(turn);
            calls.extend(m.tool_calls.iter().cloned());
            blob.messages.push(m);
        }
        if calls.is_empty() {
            break result;
        }
        let mut statuses = BTreeMap::new();
        for call in &calls {
            let (status, m) = run_tool(&options.tools, call, turn);
            statuses.insert(call.call_id.clone(), status);
            blob.messages.push(m);
        }
        for m in &mut blob.messages[first..] {
            for c in &mut m.tool_calls {
                if let Some(s) = statuses.get(&c.call_id) {
                    c.status = *s;
                }
            }
        }
    };
    let mut compaction = None;
    let mut compaction_error = None;
    if let (Some(compactor), true) = (
        &options.compactor,
        is_natural_stop(&response.response_metadata),
    ) {
        let usage = response.usage.as_ref();
        match compact(&mut blob, &**compactor, leading, usage) {
            Ok(done) => compaction = done,
            Err(e) => {
                tracing::warn!(provider, error = %e, "compaction of the conversation state failed");
                compaction_error = Some(e.to_string());
            }
        }
    }
    blob.processed_length = blob.messages.len();
    Ok(StateChatResult {
        response,
        state: blob.encode(),
        processed_length: blob.processed_length,
        degraded,
        compaction,
        compaction_error,
    })
}

/// The options an adapter is told about a call of `chat_with_state`: no
/// conversation (the nil id), the call's turn, the agent, and the
/// `ai.*` extensions the engine sets.
fn call_options(
    adapter: &dyn ProviderAdapter,
    options: &StateChatOptions,
    turn: TurnId,
) -> ProviderCallOptions {
    let run_id = format!("state:{turn}");
    let mut extensions = Metadata::new();
    extensions.insert("ai.provider".into(), json!(adapter.id()));
    extensions.insert("ai.model".into(), json!(options.model));
    extensions.insert("ai.request_type".into(), json!("chat"));
    extensions.insert("ai.streaming".into(), json!(false));
    let labels = [
        ("turnId", turn.to_string()),
        ("provider", adapter.id().to_owned()),
        ("model", options.model.clone()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    ProviderCallOptions {
        conversation_id: ConversationId::from_bytes([0; 16]),
        turn_id: turn,
        agent: options.agent.clone(),
        agent_context: AgentContext {
            agent: options.agent.clone(),
            run_id: run_id.clone(),
            labels,
            metadata: options.metadata.clone(),
            correlation_id: run_id,
            parent_correlation_id: None,
        },
        extensions,
        metadata: options.metadata.clone(),
    }
}

/// Runs `call` with the tool of its name: its status and result message.
fn run_tool(
    tools: &[Arc<dyn Tool>],
    call: &ToolCallRecord,
    turn: TurnId,
) -> (ToolStatus, ConversationMessage) {
    let outcome = match tools.iter().find(|t| t.name() == call.name) {
        None => Err(format!("unknown tool {:?}", call.name)),
        Some(tool) => tool.call(
            &call.arguments,
            &ToolContext {
                call_id: call.call_id.clone(),
                is_resume: false,
                evaluation_id: turn.as_evaluation(),
            },
        ),
    };
    let (status, text) = match outcome {
        Ok(out) => (ToolStatus::Completed, out),
        Err(err) => (ToolStatus::Failed, err),
    };
    let mut m = ConversationMessage::new(Role::Tool, text);
    m.turn_id = Some(turn);
    m.name = Some(call.name.clone());
    m.tool_call_id = Some(call.call_id.clone());
    (status, m)
}

/// Asks `compactor` about `blob`'s messages and applies its answer: the
/// messages before `keep_from` are dropped, the summary (if any) put first.
fn compact(
    blob: &mut StateBlob,
    compactor: &dyn Compactor,
    leading: &[ConversationMessage],
    usage: Option<&TokenUsage>,
) -> Result<Option<Compaction>> {
    let offset = usize::from(blob.messages.first().is_some_and(is_summary_message));
    let summary = blob.messages[..offset].first().map(summary_text);
    let rest = &blob.messages[offset..];
    let request = CompactionRequest {
        state_messages: rest,
        leading_system: leading,
        summary: summary.as_deref(),
        last_usage: usage,
        provider: &blob.provider,
    };
    let Some(done) = compactor.compact(&request)? else {
        return Ok(None);
    };
    let rest_len = rest.len();
    if done.keep_from > rest_len {
        return Ok(None);
    }
    let kept = blob.messages.split_off(offset + done.keep_from);
    blob.messages = done
        .summary
        .as_deref()
        .map(summary_message)
        .into_iter()
        .collect();
    blob.messages.extend(kept);
    blob.prune_unknown();
    tracing::info!(
        provider = %blob.provider,
        strategy = %done.strategy,
        dropped = done.keep_from,
        kept = rest_len - done.keep_from,
        summary = done.summary.is_some(),
        "compacted the conversation state"
    );
    Ok(Some(done))
}
