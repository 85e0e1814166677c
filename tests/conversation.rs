//! The conversation engine (agent-conversation-core spec, section 9):
//! lifecycle, turns, history builder and planner, hooks, errors, metadata
//! wiring; one store suite run on both stores; interrupted turns resumed.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use agent_journal::Role;
use agent_journal::conversation::{
    ChatInputMessage, Conversation, ConversationEngine, ConversationEngineConfig,
    ConversationHooks, ConversationMessage, ConversationStore, ConversationTurn,
    CreateConversation, DefaultHistoryBuilder, HistoryBuilder, HistoryContext,
    InMemoryConversationStore, JournalConversationStore, Metadata, Order, Page, PlanInput,
    PlannedTurn, ProviderAdapter, ProviderCallOptions, ProviderChatRequest, ProviderChatResult,
    ProviderError, ProviderStreamChunk, RunTurn, ScriptedAdapter, ScriptedReply, TurnPlanner,
    TurnStatus,
};
use agent_journal::{Error, Journal, ToolStatus};
use serde_json::json;

mod bounded;
mod cli;
mod compaction;
mod interrupted;
mod kill;
mod spec_acc;
mod store_suite;
mod turns;

/// An adapter that answers `reply` and records every request and options.
pub struct Recording {
    pub id: String,
    pub reply: String,
    pub seen: Mutex<Vec<(ProviderChatRequest, ProviderCallOptions)>>,
}

impl Recording {
    pub fn new(id: &str, reply: &str) -> Arc<Self> {
        Arc::new(Self {
            id: id.into(),
            reply: reply.into(),
            seen: Mutex::new(Vec::new()),
        })
    }

    pub fn requests(&self) -> Vec<(ProviderChatRequest, ProviderCallOptions)> {
        self.seen.lock().expect("lock").clone()
    }
}

impl ProviderAdapter for Recording {
    fn id(&self) -> &str {
        &self.id
    }

    fn send_chat(
        &self,
        request: &ProviderChatRequest,
        options: &ProviderCallOptions,
    ) -> Result<ProviderChatResult, ProviderError> {
        self.seen
            .lock()
            .expect("lock")
            .push((request.clone(), options.clone()));
        let mut m = ConversationMessage::assistant(self.reply.clone());
        m.provider_message_id = Some(format!("msg-{}", self.seen.lock().expect("lock").len()));
        let mut response_metadata = Metadata::new();
        response_metadata.insert("finish_reason".into(), serde_json::json!("stop"));
        Ok(ProviderChatResult {
            messages: vec![m],
            response_metadata,
            ..Default::default()
        })
    }
}

/// An adapter that always fails with a provider error body.
pub struct Failing;

impl ProviderAdapter for Failing {
    fn id(&self) -> &str {
        "failing"
    }

    fn send_chat(
        &self,
        _: &ProviderChatRequest,
        _: &ProviderCallOptions,
    ) -> Result<ProviderChatResult, ProviderError> {
        let mut e = ProviderError::new("rate_limit", "slow down");
        e.status = Some(429);
        e.code = Some("rate_limit_error".into());
        e.raw = Some(json!({"error": {"type": "rate_limit_error", "message": "slow down"}}));
        e.request_id = Some("req-9".into());
        Err(e)
    }
}

/// Hooks that log each call as a line.
#[derive(Default)]
pub struct Log(pub Mutex<Vec<String>>);

impl Log {
    pub fn lines(&self) -> Vec<String> {
        self.0.lock().expect("lock").clone()
    }
    fn push(&self, s: String) {
        self.0.lock().expect("lock").push(s);
    }
}

impl ConversationHooks for Log {
    fn on_conversation_created(&self, c: &Conversation) {
        self.push(format!("created {}", c.title.clone().unwrap_or_default()));
    }
    fn before_turn(&self, t: &ConversationTurn, _: &Conversation) {
        self.push(format!("before {:?}", t.status));
    }
    fn on_chunk(&self, _: &ConversationTurn, chunk: &ProviderStreamChunk) {
        if let Some(d) = chunk.delta.as_ref().and_then(|d| d.as_str()) {
            self.push(format!("chunk {d}"));
        }
    }
    fn after_turn_success(&self, t: &ConversationTurn, _: &Conversation) {
        self.push(format!(
            "success {:?} {}",
            t.status,
            t.output_messages.len()
        ));
    }
    fn after_turn_error(&self, t: &ConversationTurn, e: &Error, _: &Conversation) {
        self.push(format!("error {:?} {e}", t.status));
    }
}

/// Runs `f`, a panic in it caught and not printed (a process that "dies").
pub fn quiet<T>(f: impl FnOnce() -> T) -> std::thread::Result<T> {
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    std::panic::set_hook(hook);
    r
}

pub fn memory_engine(
    config: impl FnOnce(ConversationEngineConfig) -> ConversationEngineConfig,
) -> ConversationEngine {
    let store = Arc::new(InMemoryConversationStore::new());
    ConversationEngine::new(config(ConversationEngineConfig::new("tester", store)))
}

fn start(engine: &ConversationEngine, messages: Vec<ConversationMessage>) -> Conversation {
    engine
        .create_conversation(CreateConversation {
            title: Some("t".into()),
            initial_messages: messages,
            ..Default::default()
        })
        .expect("create")
}

#[test]
fn conversation_lifecycle_with_and_without_initial_messages() {
    for store in [
        Arc::new(InMemoryConversationStore::new()) as Arc<dyn ConversationStore>,
        Arc::new(JournalConversationStore::new(Journal::memory())),
    ] {
        let engine = ConversationEngine::new(ConversationEngineConfig::new("a", store.clone()));
        let empty = engine
            .create_conversation(CreateConversation::default())
            .expect("create");
        assert_eq!(empty.agent, "a");
        assert!(
            store
                .get_messages(empty.id, Page::all())
                .expect("read")
                .is_empty()
        );

        let mut metadata = Metadata::new();
        metadata.insert("cohort".into(), json!("b"));
        let with = engine
            .create_conversation(CreateConversation {
                id: None,
                agent: Some("other".into()),
                subject_id: Some("user-7".into()),
                title: Some("Trip".into()),
                initial_messages: vec![
                    ConversationMessage::system("Be brief."),
                    ConversationMessage::user("Hi"),
                ],
                metadata,
            })
            .expect("create");
        let loaded = engine
            .get_conversation(with.id)
            .expect("get")
            .expect("exists");
        assert_eq!(loaded, with);
        assert_eq!(loaded.subject_id.as_deref(), Some("user-7"));
        let messages = store.get_messages(with.id, Page::all()).expect("read");
        assert_eq!(messages.len(), 2);
        assert!(messages.iter().all(|m| m.conversation_id == with.id));

        let mut updated = loaded.clone();
        updated.title = Some("Trip to Lyon".into());
        store.update_conversation(&updated).expect("update");
        let again = engine
            .get_conversation(with.id)
            .expect("get")
            .expect("exists");
        assert_eq!(again.title.as_deref(), Some("Trip to Lyon"));
        assert_eq!(
            engine
                .get_conversation(agent_journal::SessionId::new())
                .expect("get"),
            None
        );
    }
}

#[test]
fn a_turn_with_the_in_memory_store_and_a_mock_adapter() {
    let adapter = Recording::new("mock", "Hello there");
    let engine = memory_engine(|c| c.provider(adapter.clone(), "mock-1"));
    let conv = start(&engine, vec![ConversationMessage::user("Hi")]);
    let turn = engine.run_turn(conv.id, RunTurn::default()).expect("turn");
    assert_eq!(turn.status, TurnStatus::Succeeded);
    assert_eq!(turn.trigger_type.as_deref(), Some("user_message"));
    assert_eq!(turn.input_messages.len(), 1);
    assert_eq!(turn.input_messages[0].text(), "Hi");
    assert_eq!(turn.output_messages.len(), 1);
    assert_eq!(turn.output_messages[0].text(), "Hello there");
    assert_eq!(turn.output_messages[0].turn_id, Some(turn.id));
    assert!(turn.finished_at.is_some());
    assert_eq!(turn.provider_calls.len(), 1);
    let call = &turn.provider_calls[0];
    assert_eq!(
        (call.provider.as_str(), call.model.as_str()),
        ("mock", "mock-1")
    );
    assert_eq!(call.sent_messages, vec![turn.input_messages[0].id]);

    let stored = engine
        .store()
        .get_turn(conv.id, turn.id)
        .expect("get")
        .expect("stored");
    assert_eq!(stored, turn);
    let messages = engine
        .store()
        .get_messages(conv.id, Page::all())
        .expect("read");
    assert_eq!(messages.len(), 2);
    // The next turn's input is what came after this one.
    engine
        .append_messages(conv.id, &[ConversationMessage::user("And now?")])
        .expect("append");
    let second = engine.run_turn(conv.id, RunTurn::default()).expect("turn");
    assert_eq!(second.input_messages.len(), 1);
    assert_eq!(second.input_messages[0].text(), "And now?");
    let requests = adapter.requests();
    assert_eq!(
        requests[1].0.messages.len(),
        3,
        "the whole history by default"
    );
}

/// Keeps the last `n` messages.
struct LastN(usize);

impl HistoryBuilder for LastN {
    fn build_history(&self, ctx: &HistoryContext<'_>) -> Vec<ChatInputMessage> {
        let skip = ctx.messages.len().saturating_sub(self.0);
        ctx.messages[skip..]
            .iter()
            .map(ChatInputMessage::from)
            .collect()
    }
}

#[test]
fn a_custom_history_builder_limits_the_messages_sent() {
    let adapter = Recording::new("mock", "ok");
    let engine = memory_engine(|mut c| {
        c.history_builder = Some(Arc::new(LastN(2)));
        c.provider(adapter.clone(), "m")
    });
    let conv = start(
        &engine,
        (0..5)
            .map(|i| ConversationMessage::user(format!("u{i}")))
            .collect(),
    );
    engine.run_turn(conv.id, RunTurn::default()).expect("turn");
    let (request, _) = &adapter.requests()[0];
    let texts: Vec<String> = request.messages.iter().map(|m| m.text()).collect();
    assert_eq!(texts, ["u3", "u4"]);
}

#[test]
fn the_default_history_builder_limits_by_count_and_tokens_keeping_system_and_tool_pairs() {
    let adapter = Recording::new("mock", "ok");
    let engine = memory_engine(|mut c| {
        c.history_builder = Some(Arc::new(DefaultHistoryBuilder {
            max_messages: Some(3),
            max_tokens: None,
        }));
        c.provider(adapter.clone(), "m")
    });
    let mut call = ConversationMessage::assistant("");
    call.tool_calls = vec![agent_journal::ToolCallRecord::new("c1", "t", "{}")];
    let mut result = ConversationMessage::new(Role::Tool, "r");
    result.tool_call_id = Some("c1".into());
    let conv = start(
        &engine,
        vec![
            ConversationMessage::system("S"),
            ConversationMessage::user("u0"),
            call,
            result,
            ConversationMessage::assistant("a"),
            ConversationMessage::user("u1"),
        ],
    );
    engine.run_turn(conv.id, RunTurn::default()).expect("turn");
    let (request, _) = &adapter.requests()[0];
    let texts: Vec<String> = request.messages.iter().map(|m| m.text()).collect();
    // The last 3 would start at the tool result, whose call is cut off.
    assert_eq!(texts, ["S", "a", "u1"]);

    let by_tokens = DefaultHistoryBuilder {
        max_messages: None,
        max_tokens: Some(12),
    };
    let conversation = engine
        .get_conversation(conv.id)
        .expect("get")
        .expect("exists");
    // In append order (`get_messages` sorts by `created_at`, and the tool
    // messages above were made before "S").
    let window = engine.store().history(conv.id, None).expect("read");
    let history = by_tokens.build_history(&HistoryContext {
        conversation: &conversation,
        system: &window.system,
        summary: None,
        messages: &window.messages,
        next_turn_id: agent_journal::conversation::TurnId::new(),
        agent: "a",
    });
    let texts: Vec<String> = history.iter().map(|m| m.text()).collect();
    // 4 tokens each ("ok" is the first turn's answer): the last three fit in 12.
    assert_eq!(texts, ["S", "a", "u1", "ok"]);
}

/// Picks the provider named by the `tier` hint.
struct ByTier;

impl TurnPlanner for ByTier {
    fn plan_turn(&self, input: &PlanInput<'_>) -> Result<PlannedTurn, Error> {
        let tier = input
            .hints
            .get("tier")
            .and_then(|t| t.as_str())
            .unwrap_or("fast");
        let (provider, model) = match tier {
            "smart" => ("smart", "big-model"),
            _ => ("fast", "small-model"),
        };
        let mut parameters = Metadata::new();
        parameters.insert("temperature".into(), json!(0.5));
        Ok(PlannedTurn {
            provider: provider.into(),
            model: model.into(),
            parameters,
        })
    }
}

#[test]
fn a_custom_planner_chooses_providers_and_models_by_hints() {
    let fast = Recording::new("fast", "quick");
    let smart = Recording::new("smart", "deep");
    let engine = memory_engine(|mut c| {
        c.planner = Some(Arc::new(ByTier));
        c.provider(fast.clone(), "x").provider(smart.clone(), "y")
    });
    let conv = start(&engine, vec![ConversationMessage::user("q")]);
    let mut hints = Metadata::new();
    hints.insert("tier".into(), json!("smart"));
    let turn = engine
        .run_turn(
            conv.id,
            RunTurn {
                hints,
                ..Default::default()
            },
        )
        .expect("turn");
    assert_eq!(turn.output_messages[0].text(), "deep");
    assert_eq!(turn.provider_calls[0].model, "big-model");
    assert_eq!(
        turn.provider_calls[0].parameters.get("temperature"),
        Some(&json!(0.5))
    );
    assert_eq!(
        smart.requests()[0].0.parameters.get("temperature"),
        Some(&json!(0.5))
    );
    assert!(fast.requests().is_empty());
    engine
        .append_messages(conv.id, &[ConversationMessage::user("again")])
        .expect("append");
    let turn = engine.run_turn(conv.id, RunTurn::default()).expect("turn");
    assert_eq!(turn.output_messages[0].text(), "quick");
    assert_eq!(fast.requests()[0].0.model, "small-model");

    // The default planner honours the provider and model hints.
    let engine = memory_engine(|c| c.provider(fast.clone(), "x").provider(smart.clone(), "y"));
    let conv = start(&engine, vec![ConversationMessage::user("q")]);
    let mut hints = Metadata::new();
    hints.insert("provider".into(), json!("smart"));
    hints.insert("model".into(), json!("chosen"));
    let turn = engine
        .run_turn(
            conv.id,
            RunTurn {
                hints,
                ..Default::default()
            },
        )
        .expect("turn");
    assert_eq!(turn.provider_calls[0].provider, "smart");
    assert_eq!(turn.provider_calls[0].model, "chosen");
    let turn = {
        engine
            .append_messages(conv.id, &[ConversationMessage::user("q2")])
            .expect("append");
        engine.run_turn(conv.id, RunTurn::default()).expect("turn")
    };
    assert_eq!(
        (
            turn.provider_calls[0].provider.as_str(),
            turn.provider_calls[0].model.as_str()
        ),
        ("fast", "x")
    );
}

#[test]
fn every_hook_is_called_at_its_moment() {
    let log = Arc::new(Log::default());
    let engine = memory_engine(|mut c| {
        c.hooks = Some(log.clone());
        c.provider(Recording::new("mock", "fine"), "m")
    });
    let conv = start(&engine, vec![ConversationMessage::user("Hi")]);
    engine.run_turn(conv.id, RunTurn::default()).expect("turn");
    assert_eq!(
        log.lines(),
        ["created t", "before Pending", "success Succeeded 1"]
    );
}

#[test]
fn a_failing_adapter_marks_the_turn_failed_and_calls_after_turn_error() {
    for store in [
        Arc::new(InMemoryConversationStore::new()) as Arc<dyn ConversationStore>,
        Arc::new(JournalConversationStore::new(Journal::memory())),
    ] {
        let log = Arc::new(Log::default());
        let mut config =
            ConversationEngineConfig::new("a", store.clone()).provider(Arc::new(Failing), "m");
        config.hooks = Some(log.clone());
        let engine = ConversationEngine::new(config);
        let conv = start(&engine, vec![ConversationMessage::user("Hi")]);
        let err = engine
            .run_turn(conv.id, RunTurn::default())
            .expect_err("fails");
        let Error::TurnFailed { turn, message, .. } = &err else {
            panic!("expected TurnFailed, got {err:?}");
        };
        assert_eq!(message, "slow down");
        let turn = store
            .get_turn(conv.id, agent_journal::conversation::TurnId(*turn))
            .expect("get")
            .expect("stored");
        assert_eq!(turn.status, TurnStatus::Failed);
        let error = turn.error.clone().expect("error recorded");
        assert_eq!(error.code.as_deref(), Some("rate_limit_error"));
        assert_eq!(error.provider.as_deref(), Some("failing"));
        assert_eq!(error.raw["error"]["type"], "rate_limit_error");
        let call = &turn.provider_calls[0];
        let outcome = call.outcome.clone().expect("outcome");
        assert!(!outcome.ok);
        assert_eq!(outcome.status, Some(429));
        assert_eq!(outcome.error_category.as_deref(), Some("rate_limit"));
        assert_eq!(call.request_id.as_deref(), Some("req-9"));
        assert!(call.finished_at.is_some());
        let lines = log.lines();
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert!(lines[2].starts_with("error Failed turn "), "{lines:?}");
        assert!(lines[2].ends_with("failed: slow down"), "{lines:?}");
        assert!(engine.interrupted_turns(conv.id).expect("list").is_empty());
    }
}

#[test]
fn correlation_ids_extensions_outcome_and_timing_are_wired() {
    let adapter = Recording::new("mock", "ok");
    let engine = memory_engine(|c| c.provider(adapter.clone(), "m-1"));
    let conv = start(&engine, vec![ConversationMessage::user("one")]);
    let first = engine.run_turn(conv.id, RunTurn::default()).expect("turn");
    engine
        .append_messages(conv.id, &[ConversationMessage::user("two")])
        .expect("append");
    let second = engine
        .run_turn(
            conv.id,
            RunTurn {
                agent: Some("helper".into()),
                trigger_type: Some("tool_result".into()),
                ..Default::default()
            },
        )
        .expect("turn");
    let (_, options) = &adapter.requests()[1];
    let run_id = format!("{}:{}", conv.id, second.id);
    assert_eq!(options.agent, "helper");
    assert_eq!(options.agent_context.agent, "helper");
    assert_eq!(options.agent_context.run_id, run_id);
    assert_eq!(options.agent_context.correlation_id, run_id);
    let parent = format!("{}:{}", conv.id, first.id);
    assert_eq!(
        options.agent_context.parent_correlation_id.as_deref(),
        Some(parent.as_str())
    );
    let labels: BTreeMap<&str, &str> = options
        .agent_context
        .labels
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let conv_id = conv.id.to_string();
    let turn_id = second.id.to_string();
    assert_eq!(
        labels,
        BTreeMap::from([
            ("conversationId", conv_id.as_str()),
            ("turnId", turn_id.as_str()),
            ("provider", "mock"),
            ("model", "m-1"),
        ])
    );
    assert_eq!(options.extensions.get("ai.provider"), Some(&json!("mock")));
    assert_eq!(options.extensions.get("ai.model"), Some(&json!("m-1")));
    assert_eq!(
        options.extensions.get("ai.request_type"),
        Some(&json!("chat"))
    );
    assert_eq!(options.extensions.get("ai.streaming"), Some(&json!(false)));
    assert_eq!(second.trigger_type.as_deref(), Some("tool_result"));
    assert_eq!(second.agent, "helper");
    let call = &second.provider_calls[0];
    assert_eq!(call.correlation_id.as_deref(), Some(run_id.as_str()));
    assert_eq!(call.parent_correlation_id.as_deref(), Some(parent.as_str()));
    assert_eq!(
        call.request_metadata.get("ai.provider"),
        Some(&json!("mock"))
    );
    let outcome = call.outcome.clone().expect("outcome");
    assert!(outcome.ok);
    assert_eq!(outcome.attempts, 1);
    let finished = call.finished_at.expect("finished");
    assert!(call.started_at <= finished);
    assert!(second.started_at <= call.started_at);
    assert!(finished <= second.finished_at.expect("finished"));
    assert!(first.provider_calls[0].parent_correlation_id.is_none());
}

#[test]
fn streaming_delivers_chunks_to_the_hooks_and_records_the_whole_message() {
    let log = Arc::new(Log::default());
    let adapter = Arc::new(ScriptedAdapter::new(vec![vec![ScriptedReply::text(
        "one two three",
    )]]));
    let engine = memory_engine(|mut c| {
        c.hooks = Some(log.clone());
        c.streaming = true;
        c.provider(adapter, "s")
    });
    let conv = start(&engine, vec![ConversationMessage::user("count")]);
    let turn = engine.run_turn(conv.id, RunTurn::default()).expect("turn");
    assert_eq!(turn.output_messages[0].text(), "one two three");
    let chunks: String = log
        .lines()
        .iter()
        .filter_map(|l| l.strip_prefix("chunk "))
        .collect();
    assert_eq!(chunks, "one two three");
    assert_eq!(
        turn.provider_calls[0].request_metadata.get("ai.streaming"),
        Some(&json!(true))
    );
    let usage = turn.provider_calls[0].usage.clone().expect("usage");
    assert!(usage.output_tokens > 0);
    assert_eq!(turn.total_tokens(), usage.total());
}

#[test]
fn list_turns_and_get_messages_page_in_both_orders() {
    let engine = memory_engine(|c| c.provider(Recording::new("mock", "r"), "m"));
    let conv = start(&engine, vec![ConversationMessage::user("u0")]);
    let mut ids = Vec::new();
    for i in 1..=3 {
        ids.push(
            engine
                .run_turn(conv.id, RunTurn::default())
                .expect("turn")
                .id,
        );
        engine
            .append_messages(conv.id, &[ConversationMessage::user(format!("u{i}"))])
            .expect("append");
    }
    let store = engine.store();
    let asc: Vec<_> = store
        .list_turns(
            conv.id,
            Page {
                limit: Some(2),
                order: Order::Asc,
            },
        )
        .expect("list")
        .iter()
        .map(|t| t.id)
        .collect();
    assert_eq!(asc, ids[..2]);
    let desc: Vec<_> = store
        .list_turns(conv.id, Page::last(2))
        .expect("list")
        .iter()
        .map(|t| t.id)
        .collect();
    assert_eq!(desc, [ids[2], ids[1]]);
    let texts = |p| -> Vec<String> {
        store
            .get_messages(conv.id, p)
            .expect("read")
            .iter()
            .map(|m| m.text())
            .collect()
    };
    assert_eq!(texts(Page::last(3)), ["u3", "r", "u2"]);
    assert_eq!(
        texts(Page {
            limit: Some(2),
            order: Order::Asc
        }),
        ["u0", "r"]
    );
    assert_eq!(
        texts(Page {
            limit: None,
            order: Order::Desc
        })
        .len(),
        7
    );
}
