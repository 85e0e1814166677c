//! Sessions through the public API: the recorder, state, time travel,
//! snapshots, forks and application slices, on both stores.

use agent_journal::state::{JsonOptions, SessionState, Slice, SliceRegistry};
use agent_journal::{
    CheckpointStrategy, Envelope, Event, Journal, JournalConfig, Outcome, Role, ToolCallRecord,
    ToolStatus,
};
use serde::{Deserialize, Serialize};

use crate::common::{backends, backends_with};

/// The inner-messages spec's example run, recorded with the recorder.
fn record_spec_run(s: &agent_journal::Session) -> agent_journal::EvaluationId {
    let eval = s.start_evaluation("ns", "key").expect("start");
    eval.system("sys").expect("system");
    eval.assistant(
        "calling",
        vec![
            ToolCallRecord::new("c1", "read", "{}"),
            ToolCallRecord::new("c2", "write", "{\"x\":1}"),
        ],
    )
    .expect("assistant");
    eval.tool_started("c1").expect("started");
    eval.tool_result("c1", "Result 1").expect("result");
    eval.tool_started("c2").expect("started");
    eval.tool_result("c2", "Result 2").expect("result");
    eval.assistant("Final response", vec![]).expect("assistant");
    eval.finish(Outcome::Succeeded).expect("finish");
    eval.id()
}

#[test]
fn the_recorder_numbers_messages_as_the_spec_does() {
    for b in backends() {
        let s = b.journal.create_session().expect(b.name);
        let eval = record_spec_run(&s);
        let state = s.state();
        let got: Vec<(Role, u64, u32)> = state
            .messages()
            .for_evaluation(eval)
            .map(|m| (m.role, m.sequence, m.turn))
            .collect();
        assert_eq!(
            got,
            vec![
                (Role::System, 0, 0),
                (Role::Assistant, 1, 1),
                (Role::Tool, 2, 1),
                (Role::Tool, 3, 1),
                (Role::Assistant, 4, 2),
            ],
            "{}",
            b.name
        );
        // The ToolStatus events really updated the assistant message.
        let assistant = state
            .messages()
            .for_evaluation(eval)
            .nth(1)
            .expect("assistant")
            .clone();
        assert!(
            assistant
                .tool_calls
                .iter()
                .all(|c| c.status == ToolStatus::Completed),
            "{}",
            b.name
        );
        let tool = state.messages().for_evaluation(eval).nth(2).expect("tool");
        assert_eq!(tool.tool_call_id.as_ref().map(|c| c.as_str()), Some("c1"));
        assert_eq!(tool.tool_name.as_deref(), Some("read"));
        let info = state.evaluations().get(eval).expect("evaluation");
        assert_eq!(info.outcome, Some(Outcome::Succeeded));
        let turns = state.conversation_view(eval).map(|v| v.turns.len());
        assert_eq!(turns, Some(2), "{}", b.name);
    }
}

#[test]
fn a_tool_status_for_an_unknown_call_is_refused_and_writes_nothing() {
    for b in backends() {
        let s = b.journal.create_session().expect(b.name);
        let eval = s.start_evaluation("ns", "key").expect("start");
        let head = s.head();
        assert!(eval.tool_started("nope").is_err());
        assert!(eval.tool_result("nope", "x").is_err());
        assert_eq!(s.head(), head);
    }
}

#[test]
fn state_at_every_seq_equals_the_fold_of_the_prefix() {
    for b in backends() {
        let s = b.journal.create_session().expect(b.name);
        record_spec_run(&s);
        let events: Vec<Envelope> = s.events(..).expect(b.name);
        let mut fold = SessionState::new();
        for e in &events {
            fold.apply(e);
            assert_eq!(
                s.state_at(e.seq).expect(b.name),
                fold,
                "{} seq {}",
                b.name,
                e.seq
            );
        }
        assert_eq!(*s.state(), fold);
    }
}

#[test]
fn reopening_reads_only_the_events_after_the_snapshot() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    let config = || JournalConfig {
        checkpoint: CheckpointStrategy::OnDemand,
        durability: agent_journal::Durability::Buffered,
        ..JournalConfig::default()
    };
    let (id, expected) = {
        let j = Journal::open_with(&path, config()).expect("open");
        let s = j.create_session().expect("create");
        record_spec_run(&s);
        let snap = s.snapshot().expect("snapshot").expect("seq");
        let eval = s.start_evaluation("ns", "key2").expect("start");
        eval.system("again").expect("system");
        eval.user("more").expect("user");
        assert_eq!(s.head(), snap + 4);
        (s.id(), s.state_cloned())
    };
    let j = Journal::open_with(&path, config()).expect("reopen");
    let s = j.session(id).expect("session");
    let stats = s.load_stats();
    assert_eq!(stats.events_replayed, 3, "{stats:?}");
    assert_eq!(s.state_cloned(), expected);
}

/// The default strategy writes a snapshot every 8,192 events, the first
/// whole and the next ones deltas on it: an open replays fewer than 8,192
/// events.
#[test]
fn the_default_checkpoints_are_incremental() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    let id = {
        let j = Journal::open_with(
            &path,
            JournalConfig {
                durability: agent_journal::Durability::Buffered,
                ..JournalConfig::default()
            },
        )
        .expect("open");
        let s = j.create_session().expect("create");
        for n in 0..20_000u64 {
            s.append(Event::Custom {
                kind: "n".into(),
                payload: n.to_le_bytes().to_vec(),
            })
            .expect("append");
        }
        s.id()
    };
    let j = Journal::open(&path).expect("reopen");
    let s = j.session(id).expect("session");
    let stats = s.load_stats();
    let snap = stats
        .snapshot_seq
        .expect("a snapshot was taken automatically");
    assert_eq!((snap, stats.snapshot_deltas), (16_383, 1), "{stats:?}");
    assert_eq!(stats.events_replayed, s.head() - snap - 1);
}

#[test]
fn a_fork_starts_with_the_parent_state_and_diverges() {
    for b in backends() {
        let s = b.journal.create_session().expect(b.name);
        let eval = record_spec_run(&s);
        let at = 5;
        let f = s.fork(at).expect(b.name);
        assert_ne!(f.id(), s.id());
        let fs = f.state_cloned();
        assert_eq!(fs.forked_from(), Some((s.id(), at)));
        let parent_at = s.state_at(at).expect(b.name);
        let msgs = |st: &SessionState| st.messages().iter().cloned().collect::<Vec<_>>();
        assert_eq!(msgs(&fs), msgs(&parent_at), "{}", b.name);
        f.evaluation(eval)
            .expect("continue")
            .user("only in the fork")
            .expect("user");
        assert_eq!(s.state().messages().len(), 5, "the parent is unchanged");
        assert_eq!(f.state().messages().len(), msgs(&parent_at).len() + 1);
        assert!(matches!(
            s.fork(1000),
            Err(agent_journal::Error::SeqOutOfRange { .. })
        ));
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct CustomCounter {
    n: u64,
}

impl Slice for CustomCounter {
    const NAME: &'static str = "test:CustomCounter";
    fn apply(&mut self, envelope: &Envelope) {
        if let Event::Custom { .. } = envelope.event {
            self.n += 1;
        }
    }
}

#[test]
fn application_slices_fold_and_survive_snapshots() {
    let config = || {
        let mut slices = SliceRegistry::default();
        slices.register::<CustomCounter>();
        JournalConfig {
            slices,
            checkpoint: CheckpointStrategy::EveryEvents(3),
            ..JournalConfig::default()
        }
    };
    for b in backends_with(config) {
        let s = b.journal.create_session().expect(b.name);
        for _ in 0..10 {
            s.append(Event::Custom {
                kind: "k".into(),
                payload: vec![],
            })
            .expect(b.name);
        }
        assert_eq!(
            s.state().slice::<CustomCounter>().map(|c| c.n),
            Some(10),
            "{}",
            b.name
        );
        let json = s.state().to_json(&JsonOptions::default());
        let back = SessionState::from_json(&json, &config().slices).expect("from_json");
        assert_eq!(back.slice::<CustomCounter>().map(|c| c.n), Some(10));
    }
}

#[test]
fn the_wink_json_has_the_documented_shape_and_round_trips() {
    let j = Journal::memory();
    let s = j.create_session().expect("create");
    record_spec_run(&s);
    let state = s.state_cloned();
    let text = state.to_json(&JsonOptions {
        include_logs: true,
        ..JsonOptions::default()
    });
    let v: serde_json::Value = serde_json::from_str(&text).expect("json");
    let keys: Vec<&String> = v.as_object().expect("object").keys().collect();
    assert_eq!(
        keys,
        [
            "children_ids",
            "created_at",
            "parent_id",
            "policies",
            "slices",
            "tags",
            "version"
        ]
    );
    assert_eq!(v["version"], "1");
    let back = SessionState::from_json(&text, &SliceRegistry::default()).expect("from_json");
    assert_eq!(back, state);
}

#[test]
fn a_fork_of_a_fork_names_its_own_parent() {
    // A fork of a fork reads its parent's events, the parent's own marker
    // among them when it forks after it, and still names its own parent
    // (the fuzz target `model`, seed regression-fork-of-fork).
    for b in backends() {
        let s = b.journal.create_session().expect(b.name);
        record_spec_run(&s);
        let f1 = s.fork(3).expect("fork");
        let f2 = f1.fork(2).expect("fork inside the grandparent's prefix");
        let f3 = f1.fork(4).expect("fork after the parent's marker");
        assert_eq!(f1.state().forked_from(), Some((s.id(), 3)), "{}", b.name);
        assert_eq!(f2.state().forked_from(), Some((f1.id(), 2)), "{}", b.name);
        assert_eq!(f3.state().forked_from(), Some((f1.id(), 4)), "{}", b.name);
        assert!(matches!(
            f3.events(4..5).expect("events")[0].event,
            Event::ForkPoint { parent, at: 3 } if parent == s.id()
        ));
        assert!(matches!(
            f3.events(5..6).expect("events")[0].event,
            Event::ForkPoint { parent, at: 4 } if parent == f1.id()
        ));
        // Loaded again (every handle dropped: the state is rebuilt from
        // the parents), the same.
        let f3_id = f3.id();
        drop((s, f1, f2, f3));
        let again = b.journal.session(f3_id).expect("load again");
        assert_eq!(again.state().forked_from().map(|(_, at)| at), Some(4));
        assert_eq!(again.head(), 6);
    }
}

#[test]
fn reading_state_never_deadlocks_and_never_blocks_appends() {
    let journal = agent_journal::Journal::memory();
    let s = journal.create_session().expect("session");
    s.append(crate::common::custom(1)).expect("append");
    // Two guards in one expression (this hung when a guard held the lock).
    let both = s.state().events_applied() + s.state().events_applied();
    assert_eq!(both, 4);
    // A guard held across appends on the same thread: the appends go
    // through, and the guard keeps the state it was taken at.
    let before = s.state();
    for i in 2..5 {
        s.append(crate::common::custom(i))
            .expect("append while a guard is alive");
    }
    assert_eq!(before.last_seq(), Some(1));
    assert_eq!(s.state().last_seq(), Some(4));
    drop(before);
    // A guard held by another thread does not block this one's appends.
    let held = s.state();
    std::thread::scope(|scope| {
        scope.spawn(|| {
            for i in 5..10 {
                s.append(crate::common::custom(i)).expect("append");
            }
        });
    });
    assert_eq!(held.last_seq(), Some(4));
    assert_eq!(s.state().last_seq(), Some(9));
}

#[test]
fn the_conversation_view_carries_the_spec_fields() {
    let journal = agent_journal::Journal::memory();
    let s = journal.create_session().expect("session");
    let eval = s.start_evaluation("ns", "key").expect("start");
    eval.system("sys").expect("system");
    eval.user("go").expect("user");
    eval.assistant_with_payload(
        "calling",
        vec![ToolCallRecord::new("c1", "read", "{}")],
        Some(r#"{"role":"assistant","content":"calling","x-extra":1}"#.into()),
    )
    .expect("assistant");
    eval.tool_result("c1", "Result 1").expect("result");
    let state = s.state();
    let view = state.conversation_view(eval.id()).expect("view");
    assert_eq!((view.prompt_ns, view.prompt_key), ("ns", "key"));
    assert_eq!(view.state_id, eval.id());
    let system = view.system_message.expect("system");
    assert_eq!(view.created_at, Some(system.created_at));
    let turn = &view.turns[0];
    assert_eq!(turn.evaluation_id, eval.id());
    assert_eq!(
        turn.provider_payload,
        Some(r#"{"role":"assistant","content":"calling","x-extra":1}"#)
    );
    let assistant = turn.assistant_message.expect("assistant");
    assert_eq!(turn.created_at, Some(assistant.created_at));
    assert_eq!(turn.tool_messages.len(), 1);
}

#[test]
fn the_wink_json_writes_a_started_call_as_pending_and_reads_it_back_started() {
    let journal = agent_journal::Journal::memory();
    let s = journal.create_session().expect("session");
    let eval = s.start_evaluation("ns", "key").expect("start");
    eval.system("sys").expect("system");
    eval.assistant("calling", vec![ToolCallRecord::new("c1", "read", "{}")])
        .expect("assistant");
    eval.tool_started("c1").expect("started");
    let text = s
        .state()
        .to_json(&agent_journal::state::JsonOptions::default());
    let doc: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    let messages = doc["slices"]
        .as_array()
        .expect("slices")
        .iter()
        .find(|s| s["slice_type"] == "agent_journal:InnerMessage")
        .expect("messages");
    assert_eq!(messages["items"][1]["tool_calls"][0]["status"], "pending");
    let back =
        agent_journal::state::SessionState::from_json(&text, &Default::default()).expect("read");
    let call = back
        .tool_calls()
        .get(eval.id(), &"c1".into())
        .expect("call");
    assert_eq!(call.status, ToolStatus::Started, "still in doubt");
    let m = back
        .messages()
        .for_evaluation(eval.id())
        .nth(1)
        .expect("assistant");
    assert_eq!(m.tool_calls[0].status, ToolStatus::Started);
}

/// A session read back keeps its messages as the bytes of their frames,
/// those with tool calls included (not decoded copies): their calls'
/// statuses still come out as the fold's, whichever event came last,
/// across a reopen, a status after it, a snapshot, time travel and a fork
/// of the reopened session.
#[test]
fn tool_call_statuses_read_right_from_messages_kept_as_bytes() {
    use agent_journal::{CallId, EvaluationId};
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    let config = || JournalConfig {
        checkpoint: CheckpointStrategy::OnDemand,
        ..JournalConfig::default()
    };
    let statuses = |s: &SessionState, eval: EvaluationId| -> Vec<ToolStatus> {
        s.messages()
            .for_evaluation(eval)
            .flat_map(|m| m.tool_calls.iter().map(|c| c.status))
            .collect()
    };
    let status = |eval: EvaluationId, call: &str, status: ToolStatus| Event::ToolStatus {
        evaluation_id: eval,
        call_id: CallId::from(call),
        status,
        error: None,
    };
    let fold = |s: &agent_journal::Session| {
        let mut state = SessionState::new();
        for e in s.events(..).expect("events") {
            state.apply(&e);
        }
        state
    };
    use ToolStatus::{Completed, Failed, Pending, Started};
    let (id, eval, asked) = {
        let j = Journal::open_with(&path, config()).expect("open");
        let s = j.create_session().expect("session");
        let e = s.start_evaluation("ns", "key").expect("start");
        e.system("sys").expect("system");
        let calls = vec![
            ToolCallRecord::new("c1", "read", "{}"),
            ToolCallRecord::new("c2", "write", "{}"),
        ];
        e.assistant("calling", calls).expect("assistant");
        let asked = s.head() - 1;
        e.tool_started("c1").expect("started");
        (s.id(), e.id(), asked)
    };
    let j = Journal::open_with(&path, config()).expect("reopen");
    let s = j.session(id).expect("session");
    assert_eq!(statuses(&s.state(), eval), [Started, Pending]);
    // A status after the open reaches the message read back as bytes,
    // read once already.
    s.append(status(eval, "c1", Completed)).expect("append");
    assert_eq!(statuses(&s.state(), eval), [Completed, Pending]);
    assert_eq!(s.snapshot().expect("snapshot"), Some(s.head() - 1));
    s.append(status(eval, "c2", Failed)).expect("append");
    assert_eq!(statuses(&s.state(), eval), [Completed, Failed]);
    assert!(s.state_cloned() == fold(&s));
    // Before the statuses, as they were then: time travel, and a fork.
    let then = s.state_at(asked).expect("state_at");
    assert_eq!(statuses(&then, eval), [Pending, Pending]);
    let fork = s.fork(asked + 1).expect("fork");
    assert_eq!(statuses(&fork.state(), eval), [Started, Pending]);
    fork.append(status(eval, "c2", Completed)).expect("append");
    assert_eq!(statuses(&fork.state(), eval), [Started, Completed]);
    drop((s, fork, j));
    // Reopened from the snapshot and the events after it.
    let j = Journal::open_with(&path, config()).expect("reopen");
    let s = j.session(id).expect("session");
    assert!(s.load_stats().snapshot_seq.is_some());
    assert_eq!(statuses(&s.state(), eval), [Completed, Failed]);
    assert!(s.state_cloned() == fold(&s));
}
