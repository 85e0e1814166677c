//! A deterministic, offline provider adapter that follows a script: for
//! tests, the demo, and benchmarks of the engine itself.

use serde_json::{Value, json};

use crate::event::TokenUsage;
use crate::event::conversation::{ConversationMessage, Metadata};
use crate::model::Role;
use crate::model::ToolCallRecord;

use super::adapter::{
    ProviderAdapter, ProviderCallOptions, ProviderChatRequest, ProviderChatResult, ProviderError,
    ProviderStreamChunk,
};

/// One scripted provider response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ScriptedReply {
    /// An assistant message. `{results}` in `content` is replaced by the
    /// tool results since the last assistant message, joined with `"; "`.
    Answer {
        /// The text.
        content: String,
        /// Tool calls, `(tool name, JSON arguments)`; their ids are
        /// `call_<turn>_<step>_<k>`, the same in a replay.
        calls: Vec<(String, String)>,
    },
    /// A failed call.
    Fail {
        /// The error message.
        message: String,
        /// The error code.
        code: String,
    },
}

impl ScriptedReply {
    /// An answer without tool calls.
    pub fn text(content: impl Into<String>) -> Self {
        ScriptedReply::Answer {
            content: content.into(),
            calls: Vec::new(),
        }
    }

    /// An answer calling tools.
    pub fn calls(content: impl Into<String>, calls: &[(&str, &str)]) -> Self {
        ScriptedReply::Answer {
            content: content.into(),
            calls: calls
                .iter()
                .map(|(n, a)| ((*n).to_owned(), (*a).to_owned()))
                .collect(),
        }
    }
}

/// Answers from a script of turns, each a list of steps (provider calls).
/// The turn is the number of user messages in the request, less one; the
/// step, the number of assistant messages after the last user message. So
/// the answer depends only on the request, and a resumed turn gets the
/// answers the first run would have had. It expects the whole history (the
/// default history builder). Past the script's end, it answers
/// `"(end of script)"`.
#[derive(Clone, Debug)]
pub struct ScriptedAdapter {
    id: String,
    model: String,
    turns: Vec<Vec<ScriptedReply>>,
}

impl ScriptedAdapter {
    /// An adapter `"scripted"` following `turns`.
    pub fn new(turns: Vec<Vec<ScriptedReply>>) -> Self {
        Self {
            id: "scripted".into(),
            model: "scripted-1".into(),
            turns,
        }
    }

    /// The same script under another provider id.
    pub fn with_id(mut self, id: impl Into<String>) -> Self {
        self.id = id.into();
        self
    }

    fn reply(&self, request: &ProviderChatRequest) -> (usize, usize, ScriptedReply) {
        let users = request
            .messages
            .iter()
            .filter(|m| m.role == Role::User)
            .count();
        let last_user = request.messages.iter().rposition(|m| m.role == Role::User);
        let after = last_user.map_or(0, |i| i + 1);
        let step = request.messages[after..]
            .iter()
            .filter(|m| m.role == Role::Assistant)
            .count();
        let turn = users.saturating_sub(1);
        let reply = self
            .turns
            .get(turn)
            .and_then(|t| t.get(step))
            .cloned()
            .unwrap_or_else(|| ScriptedReply::text("(end of script)"));
        (turn, step, reply)
    }
}

impl ProviderAdapter for ScriptedAdapter {
    fn id(&self) -> &str {
        &self.id
    }

    fn supports_streaming(&self) -> bool {
        true
    }

    fn send_chat(
        &self,
        request: &ProviderChatRequest,
        _options: &ProviderCallOptions,
    ) -> Result<ProviderChatResult, ProviderError> {
        let (turn, step, reply) = self.reply(request);
        let (content, calls) = match reply {
            ScriptedReply::Fail { message, code } => {
                let mut e = ProviderError::new("server", message.clone());
                e.code = Some(code.clone());
                e.raw = Some(json!({"error": {"message": message, "code": code}}));
                return Err(e);
            }
            ScriptedReply::Answer { content, calls } => (content, calls),
        };
        let last_assistant = request
            .messages
            .iter()
            .rposition(|m| m.role == Role::Assistant);
        let results: Vec<String> = request.messages[last_assistant.map_or(0, |i| i + 1)..]
            .iter()
            .filter(|m| m.role == Role::Tool)
            .map(|m| m.text())
            .collect();
        let content = content.replace("{results}", &results.join("; "));
        let mut m = ConversationMessage::assistant(content.clone());
        m.tool_calls = calls
            .iter()
            .enumerate()
            .map(|(k, (name, args))| {
                ToolCallRecord::new(format!("call_{turn}_{step}_{}", k + 1), name, args)
            })
            .collect();
        let input: u64 = request
            .messages
            .iter()
            .map(|m| m.text().len() as u64 / 4 + 4)
            .sum();
        let output = content.len() as u64 / 4 + 1;
        let mut response_metadata = Metadata::new();
        let finish = if m.tool_calls.is_empty() {
            "stop"
        } else {
            "tool_calls"
        };
        response_metadata.insert("finish_reason".into(), json!(finish));
        response_metadata.insert("model".into(), json!(self.model));
        Ok(ProviderChatResult {
            raw: Some(json!({"turn": turn, "step": step, "content": content})),
            messages: vec![m],
            usage: Some(TokenUsage {
                input_tokens: input,
                output_tokens: output,
                total_tokens: Some(input + output),
                ..TokenUsage::default()
            }),
            request_id: Some(format!("scripted-{turn}-{step}")),
            response_metadata,
        })
    }

    fn stream_chat(
        &self,
        request: &ProviderChatRequest,
        options: &ProviderCallOptions,
        on_chunk: &mut dyn FnMut(&ProviderStreamChunk),
    ) -> Result<ProviderChatResult, ProviderError> {
        let result = self.send_chat(request, options)?;
        for m in &result.messages {
            let text = m.text();
            for word in text.split_inclusive(' ') {
                on_chunk(&ProviderStreamChunk {
                    delta: Some(Value::String(word.to_owned())),
                    ..ProviderStreamChunk::default()
                });
            }
            on_chunk(&ProviderStreamChunk {
                is_message_complete: true,
                ..ProviderStreamChunk::default()
            });
        }
        on_chunk(&ProviderStreamChunk {
            usage: result.usage.clone(),
            ..ProviderStreamChunk::default()
        });
        Ok(result)
    }
}
