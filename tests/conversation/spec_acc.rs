//! agent-conversation-core conformance: the requirements of the spec that
//! no other test of this module shows (see the conformance document,
//! section 4). Each test names the spec's section it checks.

use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;
use agent_journal::conversation::{ConversationId, ProviderOperation, TurnError, TurnId};
use agent_journal::{TokenUsage, ToolCallRecord};

/// An adapter that, while it works, reads the turn back from the store
/// (what a second process would see), then answers with usage, a request
/// id, response metadata and a raw body.
struct Peeking {
    store: Arc<dyn ConversationStore>,
    seen: Mutex<Vec<(Option<ConversationTurn>, ProviderCallOptions)>>,
}

fn peeked_usage() -> TokenUsage {
    let mut breakdown = Metadata::new();
    breakdown.insert("cached_tokens".into(), json!(2));
    TokenUsage {
        input_tokens: 7,
        output_tokens: 3,
        total_tokens: Some(10),
        breakdown,
        ..TokenUsage::default()
    }
}

fn peeked_metadata() -> Metadata {
    let mut m = Metadata::new();
    m.insert("finish_reason".into(), json!("stop"));
    m.insert("model".into(), json!("peek-1-2025"));
    m
}

impl ProviderAdapter for Peeking {
    fn id(&self) -> &str {
        "peek"
    }

    fn send_chat(
        &self,
        _request: &ProviderChatRequest,
        options: &ProviderCallOptions,
    ) -> Result<ProviderChatResult, ProviderError> {
        let turn = self
            .store
            .get_turn(options.conversation_id, options.turn_id)
            .map_err(|e| ProviderError::new("client", e.to_string()))?;
        self.seen
            .lock()
            .expect("lock")
            .push((turn, options.clone()));
        let mut m = ConversationMessage::assistant("seen");
        m.provider_message_id = Some("prov-1".into());
        Ok(ProviderChatResult {
            messages: vec![m],
            usage: Some(peeked_usage()),
            raw: Some(json!({"id": "raw-1", "choices": []})),
            request_id: Some("req-1".into()),
            response_metadata: peeked_metadata(),
        })
    }
}

/// Sections 4.4, 4.3, 6.3 and 7.5 (runTurn workflow, steps 2, 7 and 10):
/// the turn is stored `running` and its provider call record is stored
/// with `startedAt` and no `finishedAt` before the adapter is called; the
/// adapter is told the conversation and turn ids; afterwards the record
/// holds the outcome, the request id, the response metadata and the token
/// usage (input, output, total, breakdown), which survive a reopen.
#[test]
fn a_turn_is_stored_running_with_its_call_open_while_the_adapter_works() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("j.db");
    let on_disk: Arc<dyn ConversationStore> = Arc::new(JournalConversationStore::new(
        Journal::open(&path).expect("open"),
    ));
    let mut last = None;
    for store in [
        Arc::new(InMemoryConversationStore::new()) as Arc<dyn ConversationStore>,
        on_disk.clone(),
    ] {
        let adapter = Arc::new(Peeking {
            store: store.clone(),
            seen: Mutex::new(Vec::new()),
        });
        let engine = ConversationEngine::new(
            ConversationEngineConfig::new("a", store.clone()).provider(adapter.clone(), "peek-1"),
        );
        let conv = start(&engine, vec![ConversationMessage::user("Hi")]);
        let turn = engine.run_turn(conv.id, RunTurn::default()).expect("turn");
        let seen = adapter.seen.lock().expect("lock").clone();
        assert_eq!(seen.len(), 1);
        let (during, options) = &seen[0];
        assert_eq!(options.conversation_id, conv.id);
        assert_eq!(options.turn_id, turn.id);
        assert_eq!(options.agent, "a");
        let during = during.as_ref().expect("the turn is stored before the call");
        assert_eq!(during.status, TurnStatus::Running);
        assert_eq!(during.finished_at, None);
        assert_eq!(during.input_messages, turn.input_messages);
        assert!(during.output_messages.is_empty());
        assert_eq!(during.provider_calls.len(), 1, "the call is recorded open");
        let open = &during.provider_calls[0];
        let call = &turn.provider_calls[0];
        assert_eq!(open.id, call.id);
        assert_eq!(open.started_at, call.started_at);
        assert_eq!(
            open.finished_at, None,
            "finishedAt omitted while in progress"
        );
        assert_eq!(open.outcome, None);
        assert_eq!(open.usage, None);

        assert_eq!(call.conversation_id, conv.id);
        assert_eq!(call.turn_id, turn.id);
        assert_eq!(call.operation, ProviderOperation::Chat);
        assert_eq!(
            (call.provider.as_str(), call.model.as_str()),
            ("peek", "peek-1")
        );
        assert_eq!(call.request_id.as_deref(), Some("req-1"));
        // The response metadata is kept as the adapter gave it; the raw
        // body is not recorded.
        assert_eq!(call.response_metadata, peeked_metadata());
        assert_eq!(call.usage, Some(peeked_usage()));
        assert!(call.outcome.as_ref().is_some_and(|o| o.ok));
        let finished = call.finished_at.expect("finished");
        assert!(call.started_at <= finished);
        assert_eq!(turn.status, TurnStatus::Succeeded);
        assert_eq!(
            turn.output_messages[0].provider_message_id.as_deref(),
            Some("prov-1")
        );
        assert_eq!(
            store.get_turn(conv.id, turn.id).expect("get"),
            Some(turn.clone())
        );
        last = Some((conv.id, turn));
    }
    drop(on_disk);
    let (id, turn) = last.expect("ran");
    let store = JournalConversationStore::new(Journal::open(&path).expect("reopen"));
    let again = store.get_turn(id, turn.id).expect("get").expect("kept");
    assert_eq!(again.provider_calls[0].usage, Some(peeked_usage()));
    assert_eq!(again, turn);
}

/// Sections 4.1, 4.2 and 6.1: the five roles by their spec names; a
/// message's id, role, content (text or structured), name, createdAt and
/// metadata are stored as given and sent (role, content, name) as
/// `ChatInputMessage`s; the provider's message id is kept; ids are UUIDv7.
#[test]
fn every_role_name_and_content_is_stored_and_sent_as_given() {
    use Role::{Assistant, Other, System, Tool, User};
    let roles = [System, User, Assistant, Tool, Other];
    let names: Vec<&str> = roles.iter().map(Role::as_str).collect();
    assert_eq!(names, ["system", "user", "assistant", "tool", "other"]);
    for r in roles {
        assert_eq!(serde_json::to_value(r).expect("json"), json!(r.as_str()));
    }

    let adapter = Recording::new("mock", "ok");
    let engine = memory_engine(|c| c.provider(adapter.clone(), "m"));
    // Made in the order they are given: `get_messages` sorts by createdAt.
    let system = ConversationMessage::system("Be brief.");
    let mut named = ConversationMessage::user("Hi");
    named.name = Some("alice".into());
    let mut call = ConversationMessage::assistant("");
    call.tool_calls = vec![ToolCallRecord::new("c1", "lookup", "{}")];
    let mut result = ConversationMessage::new(Tool, "found");
    result.name = Some("lookup".into());
    result.tool_call_id = Some("c1".into());
    let mut other = ConversationMessage::json(Other, json!({"event": "checked_in", "n": [1, 2.5]}));
    other.name = Some("ui".into());
    other.metadata.insert("hint".into(), json!("badge"));
    let given = vec![system, named, call, result, other];
    let conv = start(&engine, given.clone());
    let turn = engine.run_turn(conv.id, RunTurn::default()).expect("turn");

    let stored = engine
        .store()
        .get_messages(conv.id, Page::all())
        .expect("read");
    assert_eq!(stored.len(), given.len() + 1);
    for (s, g) in stored.iter().zip(&given) {
        assert_eq!(s.conversation_id, conv.id);
        assert_eq!(
            (s.id, s.role, &s.content, &s.name, s.created_at, &s.metadata),
            (g.id, g.role, &g.content, &g.name, g.created_at, &g.metadata)
        );
    }
    assert_eq!(stored[5].provider_message_id.as_deref(), Some("msg-1"));
    let created = serde_json::to_value(&stored[0]).expect("json")["created_at"].clone();
    let created = created.as_str().expect("an ISO 8601 string");
    assert_eq!(
        chrono::DateTime::parse_from_rfc3339(created).expect("RFC 3339"),
        stored[0].created_at
    );

    let (request, _) = &adapter.requests()[0];
    let sent: Vec<_> = request
        .messages
        .iter()
        .map(|m| (m.role, m.content.clone(), m.name.clone()))
        .collect();
    let expected: Vec<_> = given
        .iter()
        .map(|m| (m.role, m.content.clone(), m.name.clone()))
        .collect();
    assert_eq!(sent, expected);

    assert_eq!(conv.id.0.get_version_num(), 7);
    assert_eq!(turn.id.0.get_version_num(), 7);
    assert_eq!(stored[0].id.0.get_version_num(), 7);
    assert_eq!(turn.id.to_string().parse::<TurnId>().ok(), Some(turn.id));
}

/// What a history builder was shown: the conversation's id and title, the
/// turn's id and agent, how many messages and leading system messages.
type HistoryShown = (ConversationId, Option<String>, TurnId, String, usize, usize);

/// What a history builder and a planner were shown.
#[derive(Default)]
struct Spy {
    history: Mutex<Vec<HistoryShown>>,
    plans: Mutex<Vec<(ConversationId, String, Metadata)>>,
}

impl HistoryBuilder for Spy {
    fn build_history(&self, ctx: &HistoryContext<'_>) -> Vec<ChatInputMessage> {
        self.history.lock().expect("lock").push((
            ctx.conversation.id,
            ctx.conversation.title.clone(),
            ctx.next_turn_id,
            ctx.agent.to_owned(),
            ctx.messages.len(),
            ctx.system.len(),
        ));
        ctx.system
            .iter()
            .chain(ctx.messages)
            .map(ChatInputMessage::from)
            .collect()
    }
}

impl TurnPlanner for Spy {
    fn plan_turn(&self, input: &PlanInput<'_>) -> Result<PlannedTurn, Error> {
        self.plans.lock().expect("lock").push((
            input.conversation.id,
            input.agent.to_owned(),
            input.hints.clone(),
        ));
        Ok(PlannedTurn {
            provider: "mock".into(),
            model: "m".into(),
            parameters: Metadata::new(),
        })
    }
}

/// Sections 7.2 and 7.3: the history builder is given the conversation,
/// its stored messages (the leading system messages apart from the rest),
/// the id of the turn being run and its agent; the planner the
/// conversation, the agent and the caller's hints.
#[test]
fn the_history_builder_and_planner_see_the_conversation_the_turn_and_the_agent() {
    let spy = Arc::new(Spy::default());
    let adapter = Recording::new("mock", "ok");
    let engine = memory_engine(|mut c| {
        c.history_builder = Some(spy.clone());
        c.planner = Some(spy.clone());
        c.provider(adapter.clone(), "m")
    });
    let conv = start(
        &engine,
        vec![
            ConversationMessage::system("S"),
            ConversationMessage::user("u0"),
            ConversationMessage::user("u1"),
        ],
    );
    let mut hints = Metadata::new();
    hints.insert("tier".into(), json!("smart"));
    let turn = engine
        .run_turn(
            conv.id,
            RunTurn {
                agent: Some("helper".into()),
                hints: hints.clone(),
                ..Default::default()
            },
        )
        .expect("turn");
    assert_eq!(
        *spy.history.lock().expect("lock"),
        vec![(conv.id, Some("t".into()), turn.id, "helper".into(), 2, 1)]
    );
    assert_eq!(
        *spy.plans.lock().expect("lock"),
        vec![(conv.id, "helper".into(), hints.clone())]
    );
    let texts: Vec<String> = adapter.requests()[0]
        .0
        .messages
        .iter()
        .map(|m| m.text())
        .collect();
    assert_eq!(
        texts,
        ["S", "u0", "u1"],
        "what the builder returned is sent"
    );
    // The hints reach the adapter too, as its call options' metadata.
    assert_eq!(adapter.requests()[0].1.metadata, hints);
}

/// Sections 4.6 and 7.5 (step "Persist turn & conversation updatedAt"):
/// a turn moves the conversation's `updatedAt` on, whether it succeeds or
/// fails; `createdAt` stays.
#[test]
fn a_turn_moves_the_conversations_updated_at_on_whether_it_succeeds_or_fails() {
    let adapter = Arc::new(ScriptedAdapter::new(vec![
        vec![ScriptedReply::text("ok")],
        vec![ScriptedReply::Fail {
            message: "down".into(),
            code: "503".into(),
        }],
    ]));
    let engine = memory_engine(|c| c.provider(adapter, "s"));
    let conv = start(&engine, vec![ConversationMessage::user("q1")]);
    assert_eq!(conv.created_at, conv.updated_at);
    let read = || {
        engine
            .get_conversation(conv.id)
            .expect("get")
            .expect("exists")
    };
    std::thread::sleep(std::time::Duration::from_millis(3));
    let turn = engine.run_turn(conv.id, RunTurn::default()).expect("turn");
    let after_success = read();
    assert!(after_success.updated_at > conv.updated_at);
    assert!(after_success.updated_at >= turn.finished_at.expect("finished"));
    assert_eq!(after_success.created_at, conv.created_at);

    engine
        .append_messages(conv.id, &[ConversationMessage::user("q2")])
        .expect("append");
    std::thread::sleep(std::time::Duration::from_millis(3));
    let err = engine
        .run_turn(conv.id, RunTurn::default())
        .expect_err("the script fails");
    assert!(matches!(err, Error::TurnFailed { .. }), "{err}");
    let after_failure = read();
    assert!(after_failure.updated_at > after_success.updated_at);
    assert_eq!(after_failure.created_at, conv.created_at);
}

/// Sections 6.2 and 6.3: an adapter that does not support streaming
/// (`supportsStreaming` false, the default) is called with `send_chat`
/// even when the engine streams; the trait's default `stream_chat` falls
/// back to `send_chat` and delivers each message as one complete chunk.
#[test]
fn an_adapter_that_does_not_stream_is_called_with_send_chat() {
    let adapter = Recording::new("mock", "whole answer");
    assert!(!adapter.supports_streaming());
    assert!(ScriptedAdapter::new(Vec::new()).supports_streaming());
    let log = Arc::new(Log::default());
    let engine = memory_engine(|mut c| {
        c.streaming = true;
        c.hooks = Some(log.clone());
        c.provider(adapter.clone(), "m")
    });
    let conv = start(&engine, vec![ConversationMessage::user("Hi")]);
    let turn = engine.run_turn(conv.id, RunTurn::default()).expect("turn");
    assert_eq!(turn.output_messages[0].text(), "whole answer");
    let requests = adapter.requests();
    assert_eq!(requests.len(), 1);
    let (request, options) = &requests[0];
    assert_eq!(options.extensions.get("ai.streaming"), Some(&json!(false)));
    assert!(log.lines().iter().all(|l| !l.starts_with("chunk")));

    let mut chunks = Vec::new();
    let result = adapter
        .stream_chat(request, options, &mut |c| chunks.push(c.clone()))
        .expect("the default falls back to send_chat");
    assert_eq!(result.messages[0].text(), "whole answer");
    assert_eq!(
        chunks,
        vec![ProviderStreamChunk {
            delta: Some(json!("whole answer")),
            is_message_complete: true,
            usage: None,
            raw: None,
        }]
    );
}

/// A planner that refuses every turn.
struct Refuses;

impl TurnPlanner for Refuses {
    fn plan_turn(&self, _: &PlanInput<'_>) -> Result<PlannedTurn, Error> {
        Err(Error::InvalidInput("no route for this turn".into()))
    }
}

/// Section 7.5 (error handling), beyond a throwing adapter: a planner that
/// fails, or a plan naming a provider that is not configured, marks the
/// turn failed with its error, calls `afterTurnError`, and `runTurn`
/// returns the error; no provider is called.
#[test]
fn a_failing_planner_or_an_unknown_provider_fails_the_turn() {
    for (planner, hint, code) in [
        (
            Some(Arc::new(Refuses) as Arc<dyn TurnPlanner>),
            None,
            "plan",
        ),
        (None, Some("ghost"), "unknown_provider"),
    ] {
        let log = Arc::new(Log::default());
        let adapter = Recording::new("mock", "never");
        let engine = memory_engine(|mut c| {
            c.planner = planner;
            c.hooks = Some(log.clone());
            c.provider(adapter.clone(), "m")
        });
        let conv = start(&engine, vec![ConversationMessage::user("Hi")]);
        let mut hints = Metadata::new();
        if let Some(p) = hint {
            hints.insert("provider".into(), json!(p));
        }
        let err = engine
            .run_turn(
                conv.id,
                RunTurn {
                    hints,
                    ..Default::default()
                },
            )
            .expect_err("fails");
        let Error::TurnFailed { turn, .. } = &err else {
            panic!("expected TurnFailed, got {err:?}");
        };
        let turn = engine
            .store()
            .get_turn(conv.id, TurnId(*turn))
            .expect("get")
            .expect("stored");
        assert_eq!(turn.status, TurnStatus::Failed, "{code}");
        let error: TurnError = turn.error.clone().expect("error recorded");
        assert_eq!(error.code.as_deref(), Some(code));
        assert!(turn.finished_at.is_some());
        assert!(turn.provider_calls.is_empty());
        assert!(adapter.requests().is_empty());
        let lines = log.lines();
        assert!(
            lines
                .last()
                .is_some_and(|l| l.starts_with("error Failed turn ")),
            "{lines:?}"
        );
    }
}

/// Section 4.5 (`metadata`) and section 5.1 (`updateTurn`, `getTurn`,
/// `listTurns`): a turn's free-form metadata is stored and read back by
/// both stores; the engine records the caller's hints there.
#[test]
fn turn_metadata_is_stored_and_read_back_by_both_stores() {
    for store in [
        Arc::new(InMemoryConversationStore::new()) as Arc<dyn ConversationStore>,
        Arc::new(JournalConversationStore::new(Journal::memory())),
    ] {
        let engine = ConversationEngine::new(
            ConversationEngineConfig::new("a", store.clone())
                .provider(Recording::new("mock", "ok"), "m"),
        );
        let conv = start(&engine, vec![ConversationMessage::user("Hi")]);
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
        assert_eq!(turn.metadata.get("hints"), Some(&json!({"tier": "smart"})));
        let mut changed = turn.clone();
        changed.metadata.insert(
            "routing".into(),
            json!({"reason": "cheapest", "score": 0.25}),
        );
        store.update_turn(&changed).expect("update");
        let got = store
            .get_turn(conv.id, turn.id)
            .expect("get")
            .expect("kept");
        assert_eq!(got.metadata, changed.metadata);
        let listed = store.list_turns(conv.id, Page::all()).expect("list");
        assert_eq!(listed, vec![got]);
    }
}

/// An adapter that counts its calls and answers with the call number.
struct Counting(AtomicUsize);

impl ProviderAdapter for Counting {
    fn id(&self) -> &str {
        "counting"
    }

    fn send_chat(
        &self,
        _: &ProviderChatRequest,
        _: &ProviderCallOptions,
    ) -> Result<ProviderChatResult, ProviderError> {
        let n = self.0.fetch_add(1, Ordering::SeqCst) + 1;
        Ok(ProviderChatResult {
            messages: vec![ConversationMessage::assistant(format!("answer {n}"))],
            ..Default::default()
        })
    }
}

/// Section 7.5 (`runTurn` workflow, first and ninth steps) and section 4.5
/// (`inputMessages`, `outputMessages`): each turn's input is the messages
/// that triggered it (appended since the previous turn), its output what
/// the provider answered, appended to the store in order; a turn with no
/// new input still runs (a `system_trigger`).
#[test]
fn each_turn_takes_the_messages_that_triggered_it_and_appends_its_output() {
    let engine = memory_engine(|c| c.provider(Arc::new(Counting(AtomicUsize::new(0))), "m"));
    let conv = start(
        &engine,
        vec![
            ConversationMessage::system("S"),
            ConversationMessage::user("u1"),
        ],
    );
    let first = engine.run_turn(conv.id, RunTurn::default()).expect("turn");
    let texts = |ms: &[ConversationMessage]| ms.iter().map(|m| m.text()).collect::<Vec<_>>();
    assert_eq!(texts(&first.input_messages), ["S", "u1"]);
    assert_eq!(texts(&first.output_messages), ["answer 1"]);
    engine
        .append_messages(
            conv.id,
            &[
                ConversationMessage::user("u2"),
                ConversationMessage::user("u3"),
            ],
        )
        .expect("append");
    let second = engine.run_turn(conv.id, RunTurn::default()).expect("turn");
    assert_eq!(texts(&second.input_messages), ["u2", "u3"]);
    let third = engine
        .run_turn(
            conv.id,
            RunTurn {
                trigger_type: Some("system_trigger".into()),
                ..Default::default()
            },
        )
        .expect("turn");
    assert!(third.input_messages.is_empty());
    assert_eq!(third.trigger_type.as_deref(), Some("system_trigger"));
    let all = engine
        .store()
        .get_messages(conv.id, Page::all())
        .expect("read");
    assert_eq!(
        texts(&all),
        ["S", "u1", "answer 1", "u2", "u3", "answer 2", "answer 3"]
    );
    assert!(
        all[2..]
            .iter()
            .filter(|m| m.role == Role::Assistant)
            .all(|m| m.turn_id.is_some())
    );
}
