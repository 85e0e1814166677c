//! Compaction: each compactor, the split one with a custom trigger, the
//! engine sending less while the journal keeps everything, summaries, time
//! travel, and property tests on boundaries.

use agent_journal::conversation::{
    Compaction, CompactionRequest, CompactionStrategy, CompactionTrigger, Compactor,
    CompositeCompactor, CompositeTrigger, MessageLimitCompactor, SUMMARY_PREFIX, SplitCompactor,
    SummarizingStrategy, TokenLimitCompactor, advance_to_first_user_message,
};
use agent_journal::provider::ConversationFormat;
use agent_journal::provider::validate;
use agent_journal::{EvaluationId, TokenUsage, ToolCallRecord};
use proptest::prelude::*;

use super::*;

fn request<'a>(
    messages: &'a [ConversationMessage],
    usage: Option<&'a TokenUsage>,
) -> CompactionRequest<'a> {
    CompactionRequest {
        state_messages: messages,
        leading_system: &[],
        summary: None,
        last_usage: usage,
        provider: "p",
    }
}

/// `n` exchanges: user, assistant with a tool call, its result, assistant.
fn exchanges(n: usize) -> Vec<ConversationMessage> {
    let mut out = Vec::new();
    for i in 0..n {
        out.push(ConversationMessage::user(format!("question {i}")));
        let mut call = ConversationMessage::assistant("");
        call.tool_calls = vec![ToolCallRecord::new(format!("c{i}"), "t", "{}")];
        out.push(call);
        let mut result = ConversationMessage::new(Role::Tool, "result");
        result.tool_call_id = Some(format!("c{i}").into());
        out.push(result);
        out.push(ConversationMessage::assistant(format!("answer {i}")));
    }
    out
}

fn usage(total: u64) -> TokenUsage {
    TokenUsage {
        input_tokens: total - 10,
        output_tokens: 10,
        ..TokenUsage::default()
    }
}

#[test]
fn the_message_limit_cuts_at_the_first_user_message_of_the_last_n() {
    let m = exchanges(5); // 20 messages
    let c = MessageLimitCompactor { max_messages: 6 };
    // The last 6 start inside exchange 3 (at its tool result): cut at exchange 4.
    let done = c
        .compact(&request(&m, None))
        .expect("ok")
        .expect("compacts");
    assert_eq!(done.keep_from, 16);
    assert_eq!(done.strategy, "message_limit");
    assert_eq!(m[done.keep_from].text(), "question 4");
    assert_eq!(
        c.compact(&request(&m[..6], None)).expect("ok"),
        None,
        "under the limit"
    );
    assert_eq!(advance_to_first_user_message(&m, 17), None);
    assert_eq!(advance_to_first_user_message(&m, 4), Some(4));
}

#[test]
fn the_token_limit_follows_the_reported_usage_down_to_its_target() {
    let m = exchanges(8); // 32 messages of about the same size
    let c = TokenLimitCompactor {
        max_tokens: 800,
        target_tokens: None,
    };
    assert_eq!(c.target(), 600);
    assert_eq!(
        c.compact(&request(&m, Some(&usage(700)))).expect("ok"),
        None
    );
    assert_eq!(
        c.compact(&request(&m, None)).expect("ok"),
        None,
        "no usage, no trigger"
    );
    let done = c
        .compact(&request(&m, Some(&usage(1000))))
        .expect("ok")
        .expect("compacts");
    assert_eq!(done.strategy, "token_limit");
    assert_eq!(m[done.keep_from].role, Role::User);
    // About 40% of 1000 tokens must go: the cut is after at least that share.
    assert!(done.keep_from * 10 >= m.len() * 4, "{}", done.keep_from);
    assert!(done.keep_from < m.len());
}

#[test]
fn a_composite_compacts_if_any_limit_is_exceeded() {
    let m = exchanges(5);
    let c = CompositeCompactor {
        compactors: vec![
            Arc::new(TokenLimitCompactor {
                max_tokens: 10_000,
                target_tokens: Some(5_000),
            }),
            Arc::new(MessageLimitCompactor { max_messages: 8 }),
        ],
    };
    let done = c
        .compact(&request(&m, Some(&usage(100))))
        .expect("ok")
        .expect("compacts");
    assert_eq!(done.strategy, "message_limit");
    assert_eq!(done.keep_from, 12);
    let none = CompositeCompactor {
        compactors: vec![Arc::new(MessageLimitCompactor { max_messages: 50 })],
    };
    assert_eq!(none.compact(&request(&m, None)).expect("ok"), None);
}

/// The seed's custom trigger: every 10 messages.
struct Every10;

impl CompactionTrigger for Every10 {
    fn should_compact(&self, r: &CompactionRequest<'_>) -> bool {
        r.state_messages.len() >= 10
    }
}

#[test]
fn a_split_compactor_runs_its_strategy_when_its_trigger_fires() {
    let c = SplitCompactor {
        trigger: Arc::new(Every10),
        strategy: Arc::new(MessageLimitCompactor { max_messages: 5 }),
    };
    let m = exchanges(2); // 8 messages: the trigger does not fire
    assert_eq!(c.compact(&request(&m, None)).expect("ok"), None);
    let m = exchanges(3); // 12: it fires; the last 5 start at a tool call
    let done = c
        .compact(&request(&m, None))
        .expect("ok")
        .expect("compacts");
    assert_eq!(done.keep_from, 8);
    // The built-in compactors are triggers too, and triggers compose.
    let any = CompositeTrigger {
        triggers: vec![
            Arc::new(MessageLimitCompactor { max_messages: 100 }),
            Arc::new(TokenLimitCompactor {
                max_tokens: 50,
                target_tokens: None,
            }),
        ],
    };
    assert!(any.should_compact(&request(&m, Some(&usage(60)))));
    assert!(!any.should_compact(&request(&m, Some(&usage(40)))));
    let strategy: &dyn CompactionStrategy = &MessageLimitCompactor { max_messages: 4 };
    assert_eq!(
        strategy
            .apply(&request(&m, None))
            .expect("ok")
            .map(|c| c.keep_from),
        Some(8)
    );
}

#[test]
fn the_engine_sends_less_after_a_compaction_and_the_journal_keeps_everything() {
    let adapter = Recording::new("mock", "ok");
    let store = Arc::new(JournalConversationStore::new(Journal::memory()));
    let mut config =
        ConversationEngineConfig::new("a", store.clone()).provider(adapter.clone(), "m");
    config.compactor = Some(Arc::new(MessageLimitCompactor { max_messages: 4 }));
    let engine = ConversationEngine::new(config);
    let conv = start(
        &engine,
        vec![
            ConversationMessage::system("S"),
            ConversationMessage::user("u0"),
        ],
    );
    for i in 1..=4 {
        engine.run_turn(conv.id, RunTurn::default()).expect("turn");
        engine
            .append_messages(conv.id, &[ConversationMessage::user(format!("u{i}"))])
            .expect("append");
    }
    let sent: Vec<Vec<String>> = adapter
        .requests()
        .iter()
        .map(|(r, _)| r.messages.iter().map(|m| m.text()).collect())
        .collect();
    assert_eq!(sent[0], ["S", "u0"]);
    assert_eq!(sent[1], ["S", "u0", "ok", "u1"]);
    assert_eq!(sent[2], ["S", "u0", "ok", "u1", "ok", "u2"]);
    // After turn 3 the history (6 messages) went over 4: sent from the
    // first user message of the last four on.
    assert_eq!(sent[3], ["S", "u1", "ok", "u2", "ok", "u3"]);
    let session = store.session(conv.id).expect("session");
    let state = session.state_cloned();
    let log = state.conversation_log();
    assert_eq!(log.messages().len(), 10, "nothing is deleted");
    assert!(!log.compactions().is_empty());
    let sendable: Vec<String> = log.sendable().iter().map(|m| m.text()).collect();
    assert_eq!(sendable, ["u2", "ok", "u3", "ok", "u4"]);
    // Time travel: before the first compaction everything was sendable.
    let first = session
        .events(..)
        .expect("events")
        .into_iter()
        .find(|e| e.event.kind() == "HistoryCompacted")
        .expect("a compaction event")
        .seq;
    let before = session.state_at(first - 1).expect("state");
    assert_eq!(before.conversation_log().sendable().len(), 6);
    let after = session.state_at(first).expect("state");
    assert_eq!(after.conversation_log().sendable().len(), 4);
    // Each call's record names the messages it was built from.
    let calls = log.calls();
    assert_eq!(calls[3].sent_messages.len(), 6);
}

#[test]
fn a_summarising_strategy_records_its_summary_and_sends_it_in_place() {
    let adapter = Recording::new("mock", "ok");
    let summarizer = Recording::new("sum", "They talked about u0 and u1.");
    let options = adapter_options();
    let store = Arc::new(JournalConversationStore::new(Journal::memory()));
    let mut config =
        ConversationEngineConfig::new("a", store.clone()).provider(adapter.clone(), "m");
    config.compactor = Some(Arc::new(SplitCompactor {
        trigger: Arc::new(MessageLimitCompactor { max_messages: 3 }),
        strategy: Arc::new(SummarizingStrategy {
            cut: Arc::new(MessageLimitCompactor { max_messages: 3 }),
            adapter: summarizer.clone(),
            model: "small".into(),
            instructions: agent_journal::conversation::SUMMARY_INSTRUCTIONS.into(),
            options,
        }),
    }));
    let engine = ConversationEngine::new(config);
    let conv = start(
        &engine,
        vec![
            ConversationMessage::system("S"),
            ConversationMessage::user("u0"),
        ],
    );
    for i in 1..=3 {
        engine.run_turn(conv.id, RunTurn::default()).expect("turn");
        engine
            .append_messages(conv.id, &[ConversationMessage::user(format!("u{i}"))])
            .expect("append");
    }
    let (summary_request, _) = &summarizer.requests()[0];
    assert!(summary_request.messages[1].text().contains("user: u0"));
    let (last, _) = adapter.requests().pop().expect("request");
    assert_eq!(last.messages[0].text(), "S");
    assert_eq!(
        last.messages[1].text(),
        format!("{SUMMARY_PREFIX}They talked about u0 and u1.")
    );
    assert_eq!(last.messages[1].source, None);
    // The request of that call, rebuilt from its record, is what was sent.
    let session = store.session(conv.id).expect("session");
    let state = session.state();
    let call = state.conversation_log().calls().last().expect("call").id;
    let rebuilt = agent_journal::conversation::rebuild_request(state.conversation_log(), call)
        .expect("rebuilt");
    assert_eq!(rebuilt, last);
}

fn adapter_options() -> ProviderCallOptions {
    let engine_side = Recording::new("x", "y");
    let engine = memory_engine(|c| c.provider(engine_side.clone(), "m"));
    let conv = start(&engine, vec![ConversationMessage::user("hi")]);
    engine.run_turn(conv.id, RunTurn::default()).expect("turn");
    engine_side.requests().remove(0).1
}

/// A conversation: exchanges of a user message, then an assistant message
/// with 0..3 tool calls answered, sometimes a system message between.
fn conversation() -> impl Strategy<Value = Vec<ConversationMessage>> {
    prop::collection::vec((0usize..3, any::<bool>(), 1usize..40), 1..12).prop_map(|turns| {
        let mut out = vec![ConversationMessage::system("S")];
        for (i, (calls, note, len)) in turns.into_iter().enumerate() {
            if note && i > 0 {
                out.push(ConversationMessage::system(format!("event {i}")));
            }
            out.push(ConversationMessage::user("u".repeat(len)));
            if calls > 0 {
                let mut a = ConversationMessage::assistant("");
                a.tool_calls = (0..calls)
                    .map(|k| ToolCallRecord::new(format!("c{i}_{k}"), "t", "{}"))
                    .collect();
                out.push(a);
                for k in 0..calls {
                    let mut r = ConversationMessage::new(Role::Tool, "r".repeat(len));
                    r.tool_call_id = Some(format!("c{i}_{k}").into());
                    out.push(r);
                }
            }
            out.push(ConversationMessage::assistant("a".repeat(len)));
        }
        out
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn any_compaction_keeps_a_valid_history_starting_at_a_user_message(
        messages in conversation(),
        max in 1usize..20,
        tokens in 1u64..2000,
        used in 1u64..4000,
    ) {
        let state = &messages[1..];
        let u = usage(used.max(11));
        let compactors: Vec<Box<dyn Compactor>> = vec![
            Box::new(MessageLimitCompactor { max_messages: max }),
            Box::new(TokenLimitCompactor { max_tokens: tokens, target_tokens: None }),
        ];
        for c in &compactors {
            let r = CompactionRequest {
                state_messages: state,
                leading_system: &messages[..1],
                summary: None,
                last_usage: Some(&u),
                provider: "p",
            };
            let Some(Compaction { keep_from, .. }) = c.compact(&r).expect("no error") else {
                continue;
            };
            prop_assert!(keep_from > 0 && keep_from < state.len());
            prop_assert_eq!(state[keep_from].role, Role::User);
            let kept: Vec<_> = messages[..1].iter().chain(&state[keep_from..]).collect();
            let eval = EvaluationId::new();
            let inner: Vec<_> = kept.iter().enumerate().map(|(i, m)| m.to_inner(eval, i as u64)).collect();
            let openai = ConversationFormat::OpenAi.to_json(&inner);
            prop_assert!(validate::openai(openai.as_array().expect("array")).is_ok());
            prop_assert!(validate::anthropic(&ConversationFormat::Anthropic.to_json(&inner)).is_ok());
        }
    }

    #[test]
    fn the_journal_never_loses_a_message_to_compaction(
        messages in conversation(),
        max in 1usize..10,
    ) {
        let store = JournalConversationStore::new(Journal::memory());
        let conv = Conversation {
            id: agent_journal::SessionId::new(),
            agent: "a".into(),
            subject_id: None,
            title: None,
            created_at: agent_journal::format::now(),
            updated_at: agent_journal::format::now(),
            metadata: Metadata::new(),
        };
        store.create_conversation(&conv, &messages).expect("create");
        let window = store.history(conv.id, None).expect("history");
        let r = CompactionRequest {
            state_messages: &window.messages,
            leading_system: &window.system,
            summary: None,
            last_usage: None,
            provider: "p",
        };
        let limit = MessageLimitCompactor { max_messages: max };
        if let Some(done) = limit.compact(&r).expect("ok") {
            let record = agent_journal::conversation::CompactionRecord {
                turn_id: None,
                first_kept: window.messages[done.keep_from].id,
                strategy: done.strategy,
                summary: None,
                messages_before: window.messages.len() as u64,
                messages_after: (window.messages.len() - done.keep_from) as u64,
                tokens_before: None,
                at: agent_journal::format::now(),
            };
            store.record_compaction(conv.id, &record).expect("record");
            let after = store.history(conv.id, None).expect("history");
            // What is sent is a suffix, at a user message.
            prop_assert_eq!(&after.messages[..], &window.messages[done.keep_from..]);
            prop_assert_eq!(after.messages[0].role, Role::User);
        }
        let all = store.get_messages(conv.id, Page::all()).expect("read");
        prop_assert_eq!(all.len(), messages.len());
    }
}

/// An adapter whose answers end as `ends` says, in turn (response
/// metadata as the adapters fill it).
struct Ending {
    ends: Mutex<Vec<Metadata>>,
}

impl ProviderAdapter for Ending {
    fn id(&self) -> &str {
        "ending"
    }

    fn send_chat(
        &self,
        _request: &ProviderChatRequest,
        _options: &ProviderCallOptions,
    ) -> Result<ProviderChatResult, ProviderError> {
        let response_metadata = self.ends.lock().expect("lock").remove(0);
        Ok(ProviderChatResult {
            messages: vec![ConversationMessage::assistant("ok")],
            response_metadata,
            ..Default::default()
        })
    }
}

/// Issue 38 item 4: the engine compacts only after a natural stop (OpenAI
/// `stop`, Anthropic `end_turn`); a `max_tokens` or `length` ending, a null
/// reason and no reason leave the history whole.
#[test]
fn the_engine_compacts_only_after_a_natural_stop() {
    let end =
        |k: &str, v: serde_json::Value| -> Metadata { [(k.to_owned(), v)].into_iter().collect() };
    let cases = [
        (end("stop_reason", json!("max_tokens")), false),
        (end("finish_reason", json!("length")), false),
        (end("finish_reason", serde_json::Value::Null), false),
        (Metadata::new(), false),
        (end("stop_reason", json!("end_turn")), true),
        (end("finish_reason", json!("stop")), true),
    ];
    for (ending, compacts) in cases {
        let adapter = Arc::new(Ending {
            ends: Mutex::new(vec![ending.clone()]),
        });
        let store = Arc::new(JournalConversationStore::new(Journal::memory()));
        let mut config = ConversationEngineConfig::new("a", store.clone()).provider(adapter, "m");
        config.compactor = Some(Arc::new(MessageLimitCompactor { max_messages: 2 }));
        let engine = ConversationEngine::new(config);
        let conv = start(
            &engine,
            vec![
                ConversationMessage::user("u0"),
                ConversationMessage::assistant("a0"),
                ConversationMessage::user("u1"),
            ],
        );
        let capture = crate::common::Capture::default();
        tracing::subscriber::with_default(capture.clone(), || {
            engine.run_turn(conv.id, RunTurn::default()).expect("turn")
        });
        let state = store.session(conv.id).expect("session").state_cloned();
        let compacted = !state.conversation_log().compactions().is_empty();
        assert_eq!(compacted, compacts, "{ending:?}");
        // Every compaction is logged as well as recorded.
        let logged = capture.events(tracing::Level::INFO, "compacted the conversation's history");
        assert_eq!(
            logged.len(),
            usize::from(compacts),
            "{ending:?}: {logged:?}"
        );
        if let Some(fields) = logged.first() {
            let field = |k: &str| fields.get(k).map(String::as_str);
            assert_eq!(field("strategy"), Some("message_limit"));
            assert_eq!((field("dropped"), field("kept")), (Some("2"), Some("2")));
        }
        assert_eq!(
            agent_journal::conversation::is_natural_stop(&ending),
            compacts,
            "{ending:?}"
        );
    }
}
