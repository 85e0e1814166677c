//! Arbitrary bytes (lossy UTF-8) as OpenAI Responses API input items.
//!
//! Properties: the import never panics; whatever it accepts exports to
//! items that import again, and exporting those gives the same items (a
//! fixed point); its neutral fields export to chat-completions messages the
//! OpenAI validator accepts.
#![no_main]

use agent_journal::provider::validate;
use agent_journal::{ConversationFormat, EvaluationId};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let responses = ConversationFormat::OpenAiResponses;
    let eval = EvaluationId::from_bytes([7; 16]);
    let Ok(messages) = responses.parse(&text, eval, "ns", "key") else {
        return;
    };
    let items = responses.to_json(&messages);
    let again = responses
        .parse(&items.to_string(), eval, "ns", "key")
        .unwrap_or_else(|e| panic!("exported items do not import: {e}\n{items}"));
    assert_eq!(responses.to_json(&again), items, "export(import(export(x))) != export(x)");
    let chat = ConversationFormat::OpenAi.to_json(&messages);
    validate::openai(chat.as_array().expect("an array"))
        .unwrap_or_else(|e| panic!("invalid chat messages from Responses items: {e}\n{chat}"));
});
