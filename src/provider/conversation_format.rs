//! [`ConversationFormat`]: the formats a conversation is written in and
//! read from, and what a request body in each holds besides its messages.
//! The conversions themselves are `ConversationFormat::to_json`, `to_text`,
//! `to_body` and `parse`, in `provider/mod.rs`.

use serde_json::{Map, Value};

/// A conversation format: how a list of
/// [`InnerMessage`](crate::InnerMessage)s is written for a provider, and
/// read back. The one way to export messages (a resume plan's, a session's
/// at any seq) in a provider's format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConversationFormat {
    /// An OpenAI chat-completions `messages` array (or a request body holding one).
    OpenAi,
    /// An Anthropic Messages request body (`system` + `messages`).
    Anthropic,
    /// One `InnerMessage` JSON object per line.
    Jsonl,
    /// OpenAI Responses API `input` items (an array, or a request body
    /// holding `input`).
    OpenAiResponses,
    /// An Ollama `/api/chat` `messages` array (or a request holding one);
    /// its tool calls get ids derived from their place.
    Ollama,
    /// A Gemini `generateContent` request (`systemInstruction`, `contents`).
    Gemini,
}

impl ConversationFormat {
    /// The request-level fields of a request body in this format (`model`,
    /// `tools`, `tool_choice`, `max_tokens`, `temperature`, ...): every
    /// member but the messages themselves (`messages`, `input`, `contents`,
    /// and the system prompt, which is a message). `None` for a bare message
    /// list, JSON Lines, or text that is not a JSON object.
    pub fn request_fields(self, text: &str) -> Option<Map<String, Value>> {
        if self == ConversationFormat::Jsonl {
            return None;
        }
        let Ok(Value::Object(mut o)) = serde_json::from_str::<Value>(text) else {
            return None;
        };
        for key in self.message_keys() {
            o.remove(*key);
        }
        Some(o)
    }

    /// The members of a request body that hold messages.
    pub(super) fn message_keys(self) -> &'static [&'static str] {
        match self {
            ConversationFormat::OpenAi | ConversationFormat::Ollama => &["messages"],
            ConversationFormat::Anthropic => &["messages", "system"],
            ConversationFormat::OpenAiResponses => &["input"],
            ConversationFormat::Gemini => &["contents", "systemInstruction", "system_instruction"],
            ConversationFormat::Jsonl => &[],
        }
    }

    /// A short name: `openai`, `anthropic`, `jsonl`, `openai-responses`,
    /// `ollama`, `gemini`.
    pub fn name(self) -> &'static str {
        match self {
            ConversationFormat::OpenAi => "openai",
            ConversationFormat::Anthropic => "anthropic",
            ConversationFormat::Jsonl => "jsonl",
            ConversationFormat::OpenAiResponses => "openai-responses",
            ConversationFormat::Ollama => "ollama",
            ConversationFormat::Gemini => "gemini",
        }
    }
}
