//! Blob <-> journal: `import_state_blob`, `export_state_blob`, and the
//! command line's `import/export --format state-blob`.

use std::sync::Arc;

use agent_journal::Role;
use agent_journal::conversation::state_blob::{
    ImportStateBlob, STATE_BLOB_METADATA, StateChatOptions, append_to_state, chat_with_state,
    export_state_blob, export_state_blob_for, import_state_blob, update_state_after_event,
};
use agent_journal::conversation::{
    Compaction, CompactionRequest, Compactor, ConversationEngine, ConversationEngineConfig,
    ConversationMessage, ConversationStore, CreateConversation, JournalConversationStore, Page,
    RunTurn, SUMMARY_PREFIX, ScriptedAdapter, ScriptedReply, advance_to_first_user_message,
};
use agent_journal::{Error, Journal};
use serde_json::{Value, json};

use crate::common::{path_str, run_cli};

use super::{Clock, asst, decode, stored, sys, user};

/// A blob with a bit of everything: a stored system message first, a tool
/// exchange, an event the model has not seen, unknown members.
fn rich_blob() -> Vec<u8> {
    let adapter = ScriptedAdapter::new(vec![vec![
        ScriptedReply::calls("Let me look.", &[("clock", "{}")]),
        ScriptedReply::text("It is {results}."),
    ]]);
    let start = append_to_state(
        None,
        "scripted",
        &[ConversationMessage::system("The user is on a train.")],
    );
    let options = StateChatOptions::new("scripted-1")
        .system("Tell the time.")
        .user("What time is it?")
        .tool(Arc::new(Clock));
    let r = chat_with_state(&adapter, Some(&start.state), &options).expect("chat");
    let event = update_state_after_event(Some(&r.state), "scripted", "User has checked in");
    let mut doc: Value = serde_json::from_slice(&event.state).expect("JSON");
    doc["messages"][2]["x_future_field"] = json!({"kept": true});
    doc["x_top_member"] = json!([1, 2]);
    doc.to_string().into_bytes()
}

#[test]
fn blob_to_journal_to_blob_gives_the_same_blob() {
    let blob = rich_blob();
    let original: Value = serde_json::from_slice(&blob).expect("JSON");
    assert_eq!(original["processed_length"], 5);
    assert_eq!(original["messages"].as_array().map(Vec::len), Some(6));
    let journal = Journal::memory();
    let id = import_state_blob(&journal, &blob, &ImportStateBlob::default()).expect("import");
    let store = JournalConversationStore::new(journal.clone());
    let conversation = store
        .get_conversation(id)
        .expect("read")
        .expect("a conversation");
    assert_eq!(conversation.agent, "state-blob");
    let recorded = &conversation.metadata[STATE_BLOB_METADATA];
    assert_eq!(recorded["provider"], "scripted");
    assert_eq!(recorded["processed_length"], 5);
    assert_eq!(recorded["stored_system"], 1);
    let messages = store.get_messages(id, Page::all()).expect("messages");
    assert_eq!(messages.len(), 6);
    assert!(messages.iter().all(|m| m.conversation_id == id));

    let exported = export_state_blob(&journal, id).expect("export");
    let again: Value = serde_json::from_slice(&exported).expect("JSON");
    assert_eq!(again, original, "blob -> journal -> blob");
    assert_eq!(decode(&exported).messages, decode(&blob).messages);

    // The exported blob goes on with chat_with_state.
    let adapter = ScriptedAdapter::new(vec![vec![], vec![], vec![ScriptedReply::text("Welcome!")]]);
    let r = chat_with_state(
        &adapter,
        Some(&exported),
        &StateChatOptions::new("scripted-1").user("Hello?"),
    )
    .expect("chat");
    assert!(r.degraded.is_none());
    assert_eq!(r.text(), "Welcome!");
    assert_eq!(r.processed_length, 8);
}

/// Keeps the last 2 messages once 4 are sent, with summary `"S"`.
struct FixedSummary;

impl Compactor for FixedSummary {
    fn compact(&self, r: &CompactionRequest<'_>) -> agent_journal::Result<Option<Compaction>> {
        let n = r.state_messages.len();
        Ok((n >= 4).then(|| Compaction {
            keep_from: advance_to_first_user_message(r.state_messages, n - 2).unwrap_or(n),
            summary: Some("S".into()),
            strategy: "fixed".into(),
        }))
    }
}

#[test]
fn a_conversation_of_the_engine_exports_what_it_still_sends() {
    let journal = Journal::memory();
    let store = Arc::new(JournalConversationStore::new(journal.clone()));
    let adapter = Arc::new(ScriptedAdapter::new(vec![
        vec![ScriptedReply::text("a1")],
        vec![ScriptedReply::text("a2")],
    ]));
    let mut config = ConversationEngineConfig::new("agent", store).provider(adapter, "scripted-1");
    config.compactor = Some(Arc::new(FixedSummary));
    let engine = ConversationEngine::new(config);
    let c = engine
        .create_conversation(CreateConversation {
            initial_messages: vec![
                ConversationMessage::system("Preamble"),
                ConversationMessage::user("q1"),
            ],
            ..CreateConversation::default()
        })
        .expect("create");
    engine.run_turn(c.id, RunTurn::default()).expect("turn 1");
    engine
        .append_messages(c.id, &[ConversationMessage::user("q2")])
        .expect("append");
    engine.run_turn(c.id, RunTurn::default()).expect("turn 2");

    let exported = export_state_blob(&journal, c.id).expect("export");
    let blob = decode(&exported);
    assert_eq!(blob.provider, "scripted");
    assert_eq!(
        stored(&exported),
        vec![sys(&format!("{SUMMARY_PREFIX}S")), user("q2"), asst("a2")]
    );
    assert_eq!(blob.processed_length, 3);
    assert!(blob.messages.iter().all(|m| m.conversation_id.0.is_nil()));
    // An explicit provider wins.
    let other = export_state_blob_for(&journal, c.id, Some("openai")).expect("export");
    assert_eq!(decode(&other).provider, "openai");
}

#[test]
fn a_blob_that_does_not_decode_is_an_import_error_and_writes_nothing() {
    let journal = Journal::memory();
    let err = import_state_blob(&journal, b"{oops", &ImportStateBlob::default())
        .expect_err("invalid JSON");
    assert!(
        matches!(&err, Error::InvalidInput(r) if r.contains("invalid_json")),
        "{err}"
    );
    let options = ImportStateBlob {
        provider: Some("openai".into()),
        ..ImportStateBlob::default()
    };
    let err = import_state_blob(&journal, &rich_blob(), &options).expect_err("mismatch");
    assert!(
        matches!(&err, Error::InvalidInput(r) if r.contains("provider_mismatch")),
        "{err}"
    );
    let options = ImportStateBlob {
        max_bytes: 10,
        ..ImportStateBlob::default()
    };
    let err = import_state_blob(&journal, &rich_blob(), &options).expect_err("too large");
    assert!(
        matches!(&err, Error::InvalidInput(r) if r.contains("too_large")),
        "{err}"
    );
    assert!(journal.sessions().expect("sessions").is_empty());
}

#[test]
fn a_repeated_message_id_is_renewed_on_import() {
    let m = ConversationMessage::user("twice");
    let blob = append_to_state(None, "p", &[m.clone(), m]).state;
    let journal = Journal::memory();
    let id = import_state_blob(&journal, &blob, &ImportStateBlob::default()).expect("import");
    let exported = decode(&export_state_blob(&journal, id).expect("export"));
    assert_eq!(exported.messages.len(), 2);
    assert_ne!(exported.messages[0].id, exported.messages[1].id);
    assert_eq!(exported.messages[1].role, Role::User);
}

#[test]
fn export_needs_a_conversation_and_a_provider() {
    let journal = Journal::memory();
    let plain = journal.create_session().expect("session");
    let err = export_state_blob(&journal, plain.id()).expect_err("not a conversation");
    assert!(matches!(err, Error::NotAConversation(_)), "{err}");
    let store = Arc::new(JournalConversationStore::new(journal.clone()));
    let engine = ConversationEngine::new(ConversationEngineConfig::new("agent", store));
    let c = engine
        .create_conversation(CreateConversation {
            initial_messages: vec![ConversationMessage::user("q")],
            ..CreateConversation::default()
        })
        .expect("create");
    let err = export_state_blob(&journal, c.id).expect_err("no provider");
    assert!(
        matches!(&err, Error::InvalidInput(r) if r.contains("provider")),
        "{err}"
    );
    let blob = decode(&export_state_blob_for(&journal, c.id, Some("p")).expect("export"));
    assert_eq!(blob.processed_length, 1);
}

#[test]
fn cli_imports_and_exports_state_blobs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    let file = dir.path().join("chat.blob");
    let blob = rich_blob();
    std::fs::write(&file, &blob).expect("write");
    let out = run_cli(
        &db,
        &[
            "--json",
            "import",
            path_str(&file),
            "--format",
            "state-blob",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let id = printed["sessions"][0].as_str().expect("id").to_owned();
    assert!(
        printed["events"].as_u64().is_some_and(|n| n >= 8),
        "{printed}"
    );

    let original: Value = serde_json::from_slice(&blob).expect("JSON");
    let target = dir.path().join("out.blob");
    let out = run_cli(
        &db,
        &[
            "export",
            &id,
            "--format",
            "state-blob",
            "-o",
            path_str(&target),
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let written: Value =
        serde_json::from_slice(&std::fs::read(&target).expect("read")).expect("JSON");
    assert_eq!(written, original);
    let out = run_cli(&db, &["export", &id, "--format", "state-blob"]);
    assert!(out.status.success());
    let printed: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(printed, original);
    let out = run_cli(
        &db,
        &[
            "export",
            &id,
            "--format",
            "state-blob",
            "--provider",
            "openai",
        ],
    );
    let printed: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(printed["provider"], "openai");
    let out = run_cli(&db, &["export", &id, "--format", "state-blob", "--at", "3"]);
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn cli_refuses_a_bad_blob_and_creates_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    let bad = dir.path().join("bad.blob");
    std::fs::write(&bad, br#"{"version": 7, "provider": "p"}"#).expect("write");
    let out = run_cli(&db, &["import", path_str(&bad), "--format", "state-blob"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("unsupported_version"), "{stderr}");
    assert!(!db.exists(), "a refused blob creates no database");

    let good = dir.path().join("good.blob");
    std::fs::write(&good, rich_blob()).expect("write");
    let out = run_cli(
        &db,
        &[
            "import",
            path_str(&good),
            "--format",
            "state-blob",
            "--max-bytes",
            "64",
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--max-bytes"), "{stderr}");
    assert!(!db.exists());
}

#[test]
fn an_imported_blob_goes_on_with_the_engine_and_exports_again() {
    let journal = Journal::memory();
    let id =
        import_state_blob(&journal, &rich_blob(), &ImportStateBlob::default()).expect("import");
    let store = Arc::new(JournalConversationStore::new(journal.clone()));
    let adapter = Arc::new(ScriptedAdapter::new(vec![
        vec![],
        vec![],
        vec![ScriptedReply::text("From the engine.")],
    ]));
    let engine = ConversationEngine::new(
        ConversationEngineConfig::new("agent", store).provider(adapter, "scripted-1"),
    );
    engine
        .append_messages(id, &[ConversationMessage::user("Hello?")])
        .expect("append");
    let turn = engine.run_turn(id, RunTurn::default()).expect("turn");
    // The blob's leading system message is sent first, as chat_with_state did.
    let sent = &turn.provider_calls[0].sent_messages;
    assert_eq!(sent.len(), 7);
    let blob = decode(&export_state_blob(&journal, id).expect("export"));
    assert_eq!(blob.provider, "scripted");
    assert_eq!(blob.messages.len(), 8);
    assert_eq!(blob.processed_length, 8);
    assert_eq!(blob.messages[0].text(), "The user is on a train.");
    assert_eq!(blob.messages[7].text(), "From the engine.");
}
