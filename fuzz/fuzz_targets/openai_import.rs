//! Arbitrary bytes (lossy UTF-8) as an OpenAI chat-completions message list.
//!
//! Properties: the import never panics; whatever it accepts rebuilds into a
//! history the OpenAI validator accepts, and exporting what that history
//! imports to gives the same history (a fixed point).
#![no_main]

use agent_journal::provider::validate;
use agent_journal::EvaluationId;
use agent_journal::provider::ConversationFormat;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let openai = ConversationFormat::OpenAi;
    let eval = EvaluationId::from_bytes([7; 16]);
    let Ok(messages) = openai.parse(&text, eval, "ns", "key") else {
        return;
    };
    let rebuilt = openai.to_json(&messages);
    let list = rebuilt.as_array().expect("OpenAI messages are an array");
    validate::openai(list).unwrap_or_else(|e| panic!("invalid rebuilt history: {e}\n{rebuilt}"));
    let again = openai
        .parse(&rebuilt.to_string(), eval, "ns", "key")
        .unwrap_or_else(|e| panic!("a rebuilt history does not import: {e}\n{rebuilt}"));
    assert_eq!(openai.to_json(&again), rebuilt, "export(import(export(x))) != export(x)");
});
