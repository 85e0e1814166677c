//! A conversation file read a message at a time (`ConversationFile`,
//! `Journal::import_conversation_file`) against the import of its text
//! (`Journal::import_conversation`): the first byte picks the format, the
//! rest (valid UTF-8) is the file.
//!
//! Properties: neither panics; the file is refused exactly when the text
//! is, with the same message (for invalid JSON, the same error: serde_json
//! places some a character apart when it reads a file); an
//! accepted one makes the same session (its events, up to the ids and
//! times each import draws anew).
#![no_main]

use agent_journal::{Error, Event, Journal, SessionId};
use agent_journal::provider::ConversationFormat;
use agent_journal::transfer::ConversationFile;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

const FORMATS: [ConversationFormat; 6] = [
    ConversationFormat::OpenAi,
    ConversationFormat::Anthropic,
    ConversationFormat::Jsonl,
    ConversationFormat::OpenAiResponses,
    ConversationFormat::Ollama,
    ConversationFormat::Gemini,
];

fn reason(e: Error) -> String {
    match e {
        Error::InvalidInput(r) => r,
        other => panic!("not an input error: {other}"),
    }
}

/// The session's events without what each import draws anew.
fn events(j: &Journal, id: SessionId) -> Vec<Value> {
    let events = j.session(id).expect("session").events(..).expect("events");
    let ids: Vec<String> = events
        .iter()
        .filter_map(|e| match &e.event {
            Event::Message(m) => Some(m.message_id.to_string()),
            _ => None,
        })
        .collect();
    events
        .iter()
        .map(|e| {
            let mut v = match &e.event {
                Event::Message(m) => serde_json::to_value(m).expect("json"),
                Event::EvaluationStarted { prompt_ns, prompt_key, adapter, .. } => {
                    serde_json::json!([prompt_ns, prompt_key, adapter])
                }
                Event::Custom { kind, payload } => {
                    let mut p: Value = serde_json::from_slice(payload).expect("json");
                    if let Some(o) = p.as_object_mut() {
                        o.remove("evaluation");
                    }
                    serde_json::json!([kind, p])
                }
                other => serde_json::to_value(other).expect("json"),
            };
            if let Some(o) = v.as_object_mut() {
                for k in ["message_id", "created_at", "evaluation_id"] {
                    o.remove(k);
                }
                if let Some(Value::String(p)) = o.get_mut("provider_payload") {
                    for (i, id) in ids.iter().enumerate() {
                        *p = p.replace(id.as_str(), &format!("<message {i}>"));
                    }
                }
            }
            v
        })
        .collect()
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let format = FORMATS[usize::from(pick) % FORMATS.len()];
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("conversation");
    std::fs::write(&path, text).expect("write");
    let whole = Journal::memory();
    let by_text = whole.import_conversation(text, format, "ns", "key");
    let by_file = ConversationFile::open(&path, format, 1 << 20);
    match (by_text, by_file) {
        (Err(a), Err(b)) => {
            let (a, b) = (reason(a), reason(b));
            // serde_json places some errors a character apart (a column,
            // or the next line) when it reads from a file rather than a
            // string: the same error is the same refusal.
            let json = |r: &str| {
                r.strip_prefix("invalid JSON at line ")
                    .and_then(|r| r.split_once(": "))
                    .map(|(_, what)| what.split(" at line ").next().unwrap_or("").to_owned())
            };
            match (json(&a), json(&b)) {
                (Some(x), Some(y)) => assert_eq!(x, y, "{format:?}: {a} vs {b}: {text}"),
                _ => assert_eq!(a, b, "{format:?}: {text}"),
            }
        }
        (Ok(session), Ok(file)) => {
            let streamed = Journal::memory();
            let (id, n) = streamed
                .import_conversation_file(&file, "ns", "key")
                .expect("a file that opened imports");
            assert_eq!(n, session.head(), "{format:?}: {text}");
            assert_eq!(events(&whole, session.id()), events(&streamed, id), "{format:?}: {text}");
        }
        (a, b) => panic!(
            "{format:?}: the text {} and the file {}: {text}",
            a.map(|_| "imports".to_owned()).unwrap_or_else(|e| format!("is refused ({e})")),
            b.map(|_| "imports".to_owned()).unwrap_or_else(|e| format!("is refused ({e})")),
        ),
    }
});
