//! Stateful providers (adapter-state spec): the inner loop captures their
//! state by itself and hands it back on a resume.

use std::sync::Mutex;
use std::time::Duration;

use agent_journal::agent::{
    CapturedState, Idempotency, InnerLoop, Provider, ProviderRequest, ProviderResponse, ResumeMode,
    ResumeOptions, ResumeValidation, ScriptStep, ScriptedProvider, SdkSessionState,
    SdkStateTracker, StateConfig, StatefulProvider, Tool, ToolContext,
};
use agent_journal::state::{JsonOptions, SliceNames};
use agent_journal::{
    AdapterStateSnapshot, CheckpointStrategy, Journal, Outcome, Session, ToolCallRecord,
};
use serde_json::json;

/// An agent SDK as the spec's adapter sees it: its query yields an init
/// message naming the session, one message per round trip, and a result
/// message at the end; `resume_from` is where the SDK's `resume` option
/// would be set.
struct SdkProvider {
    script: ScriptedProvider,
    tracker: SdkStateTracker,
    session_id: &'static str,
    resumed_from: Mutex<Vec<Option<String>>>,
}

impl SdkProvider {
    fn new(session_id: &'static str) -> Self {
        Self {
            script: ScriptedProvider::new(vec![
                ScriptStep {
                    content: "reading".into(),
                    calls: vec![("echo".into(), "{\"x\":1}".into())],
                },
                ScriptStep {
                    content: "done: {results}".into(),
                    calls: vec![],
                },
            ]),
            tracker: SdkStateTracker::new("ns:key", Some("/work".into())),
            session_id,
            resumed_from: Mutex::new(Vec::new()),
        }
    }

    fn resumed_from(&self) -> Vec<Option<String>> {
        self.resumed_from.lock().expect("lock").clone()
    }
}

impl Provider for SdkProvider {
    fn name(&self) -> &str {
        "sdk"
    }
    fn complete(&self, request: &ProviderRequest<'_>) -> Result<ProviderResponse, String> {
        if self.tracker.state().session_id.is_empty() {
            self.tracker.observe(
                &json!({"type": "system", "subtype": "init", "session_id": self.session_id}),
            );
        }
        let r = self.script.complete(request)?;
        self.tracker
            .observe(&json!({"type": "assistant", "content": r.content}));
        if r.tool_calls.is_empty() {
            self.tracker
                .observe(&json!({"type": "result", "subtype": "success"}));
        }
        Ok(r)
    }
}

impl StatefulProvider for SdkProvider {
    fn adapter_type(&self) -> &str {
        SdkSessionState::ADAPTER_TYPE
    }
    fn resume_from(&self, state: Option<&AdapterStateSnapshot>) {
        let sdk = state.and_then(|s| serde_json::from_str::<SdkSessionState>(&s.state).ok());
        self.resumed_from
            .lock()
            .expect("lock")
            .push(sdk.as_ref().map(|s| s.session_id.clone()));
        if let Some(s) = sdk {
            self.tracker.resume(s);
        }
    }
    fn capture(&self) -> Option<CapturedState> {
        self.tracker.captured()
    }
}

struct Echo;

impl Tool for Echo {
    fn name(&self) -> &str {
        "echo"
    }
    fn idempotency(&self) -> Idempotency {
        Idempotency::Safe
    }
    fn call(&self, arguments: &str, _: &ToolContext) -> Result<String, String> {
        Ok(format!("echo {arguments}"))
    }
}

fn sdk_states(s: &Session) -> Vec<(AdapterStateSnapshot, SdkSessionState)> {
    s.state()
        .adapter_states()
        .iter()
        .map(|a| {
            (
                a.clone(),
                serde_json::from_str(&a.state).expect("sdk state"),
            )
        })
        .collect()
}

#[test]
fn the_loop_captures_after_each_tool_call_and_at_the_end_each_superseding_the_last() {
    let j = Journal::memory();
    let s = j.create_session().expect("session");
    let p = SdkProvider::new("sdk-abc");
    let r = InnerLoop::stateful(&p, vec![&Echo], StateConfig::default())
        .run(&s, "ns", "key", "sys", "go")
        .expect("run");
    assert_eq!(r.outcome, Outcome::Succeeded);
    assert_eq!(
        p.resumed_from(),
        [None],
        "a fresh run starts a fresh SDK session"
    );
    let states = sdk_states(&s);
    assert_eq!(states.len(), 2, "one capture per changed state: {states:?}");
    assert!(states.iter().all(|(_, st)| st.session_id == "sdk-abc"));
    assert_eq!(states[0].0.supersedes, None);
    assert_eq!(states[1].0.supersedes, Some(states[0].0.snapshot_id));
    assert!(states[0].0.resumable && !states[0].1.is_complete);
    assert!(
        !states[1].0.resumable && states[1].1.is_complete,
        "it completed"
    );
    assert_eq!(
        states[1].1.message_count, 4,
        "init, two answers, the result"
    );
    assert!(
        states
            .iter()
            .all(|(a, _)| a.evaluation_id == Some(r.evaluation_id))
    );
}

#[test]
fn captures_follow_the_configured_checkpoint_strategy() {
    for (config, n) in [
        (
            StateConfig {
                capture: CheckpointStrategy::OnComplete,
                ..StateConfig::default()
            },
            1,
        ),
        (
            StateConfig {
                capture: CheckpointStrategy::OnDemand,
                ..StateConfig::default()
            },
            0,
        ),
        (
            StateConfig {
                capture: CheckpointStrategy::EveryEvents(1),
                ..StateConfig::default()
            },
            2,
        ),
        (
            StateConfig {
                capture_state: false,
                ..StateConfig::default()
            },
            0,
        ),
    ] {
        let j = Journal::memory();
        let s = j.create_session().expect("session");
        let p = SdkProvider::new("sdk-abc");
        InnerLoop::stateful(&p, vec![&Echo], config)
            .run(&s, "ns", "key", "sys", "go")
            .expect("run");
        assert_eq!(s.state().adapter_states().len(), n);
    }
}

/// Worker 1: captured its SDK session after the first round trip, then
/// died with the tool call unanswered.
fn crashed_worker(j: &Journal, workspace: &str) -> Session {
    crashed_worker_then(j, workspace, |_| Vec::new())
}

/// As [`crashed_worker`], and before it died, it captured the states
/// `later` makes of its resumable one.
fn crashed_worker_then(
    j: &Journal,
    workspace: &str,
    later: impl FnOnce(&SdkSessionState) -> Vec<SdkSessionState>,
) -> Session {
    let s = j.create_session().expect("session");
    let eval = s.start_evaluation_with("ns", "key", "sdk").expect("eval");
    eval.system("sys").expect("system");
    eval.user("go").expect("user");
    eval.assistant(
        "reading",
        vec![ToolCallRecord::new("call_1_1", "echo", "{\"x\":1}")],
    )
    .expect("assistant");
    let now = agent_journal::format::now();
    let state = SdkSessionState {
        session_id: "sdk-worker-1".into(),
        created_at: now,
        last_activity_at: now,
        workspace_path: Some(workspace.into()),
        prompt_name: "ns:key".into(),
        message_count: 2,
        is_complete: false,
    };
    eval.capture_adapter_state(&state).expect("capture");
    for next in later(&state) {
        eval.capture_adapter_state(&next).expect("capture");
    }
    s
}

#[test]
fn a_later_capture_that_is_not_resumable_does_not_hide_the_resumable_one() {
    // After its resumable capture, worker 1 captured a side SDK session
    // that completed, then one that died before its init message (no
    // session id): neither is resumable.
    let j = Journal::memory();
    let options = ResumeOptions {
        mode: ResumeMode::Continue,
        ..ResumeOptions::new("ns", "key")
    };
    for validation in [
        ResumeValidation::Strict {
            max_age: Duration::from_secs(3600),
        },
        ResumeValidation::Relaxed,
        ResumeValidation::None,
    ] {
        let s = crashed_worker_then(&j, "/work", |state| {
            vec![
                SdkSessionState {
                    session_id: "sdk-side".into(),
                    is_complete: true,
                    ..state.clone()
                },
                SdkSessionState {
                    session_id: String::new(),
                    ..state.clone()
                },
            ]
        });
        let p = SdkProvider::new("sdk-new");
        let config = StateConfig {
            workspace: Some("/work".into()),
            resume_validation: validation,
            ..StateConfig::default()
        };
        InnerLoop::stateful(&p, vec![&Echo], config)
            .resume(&s, &options)
            .expect("resume");
        assert_eq!(
            p.resumed_from(),
            [Some("sdk-worker-1".to_owned())],
            "{validation:?}: the most recent resumable state, with its session id"
        );
        let next = &sdk_states(&s)[3].1;
        assert_eq!(
            next.session_id, "sdk-worker-1",
            "{validation:?}: the same SDK session went on"
        );
    }
}

#[test]
fn a_resume_hands_the_provider_the_captured_state_and_the_next_capture_supersedes_it() {
    let j = Journal::memory();
    let s = crashed_worker(&j, "/work");
    let p = SdkProvider::new("sdk-new");
    let options = ResumeOptions {
        mode: ResumeMode::Continue,
        ..ResumeOptions::new("ns", "key")
    };
    let config = StateConfig {
        workspace: Some("/work".into()),
        ..StateConfig::default()
    };
    let r = InnerLoop::stateful(&p, vec![&Echo], config)
        .resume(&s, &options)
        .expect("resume");
    assert_eq!(r.outcome, Outcome::Succeeded);
    assert_eq!(p.resumed_from(), [Some("sdk-worker-1".to_owned())]);
    let states = sdk_states(&s);
    let last = states.last().expect("captures");
    assert_eq!(
        last.1.session_id, "sdk-worker-1",
        "the same SDK session went on"
    );
    assert_eq!(last.0.supersedes, Some(states[0].0.snapshot_id));
    assert!(last.1.is_complete);
}

#[test]
fn a_state_that_fails_the_check_is_not_resumed_from() {
    let j = Journal::memory();
    let s = crashed_worker(&j, "/elsewhere");
    let p = SdkProvider::new("sdk-new");
    let options = ResumeOptions {
        mode: ResumeMode::Continue,
        ..ResumeOptions::new("ns", "key")
    };
    let strict = StateConfig {
        workspace: Some("/work".into()),
        ..StateConfig::default()
    };
    InnerLoop::stateful(&p, vec![&Echo], strict)
        .resume(&s, &options)
        .expect("resume");
    assert_eq!(
        p.resumed_from(),
        [None],
        "another workspace: a fresh SDK session"
    );

    // Relaxed only asks for a resumable state with a session id.
    let s = crashed_worker(&j, "/elsewhere");
    let p = SdkProvider::new("sdk-new");
    let relaxed = StateConfig {
        resume_validation: ResumeValidation::Relaxed,
        ..StateConfig::default()
    };
    InnerLoop::stateful(&p, vec![&Echo], relaxed)
        .resume(&s, &options)
        .expect("resume");
    assert_eq!(p.resumed_from(), [Some("sdk-worker-1".to_owned())]);
}

#[test]
fn auto_resume_makes_a_new_evaluation_look_for_a_state_first() {
    let j = Journal::memory();
    for (auto_resume, expected) in [(false, None), (true, Some("sdk-worker-1".to_owned()))] {
        let s = crashed_worker(&j, "/work");
        let p = SdkProvider::new("sdk-new");
        let config = StateConfig {
            auto_resume,
            workspace: Some("/work".into()),
            resume_validation: ResumeValidation::Strict {
                max_age: Duration::from_secs(60),
            },
            ..StateConfig::default()
        };
        InnerLoop::stateful(&p, vec![&Echo], config)
            .run(&s, "ns", "key", "sys", "again")
            .expect("run");
        assert_eq!(p.resumed_from(), [expected]);
    }
}

#[test]
fn the_tracker_reads_the_session_id_from_either_init_form_and_ignores_an_empty_one() {
    let t = SdkStateTracker::new("p", None);
    assert_eq!(t.captured(), None, "no session id yet: nothing to capture");
    t.observe(&json!({"type": "system", "subtype": "init", "session_id": ""}));
    assert_eq!(t.captured(), None, "an empty id is no id");
    t.observe(&json!({"type": "system", "subtype": "init", "data": {"session_id": "from-data"}}));
    assert_eq!(t.state().session_id, "from-data");
    assert_eq!(t.state().message_count, 2);
    let c = t.captured().expect("captured");
    assert!(c.resumable);
    t.observe(&json!({"type": "result"}));
    assert!(!t.captured().expect("captured").resumable, "completed");
}

#[test]
fn the_specs_recovery_example_worker_2_resumes_worker_1s_sdk_session_from_a_json_checkpoint() {
    // Worker 1 captures and crashes; its checkpoint is WINK JSON written
    // with the defaults (the adapter states are in it).
    let j1 = Journal::memory();
    let crashed = crashed_worker(&j1, "/work");
    let checkpoint = crashed.state().to_json(&JsonOptions {
        names: SliceNames::Wink { module: None },
        ..JsonOptions::default()
    });
    // Worker 2: restore, find the state, evaluate with it.
    let j2 = Journal::memory();
    let s = j2.import_snapshot(&checkpoint).expect("restore");
    let found = s
        .find_resumable_state(SdkSessionState::ADAPTER_TYPE)
        .expect("found");
    assert!(found.state.contains("sdk-worker-1"));
    let p = SdkProvider::new("sdk-new");
    let config = StateConfig {
        workspace: Some("/work".into()),
        ..StateConfig::default()
    };
    let r = InnerLoop::stateful(&p, vec![&Echo], config)
        .resume(&s, &ResumeOptions::new("ns", "key"))
        .expect("resume");
    assert_eq!(r.outcome, Outcome::Succeeded);
    assert_eq!(p.resumed_from(), [Some("sdk-worker-1".to_owned())]);
    assert!(r.content.starts_with("done: echo"), "{}", r.content);
}

#[test]
fn cli_diff_shows_what_changed_in_the_adapter_state() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    let (id, head) = {
        let j = Journal::open(&db).expect("open");
        let s = j.create_session().expect("session");
        let p = SdkProvider::new("sdk-abc");
        InnerLoop::stateful(&p, vec![&Echo], StateConfig::default())
            .run(&s, "ns", "key", "sys", "go")
            .expect("run");
        (s.id().to_string(), s.head() - 1)
    };
    let first = {
        let j = Journal::open(&db).expect("open");
        let s = j.session(id.parse().expect("id")).expect("session");
        let states = sdk_states(&s);
        // The seq of the first capture: the diff from it to the end shows
        // the second capture's changes.
        let mut seq = None;
        s.for_each_event(0..=head, |e| {
            if matches!(&e.event, agent_journal::Event::AdapterState(a) if a.snapshot_id == states[0].0.snapshot_id) {
                seq = Some(e.seq);
            }
            Ok(())
        })
        .expect("events");
        seq.expect("first capture")
    };
    let out = crate::common::run_cli(
        &db,
        &["--json", "diff", &id, &first.to_string(), &head.to_string()],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let d: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let changes = &d["adapter_states"][0];
    assert_eq!(changes["adapter_type"], "claude_agent_sdk");
    let fields: Vec<&str> = changes["changes"]
        .as_array()
        .expect("changes")
        .iter()
        .map(|c| c["field"].as_str().expect("field"))
        .collect();
    assert!(fields.contains(&"resumable"), "{fields:?}");
    assert!(fields.contains(&"state.is_complete"), "{fields:?}");
    assert!(fields.contains(&"state.message_count"), "{fields:?}");
    let out = crate::common::run_cli(&db, &["diff", &id, &first.to_string(), &head.to_string()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("state.is_complete: false -> true"), "{text}");
}
