//! Resume through the public API: plans, idempotency, prompt identity,
//! continue versus fork, adapter states.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_journal::agent::{
    Idempotency, InnerLoop, Provider, ProviderRequest, ProviderResponse, ResumeMode, ResumeOptions,
    ResumeValidation, ScriptStep, ScriptedProvider, SdkSessionState, Tool, ToolContext,
};
use agent_journal::format::now;
use agent_journal::resume::ResumeState;
use agent_journal::{Error, Journal, JournalConfig, Outcome, Session, ToolCallRecord, ToolStatus};

/// A tool that counts its runs and remembers the contexts it saw.
struct Counting {
    name: &'static str,
    idem: Idempotency,
    runs: AtomicUsize,
    contexts: Mutex<Vec<ToolContext>>,
}

impl Counting {
    fn new(name: &'static str, idem: Idempotency) -> Self {
        Self {
            name,
            idem,
            runs: AtomicUsize::new(0),
            contexts: Mutex::new(Vec::new()),
        }
    }
    fn runs(&self) -> usize {
        self.runs.load(Ordering::SeqCst)
    }
}

impl Tool for Counting {
    fn name(&self) -> &str {
        self.name
    }
    fn idempotency(&self) -> Idempotency {
        self.idem
    }
    fn call(&self, arguments: &str, ctx: &ToolContext) -> Result<String, String> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        self.contexts.lock().expect("lock").push(ctx.clone());
        Ok(format!("{} ran with {arguments}", self.name))
    }
}

/// A provider that counts calls, wrapping the scripted one.
struct CountingProvider(ScriptedProvider, AtomicUsize);

impl Provider for CountingProvider {
    fn name(&self) -> &str {
        "counting"
    }
    fn complete(&self, request: &ProviderRequest<'_>) -> Result<ProviderResponse, String> {
        self.1.fetch_add(1, Ordering::SeqCst);
        self.0.complete(request)
    }
}

fn script() -> Vec<ScriptStep> {
    vec![
        ScriptStep {
            content: "working".into(),
            calls: vec![
                ("safe".into(), "{}".into()),
                ("keyed".into(), "{}".into()),
                ("never".into(), "{}".into()),
            ],
        },
        ScriptStep {
            content: "done: {results}".into(),
            calls: vec![],
        },
    ]
}

/// Records by hand a run that stopped with `safe` completed, `keyed` in doubt
/// and `never` in the state given.
pub(crate) fn crashed_session(j: &Journal, never_started: bool) -> Session {
    let s = j.create_session().expect("create");
    let eval = s
        .start_evaluation_with("ns", "key", "counting")
        .expect("start");
    eval.system("sys").expect("system");
    eval.user("go").expect("user");
    eval.assistant(
        "working",
        vec![
            ToolCallRecord::new("call_1_1", "safe", "{}"),
            ToolCallRecord::new("call_1_2", "keyed", "{}"),
            ToolCallRecord::new("call_1_3", "never", "{}"),
        ],
    )
    .expect("assistant");
    eval.tool_started("call_1_1").expect("started");
    eval.tool_result("call_1_1", "safe ran with {}")
        .expect("result");
    eval.tool_started("call_1_2").expect("started");
    if never_started {
        eval.tool_started("call_1_3").expect("started");
    }
    s
}

#[test]
fn the_plan_names_the_crash_point_and_what_is_left() {
    let j = Journal::memory();
    let s = crashed_session(&j, false);
    let plan = s.resume_plan().expect("plan");
    assert_eq!(plan.crash_point, s.head() - 1);
    assert_eq!(plan.next_sequence, 4);
    assert_eq!(plan.turn, 1);
    assert!(
        matches!(&plan.state, ResumeState::InDoubt(c) if c.len() == 1 && c[0].call_id.as_str() == "call_1_2")
    );
    assert_eq!(plan.pending.len(), 1);
    assert_eq!(plan.pending[0].call_id.as_str(), "call_1_3");
    assert_eq!(plan.messages.len(), 4);
}

#[test]
fn completed_calls_never_run_again_in_doubt_follow_idempotency() {
    let j = Journal::memory();
    let s = crashed_session(&j, false);
    let (safe, keyed, never) = (
        Counting::new("safe", Idempotency::Safe),
        Counting::new("keyed", Idempotency::Keyed),
        Counting::new("never", Idempotency::Never),
    );
    let provider = CountingProvider(ScriptedProvider::new(script()), AtomicUsize::new(0));
    let lp = InnerLoop::new(&provider, vec![&safe, &keyed, &never]);
    let r = lp
        .resume(
            &s,
            &ResumeOptions {
                mode: ResumeMode::Continue,
                ..ResumeOptions::new("ns", "key")
            },
        )
        .expect("resume");
    assert_eq!(safe.runs(), 0, "the completed call was not run again");
    assert_eq!(keyed.runs(), 1);
    assert!(
        keyed.contexts.lock().expect("lock")[0].is_resume,
        "a keyed re-run is told it is a resume"
    );
    assert_eq!(never.runs(), 1, "a never-started call runs");
    assert!(!never.contexts.lock().expect("lock")[0].is_resume);
    assert_eq!(r.outcome, Outcome::Succeeded);
    assert_eq!(r.session.id(), s.id());
    assert_eq!(
        provider.1.load(Ordering::SeqCst),
        1,
        "one more provider call, for turn 2"
    );
    let st = s.state();
    assert!(
        st.tool_calls()
            .iter()
            .all(|c| c.status == ToolStatus::Completed)
    );
}

#[test]
fn a_never_tool_in_doubt_stops_the_resume_and_writes_nothing() {
    let j = Journal::memory();
    let s = crashed_session(&j, true);
    let head = s.head();
    let sessions = j.sessions().expect("sessions").len();
    let (safe, keyed, never) = (
        Counting::new("safe", Idempotency::Safe),
        Counting::new("keyed", Idempotency::Keyed),
        Counting::new("never", Idempotency::Never),
    );
    let provider = ScriptedProvider::new(script());
    let lp = InnerLoop::new(&provider, vec![&safe, &keyed, &never]);
    let r = lp.resume(&s, &ResumeOptions::new("ns", "key"));
    match r {
        Err(e @ Error::ToolIdempotency { .. }) => {
            assert!(e.to_string().contains("call_1_3"), "{e}")
        }
        other => panic!("expected ToolIdempotency, got {other:?}"),
    }
    assert_eq!(s.head(), head);
    assert_eq!(
        j.sessions().expect("sessions").len(),
        sessions,
        "no fork was created"
    );
    assert_eq!(keyed.runs() + never.runs(), 0);

    // Asked to, it records the call as interrupted and goes on, in the same
    // session (the default).
    let r = lp
        .resume(
            &s,
            &ResumeOptions {
                interrupt_never_tools: true,
                ..ResumeOptions::new("ns", "key")
            },
        )
        .expect("resume");
    assert_eq!(r.session.id(), s.id(), "continuing in place is the default");
    assert_eq!(never.runs(), 0);
    let st = r.session.state_cloned();
    let call = st
        .tool_calls()
        .get(r.evaluation_id, &"call_1_3".into())
        .expect("call")
        .clone();
    assert_eq!(call.status, ToolStatus::Failed);
    assert_eq!(
        call.error.as_deref(),
        Some(agent_journal::resume::INTERRUPTED_ERROR)
    );
    assert!(
        s.head() > head,
        "the run went on after the crash point, in the same stream"
    );
    assert_eq!(
        s.events(head - 1..head).expect("events")[0].seq,
        head - 1,
        "the crash point is still in the stream"
    );
}

#[test]
fn resuming_with_another_prompt_is_refused_and_writes_nothing() {
    let j = Journal::memory();
    let s = crashed_session(&j, false);
    let head = s.head();
    let provider = ScriptedProvider::new(script());
    let lp = InnerLoop::new(&provider, vec![]);
    let r = lp.resume(
        &s,
        &ResumeOptions {
            prompt: Some(("ns".into(), "other".into())),
            ..ResumeOptions::new("ns", "key")
        },
    );
    match r {
        Err(Error::PromptMismatch { expected, found }) => {
            assert_eq!(expected, "ns/key");
            assert_eq!(found, "ns/other");
        }
        other => panic!("expected PromptMismatch, got {other:?}"),
    }
    assert_eq!(s.head(), head);
    assert_eq!(j.sessions().expect("sessions").len(), 1);
}

#[test]
fn finished_and_empty_sessions_have_nothing_to_resume() {
    let j = Journal::memory();
    let provider = ScriptedProvider::new(script());
    let (safe, keyed, never) = (
        Counting::new("safe", Idempotency::Safe),
        Counting::new("keyed", Idempotency::Keyed),
        Counting::new("never", Idempotency::Never),
    );
    let lp = InnerLoop::new(&provider, vec![&safe, &keyed, &never]);
    let s = j.create_session().expect("create");
    assert!(matches!(s.resume_plan(), Err(Error::ConversationNotFound(id)) if id == s.id()));
    assert!(matches!(
        lp.resume(&s, &ResumeOptions::new("ns", "key")),
        Err(Error::ConversationNotFound(_))
    ));
    let r = lp.run(&s, "ns", "key", "sys", "go").expect("run");
    assert_eq!(r.outcome, Outcome::Succeeded);
    assert_eq!(
        r.content,
        "done: safe ran with {}; keyed ran with {}; never ran with {}"
    );
    let head = s.head();
    assert!(matches!(
        lp.resume(&s, &ResumeOptions::new("ns", "key")),
        Err(Error::AlreadyFinished { .. })
    ));
    assert_eq!(s.head(), head);
}

#[test]
fn an_answer_without_its_finish_is_finished_without_calling_the_provider() {
    let j = Journal::memory();
    let s = j.create_session().expect("create");
    let eval = s.start_evaluation("ns", "key").expect("start");
    eval.system("sys").expect("system");
    eval.assistant("the answer", vec![]).expect("assistant");
    assert_eq!(s.resume_plan().expect("plan").state, ResumeState::Answered);
    let provider = CountingProvider(ScriptedProvider::new(script()), AtomicUsize::new(0));
    let lp = InnerLoop::new(&provider, vec![]);
    let r = lp
        .resume(
            &s,
            &ResumeOptions {
                mode: ResumeMode::Continue,
                ..ResumeOptions::new("ns", "key")
            },
        )
        .expect("resume");
    assert_eq!(provider.1.load(Ordering::SeqCst), 0);
    assert_eq!(r.content, "the answer");
    assert!(s.resume_plan().expect("plan").is_finished());
}

#[test]
fn a_crashed_run_resumed_equals_an_uncrashed_run() {
    // Crash (by dropping) after every event of a run, resume, compare.
    let messages = |s: &Session| -> Vec<(String, String, u64, u32, Vec<String>)> {
        s.state()
            .messages()
            .iter()
            .map(|m| {
                (
                    m.role.to_string(),
                    m.content.clone(),
                    m.sequence,
                    m.turn,
                    m.tool_calls
                        .iter()
                        .map(|c| format!("{}:{}:{}", c.call_id, c.name, c.status))
                        .collect(),
                )
            })
            .collect()
    };
    let tools = || {
        (
            Counting::new("safe", Idempotency::Safe),
            Counting::new("keyed", Idempotency::Keyed),
            Counting::new("never", Idempotency::Safe),
        )
    };
    let provider = ScriptedProvider::new(script());
    let reference = {
        let j = Journal::memory();
        let s = j.create_session().expect("create");
        let (a, b, c) = tools();
        InnerLoop::new(&provider, vec![&a, &b, &c])
            .run(&s, "ns", "key", "sys", "go")
            .expect("run");
        (messages(&s), s.head())
    };
    let last = reference.1 - 1;
    for crash_after in 1..=last {
        // Crash right after event `crash_after` is durable: the hook panics,
        // unwinding out of the run as a dying process would stop.
        let limit = Arc::new(AtomicU64::new(crash_after));
        let hook_limit = limit.clone();
        let j = Journal::memory_with(JournalConfig {
            after_append: Some(Arc::new(move |_, _, last| {
                if last >= hook_limit.load(Ordering::SeqCst) {
                    panic!("crash after {last}");
                }
            })),
            ..JournalConfig::default()
        });
        let s = {
            limit.store(u64::MAX, Ordering::SeqCst);
            let s = j.create_session().expect("create");
            limit.store(crash_after, Ordering::SeqCst);
            s
        };
        let (a, b, c) = tools();
        let crashed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            InnerLoop::new(&provider, vec![&a, &b, &c]).run(&s, "ns", "key", "sys", "go")
        }));
        assert!(
            crashed.is_err(),
            "the run crashed after event {crash_after}"
        );
        limit.store(u64::MAX, Ordering::SeqCst);
        let runs_before = a.runs() + b.runs() + c.runs();
        let plan = s.resume_plan().expect("plan");
        let completed: usize = s
            .state()
            .tool_calls()
            .iter()
            .filter(|c| c.status == ToolStatus::Completed)
            .count();
        let lp = InnerLoop::new(&provider, vec![&a, &b, &c]);
        if crash_after == last {
            // The crash came after EvaluationFinished: nothing to resume.
            assert!(matches!(
                lp.resume(&s, &ResumeOptions::new("ns", "key")),
                Err(Error::AlreadyFinished { .. })
            ));
            assert_eq!(messages(&s), reference.0);
            continue;
        }
        let fork = lp
            .resume(&s, &ResumeOptions::new("ns", "key"))
            .expect("resume");
        assert_eq!(
            messages(&fork.session),
            reference.0,
            "crash after {crash_after} ({})",
            plan.state.name()
        );
        // Three calls in all: those completed before the crash did not run again.
        let after = a.runs() + b.runs() + c.runs() - runs_before;
        assert_eq!(
            after,
            3 - completed,
            "crash after {crash_after}: {} ran before, {completed} completed",
            runs_before
        );
    }
}

#[test]
fn adapter_states_are_found_and_validated() {
    let j = Journal::memory();
    let s = j.create_session().expect("create");
    let eval = s.start_evaluation("ns", "key").expect("start");
    let t = now();
    let state = SdkSessionState {
        session_id: "sdk-123".into(),
        created_at: t,
        last_activity_at: t,
        workspace_path: Some("/work/a".into()),
        prompt_name: "triage".into(),
        message_count: 4,
        is_complete: false,
    };
    eval.capture_adapter_state(&state).expect("capture");
    assert!(s.find_resumable_state("claude_agent_sdk").is_some());
    assert!(s.find_resumable_state("other").is_none());
    let strict = ResumeValidation::Strict {
        max_age: Duration::from_secs(3600),
    };
    assert_eq!(
        s.resumable_sdk_state(strict, Some("/work/a"), "triage", t)
            .expect("valid"),
        state
    );
    let later = t + chrono::Duration::hours(2);
    assert!(
        matches!(s.resumable_sdk_state(strict, Some("/work/a"), "triage", later), Err(Error::SessionExpired(m)) if m.contains("last active"))
    );
    assert!(
        matches!(s.resumable_sdk_state(strict, Some("/work/b"), "triage", t), Err(Error::SessionExpired(m)) if m.contains("workspace"))
    );
    assert!(
        matches!(s.resumable_sdk_state(strict, Some("/work/a"), "other", t), Err(Error::SessionExpired(m)) if m.contains("prompt"))
    );
    // Relaxed checks only that the session id exists and is resumable.
    assert!(
        s.resumable_sdk_state(ResumeValidation::Relaxed, None, "other", t)
            .is_ok()
    );
    assert!(
        s.resumable_sdk_state(
            ResumeValidation::Relaxed,
            Some("/elsewhere"),
            "triage",
            later
        )
        .is_ok()
    );
    // Later captures that are not resumable (a completed SDK session, one
    // with an empty session id) do not hide the earlier resumable one: the
    // recovery flow takes the most recent resumable state, as the spec's
    // find_resumable_state does, under every validation.
    eval.capture_adapter_state(&SdkSessionState {
        session_id: "sdk-done".into(),
        is_complete: true,
        ..state.clone()
    })
    .expect("capture");
    eval.capture_adapter_state(&SdkSessionState {
        session_id: String::new(),
        ..state.clone()
    })
    .expect("capture");
    for v in [strict, ResumeValidation::Relaxed, ResumeValidation::None] {
        assert_eq!(
            s.resumable_sdk_state(v, Some("/work/a"), "triage", t)
                .expect("the earlier resumable state")
                .session_id,
            "sdk-123",
            "{v:?}"
        );
    }
    // A session whose only SDK states are not resumable has none to give,
    // whatever the validation.
    let other = j.create_session().expect("create");
    let e2 = other.start_evaluation("ns", "key").expect("start");
    e2.capture_adapter_state(&SdkSessionState {
        is_complete: true,
        ..state.clone()
    })
    .expect("capture");
    e2.capture_adapter_state(&SdkSessionState {
        session_id: String::new(),
        ..state.clone()
    })
    .expect("capture");
    for v in [ResumeValidation::Relaxed, ResumeValidation::None] {
        assert!(
            matches!(other.resumable_sdk_state(v, None, "triage", t), Err(Error::SessionExpired(m)) if m.contains("no resumable")),
            "{v:?}"
        );
    }
    assert!(other.find_resumable_state("claude_agent_sdk").is_none());
    assert_eq!(s.state().adapter_states().len(), 3);
}

/// A tool whose handler always fails.
struct Broken;

impl Tool for Broken {
    fn name(&self) -> &str {
        "broken"
    }
    fn call(&self, _: &str, _: &ToolContext) -> Result<String, String> {
        Err("disk full".into())
    }
}

#[test]
fn a_failing_handler_and_an_unknown_tool_are_recorded_as_failed_calls_and_the_loop_goes_on() {
    let journal = Journal::memory();
    let session = journal.create_session().expect("session");
    let provider = ScriptedProvider::new(vec![
        ScriptStep {
            content: "trying".into(),
            calls: vec![
                ("broken".into(), "{}".into()),
                ("ghost".into(), "{}".into()),
            ],
        },
        ScriptStep {
            content: "results: {results}".into(),
            calls: vec![],
        },
    ]);
    let broken = Broken;
    let lp = InnerLoop::new(&provider, vec![&broken]);
    let done = lp.run(&session, "ns", "key", "sys", "go").expect("run");
    assert_eq!(done.outcome, Outcome::Succeeded);
    assert_eq!(done.content, "results: disk full; unknown tool \"ghost\"");
    let state = session.state();
    let calls: Vec<_> = state
        .tool_calls()
        .for_evaluation(done.evaluation_id)
        .collect();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].status, ToolStatus::Failed);
    assert_eq!(calls[0].error.as_deref(), Some("disk full"));
    assert!(
        calls[0].started_at.is_some(),
        "the handler ran: Started first"
    );
    assert_eq!(calls[1].status, ToolStatus::Failed);
    assert_eq!(calls[1].error.as_deref(), Some("unknown tool \"ghost\""));
    assert!(
        calls[1].started_at.is_none(),
        "an unknown tool never starts"
    );
    // The recording, event by event, for the two calls.
    let kinds: Vec<String> = session
        .events(..)
        .expect("events")
        .iter()
        .filter_map(|e| match &e.event {
            agent_journal::Event::ToolStatus {
                call_id, status, ..
            } => Some(format!("{call_id}:{status}")),
            agent_journal::Event::Message(m) if m.tool_call_id.is_some() => {
                Some(format!("result:{}", m.content))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "call_1_1:started",
            "result:disk full",
            "call_1_1:failed",
            "result:unknown tool \"ghost\"",
            "call_1_2:failed"
        ]
    );
}

#[test]
fn a_json_checkpoint_imported_as_a_session_resumes_with_exactly_once_tools() {
    // The specs' recovery flow: a checkpoint written as JSON, restored into
    // a session, its pending calls found, the run continued.
    let j = Journal::memory();
    let crashed = crashed_session(&j, false);
    let eval = crashed
        .state()
        .evaluations()
        .latest()
        .expect("eval")
        .evaluation_id;
    crashed
        .evaluation(eval)
        .expect("eval")
        .capture_adapter_state(&SdkSessionState {
            session_id: "sdk-1".into(),
            created_at: now(),
            last_activity_at: now(),
            workspace_path: None,
            prompt_name: "key".into(),
            message_count: 4,
            is_complete: false,
        })
        .expect("capture");
    let checkpoint = crashed.state().to_json(&agent_journal::state::JsonOptions {
        include_logs: true,
        ..agent_journal::state::JsonOptions::default()
    });

    let other = Journal::memory();
    let s = other.import_snapshot(&checkpoint).expect("import");
    {
        let (a, b) = (crashed.state(), s.state());
        let all = |st: &agent_journal::state::SessionState| {
            st.messages().iter().cloned().collect::<Vec<_>>()
        };
        assert_eq!(all(&a), all(&b), "every message, every field");
        let calls = |st: &agent_journal::state::SessionState| {
            st.tool_calls()
                .iter()
                .map(|c| (c.call_id.clone(), c.status, c.error.clone()))
                .collect::<Vec<_>>()
        };
        assert_eq!(calls(&a), calls(&b));
        assert_eq!(a.adapter_states().len(), b.adapter_states().len());
        assert_eq!(a.usage().total().usage, b.usage().total().usage);
        assert!(
            b.labels()
                .contains(&("imported".to_owned(), "wink".to_owned()))
        );
    }
    let (before, after) = (
        crashed.resume_plan().expect("plan"),
        s.resume_plan().expect("plan"),
    );
    // The same calls left (their status times are the import's).
    let left = |p: &agent_journal::resume::ResumePlan| {
        let calls = p.pending.iter().chain(&p.in_doubt);
        calls
            .map(|c| (c.call_id.clone(), c.name.clone(), c.status))
            .collect::<Vec<_>>()
    };
    assert_eq!(left(&before), left(&after));
    assert_eq!(before.state.name(), after.state.name());
    assert_eq!(before.messages, after.messages);

    let (safe, keyed, never) = (
        Counting::new("safe", Idempotency::Safe),
        Counting::new("keyed", Idempotency::Keyed),
        Counting::new("never", Idempotency::Never),
    );
    let provider = ScriptedProvider::new(script());
    let lp = InnerLoop::new(&provider, vec![&safe, &keyed, &never]);
    let done = lp
        .resume(
            &s,
            &ResumeOptions {
                prompt: Some(("ns".into(), "key".into())),
                ..ResumeOptions::new("ns", "key")
            },
        )
        .expect("resume");
    assert_eq!(done.outcome, Outcome::Succeeded);
    assert_eq!(safe.runs(), 0, "a completed call never runs again");
    assert_eq!((keyed.runs(), never.runs()), (1, 1));
    // A document from_json refuses writes nothing.
    let sessions = other.sessions().expect("sessions").len();
    assert!(matches!(
        other.import_snapshot("{\"nope\": 1}"),
        Err(Error::SnapshotRestore(_))
    ));
    assert_eq!(other.sessions().expect("sessions").len(), sessions);
}

#[test]
fn a_resume_checks_the_prompt_identity_unless_told_not_to() {
    let j = Journal::memory();
    let s = crashed_session(&j, false);
    let head = s.head();
    let (safe, keyed, never) = (
        Counting::new("safe", Idempotency::Safe),
        Counting::new("keyed", Idempotency::Keyed),
        Counting::new("never", Idempotency::Safe),
    );
    let provider = ScriptedProvider::new(script());
    let lp = InnerLoop::new(&provider, vec![&safe, &keyed, &never]);
    let err = lp
        .resume(&s, &ResumeOptions::default())
        .expect_err("no prompt given");
    assert!(
        err.to_string().contains("needs the prompt identity"),
        "{err}"
    );
    assert_eq!(s.head(), head, "nothing written");
    assert!(matches!(
        lp.resume(&s, &ResumeOptions::new("ns", "other")),
        Err(Error::PromptMismatch { .. })
    ));
    let done = lp
        .resume(
            &s,
            &ResumeOptions {
                skip_prompt_check: true,
                ..ResumeOptions::default()
            },
        )
        .expect("resume");
    assert_eq!(done.outcome, Outcome::Succeeded);
}

#[test]
fn run_or_resume_resumes_an_unfinished_evaluation_else_runs_a_new_one() {
    let j = Journal::memory();
    let s = crashed_session(&j, false);
    let (safe, keyed, never) = (
        Counting::new("safe", Idempotency::Safe),
        Counting::new("keyed", Idempotency::Keyed),
        Counting::new("never", Idempotency::Safe),
    );
    let provider = ScriptedProvider::new(script());
    let lp = InnerLoop::new(&provider, vec![&safe, &keyed, &never]);
    assert!(matches!(
        lp.run_or_resume(&s, "ns", "other", "sys", "go"),
        Err(Error::PromptMismatch { .. })
    ));
    let first = lp
        .run_or_resume(&s, "ns", "key", "sys", "go")
        .expect("resumed");
    assert_eq!(first.session.id(), s.id(), "in place");
    assert_eq!(safe.runs(), 0, "the completed call did not run again");
    assert_eq!(s.state().evaluations().iter().count(), 1);
    // Finished: the next call starts a new evaluation.
    let second = lp
        .run_or_resume(&s, "ns", "key", "sys", "again")
        .expect("ran");
    assert_ne!(second.evaluation_id, first.evaluation_id);
    assert_eq!(s.state().evaluations().iter().count(), 2);
    assert_eq!(safe.runs(), 1);
}

#[test]
fn a_fork_resume_leaves_the_crashed_session_as_it_was() {
    let j = Journal::memory();
    let s = crashed_session(&j, false);
    let head = s.head();
    let (safe, keyed, never) = (
        Counting::new("safe", Idempotency::Safe),
        Counting::new("keyed", Idempotency::Keyed),
        Counting::new("never", Idempotency::Never),
    );
    let provider = ScriptedProvider::new(script());
    let lp = InnerLoop::new(&provider, vec![&safe, &keyed, &never]);
    let fork = ResumeOptions {
        mode: ResumeMode::Fork,
        ..ResumeOptions::new("ns", "key")
    };
    let r = lp.resume(&s, &fork).expect("resume in a fork");
    assert_eq!(r.outcome, Outcome::Succeeded);
    assert_ne!(r.session.id(), s.id(), "a what-if branch");
    assert_eq!(s.head(), head, "the crashed session is left as it was");
    assert!(!s.resume_plan().expect("plan").is_finished());
    assert!(r.session.resume_plan().expect("plan").is_finished());
    // The default resumes the original in place, once.
    let in_place = lp
        .resume(&s, &ResumeOptions::new("ns", "key"))
        .expect("resume");
    assert_eq!(in_place.session.id(), s.id());
    assert!(matches!(
        lp.resume(&s, &ResumeOptions::new("ns", "key")),
        Err(Error::AlreadyFinished { .. })
    ));
}
