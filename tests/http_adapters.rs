//! The HTTP provider adapters (`conversation::http`, feature `http`) against
//! a scripted HTTP/1.1 server on 127.0.0.1 ([`server`]): what they send
//! (body, headers, stream flags), what they make of each documented
//! response shape, streamed or not, how every failure is typed, and whole
//! engine turns with tools through each. Nothing leaves the machine.

// The adapters' error type is large by design (see the conversation module).
#![allow(clippy::result_large_err)]

mod anthropic;
mod chat;
mod openai;
mod parsers;
mod server;
mod state_blob;

use std::sync::Arc;

use agent_journal::agent::{Tool, ToolContext};
use agent_journal::conversation::{
    AgentContext, ChatInputMessage, ConversationEngine, ConversationEngineConfig,
    ConversationMessage, JournalConversationStore, Metadata, ProviderAdapter, ProviderCallOptions,
    ProviderChatRequest, ProviderError, ProviderStreamChunk, ToolSpec, TurnId,
};
use agent_journal::{Journal, SessionId, ToolCallRecord};
use serde_json::{Value, json};

/// Options of a call made outside an engine.
pub fn call_options() -> ProviderCallOptions {
    ProviderCallOptions {
        conversation_id: SessionId::new(),
        turn_id: TurnId::new(),
        agent: "tester".into(),
        agent_context: AgentContext {
            agent: "tester".into(),
            run_id: "run".into(),
            labels: Default::default(),
            metadata: Metadata::new(),
            correlation_id: "run".into(),
            parent_correlation_id: None,
        },
        extensions: Metadata::new(),
        metadata: Metadata::new(),
    }
}

/// A history with every role: two system messages, a named user, an
/// assistant making two parallel calls without text, their two results,
/// and a user follow-up.
pub fn history() -> Vec<ChatInputMessage> {
    let mut user = ConversationMessage::user("What are 2+3 and 4+5?");
    user.name = Some("alice".into());
    let mut assistant = ConversationMessage::assistant("");
    assistant.tool_calls = vec![
        ToolCallRecord::new("call_a", "add", r#"{"a":2,"b":3}"#),
        ToolCallRecord::new("call_b", "add", r#"{"a":4,"b":5}"#),
    ];
    let result = |id: &str, text: &str| {
        let mut m = ConversationMessage::new(agent_journal::Role::Tool, text);
        m.tool_call_id = Some(id.into());
        m.name = Some("add".into());
        m
    };
    [
        ConversationMessage::system("You are terse."),
        ConversationMessage::system("Use tools for arithmetic."),
        user,
        assistant,
        result("call_a", "5"),
        result("call_b", "9"),
        ConversationMessage::user("Thanks. And their sum?"),
    ]
    .iter()
    .map(ChatInputMessage::from)
    .collect()
}

/// The `add` tool's spec.
pub fn add_spec() -> ToolSpec {
    AddTool.spec()
}

/// A request for `model` with [`history`], the `add` tool and
/// `parameters`.
pub fn request(model: &str, parameters: Value) -> ProviderChatRequest {
    ProviderChatRequest {
        messages: history(),
        model: model.into(),
        parameters: parameters
            .as_object()
            .map(|o| o.clone().into_iter().collect())
            .unwrap_or_default(),
        tools: vec![add_spec()],
    }
}

/// Adds `a` and `b`.
pub struct AddTool;

impl Tool for AddTool {
    fn name(&self) -> &str {
        "add"
    }

    fn description(&self) -> &str {
        "Adds two integers."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        })
    }

    fn call(&self, arguments: &str, _ctx: &ToolContext) -> Result<String, String> {
        let v: Value = serde_json::from_str(arguments).map_err(|e| e.to_string())?;
        let n = |k: &str| v.get(k).and_then(Value::as_i64).ok_or(format!("no {k}"));
        Ok((n("a")? + n("b")?).to_string())
    }
}

/// An engine with `adapter` (model `model`), the `add` tool, a journal in
/// memory, streaming or not.
pub fn engine(
    adapter: Arc<dyn ProviderAdapter>,
    model: &str,
    streaming: bool,
) -> ConversationEngine {
    let store = Arc::new(JournalConversationStore::new(Journal::memory()));
    let mut config = ConversationEngineConfig::new("tester", store)
        .provider(adapter, model)
        .tool(Arc::new(AddTool));
    config.streaming = streaming;
    ConversationEngine::new(config)
}

/// Calls `f` with a chunk collector; returns what it returned and the
/// chunks.
pub fn with_chunks<T>(
    f: impl FnOnce(&mut dyn FnMut(&ProviderStreamChunk)) -> T,
) -> (T, Vec<ProviderStreamChunk>) {
    let mut chunks = Vec::new();
    let out = f(&mut |c: &ProviderStreamChunk| chunks.push(c.clone()));
    (out, chunks)
}

/// The text of the chunks' deltas, concatenated.
pub fn delta_text(chunks: &[ProviderStreamChunk]) -> String {
    chunks
        .iter()
        .filter(|c| !c.is_message_complete)
        .filter_map(|c| c.delta.as_ref().and_then(Value::as_str))
        .collect()
}

/// Asserts the shape of a provider error.
#[track_caller]
pub fn assert_error(
    e: &ProviderError,
    category: &str,
    status: Option<u16>,
    code: Option<&str>,
    message: &str,
) {
    assert_eq!(e.category, category, "category of {e:?}");
    assert_eq!(e.status, status, "status of {e:?}");
    assert_eq!(e.code.as_deref(), code, "code of {e:?}");
    assert!(
        e.message.contains(message),
        "message {:?} should contain {message:?}",
        e.message
    );
}
