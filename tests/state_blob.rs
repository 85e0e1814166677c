//! The portable conversation state blob (`conversation::state_blob`,
//! goaitools' `ChatWithState`): what the provider receives and what the
//! state holds turn by turn, events, system messages, tools, compaction in
//! blobs, graceful degradation, and the conversions to and from a journal
//! (library and command line).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use agent_journal::Role;
use agent_journal::agent::Tool;
use agent_journal::agent::ToolContext;
use agent_journal::conversation::state_blob::{
    StateBlob, StateChatOptions, StateChatResult, append_to_state, chat_with_state,
    update_state_after_event,
};
use agent_journal::conversation::{
    ConversationMessage, Metadata, ProviderAdapter, ProviderCallOptions, ProviderChatRequest,
    ProviderChatResult, ProviderError, ScriptedAdapter, ScriptedReply,
};
use agent_journal::{TokenUsage, ToolCallRecord, ToolStatus};
use serde_json::json;

mod compaction;
mod degradation;
mod journal;
mod spec_goaitools;
pub mod wire;

/// One answer of a [`Recorder`].
#[derive(Clone, Debug, Default)]
pub struct Reply {
    pub text: String,
    /// `(tool, arguments)`: the call ids are `call_<n>`.
    pub calls: Vec<(String, String)>,
    /// The finish reason. Default: `stop` (`tool_calls` with calls);
    /// `"<null>"` sends a JSON null, `"<none>"` no reason at all.
    pub finish: Option<String>,
    /// The total tokens reported (input, all of it).
    pub tokens: Option<u64>,
}

impl Reply {
    pub fn text(t: &str) -> Self {
        Self {
            text: t.into(),
            ..Self::default()
        }
    }

    pub fn tokens(mut self, n: u64) -> Self {
        self.tokens = Some(n);
        self
    }

    pub fn finish(mut self, reason: &str) -> Self {
        self.finish = Some(reason.into());
        self
    }
}

/// An adapter that records every request it receives and answers from a
/// queue (then `"answer N"`, N counting calls from 1).
pub struct Recorder {
    id: String,
    replies: Mutex<VecDeque<Reply>>,
    seen: Mutex<Vec<ProviderChatRequest>>,
}

impl Recorder {
    pub fn new(id: &str) -> Self {
        Self::with(id, Vec::new())
    }

    pub fn with(id: &str, replies: Vec<Reply>) -> Self {
        Self {
            id: id.into(),
            replies: Mutex::new(replies.into()),
            seen: Mutex::new(Vec::new()),
        }
    }

    /// Every request received, as `(role, text)` pairs.
    pub fn requests(&self) -> Vec<Vec<(Role, String)>> {
        let seen = self.seen.lock().expect("lock");
        seen.iter()
            .map(|r| r.messages.iter().map(|m| (m.role, m.text())).collect())
            .collect()
    }

    /// The last request received, as `(role, text)` pairs.
    pub fn last(&self) -> Vec<(Role, String)> {
        self.requests().pop().expect("a request")
    }
}

impl ProviderAdapter for Recorder {
    fn id(&self) -> &str {
        &self.id
    }

    fn send_chat(
        &self,
        request: &ProviderChatRequest,
        _options: &ProviderCallOptions,
    ) -> Result<ProviderChatResult, ProviderError> {
        let n = {
            let mut seen = self.seen.lock().expect("lock");
            seen.push(request.clone());
            seen.len()
        };
        let reply = self
            .replies
            .lock()
            .expect("lock")
            .pop_front()
            .unwrap_or_else(|| Reply::text(&format!("answer {n}")));
        let mut m = ConversationMessage::assistant(reply.text);
        m.tool_calls = reply
            .calls
            .iter()
            .enumerate()
            .map(|(k, (name, args))| ToolCallRecord::new(format!("call_{n}_{k}"), name, args))
            .collect();
        let mut response_metadata = Metadata::new();
        let default = if m.tool_calls.is_empty() {
            "stop"
        } else {
            "tool_calls"
        };
        match reply.finish.as_deref().unwrap_or(default) {
            "<none>" => {}
            "<null>" => {
                response_metadata.insert("finish_reason".into(), serde_json::Value::Null);
            }
            // Anthropic's reasons go where its adapter puts them.
            f @ ("end_turn" | "max_tokens" | "tool_use" | "stop_sequence") => {
                response_metadata.insert("stop_reason".into(), json!(f));
            }
            f => {
                response_metadata.insert("finish_reason".into(), json!(f));
            }
        }
        Ok(ProviderChatResult {
            messages: vec![m],
            usage: reply.tokens.map(|t| TokenUsage {
                input_tokens: t,
                total_tokens: Some(t),
                ..TokenUsage::default()
            }),
            response_metadata,
            ..ProviderChatResult::default()
        })
    }
}

/// `(role, text)`, for assertions.
pub fn rt(role: Role, text: &str) -> (Role, String) {
    (role, text.to_owned())
}

pub fn sys(text: &str) -> (Role, String) {
    rt(Role::System, text)
}

pub fn user(text: &str) -> (Role, String) {
    rt(Role::User, text)
}

pub fn asst(text: &str) -> (Role, String) {
    rt(Role::Assistant, text)
}

/// The decoded state (of any provider).
pub fn decode(state: &[u8]) -> StateBlob {
    StateBlob::decode(state, None, usize::MAX).expect("a valid state")
}

/// The state's messages as `(role, text)` pairs.
pub fn stored(state: &[u8]) -> Vec<(Role, String)> {
    decode(state)
        .messages
        .iter()
        .map(|m| (m.role, m.text()))
        .collect()
}

/// `chat_with_state` with a fresh system message and one user message.
pub fn turn(adapter: &dyn ProviderAdapter, state: Option<&[u8]>, q: &str) -> StateChatResult {
    let options = StateChatOptions::new("m").system("Be brief.").user(q);
    chat_with_state(adapter, state, &options).expect("chat")
}

#[test]
fn the_seeds_two_turn_example_sends_a_fresh_system_message_and_never_stores_it() {
    let adapter = Recorder::with(
        "openai",
        vec![Reply::text("Hi!"), Reply::text("Warm and sunny")],
    );
    let first = chat_with_state(
        &adapter,
        None,
        &StateChatOptions::new("gpt")
            .system("You are a helpful assistant.")
            .user("Hello"),
    )
    .expect("first turn");
    assert_eq!(
        adapter.last(),
        vec![sys("You are a helpful assistant."), user("Hello")]
    );
    assert_eq!(stored(&first.state), vec![user("Hello"), asst("Hi!")]);
    assert_eq!(first.processed_length, 2);
    assert_eq!(first.text(), "Hi!");
    assert!(first.degraded.is_none());
    let doc: serde_json::Value = serde_json::from_slice(&first.state).expect("JSON");
    assert_eq!(doc["version"], 1);
    assert_eq!(doc["provider"], "openai");
    assert_eq!(doc["processed_length"], 2);

    let second = chat_with_state(
        &adapter,
        Some(&first.state),
        &StateChatOptions::new("gpt")
            .system("Possibly updated but likely the same system message")
            .user("What's the weather?"),
    )
    .expect("second turn");
    assert_eq!(
        adapter.last(),
        vec![
            sys("Possibly updated but likely the same system message"),
            user("Hello"),
            asst("Hi!"),
            user("What's the weather?"),
        ]
    );
    assert_eq!(
        stored(&second.state),
        vec![
            user("Hello"),
            asst("Hi!"),
            user("What's the weather?"),
            asst("Warm and sunny"),
        ]
    );
    assert_eq!(second.processed_length, 4);
    assert_eq!(adapter.requests().len(), 2);
}

#[test]
fn update_state_after_event_stores_a_user_message_and_leaves_processed_length() {
    let adapter = Recorder::new("p");
    let first = turn(&adapter, None, "Hi");
    let update = update_state_after_event(Some(&first.state), "p", "User has logged in");
    assert!(update.degraded.is_none());
    let blob = decode(&update.state);
    assert_eq!(
        stored(&update.state),
        vec![user("Hi"), asst("answer 1"), user("User has logged in")]
    );
    assert_eq!(blob.processed_length, 2, "the model has not seen the event");
    assert_eq!(adapter.requests().len(), 1, "no provider call");
}

#[test]
fn the_game_bot_check_in_reaches_the_model_in_order() {
    let adapter = Recorder::with(
        "openai",
        vec![
            Reply::text("Welcome, traveller."),
            Reply::text("Harrogate Theatre opened in 1900."),
        ],
    );
    let system = "You are the guide of a location game.";
    let first = chat_with_state(
        &adapter,
        None,
        &StateChatOptions::new("gpt").system(system).user("Hi"),
    )
    .expect("first turn");
    let checked_in = update_state_after_event(
        Some(&first.state),
        "openai",
        "User has checked in at Harrogate Theatre",
    );
    let ask = chat_with_state(
        &adapter,
        Some(&checked_in.state),
        &StateChatOptions::new("gpt")
            .system(system)
            .user("Tell me about this place"),
    )
    .expect("the question");
    assert_eq!(
        adapter.last(),
        vec![
            sys(system),
            user("Hi"),
            asst("Welcome, traveller."),
            user("User has checked in at Harrogate Theatre"),
            user("Tell me about this place"),
        ]
    );
    assert_eq!(ask.text(), "Harrogate Theatre opened in 1900.");
    assert_eq!(ask.processed_length, 5);
}

#[test]
fn append_to_state_stores_any_role_without_a_call() {
    let update = append_to_state(
        None,
        "p",
        &[
            ConversationMessage::system("The user is on a train."),
            ConversationMessage::user("Where am I?"),
        ],
    );
    assert!(update.degraded.is_none());
    let blob = decode(&update.state);
    assert_eq!(blob.provider, "p");
    assert_eq!(blob.processed_length, 0);
    assert_eq!(
        stored(&update.state),
        vec![sys("The user is on a train."), user("Where am I?")]
    );
    // Empty bytes are no state, not a degraded one.
    let update = append_to_state(Some(b""), "p", &[ConversationMessage::user("x")]);
    assert!(update.degraded.is_none());
    assert_eq!(stored(&update.state), vec![user("x")]);
}

#[test]
fn system_messages_after_the_first_other_message_are_stored_in_order() {
    let adapter = Recorder::new("p");
    let first = chat_with_state(
        &adapter,
        None,
        &StateChatOptions::new("m")
            .system("Preamble")
            .user("First message")
            .system("User completed task X")
            .user("Next question"),
    )
    .expect("chat");
    assert_eq!(
        adapter.last(),
        vec![
            sys("Preamble"),
            user("First message"),
            sys("User completed task X"),
            user("Next question"),
        ]
    );
    let expected = vec![
        user("First message"),
        sys("User completed task X"),
        user("Next question"),
        asst("answer 1"),
    ];
    assert_eq!(stored(&first.state), expected);
    // The next call sends the stored system message where it was.
    let second = chat_with_state(
        &adapter,
        Some(&first.state),
        &StateChatOptions::new("m").system("Preamble 2").user("More"),
    )
    .expect("chat");
    let mut sent = vec![sys("Preamble 2")];
    sent.extend(expected.iter().cloned());
    sent.push(user("More"));
    assert_eq!(adapter.last(), sent);
    assert_eq!(second.processed_length, 6);
}

/// Tells the time; fails for arguments `{"fail": true}`.
struct Clock;

impl Tool for Clock {
    fn name(&self) -> &str {
        "clock"
    }
    fn call(&self, arguments: &str, _: &ToolContext) -> Result<String, String> {
        if arguments.contains("fail") {
            Err("the clock is broken".into())
        } else {
            Ok("noon".into())
        }
    }
}

#[test]
fn tool_calls_run_in_a_loop_and_are_stored_with_their_results() {
    let adapter = ScriptedAdapter::new(vec![vec![
        ScriptedReply::calls(
            "Let me look.",
            &[
                ("clock", "{}"),
                ("clock", r#"{"fail": true}"#),
                ("ghost", "{}"),
            ],
        ),
        ScriptedReply::text("It is {results}."),
    ]]);
    let options = StateChatOptions::new("scripted-1")
        .system("Tell the time.")
        .user("What time is it?")
        .tool(Arc::new(Clock));
    let result = chat_with_state(&adapter, None, &options).expect("chat");
    let results = "noon; the clock is broken; unknown tool \"ghost\"";
    assert_eq!(result.text(), format!("It is {results}."));
    let blob = decode(&result.state);
    let roles: Vec<Role> = blob.messages.iter().map(|m| m.role).collect();
    use Role::{Assistant, Tool as T, User};
    assert_eq!(roles, vec![User, Assistant, T, T, T, Assistant]);
    let statuses: Vec<ToolStatus> = blob.messages[1]
        .tool_calls
        .iter()
        .map(|c| c.status)
        .collect();
    assert_eq!(
        statuses,
        vec![
            ToolStatus::Completed,
            ToolStatus::Failed,
            ToolStatus::Failed
        ]
    );
    assert_eq!(blob.messages[2].text(), "noon");
    assert_eq!(blob.messages[2].name.as_deref(), Some("clock"));
    assert_eq!(
        blob.messages[2].tool_call_id,
        Some(blob.messages[1].tool_calls[0].call_id.clone())
    );
    // One turn id on every message the call produced.
    let turn = blob.messages[1].turn_id;
    assert!(turn.is_some());
    assert!(blob.messages[1..].iter().all(|m| m.turn_id == turn));
    assert_eq!(blob.messages[0].turn_id, None);
    assert_eq!(result.processed_length, 6);
    assert_eq!(blob.provider, "scripted");
}

#[test]
fn a_tool_loop_past_max_steps_is_an_error_and_keeps_nothing() {
    let adapter = ScriptedAdapter::new(vec![vec![
        ScriptedReply::calls("again", &[("clock", "{}")]),
        ScriptedReply::calls("again", &[("clock", "{}")]),
        ScriptedReply::calls("again", &[("clock", "{}")]),
    ]]);
    let mut options = StateChatOptions::new("m")
        .user("Loop")
        .tool(Arc::new(Clock));
    options.max_steps = 2;
    let err = chat_with_state(&adapter, None, &options).expect_err("step limit");
    assert!(
        matches!(&err, agent_journal::Error::ProviderFailed { provider, message }
            if provider == "scripted" && message.contains("max_steps")),
        "{err}"
    );
}

#[test]
fn a_failed_provider_call_is_an_error() {
    let adapter = ScriptedAdapter::new(vec![vec![ScriptedReply::Fail {
        message: "overloaded".into(),
        code: "529".into(),
    }]]);
    let err = chat_with_state(&adapter, None, &StateChatOptions::new("m").user("Hi"))
        .expect_err("provider error");
    assert!(
        matches!(&err, agent_journal::Error::ProviderFailed { message, .. } if message == "overloaded"),
        "{err}"
    );
}
