//! A new turn on a conversation with an interrupted turn never sends a tool
//! call without its result, whatever the crash point and the
//! `InterruptedTurns` option; and the spec's wiring: `pending` and
//! `cancelled` statuses, `cancel_turn`, the order history builder,
//! planner, `before_turn`, the planner's messages, `AgentContext.metadata`,
//! `get_messages` by `created_at`.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;

use super::*;
use agent_journal::ToolCallRecord;
use agent_journal::agent::{Idempotency, Tool, ToolContext};
use agent_journal::conversation::http::{anthropic_request_body, openai_request_body};
use agent_journal::conversation::{
    CANCELLED_TOOL, CompactionRecord, ConversationId, HistoryWindow, InterruptedTurns, TurnId,
};
use agent_journal::provider::validate;
use proptest::prelude::*;

/// A store that "crashes" (panics, before writing) at its `crash_at`-th
/// write: the process dies between two of the engine's steps.
struct CrashStore {
    inner: Arc<InMemoryConversationStore>,
    writes: AtomicU32,
    crash_at: AtomicU32,
}

impl CrashStore {
    fn new(inner: Arc<InMemoryConversationStore>, crash_at: u32) -> Arc<Self> {
        Arc::new(Self {
            inner,
            writes: AtomicU32::new(0),
            crash_at: AtomicU32::new(crash_at),
        })
    }
    fn write(&self) {
        if self.writes.fetch_add(1, Ordering::SeqCst) == self.crash_at.load(Ordering::SeqCst) {
            panic!("the process dies before this write");
        }
    }
}

impl ConversationStore for CrashStore {
    fn create_conversation(
        &self,
        c: &Conversation,
        m: &[ConversationMessage],
    ) -> agent_journal::Result<()> {
        self.inner.create_conversation(c, m)
    }
    fn get_conversation(&self, id: ConversationId) -> agent_journal::Result<Option<Conversation>> {
        self.inner.get_conversation(id)
    }
    fn update_conversation(&self, c: &Conversation) -> agent_journal::Result<()> {
        self.write();
        self.inner.update_conversation(c)
    }
    fn append_messages(
        &self,
        id: ConversationId,
        m: &[ConversationMessage],
    ) -> agent_journal::Result<()> {
        self.inner.append_messages(id, m)
    }
    fn get_messages(
        &self,
        id: ConversationId,
        p: Page,
    ) -> agent_journal::Result<Vec<ConversationMessage>> {
        self.inner.get_messages(id, p)
    }
    fn unanswered_messages(
        &self,
        id: ConversationId,
    ) -> agent_journal::Result<Vec<ConversationMessage>> {
        self.inner.unanswered_messages(id)
    }
    fn create_turn(&self, t: &ConversationTurn) -> agent_journal::Result<()> {
        self.write();
        self.inner.create_turn(t)
    }
    fn update_turn(&self, t: &ConversationTurn) -> agent_journal::Result<()> {
        self.write();
        self.inner.update_turn(t)
    }
    fn get_turn(
        &self,
        id: ConversationId,
        t: TurnId,
    ) -> agent_journal::Result<Option<ConversationTurn>> {
        self.inner.get_turn(id, t)
    }
    fn list_turns(
        &self,
        id: ConversationId,
        p: Page,
    ) -> agent_journal::Result<Vec<ConversationTurn>> {
        self.inner.list_turns(id, p)
    }
    fn list_conversations(&self) -> agent_journal::Result<Vec<ConversationId>> {
        self.inner.list_conversations()
    }
    fn history(
        &self,
        id: ConversationId,
        w: Option<usize>,
    ) -> agent_journal::Result<HistoryWindow> {
        self.inner.history(id, w)
    }
    fn record_compaction(
        &self,
        id: ConversationId,
        r: &CompactionRecord,
    ) -> agent_journal::Result<()> {
        self.write();
        self.inner.record_compaction(id, r)
    }
}

/// Answers its script in order, each step "working" with calls to the
/// tools named (then "fine"), recording every request.
struct Capture {
    script: Vec<Vec<&'static str>>,
    seen: Mutex<Vec<ProviderChatRequest>>,
}

impl Capture {
    fn new(script: Vec<Vec<&'static str>>) -> Arc<Self> {
        Arc::new(Self {
            script,
            seen: Mutex::new(Vec::new()),
        })
    }
    fn requests(&self) -> Vec<ProviderChatRequest> {
        self.seen.lock().expect("lock").clone()
    }
}

impl ProviderAdapter for Capture {
    fn id(&self) -> &str {
        "capture"
    }
    fn send_chat(
        &self,
        request: &ProviderChatRequest,
        _: &ProviderCallOptions,
    ) -> Result<ProviderChatResult, ProviderError> {
        let mut seen = self.seen.lock().expect("lock");
        seen.push(request.clone());
        let n = seen.len();
        let mut m = match self.script.get(n - 1) {
            Some(_) => ConversationMessage::assistant("working"),
            None => ConversationMessage::assistant("fine"),
        };
        m.tool_calls = self
            .script
            .get(n - 1)
            .into_iter()
            .flatten()
            .enumerate()
            .map(|(i, name)| ToolCallRecord::new(format!("call-{n}-{i}"), *name, "{}"))
            .collect();
        Ok(ProviderChatResult {
            messages: vec![m],
            ..Default::default()
        })
    }
}

/// A tool of the given idempotency that counts its runs.
struct Effect {
    name: &'static str,
    idempotency: Idempotency,
    runs: AtomicU32,
}

impl Tool for Effect {
    fn name(&self) -> &str {
        self.name
    }
    fn idempotency(&self) -> Idempotency {
        self.idempotency
    }
    fn call(&self, _: &str, _: &ToolContext) -> Result<String, String> {
        Ok(format!(
            "{} ran {}",
            self.name,
            self.runs.fetch_add(1, Ordering::SeqCst) + 1
        ))
    }
}

fn tools() -> Vec<Arc<Effect>> {
    [
        ("safe", Idempotency::Safe),
        ("keyed", Idempotency::Keyed),
        ("never", Idempotency::Never),
    ]
    .into_iter()
    .map(|(name, idempotency)| {
        Arc::new(Effect {
            name,
            idempotency,
            runs: AtomicU32::new(0),
        })
    })
    .collect()
}

/// Every request passes both providers' validators, in their wire shapes.
fn assert_valid(requests: &[ProviderChatRequest]) -> Result<(), TestCaseError> {
    for (i, r) in requests.iter().enumerate() {
        let openai = openai_request_body(r, false);
        let messages = openai["messages"].as_array().cloned().unwrap_or_default();
        if let Err(e) = validate::openai(&messages) {
            return Err(TestCaseError::fail(format!("request {i}, OpenAI: {e}")));
        }
        if let Err(e) = validate::anthropic(&anthropic_request_body(r, false)) {
            return Err(TestCaseError::fail(format!("request {i}, Anthropic: {e}")));
        }
    }
    Ok(())
}

fn config(store: Arc<dyn ConversationStore>, adapter: Arc<Capture>) -> ConversationEngineConfig {
    let mut config = ConversationEngineConfig::new("a", store).provider(adapter, "m");
    for t in tools() {
        config = config.tool(t);
    }
    config
}

const POLICIES: [InterruptedTurns; 3] = [
    InterruptedTurns::Answer,
    InterruptedTurns::Resume,
    InterruptedTurns::Refuse,
];

/// One case: a turn whose model calls `calls` (by tool index), cut at its
/// `crash_at`-th write; maybe a new user message; then a new turn under
/// `policy`.
fn crash_then_turn(
    calls: &[usize],
    crash_at: u32,
    append: bool,
    policy: InterruptedTurns,
) -> Result<(), TestCaseError> {
    let names = ["safe", "keyed", "never"];
    let memory = Arc::new(InMemoryConversationStore::new());
    let first = Capture::new(vec![calls.iter().map(|&t| names[t]).collect()]);
    let engine = ConversationEngine::new(config(
        CrashStore::new(memory.clone(), crash_at),
        first.clone(),
    ));
    let conv = engine
        .create_conversation(CreateConversation {
            initial_messages: vec![
                ConversationMessage::system("S"),
                ConversationMessage::user("do it"),
            ],
            ..Default::default()
        })
        .expect("create");
    let crashed = quiet(|| engine.run_turn(conv.id, RunTurn::default())).is_err();
    assert_valid(&first.requests())?;
    if append {
        memory
            .append_messages(conv.id, &[ConversationMessage::user("and then?")])
            .expect("append");
    }

    // A new process: an engine over the same store, nothing armed.
    let second = Capture::new(Vec::new());
    let engine = ConversationEngine::new(config(memory.clone(), second.clone()));
    let before = engine.interrupted_turns(conv.id).expect("list");
    // A crash at the turn's first write leaves no turn at all.
    prop_assert!(crashed || before.is_empty());
    let interrupted = !before.is_empty();
    let in_doubt_never = before.iter().any(|t| {
        t.tool_calls
            .iter()
            .any(|c| c.name == "never" && c.status == ToolStatus::Started)
    });
    let result = engine.run_turn(
        conv.id,
        RunTurn {
            interrupted: Some(policy),
            ..Default::default()
        },
    );
    assert_valid(&second.requests())?;
    match (policy, interrupted) {
        (InterruptedTurns::Refuse, true) => {
            let named = matches!(&result, Err(Error::InterruptedTurn { turn, .. }) if *turn == before[0].id.0);
            prop_assert!(named, "{:?}", result);
            prop_assert!(second.requests().is_empty());
            prop_assert_eq!(engine.interrupted_turns(conv.id).expect("list"), before);
        }
        (InterruptedTurns::Resume, true) if in_doubt_never => {
            let refused = matches!(result, Err(Error::ToolIdempotency { .. }));
            prop_assert!(refused, "{:?}", result);
            prop_assert!(second.requests().is_empty());
        }
        _ => {
            let turn = result.map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(turn.status, TurnStatus::Succeeded);
            prop_assert!(engine.interrupted_turns(conv.id).expect("list").is_empty());
            // The new turn's request is the last; it ends with its input.
            let last = second.requests().pop().expect("a request");
            let want = if append { "and then?" } else { "do it" };
            let users: Vec<String> = last
                .messages
                .iter()
                .filter(|m| m.role == Role::User)
                .map(|m| m.text())
                .collect();
            prop_assert_eq!(users.last().map(String::as_str), Some(want));
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Whatever the crash point (every write of a tool-using turn, from
    /// its creation to its end), whichever calls had finished, and whether
    /// a user message came after the crash, every request sent passes the
    /// OpenAI and Anthropic validators under each option.
    #[test]
    fn no_request_ever_carries_an_unanswered_tool_call(
        calls in prop::collection::vec(0usize..3, 1..=3),
        crash_at in 0u32..16,
        append in any::<bool>(),
        policy in 0usize..3,
    ) {
        crash_then_turn(&calls, crash_at, append, POLICIES[policy])?;
    }
}

/// Every crash point of a two-call turn, exhaustively, under each option.
#[test]
fn every_crash_point_of_a_turn_under_every_option() {
    for policy in POLICIES {
        for crash_at in 0..12 {
            for append in [false, true] {
                crash_then_turn(&[2, 0], crash_at, append, policy).unwrap_or_else(|e| {
                    panic!("{policy:?} crash_at {crash_at} append {append}: {e}")
                });
            }
        }
    }
}

/// Crashes a turn whose model calls `never` then `safe`, inside `never`'s
/// run (its result is not stored): the turn is interrupted with one call
/// in doubt and one pending.
fn crashed_in_a_tool(memory: &Arc<InMemoryConversationStore>) -> (ConversationId, TurnId) {
    let first = Capture::new(vec![vec!["never", "safe"]]);
    // Writes: create_turn 0, call started 1, call ended 2, never Started 3,
    // never's result 4.
    let engine = ConversationEngine::new(config(CrashStore::new(memory.clone(), 4), first));
    let conv = start(&engine, vec![ConversationMessage::user("do it")]);
    assert!(quiet(|| engine.run_turn(conv.id, RunTurn::default())).is_err());
    let turn = engine.interrupted_turns(conv.id).expect("list")[0].clone();
    let status: Vec<_> = turn.tool_calls.iter().map(|c| c.status).collect();
    assert_eq!(status, [ToolStatus::Started, ToolStatus::Pending]);
    (conv.id, turn.id)
}

#[test]
fn the_default_answers_an_interrupted_turn_by_idempotency_without_running_never_tools_again() {
    let memory = Arc::new(InMemoryConversationStore::new());
    let (id, old) = crashed_in_a_tool(&memory);
    let adapter = Capture::new(Vec::new());
    let effects = tools();
    let mut config =
        ConversationEngineConfig::new("a", memory.clone()).provider(adapter.clone(), "m");
    for t in &effects {
        config = config.tool(t.clone());
    }
    let engine = ConversationEngine::new(config);
    engine
        .append_messages(id, &[ConversationMessage::user("and then?")])
        .expect("append");
    let turn = engine.run_turn(id, RunTurn::default()).expect("turn");
    assert_eq!(turn.status, TurnStatus::Succeeded);
    assert_eq!(turn.input_messages.len(), 1, "the new message is the input");
    assert_eq!(turn.input_messages[0].text(), "and then?");
    assert_eq!(
        effects[2].runs.load(Ordering::SeqCst),
        0,
        "never runs twice"
    );
    assert_eq!(
        effects[0].runs.load(Ordering::SeqCst),
        1,
        "the pending call ran"
    );
    let old = engine
        .store()
        .get_turn(id, old)
        .expect("get")
        .expect("stored");
    assert_eq!(old.status, TurnStatus::Failed);
    assert_eq!(
        old.error.and_then(|e| e.code).as_deref(),
        Some("interrupted")
    );
    let texts: Vec<String> = adapter.requests()[0]
        .messages
        .iter()
        .map(|m| m.text())
        .collect();
    assert_eq!(
        texts,
        [
            "do it",
            "working",
            agent_journal::resume::INTERRUPTED_ERROR,
            "safe ran 1",
            "and then?"
        ],
        "the results right after their calls, the new message after them"
    );
    assert_valid(&adapter.requests()).expect("valid");
}

#[test]
fn refuse_names_the_interrupted_turn_and_writes_nothing() {
    let memory = Arc::new(InMemoryConversationStore::new());
    let (id, old) = crashed_in_a_tool(&memory);
    let adapter = Capture::new(Vec::new());
    let mut config = config(memory.clone(), adapter.clone());
    config.interrupted_turns = InterruptedTurns::Refuse;
    let engine = ConversationEngine::new(config);
    let turns_before = memory.list_turns(id, Page::all()).expect("list");
    let err = engine
        .run_turn(id, RunTurn::default())
        .expect_err("refused");
    assert!(
        matches!(err, Error::InterruptedTurn { conversation, turn } if conversation == id && turn == old.0),
        "{err:?}"
    );
    assert_eq!(err.kind(), "interrupted_turn");
    assert!(err.to_string().contains(&old.to_string()), "{err}");
    assert_eq!(
        memory.list_turns(id, Page::all()).expect("list"),
        turns_before
    );
    assert!(adapter.requests().is_empty());
}

#[test]
fn a_turn_is_pending_until_its_first_provider_call_then_running() {
    let memory = Arc::new(InMemoryConversationStore::new());
    // Write 1 is the first provider call's record: the crash comes before.
    let engine = ConversationEngine::new(config(
        CrashStore::new(memory.clone(), 1),
        Capture::new(Vec::new()),
    ));
    let conv = start(&engine, vec![ConversationMessage::user("hi")]);
    assert!(quiet(|| engine.run_turn(conv.id, RunTurn::default())).is_err());
    let engine = ConversationEngine::new(config(memory.clone(), Capture::new(Vec::new())));
    let turn = engine.interrupted_turns(conv.id).expect("list")[0].clone();
    assert_eq!(turn.status, TurnStatus::Pending);
    assert!(turn.provider_calls.is_empty());

    // Crash during the first call (write 2 is its end): running.
    let memory = Arc::new(InMemoryConversationStore::new());
    let engine = ConversationEngine::new(config(
        CrashStore::new(memory.clone(), 2),
        Capture::new(Vec::new()),
    ));
    let conv = start(&engine, vec![ConversationMessage::user("hi")]);
    assert!(quiet(|| engine.run_turn(conv.id, RunTurn::default())).is_err());
    let engine = ConversationEngine::new(config(memory.clone(), Capture::new(Vec::new())));
    let turn = engine.interrupted_turns(conv.id).expect("list")[0].clone();
    assert_eq!(turn.status, TurnStatus::Running);
    let done = engine
        .resume_turn(conv.id, turn.id, Default::default())
        .expect("resume");
    assert_eq!(done.status, TurnStatus::Succeeded);
}

#[test]
fn cancel_turn_cancels_an_interrupted_turn_and_answers_its_calls() {
    {
        let inner = Arc::new(InMemoryConversationStore::new());
        let (id, old) = crashed_in_a_tool(&inner);
        let adapter = Capture::new(Vec::new());
        let engine = ConversationEngine::new(config(inner.clone(), adapter.clone()));
        let cancelled = engine
            .cancel_turn(id, old, "user said stop")
            .expect("cancel");
        assert_eq!(cancelled.status, TurnStatus::Cancelled);
        assert!(cancelled.finished_at.is_some());
        assert_eq!(
            cancelled.metadata.get("cancel_reason"),
            Some(&json!("user said stop"))
        );
        assert!(
            cancelled
                .tool_calls
                .iter()
                .all(|c| c.status == ToolStatus::Failed)
        );
        assert!(
            cancelled.output_messages[1..]
                .iter()
                .all(|m| m.text() == CANCELLED_TOOL)
        );
        let stored = engine
            .store()
            .get_turn(id, old)
            .expect("get")
            .expect("stored");
        assert_eq!(stored, cancelled);
        assert!(engine.interrupted_turns(id).expect("list").is_empty());
        assert!(matches!(
            engine.cancel_turn(id, old, "again"),
            Err(Error::TurnFinished { .. })
        ));
        engine
            .append_messages(id, &[ConversationMessage::user("next")])
            .expect("append");
        engine.run_turn(id, RunTurn::default()).expect("turn");
        assert_valid(&adapter.requests()).expect("valid");
    }
}

#[test]
fn cancel_turn_stops_a_turn_running_here_before_its_next_provider_call() {
    /// Waits for the test to cancel the turn, then answers.
    struct Gate {
        started: Mutex<Option<mpsc::Sender<()>>>,
        go: Mutex<Option<mpsc::Receiver<()>>>,
    }
    impl Tool for Gate {
        fn name(&self) -> &str {
            "safe"
        }
        fn call(&self, _: &str, _: &ToolContext) -> Result<String, String> {
            if let Some(tx) = self.started.lock().expect("lock").take() {
                let _ = tx.send(());
            }
            if let Some(rx) = self.go.lock().expect("lock").take() {
                let _ = rx.recv();
            }
            Ok("done".into())
        }
    }
    let (started_tx, started_rx) = mpsc::channel();
    let (go_tx, go_rx) = mpsc::channel();
    let adapter = Capture::new(vec![vec!["safe"]]);
    let store = Arc::new(JournalConversationStore::new(Journal::memory()));
    let engine = Arc::new(ConversationEngine::new(
        ConversationEngineConfig::new("a", store.clone())
            .provider(adapter.clone(), "m")
            .tool(Arc::new(Gate {
                started: Mutex::new(Some(started_tx)),
                go: Mutex::new(Some(go_rx)),
            })),
    ));
    let conv = start(&engine, vec![ConversationMessage::user("hi")]);
    let runner = {
        let engine = engine.clone();
        std::thread::spawn(move || engine.run_turn(conv.id, RunTurn::default()))
    };
    started_rx.recv().expect("the tool started");
    let turn = engine
        .store()
        .list_turns(conv.id, Page::all())
        .expect("list")[0]
        .id;
    let now = engine
        .cancel_turn(conv.id, turn, "too slow")
        .expect("cancel");
    assert_eq!(now.status, TurnStatus::Running, "still running when asked");
    go_tx.send(()).expect("go");
    let done = runner.join().expect("thread").expect("turn");
    assert_eq!(done.status, TurnStatus::Cancelled);
    assert_eq!(
        adapter.requests().len(),
        1,
        "no provider call after the cancel"
    );
    assert_eq!(done.tool_calls[0].status, ToolStatus::Completed);
    let stored = engine
        .store()
        .get_turn(conv.id, turn)
        .expect("get")
        .expect("stored");
    assert_eq!(stored.status, TurnStatus::Cancelled);
    assert_eq!(
        stored.metadata.get("cancel_reason"),
        Some(&json!("too slow"))
    );
}

/// Records the order in which the engine consults its parts, and what the
/// planner saw.
struct Order3 {
    log: Arc<Mutex<Vec<String>>>,
}

impl HistoryBuilder for Order3 {
    fn build_history(&self, ctx: &HistoryContext<'_>) -> Vec<ChatInputMessage> {
        self.log.lock().expect("lock").push("history".into());
        DefaultHistoryBuilder::default().build_history(ctx)
    }
}

impl TurnPlanner for Order3 {
    fn plan_turn(&self, input: &PlanInput<'_>) -> Result<PlannedTurn, Error> {
        let texts: Vec<String> = input.messages.iter().map(|m| m.text()).collect();
        self.log
            .lock()
            .expect("lock")
            .push(format!("plan {}", texts.join(",")));
        Ok(PlannedTurn {
            provider: "capture".into(),
            model: "m".into(),
            parameters: Metadata::new(),
        })
    }
}

impl ConversationHooks for Order3 {
    fn before_turn(&self, t: &ConversationTurn, _: &Conversation) {
        self.log
            .lock()
            .expect("lock")
            .push(format!("before {:?}", t.status));
    }
}

#[test]
fn history_builder_then_planner_then_before_turn_and_the_planner_sees_the_conversation() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let parts = Arc::new(Order3 { log: log.clone() });
    let engine = memory_engine(|mut c| {
        c.history_builder = Some(parts.clone());
        c.planner = Some(parts.clone());
        c.hooks = Some(parts.clone());
        c.provider(Capture::new(Vec::new()), "m")
    });
    let conv = start(
        &engine,
        vec![
            ConversationMessage::system("S"),
            ConversationMessage::user("one"),
        ],
    );
    engine.run_turn(conv.id, RunTurn::default()).expect("turn");
    engine
        .append_messages(conv.id, &[ConversationMessage::user("two")])
        .expect("append");
    log.lock().expect("lock").clear();
    engine.run_turn(conv.id, RunTurn::default()).expect("turn");
    assert_eq!(
        *log.lock().expect("lock"),
        ["history", "plan S,one,fine,two", "before Pending"],
        "the spec's order, and the planner sees the whole conversation, not only this call's input"
    );
}

#[test]
fn agent_context_metadata_is_the_call_options_metadata() {
    let adapter = Recording::new("mock", "ok");
    let engine = memory_engine(|c| c.provider(adapter.clone(), "m"));
    let mut metadata = Metadata::new();
    metadata.insert("cohort".into(), json!("b"));
    let conv = engine
        .create_conversation(CreateConversation {
            initial_messages: vec![ConversationMessage::user("q")],
            metadata,
            ..Default::default()
        })
        .expect("create");
    let mut hints = Metadata::new();
    hints.insert("request.class".into(), json!("interactive"));
    engine
        .run_turn(
            conv.id,
            RunTurn {
                hints: hints.clone(),
                ..Default::default()
            },
        )
        .expect("turn");
    let (_, options) = &adapter.requests()[0];
    assert_eq!(options.metadata, hints);
    assert_eq!(options.agent_context.metadata, options.metadata);
}

#[test]
fn get_messages_sorts_by_created_at_with_ties_in_append_order() {
    for store in [
        Arc::new(InMemoryConversationStore::new()) as Arc<dyn ConversationStore>,
        Arc::new(JournalConversationStore::new(Journal::memory())),
    ] {
        let engine = ConversationEngine::new(ConversationEngineConfig::new("a", store.clone()));
        let conv = engine
            .create_conversation(CreateConversation::default())
            .expect("create");
        let t0 = chrono::Utc::now();
        let at = |text: &str, secs: i64| {
            let mut m = ConversationMessage::user(text);
            m.created_at = t0 + chrono::Duration::seconds(secs);
            m
        };
        let messages = [
            at("late", 5),
            at("early", 1),
            at("tie-a", 3),
            at("tie-b", 3),
        ];
        store.append_messages(conv.id, &messages).expect("append");
        let texts = |p| -> Vec<String> {
            store
                .get_messages(conv.id, p)
                .expect("read")
                .iter()
                .map(|m| m.text())
                .collect()
        };
        assert_eq!(texts(Page::all()), ["early", "tie-a", "tie-b", "late"]);
        assert_eq!(texts(Page::last(2)), ["late", "tie-b"]);
    }
}

/// The CLI face of `cancel_turn`: a `demo --conversation` killed inside a
/// turn with a tool call open; `cancel-turn` stores the turn `cancelled`
/// and answers the call, `pending` then reports nothing, `turns` shows it,
/// and cancelling it again (or a finished turn) is a one-line error.
#[test]
fn cancel_turn_on_the_command_line_gives_up_an_interrupted_turn() {
    use crate::common::{path_str, run_cli};
    let json = |out: &std::process::Output| -> serde_json::Value {
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).expect("json")
    };
    // The first crash point that leaves a turn with a tool call open.
    let (dir, id, turn) = (4..40)
        .find_map(|n| {
            let dir = tempfile::tempdir().expect("tempdir");
            let (db, sb) = (dir.path().join("db"), dir.path().join("sb"));
            let n = n.to_string();
            let args = [
                "demo",
                "--conversation",
                "--sandbox",
                path_str(&sb),
                "--crash-after",
                &n,
            ];
            run_cli(&db, &args);
            let id = Journal::open(&db)
                .ok()?
                .sessions()
                .ok()?
                .first()?
                .to_string();
            let pending = json(&run_cli(&db, &["--json", "pending", &id]));
            let t = pending["interrupted_turns"].as_array()?.first()?.clone();
            let open = t["tool_calls"].as_array().is_some_and(|c| !c.is_empty());
            open.then(|| (dir, id, t["turn"].as_str().unwrap_or_default().to_owned()))
        })
        .expect("a crash point inside a turn with a tool call open");
    let db = dir.path().join("db");
    let suffix = &turn[turn.len() - 8..];
    let out = json(&run_cli(
        &db,
        &[
            "--json",
            "cancel-turn",
            &id,
            suffix,
            "--reason",
            "user gave up",
        ],
    ));
    assert_eq!(out["status"], "cancelled");
    assert_eq!(out["turn"], turn.as_str());
    let pending = json(&run_cli(&db, &["--json", "pending", &id]));
    assert_eq!(pending["interrupted_turns"], serde_json::json!([]));
    let turns = crate::common::json_lines(&run_cli(&db, &["--json", "turns", &id]).stdout);
    let row = turns
        .as_array()
        .expect("turns")
        .iter()
        .find(|t| t["id"] == turn.as_str())
        .expect("the turn")
        .clone();
    assert_eq!(row["status"], "cancelled", "{row}");
    // Every tool call of the conversation now has its result.
    let s = Journal::open(&db)
        .expect("open")
        .session(id.parse().expect("id"))
        .expect("session");
    let state = s.state_cloned();
    assert!(state.tool_calls().iter().all(|c| c.status.is_terminal()));
    drop(s);
    let again = run_cli(&db, &["cancel-turn", &id, suffix]);
    assert_eq!(again.status.code(), Some(1));
    let err = String::from_utf8_lossy(&again.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
}
