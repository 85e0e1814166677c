//! Issue 38 items 3 and 4: a blob's messages are the provider's raw wire
//! messages (goaitools' format), the spec's own example is read and
//! continued, message records are refused, Anthropic
//! thinking blocks survive a round trip, and only a natural stop compacts.

use std::path::Path;
use std::sync::Arc;

use agent_journal::Role;
use agent_journal::conversation::state_blob::{StateBlob, StateChatOptions, chat_with_state};
use agent_journal::conversation::{Compactor, MessageLimitCompactor};
use serde_json::{Value, json};

use super::{Recorder, Reply, asst, decode, stored, user};

fn fixture(name: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/state_blob")
        .join(name);
    std::fs::read(path).expect("fixture")
}

fn json_of(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes).expect("JSON")
}

/// The spec's example blob (`{"version": 1, "provider": "openai",
/// "processed_length": 2, "messages": [{"role": "user", ...}, {"role":
/// "assistant", ...}]}`) was refused with "missing field `id`".
#[test]
fn the_spec_example_blob_is_read_and_continued() {
    let example = fixture("goaitools_example.json");
    let original = json_of(&example);
    let blob = StateBlob::decode(&example, Some("openai"), usize::MAX).expect("decodes");
    assert_eq!(blob.messages.len(), 2);
    assert_eq!(blob.processed_length, 2);
    assert_ne!(blob.messages[0].id, blob.messages[1].id, "ids are minted");

    let adapter = Recorder::with("openai", vec![Reply::text("It starts at 7:30pm.")]);
    let r = chat_with_state(
        &adapter,
        Some(&example),
        &StateChatOptions::new("gpt-4o")
            .system("You are a guide.")
            .user("When does it start?"),
    )
    .expect("chat");
    assert!(r.degraded.is_none(), "{:?}", r.degraded);
    let sent = adapter.last();
    let texts = |i: usize| {
        original["messages"][i]["content"]
            .as_str()
            .unwrap_or("")
            .to_owned()
    };
    assert_eq!(
        sent[1..3],
        [(Role::User, texts(0)), (Role::Assistant, texts(1))]
    );
    assert_eq!(sent.len(), 4, "system, the example's two, the question");
    // The new state holds the example's messages exactly, then the new ones,
    // as wire messages; our ids are in the `agent_journal` member.
    let doc = json_of(&r.state);
    assert_eq!(doc["messages"][0], original["messages"][0]);
    assert_eq!(doc["messages"][1], original["messages"][1]);
    assert_eq!(
        doc["messages"][3],
        json!({"role": "assistant", "content": "It starts at 7:30pm."})
    );
    assert_eq!(doc["processed_length"], 4);
    assert_eq!(
        doc["agent_journal"]["messages"].as_array().map(Vec::len),
        Some(4)
    );
    // Its ids are kept from now on.
    let again = decode(&r.state);
    assert_eq!(
        again.messages[0].id,
        decode(&r.state).messages[0].id,
        "ids are read back"
    );
}

/// A blob whose messages are our records (`ConversationMessage`, as an
/// unreleased development build wrote them) rather than wire messages is
/// refused as a corrupted message, never misread.
#[test]
fn a_blob_of_message_records_is_refused_not_misread() {
    let records = json!({"version": 1, "provider": "openai", "processed_length": 1, "messages": [
        {"content": "What is in /tmp?", "conversation_id": "00000000-0000-0000-0000-000000000000",
         "created_at": "2026-11-23T21:45:28.085441Z", "id": "01a21ee8-0000-7000-8000-000000000001",
         "metadata": {}, "name": null, "provider_message_id": null, "role": "user",
         "tool_call_id": null, "tool_calls": [], "turn_id": null}]});
    let bytes = serde_json::to_vec(&records).expect("JSON");
    let e = StateBlob::decode(&bytes, Some("openai"), usize::MAX).expect_err("refused");
    assert!(
        matches!(e, agent_journal::conversation::state_blob::Degradation::CorruptedMessage { index: 0, ref reason } if reason.contains("record")),
        "{e:?}"
    );
}

/// An extended-thinking tool loop, as Anthropic's Messages API has it.
pub fn thinking_blob() -> Value {
    json!({"version": 1, "provider": "anthropic", "processed_length": 5, "messages": [
        {"role": "user", "content": "What is 17 * 23, then add 5?"},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "I should multiply first with the tool.",
             "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds+sig=="},
            {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpPkNRj2YfWXGmKDxH4mPnZ5sQ7vB5URj2pLmN0"},
            {"type": "text", "text": "Let me compute that."},
            {"type": "tool_use", "id": "toolu_01A", "name": "multiply", "input": {"a": 17, "b": 23}}
        ]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01A", "content": "391"}]},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "Now add 5.", "signature": "Sig2=="},
            {"type": "tool_use", "id": "toolu_01B", "name": "add", "input": {"a": 391, "b": 5}}
        ]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01B", "content": "396"}]}
    ]})
}

#[test]
fn anthropic_thinking_blocks_round_trip_and_are_sent_unchanged() {
    let original = thinking_blob();
    let bytes = original.to_string().into_bytes();
    let blob = StateBlob::decode(&bytes, Some("anthropic"), usize::MAX).expect("decodes");
    assert_eq!(blob.messages[1].tool_calls.len(), 1);
    assert_eq!(blob.messages[2].role, Role::Tool, "a tool result");
    let doc = blob.to_json();
    assert_eq!(doc["messages"], original["messages"], "every block kept");
    // Twice round: the same again.
    let twice = StateBlob::decode(&blob.encode(), None, usize::MAX).expect("decodes");
    assert_eq!(twice.to_json(), doc);

    // Continued: what the adapter receives carries the blocks unchanged,
    // and the new state keeps them.
    let adapter = Recorder::with("anthropic", vec![Reply::text("396.").finish("end_turn")]);
    let r =
        chat_with_state(&adapter, Some(&bytes), &StateChatOptions::new("claude")).expect("chat");
    assert!(r.degraded.is_none());
    let sent = adapter.last();
    assert_eq!(sent[1].1, original["messages"][1]["content"].to_string());
    assert_eq!(sent[3].1, original["messages"][3]["content"].to_string());
    let doc = json_of(&r.state);
    for i in 0..5 {
        assert_eq!(doc["messages"][i], original["messages"][i], "message {i}");
    }
}

/// Item 4 in blobs: a `max_tokens` ending, a null reason and no reason do
/// not compact; `end_turn` and `stop` do.
#[test]
fn a_blob_is_compacted_only_after_a_natural_stop() {
    for (finish, compacts) in [
        ("max_tokens", false),
        ("length", false),
        ("<null>", false),
        ("<none>", false),
        ("end_turn", true),
        ("stop", true),
    ] {
        let adapter = Recorder::with(
            "p",
            vec![Reply::text("a1"), Reply::text("a2").finish(finish)],
        );
        let c: Arc<dyn Compactor> = Arc::new(MessageLimitCompactor { max_messages: 2 });
        let first =
            chat_with_state(&adapter, None, &StateChatOptions::new("m").user("q1")).expect("chat");
        let r = chat_with_state(
            &adapter,
            Some(&first.state),
            &StateChatOptions::new("m").user("q2").compactor(c),
        )
        .expect("chat");
        assert_eq!(r.compaction.is_some(), compacts, "{finish}");
        let expected = if compacts {
            vec![user("q2"), asst("a2")]
        } else {
            vec![user("q1"), asst("a1"), user("q2"), asst("a2")]
        };
        assert_eq!(stored(&r.state), expected, "{finish}");
    }
}
