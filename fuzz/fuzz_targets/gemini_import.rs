//! Arbitrary bytes (lossy UTF-8) as a Gemini `generateContent` request.
//!
//! Properties: the import never panics; whatever it accepts exports to a
//! request that imports again, and exporting that gives the same request
//! (a fixed point); its neutral fields export to chat-completions messages
//! the OpenAI validator accepts.
#![no_main]

use agent_journal::provider::validate;
use agent_journal::{ConversationFormat, EvaluationId};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let format = ConversationFormat::Gemini;
    let eval = EvaluationId::from_bytes([7; 16]);
    let Ok(messages) = format.parse(&text, eval, "ns", "key") else {
        return;
    };
    let exported = format.to_json(&messages);
    let again = format
        .parse(&exported.to_string(), eval, "ns", "key")
        .unwrap_or_else(|e| panic!("an exported request does not import: {e}\n{exported}"));
    assert_eq!(format.to_json(&again), exported, "export(import(export(x))) != export(x)");
    let chat = ConversationFormat::OpenAi.to_json(&messages);
    validate::openai(chat.as_array().expect("an array"))
        .unwrap_or_else(|e| panic!("invalid chat messages: {e}\n{chat}"));
});
