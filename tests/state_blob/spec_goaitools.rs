//! goaitools conformance: the requirements of its conversation-state
//! document that no other test of this module shows (see the conformance
//! document, section 5), and its two examples (`example/hellowithstate`,
//! `example/statecompaction`) run against a recording adapter.
//!
//! Every reply here names its finish reason (`stop`, or `tool_calls` in a
//! tool loop), so these tests hold whatever a missing reason is taken for.

use std::sync::{Arc, Mutex};

use agent_journal::Role;
use agent_journal::agent::{Tool, ToolContext};
use agent_journal::conversation::state_blob::{
    StateBlob, StateChatOptions, StateChatResult, append_to_state, chat_with_state,
};
use agent_journal::conversation::{
    Compaction, CompactionRequest, Compactor, CompositeCompactor, ConversationMessage,
    MessageLimitCompactor, SplitCompactor, TokenLimitCompactor, advance_to_first_user_message,
};

use super::{Recorder, Reply, asst, decode, rt, stored, sys, turn, user};
use crate::common::{Capture, Fields};

/// A reply that stops, reporting `tokens`.
fn stop(text: &str, tokens: u64) -> Reply {
    Reply::text(text).finish("stop").tokens(tokens)
}

/// What a compactor was shown.
#[derive(Clone, Debug, PartialEq)]
struct Shown {
    state: Vec<(Role, String)>,
    leading: Vec<(Role, String)>,
    summary: Option<String>,
    tokens: Option<u64>,
    provider: String,
}

/// A compactor that records what it is shown and never compacts.
#[derive(Default)]
struct Spy(Mutex<Vec<Shown>>);

impl Compactor for Spy {
    fn compact(&self, r: &CompactionRequest<'_>) -> agent_journal::Result<Option<Compaction>> {
        let pairs = |ms: &[ConversationMessage]| ms.iter().map(|m| (m.role, m.text())).collect();
        self.0.lock().expect("lock").push(Shown {
            state: pairs(r.state_messages),
            leading: pairs(r.leading_system),
            summary: r.summary.map(str::to_owned),
            tokens: r.last_usage.map(|u| u.total()),
            provider: r.provider.to_owned(),
        });
        Ok(None)
    }
}

/// Echoes its arguments.
struct Echo;

impl Tool for Echo {
    fn name(&self) -> &str {
        "echo"
    }
    fn call(&self, arguments: &str, _: &ToolContext) -> Result<String, String> {
        Ok(format!("echo {arguments}"))
    }
}

/// "Compaction Interface" and "When Compaction Occurs": the compactor runs
/// once, after the tool loop ended with a stop (never in the middle of
/// it), and sees the stored messages without the leading system messages,
/// those apart, the usage of the most recent call, and the provider.
#[test]
fn the_compactor_runs_after_the_tool_loop_and_sees_what_the_spec_lists() {
    let mut calling = Reply::text("Let me check.").finish("tool_calls").tokens(50);
    calling.calls = vec![("echo".into(), "{}".into())];
    let adapter = Recorder::with("p", vec![calling, stop("Done.", 80)]);
    let spy = Arc::new(Spy::default());
    let options = StateChatOptions::new("m")
        .system("Be brief.")
        .user("Check")
        .tool(Arc::new(Echo))
        .compactor(spy.clone());
    let r = chat_with_state(&adapter, None, &options).expect("chat");
    assert_eq!(adapter.requests().len(), 2, "one tool loop");
    let state = vec![
        user("Check"),
        asst("Let me check."),
        rt(Role::Tool, "echo {}"),
        asst("Done."),
    ];
    assert_eq!(
        *spy.0.lock().expect("lock"),
        vec![Shown {
            state: state.clone(),
            leading: vec![sys("Be brief.")],
            summary: None,
            tokens: Some(80),
            provider: "p".into(),
        }]
    );
    assert_eq!(stored(&r.state), state);
    assert_eq!(r.processed_length, 4);
}

/// "No Compaction": without a compactor (the default) nothing is ever
/// dropped; the state grows with every turn.
#[test]
fn without_a_compactor_the_state_keeps_every_message() {
    assert!(StateChatOptions::new("m").compactor.is_none());
    assert!(StateChatOptions::default().compactor.is_none());
    let adapter = Recorder::new("p");
    let mut state: Option<Vec<u8>> = None;
    for k in 1..=25 {
        let r = turn(&adapter, state.as_deref(), &format!("q{k}"));
        assert!(r.compaction.is_none());
        state = Some(r.state);
    }
    let state = state.expect("state");
    let blob = decode(&state);
    assert_eq!(blob.messages.len(), 50);
    assert_eq!(blob.processed_length, 50);
    assert_eq!(stored(&state)[0], user("q1"));
    assert_eq!(adapter.last().len(), 1 + 49, "the preamble and everything");
}

/// Two calls of `q1` then `q2` on a fresh adapter replying with `tokens`
/// each; the second call's result.
fn two_turns(compactor: Arc<dyn Compactor>, tokens: [u64; 2]) -> StateChatResult {
    let adapter = Recorder::with("p", vec![stop("a1", tokens[0]), stop("a2", tokens[1])]);
    let ask = |state: Option<&[u8]>, q: &str| {
        let options = StateChatOptions::new("m")
            .system("Be brief.")
            .user(q)
            .compactor(compactor.clone());
        chat_with_state(&adapter, state, &options).expect("chat")
    };
    let first = ask(None, "q1");
    assert!(first.compaction.is_none(), "nothing to compact after q1");
    ask(Some(&first.state), "q2")
}

/// "Custom Compaction": both packaged compactors implement the trigger and
/// the strategy interfaces, so either serves in either place of a
/// `SplitCompactor`.
#[test]
fn both_packaged_compactors_serve_as_trigger_and_as_strategy() {
    // Token trigger, message strategy: 150 reported tokens are over 100.
    let r = two_turns(
        Arc::new(SplitCompactor {
            trigger: Arc::new(TokenLimitCompactor {
                max_tokens: 100,
                target_tokens: None,
            }),
            strategy: Arc::new(MessageLimitCompactor { max_messages: 2 }),
        }),
        [50, 150],
    );
    assert_eq!(r.compaction.expect("compacted").strategy, "message_limit");
    assert_eq!(stored(&r.state), vec![user("q2"), asst("a2")]);
    // Under the token trigger, the same strategy does nothing.
    let r = two_turns(
        Arc::new(SplitCompactor {
            trigger: Arc::new(TokenLimitCompactor {
                max_tokens: 1000,
                target_tokens: None,
            }),
            strategy: Arc::new(MessageLimitCompactor { max_messages: 2 }),
        }),
        [50, 150],
    );
    assert!(r.compaction.is_none());
    assert_eq!(stored(&r.state).len(), 4);
    // Message trigger (4 stored > 3), token strategy: of the 100 tokens
    // reported, dropping the first exchange brings what is left under 70.
    let r = two_turns(
        Arc::new(SplitCompactor {
            trigger: Arc::new(MessageLimitCompactor { max_messages: 3 }),
            strategy: Arc::new(TokenLimitCompactor {
                max_tokens: 1000,
                target_tokens: Some(70),
            }),
        }),
        [100, 100],
    );
    assert_eq!(r.compaction.expect("compacted").strategy, "token_limit");
    assert_eq!(stored(&r.state), vec![user("q2"), asst("a2")]);
}

/// "Composite Compaction Strategies": the compactors are tried in order
/// and the first that compacts wins.
#[test]
fn a_composite_compactor_tries_its_compactors_in_order() {
    let token = || -> Arc<dyn Compactor> {
        Arc::new(TokenLimitCompactor {
            max_tokens: 50,
            target_tokens: Some(70),
        })
    };
    let message = || -> Arc<dyn Compactor> { Arc::new(MessageLimitCompactor { max_messages: 2 }) };
    for (compactors, winner) in [
        (vec![token(), message()], "token_limit"),
        (vec![message(), token()], "message_limit"),
    ] {
        let r = two_turns(Arc::new(CompositeCompactor { compactors }), [10, 100]);
        assert_eq!(r.compaction.expect("compacted").strategy, winner);
        assert_eq!(stored(&r.state), vec![user("q2"), asst("a2")]);
    }
}

/// "Compaction Boundaries": `advance_to_first_user_message` finds the
/// first user message at or after an index: the only places a compaction
/// cuts, so a tool exchange is never split.
#[test]
fn advance_to_first_user_message_finds_the_next_user_boundary() {
    let mut call = ConversationMessage::assistant("");
    call.tool_calls = vec![agent_journal::ToolCallRecord::new("c1", "echo", "{}")];
    let mut result = ConversationMessage::new(Role::Tool, "r");
    result.tool_call_id = Some("c1".into());
    let m = vec![
        ConversationMessage::user("u0"),
        call,
        result,
        ConversationMessage::assistant("a"),
        ConversationMessage::system("event"),
        ConversationMessage::user("u1"),
        ConversationMessage::assistant("b"),
    ];
    let found: Vec<Option<usize>> = (0..=m.len())
        .map(|i| advance_to_first_user_message(&m, i))
        .collect();
    assert_eq!(
        found,
        vec![
            Some(0),
            Some(5),
            Some(5),
            Some(5),
            Some(5),
            Some(5),
            None,
            None
        ]
    );
}

/// goaitools' `example/hellowithstate`, turn by turn: the state kept in a
/// file between calls, a system prompt with the current time given fresh
/// on every call and never stored, an event added with `AppendToState`
/// without a provider call, and a different system message in the last
/// turn.
#[test]
fn the_hellowithstate_example_runs_as_written() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("state");
    let load = || std::fs::read(&file).ok();
    let save = |bytes: &[u8]| std::fs::write(&file, bytes).expect("write");
    let system = |k: u32| {
        format!(
            "You are a helpful travel planning assistant. Help users plan their vacation. \
             Keep responses concise and friendly. Current date/time: 2025-03-0{k} 10:00:00 UTC"
        )
    };
    let adapter = Recorder::with(
        "openai",
        (1..=5).map(|k| stop(&format!("reply {k}"), 10)).collect(),
    );
    let ask = |system: &str, q: &str| {
        let options = StateChatOptions::new("gpt-4o-mini").system(system).user(q);
        let r = chat_with_state(&adapter, load().as_deref(), &options).expect("chat");
        assert!(r.degraded.is_none());
        save(&r.state);
        r
    };
    ask(&system(1), "I want to plan a vacation to Japan in spring");
    ask(&system(2), "What are the best cities to visit?");
    // Turn 3: an event of the user interface, no provider call.
    let before = adapter.requests().len();
    let update = append_to_state(
        load().as_deref(),
        "openai",
        &[ConversationMessage::user(
            "User expressed interest in Kyoto by selecting it",
        )],
    );
    assert!(update.degraded.is_none());
    save(&update.state);
    assert_eq!(adapter.requests().len(), before);
    assert_eq!(decode(&update.state).processed_length, 4);
    let r = ask(&system(4), "Tell me more about this city");
    assert_eq!(
        adapter.last(),
        vec![
            sys(&system(4)),
            user("I want to plan a vacation to Japan in spring"),
            asst("reply 1"),
            user("What are the best cities to visit?"),
            asst("reply 2"),
            user("User expressed interest in Kyoto by selecting it"),
            user("Tell me more about this city"),
        ]
    );
    assert_eq!(r.processed_length, 7);
    ask(
        &system(5),
        "What's the best time to see cherry blossoms there?",
    );
    let cheerful =
        "You are a cheerful assistant who loves to use enthusiasm. Current time: 10:05:00";
    let r = ask(cheerful, "Thanks for your help!");
    let last = adapter.last();
    assert_eq!(last[0], sys(cheerful));
    assert_eq!(
        last.iter()
            .filter(|(role, _)| *role == Role::System)
            .count(),
        1,
        "only this call's system message is sent"
    );
    let kept = stored(&r.state);
    assert_eq!(kept.len(), 11);
    assert!(kept.iter().all(|(role, _)| *role != Role::System));
    assert_eq!(kept[10], asst("reply 5"));
    assert_eq!(adapter.requests().len(), 5);
}

/// goaitools' `example/statecompaction`, its three demonstrations with the
/// provider's reported usage scripted: the message limit (4) holds the
/// state at 4 messages over 5 turns, dropping France and Germany; the
/// token limit (1000, target 750) compacts once the usage passes 1000; the
/// composite (6 messages or 1500 tokens) compacts when the first limit is
/// passed.
#[test]
fn the_statecompaction_example_keeps_the_state_bounded() {
    fn run(
        compactor: Arc<dyn Compactor>,
        turns: &[&str],
        tokens: &[u64],
    ) -> Vec<(usize, Option<String>, Vec<u8>)> {
        let replies = tokens
            .iter()
            .enumerate()
            .map(|(k, t)| stop(&format!("answer {}", k + 1), *t))
            .collect();
        let adapter = Recorder::with("openai", replies);
        let mut state: Option<Vec<u8>> = None;
        let mut out = Vec::new();
        for q in turns {
            let options = StateChatOptions::new("gpt-4o-mini")
                .system("You are a helpful assistant.")
                .user(*q)
                .compactor(compactor.clone());
            let r = chat_with_state(&adapter, state.as_deref(), &options).expect("chat");
            let n = decode(&r.state).messages.len();
            out.push((n, r.compaction.map(|c| c.strategy), r.state.clone()));
            state = Some(r.state);
        }
        out
    }
    let geography = [
        "What is the capital of France?",
        "What about Germany?",
        "And what's the capital of Italy?",
        "Which of these cities is the largest?",
        "Tell me about the smallest one.",
    ];
    let demo1 = run(
        Arc::new(MessageLimitCompactor { max_messages: 4 }),
        &geography,
        &[100; 5],
    );
    let sizes: Vec<usize> = demo1.iter().map(|(n, _, _)| *n).collect();
    assert_eq!(sizes, [2, 4, 4, 4, 4]);
    let last = stored(&demo1[4].2);
    assert_eq!(last[0], user("Which of these cities is the largest?"));
    assert!(
        last.iter()
            .all(|(_, t)| !t.contains("France") && !t.contains("Germany"))
    );

    let civilisations = [
        "Tell me about Ancient Egypt.",
        "What about Ancient Rome?",
        "How did Ancient Greece contribute to modern society?",
        "What were the major achievements of the Mesopotamian civilization?",
        "Compare the military strategies of these civilizations.",
    ];
    let demo2 = run(
        Arc::new(TokenLimitCompactor {
            max_tokens: 1000,
            target_tokens: Some(750),
        }),
        &civilisations,
        &[300, 600, 900, 1200, 1100],
    );
    let compacted: Vec<bool> = demo2.iter().map(|(_, c, _)| c.is_some()).collect();
    assert_eq!(compacted, [false, false, false, true, true]);
    for (n, strategy, state) in &demo2[3..] {
        assert_eq!(strategy.as_deref(), Some("token_limit"));
        assert!(*n < 8, "{n}");
        assert_eq!(stored(state)[0].0, Role::User);
    }

    let ml = [
        "What is machine learning?",
        "How does it differ from traditional programming?",
        "What are neural networks?",
        "Explain deep learning.",
        "What is reinforcement learning?",
        "How is ML used in healthcare?",
        "What about autonomous vehicles?",
    ];
    let demo3 = run(
        Arc::new(CompositeCompactor {
            compactors: vec![
                Arc::new(MessageLimitCompactor { max_messages: 6 }),
                Arc::new(TokenLimitCompactor {
                    max_tokens: 1500,
                    target_tokens: Some(1000),
                }),
            ],
        }),
        &ml,
        &[100; 7],
    );
    let shape: Vec<(usize, Option<&str>)> =
        demo3.iter().map(|(n, c, _)| (*n, c.as_deref())).collect();
    assert_eq!(
        shape,
        [
            (2, None),
            (4, None),
            (6, None),
            (6, Some("message_limit")),
            (6, Some("message_limit")),
            (6, Some("message_limit")),
            (6, Some("message_limit")),
        ]
    );
}

/// "Error Handling": a state that is not valid JSON, of another version or
/// of another provider is discarded with a logged warning naming the
/// provider and the kind (the spec: "discarded with log error"); the call
/// goes on as a fresh conversation, and the state it returns is good.
#[test]
fn a_discarded_state_is_logged_and_the_fresh_state_carries_on() {
    let good = |provider: &str| turn(&Recorder::new(provider), None, "Earlier").state;
    let mut other_version: serde_json::Value = serde_json::from_slice(&good("p")).expect("JSON");
    other_version["version"] = serde_json::json!(2);
    let cases = [
        (b"{not json".to_vec(), "invalid_json"),
        (
            other_version.to_string().into_bytes(),
            "unsupported_version",
        ),
        (good("anthropic"), "provider_mismatch"),
    ];
    for (bytes, kind) in cases {
        let capture = Capture::default();
        let adapter = Recorder::new("p");
        let r = tracing::subscriber::with_default(capture.clone(), || {
            turn(&adapter, Some(&bytes), "Hi")
        });
        assert_eq!(r.degraded.as_ref().map(|d| d.kind()), Some(kind));
        let events = capture.0.lock().expect("lock").clone();
        let warned: Vec<&Fields> = events
            .iter()
            .filter(|(level, _)| *level == tracing::Level::WARN)
            .map(|(_, f)| f)
            .collect();
        assert_eq!(warned.len(), 1, "{events:?}");
        assert_eq!(warned[0].get("kind").map(String::as_str), Some(kind));
        assert_eq!(warned[0].get("provider").map(String::as_str), Some("p"));
        assert!(warned[0].contains_key("reason"));
        // The fresh state is a good one: the next call keeps it.
        let next = turn(&adapter, Some(&r.state), "Again");
        assert!(next.degraded.is_none());
        assert_eq!(
            stored(&next.state),
            vec![
                user("Hi"),
                asst("answer 1"),
                user("Again"),
                asst("answer 2")
            ]
        );
        assert!(StateBlob::decode(&next.state, Some("p"), usize::MAX).is_ok());
    }
}

/// "When Compaction Occurs": compaction events are logged. Every
/// compaction of a blob is a `tracing` info event saying the provider, the
/// strategy and how many messages were dropped and kept, and a call that
/// compacts nothing logs none.
#[test]
fn every_compaction_is_logged_with_what_was_dropped_and_kept() {
    let adapter = Recorder::new("p");
    let compactor: Arc<dyn Compactor> = Arc::new(MessageLimitCompactor { max_messages: 4 });
    let ask = |state: Option<&[u8]>, q: &str| {
        let options = StateChatOptions::new("m")
            .system("Be brief.")
            .user(q)
            .compactor(compactor.clone());
        chat_with_state(&adapter, state, &options).expect("chat")
    };
    let mut state: Option<Vec<u8>> = None;
    let mut logged = Vec::new();
    for q in ["q1", "q2", "q3"] {
        let capture = Capture::default();
        let r = tracing::subscriber::with_default(capture.clone(), || ask(state.as_deref(), q));
        logged.push(capture.events(tracing::Level::INFO, "compacted the conversation state"));
        state = Some(r.state);
    }
    assert!(logged[0].is_empty() && logged[1].is_empty(), "{logged:?}");
    assert_eq!(logged[2].len(), 1, "{logged:?}");
    let fields = &logged[2][0];
    let field = |k: &str| fields.get(k).map(String::as_str);
    assert_eq!(field("provider"), Some("p"));
    assert_eq!(field("strategy"), Some("message_limit"));
    assert_eq!(field("dropped"), Some("2"));
    assert_eq!(field("kept"), Some("4"));
    assert_eq!(field("summary"), Some("false"));
}
