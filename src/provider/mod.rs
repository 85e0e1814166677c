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
//!   results that exist, saying [`INTERRUPTED_RESULT`] (for Anthropic with
//!   `is_error: true`). The engine runs pending tools before it rebuilds a
//!   history, so this only appears when a caller asks for a history with
//!   unfinished calls;
//! - a second result for the same call is dropped, and so is a result whose
//!   call the preceding assistant message did not make (an orphan, or a late
//!   result recorded after the next assistant message: the model was then
//!   shown the synthetic result, and the rebuilt history says what it saw);
//! - a call id already used by an earlier call is dropped from the later
//!   assistant message (tool-call ids must be unique).
//!
//! ```
//! use agent_journal::provider::validate;
//! use agent_journal::{ConversationFormat, EvaluationId, INTERRUPTED_RESULT};
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

use std::collections::HashSet;

use serde_json::{Map, Value};

use crate::model::{EvaluationId, InnerMessage, MessageId, Role, ToolCallRecord};

pub mod anthropic;
pub mod claude_code;
mod gemini;
pub mod input;
pub mod jsonl;
mod media;
mod ollama;
pub mod openai;
mod read;
mod responses;
pub(crate) mod stream;
pub(crate) use stream::StreamedConversation;
pub use stream::{survey, survey_text};
pub mod translate;
pub mod validate;
mod window;

#[cfg(test)]
mod tests;

pub(crate) use crate::model::INTERRUPTED_RESULT;

/// A conversation format: how a list of [`InnerMessage`]s is written for a
/// provider, and read back. The one way to export messages (a resume plan's,
/// a session's at any seq) in a provider's format.
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
    fn message_keys(self) -> &'static [&'static str] {
        match self {
            ConversationFormat::OpenAi | ConversationFormat::Ollama => &["messages"],
            ConversationFormat::Anthropic => &["messages", "system"],
            ConversationFormat::OpenAiResponses => &["input"],
            ConversationFormat::Gemini => &["contents", "systemInstruction", "system_instruction"],
            ConversationFormat::Jsonl => &[],
        }
    }

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

    /// The messages as this format's JSON: an OpenAI `messages` array, an
    /// Anthropic request body (`system` and `messages`), or (JSONL) an
    /// array of the messages' JSON objects. OpenAI and Anthropic histories
    /// are always valid for the provider: every tool call is followed by
    /// exactly one result (an unfinished call gets [`INTERRUPTED_RESULT`]);
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
        let json = || serde_json::from_str::<Value>(text).map_err(|e| stream::json_error(&e));
        match self {
            ConversationFormat::Jsonl => jsonl::from_jsonl(text),
            format => stream::convert_whole(format, &json()?, evaluation_id, prompt_ns, prompt_key),
        }
    }
}

pub(crate) const OPENAI: &str = "openai";
pub(crate) const ANTHROPIC: &str = "anthropic";

/// A provider payload, once its tag has been read.
pub(crate) enum Tagged {
    /// The original message.
    Message(Map<String, Value>),
    /// The original top-level system value (Anthropic).
    System(Value),
    /// Part of the message whose payload is on the message with this id.
    PartOf(MessageId),
}

/// Tags `value` as coming from `provider`, under `key`: the text of
/// `{"provider": provider, key: value}` (members in key order), written
/// from the borrowed value into a buffer of its exact size (a message's
/// payload is as long as the message: no copy of the value, no buffer
/// grown by doubling).
pub(crate) fn tag(provider: &str, key: &str, value: &Value) -> String {
    /// The tagged object, serialized as a map of its two members.
    struct Tag<'a>(&'a str, &'a str, &'a Value);
    impl serde::Serialize for Tag<'_> {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            use serde::ser::SerializeMap;
            let Tag(provider, key, value) = *self;
            let mut m = s.serialize_map(Some(2))?;
            if key < "provider" {
                m.serialize_entry(key, value)?;
                m.serialize_entry("provider", provider)?;
            } else {
                m.serialize_entry("provider", provider)?;
                m.serialize_entry(key, value)?;
            }
            m.end()
        }
    }
    /// Counts the bytes written to it.
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0 += b.len();
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let tagged = Tag(provider, key, value);
    let mut size = Count(0);
    // Writing a `Value` (string keys) to memory cannot fail.
    let _ = serde_json::to_writer(&mut size, &tagged);
    let mut out = Vec::with_capacity(size.0);
    let _ = serde_json::to_writer(&mut out, &tagged);
    String::from_utf8(out).unwrap_or_default()
}

/// The payload of `msg` if it was tagged as coming from `provider`.
pub(crate) fn tagged(msg: &InnerMessage, provider: &str) -> Option<Tagged> {
    let text = msg.provider_payload.as_deref()?;
    let Ok(Value::Object(mut map)) = serde_json::from_str::<Value>(text) else {
        return None;
    };
    if map.get("provider").and_then(Value::as_str) != Some(provider) {
        return None;
    }
    if let Some(Value::Object(m)) = map.remove("message") {
        return Some(Tagged::Message(m));
    }
    if let Some(s) = map.remove("system") {
        return Some(Tagged::System(s));
    }
    match map.get("part_of").and_then(Value::as_str) {
        Some(id) => id.parse().ok().map(Tagged::PartOf),
        None => None,
    }
}

/// The original message in `msg`'s payload, if tagged with `provider`.
pub(crate) fn tagged_message(msg: &InnerMessage, provider: &str) -> Option<Map<String, Value>> {
    match tagged(msg, provider)? {
        Tagged::Message(m) => Some(m),
        _ => None,
    }
}

/// A JSON object.
pub(crate) type JsonObject = serde_json::Map<String, Value>;

/// The messages of a provider input: the value itself when it is an array,
/// else the `"messages"` array of a request object (returned too, for its
/// other fields). `expected` describes the accepted shapes in errors.
pub(crate) fn message_list<'a>(
    value: &'a Value,
    expected: &str,
) -> crate::error::Result<(Option<&'a JsonObject>, &'a Vec<Value>)> {
    match value {
        Value::Array(a) => Ok((None, a)),
        Value::Object(o) => match o.get("messages") {
            Some(Value::Array(a)) => Ok((Some(o), a)),
            Some(other) => Err(crate::error::Error::InvalidInput(format!(
                "\"messages\" must be an array, found {}",
                kind(other)
            ))),
            None => Err(crate::error::Error::InvalidInput(format!(
                "{expected}; the object has no \"messages\""
            ))),
        },
        other => Err(crate::error::Error::InvalidInput(format!(
            "{expected}, found {}",
            kind(other)
        ))),
    }
}

/// The JSON type of a value, for error messages.
pub(crate) fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A message list rearranged into a valid history (see the module docs).
pub(crate) struct Plan<'a> {
    /// System and user messages before the first assistant message.
    pub head: Vec<&'a InnerMessage>,
    /// Each assistant message with its results and what follows it.
    pub turns: Vec<Turn<'a>>,
}

/// One assistant message, its results, and the system and user messages
/// until the next assistant message.
pub(crate) struct Turn<'a> {
    pub msg: &'a InnerMessage,
    /// Its tool calls, without ids already used by an earlier call.
    pub calls: Vec<&'a ToolCallRecord>,
    /// True when no call was dropped from `calls`.
    pub complete: bool,
    /// Exactly one result per call, the recorded ones first.
    pub results: Vec<Res<'a>>,
    /// System and user messages after it, in order.
    pub after: Vec<&'a InnerMessage>,
}

/// A tool result of a rebuilt history.
pub(crate) enum Res<'a> {
    /// A recorded result.
    Real {
        msg: &'a InnerMessage,
        call: &'a ToolCallRecord,
    },
    /// The call has no result: [`INTERRUPTED_RESULT`].
    Synthetic(&'a ToolCallRecord),
}

impl Res<'_> {
    pub fn call(&self) -> &ToolCallRecord {
        match self {
            Res::Real { call, .. } | Res::Synthetic(call) => call,
        }
    }
}

impl Turn<'_> {
    fn close(&mut self) {
        let missing: Vec<_> = self
            .calls
            .iter()
            .filter(|c| !self.results.iter().any(|r| r.call().call_id == c.call_id))
            .copied()
            .collect();
        self.results.extend(missing.into_iter().map(Res::Synthetic));
    }
}

/// Arranges messages into a valid history: see the module docs.
/// A message list rebuilt from [`plan`]: the leading messages, then each
/// turn's assistant message, its results and what follows it, each made by
/// the given function (the formats whose messages map one to one).
pub(crate) fn render_plan(
    messages: &[InnerMessage],
    plain: impl Fn(&InnerMessage) -> Value,
    assistant: impl Fn(&Turn<'_>) -> Value,
    result: impl Fn(&Res<'_>) -> Value,
) -> Vec<Value> {
    let plan = plan(messages);
    let mut out = Vec::with_capacity(messages.len());
    out.extend(plan.head.iter().map(|m| plain(m)));
    for t in &plan.turns {
        out.push(assistant(t));
        out.extend(t.results.iter().map(&result));
        out.extend(t.after.iter().map(|m| plain(m)));
    }
    out
}

pub(crate) fn plan(messages: &[InnerMessage]) -> Plan<'_> {
    let mut seen: HashSet<&str> = HashSet::new();
    let mut plan = Plan {
        head: Vec::new(),
        turns: Vec::new(),
    };
    for m in messages {
        match m.role {
            Role::System | Role::User => match plan.turns.last_mut() {
                Some(t) => t.after.push(m),
                None => plan.head.push(m),
            },
            Role::Assistant => {
                if let Some(t) = plan.turns.last_mut() {
                    t.close();
                }
                let calls: Vec<_> = m
                    .tool_calls
                    .iter()
                    .filter(|c| seen.insert(c.call_id.as_str()))
                    .collect();
                plan.turns.push(Turn {
                    msg: m,
                    complete: calls.len() == m.tool_calls.len(),
                    calls,
                    results: Vec::new(),
                    after: Vec::new(),
                });
            }
            Role::Tool => {
                let (Some(t), Some(id)) = (plan.turns.last_mut(), m.tool_call_id.as_ref()) else {
                    continue; // an orphan: no call before it
                };
                let Some(call) = t.calls.iter().find(|c| c.call_id == *id).copied() else {
                    continue; // not a call of the preceding assistant message
                };
                if t.results.iter().any(|r| r.call().call_id == *id) {
                    continue; // a second result
                }
                t.results.push(Res::Real { msg: m, call });
            }
        }
    }
    if let Some(t) = plan.turns.last_mut() {
        t.close();
    }
    plan
}

/// A new message of an import, with the fields every import sets.
pub(crate) fn imported(
    role: Role,
    content: String,
    evaluation_id: crate::model::EvaluationId,
    sequence: usize,
    prompt_ns: &str,
    prompt_key: &str,
) -> InnerMessage {
    let mut m = InnerMessage::new(role, content, evaluation_id, sequence as u64);
    m.prompt_ns = prompt_ns.to_owned();
    m.prompt_key = prompt_key.to_owned();
    m
}
