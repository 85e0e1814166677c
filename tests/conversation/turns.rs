//! Tools inside turns, and turns interrupted in the middle (here by a panic
//! in a tool or an adapter; `tests/kill.rs` kills real processes).

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use super::*;
use agent_journal::agent::{Idempotency, Tool, ToolContext};
use agent_journal::conversation::{INTERRUPTED_CALL, ResumeTurn};
use agent_journal::resume::INTERRUPTED_ERROR;

/// Counts its calls; answers the count.
struct Count {
    calls: AtomicU32,
    resumed: AtomicU32,
}

impl Tool for Count {
    fn name(&self) -> &str {
        "count"
    }
    fn description(&self) -> &str {
        "Counts how often it ran."
    }
    fn call(&self, _: &str, ctx: &ToolContext) -> Result<String, String> {
        if ctx.is_resume {
            self.resumed.fetch_add(1, Ordering::SeqCst);
        }
        Ok((self.calls.fetch_add(1, Ordering::SeqCst) + 1).to_string())
    }
}

/// Panics the first time it runs (the process "dies" inside it).
struct CrashOnce {
    name: &'static str,
    crashed: AtomicBool,
    idempotency: Idempotency,
}

impl Tool for CrashOnce {
    fn name(&self) -> &str {
        self.name
    }
    fn idempotency(&self) -> Idempotency {
        self.idempotency
    }
    fn call(&self, _: &str, ctx: &ToolContext) -> Result<String, String> {
        if !self.crashed.swap(true, Ordering::SeqCst) {
            panic!("the process dies inside the tool");
        }
        Ok(format!("ok (resume: {})", ctx.is_resume))
    }
}

fn count() -> Arc<Count> {
    Arc::new(Count {
        calls: AtomicU32::new(0),
        resumed: AtomicU32::new(0),
    })
}

fn crash(name: &'static str, idempotency: Idempotency) -> Arc<CrashOnce> {
    Arc::new(CrashOnce {
        name,
        crashed: AtomicBool::new(false),
        idempotency,
    })
}

fn script(tool: &str) -> Arc<ScriptedAdapter> {
    Arc::new(ScriptedAdapter::new(vec![vec![
        ScriptedReply::calls("working", &[("count", "{}"), (tool, "{\"x\":1}")]),
        ScriptedReply::text("done: {results}"),
    ]]))
}

#[test]
fn tools_run_inside_a_turn_with_their_specs_in_the_request() {
    let counter = count();
    let adapter = Recording::new("mock", "ok");
    let engine = memory_engine(|c| c.provider(adapter.clone(), "m").tool(counter.clone()));
    let conv = start(&engine, vec![ConversationMessage::user("hi")]);
    engine.run_turn(conv.id, RunTurn::default()).expect("turn");
    let tools = &adapter.requests()[0].0.tools;
    assert_eq!(tools.len(), 1);
    assert_eq!(tools[0].name, "count");
    assert_eq!(tools[0].description, "Counts how often it ran.");
    assert_eq!(tools[0].parameters, json!({"type": "object"}));

    let engine = memory_engine(|c| c.provider(script("count"), "s").tool(counter.clone()));
    let conv = start(&engine, vec![ConversationMessage::user("hi")]);
    let turn = engine.run_turn(conv.id, RunTurn::default()).expect("turn");
    assert_eq!(turn.status, TurnStatus::Succeeded);
    assert_eq!(turn.provider_calls.len(), 2);
    let roles: Vec<_> = turn.output_messages.iter().map(|m| m.role).collect();
    use Role::{Assistant, Tool as ToolRole};
    assert_eq!(roles, [Assistant, ToolRole, ToolRole, Assistant]);
    assert_eq!(turn.output_messages[3].text(), "done: 1; 2");
    assert!(
        turn.tool_calls
            .iter()
            .all(|c| c.status == ToolStatus::Completed)
    );
    assert_eq!(turn.provider_calls[1].tools[0].name, "count");
}

#[test]
fn an_unknown_tool_fails_its_call_and_the_turn_goes_on() {
    let counter = count();
    let engine = memory_engine(|c| c.provider(script("nope"), "s").tool(counter));
    let conv = start(&engine, vec![ConversationMessage::user("hi")]);
    let turn = engine.run_turn(conv.id, RunTurn::default()).expect("turn");
    assert_eq!(turn.status, TurnStatus::Succeeded);
    assert_eq!(turn.tool_calls[1].status, ToolStatus::Failed);
    assert_eq!(
        turn.output_messages[3].text(),
        "done: 1; unknown tool \"nope\""
    );
}

#[test]
fn a_turn_stops_after_its_step_limit() {
    let looping = Arc::new(ScriptedAdapter::new(vec![vec![
        ScriptedReply::calls(
            "again",
            &[("count", "{}")]
        );
        10
    ]]));
    let engine = memory_engine(|mut c| {
        c.max_steps = 3;
        c.provider(looping, "s").tool(count())
    });
    let conv = start(&engine, vec![ConversationMessage::user("hi")]);
    let err = engine
        .run_turn(conv.id, RunTurn::default())
        .expect_err("stops");
    assert!(
        err.to_string().contains("stopped after 3 provider calls"),
        "{err}"
    );
    let turn = &engine
        .store()
        .list_turns(conv.id, Page::all())
        .expect("list")[0];
    assert_eq!(turn.status, TurnStatus::Failed);
    assert_eq!(
        turn.error.as_ref().and_then(|e| e.code.as_deref()),
        Some("max_steps")
    );
}

#[test]
fn a_turn_interrupted_inside_a_tool_resumes_without_running_completed_tools_again() {
    let store = Arc::new(JournalConversationStore::new(Journal::memory()));
    let counter = count();
    let crasher = crash("crash", Idempotency::Safe);
    let config = ConversationEngineConfig::new("a", store.clone())
        .provider(script("crash"), "s")
        .tool(counter.clone())
        .tool(crasher.clone());
    let engine = ConversationEngine::new(config.clone());
    let conv = start(&engine, vec![ConversationMessage::user("hi")]);
    assert!(quiet(|| engine.run_turn(conv.id, RunTurn::default())).is_err());

    // A new engine (a new process) finds the turn interrupted.
    let engine = ConversationEngine::new(config);
    let interrupted = engine.interrupted_turns(conv.id).expect("list");
    assert_eq!(interrupted.len(), 1);
    let turn = &interrupted[0];
    assert_eq!(turn.status, TurnStatus::Running);
    let status: Vec<_> = turn.tool_calls.iter().map(|c| c.status).collect();
    assert_eq!(status, [ToolStatus::Completed, ToolStatus::Started]);
    // Time travel: the folded log shows the turn running at its last event.
    let session = store.session(conv.id).expect("session");
    assert_eq!(
        session.state().conversation_log().turn_status(turn.id),
        Some(TurnStatus::Running)
    );

    let done = engine
        .resume_turn(conv.id, turn.id, ResumeTurn::default())
        .expect("resume");
    assert_eq!(done.status, TurnStatus::Succeeded);
    assert_eq!(
        counter.calls.load(Ordering::SeqCst),
        1,
        "a completed tool never runs twice"
    );
    assert_eq!(
        done.output_messages.last().expect("answer").text(),
        "done: 1; ok (resume: true)"
    );
    assert_eq!(done.provider_calls.len(), 2, "a new provider call record");
    assert!(engine.interrupted_turns(conv.id).expect("list").is_empty());
    assert!(matches!(
        engine.resume_turn(conv.id, turn.id, ResumeTurn::default()),
        Err(Error::TurnFinished { .. })
    ));
}

#[test]
fn an_in_doubt_never_tool_stops_the_resume_unless_interrupted() {
    let store = Arc::new(InMemoryConversationStore::new());
    let counter = count();
    let config = ConversationEngineConfig::new("a", store)
        .provider(script("pay"), "s")
        .tool(counter.clone())
        .tool(crash("pay", Idempotency::Never));
    let engine = ConversationEngine::new(config.clone());
    let conv = start(&engine, vec![ConversationMessage::user("hi")]);
    assert!(quiet(|| engine.run_turn(conv.id, RunTurn::default())).is_err());
    let engine = ConversationEngine::new(config);
    let before = engine.interrupted_turns(conv.id).expect("list")[0].clone();
    let turn = before.id;
    let err = engine
        .resume_turn(conv.id, turn, ResumeTurn::default())
        .expect_err("never runs twice");
    assert!(
        matches!(err, Error::ToolIdempotency { ref tool, .. } if tool == "pay"),
        "{err}"
    );
    // Nothing was written by the refused resume.
    let still = engine
        .store()
        .get_turn(conv.id, turn)
        .expect("get")
        .expect("stored");
    assert_eq!(still, before);
    assert_eq!(still.tool_calls[1].status, ToolStatus::Started);
    let done = engine
        .resume_turn(
            conv.id,
            turn,
            ResumeTurn {
                interrupt_never_tools: true,
            },
        )
        .expect("resume");
    assert_eq!(done.status, TurnStatus::Succeeded);
    assert_eq!(done.tool_calls[1].status, ToolStatus::Failed);
    assert!(done.output_messages[3].text().ends_with(INTERRUPTED_ERROR));
    assert_eq!(counter.calls.load(Ordering::SeqCst), 1);
}

/// Panics on its first call (the process dies while the request is out).
struct DiesOnce(AtomicBool);

impl ProviderAdapter for DiesOnce {
    fn id(&self) -> &str {
        "dies"
    }
    fn send_chat(
        &self,
        _: &ProviderChatRequest,
        _: &ProviderCallOptions,
    ) -> Result<ProviderChatResult, ProviderError> {
        if !self.0.swap(true, Ordering::SeqCst) {
            panic!("the process dies during the provider call");
        }
        Ok(ProviderChatResult {
            messages: vec![ConversationMessage::assistant("back")],
            ..Default::default()
        })
    }
}

#[test]
fn a_turn_interrupted_during_a_provider_call_is_resumed_or_failed() {
    for fail in [false, true] {
        let log = Arc::new(Log::default());
        let mut config =
            ConversationEngineConfig::new("a", Arc::new(InMemoryConversationStore::new()))
                .provider(Arc::new(DiesOnce(AtomicBool::new(false))), "m");
        config.hooks = Some(log.clone());
        let engine = ConversationEngine::new(config.clone());
        let conv = start(&engine, vec![ConversationMessage::user("hi")]);
        assert!(quiet(|| engine.run_turn(conv.id, RunTurn::default())).is_err());
        let engine = ConversationEngine::new(config);
        let turn = engine.interrupted_turns(conv.id).expect("list")[0].clone();
        assert_eq!(turn.provider_calls.len(), 1);
        assert_eq!(
            turn.provider_calls[0].finished_at, None,
            "the call is in flight"
        );
        let done = if fail {
            engine
                .fail_turn(conv.id, turn.id, "given up")
                .expect("fail")
        } else {
            engine
                .resume_turn(conv.id, turn.id, ResumeTurn::default())
                .expect("resume")
        };
        let first = done.provider_calls[0].outcome.clone().expect("closed");
        assert_eq!(first.error.as_deref(), Some(INTERRUPTED_CALL));
        if fail {
            assert_eq!(done.status, TurnStatus::Failed);
            assert_eq!(
                done.error.as_ref().and_then(|e| e.code.as_deref()),
                Some("interrupted")
            );
            assert!(
                log.lines()
                    .last()
                    .expect("hook")
                    .starts_with("error Failed")
            );
        } else {
            assert_eq!(done.status, TurnStatus::Succeeded);
            assert_eq!(done.provider_calls.len(), 2);
            assert_eq!(done.output_messages[0].text(), "back");
            assert_eq!(
                log.lines().last().map(String::as_str),
                Some("success Succeeded 1")
            );
        }
        assert!(engine.interrupted_turns(conv.id).expect("list").is_empty());
    }
}
