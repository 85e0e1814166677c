//! One suite for every `ConversationStore`: the in-memory one, the journal
//! one over a memory journal, and the journal one over sled, reopened.

use super::*;
use agent_journal::conversation::{ConversationId, TurnError, TurnId};
use agent_journal::{SessionId, ToolCallRecord};

fn conversation(id: ConversationId) -> Conversation {
    let at = agent_journal::format::now();
    Conversation {
        id,
        agent: "suite".into(),
        subject_id: Some("s".into()),
        title: None,
        created_at: at,
        updated_at: at,
        metadata: Metadata::new(),
    }
}

fn turn(conv: ConversationId, input: Vec<ConversationMessage>) -> ConversationTurn {
    ConversationTurn {
        id: TurnId::new(),
        conversation_id: conv,
        agent: "suite".into(),
        input_messages: input,
        output_messages: Vec::new(),
        provider_calls: Vec::new(),
        tool_calls: Vec::new(),
        status: TurnStatus::Running,
        trigger_type: Some("user_message".into()),
        started_at: agent_journal::format::now(),
        finished_at: None,
        error: None,
        metadata: Metadata::new(),
    }
}

/// Everything a store must do; returns the conversation and turn it made.
fn suite(store: &dyn ConversationStore) -> (ConversationId, TurnId) {
    let id = SessionId::new();
    assert_eq!(store.get_conversation(id).expect("get"), None);
    assert!(matches!(
        store.get_messages(id, Page::all()),
        Err(Error::NotAConversation(_))
    ));
    let c = conversation(id);
    store.create_conversation(&c, &[]).expect("create");
    assert!(matches!(
        store.create_conversation(&c, &[]),
        Err(Error::ConversationExists(_))
    ));
    assert_eq!(store.get_conversation(id).expect("get"), Some(c.clone()));
    let mut c2 = c.clone();
    c2.title = Some("renamed".into());
    store.update_conversation(&c2).expect("update");
    assert_eq!(store.get_conversation(id).expect("get"), Some(c2));

    let mut structured =
        ConversationMessage::json(Role::Other, json!({"kind": "ui", "n": [1, 2.5]}));
    structured.name = Some("observer".into());
    structured.metadata.insert("hint".into(), json!(true));
    let messages = vec![
        ConversationMessage::system("sys"),
        ConversationMessage::user("u1"),
        structured.clone(),
    ];
    store.append_messages(id, &messages).expect("append");
    // A message already stored is skipped, even when repeated in the call.
    store
        .append_messages(id, &[messages[1].clone(), messages[1].clone()])
        .expect("append again");
    let mut all = store.get_messages(id, Page::all()).expect("read");
    assert_eq!(all.len(), 3);
    // By `created_at`: `structured` was made first.
    assert_eq!(all[0].id, structured.id);
    all.rotate_left(1);
    assert_eq!(all[2].content, json!({"kind": "ui", "n": [1, 2.5]}));
    assert_eq!(all[2].role, Role::Other);
    assert_eq!(all[2].name.as_deref(), Some("observer"));
    assert_eq!(all[2].metadata.get("hint"), Some(&json!(true)));
    assert_eq!(store.unanswered_messages(id).expect("read").len(), 3);

    let mut t = turn(id, all[1..].to_vec());
    assert!(matches!(
        store.update_turn(&t),
        Err(Error::TurnNotFound { .. })
    ));
    store.create_turn(&t).expect("create turn");
    assert!(store.unanswered_messages(id).expect("read").is_empty());
    let mut answer = ConversationMessage::assistant("calling");
    answer.tool_calls = vec![ToolCallRecord::new("c1", "lookup", "{\"q\":1}")];
    t.output_messages.push(answer);
    t.tool_calls
        .push(ToolCallRecord::new("c1", "lookup", "{\"q\":1}"));
    store.update_turn(&t).expect("update");
    t.tool_calls[0].status = ToolStatus::Started;
    store.update_turn(&t).expect("update");
    let got = store.get_turn(id, t.id).expect("get").expect("stored");
    assert_eq!(got.tool_calls[0].status, ToolStatus::Started);
    assert_eq!(got.output_messages[0].turn_id, Some(t.id));
    let mut result = ConversationMessage::new(Role::Tool, "found");
    result.tool_call_id = Some("c1".into());
    t.output_messages.push(result);
    t.tool_calls[0].status = ToolStatus::Completed;
    t.status = TurnStatus::Failed;
    t.finished_at = Some(agent_journal::format::now());
    t.error = Some(TurnError {
        message: "boom".into(),
        code: Some("500".into()),
        provider: Some("p".into()),
        raw: json!({"error": "boom"}),
    });
    store.update_turn(&t).expect("update");
    let got = store.get_turn(id, t.id).expect("get").expect("stored");
    let mut expected = t.clone();
    for m in &mut expected.output_messages {
        m.conversation_id = id;
        m.turn_id = Some(t.id);
    }
    assert_eq!(got, expected);
    assert_eq!(store.get_turn(id, TurnId::new()).expect("get"), None);
    let turns = store.list_turns(id, Page::all()).expect("list");
    assert_eq!(turns, vec![expected]);
    assert!(store.list_conversations().expect("list").contains(&id));
    (id, t.id)
}

#[test]
fn the_in_memory_store_passes_the_suite() {
    suite(&InMemoryConversationStore::new());
}

#[test]
fn the_journal_store_passes_the_suite_and_keeps_everything_across_reopen() {
    suite(&JournalConversationStore::new(Journal::memory()));
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("j.db");
    let (id, turn, before) = {
        let store = JournalConversationStore::new(Journal::open(&path).expect("open"));
        let (id, turn) = suite(&store);
        let before = store.get_turn(id, turn).expect("get").expect("stored");
        // A session that is not a conversation is not listed.
        store.journal().create_session().expect("plain session");
        (id, turn, before)
    };
    let store = JournalConversationStore::new(Journal::open(&path).expect("reopen"));
    assert_eq!(store.get_turn(id, turn).expect("get"), Some(before));
    assert_eq!(store.list_conversations().expect("list"), vec![id]);
    let plain = store
        .journal()
        .sessions()
        .expect("sessions")
        .into_iter()
        .find(|s| *s != id)
        .expect("the plain session");
    assert!(matches!(
        store.session(plain),
        Err(Error::NotAConversation(_))
    ));
    assert_eq!(store.get_conversation(plain).expect("get"), None);
}
