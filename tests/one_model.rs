//! One model under both doors (issue 34): a session the inner loop wrote
//! (a run, an imported chat) reads as a conversation, each evaluation a
//! turn with the same id, and a compaction recorded on it changes what the
//! inner loop sends, as it does for the conversation engine. The CLI's
//! side is in `cli::one_model`.

use std::sync::Mutex;

use agent_journal::agent::{
    InnerLoop, Provider, ProviderRequest, ProviderResponse, ResumeMode, ResumeOptions, ScriptStep,
    ScriptedProvider,
};
use agent_journal::conversation::{
    ConversationEngine, ConversationEngineConfig, ConversationMessage, CreateConversation,
    JournalConversationStore, TurnStatus,
};
use agent_journal::{Event, Journal, Role};

/// A provider that remembers the messages of each request, wrapping the
/// scripted one.
struct Recording(ScriptedProvider, Mutex<Vec<Vec<String>>>);

impl Provider for Recording {
    fn name(&self) -> &str {
        "recording"
    }
    fn complete(&self, request: &ProviderRequest<'_>) -> Result<ProviderResponse, String> {
        let sent = request.messages.iter().map(|m| m.content.clone()).collect();
        self.1.lock().expect("lock").push(sent);
        self.0.complete(request)
    }
}

#[test]
fn an_inner_loop_run_reads_as_a_conversation_each_evaluation_a_turn() {
    let j = Journal::memory();
    let s = j.create_session().expect("session");
    let script = vec![
        ScriptStep {
            content: "reading".into(),
            calls: vec![("nothing".into(), "{}".into())],
        },
        ScriptStep {
            content: "done".into(),
            calls: vec![],
        },
    ];
    let provider = ScriptedProvider::new(script);
    let lp = InnerLoop::new(&provider, vec![]);
    let r = lp.run(&s, "ns", "key", "sys", "go").expect("run");
    let head = s.head();

    let log = s
        .conversation_at(head - 1)
        .expect("read")
        .expect("a conversation");
    assert_eq!(log.turns().len(), 1);
    let turn = &log.turns()[0];
    assert_eq!(turn.id.as_evaluation(), r.evaluation_id, "same id");
    let state = s.state_cloned();
    let ids: Vec<_> = state
        .messages()
        .for_evaluation(r.evaluation_id)
        .map(|m| m.message_id)
        .collect();
    let logged: Vec<_> = log.messages().iter().map(|m| m.id).collect();
    assert_eq!(logged, ids, "the same messages, in order");
    let status = match &state
        .evaluations()
        .get(r.evaluation_id)
        .and_then(|e| e.outcome.clone())
    {
        Some(agent_journal::Outcome::Succeeded) => TurnStatus::Succeeded,
        other => panic!("the run ended {other:?}"),
    };
    assert_eq!(turn.status, status);
    assert_eq!(turn.input_messages.len(), 2, "system and user");
    assert_eq!(turn.output_messages.len(), ids.len() - 2);
    let provider_calls = s
        .events(..)
        .expect("events")
        .iter()
        .filter(|e| matches!(e.event, Event::ProviderCall(_)))
        .count();
    assert_eq!(log.calls_of(turn.id).count(), provider_calls);
    assert!(log.calls().iter().all(|c| !c.sent_messages.is_empty()));
    // Derived, so the same every time; and as of any earlier event.
    assert_eq!(s.conversation_at(head - 1).expect("again"), Some(log));
    let early = s.conversation_at(1).expect("early").expect("started");
    assert_eq!(early.turns()[0].status, TurnStatus::Running);

    // A session with no message holds no conversation.
    let empty = j.create_session().expect("session");
    assert_eq!(empty.conversation_at(0).expect("read"), None);
}

#[test]
fn an_engine_conversation_reads_as_itself() {
    let j = Journal::memory();
    let store = std::sync::Arc::new(JournalConversationStore::new(j.clone()));
    let engine = ConversationEngine::new(ConversationEngineConfig::new("agent", store));
    let c = engine
        .create_conversation(CreateConversation {
            initial_messages: vec![ConversationMessage::user("q")],
            ..CreateConversation::default()
        })
        .expect("create");
    let s = j.session(c.id).expect("session");
    let log = s.conversation_at(s.head() - 1).expect("read");
    assert_eq!(log.as_ref(), Some(s.state().conversation_log()));
}

#[test]
fn the_inner_loop_sends_what_a_compaction_kept_and_its_summary() {
    let j = Journal::memory();
    let s = j.create_session().expect("session");
    let eval = s
        .start_evaluation_with("ns", "key", "recording")
        .expect("start");
    eval.system("sys").expect("system");
    eval.user("a").expect("user");
    eval.assistant("b", vec![]).expect("assistant");
    eval.user("c").expect("user");
    s.append(Event::Compacted {
        evaluation_id: eval.id(),
        through_sequence: 2,
        summary: Some("a, then b".into()),
    })
    .expect("compact");

    // The conversation view agrees: "c" is the first message sent.
    let log = s
        .conversation_at(s.head() - 1)
        .expect("read")
        .expect("a conversation");
    let sent: Vec<String> = log.sendable().iter().map(|m| m.text()).collect();
    assert_eq!(sent, vec!["c"]);
    assert_eq!(log.summary(), Some("a, then b"));

    let provider = Recording(
        ScriptedProvider::new(vec![ScriptStep {
            content: "ok".into(),
            calls: vec![],
        }]),
        Mutex::new(Vec::new()),
    );
    let lp = InnerLoop::new(&provider, vec![]);
    lp.resume(
        &s,
        &ResumeOptions {
            mode: ResumeMode::Continue,
            ..ResumeOptions::new("ns", "key")
        },
    )
    .expect("resume");
    let requests = provider.1.lock().expect("lock");
    assert_eq!(
        requests.first().map(Vec::as_slice),
        Some(
            &[
                "sys".to_owned(),
                "Summary of the earlier conversation:\na, then b".to_owned(),
                "c".to_owned()
            ][..]
        ),
        "the leading system message, the summary, then what was kept"
    );
    let roles: Vec<Role> = s
        .state()
        .messages()
        .for_evaluation(eval.id())
        .map(|m| m.role)
        .collect();
    assert_eq!(
        roles,
        vec![
            Role::System,
            Role::User,
            Role::Assistant,
            Role::User,
            Role::Assistant
        ],
        "nothing is deleted; the summary is sent, not recorded"
    );
}
