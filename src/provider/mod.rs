//! Provider message formats: the journal's provider-neutral
//! [`InnerMessage`]s to and from the message lists of model APIs.
//!
//! [`ConversationFormat`] is the way in and out: `to_json`, `to_text` and
//! `parse` for each format:
//!
//! - OpenAI chat-completions messages (`[{"role": ..., ...}]`), in [`openai`];
//! - Anthropic Messages API requests (`{"system": ..., "messages": [...]}`),
//!   in [`anthropic`];
//! - JSON Lines, one `InnerMessage` JSON per line, in [`jsonl`].
//!
//! [`validate`] checks that a message list is a history the provider
//! accepts (every tool call answered exactly once, in the right place).
//!
//! ```
//! use agent_journal::provider::validate;
//! use agent_journal::provider::ConversationFormat;
//! use agent_journal::resume::INTERRUPTED_RESULT;
//! use agent_journal::EvaluationId;
//! use serde_json::json;
//!
//! // The process stopped while call_2 was running: it has no result.
//! let request = json!([
//!     {"role": "user", "content": "Weather and time in Paris?"},
//!     {"role": "assistant", "content": null, "tool_calls": [
//!         {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{}"}},
//!         {"id": "call_2", "type": "function", "function": {"name": "time", "arguments": "{}"}}
//!     ]},
//!     {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}
//! ]);
//! let openai = ConversationFormat::OpenAi;
//! let messages = openai.parse(&request.to_string(), EvaluationId::new(), "demo", "weather")?;
//!
//! let rebuilt = openai.to_json(&messages);
//! assert_eq!(rebuilt[3], json!({"role": "tool", "tool_call_id": "call_2", "content": INTERRUPTED_RESULT}));
//! assert!(validate::openai(rebuilt.as_array().expect("an array")).is_ok());
//! assert!(validate::anthropic(&ConversationFormat::Anthropic.to_json(&messages)).is_ok());
//! # Ok::<(), agent_journal::Error>(())
//! ```
//!
//! Messages are converted in the order given, which is the order of their
//! `sequence` inside one evaluation.
//!
//! # Payload tagging
//!
//! [`InnerMessage::provider_payload`] keeps the message exactly as the
//! provider API had it, so that an export to the *same* provider reproduces it
//! (as a `serde_json::Value`: `"content": null` versus a missing key, unknown
//! fields, Anthropic `thinking` blocks and their signatures). The JSON text is
//! tagged with the provider it came from, so that an export to the *other*
//! provider never emits a foreign payload (it uses the neutral fields):
//!
//! - `{"provider": "openai", "message": <the original message>}`
//! - `{"provider": "anthropic", "message": <the original message>}`
//! - `{"provider": "anthropic", "system": <the original top-level "system">}`
//!   on the system message of an Anthropic request (a string or text blocks).
//! - `{"provider": "anthropic", "part_of": "<message_id>"}`: an Anthropic user
//!   message holding `tool_result` blocks becomes one `Tool` message per
//!   `tool_result` (then one `User` message for its other blocks, if any). The
//!   first of them carries the original whole message; the others point to it
//!   by its `message_id`, and the Anthropic export re-emits the original
//!   once.
//!
//! [`openai::payload`] and [`anthropic::payload`] build the tag for a message
//! an adapter received. A payload is used only when it agrees with the neutral
//! fields (same role, same tool-call ids): a payload that would break the
//! history (see below) is ignored and the message is rebuilt from its neutral
//! fields. Untagged payloads are ignored.
//!
//! # The resume rule: every rebuilt history is valid
//!
//! The inner-messages spec rebuilds an assistant message with only its
//! `completed` tool calls but keeps every tool result, which orphans the
//! results of failed calls and leaves no result for calls that never finished:
//! the top cause of "tool_use ids were found without tool_result blocks". Here
//! [`ConversationFormat::to_json`] always produces, for either provider, a
//! history that [`validate`] accepts:
//!
//! - every tool call of an assistant message is kept, whatever its status;
//! - its results come right after it (before any user message that the list
//!   has between them), in the order they were recorded;
//! - a call with no result in the list gets a synthetic one right after the
//!   results that exist, saying
//!   [`INTERRUPTED_RESULT`](crate::resume::INTERRUPTED_RESULT) (for Anthropic with
//!   `is_error: true`). The engine runs pending tools before it rebuilds a
//!   history, so this only appears when a caller asks for a history with
//!   unfinished calls;
//! - a second result for the same call is dropped, and so is a result whose
//!   call the preceding assistant message did not make (an orphan, or a late
//!   result recorded after the next assistant message: the model was then
//!   shown the synthetic result, and the rebuilt history says what it saw);
//! - a call id already used by an earlier call is dropped from the later
//!   assistant message (tool-call ids must be unique).

use serde_json::{Map, Value};

use crate::model::{EvaluationId, InnerMessage};

pub mod anthropic;
pub mod claude_code;
mod conversation_format;
mod gemini;
mod history;
pub mod input;
pub mod jsonl;
mod media;
mod ollama;
pub mod opaque;
pub mod openai;
mod payload;
pub(crate) mod read;
mod responses;
pub(crate) mod stream;
pub use conversation_format::ConversationFormat;
pub(crate) use stream::StreamedConversation;
pub use stream::{survey, survey_text};
pub mod translate;
pub mod validate;
mod window;

#[cfg(test)]
mod tests;

impl ConversationFormat {
    /// A complete request body: `fields` (as [`request_fields`] read them)
    /// with the messages in this format, where the format has a request
    /// body (JSON Lines has none: its messages are returned as they are).
    ///
    /// [`request_fields`]: Self::request_fields
    pub fn to_body(self, messages: &[InnerMessage], fields: &Map<String, Value>) -> Value {
        let mut body = fields.clone();
        match (self, self.to_json(messages)) {
            (ConversationFormat::OpenAi | ConversationFormat::Ollama, v) => {
                body.insert("messages".into(), v);
            }
            (ConversationFormat::OpenAiResponses, v) => {
                body.insert("input".into(), v);
            }
            (ConversationFormat::Anthropic | ConversationFormat::Gemini, Value::Object(o)) => {
                body.extend(o);
            }
            (_, v) => return v,
        }
        Value::Object(body)
    }

    /// The messages as this format's JSON: an OpenAI `messages` array, an
    /// Anthropic request body (`system` and `messages`), or (JSONL) an
    /// array of the messages' JSON objects. OpenAI and Anthropic histories
    /// are always valid for the provider: every tool call is followed by
    /// exactly one result (an unfinished call gets
    /// [`INTERRUPTED_RESULT`](crate::resume::INTERRUPTED_RESULT));
    /// a message imported from the same provider is written back as it came
    /// (its `provider_payload`).
    pub fn to_json(self, messages: &[InnerMessage]) -> Value {
        match self {
            ConversationFormat::OpenAi => Value::Array(openai::to_messages(messages)),
            ConversationFormat::Anthropic => anthropic::to_request(messages),
            ConversationFormat::Jsonl => {
                Value::Array(messages.iter().map(jsonl::to_value).collect())
            }
            ConversationFormat::OpenAiResponses => Value::Array(responses::to_input(messages)),
            ConversationFormat::Ollama => Value::Array(ollama::to_messages(messages)),
            ConversationFormat::Gemini => gemini::to_request(messages),
        }
    }

    /// The messages as text: [`to_json`](Self::to_json) pretty-printed, or
    /// for JSONL one JSON object per line, each ended by `\n`.
    pub fn to_text(self, messages: &[InnerMessage]) -> String {
        match self {
            ConversationFormat::Jsonl => jsonl::to_jsonl(messages),
            other => {
                let v = other.to_json(messages);
                serde_json::to_string_pretty(&v).unwrap_or_else(|_| v.to_string())
            }
        }
    }

    /// Reads a conversation written in this format: JSON text (an OpenAI
    /// `messages` array or a request body holding one; an Anthropic request
    /// body), or JSON Lines. Messages get `evaluation_id` and the prompt
    /// identity (JSONL messages keep their own).
    ///
    /// # Errors
    /// [`Error::InvalidInput`](crate::Error::InvalidInput) naming what is
    /// wrong and where: invalid JSON (with its line and column), a tool
    /// result with no call, a call id used twice, a wrong role, ...
    pub fn parse(
        self,
        text: &str,
        evaluation_id: EvaluationId,
        prompt_ns: &str,
        prompt_key: &str,
    ) -> crate::error::Result<Vec<InnerMessage>> {
        self.parse_as(text, evaluation_id, prompt_ns, prompt_key, false)
    }

    /// [`parse`](Self::parse), refusing instead of keeping the items and
    /// content blocks whose type the journal does not model ([opaque
    /// items](opaque)).
    ///
    /// # Errors
    /// As `parse`; [`Error::Unmodeled`](crate::Error::Unmodeled) naming
    /// the first opaque item's path and type.
    pub fn parse_strict(
        self,
        text: &str,
        evaluation_id: EvaluationId,
        prompt_ns: &str,
        prompt_key: &str,
    ) -> crate::error::Result<Vec<InnerMessage>> {
        self.parse_as(text, evaluation_id, prompt_ns, prompt_key, true)
    }

    /// [`parse`](Self::parse), or [`parse_strict`](Self::parse_strict)
    /// under `strict`.
    fn parse_as(
        self,
        text: &str,
        evaluation_id: EvaluationId,
        prompt_ns: &str,
        prompt_key: &str,
        strict: bool,
    ) -> crate::error::Result<Vec<InnerMessage>> {
        let json = || serde_json::from_str::<Value>(text).map_err(|e| stream::json_error(&e));
        match self {
            ConversationFormat::Jsonl => jsonl::from_jsonl(text),
            format => stream::convert_whole_with(
                format,
                &json()?,
                evaluation_id,
                prompt_ns,
                prompt_key,
                strict,
            ),
        }
    }
}
