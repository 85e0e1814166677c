//! The provider trait: one model round trip.

use crate::event::TokenUsage;
use crate::event::conversation::ToolSpec;
use crate::model::{InnerMessage, ToolCallRecord};

/// What the engine sends: the evaluation's messages so far and the tools.
#[derive(Clone, Debug)]
pub struct ProviderRequest<'a> {
    /// The conversation, ordered by sequence.
    pub messages: &'a [InnerMessage],
    /// The tools available: name, description and parameters schema.
    pub tools: Vec<ToolSpec>,
    /// The turn this response will start.
    pub turn: u32,
}

/// What a provider answers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProviderResponse {
    /// The assistant's text.
    pub content: String,
    /// The tool calls it makes (any status given is ignored: they are pending).
    pub tool_calls: Vec<ToolCallRecord>,
    /// Token usage.
    pub usage: TokenUsage,
    /// The model that answered.
    pub model: String,
    /// The message exactly as the provider API returned it, tagged with its
    /// provider so exports never emit a foreign payload: build it with
    /// [`provider::openai::payload`](crate::provider::openai::payload) or
    /// [`provider::anthropic::payload`](crate::provider::anthropic::payload).
    /// An untagged payload is kept but ignored on export.
    pub provider_payload: Option<String>,
}

/// A model provider. Synchronous: an async application drives the
/// `Evaluation` recorder from its own loop instead.
pub trait Provider {
    /// `"openai"`, `"anthropic"`, `"scripted"`.
    fn name(&self) -> &str;

    /// One round trip. `Err` is the provider's error message.
    fn complete(&self, request: &ProviderRequest<'_>) -> Result<ProviderResponse, String>;

    /// A streaming round trip: `on_delta` receives text as it arrives. The
    /// default calls [`Provider::complete`] and delivers the text at once.
    fn complete_streaming(
        &self,
        request: &ProviderRequest<'_>,
        on_delta: &mut dyn FnMut(&str),
    ) -> Result<ProviderResponse, String> {
        let r = self.complete(request)?;
        on_delta(&r.content);
        Ok(r)
    }
}
