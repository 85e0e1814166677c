//! Arbitrary bytes (lossy UTF-8) as JSONL InnerMessages.
//!
//! Properties: the import never panics; what it accepts writes back to JSONL
//! that imports to equal messages.
#![no_main]

use agent_journal::EvaluationId;
use agent_journal::provider::ConversationFormat;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let jsonl = ConversationFormat::Jsonl;
    let eval = EvaluationId::from_bytes([7; 16]);
    let Ok(messages) = jsonl.parse(&text, eval, "", "") else {
        return;
    };
    let out = jsonl.to_text(&messages);
    let back = jsonl
        .parse(&out, eval, "", "")
        .unwrap_or_else(|e| panic!("to_text wrote what parse refuses: {e}\n{out}"));
    assert_eq!(back, messages, "parse(to_text(m)) != m");
});
