//! Graceful degradation: a state that does not decode starts a fresh
//! conversation, flagged, never an error.

use agent_journal::conversation::ConversationMessage;
use agent_journal::conversation::state_blob::{
    Degradation, StateBlob, StateChatOptions, append_to_state, chat_with_state,
};
use serde_json::json;

use super::{Recorder, asst, stored, sys, turn, user};

/// A good state of provider `p`, two messages.
fn good_state(provider: &str) -> Vec<u8> {
    turn(&Recorder::new(provider), None, "Earlier").state
}

/// `chat_with_state` with `state` on provider `p` gives a fresh conversation
/// flagged as `kind`: the adapter sees only this call's messages.
fn assert_fresh(state: &[u8], max_state_bytes: usize, kind: &str) -> Degradation {
    let adapter = Recorder::new("p");
    let mut options = StateChatOptions::new("m").system("Be brief.").user("Hi");
    options.max_state_bytes = max_state_bytes;
    let r = chat_with_state(&adapter, Some(state), &options).expect("never an error");
    let d = r.degraded.clone().expect("flagged");
    assert_eq!(d.kind(), kind, "{d}");
    assert_eq!(adapter.last(), vec![sys("Be brief."), user("Hi")]);
    assert_eq!(stored(&r.state), vec![user("Hi"), asst("answer 1")]);
    assert_eq!(r.processed_length, 2);
    // append_to_state degrades the same way (at its default limit).
    if max_state_bytes == usize::MAX {
        let u = append_to_state(Some(state), "p", &[ConversationMessage::user("x")]);
        assert_eq!(u.degraded.as_ref().map(Degradation::kind), Some(kind));
        assert_eq!(stored(&u.state), vec![user("x")]);
    }
    d
}

#[test]
fn invalid_json_starts_a_fresh_conversation() {
    assert_fresh(b"{not json", usize::MAX, "invalid_json");
    assert_fresh(b"[1, 2, 3]", usize::MAX, "invalid_json");
    assert_fresh(&[0xff, 0xfe, 0x00], usize::MAX, "invalid_json");
    let no_messages = json!({"version": 1, "provider": "p", "processed_length": 0});
    assert_fresh(
        no_messages.to_string().as_bytes(),
        usize::MAX,
        "invalid_json",
    );
    // Nesting past serde_json's limit is refused, not a stack overflow.
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    assert_fresh(deep.as_bytes(), usize::MAX, "invalid_json");
}

#[test]
fn an_unsupported_version_starts_a_fresh_conversation() {
    let mut doc: serde_json::Value = serde_json::from_slice(&good_state("p")).expect("JSON");
    doc["version"] = json!(2);
    let d = assert_fresh(
        doc.to_string().as_bytes(),
        usize::MAX,
        "unsupported_version",
    );
    assert_eq!(d, Degradation::UnsupportedVersion { found: "2".into() });
    doc.as_object_mut().expect("object").remove("version");
    assert_fresh(
        doc.to_string().as_bytes(),
        usize::MAX,
        "unsupported_version",
    );
}

#[test]
fn a_provider_mismatch_starts_a_fresh_conversation() {
    let d = assert_fresh(&good_state("anthropic"), usize::MAX, "provider_mismatch");
    assert_eq!(
        d,
        Degradation::ProviderMismatch {
            expected: "p".into(),
            found: "anthropic".into()
        }
    );
}

#[test]
fn a_corrupted_message_starts_a_fresh_conversation() {
    let mut doc: serde_json::Value = serde_json::from_slice(&good_state("p")).expect("JSON");
    doc["messages"][1]["role"] = json!(42);
    let d = assert_fresh(doc.to_string().as_bytes(), usize::MAX, "corrupted_message");
    assert!(
        matches!(d, Degradation::CorruptedMessage { index: 1, .. }),
        "{d}"
    );
    doc["messages"][1] = json!("just text");
    assert_fresh(doc.to_string().as_bytes(), usize::MAX, "corrupted_message");
    doc["messages"][1] = json!({"content": "no role"});
    assert_fresh(doc.to_string().as_bytes(), usize::MAX, "corrupted_message");
    // A wire message without our ids is not corrupted (the spec's shape):
    // it gets a fresh id. A role this version does not know is kept as it
    // came.
    doc["messages"][1] = json!({"role": "wizard", "content": "no id, no time"});
    let blob = StateBlob::decode(doc.to_string().as_bytes(), Some("p"), usize::MAX)
        .expect("a wire message decodes");
    assert_eq!(blob.to_json()["messages"][1], doc["messages"][1]);
}

#[test]
fn a_state_over_the_limit_starts_a_fresh_conversation() {
    let state = good_state("p");
    let d = assert_fresh(&state, 100, "too_large");
    assert_eq!(
        d,
        Degradation::TooLarge {
            size: state.len() as u64,
            limit: 100
        }
    );
    // The same state within the limit decodes.
    assert!(StateBlob::decode(&state, Some("p"), state.len()).is_ok());
}
