//! Row 10: what compaction promises. Building the request of a turn of a
//! long conversation costs what is sent, not the conversation's length (a
//! 50-message window, and a recorded compaction leaving 50 messages, each
//! at 1,000 and at 100,000 messages in a sled journal); and the state
//! blob's round trip of 10,000 messages against serde_json alone on the
//! same messages.

use std::cell::RefCell;
use std::time::{Duration, Instant};

use agent_journal::Role;
use agent_journal::conversation::state_blob::{DEFAULT_MAX_STATE_BYTES, StateBlob};
use agent_journal::conversation::{
    CompactionRecord, Conversation, ConversationId, ConversationMessage, ConversationStore,
    DefaultHistoryBuilder, HistoryBuilder, HistoryContext, JournalConversationStore, Metadata,
    TurnId,
};
use agent_journal::format::now;
use agent_journal::{Journal, JournalConfig, SessionId, ToolCallRecord};

use super::events::content_200;
use super::report::{Report, Row, Verdict, fmt_dur, fmt_ratio, thousands};
use super::tempdir;
use super::timing::{Contestant, interleave};

/// Messages sent: the window, and what a compaction keeps.
const KEPT: usize = 50;

/// `n` messages alternating user and assistant (200-byte texts), the
/// first a user message.
fn messages(n: usize) -> Vec<ConversationMessage> {
    (0..n)
        .map(|i| {
            if i % 2 == 0 {
                ConversationMessage::user(content_200())
            } else {
                ConversationMessage::assistant(content_200())
            }
        })
        .collect()
}

/// A conversation of a system message and `n` messages, appended in
/// batches of 1,000; with `compact`, a compaction keeping the last `KEPT`.
fn conversation(store: &JournalConversationStore, n: usize, compact: bool) -> ConversationId {
    let at = now();
    let c = Conversation {
        id: SessionId::new(),
        agent: "bench".into(),
        subject_id: None,
        title: None,
        created_at: at,
        updated_at: at,
        metadata: Metadata::new(),
    };
    let system = [ConversationMessage::system(
        "You are the support agent of an online shop.",
    )];
    store.create_conversation(&c, &system).expect("create");
    let all = messages(n);
    for batch in all.chunks(1_000) {
        store.append_messages(c.id, batch).expect("append");
    }
    if compact {
        let first = &all[n - KEPT];
        assert_eq!(first.role, Role::User);
        let record = CompactionRecord {
            turn_id: None,
            first_kept: first.id,
            strategy: "message_limit".into(),
            summary: Some("what came before, in a sentence".into()),
            messages_before: n as u64,
            messages_after: KEPT as u64,
            tokens_before: None,
            at,
        };
        store.record_compaction(c.id, &record).expect("compact");
    }
    c.id
}

/// Builds the request's messages as the engine does: the store's history
/// window, then the history builder.
fn build(
    store: &JournalConversationStore,
    conv: &Conversation,
    builder: &DefaultHistoryBuilder,
) -> usize {
    let window = store.history(conv.id, builder.window()).expect("history");
    let sent = builder.build_history(&HistoryContext {
        conversation: conv,
        system: &window.system,
        summary: window.summary.as_deref(),
        messages: &window.messages,
        next_turn_id: TurnId::new(),
        agent: "bench",
    });
    sent.len()
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort_unstable();
    v[v.len() / 2]
}

/// Rows 10a and 10b.
fn requests(quick: bool, rep: &mut Report) {
    let (small, big) = (1_000, if quick { 20_000 } else { 100_000 });
    let samples: u64 = if quick { 300 } else { 2_000 };
    eprintln!(
        "[10] the request of a turn at {} and at {} messages: a window of {KEPT}, and a compaction keeping {KEPT}",
        thousands(small as u64),
        thousands(big as u64)
    );
    let dir = tempdir();
    let journal =
        Journal::open_with(dir.path().join("db"), JournalConfig::default()).expect("open");
    let store = JournalConversationStore::new(journal);
    let built = Instant::now();
    let ids = [
        conversation(&store, small, false),
        conversation(&store, big, false),
        conversation(&store, small, true),
        conversation(&store, big, true),
    ];
    let built = built.elapsed();
    let convs: Vec<Conversation> = ids
        .iter()
        .map(|id| store.get_conversation(*id).expect("get").expect("exists"))
        .collect();
    let windowed = DefaultHistoryBuilder {
        max_messages: Some(KEPT),
        max_tokens: None,
    };
    let whole = DefaultHistoryBuilder::default();
    let times: [RefCell<Vec<Duration>>; 4] = Default::default();
    let (store, convs, times_ref) = (&store, &convs, &times);
    let mut contestants: Vec<Contestant<'_>> = (0..4)
        .map(|k| {
            let builder = if k < 2 { windowed } else { whole };
            Box::new(move |_, count: u64| {
                let mut total = Duration::ZERO;
                for _ in 0..count {
                    let t = Instant::now();
                    let n = build(store, &convs[k], &builder);
                    let d = t.elapsed();
                    assert!(n <= KEPT + 2, "{n} messages sent");
                    times_ref[k].borrow_mut().push(d);
                    total += d;
                }
                total
            }) as Contestant<'_>
        })
        .collect();
    interleave(samples, 50, &mut contestants);
    drop(contestants);
    let [mut w_small, mut w_big, mut c_small, mut c_big] = times.map(RefCell::into_inner);
    for (id, how, small_t, big_t) in [
        (
            "10a",
            "a history window of 50 messages (`DefaultHistoryBuilder { max_messages: Some(50) }`)",
            &mut w_small,
            &mut w_big,
        ),
        (
            "10b",
            "a recorded compaction keeping the last 50 messages (the default history builder; the summary sent in place)",
            &mut c_small,
            &mut c_big,
        ),
    ] {
        let (s, b) = (median(small_t), median(big_t));
        let ratio = b.as_secs_f64() / s.as_secs_f64();
        rep.row(Row {
            id,
            what: format!(
                "building the request of a turn (the store's history, then the history builder) at {} messages in a sled journal, with {how}",
                thousands(big as u64)
            ),
            ours: format!("median {}", fmt_dur(b)),
            baseline: format!("the same at {} messages: median {}", thousands(small as u64), fmt_dur(s)),
            ratio: fmt_ratio(ratio),
            target: "<= 1.25x (O(kept messages), not O(N))".into(),
            verdict: Verdict::at_most(ratio, 1.25),
        });
    }
    rep.note(format!(
        "rows 10a/10b: {} timed builds per contestant in chunks of 50, four contestants taking turns; \
         building the four conversations took {}",
        thousands(samples),
        fmt_dur(built)
    ));
}

/// `n` realistic messages: user, assistant with a tool call, tool result,
/// assistant answer.
fn exchange(n: usize) -> Vec<ConversationMessage> {
    (0..n)
        .map(|i| match i % 4 {
            0 => ConversationMessage::user(content_200()),
            1 => {
                let mut m = ConversationMessage::assistant("");
                m.tool_calls = vec![ToolCallRecord::new(
                    format!("call_{i}"),
                    "search_orders",
                    r#"{"customer":"c-1042","since":"2026-01-01","limit":20}"#,
                )];
                m
            }
            2 => {
                let mut m = ConversationMessage::new(Role::Tool, content_200());
                m.tool_call_id = Some(format!("call_{}", i - 1).into());
                m.name = Some("search_orders".into());
                m
            }
            _ => ConversationMessage::assistant(content_200()),
        })
        .collect()
}

/// Row 10c.
fn blob(quick: bool, rep: &mut Report) {
    let n = 10_000;
    let samples: u64 = if quick { 6 } else { 30 };
    eprintln!(
        "[10] the state blob of {} messages, encoded and decoded",
        thousands(n as u64)
    );
    let mut b = StateBlob::new("openai");
    b.messages = exchange(n);
    b.processed_length = n;
    let bytes = b.encode();
    let msgs = b.messages.clone();
    let times: [RefCell<Vec<Duration>>; 2] = Default::default();
    let (b, msgs, times_ref) = (&b, &msgs, &times);
    let mut contestants: Vec<Contestant<'_>> = vec![
        Box::new(move |_, count| {
            let mut total = Duration::ZERO;
            for _ in 0..count {
                let t = Instant::now();
                let out = b.encode();
                let back = StateBlob::decode(&out, Some("openai"), DEFAULT_MAX_STATE_BYTES)
                    .expect("decodes");
                let d = t.elapsed();
                assert_eq!(back.messages.len(), n);
                times_ref[0].borrow_mut().push(d);
                total += d;
            }
            total
        }),
        Box::new(move |_, count| {
            let mut total = Duration::ZERO;
            for _ in 0..count {
                let t = Instant::now();
                let out = serde_json::to_vec(msgs).expect("encodes");
                let back: Vec<ConversationMessage> = serde_json::from_slice(&out).expect("decodes");
                let d = t.elapsed();
                assert_eq!(back.len(), n);
                times_ref[1].borrow_mut().push(d);
                total += d;
            }
            total
        }),
    ];
    interleave(samples, 2, &mut contestants);
    drop(contestants);
    let [mut ours, mut base] = times.map(RefCell::into_inner);
    let (o, s) = (median(&mut ours), median(&mut base));
    rep.row(Row {
        id: "10c",
        what: format!(
            "state blob round trip (`StateBlob::encode` then `decode`, provider checked) of {} messages (user, assistant with a tool call, tool result, answer; {} bytes)",
            thousands(n as u64),
            thousands(bytes.len() as u64)
        ),
        ours: format!("median {}", fmt_dur(o)),
        baseline: format!(
            "`serde_json::to_vec` then `from_slice` of the same `Vec<ConversationMessage>`: median {}",
            fmt_dur(s)
        ),
        ratio: fmt_ratio(o.as_secs_f64() / s.as_secs_f64()),
        target: "report".into(),
        verdict: Verdict::Info,
    });
}

/// Section 10.
pub fn section_compaction(quick: bool, rep: &mut Report) {
    requests(quick, rep);
    blob(quick, rep);
}
