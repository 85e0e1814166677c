//! Compaction in blobs: each compactor drops messages from the state, after
//! a call whose model stopped, at user-message boundaries.

use std::sync::{Arc, Mutex};

use agent_journal::Result;
use agent_journal::conversation::state_blob::{
    StateChatOptions, chat_with_state, is_summary_message,
};
use agent_journal::conversation::{
    Compaction, CompactionRequest, CompactionTrigger, Compactor, CompositeCompactor,
    MessageLimitCompactor, SUMMARY_PREFIX, SplitCompactor, TokenLimitCompactor,
    advance_to_first_user_message,
};

use super::{Recorder, Reply, asst, decode, stored, sys, user};

/// `chat_with_state` of question `q` with `compactor`.
fn ask(
    adapter: &Recorder,
    state: &Option<Vec<u8>>,
    q: &str,
    compactor: Arc<dyn Compactor>,
) -> agent_journal::conversation::state_blob::StateChatResult {
    let options = StateChatOptions::new("m")
        .system("Be brief.")
        .user(q)
        .compactor(compactor);
    chat_with_state(adapter, state.as_deref(), &options).expect("chat")
}

#[test]
fn message_limit_compactor_drops_the_oldest_messages_from_the_blob() {
    let adapter = Recorder::new("p");
    let c: Arc<dyn Compactor> = Arc::new(MessageLimitCompactor { max_messages: 4 });
    let mut state = None;
    for (i, q) in ["q1", "q2"].iter().enumerate() {
        let r = ask(&adapter, &state, q, c.clone());
        assert!(r.compaction.is_none(), "turn {i}");
        state = Some(r.state);
    }
    let r = ask(&adapter, &state, "q3", c.clone());
    let done = r.compaction.expect("compacted");
    assert_eq!(done.keep_from, 2);
    assert_eq!(done.strategy, "message_limit");
    assert_eq!(
        stored(&r.state),
        vec![user("q2"), asst("answer 2"), user("q3"), asst("answer 3")]
    );
    assert_eq!(r.processed_length, 4);
    // What was dropped is no longer sent.
    let r = ask(&adapter, &Some(r.state), "q4", c);
    assert_eq!(
        adapter.last(),
        vec![
            sys("Be brief."),
            user("q2"),
            asst("answer 2"),
            user("q3"),
            asst("answer 3"),
            user("q4"),
        ]
    );
    assert_eq!(stored(&r.state)[0], user("q3"));
}

#[test]
fn token_limit_compactor_uses_the_usage_the_adapter_reported() {
    let adapter = Recorder::with(
        "p",
        vec![
            Reply::text("answer 1").tokens(20),
            Reply::text("answer 2").tokens(40),
            Reply::text("answer 3").tokens(300),
        ],
    );
    let c: Arc<dyn Compactor> = Arc::new(TokenLimitCompactor {
        max_tokens: 100,
        target_tokens: Some(200),
    });
    let mut state = None;
    for q in ["q1", "q2"] {
        let r = ask(&adapter, &state, q, c.clone());
        assert!(r.compaction.is_none(), "under the limit at {q}");
        state = Some(r.state);
    }
    // 300 tokens over 6 messages and the preamble: dropping 3 messages
    // reaches the target; the cut moves on to the next user message.
    let r = ask(&adapter, &state, "q3", c);
    let done = r.compaction.expect("compacted");
    assert_eq!(done.strategy, "token_limit");
    assert_eq!(done.keep_from, 4);
    assert_eq!(stored(&r.state), vec![user("q3"), asst("answer 3")]);
    assert_eq!(r.processed_length, 2);
}

#[test]
fn composite_compactor_compacts_when_any_limit_is_exceeded() {
    let adapter = Recorder::with(
        "p",
        vec![
            Reply::text("answer 1").tokens(10),
            Reply::text("answer 2").tokens(10),
        ],
    );
    let c: Arc<dyn Compactor> = Arc::new(CompositeCompactor {
        compactors: vec![
            Arc::new(TokenLimitCompactor {
                max_tokens: 10_000,
                target_tokens: None,
            }),
            Arc::new(MessageLimitCompactor { max_messages: 3 }),
        ],
    });
    let r = ask(&adapter, &None, "q1", c.clone());
    assert!(r.compaction.is_none());
    let r = ask(&adapter, &Some(r.state), "q2", c);
    assert_eq!(r.compaction.expect("compacted").strategy, "message_limit");
    assert_eq!(stored(&r.state), vec![user("q2"), asst("answer 2")]);
}

/// goaitools' custom trigger: compact once 10 messages are stored.
struct Every10Messages;

impl CompactionTrigger for Every10Messages {
    fn should_compact(&self, r: &CompactionRequest<'_>) -> bool {
        r.state_messages.len() >= 10
    }
}

#[test]
fn split_compactor_with_a_custom_trigger_compacts_every_ten_messages() {
    let adapter = Recorder::new("p");
    let c: Arc<dyn Compactor> = Arc::new(SplitCompactor {
        trigger: Arc::new(Every10Messages),
        strategy: Arc::new(MessageLimitCompactor { max_messages: 5 }),
    });
    let mut state = None;
    let mut lengths = Vec::new();
    for k in 1..=8 {
        let r = ask(&adapter, &state, &format!("q{k}"), c.clone());
        lengths.push((decode(&r.state).messages.len(), r.compaction.is_some()));
        state = Some(r.state);
    }
    // At 10 messages, the last 5 from a user message: 4 are kept.
    assert_eq!(
        lengths,
        vec![
            (2, false),
            (4, false),
            (6, false),
            (8, false),
            (4, true),
            (6, false),
            (8, false),
            (4, true),
        ]
    );
    assert_eq!(
        stored(&state.expect("state")),
        vec![user("q7"), asst("answer 7"), user("q8"), asst("answer 8")]
    );
}

#[test]
fn no_compaction_unless_the_model_stopped() {
    let adapter = Recorder::with(
        "p",
        vec![
            Reply::text("a1"),
            Reply::text("cut short").finish("length"),
            Reply::text("done").finish("end_turn"),
        ],
    );
    let c: Arc<dyn Compactor> = Arc::new(MessageLimitCompactor { max_messages: 2 });
    let r = ask(&adapter, &None, "q1", c.clone());
    assert!(r.compaction.is_none(), "within the limit");
    let r = ask(&adapter, &Some(r.state), "q2", c.clone());
    assert!(r.compaction.is_none(), "finish reason length");
    assert_eq!(decode(&r.state).messages.len(), 4);
    let r = ask(&adapter, &Some(r.state), "q3", c);
    assert!(r.compaction.is_some(), "end_turn is a stop");
    assert_eq!(stored(&r.state), vec![user("q3"), asst("done")]);
}

/// Keeps the last 2 messages (from a user message) once 4 are stored, and
/// writes a summary; records what it was shown.
#[derive(Default)]
struct Summarize {
    seen: Mutex<Vec<(Option<String>, usize)>>,
}

impl Compactor for Summarize {
    fn compact(&self, r: &CompactionRequest<'_>) -> Result<Option<Compaction>> {
        let n = r.state_messages.len();
        self.seen
            .lock()
            .expect("lock")
            .push((r.summary.map(str::to_owned), n));
        if n < 4 {
            return Ok(None);
        }
        let k = advance_to_first_user_message(r.state_messages, n - 2).expect("a user message");
        Ok(Some(Compaction {
            keep_from: k,
            summary: Some(format!("{k} messages dropped")),
            strategy: "test_summary".into(),
        }))
    }
}

#[test]
fn a_summary_goes_first_in_the_blob_and_is_shown_to_the_next_compaction() {
    let adapter = Recorder::new("p");
    let summarize = Arc::new(Summarize::default());
    let c: Arc<dyn Compactor> = summarize.clone();
    let r = ask(&adapter, &None, "q1", c.clone());
    let r = ask(&adapter, &Some(r.state), "q2", c.clone());
    let blob = decode(&r.state);
    assert!(is_summary_message(&blob.messages[0]));
    let summary = format!("{SUMMARY_PREFIX}2 messages dropped");
    assert_eq!(
        stored(&r.state),
        vec![sys(&summary), user("q2"), asst("answer 2")]
    );
    let r = ask(&adapter, &Some(r.state), "q3", c);
    assert_eq!(
        adapter.last(),
        vec![
            sys("Be brief."),
            sys(&summary),
            user("q2"),
            asst("answer 2"),
            user("q3"),
        ]
    );
    // The compactor saw the summary apart from the messages.
    assert_eq!(
        *summarize.seen.lock().expect("lock"),
        vec![(None, 2), (None, 4), (Some("2 messages dropped".into()), 4)]
    );
    assert_eq!(
        stored(&r.state),
        vec![
            sys(&format!("{SUMMARY_PREFIX}2 messages dropped")),
            user("q3"),
            asst("answer 3")
        ]
    );
}

/// Answers every call with `"pong"`.
struct Ping;

impl agent_journal::agent::Tool for Ping {
    fn name(&self) -> &str {
        "ping"
    }
    fn call(&self, _: &str, _: &agent_journal::agent::ToolContext) -> Result<String, String> {
        Ok("pong".into())
    }
}

#[test]
fn fifty_tool_heavy_turns_under_a_limit_of_four_keep_the_blob_bounded() {
    // Each turn: a question, three tool round trips, an answer: 8 messages,
    // so the last 4 never hold a user message.
    let loops = 3;
    let turns = 50;
    let mut replies = Vec::new();
    for _ in 0..turns {
        for _ in 0..loops {
            replies.push(super::Reply {
                text: "calling".into(),
                calls: vec![("ping".into(), "{}".into())],
                ..super::Reply::default()
            });
        }
        replies.push(Reply::text("done"));
    }
    let adapter = Recorder::with("p", replies);
    let c: Arc<dyn Compactor> = Arc::new(MessageLimitCompactor { max_messages: 4 });
    let mut state: Option<Vec<u8>> = None;
    for i in 0..turns {
        let options = StateChatOptions::new("m")
            .system("Be brief.")
            .user(format!("q{i}"))
            .tool(Arc::new(Ping))
            .compactor(c.clone());
        let r = chat_with_state(&adapter, state.as_deref(), &options).expect("chat");
        // The first turn has no earlier boundary to cut at; every later
        // one drops all but itself.
        assert_eq!(r.compaction.is_some(), i > 0, "turn {i}");
        let blob = decode(&r.state);
        assert_eq!(blob.messages.len(), 8, "turn {i}: the last turn, whole");
        assert_eq!(blob.messages[0].text(), format!("q{i}"));
        let sent: Vec<_> = blob
            .messages
            .iter()
            .map(agent_journal::conversation::ChatInputMessage::from)
            .collect();
        if let Err(e) = crate::common::sendable_to_both(&sent) {
            panic!("turn {i}: {e}");
        }
        state = Some(r.state);
    }
    // The system message, the last turn kept (8), this turn without its
    // answer (7).
    let largest = adapter.requests().iter().map(Vec::len).max();
    assert_eq!(largest, Some(1 + 8 + 7));
}
