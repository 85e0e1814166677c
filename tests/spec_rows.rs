//! Rows of `docs/spec-conformance.md` that no other module's test covered:
//! small facts of the WINK specs' data model, checked through the public
//! API on a journal that is closed and opened again.

use agent_journal::{Journal, ToolCallRecord};

/// A run recorded by hand: one evaluation, a user message, an assistant
/// message with one call and its result, an adapter state; the journal is
/// reopened before it is read.
fn recorded() -> (
    tempfile::TempDir,
    agent_journal::SessionId,
    agent_journal::EvaluationId,
) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    let (sid, eid) = {
        let j = Journal::open(&path).expect("open");
        let s = j.create_session().expect("session");
        let e = s.start_evaluation("weather", "umbrella").expect("eval");
        e.system("Be brief.").expect("system");
        e.user("Umbrella?").expect("user");
        e.assistant(
            "Checking.",
            vec![ToolCallRecord::new("c1", "forecast", "{}")],
        )
        .expect("assistant");
        e.tool_started("c1").expect("started");
        e.tool_result("c1", "rain").expect("result");
        e.adapter_state("claude_agent_sdk", r#"{"session_id":"s"}"#.into(), true)
            .expect("state");
        (s.id(), e.id())
    };
    (dir, sid, eid)
}

fn reopened(
    dir: &tempfile::TempDir,
    sid: agent_journal::SessionId,
) -> agent_journal::state::SessionState {
    let j = Journal::open(dir.path().join("db")).expect("reopen");
    j.session(sid).expect("session").state().clone()
}

/// IM-19, IM-20: the recorder copies the evaluation's prompt identity onto
/// every message it records. IM-66: nothing enables recording; a new
/// session records from its first message.
#[test]
fn the_recorder_copies_the_prompt_identity_onto_every_message() {
    let (dir, sid, eid) = recorded();
    let state = reopened(&dir, sid);
    let messages: Vec<_> = state.messages().for_evaluation(eid).collect();
    assert_eq!(messages.len(), 4, "system, user, assistant, tool");
    for m in messages {
        assert_eq!(
            (m.prompt_ns.as_str(), m.prompt_key.as_str()),
            ("weather", "umbrella")
        );
    }
}

/// CS-21: a turn's time is its assistant message's. CS-27: a conversation
/// state's time is its first message's, and the evaluation keeps its start.
#[test]
fn turns_and_conversation_states_are_dated_by_their_messages() {
    let (dir, sid, eid) = recorded();
    let state = reopened(&dir, sid);
    let view = state.conversation_view(eid).expect("view");
    let turn = &view.turns[0];
    let assistant = turn.assistant_message.expect("assistant");
    assert_eq!(turn.created_at, Some(assistant.created_at));
    let first = view.system_message.expect("system");
    assert_eq!(view.created_at, Some(first.created_at));
    let started = state.evaluations().get(eid).and_then(|e| e.started_at);
    assert!(
        started.is_some_and(|t| t <= first.created_at),
        "{started:?}"
    );
}

/// AS-22: the recorder sets an adapter state's `evaluation_id` to the
/// evaluation that captured it.
#[test]
fn the_recorder_sets_an_adapter_states_evaluation() {
    let (dir, sid, eid) = recorded();
    let state = reopened(&dir, sid);
    let s = state
        .adapter_states()
        .latest("claude_agent_sdk")
        .expect("state");
    assert_eq!(s.evaluation_id, Some(eid));
}
