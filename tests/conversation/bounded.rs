//! Message-limit compaction bounds tool-heavy histories: when the last N
//! messages hold no user message (turns of many tool calls), the last turn
//! is kept whole, so what is sent stays within a bound of the limit and the
//! turns' lengths, and is still a history both providers accept.

use std::sync::atomic::{AtomicU64, Ordering};

use agent_journal::ToolCallRecord;
use agent_journal::agent::{Tool, ToolContext};
use agent_journal::conversation::{
    ChatInputMessage, CompactionRequest, Compactor, MessageLimitCompactor,
};
use proptest::prelude::*;

use super::*;
use crate::common::sendable_to_both;

/// A turn built from the number of calls of each of its tool round trips:
/// a user message, each round trip (an assistant message with its calls,
/// then their results), then an answer. Call ids are unique over the run.
fn build_turn(n: usize, steps: &[usize], next_id: &mut u64) -> Vec<ConversationMessage> {
    let mut out = vec![ConversationMessage::user(format!("question {n}"))];
    for &calls in steps {
        let ids: Vec<String> = (0..calls)
            .map(|_| {
                *next_id += 1;
                format!("call_{next_id}")
            })
            .collect();
        let mut a = ConversationMessage::assistant("");
        a.tool_calls = ids
            .iter()
            .map(|id| ToolCallRecord::new(id.as_str(), "t", "{}"))
            .collect();
        out.push(a);
        for id in &ids {
            let mut r = ConversationMessage::new(Role::Tool, "result");
            r.tool_call_id = Some(id.as_str().into());
            out.push(r);
        }
    }
    out.push(ConversationMessage::assistant(format!("answer {n}")));
    out
}

fn sent(system: &ConversationMessage, history: &[ConversationMessage]) -> Vec<ChatInputMessage> {
    std::iter::once(system)
        .chain(history)
        .map(ChatInputMessage::from)
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// For any conversation (turns of 0..8 tool round trips of 1..=3 calls
    /// each) and any limit, after each turn's compaction the history is at
    /// most `max(limit, that turn's length)` messages, starts at a user
    /// message, and passes the OpenAI and Anthropic checks; so what a turn
    /// sends is at most that bound (of the turn before) plus its own length.
    #[test]
    fn after_each_turn_the_history_is_within_the_limit_or_the_last_turn(
        turns in prop::collection::vec(prop::collection::vec(1usize..=3, 0..8), 1..30),
        limit in 1usize..12,
    ) {
        let system = ConversationMessage::system("S");
        let compactor = MessageLimitCompactor { max_messages: limit };
        let mut history: Vec<ConversationMessage> = Vec::new();
        let mut next_id = 0;
        for (n, steps) in turns.iter().enumerate() {
            let turn = build_turn(n, steps, &mut next_id);
            history.extend(turn.iter().cloned());
            let r = CompactionRequest {
                state_messages: &history,
                leading_system: std::slice::from_ref(&system),
                summary: None,
                last_usage: None,
                provider: "p",
            };
            if let Some(done) = compactor.compact(&r).expect("no error") {
                prop_assert!(done.keep_from > 0);
                history.drain(..done.keep_from);
            }
            let bound = limit.max(turn.len());
            prop_assert!(
                history.len() <= bound,
                "turn {}: {} messages kept, limit {}, turn of {}",
                n, history.len(), limit, turn.len()
            );
            prop_assert_eq!(history[0].role, Role::User);
            if let Err(e) = sendable_to_both(&sent(&system, &history)) {
                prop_assert!(false, "turn {}: {}", n, e);
            }
        }
    }
}

/// An adapter whose every turn is a tool loop: `loops` answers calling
/// `ping` (call ids unique over the run), then a text answer. It keeps
/// every request.
struct ToolLoop {
    loops: usize,
    next: AtomicU64,
    seen: Mutex<Vec<ProviderChatRequest>>,
}

impl ToolLoop {
    fn new(loops: usize) -> Arc<Self> {
        Arc::new(Self {
            loops,
            next: AtomicU64::new(0),
            seen: Mutex::new(Vec::new()),
        })
    }
}

impl ProviderAdapter for ToolLoop {
    fn id(&self) -> &str {
        "loop"
    }

    fn send_chat(
        &self,
        request: &ProviderChatRequest,
        _: &ProviderCallOptions,
    ) -> Result<ProviderChatResult, ProviderError> {
        self.seen.lock().expect("lock").push(request.clone());
        let after = request
            .messages
            .iter()
            .rposition(|m| m.role == Role::User)
            .map_or(0, |i| i + 1);
        let step = request.messages[after..]
            .iter()
            .filter(|m| m.role == Role::Assistant)
            .count();
        let mut m = ConversationMessage::assistant("done");
        // As a real adapter reports it: only an answer is a natural stop
        // (`is_natural_stop`), after which compaction runs.
        let mut finish = "stop";
        if step < self.loops {
            let n = self.next.fetch_add(1, Ordering::SeqCst);
            m = ConversationMessage::assistant("calling");
            m.tool_calls = vec![ToolCallRecord::new(format!("call_{n}"), "ping", "{}")];
            finish = "tool_calls";
        }
        let mut result = ProviderChatResult {
            messages: vec![m],
            ..Default::default()
        };
        result
            .response_metadata
            .insert("finish_reason".into(), serde_json::json!(finish));
        Ok(result)
    }
}

struct Ping;

impl Tool for Ping {
    fn name(&self) -> &str {
        "ping"
    }
    fn call(&self, _: &str, _: &ToolContext) -> Result<String, String> {
        Ok("pong".into())
    }
}

#[test]
fn fifty_tool_heavy_turns_under_a_limit_of_four_send_a_bounded_history() {
    // Each turn: a question, three tool round trips, an answer: 8 messages,
    // so the last 4 never hold a user message.
    let adapter = ToolLoop::new(3);
    let store = Arc::new(JournalConversationStore::new(Journal::memory()));
    let mut config = ConversationEngineConfig::new("a", store.clone())
        .provider(adapter.clone(), "m")
        .tool(Arc::new(Ping));
    config.compactor = Some(Arc::new(MessageLimitCompactor { max_messages: 4 }));
    let engine = ConversationEngine::new(config);
    let conv = start(
        &engine,
        vec![
            ConversationMessage::system("S"),
            ConversationMessage::user("q0"),
        ],
    );
    let turns = 50;
    for i in 1..=turns {
        engine.run_turn(conv.id, RunTurn::default()).expect("turn");
        if i < turns {
            engine
                .append_messages(conv.id, &[ConversationMessage::user(format!("q{i}"))])
                .expect("append");
        }
    }
    let requests = adapter.seen.lock().expect("lock").clone();
    assert_eq!(requests.len(), turns * 4);
    // The system message, the last turn kept whole (8), this turn without
    // its answer (7).
    let largest = requests.iter().map(|r| r.messages.len()).max();
    assert_eq!(largest, Some(1 + 8 + 7));
    for (i, r) in requests.iter().enumerate() {
        if let Err(e) = sendable_to_both(&r.messages) {
            panic!("request {i}: {e}");
        }
    }
    // The journal keeps every message; only what is sent shrank.
    let all = store.get_messages(conv.id, Page::all()).expect("read");
    assert_eq!(all.len(), 1 + turns * 8);
    let session = store.session(conv.id).expect("session");
    let state = session.state();
    let log = state.conversation_log();
    assert_eq!(
        log.compactions().len(),
        turns - 1,
        "every turn but the first"
    );
    let sendable: Vec<String> = log.sendable().iter().map(|m| m.text()).collect();
    assert_eq!(sendable.len(), 8);
    assert_eq!(sendable[0], format!("q{}", turns - 1));
}
