//! Arbitrary bytes (lossy UTF-8) as an Anthropic Messages request.
//!
//! Properties: the import never panics; whatever it accepts rebuilds into a
//! request the Anthropic validator accepts, and exporting what that request
//! imports to gives the same request (a fixed point).
#![no_main]

use agent_journal::provider::validate;
use agent_journal::EvaluationId;
use agent_journal::provider::ConversationFormat;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let anthropic = ConversationFormat::Anthropic;
    let eval = EvaluationId::from_bytes([7; 16]);
    let Ok(messages) = anthropic.parse(&text, eval, "ns", "key") else {
        return;
    };
    let rebuilt = anthropic.to_json(&messages);
    validate::anthropic(&rebuilt).unwrap_or_else(|e| panic!("invalid rebuilt request: {e}\n{rebuilt}"));
    let again = anthropic
        .parse(&rebuilt.to_string(), eval, "ns", "key")
        .unwrap_or_else(|e| panic!("a rebuilt request does not import: {e}\n{rebuilt}"));
    assert_eq!(anthropic.to_json(&again), rebuilt, "export(import(export(x))) != export(x)");
});
