//! Arbitrary bytes (lossy UTF-8) as an OpenAI chat-completions message list.
//!
//! Properties: the import never panics; whatever it accepts rebuilds into a
//! history the OpenAI validator accepts, and exporting what that history
//! imports to gives the same history (a fixed point).
#![no_main]

use agent_journal::provider::{openai, validate};
use agent_journal::EvaluationId;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let Ok(value) = serde_json::from_str::<serde_json::Value>(&text) else {
        return;
    };
    let eval = EvaluationId::from_bytes([7; 16]);
    let Ok(messages) = openai::from_messages(&value, eval, "ns", "key") else {
        return;
    };
    let rebuilt = openai::to_messages(&messages);
    validate::openai(&rebuilt).unwrap_or_else(|e| panic!("invalid rebuilt history: {e}\n{rebuilt:?}"));
    let again = openai::from_messages(&serde_json::Value::Array(rebuilt.clone()), eval, "ns", "key")
        .unwrap_or_else(|e| panic!("a rebuilt history does not import: {e}\n{rebuilt:?}"));
    let rebuilt2 = openai::to_messages(&again);
    assert_eq!(rebuilt2, rebuilt, "export(import(export(x))) != export(x)");
});
