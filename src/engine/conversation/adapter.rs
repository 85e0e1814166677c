//! Provider adapters (the spec's section 6): the normalized chat request and
//! result, streaming chunks, and the trait an adapter implements.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::event::conversation::{
    ConversationId, ConversationMessage, Metadata, TokenUsage, ToolSpec, TurnId,
};
use crate::model::Role;
use crate::model::{CallId, MessageId, ToolCallRecord};

/// One message sent to a provider (the spec's `ChatInputMessage`, with the
/// tool-call fields a tool exchange needs).
#[derive(Clone, Debug, PartialEq)]
pub struct ChatInputMessage {
    /// Who speaks.
    pub role: Role,
    /// Text (a JSON string) or structured JSON.
    pub content: Value,
    /// The speaker's name.
    pub name: Option<String>,
    /// An assistant message's tool calls.
    pub tool_calls: Vec<ToolCallRecord>,
    /// A tool message's call.
    pub tool_call_id: Option<CallId>,
    /// The conversation message it was built from, if any (a summary a
    /// history builder writes has none).
    pub source: Option<MessageId>,
}

impl From<&ConversationMessage> for ChatInputMessage {
    fn from(m: &ConversationMessage) -> Self {
        Self {
            role: m.role,
            content: m.content.clone(),
            name: m.name.clone(),
            tool_calls: m.tool_calls.clone(),
            tool_call_id: m.tool_call_id.clone(),
            source: Some(m.id),
        }
    }
}

impl ChatInputMessage {
    /// The content as text (a JSON string's value, else the JSON text).
    pub fn text(&self) -> String {
        match &self.content {
            Value::String(s) => s.clone(),
            Value::Null => String::new(),
            other => other.to_string(),
        }
    }
}

/// What the engine asks a provider (the spec's `ProviderChatRequest`).
#[derive(Clone, Debug, PartialEq)]
pub struct ProviderChatRequest {
    /// The messages to send, already chosen by the history builder.
    pub messages: Vec<ChatInputMessage>,
    /// The model.
    pub model: String,
    /// Request-level fields (`temperature`, `max_tokens`, `tool_choice`,
    /// ...), passed through as the provider names them.
    pub parameters: Metadata,
    /// The tools the model may call.
    pub tools: Vec<ToolSpec>,
}

/// What a provider answered (the spec's `ProviderChatResult`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProviderChatResult {
    /// Messages to append (usually one assistant message, whose
    /// `tool_calls` the engine runs).
    pub messages: Vec<ConversationMessage>,
    /// Token usage.
    pub usage: Option<TokenUsage>,
    /// The provider's response as it came, for debugging.
    pub raw: Option<Value>,
    /// The provider's request id (`x-request-id`, `request-id`).
    pub request_id: Option<String>,
    /// About the response: `finish_reason`, the model that answered.
    pub response_metadata: Metadata,
}

/// A piece of a streamed response (the spec's `ProviderStreamChunk`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProviderStreamChunk {
    /// Partial content (text as a JSON string).
    pub delta: Option<Value>,
    /// A whole message is now available.
    pub is_message_complete: bool,
    /// The usage, on the last chunk.
    pub usage: Option<TokenUsage>,
    /// The provider's chunk as it came.
    pub raw: Option<Value>,
}

/// The agent context of a call (resilient-http-core's `AgentContext`): who
/// calls, for which run, with which labels.
#[derive(Clone, Debug, PartialEq)]
pub struct AgentContext {
    /// The agent.
    pub agent: String,
    /// `conversation:turn`.
    pub run_id: String,
    /// `conversationId`, `turnId`, `provider`, `model`.
    pub labels: BTreeMap<String, String>,
    /// The call options' metadata ([`ProviderCallOptions::metadata`]), as
    /// the spec's section 8.1 wires it.
    pub metadata: Metadata,
    /// Equal to `run_id`.
    pub correlation_id: String,
    /// The previous turn's run id.
    pub parent_correlation_id: Option<String>,
}

/// What an adapter is told about the call it makes (the spec's
/// `ProviderCallOptions`, with the context already built).
#[derive(Clone, Debug, PartialEq)]
pub struct ProviderCallOptions {
    /// The conversation.
    pub conversation_id: ConversationId,
    /// The turn.
    pub turn_id: TurnId,
    /// The agent.
    pub agent: String,
    /// The agent context, for an HTTP layer's telemetry and policies.
    pub agent_context: AgentContext,
    /// `ai.provider`, `ai.model`, `ai.request_type`, `ai.streaming`.
    pub extensions: Metadata,
    /// The caller's hints ([`RunTurn::hints`](super::RunTurn::hints)) of
    /// the turn; also the agent context's metadata.
    pub metadata: Metadata,
}

/// A failed provider call: what is recorded in the turn's error.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct ProviderError {
    /// What went wrong (the provider's own message where it sent one).
    pub message: String,
    /// The provider's error code or type (`"rate_limit_error"`).
    pub code: Option<String>,
    /// The HTTP status.
    pub status: Option<u16>,
    /// `"timeout"`, `"network"`, `"rate_limit"`, `"server"`, `"client"`,
    /// `"parse"`, `"auth"`.
    pub category: String,
    /// The provider's error body, as it came.
    pub raw: Option<Value>,
    /// The provider's request id.
    pub request_id: Option<String>,
}

impl ProviderError {
    /// An error of `category` with `message` and nothing else.
    pub fn new(category: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            code: None,
            status: None,
            category: category.into(),
            raw: None,
            request_id: None,
        }
    }
}

/// A provider integration (the spec's `ProviderAdapter`). Synchronous: an
/// async application runs the engine on a thread of its own.
pub trait ProviderAdapter: Send + Sync {
    /// The provider id (`"openai"`, `"anthropic"`, `"scripted"`).
    fn id(&self) -> &str;

    /// Whether [`stream_chat`](Self::stream_chat) really streams. Default: false.
    fn supports_streaming(&self) -> bool {
        false
    }

    /// One chat call.
    fn send_chat(
        &self,
        request: &ProviderChatRequest,
        options: &ProviderCallOptions,
    ) -> Result<ProviderChatResult, ProviderError>;

    /// One chat call, streamed: `on_chunk` sees each chunk as it arrives,
    /// and the assembled result is returned. The default falls back to
    /// [`send_chat`](Self::send_chat) and delivers each message as one
    /// complete chunk, then the usage.
    fn stream_chat(
        &self,
        request: &ProviderChatRequest,
        options: &ProviderCallOptions,
        on_chunk: &mut dyn FnMut(&ProviderStreamChunk),
    ) -> Result<ProviderChatResult, ProviderError> {
        let result = self.send_chat(request, options)?;
        for m in &result.messages {
            on_chunk(&ProviderStreamChunk {
                delta: Some(m.content.clone()),
                is_message_complete: true,
                usage: None,
                raw: None,
            });
        }
        if result.usage.is_some() {
            on_chunk(&ProviderStreamChunk {
                usage: result.usage.clone(),
                ..ProviderStreamChunk::default()
            });
        }
        Ok(result)
    }
}
