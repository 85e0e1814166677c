//! Row 9: the conversation engine's `run_turn` with the scripted adapter,
//! on the journal store (a sled journal, `Synced`) and the in-memory
//! store: one turn against the adapter's own `send_chat` with the same
//! request (and, for the journal, raw sled made durable with the same
//! bytes), and a turn at 10,000 against a turn at 1 (and at 21, where the
//! history window of 20 messages is already full).
//!
//! Every contestant takes turns with the others in chunks (`interleave`);
//! a conversation's user message is appended before the clock starts, so
//! only `run_turn` is timed.

use std::cell::RefCell;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent_journal::conversation::{
    CompactionRecord, Conversation, ConversationEngine, ConversationEngineConfig, ConversationId,
    ConversationMessage, ConversationStore, ConversationTurn, CreateConversation,
    DefaultHistoryBuilder, HistoryWindow, InMemoryConversationStore, JournalConversationStore,
    Page, ProviderAdapter, ProviderCallOptions, ProviderChatRequest, ProviderChatResult,
    ProviderError, RunTurn, ScriptedAdapter, ScriptedReply, TurnId, TurnStatus,
};
use agent_journal::{Durability, Journal, JournalConfig, Result, SessionId};

use super::events::content_200;
use super::raw::SyncedSled;
use super::report::{Report, Row, Verdict, fmt_dur, fmt_ratio, thousands};
use super::timing::{Contestant, interleave};
use super::{cache_bytes, tempdir};
use crate::Sizes;

/// The history window of every engine here: `max_messages: Some(20)`.
const WINDOW: usize = 20;

/// A script answering the same 200-byte text at every turn index a request
/// with a window of 20 messages can have (it counts user messages).
fn adapter() -> ScriptedAdapter {
    ScriptedAdapter::new(vec![vec![ScriptedReply::text(content_200())]; 64])
}

fn engine(
    store: Arc<dyn ConversationStore>,
    adapter: Arc<dyn ProviderAdapter>,
) -> ConversationEngine {
    let mut config =
        ConversationEngineConfig::new("support", store).provider(adapter, "scripted-1");
    config.history_builder = Some(Arc::new(DefaultHistoryBuilder {
        max_messages: Some(WINDOW),
        max_tokens: None,
    }));
    ConversationEngine::new(config)
}

/// A new conversation: a system message and a first user message.
fn new_conversation(engine: &ConversationEngine) -> ConversationId {
    engine
        .create_conversation(CreateConversation {
            initial_messages: vec![
                ConversationMessage::system("You are the support agent of an online shop."),
                ConversationMessage::user(content_200()),
            ],
            ..Default::default()
        })
        .expect("create conversation")
        .id
}

/// Runs a turn of `id` (timed) and appends the next user message (not
/// timed): the conversation is ready for its next turn.
fn timed_turn(engine: &ConversationEngine, id: ConversationId) -> Duration {
    let t = Instant::now();
    let turn = engine.run_turn(id, RunTurn::default()).expect("run turn");
    let d = t.elapsed();
    assert_eq!(turn.status, TurnStatus::Succeeded);
    engine
        .append_messages(id, &[ConversationMessage::user(content_200())])
        .expect("append user message");
    d
}

/// The scripted adapter, keeping the last request and options it was sent.
struct Recording {
    inner: ScriptedAdapter,
    last: Mutex<Option<(ProviderChatRequest, ProviderCallOptions)>>,
}

impl ProviderAdapter for Recording {
    fn id(&self) -> &str {
        self.inner.id()
    }

    fn send_chat(
        &self,
        request: &ProviderChatRequest,
        options: &ProviderCallOptions,
    ) -> std::result::Result<ProviderChatResult, ProviderError> {
        *self.last.lock().expect("lock") = Some((request.clone(), options.clone()));
        self.inner.send_chat(request, options)
    }
}

/// A journal store that records the seq range of each change (one append
/// or one batch: one durable write), to give the raw baseline the same writes.
struct Grouping {
    inner: Arc<JournalConversationStore>,
    writes: Mutex<Vec<(ConversationId, u64, u64)>>,
}

impl Grouping {
    fn head(&self, id: ConversationId) -> u64 {
        self.inner.session(id).map_or(0, |s| s.head())
    }

    fn record(&self, id: ConversationId, f: impl FnOnce() -> Result<()>) -> Result<()> {
        let before = self.head(id);
        f()?;
        let after = self.head(id);
        if after > before {
            self.writes.lock().expect("lock").push((id, before, after));
        }
        Ok(())
    }
}

impl ConversationStore for Grouping {
    fn create_conversation(&self, c: &Conversation, m: &[ConversationMessage]) -> Result<()> {
        self.record(c.id, || self.inner.create_conversation(c, m))
    }
    fn get_conversation(&self, id: ConversationId) -> Result<Option<Conversation>> {
        self.inner.get_conversation(id)
    }
    fn update_conversation(&self, c: &Conversation) -> Result<()> {
        self.record(c.id, || self.inner.update_conversation(c))
    }
    fn append_messages(&self, id: ConversationId, m: &[ConversationMessage]) -> Result<()> {
        self.record(id, || self.inner.append_messages(id, m))
    }
    fn get_messages(&self, id: ConversationId, page: Page) -> Result<Vec<ConversationMessage>> {
        self.inner.get_messages(id, page)
    }
    fn unanswered_messages(&self, id: ConversationId) -> Result<Vec<ConversationMessage>> {
        self.inner.unanswered_messages(id)
    }
    fn create_turn(&self, turn: &ConversationTurn) -> Result<()> {
        self.record(turn.conversation_id, || self.inner.create_turn(turn))
    }
    fn update_turn(&self, turn: &ConversationTurn) -> Result<()> {
        self.record(turn.conversation_id, || self.inner.update_turn(turn))
    }
    fn get_turn(&self, id: ConversationId, turn: TurnId) -> Result<Option<ConversationTurn>> {
        self.inner.get_turn(id, turn)
    }
    fn list_turns(&self, id: ConversationId, page: Page) -> Result<Vec<ConversationTurn>> {
        self.inner.list_turns(id, page)
    }
    fn list_conversations(&self) -> Result<Vec<ConversationId>> {
        self.inner.list_conversations()
    }
    fn history(&self, id: ConversationId, window: Option<usize>) -> Result<HistoryWindow> {
        self.inner.history(id, window)
    }
    fn record_compaction(&self, id: ConversationId, record: &CompactionRecord) -> Result<()> {
        self.record(id, || self.inner.record_compaction(id, record))
    }
}

/// What one turn of a new conversation sends and writes, found by running
/// one through recording wrappers (not timed).
struct TurnShape {
    request: ProviderChatRequest,
    options: ProviderCallOptions,
    /// The frames of each durable write the turn made, as stored.
    writes: Vec<Vec<Vec<u8>>>,
}

fn turn_shape(
    store: Arc<dyn ConversationStore>,
    journal: Option<Arc<JournalConversationStore>>,
) -> TurnShape {
    let recording = Arc::new(Recording {
        inner: adapter(),
        last: Mutex::new(None),
    });
    let grouping = journal.map(|inner| {
        Arc::new(Grouping {
            inner,
            writes: Mutex::new(Vec::new()),
        })
    });
    let store: Arc<dyn ConversationStore> = match &grouping {
        Some(g) => g.clone(),
        None => store,
    };
    let e = engine(store, recording.clone());
    let id = new_conversation(&e);
    if let Some(g) = &grouping {
        g.writes.lock().expect("lock").clear();
    }
    e.run_turn(id, RunTurn::default()).expect("run turn");
    let (request, options) = recording
        .last
        .lock()
        .expect("lock")
        .take()
        .expect("a request");
    let writes = grouping.map_or_else(Vec::new, |g| {
        let session = g.inner.session(id).expect("session");
        let writes = g.writes.lock().expect("lock").clone();
        writes
            .into_iter()
            .map(|(_, from, to)| {
                session
                    .events(from..to)
                    .expect("read back")
                    .iter()
                    .map(|env| {
                        agent_journal::format::encode_frame(
                            env,
                            agent_journal::format::DEFAULT_MAX_EVENT_BYTES,
                        )
                        .expect("encode")
                    })
                    .collect()
            })
            .collect()
    });
    TurnShape {
        request,
        options,
        writes,
    }
}

/// A conversation with `turns` turns run by `engine`, ready for the next;
/// returns it with the mean time of a turn in each block of `block` turns.
fn grown(engine: &ConversationEngine, turns: u64, block: u64) -> (ConversationId, Vec<Duration>) {
    let id = new_conversation(engine);
    let mut means = Vec::new();
    let mut t = Instant::now();
    for k in 1..=turns {
        let turn = engine.run_turn(id, RunTurn::default()).expect("run turn");
        assert_eq!(turn.status, TurnStatus::Succeeded);
        engine
            .append_messages(id, &[ConversationMessage::user(content_200())])
            .expect("append");
        if k % block == 0 || k == turns {
            means.push(t.elapsed() / (k - (k - 1) / block * block) as u32);
            t = Instant::now();
        }
    }
    (id, means)
}

/// A contestant timing turns of the conversation `next` gives, each time
/// kept in `times`.
fn turns<'a>(
    e: &'a ConversationEngine,
    times: &'a RefCell<Vec<Duration>>,
    mut next: impl FnMut() -> ConversationId + 'a,
) -> Contestant<'a> {
    Box::new(move |_, count| {
        let mut total = Duration::ZERO;
        for _ in 0..count {
            let d = timed_turn(e, next());
            times.borrow_mut().push(d);
            total += d;
        }
        total
    })
}

/// Mean and median of `times`.
fn mean_median(times: &[Duration]) -> (Duration, Duration) {
    let mut v = times.to_vec();
    v.sort();
    let mean = v.iter().sum::<Duration>() / v.len().max(1) as u32;
    (mean, v.get(v.len() / 2).copied().unwrap_or_default())
}

fn mm(times: &[Duration]) -> String {
    let (mean, median) = mean_median(times);
    format!("{} (median {})", fmt_dur(mean), fmt_dur(median))
}

/// Which store a part of row 9 runs on.
enum Kind {
    Journal,
    Memory,
}

pub fn section_conversation(s: &Sizes, rep: &mut Report) {
    for kind in [Kind::Journal, Kind::Memory] {
        part(s, kind, rep);
    }
}

fn part(s: &Sizes, kind: Kind, rep: &mut Report) {
    let (samples, chunk, id, name) = match kind {
        Kind::Journal => (
            s.turns_synced,
            10,
            ["9a", "9b"],
            "JournalConversationStore (sled journal, `Synced`)",
        ),
        Kind::Memory => (
            s.turns_memory,
            100,
            ["9c", "9d"],
            "InMemoryConversationStore",
        ),
    };
    let prior = s.conversation_turns - 1;
    eprintln!(
        "[9] run_turn on {name}: a conversation of {} turns, {} timed turns per contestant in chunks of {chunk}",
        thousands(prior),
        thousands(samples)
    );
    let dir = tempdir();
    let (store, journal): (Arc<dyn ConversationStore>, _) = match kind {
        Kind::Journal => {
            let config = JournalConfig::default();
            assert_eq!(config.durability, Durability::Synced);
            let j = Journal::open_with(dir.path().join("db"), config).expect("open");
            let store = Arc::new(JournalConversationStore::new(j));
            (store.clone(), Some(store))
        }
        Kind::Memory => (Arc::new(InMemoryConversationStore::new()), None),
    };
    let shape = turn_shape(store.clone(), journal.clone());
    let scripted = adapter();
    let e = engine(store, Arc::new(scripted.clone()));
    let built = Instant::now();
    let (big, blocks) = grown(&e, prior, 1_000);
    let built = built.elapsed();
    let (reference, _) = grown(&e, 20, 20);
    let raw_dir = tempdir();
    let raw = journal
        .as_ref()
        .map(|_| SyncedSled::open(&raw_dir.path().join("db"), cache_bytes()));
    let raw_session = SessionId::new();
    let mut raw_seq = 0u64;

    let times: [RefCell<Vec<Duration>>; 5] = Default::default();
    let e = &e;
    let mut contestants: Vec<Contestant<'_>> = vec![
        turns(e, &times[0], || new_conversation(e)),
        turns(e, &times[1], move || reference),
        turns(e, &times[2], move || big),
        Box::new(|_, count| {
            let mut total = Duration::ZERO;
            for _ in 0..count {
                let t = Instant::now();
                let r = scripted.send_chat(&shape.request, &shape.options);
                let d = t.elapsed();
                std::hint::black_box(r.expect("send_chat"));
                times[3].borrow_mut().push(d);
                total += d;
            }
            total
        }),
    ];
    if let Some(raw) = &raw {
        let (writes, raw_seq, raw_times) = (&shape.writes, &mut raw_seq, &times[4]);
        contestants.push(Box::new(move |_, count| {
            let mut total = Duration::ZERO;
            for _ in 0..count {
                let mut d = Duration::ZERO;
                for frames in writes {
                    d += raw.append_frames(raw_session, *raw_seq, frames);
                    *raw_seq += frames.len() as u64;
                }
                raw_times.borrow_mut().push(d);
                total += d;
            }
            total
        }));
    }
    interleave(samples, chunk, &mut contestants);
    drop(contestants);
    let [first, at_ref, at_big, direct, raw_times] = times.map(RefCell::into_inner);

    let (m_first, med_first) = mean_median(&first);
    let (m_ref, med_ref) = mean_median(&at_ref);
    let (m_big, med_big) = mean_median(&at_big);
    let times_of = |a: Duration, b: Duration| fmt_ratio(a.as_secs_f64() / b.as_secs_f64());
    let (m_direct, _) = mean_median(&direct);
    let frames: usize = shape.writes.iter().map(Vec::len).sum();
    let bytes: usize = shape.writes.iter().flatten().map(Vec::len).sum();
    let (baseline, ratio) = if raw_times.is_empty() {
        (
            format!(
                "the adapter's `send_chat` alone, same request: {}",
                mm(&direct)
            ),
            format!(
                "{} the adapter alone",
                fmt_ratio(m_first.as_secs_f64() / m_direct.as_secs_f64())
            ),
        )
    } else {
        let (m_raw, _) = mean_median(&raw_times);
        (
            format!(
                "raw sled insert + `Db::flush` + fdatasync of the turn's {frames} frames ({bytes} bytes) in its {} durable writes: {}; the adapter's `send_chat` alone, same request: {}",
                shape.writes.len(),
                mm(&raw_times),
                mm(&direct)
            ),
            format!(
                "{} raw sled (the adapter: {:.1}% of the turn)",
                fmt_ratio(m_first.as_secs_f64() / m_raw.as_secs_f64()),
                100.0 * m_direct.as_secs_f64() / m_first.as_secs_f64()
            ),
        )
    };
    rep.row(Row {
        id: id[0],
        what: format!(
            "`run_turn` with the `ScriptedAdapter`, one turn of a new conversation (a system and a user message, 200-byte texts; reply 200 bytes), {name}"
        ),
        ours: mm(&first),
        baseline,
        ratio,
        target: "report".into(),
        verdict: Verdict::Info,
    });
    // A burst of disk latency from elsewhere can fall on a few chunks of
    // one contestant: the verdict is on the medians, the means are shown.
    let growth = med_big.as_secs_f64() / med_ref.as_secs_f64();
    rep.row(Row {
        id: id[1],
        what: format!(
            "`run_turn` at turn {} of one conversation (its {} prior turns run by the engine in the same {}), history window {WINDOW} messages (`DefaultHistoryBuilder {{ max_messages: Some({WINDOW}), max_tokens: None }}`)",
            thousands(prior + 1),
            thousands(prior),
            if raw.is_some() { "journal" } else { "store" },
        ),
        ours: format!("turns {}-{}: {}", thousands(prior + 1), thousands(prior + samples), mm(&at_big)),
        baseline: format!(
            "turn 1 (a new conversation each): {}; turns 21-{} of a short conversation (window already full): {}",
            mm(&first),
            thousands(20 + samples),
            mm(&at_ref)
        ),
        ratio: format!(
            "medians: {} turn 1, {} turn 21+; means: {}, {}",
            times_of(med_big, med_first),
            times_of(med_big, med_ref),
            times_of(m_big, m_first),
            times_of(m_big, m_ref),
        ),
        target: "<= 1.25x turn 21+, medians (no growth with length)".into(),
        verdict: Verdict::at_most(growth, 1.25),
    });
    rep.note(format!(
        "rows {}/{}: {name}; {} timed turns per contestant, taking turns in chunks of {chunk}. Building the \
         {}-turn conversation took {} (mean of a turn and the next user message's append, by \
         block of 1,000 turns: {})",
        id[0],
        id[1],
        thousands(samples),
        thousands(prior),
        fmt_dur(built),
        blocks.iter().map(|d| fmt_dur(*d)).collect::<Vec<_>>().join(", "),
    ));
}
